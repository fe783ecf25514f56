//! Honest outcomes (issue 30), on a real systemd 252 in the sandbox with
//! its system bus: a start counts only when the unit stays up through the
//! settle window; a crash loop is a failure and is never started; failures
//! say why in systemd's words and with the unit's own last journal lines;
//! a unit systemd started as another's dependency is `unchanged`.
//!
//! Where a race is possible (a daemon dying microseconds or half a second
//! after its job ended), each case runs three times, and every run must
//! be a failure: no false success.

use policy_host_e2e::machine::{actions, errors, machine, mutating_calls, resource, Machine, Run};
use policy_host_e2e::requires::e2e_test;
use serde_json::Value;

/// A manifest with every name `ensure: running`.
fn running(names: &[&str]) -> String {
    let mut manifest = String::from("- service:\n");
    for name in names {
        manifest.push_str(&format!("    - {name}:\n        ensure: running\n"));
    }
    manifest
}

/// A unit file with `service` as its `[Service]` section.
fn unit(name: &str, service: &str) -> (String, String) {
    (
        name.to_owned(),
        format!("[Unit]\nDescription={name}\n\n[Service]\n{service}\n"),
    )
}

/// Runs `names` to running with `--json --detailed-exitcodes`; the report.
fn converge(m: &Machine, names: &[&str]) -> (Run, Value) {
    let run = m.run(&running(names), &["--json", "--detailed-exitcodes"]);
    let report = run.report();
    assert_eq!(report["provider"]["status_reader"], "dbus", "{run:?}");
    (run, report)
}

/// The one resource of `report`, checked to have failed its start with
/// nothing counted as done: no false success.
fn failed_start<'a>(run: &Run, report: &'a Value, name: &str) -> &'a Value {
    assert_eq!(run.code, 4, "a failure and no change: {run:?}");
    let event = resource(report, &format!("service#{name}"));
    assert_eq!(event["failed"], true, "{event:#}");
    assert_eq!(event["changed"], false, "{event:#}");
    assert!(actions(event).is_empty(), "{event:#}");
    event
}

#[e2e_test(requires = "root, systemd")]
fn a_daemon_that_exits_at_once_or_half_a_second_later_is_a_failed_start() {
    let m = machine();
    m.install_units(&[
        unit("ho-false", "ExecStart=/bin/false"),
        unit(
            "ho-late",
            "ExecStart=/bin/sh -c 'echo starting; sleep 0.5; echo \"fatal: \
             no config\"; exit 3'",
        ),
    ]);
    for attempt in 1..=3 {
        let (run, report) = converge(&m, &["ho-false"]);
        let event = failed_start(&run, &report, "ho-false");
        let why = errors(event);
        assert!(
            why.contains("ho-false.service did not stay up")
                && why.contains("Result: exit-code")
                && why.contains("main process exited with status 1"),
            "attempt {attempt}: {event:#}"
        );

        let (run, report) = converge(&m, &["ho-late"]);
        let event = failed_start(&run, &report, "ho-late");
        let why = errors(event);
        assert!(
            why.contains("ho-late.service did not stay up")
                && why.contains("failed (failed)")
                && why.contains("main process exited with status 3"),
            "attempt {attempt}: {event:#}"
        );
        // The unit's own last words, read by the host from the journal.
        let journal: Vec<&str> = event["journal"]
            .as_array()
            .unwrap_or_else(|| panic!("no journal lines: {event:#}"))
            .iter()
            .map(|l| l.as_str().unwrap())
            .collect();
        assert!(
            journal.contains(&"fatal: no config"),
            "attempt {attempt}: {journal:?}"
        );
        // The host's record of the start says the same.
        let start = report["calls"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["operation"] == "start")
            .unwrap();
        assert_eq!(start["outcome"], "command-failed", "{start:#}");
    }
    assert_eq!(m.sandbox.is_active("ho-late"), "failed");
}

#[e2e_test(requires = "root, systemd")]
fn a_crash_loop_is_a_failure_and_a_second_run_makes_no_start() {
    let m = machine();
    m.install_units(&[
        // Restarted by systemd every 0.4 s (0.3 s up, 0.1 s RestartSec).
        unit(
            "ho-loop",
            "ExecStart=/bin/sh -c 'sleep 0.3; exit 3'\nRestart=always\nRestartSec=100ms\n\
             StartLimitIntervalSec=0",
        ),
        // Dies after 0.3 s, restarted only after 30 s: in between, systemd
        // is restarting it (`activating (auto-restart)`).
        unit(
            "ho-slowloop",
            "ExecStart=/bin/sh -c 'sleep 0.3; exit 3'\nRestart=always\nRestartSec=30\n\
             StartLimitIntervalSec=0",
        ),
    ]);
    // Judged at its first death (systemd restarting it), or after
    // systemd's restarts: never a success.
    let (run, report) = converge(&m, &["ho-loop"]);
    let event = failed_start(&run, &report, "ho-loop");
    let why = errors(event);
    assert!(
        why.contains("systemd is restarting it") || why.contains("by systemd since start"),
        "{event:#}"
    );
    for attempt in 1..=3 {
        // Up between two crashes, or between two runs of systemd's: either
        // way no start of the host's.
        let (run, report) = converge(&m, &["ho-loop"]);
        assert!(
            mutating_calls(&report).is_empty(),
            "attempt {attempt}: {run:?}"
        );
    }

    let (run, report) = converge(&m, &["ho-slowloop"]);
    let event = failed_start(&run, &report, "ho-slowloop");
    assert!(
        errors(event).contains("systemd is restarting it"),
        "{event:#}"
    );
    for attempt in 1..=3 {
        let (run, report) = converge(&m, &["ho-slowloop"]);
        assert_eq!(run.code, 4, "attempt {attempt}: {run:?}");
        assert!(mutating_calls(&report).is_empty(), "{report:#}");
        let event = resource(&report, "service#ho-slowloop");
        let why = errors(event);
        assert!(
            why.contains("is in a crash loop") && why.contains("main process exited with status 3"),
            "attempt {attempt}: {event:#}"
        );
    }
    // `ensure: stopped` ends the loop.
    let run = m.run(
        "- service:\n    - ho-slowloop:\n        ensure: stopped\n",
        &["--json"],
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        actions(resource(&run.report(), "service#ho-slowloop")),
        ["stopped"]
    );
    assert_eq!(m.sandbox.is_active("ho-slowloop"), "inactive");
}

