//! Converging in parallel on systemd's job engine (issue 24), on a real
//! systemd 252 in the sandbox with its system bus: start, stop and restart
//! go over D-Bus as jobs, at most `jobs` pending at once. Parallelism is
//! asserted from systemd's own timestamps (every unit began activating
//! before any finished), not from a stopwatch; the differential test runs
//! the same scenario over D-Bus, with `--jobs 1` and with `--provider
//! systemctl`, and gets the same events and final states.

use policy_host_e2e::machine::{actions, errors, machine, resource, Machine, Run};
use policy_host_e2e::requires::e2e_test;
use serde_json::Value;

/// A service whose start takes `start_secs` (`ExecStartPre=/bin/sleep`),
/// then runs; `extra` goes into its `[Service]` section.
fn slow_service(name: &str, start_secs: &str, extra: &str) -> (String, String) {
    (
        name.to_owned(),
        format!(
            "[Unit]\nDescription={name}\n\n[Service]\nExecStartPre=/bin/sleep {start_secs}\n\
             ExecStart=/bin/sleep infinity\n{extra}\n\n[Install]\nWantedBy=multi-user.target\n"
        ),
    )
}

/// A manifest with every name `ensure: running`, `enable: true`.
fn running_and_enabled(names: &[String]) -> String {
    let mut manifest = String::from("- service:\n");
    for name in names {
        manifest.push_str(&format!(
            "    - {name}:\n        ensure: running\n        enable: true\n"
        ));
    }
    manifest
}

/// The report of a run, checked to have read and changed over D-Bus.
fn over_dbus(run: &Run) -> Value {
    let report = run.report();
    assert_eq!(report["provider"]["status_reader"], "dbus", "{run:?}");
    report
}

/// Per unit, when systemd began and when it ended its change, as the
/// monotonic timestamp properties `began` and `ended` say (µs since boot).
fn windows<S: AsRef<str>>(m: &Machine, units: &[S], began: &str, ended: &str) -> Vec<(u64, u64)> {
    units
        .iter()
        .map(|n| {
            (
                m.monotonic(n.as_ref(), began),
                m.monotonic(n.as_ref(), ended),
            )
        })
        .collect()
}

/// Whether every change began before any ended: they ran side by side.
fn side_by_side(windows: &[(u64, u64)]) -> bool {
    let last_began = windows.iter().map(|w| w.0).max().unwrap_or(0);
    let first_ended = windows.iter().map(|w| w.1).min().unwrap_or(0);
    last_began < first_ended
}