#[e2e_test(requires = "root, systemd")]
fn notify_and_forking_daemons_that_die_after_ready_are_failed_and_a_healthy_one_started() {
    let m = machine();
    m.install_units(&[
        unit(
            "ho-notify",
            "Type=notify\nNotifyAccess=all\n\
             ExecStart=/bin/sh -c 'systemd-notify --ready; sleep 0.3; exit 2'",
        ),
        unit(
            "ho-forking",
            "Type=forking\nExecStart=/bin/sh -c '/bin/sleep 0.3 & exit 0'",
        ),
        unit("ho-healthy", "ExecStart=/bin/sleep infinity"),
    ]);
    for attempt in 1..=3 {
        let (run, report) = converge(&m, &["ho-notify"]);
        let event = failed_start(&run, &report, "ho-notify");
        assert!(
            errors(event).contains("ho-notify.service did not stay up"),
            "attempt {attempt}: {event:#}"
        );
        let (run, report) = converge(&m, &["ho-forking"]);
        let event = failed_start(&run, &report, "ho-forking");
        assert!(
            errors(event).contains("ho-forking.service did not stay up"),
            "attempt {attempt}: {event:#}"
        );
    }
    let (run, report) = converge(&m, &["ho-healthy"]);
    assert_eq!(run.code, 2, "changes, no failure: {run:?}");
    assert_eq!(
        actions(resource(&report, "service#ho-healthy")),
        ["started"]
    );
    assert_eq!(m.sandbox.is_active("ho-healthy"), "active");
}

#[e2e_test(requires = "root, systemd")]
fn what_a_dying_unit_printed_is_escaped_on_the_terminal() {
    let m = machine();
    m.install_units(&[unit(
        "ho-evil",
        "ExecStart=/bin/sh -c 'printf \"evil \\033[2J\\033]0;owned\\007 line\\n\"; exit 1'",
    )]);
    let run = m.run(&running(&["ho-evil"]), &[]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stdout.contains("journal: evil"), "{run:?}");
    assert!(
        !run.stdout.contains('\u{1b}') && !run.stdout.contains('\u{7}'),
        "a raw escape byte reached the terminal: {:?}",
        run.stdout
    );
    // JSON carries the text exactly (as JSON escapes it).
    let (_, report) = converge(&m, &["ho-evil"]);
    let event = resource(&report, "service#ho-evil");
    assert!(
        event["journal"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l.as_str().unwrap().contains("\u{1b}[2J")),
        "{event:#}"
    );
}

#[e2e_test(requires = "root, systemd")]
fn a_dependency_systemd_starts_is_unchanged_with_one_start_in_total() {
    let m = machine();
    let slow_dep = "ExecStartPre=/bin/sleep 0.5\nExecStart=/bin/sleep infinity";
    m.install_units(&[
        (
            "ho-app".to_owned(),
            "[Unit]\nDescription=app\nRequires=ho-required.service\nWants=ho-wanted.service\n\n\
             [Service]\nExecStart=/bin/sleep infinity\n"
                .to_owned(),
        ),
        unit("ho-required", slow_dep),
        unit("ho-wanted", slow_dep),
    ]);
    for attempt in 1..=3 {
        let (run, report) = converge(&m, &["ho-app", "ho-required", "ho-wanted"]);
        assert_eq!(run.code, 2, "attempt {attempt}: {run:?}");
        assert_eq!(
            mutating_calls(&report),
            ["start ho-app"],
            "attempt {attempt}: one start in total: {report:#}"
        );
        assert_eq!(actions(resource(&report, "service#ho-app")), ["started"]);
        for dep in ["ho-required", "ho-wanted"] {
            let event = resource(&report, &format!("service#{dep}"));
            assert_eq!(event["changed"], false, "attempt {attempt}: {event:#}");
            assert_eq!(event["failed"], false, "attempt {attempt}: {event:#}");
            assert_eq!(m.sandbox.is_active(dep), "active");
        }
        m.sandbox
            .systemctl_ok(&["stop", "--", "ho-app", "ho-required", "ho-wanted"]);
    }
}