/// The `start` call records of the report, by service.
fn start_records(report: &Value) -> Vec<&Value> {
    report["calls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["operation"] == "start")
        .collect()
}

#[e2e_test(requires = "root, systemd")]
fn twenty_slow_units_start_side_by_side_and_a_failing_one_fails_alone() {
    let m = machine();
    let names: Vec<String> = (1..=20).map(|i| format!("pj-slow{i:02}")).collect();
    let mut units: Vec<_> = names.iter().map(|n| slow_service(n, "1", "")).collect();
    units.push((
        "pj-broken".to_owned(),
        "[Unit]\nDescription=fails to start\n\n[Service]\nExecStartPre=/bin/false\n\
         ExecStart=/bin/sleep infinity\n\n[Install]\nWantedBy=multi-user.target\n"
            .to_owned(),
    ));
    m.install_units(&units);
    let mut declared = names.clone();
    declared.insert(10, "pj-broken".to_owned());

    let run = m.run(&running_and_enabled(&declared), &["--json"]);
    let report = over_dbus(&run);
    assert_ne!(run.code, 0, "a resource failed: {run:?}");

    // Every slow unit began activating before any of them was active: the
    // twenty one-second starts ran side by side, not one after another.
    let starts = windows(
        &m,
        &names,
        "InactiveExitTimestampMonotonic",
        "ActiveEnterTimestampMonotonic",
    );
    assert!(
        side_by_side(&starts),
        "the starts did not overlap: {starts:?}"
    );
    for name in &names {
        assert_eq!(m.state(name), ("active".into(), "enabled".into()), "{name}");
        let event = resource(&report, &format!("service#{name}"));
        assert_eq!(actions(event), ["started", "enabled"], "{event:#}");
    }
    // The host's record of each start runs to the job's end.
    for call in start_records(&report) {
        let ms = call["duration_ms"].as_f64().unwrap();
        if call["service"] == "pj-broken" {
            assert_eq!(call["outcome"], "command-failed", "{call:#}");
        } else {
            assert_eq!(call["outcome"], "ok", "{call:#}");
            assert!(
                ms >= 900.0,
                "a one-second start recorded as {ms} ms: {call:#}"
            );
        }
    }

    // The failing start fails that resource alone, with systemd's reason,
    // and its enablement is not made (as after a failing systemctl start).
    let broken = resource(&report, "service#pj-broken");
    assert_eq!(broken["failed"], true);
    assert!(actions(broken).is_empty(), "{broken:#}");
    assert!(
        errors(broken).contains(
            "Job for pj-broken.service failed because the control process exited with error code."
        ),
        "{broken:#}"
    );
    assert_eq!(m.sandbox.is_active("pj-broken"), "failed");
    assert_eq!(m.sandbox.is_enabled("pj-broken"), "disabled");
}

#[e2e_test(requires = "root, systemd")]
fn a_subscriber_restarts_after_its_service_is_up_and_stops_run_side_by_side() {
    let m = machine();
    let stoppers: Vec<String> = (1..=6).map(|i| format!("pj-stop{i}")).collect();
    let mut units: Vec<_> = stoppers
        .iter()
        .map(|n| slow_service(n, "0", "ExecStop=/bin/sleep 1"))
        .collect();
    units.push(slow_service("pj-db", "2", ""));
    units.push(slow_service("pj-app", "0", ""));
    // Holds the stopped units loaded (systemd unloads an inactive unit no
    // one references, and its timestamps with it); starting it starts them.
    let wants: Vec<String> = stoppers.iter().map(|n| format!("{n}.service")).collect();
    units.push((
        "pj-holder".to_owned(),
        format!(
            "[Unit]\nDescription=holds the stopped units\nWants={}\n\n[Service]\nType=oneshot\n\
             RemainAfterExit=yes\nExecStart=/bin/true\n",
            wants.join(" ")
        ),
    ));
    m.install_units(&units);
    m.sandbox
        .systemctl_ok(&["start", "--", "pj-holder", "pj-app"]);
    for name in &stoppers {
        assert_eq!(m.sandbox.is_active(name), "active", "{name}");
    }
    let app_pid = m.sandbox.main_pid("pj-app");

    let mut manifest = String::from(
        "- service:\n    - pj-db:\n        ensure: running\n    - pj-app:\n        ensure: running\n        subscribe:\n          - service#pj-db\n",
    );
    for name in &stoppers {
        manifest.push_str(&format!("    - {name}:\n        ensure: stopped\n"));
    }
    let run = m.run(&manifest, &["--json"]);
    let report = over_dbus(&run);
    assert_eq!(run.code, 0, "{run:?}");

    // app's new main process began after db was active.
    let db_up = m.monotonic("pj-db", "ActiveEnterTimestampMonotonic");
    let app_started = m.monotonic("pj-app", "ExecMainStartTimestampMonotonic");
    assert!(
        db_up > 0 && app_started > db_up,
        "db up at {db_up} µs, app started at {app_started} µs"
    );
    assert_ne!(m.sandbox.main_pid("pj-app"), app_pid, "app was restarted");
    assert_eq!(resource(&report, "service#pj-app")["refreshed"], true);

    // The six one-second stops overlapped.
    let stops = windows(
        &m,
        &stoppers,
        "ActiveExitTimestampMonotonic",
        "InactiveEnterTimestampMonotonic",
    );
    assert!(
        side_by_side(&stops),
        "the stops did not overlap: {stops:?}\n{:#}",
        report["calls"]
    );
    for name in &stoppers {
        assert_eq!(m.sandbox.is_active(name), "inactive", "{name}");
    }
}

#[e2e_test(requires = "root, systemd")]
fn a_start_that_never_ends_costs_the_timeout_is_cancelled_and_the_others_converge() {
    let m = machine();
    let mut units = vec![(
        "pj-stuck".to_owned(),
        "[Unit]\nDescription=never starts\n\n[Service]\nType=oneshot\nExecStart=/bin/sleep infinity\n\
         TimeoutStartSec=infinity\n"
            .to_owned(),
    )];
    let others: Vec<String> = (1..=3).map(|i| format!("pj-ok{i}")).collect();
    units.extend(others.iter().map(|n| slow_service(n, "0.5", "")));
    m.install_units(&units);
    let mut manifest = String::from("- service:\n    - pj-stuck:\n        ensure: running\n");
    for name in &others {
        manifest.push_str(&format!("    - {name}:\n        ensure: running\n"));
    }
    let started = std::time::Instant::now();
    let run = m.run(&manifest, &["--json", "--systemctl-timeout", "3"]);
    let took = started.elapsed();
    let report = over_dbus(&run);
    assert_ne!(run.code, 0, "{run:?}");
    assert!(
        took.as_secs_f64() >= 3.0,
        "the timeout was not waited for: {took:?}"
    );
    assert!(took.as_secs_f64() < 60.0, "the run hung: {took:?}");

    let stuck = resource(&report, "service#pj-stuck");
    assert_eq!(stuck["failed"], true);
    assert!(
        errors(stuck).contains("start pj-stuck: StartUnit pj-stuck.service: its job did not end within 3s (the provider timeout); the job was cancelled"),
        "{stuck:#}"
    );
    let record = start_records(&report)
        .into_iter()
        .find(|c| c["service"] == "pj-stuck")
        .unwrap();
    assert_eq!(record["outcome"], "timed-out", "{record:#}");
    // Cancelled: systemd holds no job for it any more.
    let jobs = m.sandbox.systemctl(&["list-jobs", "--no-legend"]);
    let jobs = String::from_utf8_lossy(&jobs.stdout);
    assert!(!jobs.contains("pj-stuck"), "{jobs}");
    for name in &others {
        assert_eq!(m.sandbox.is_active(name), "active", "{name}");
        assert_eq!(
            resource(&report, &format!("service#{name}"))["failed"],
            false
        );
    }
}

/// The differential scenario's units, put back in their first state.
fn differential_start(m: &Machine) {
    let all = [
        "pj-a", "pj-b", "pj-c", "pj-down", "pj-bad", "pj-db", "pj-app",
    ];
    let mut args = vec!["stop", "--"];
    args.extend(all);
    m.sandbox.systemctl_ok(&args);
    let mut args = vec!["disable", "--"];
    args.extend(all);
    m.sandbox.systemctl_ok(&args);
    m.sandbox.systemctl(&["reset-failed"]);
    m.sandbox
        .systemctl_ok(&["start", "--", "pj-down", "pj-app"]);
    m.sandbox.systemctl_ok(&["enable", "--", "pj-down"]);
}

const DIFFERENTIAL: &str = "- service:
    - pj-a:
        ensure: running
        enable: true
    - pj-b:
        ensure: running
        enable: true
    - pj-c:
        ensure: running
    - pj-down:
        ensure: stopped
        enable: false
    - pj-bad:
        ensure: running
        enable: true
    - pj-db:
        ensure: running
    - pj-app:
        ensure: running
        subscribe:
          - service#pj-db
";

/// What must agree between providers: each event without its error text,
/// whether it has errors, and what systemd says of each unit afterwards.
fn outcome(m: &Machine, report: &Value) -> Vec<Value> {
    report["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let name = r["resource"]
                .as_str()
                .unwrap()
                .trim_start_matches("service#");
            let (active, enabled) = m.state(name);
            serde_json::json!({
                "resource": r["resource"],
                "changed": r["changed"],
                "refreshed": r["refreshed"],
                "actions": r["actions"],
                "failed": r["failed"],
                "errors": r["errors"].as_array().unwrap().len(),
                "final": r["final"],
                "systemd": [active, enabled],
            })
        })
        .collect()
}

#[e2e_test(requires = "root, systemd")]
fn jobs_in_parallel_one_at_a_time_and_systemctl_give_the_same_events_and_states() {
    let m = machine();
    let mut units: Vec<_> = ["pj-a", "pj-b", "pj-c"]
        .iter()
        .map(|n| slow_service(n, "0.3", ""))
        .collect();
    units.push(slow_service("pj-down", "0", ""));
    units.push((
        "pj-bad".to_owned(),
        "[Unit]\nDescription=fails\n\n[Service]\nExecStartPre=/bin/false\nExecStart=/bin/sleep infinity\n\n[Install]\nWantedBy=multi-user.target\n".to_owned(),
    ));
    units.push(slow_service("pj-db", "0.5", ""));
    units.push(slow_service("pj-app", "0", ""));
    m.install_units(&units);

    let mut outcomes = Vec::new();
    let mut reports = Vec::new();
    for args in [
        &["--json"][..],
        &["--json", "--jobs", "1"],
        &["--json", "--provider", "systemctl"],
    ] {
        differential_start(&m);
        let run = m.run(DIFFERENTIAL, args);
        let report = run.report();
        assert_eq!(run.code, 1, "only pj-bad fails: {run:?}");
        let bad = errors(resource(&report, "service#pj-bad"));
        assert!(
            bad.contains(
                "Job for pj-bad.service failed because the control process exited with error code."
            ),
            "{args:?}: {bad}"
        );
        if args.contains(&"--jobs") {
            // One at a time, in declaration order.
            let starts = windows(
                &m,
                &["pj-a", "pj-b", "pj-c"],
                "InactiveExitTimestampMonotonic",
                "ActiveEnterTimestampMonotonic",
            );
            for pair in starts.windows(2) {
                assert!(
                    pair[1].0 >= pair[0].1,
                    "with --jobs 1 the starts overlapped: {starts:?}"
                );
            }
        }
        outcomes.push(outcome(&m, &report));
        reports.push(report);
    }
    assert_eq!(outcomes[0], outcomes[2], "over D-Bus and with systemctl");
    assert_eq!(outcomes[1], outcomes[2], "--jobs 1 and with systemctl");
    assert_eq!(reports[0]["provider"]["status_reader"], "dbus");
    assert_eq!(reports[2]["provider"]["status_reader"], "systemctl");

    // --jobs 1 makes the calls systemctl's way makes, in the same order;
    // only the run's first reload moves, over D-Bus, from before the first
    // status to before the first change (the units' files are unchanged).
    let sequence = |report: &Value| -> Vec<(Value, Value, Value)> {
        report["calls"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["operation"] != "daemon-reload")
            .map(|c| {
                (
                    c["operation"].clone(),
                    c["service"].clone(),
                    c["outcome"].clone(),
                )
            })
            .collect()
    };
    assert_eq!(sequence(&reports[1]), sequence(&reports[2]));
    let reloads = |report: &Value| -> Vec<usize> {
        let calls = report["calls"].as_array().unwrap();
        (0..calls.len())
            .filter(|&i| calls[i]["operation"] == "daemon-reload")
            .collect()
    };
    let last = |report: &Value| report["calls"].as_array().unwrap().len() - 1;
    assert_eq!(reloads(&reports[2]), [0, last(&reports[2])], "systemctl");
    for report in &reports[..2] {
        let calls = report["calls"].as_array().unwrap();
        let first_change = calls
            .iter()
            .position(|c| c["operation"] != "status")
            .unwrap();
        assert_eq!(
            reloads(report),
            [first_change, last(report)],
            "over D-Bus: {report:#}"
        );
    }
    // In parallel, every start is queued before any unit is verified.
    let order: Vec<String> = reports[0]["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            format!(
                "{} {}",
                c["operation"].as_str().unwrap(),
                c["service"].as_str().unwrap_or("")
            )
        })
        .collect();
    let last_start = order.iter().rposition(|c| c == "start pj-bad").unwrap();
    let first_enable = order.iter().position(|c| c.starts_with("enable ")).unwrap();
    assert!(last_start < first_enable, "{order:?}");
}

#[e2e_test(requires = "root, systemd")]
fn sigterm_cancels_no_queued_job_and_reports_which_jobs_ended() {
    let m = machine();
    let units = vec![
        slow_service("pj-quick1", "0.2", ""),
        slow_service("pj-quick2", "0.2", ""),
        slow_service("pj-long1", "30", ""),
        slow_service("pj-long2", "30", ""),
    ];
    m.install_units(&units);
    let names = ["pj-quick1", "pj-quick2", "pj-long1", "pj-long2"];
    let mut manifest = String::from("- service:\n");
    for name in names {
        manifest.push_str(&format!("    - {name}:\n        ensure: running\n"));
    }
    let settings = m.sandbox.share_file("manifest.yaml", &manifest);
    policy_host_e2e::build::sign_file(&settings);
    // The host in the background; SIGTERM once the long jobs are queued.
    let script = format!(
        "{host} run {policy} --trusted-key {key} --settings {settings} --json > /var/tmp/report.json & \
         pid=$!; \
         until systemctl list-jobs --no-legend | grep -q pj-long2; do sleep 0.05; done; \
         sleep 0.5; t0=$(date +%s.%N); kill -TERM $pid; wait $pid; code=$?; t1=$(date +%s.%N); \
         echo \"$code $(awk \"BEGIN {{ print $t1 - $t0 }}\")\"; systemctl list-jobs --no-legend",
        host = m.host.display(),
        policy = m.policy.display(),
        key = m.trusted_key.display(),
        settings = settings.display(),
    );
    let out = m.sandbox.exec(&["sh", "-c", &script]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = stdout.lines();
    let first = lines.next().unwrap_or_default().to_owned();
    let (code, took) = first.split_once(' ').unwrap_or_else(|| panic!("{stdout}"));
    let took: f64 = took.parse().unwrap_or_else(|_| panic!("{stdout}"));
    assert!(code != "0", "an interrupted run failed: {stdout}");
    assert!(took < 12.0, "the host took {took} s after SIGTERM");
    // Not cancelled: systemd still runs the long starts after the host left.
    let jobs: Vec<&str> = lines.collect();
    for name in ["pj-long1", "pj-long2"] {
        assert!(jobs.iter().any(|j| j.contains(name)), "{name}: {jobs:?}");
        assert_eq!(m.sandbox.is_active(name), "activating");
    }

    let report = m.sandbox.exec(&["cat", "/var/tmp/report.json"]);
    let report: Value = serde_json::from_slice(&report.stdout).unwrap();
    assert_eq!(report["interrupted"]["signal"], "SIGTERM", "{report:#}");
    for call in start_records(&report) {
        let service = call["service"].as_str().unwrap();
        if service.starts_with("pj-quick") {
            assert_eq!(call["outcome"], "ok", "{call:#}");
        } else {
            assert_eq!(call["outcome"], "timed-out", "{call:#}");
            let error = call["error"].as_str().unwrap();
            assert!(
                error.contains("after the run was interrupted")
                    && error.contains("left queued (not cancelled)"),
                "{error}"
            );
        }
    }
    for name in ["pj-quick1", "pj-quick2"] {
        assert_eq!(m.sandbox.is_active(name), "active");
    }
}

#[e2e_test(requires = "root, systemd")]
fn an_enable_systemd_refuses_fails_in_systemctls_words_and_a_missing_unit_is_named() {
    let m = machine();
    m.install_units(&[slow_service("pj-main", "0", "")]);
    // A file where pj-main's link would go: systemd refuses the enable.
    m.sandbox.write_file(
        "/etc/systemd/system/multi-user.target.wants/pj-main.service",
        "not a link\n",
    );
    let run = m.run(
        "- service:\n    - pj-main:\n        ensure: stopped\n        enable: true\n    - pj-nosuch:\n        ensure: stopped\n",
        &["--json"],
    );
    let report = over_dbus(&run);
    assert_ne!(run.code, 0, "{run:?}");
    let main = resource(&report, "service#pj-main");
    // systemctl's words, and then the verification's (a change that failed
    // is verified too: what the unit is now, beside why).
    assert_eq!(
        errors(main),
        "enable pj-main: EnableUnitFiles over D-Bus failed: Failed to enable unit: File \
         /etc/systemd/system/multi-user.target.wants/pj-main.service already exists.\n\
         failed to reach desired state: expected stopped and enabled, found stopped and disabled",
        "{main:#}"
    );
    assert_eq!(m.sandbox.is_enabled("pj-main"), "disabled");
    let nosuch = resource(&report, "service#pj-nosuch");
    assert!(errors(nosuch).contains("pj-nosuch"), "{nosuch:#}");
}

/// A converging run reads each unit's enablement once before its start and
/// keeps it for the status after the start's job while nothing says a link
/// moved (issue 46). What moves links meanwhile must still be seen: another
/// client's disable (here the unit's own `ExecStartPre`, a `systemctl
/// disable` over systemd's bus), and the links the run's own enable made
/// for another unit (`Also=`). Were either missed, the run's verification
/// would report a unit enabled that is disabled, or disabled that is
/// enabled.
#[e2e_test(requires = "root, systemd")]
fn links_moved_during_a_run_are_seen_by_the_status_after_the_job() {
    let m = machine();
    let unit = |name: &str, service: &str, install: &str| {
        (
            name.to_owned(),
            format!(
                "[Unit]\nDescription={name}\n\n[Service]\n{service}ExecStart=/bin/sleep infinity\n\n\
                 [Install]\nWantedBy=multi-user.target\n{install}"
            ),
        )
    };
    m.install_units(&[
        // Started first: the run follows systemd's signals from its job on.
        unit("pj-first", "", ""),
        unit(
            "pj-flip",
            "ExecStartPre=/bin/systemctl --no-reload disable pj-flip.service\n",
            "",
        ),
        unit("pj-also", "", "Also=pj-partner.service\n"),
        unit("pj-partner", "", ""),
    ]);
    m.sandbox.systemctl_ok(&["enable", "pj-flip"]);
    assert_eq!(m.sandbox.is_enabled("pj-flip"), "enabled");

    // One run for each: a stranger's signal makes the run forget every
    // answer, which would hide whether its own enable forgot pj-partner's.
    let run = m.run(
        "- service:\n    - pj-first:\n        ensure: running\n    - pj-flip:\n        ensure: running\n        enable: true\n",
        &["--json", "--settle", "0"],
    );
    let report = over_dbus(&run);
    assert_ne!(run.code, 0, "pj-flip ends disabled: {run:?}");
    // Enabled when the run read it, disabled by its own start behind the
    // run's back: the verification after the job sees it, and says so.
    assert_eq!(m.state("pj-flip"), ("active".into(), "disabled".into()));
    let flip = resource(&report, "service#pj-flip");
    assert_eq!(flip["failed"], true, "{flip:#}");
    assert_eq!(
        errors(flip),
        "failed to reach desired state: expected running and enabled, found running and disabled",
        "{flip:#}"
    );
    assert_eq!(flip["final"]["enabled"], false, "{flip:#}");
    let first = resource(&report, "service#pj-first");
    assert_eq!(first["final"]["enabled"], false, "{first:#}");

    // pj-partner is disabled when read, and enabled by pj-also's enable
    // (Also=) before its own verification: reported as it is, enabled.
    let run = m.run(
        "- service:\n    - pj-also:\n        ensure: running\n        enable: true\n    - pj-partner:\n        ensure: running\n",
        &["--json", "--settle", "0"],
    );
    let report = over_dbus(&run);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(m.state("pj-partner"), ("active".into(), "enabled".into()));
    let partner = resource(&report, "service#pj-partner");
    assert_eq!(actions(partner), ["started"], "{partner:#}");
    assert_eq!(partner["final"]["enabled"], true, "{partner:#}");
}
