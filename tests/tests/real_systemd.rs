//! The `host` binary against a real systemd 252, booted in a throwaway
//! sandbox (see `policy_host_e2e::sandbox`). Every test checks the units'
//! real state with `systemctl` inside the sandbox, not only the host's report.
//!
//! These tests require root and systemd (`#[e2e_test(requires)]`).

use policy_host_e2e::build;
use policy_host_e2e::machine::{
    actions, calls, count_calls, errors, machine, mutating_calls, resource, state, Machine,
};
use policy_host_e2e::outcome::watched_states;
use policy_host_e2e::requires::e2e_test;
use policy_host_e2e::sandbox::{sleep_service, Sandbox};
use serde_json::Value;

const CONVERGE: &str = "
- service:
    - demo-a:
        ensure: running
        enable: true
    - demo-b:
        ensure: stopped
        enable: false
";

#[e2e_test(requires = "root, systemd")]
fn sandbox_boots_a_private_systemd_and_stops_it_without_a_trace() {
    let sandbox = Sandbox::boot_for_test(&build::target_dir());
    let pid = sandbox.pid();
    let state = sandbox.systemctl(&["is-system-running"]);
    let state = String::from_utf8_lossy(&state.stdout);
    assert!(
        matches!(state.trim(), "running" | "degraded"),
        "is-system-running: {state}"
    );
    // Writes inside stay inside.
    let marker = format!("/tmp/sandbox-marker-{}", std::process::id());
    sandbox.write_file(&marker, "inside\n");
    assert!(
        !std::path::Path::new(&marker).exists(),
        "{marker} leaked out"
    );
    assert_eq!(sandbox.exec(&["cat", &marker]).stdout, b"inside\n");

    let boot = sandbox.boot_time();
    let stop = sandbox.stop().expect("the sandbox stops");
    eprintln!("sandbox boot {boot:?}, stop {stop:?}");
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    assert_ne!(comm.trim(), "systemd", "systemd (PID {pid}) outlived stop");
}

#[e2e_test(requires = "root, systemd")]
fn converges_start_stop_enable_disable_then_second_run_changes_nothing() {
    let m = machine();
    m.service("demo-a", false, false);
    m.service("demo-b", true, true);

    let first = m.run(CONVERGE, &["--json", "--detailed-exitcodes"]);
    assert_eq!(
        first.code, 2,
        "changes with --detailed-exitcodes: {first:?}"
    );
    let report = first.report();
    assert_eq!(report["provider"]["available"], true, "{report:#}");
    assert_eq!(
        actions(resource(&report, "service#demo-a")),
        ["started", "enabled"]
    );
    assert_eq!(
        actions(resource(&report, "service#demo-b")),
        ["stopped", "disabled"]
    );
    assert_eq!(
        resource(&report, "service#demo-a")["final"],
        serde_json::json!({"ensure": "running", "enabled": true})
    );
    assert_eq!(
        resource(&report, "service#demo-b")["final"],
        serde_json::json!({"ensure": "stopped", "enabled": false})
    );
    // Over D-Bus the statuses of unchanged units need no reload; the run's
    // one reload comes before its first change.
    let operations: Vec<String> = calls(&report).map(|(op, _)| op).collect();
    let first_change = operations
        .iter()
        .position(|op| op != "status")
        .expect("a converging run changes something");
    assert_eq!(
        operations[first_change], "daemon-reload",
        "the reload comes before the first change: {report:#}"
    );
    assert_eq!(report["summary"]["changed"], 2, "{report:#}");
    assert_eq!(report["summary"]["success"], true, "{report:#}");
    assert_eq!(m.state("demo-a"), state(true, true));
    assert_eq!(m.state("demo-b"), state(false, false));

    let second = m.run(CONVERGE, &["--json", "--detailed-exitcodes"]);
    assert_eq!(second.code, 0, "nothing to change: {second:?}");
    let report = second.report();
    assert_eq!(mutating_calls(&report), Vec::<String>::new(), "{report:#}");
    assert_eq!(
        count_calls(&report, "daemon-reload"),
        0,
        "no unit file changed, nothing to change: no reload: {report:#}"
    );
    assert_eq!(report["summary"]["changed"], 0, "{report:#}");
    assert_eq!(m.state("demo-a"), state(true, true));
    assert_eq!(m.state("demo-b"), state(false, false));

    let plain = m.run(CONVERGE, &[]);
    assert_eq!(
        plain.code, 0,
        "converged, without --detailed-exitcodes: {plain:?}"
    );
}

/// systemd's `NeedDaemonReload` of a unit: `yes` or `no`.
fn need_daemon_reload(m: &Machine, unit: &str) -> String {
    let out = m
        .sandbox
        .systemctl(&["show", "-p", "NeedDaemonReload", "--value", "--", unit]);
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[e2e_test(requires = "root, systemd")]
fn the_run_reloads_when_a_unit_it_reads_changed_on_disk_or_before_its_first_change() {
    let m = machine();
    m.service("rl-app", true, true);
    m.service("rl-other", true, true);
    let manifest = "- service:\n    - rl-app:\n        ensure: running\n        enable: true\n";
    let reloads = |args: &[&str]| {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let run = m.run(manifest, &all);
        assert_eq!(run.code, 0, "{run:?}");
        let report = run.report();
        assert_eq!(mutating_calls(&report), Vec::<String>::new(), "{report:#}");
        count_calls(&report, "daemon-reload")
    };

    // Converged, no unit file changed: no reload.
    assert_eq!(reloads(&[]), 0);

    // The unit's file changed: systemd is made to read it before the
    // policy is told the unit's state.
    m.sandbox.write_file(
        "/etc/systemd/system/rl-app.service",
        &sleep_service("rl-app, edited"),
    );
    assert_eq!(need_daemon_reload(&m, "rl-app"), "yes");
    assert_eq!(reloads(&[]), 1);
    assert_eq!(need_daemon_reload(&m, "rl-app"), "no");
    let description =
        m.sandbox
            .systemctl(&["show", "-p", "Description", "--value", "--", "rl-app"]);
    assert_eq!(
        String::from_utf8_lossy(&description.stdout).trim(),
        "rl-app, edited"
    );
    assert_eq!(reloads(&[]), 0, "read once, it needs no reload again");

    // A drop-in in a directory made since the last reload: systemd 252
    // does not notice it (NeedDaemonReload stays "no"); the host does.
    let dropin_paths = || {
        let out = m
            .sandbox
            .systemctl(&["show", "-p", "DropInPaths", "--value", "--", "rl-app"]);
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    m.sandbox.write_file(
        "/etc/systemd/system/rl-app.service.d/env.conf",
        "[Service]\nEnvironment=EDITED=1\n",
    );
    assert_eq!(need_daemon_reload(&m, "rl-app"), "no", "systemd 252");
    assert_eq!(reloads(&[]), 1);
    assert_eq!(
        dropin_paths(),
        "/etc/systemd/system/rl-app.service.d/env.conf"
    );
    // One more in that directory (systemd notices), and one for every
    // service in a new directory of its own.
    m.sandbox.write_file(
        "/etc/systemd/system/rl-app.service.d/more.conf",
        "[Service]\nEnvironment=MORE=1\n",
    );
    assert_eq!(need_daemon_reload(&m, "rl-app"), "yes");
    assert_eq!(reloads(&[]), 1);
    m.sandbox.write_file(
        "/run/systemd/system/service.d/all.conf",
        "[Service]\nEnvironment=ALL=1\n",
    );
    assert_eq!(reloads(&[]), 1);
    assert!(dropin_paths().contains("/run/systemd/system/service.d/all.conf"));
    assert_eq!(reloads(&[]), 0, "all loaded: no reload");

    // A unit the policy does not read changed: a run that changes nothing
    // leaves it to the next run that changes something, or to systemctl.
    m.sandbox.write_file(
        "/etc/systemd/system/rl-other.service",
        &sleep_service("rl-other, edited"),
    );
    assert_eq!(reloads(&[]), 0);
    assert_eq!(need_daemon_reload(&m, "rl-other"), "yes");
    let stop = m.run(
        "- service:\n    - rl-app:\n        ensure: stopped\n        enable: true\n",
        &["--json"],
    );
    assert_eq!(stop.code, 0, "{stop:?}");
    let report = stop.report();
    let operations: Vec<String> = calls(&report).map(|(op, _)| op).collect();
    assert_eq!(
        operations[..3],
        ["status", "daemon-reload", "stop"],
        "{report:#}"
    );
    assert_eq!(need_daemon_reload(&m, "rl-other"), "no");
    assert_eq!(m.state("rl-app"), state(false, true));

    // A noop run never reloads; with systemctl the design's reload comes
    // first, before any status.
    m.sandbox.write_file(
        "/etc/systemd/system/rl-app.service",
        &sleep_service("rl-app, edited again"),
    );
    let noop = m.run(manifest, &["--json", "--noop"]);
    assert_eq!(count_calls(&noop.report(), "daemon-reload"), 0, "{noop:?}");
    assert_eq!(need_daemon_reload(&m, "rl-app"), "yes");
    let forced = m.run(
        "- service:\n    - rl-app:\n        ensure: stopped\n        enable: true\n",
        &["--json", "--provider", "systemctl"],
    );
    let report = forced.report();
    assert_eq!(
        report["provider"]["status_reader"], "systemctl",
        "{report:#}"
    );
    assert_eq!(
        calls(&report).map(|(op, _)| op).collect::<Vec<_>>(),
        ["daemon-reload", "status"],
        "{report:#}"
    );
}

#[e2e_test(requires = "root, systemd")]
fn noop_reports_what_would_change_and_changes_nothing() {
    let m = machine();
    m.service("demo-a", false, false);

    let manifest = "
- service:
    - demo-a:
        ensure: running
        enable: true
";
    let run = m.run(manifest, &["--noop", "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let report = run.report();
    assert_eq!(report["noop"], true);
    let demo_a = resource(&report, "service#demo-a");
    assert_eq!(
        demo_a["noop_message"], "Would have started, would have enabled",
        "{report:#}"
    );
    assert_eq!(mutating_calls(&report), Vec::<String>::new(), "{report:#}");
    assert_eq!(count_calls(&report, "daemon-reload"), 0, "{report:#}");
    assert_eq!(
        m.state("demo-a"),
        state(false, false),
        "noop changed the unit"
    );
}

#[e2e_test(requires = "root, systemd")]
fn refresh_restarts_a_subscribed_running_service() {
    let m = machine();
    m.service("demo-a", true, true);
    m.service("demo-b", false, false);
    let manifest = "
- service:
    - demo-a:
        ensure: running
        enable: true
        subscribe:
          - file#/etc/demo.conf
    - demo-b:
        ensure: stopped
        subscribe:
          - file#/etc/demo.conf
";
    let before = m.sandbox.main_pid("demo-a");
    assert_ne!(before, 0);

    let unrelated = m.run(manifest, &["--json", "--refresh", "file#/etc/other.conf"]);
    assert_eq!(unrelated.code, 0, "{unrelated:?}");
    assert_eq!(mutating_calls(&unrelated.report()), Vec::<String>::new());
    assert_eq!(m.sandbox.main_pid("demo-a"), before);

    let run = m.run(manifest, &["--json", "--refresh", "file#/etc/demo.conf"]);
    assert_eq!(run.code, 0, "{run:?}");
    let report = run.report();
    let demo_a = resource(&report, "service#demo-a");
    assert_eq!(actions(demo_a), ["restarted"], "{report:#}");
    assert_eq!(demo_a["refreshed"], true, "{report:#}");
    assert_eq!(mutating_calls(&report), ["restart demo-a"], "{report:#}");
    let after = m.sandbox.main_pid("demo-a");
    assert!(
        after != 0 && after != before,
        "MainPID {before} -> {after}: not restarted"
    );
    assert_eq!(m.state("demo-a"), state(true, true));
    assert_eq!(
        m.state("demo-b"),
        state(false, false),
        "a stopped service stays stopped"
    );
}

#[e2e_test(requires = "root, systemd")]
fn a_unit_that_fails_to_start_is_a_failure_with_systemds_message() {
    let m = machine();
    // Type=oneshot: `systemctl start` waits for the program and fails with it. (With
    // Type=exec it may exit 0: the job is done once exec() succeeded, a race with the exit.)
    m.sandbox.install_unit(
        "demo-fail",
        "[Service]\nType=oneshot\nExecStart=/bin/false\n\n[Install]\nWantedBy=multi-user.target\n",
    );
    let manifest = "
- service:
    - demo-fail:
        ensure: running
";
    let run = m.run(manifest, &["--json"]);
    assert_eq!(run.code, 1, "{run:?}");
    let report = run.report();
    let failed = resource(&report, "service#demo-fail");
    assert_eq!(failed["failed"], true, "{report:#}");
    assert!(
        errors(failed).contains("Job for demo-fail.service failed"),
        "systemd's message is passed on: {report:#}"
    );
    assert_eq!(report["summary"]["success"], false, "{report:#}");
    assert_eq!(m.sandbox.is_active("demo-fail"), "failed");

    let detailed = m.run(manifest, &["--json", "--detailed-exitcodes"]);
    assert_eq!(detailed.code & 4, 4, "failure bit: {detailed:?}");
}

#[e2e_test(requires = "root, systemd")]
fn a_missing_unit_is_service_not_found() {
    let m = machine();
    let run = m.run(
        "
- service:
    - demo-nosuch:
        ensure: running
        enable: true
",
        &["--json"],
    );
    assert_eq!(run.code, 1, "{run:?}");
    let report = run.report();
    let missing = resource(&report, "service#demo-nosuch");
    assert_eq!(missing["failed"], true, "{report:#}");
    assert!(errors(missing).contains("service not found"), "{report:#}");
    assert_eq!(mutating_calls(&report), Vec::<String>::new(), "{report:#}");
}

#[e2e_test(requires = "root, systemd")]
fn a_masked_unit_cannot_be_started() {
    let m = machine();
    // A vendor unit (mask puts a /dev/null symlink in /etc, where it must not exist yet).
    m.sandbox.write_file(
        "/usr/lib/systemd/system/demo-masked.service",
        &sleep_service("demo-masked"),
    );
    m.sandbox.systemctl_ok(&["mask", "--", "demo-masked"]);
    let run = m.run(
        "
- service:
    - demo-masked:
        ensure: running
",
        &["--json"],
    );
    assert_eq!(run.code, 1, "{run:?}");
    let report = run.report();
    let masked = resource(&report, "service#demo-masked");
    assert_eq!(masked["failed"], true, "{report:#}");
    assert!(errors(masked).contains("masked"), "{report:#}");
    assert_eq!(m.state("demo-masked"), ("inactive".into(), "masked".into()));
}

// ------------------------------------------------------------- kinds of units
//
// docs/service-type.md, "Kinds of units": one test per kind, each on units
// made the way systemd makes them, asserting the exit code, the calls the
// host made and what systemctl says afterwards; a manifest that converges
// is run again and must change nothing.

fn assert_contains(text: &str, needle: &str) {
    assert!(text.contains(needle), "{needle:?} is not in:\n{text}");
}

/// `enable: false` on `name` (running, `is-enabled` says `word`) fails
/// before any change with the kind's explanation; dropping `enable`, as the
/// message says, converges, and a second run is a no-op.
fn enable_false_is_refused_then_dropping_enable_converges(m: &Machine, name: &str, word: &str) {
    assert_eq!(m.state(name), ("active".into(), word.into()));
    let refused =
        format!("- service:\n    - {name}:\n        ensure: stopped\n        enable: false\n");
    let status = format!("status {name}");
    let report = m.run_expecting(&refused, 4, &[&status]);
    let event = resource(&report, &format!("service#{name}"));
    assert_eq!(event["failed"], true, "{report:#}");
    assert_eq!(event["changed"], false, "{report:#}");
    let error = errors(event);
    assert_contains(
        &error,
        &format!("enable: false cannot be applied to {name}: it is "),
    );
    assert_contains(&error, &format!("(systemctl is-enabled says \"{word}\")."));
    assert_contains(
        &error,
        &format!(
            "Drop enable from this service, or mask the unit outside the policy \
             (systemctl mask {name}.service) if it must never start. Nothing was changed."
        ),
    );
    assert_eq!(m.state(name), ("active".into(), word.into()), "unchanged");

    let dropped = format!("- service:\n    - {name}:\n        ensure: stopped\n");
    let stop = format!("stop {name}");
    m.run_expecting(&dropped, 2, &[&status, &stop, &status]);
    assert_eq!(m.state(name), ("inactive".into(), word.into()));
    m.run_expecting(&dropped, 0, &[&status]);
    assert_eq!(m.state(name), ("inactive".into(), word.into()));
}

/// Issue 1: `sfx2` and `sfx2.service` are one unit. Declared both ways, the
/// policy is rejected before anything is queried or changed (not even the
/// daemon-reload); subscriptions match a service in either spelling.
#[e2e_test(requires = "root, systemd")]
fn names_are_compared_as_systemd_compares_them() {
    let m = machine();
    m.service("sfx2", false, false);
    let twice = "
- service:
    - sfx2:
        ensure: running
    - sfx2.service:
        ensure: stopped
";
    let report = m.run_expecting(twice, 4, &[]);
    assert_eq!(
        report["errors"],
        serde_json::json!([
            "service#sfx2.service is declared more than once: service#sfx2 (declaration 1) and \
             service#sfx2.service (declaration 2) are the same unit, sfx2.service; declare it once"
        ]),
        "{report:#}"
    );
    assert_eq!(count_calls(&report, "daemon-reload"), 0, "{report:#}");
    assert_eq!(m.state("sfx2"), state(false, false));

    m.service("spell-db", false, false);
    m.service("spell-web", true, false);
    let spelled = "
- service:
    - spell-db.service:
        ensure: running
    - spell-web:
        ensure: running
        subscribe:
          - service#spell-db
";
    let before = m.sandbox.main_pid("spell-web");
    let report = m.run_expecting(
        spelled,
        2,
        &[
            "status spell-db.service",
            "start spell-db.service",
            "status spell-db.service",
            "status spell-web",
            "restart spell-web",
            "status spell-web",
        ],
    );
    assert_eq!(
        resource(&report, "service#spell-web")["refreshed"],
        true,
        "{report:#}"
    );
    assert_eq!(m.state("spell-db"), state(true, false));
    let after = m.sandbox.main_pid("spell-web");
    assert!(after != 0 && after != before, "MainPID {before} -> {after}");
    m.run_expecting(spelled, 0, &["status spell-db.service", "status spell-web"]);
    assert_eq!(
        m.sandbox.main_pid("spell-web"),
        after,
        "not restarted again"
    );
}

/// Issue 2: a static unit has no [Install] section.
#[e2e_test(requires = "root, systemd")]
fn static_unit_with_enable_false_is_refused_before_any_change() {
    let m = machine();
    m.sandbox
        .install_unit("kind-static", "[Service]\nExecStart=/bin/sleep infinity\n");
    m.sandbox.systemctl_ok(&["start", "--", "kind-static"]);
    enable_false_is_refused_then_dropping_enable_converges(&m, "kind-static", "static");
}

/// Issue 2: an indirect unit's [Install] section has only `Also=`; a
/// `disable` would have disabled the unit it names.
#[e2e_test(requires = "root, systemd")]
fn indirect_unit_with_enable_false_is_refused_before_any_change() {
    let m = machine();
    m.service("kind-also", false, true);
    m.sandbox.install_unit(
        "kind-indirect",
        "[Service]\nExecStart=/bin/sleep infinity\n\n[Install]\nAlso=kind-also.service\n",
    );
    m.sandbox.systemctl_ok(&["start", "--", "kind-indirect"]);
    enable_false_is_refused_then_dropping_enable_converges(&m, "kind-indirect", "indirect");
    assert_eq!(
        m.sandbox.is_enabled("kind-also"),
        "enabled",
        "the unit Also= names is left alone"
    );
}

/// A generated unit: a generator writes it on every daemon-reload (the
/// host's own included), so it is made by a generator, not written into
/// /run/systemd/generator by hand, which the next reload would wipe.
#[e2e_test(requires = "root, systemd")]
fn generated_unit_with_enable_false_is_refused_before_any_change() {
    let m = machine();
    m.sandbox.write_file(
        "/etc/systemd/system-generators/kind-generator",
        "#!/bin/sh\nprintf '[Service]\\nExecStart=/bin/sleep infinity\\n' > \"$1/kind-generated.service\"\n",
    );
    let chmod = m.sandbox.exec(&[
        "chmod",
        "+x",
        "/etc/systemd/system-generators/kind-generator",
    ]);
    assert!(chmod.status.success());
    m.sandbox.systemctl_ok(&["daemon-reload"]);
    m.sandbox.systemctl_ok(&["start", "--", "kind-generated"]);
    enable_false_is_refused_then_dropping_enable_converges(&m, "kind-generated", "generated");
}

/// Issue 3: `disable` of an alias disables the unit it names and deletes
/// the alias. `enable: false` on the alias is refused, naming it and how to
/// find its unit; managing that unit instead converges.
#[e2e_test(requires = "root, systemd")]
fn alias_with_enable_false_is_refused_and_its_unit_is_managed_instead() {
    let m = machine();
    m.sandbox.install_unit(
        "kind-real",
        "[Service]\nExecStart=/bin/sleep infinity\n\n\
         [Install]\nWantedBy=multi-user.target\nAlias=kind-ali.service\n",
    );
    m.sandbox
        .systemctl_ok(&["enable", "--now", "--", "kind-real"]);
    assert_eq!(m.state("kind-ali"), ("active".into(), "alias".into()));

    let on_alias = "
- service:
    - kind-ali:
        ensure: running
        enable: false
";
    let report = m.run_expecting(on_alias, 4, &["status kind-ali"]);
    assert_eq!(
        errors(resource(&report, "service#kind-ali")),
        "enable: false cannot be applied to kind-ali: it is an alias of another unit \
         (systemctl is-enabled says \"alias\"). Disabling it would disable the unit it names \
         and delete the alias. Manage the unit it points to instead: systemctl show -p Id \
         kind-ali gives its name. Nothing was changed.",
        "{report:#}"
    );
    assert_eq!(m.state("kind-ali"), ("active".into(), "alias".into()));
    assert_eq!(m.state("kind-real"), state(true, true));
    // The advice holds.
    let id = m.sandbox.systemctl(&["show", "-p", "Id", "kind-ali"]);
    assert_eq!(
        String::from_utf8_lossy(&id.stdout).trim(),
        "Id=kind-real.service"
    );

    let on_unit = "
- service:
    - kind-real:
        ensure: running
        enable: false
";
    m.run_expecting(
        on_unit,
        2,
        &["status kind-real", "disable kind-real", "status kind-real"],
    );
    assert_eq!(m.state("kind-real"), state(true, false));
    // Disabling the unit removes the alias it installed, as systemd does.
    assert_eq!(
        m.is_enabled_or_why_not("kind-ali"),
        "Failed to get unit file state for kind-ali.service: No such file or directory"
    );
    m.run_expecting(on_unit, 0, &["status kind-real"]);
}

/// Issue 4: a transient unit disappears once stopped. A successful stop
/// reaches `ensure: stopped`; `enable: false` is refused before any change;
/// a run that finds it missing before doing anything is "service not found".
#[e2e_test(requires = "root, systemd")]
fn transient_unit_gone_after_its_stop_counts_as_stopped() {
    let m = machine();
    let run = m.sandbox.exec(&[
        "systemd-run",
        "--unit=kind-transient",
        "/bin/sleep",
        "infinity",
    ]);
    assert!(run.status.success(), "{run:?}");
    assert_eq!(
        m.state("kind-transient"),
        ("active".into(), "transient".into())
    );

    let refused = "
- service:
    - kind-transient:
        ensure: stopped
        enable: false
";
    let report = m.run_expecting(refused, 4, &["status kind-transient"]);
    assert_contains(
        &errors(resource(&report, "service#kind-transient")),
        "it is a transient unit (systemctl is-enabled says \"transient\")",
    );
    assert_eq!(m.sandbox.is_active("kind-transient"), "active");

    let stopped = "
- service:
    - kind-transient:
        ensure: stopped
";
    let report = m.run_expecting(
        stopped,
        2,
        &[
            "status kind-transient",
            "stop kind-transient",
            "status kind-transient",
        ],
    );
    let event = resource(&report, "service#kind-transient");
    assert_eq!(event["failed"], false, "{report:#}");
    // Nothing is left to have a state: the host's report says so too.
    assert_eq!(event["final"], Value::Null, "{report:#}");
    assert_eq!(actions(event), ["stopped"], "{report:#}");
    assert_eq!(report["summary"]["success"], true, "{report:#}");
    assert_eq!(m.sandbox.is_active("kind-transient"), "inactive");
    assert_eq!(
        m.is_enabled_or_why_not("kind-transient"),
        "Failed to get unit file state for kind-transient.service: No such file or directory"
    );

    // Nothing is left to stop: missing before anything was done.
    let report = m.run_expecting(stopped, 4, &["status kind-transient"]);
    assert_eq!(
        errors(resource(&report, "service#kind-transient")),
        "status of kind-transient: service not found: kind-transient",
        "{report:#}"
    );
}

/// A linked unit (`systemctl link`) counts as disabled: `enable: false`
/// needs nothing, `enable: true` enables it.
#[e2e_test(requires = "root, systemd")]
fn linked_unit_counts_as_disabled_and_can_be_enabled() {
    let m = machine();
    m.sandbox.write_file(
        "/opt/kind/kind-linked.service",
        &sleep_service("kind-linked"),
    );
    m.sandbox
        .systemctl_ok(&["link", "--", "/opt/kind/kind-linked.service"]);
    assert_eq!(m.state("kind-linked"), ("inactive".into(), "linked".into()));

    let disabled = "
- service:
    - kind-linked:
        ensure: stopped
        enable: false
";
    m.run_expecting(disabled, 0, &["status kind-linked"]);
    assert_eq!(m.state("kind-linked"), ("inactive".into(), "linked".into()));

    let enabled = "
- service:
    - kind-linked:
        ensure: running
        enable: true
";
    m.run_expecting(
        enabled,
        2,
        &[
            "status kind-linked",
            // A job on systemd's job engine (the sandbox's bus is up): the
            // enable follows the status that waited for it.
            "start kind-linked",
            "status kind-linked",
            "enable kind-linked",
            "status kind-linked",
        ],
    );
    assert_eq!(m.state("kind-linked"), state(true, true));
    m.run_expecting(enabled, 0, &["status kind-linked"]);
}

/// A masked unit counts as disabled: stopped and `enable: false` needs
/// nothing; `enable: true` is refused by systemd.
#[e2e_test(requires = "root, systemd")]
fn masked_unit_counts_as_disabled_and_cannot_be_enabled() {
    let m = machine();
    m.sandbox.write_file(
        "/usr/lib/systemd/system/kind-masked.service",
        &sleep_service("kind-masked"),
    );
    m.sandbox.systemctl_ok(&["mask", "--", "kind-masked"]);
    let masked = || ("inactive".to_string(), "masked".to_string());
    assert_eq!(m.state("kind-masked"), masked());

    let off = "
- service:
    - kind-masked:
        ensure: stopped
        enable: false
";
    m.run_expecting(off, 0, &["status kind-masked"]);
    assert_eq!(m.state("kind-masked"), masked());

    let on = "
- service:
    - kind-masked:
        ensure: stopped
        enable: true
";
    let report = m.run_expecting(
        on,
        4,
        &[
            "status kind-masked",
            "enable kind-masked",
            "status kind-masked",
        ],
    );
    assert_contains(
        &errors(resource(&report, "service#kind-masked")),
        "is masked",
    );
    assert_eq!(m.state("kind-masked"), masked());
}

/// Issue 5: `enable: false` on a unit enabled at runtime (`systemctl enable
/// --runtime`) removes the runtime enablement too and is verified disabled;
/// so is a unit enabled both in /etc and at runtime, which reads `enabled`:
/// the contract's `disable` is complete, so one is asked for each. The next
/// run changes nothing.
#[e2e_test(requires = "root, systemd")]
fn runtime_enablement_is_removed_by_enable_false() {
    let m = machine();
    m.service("kind-runtime", true, false);
    m.sandbox
        .systemctl_ok(&["enable", "--runtime", "--", "kind-runtime"]);
    assert_eq!(
        m.state("kind-runtime"),
        ("active".into(), "enabled-runtime".into())
    );
    m.service("kind-both", true, true);
    m.sandbox
        .systemctl_ok(&["enable", "--runtime", "--", "kind-both"]);
    assert_eq!(m.state("kind-both"), state(true, true));

    let manifest = "
- service:
    - kind-runtime:
        ensure: stopped
        enable: false
    - kind-both:
        ensure: stopped
        enable: false
";
    let report = m.run_expecting(
        manifest,
        2,
        &[
            // Both stops are queued on systemd's job engine before either
            // is awaited; each disable follows the status that awaited it.
            "status kind-runtime",
            "stop kind-runtime",
            "status kind-both",
            "stop kind-both",
            "status kind-runtime",
            "disable kind-runtime",
            "status kind-runtime",
            "status kind-both",
            "disable kind-both",
            "status kind-both",
        ],
    );
    for name in ["kind-runtime", "kind-both"] {
        let event = resource(&report, &format!("service#{name}"));
        assert_eq!(event["failed"], false, "{report:#}");
        assert_eq!(
            event["final"],
            serde_json::json!({"ensure": "stopped", "enabled": false}),
            "{report:#}"
        );
        assert_eq!(m.state(name), state(false, false), "{name}");
        let link = format!("/run/systemd/system/multi-user.target.wants/{name}.service");
        assert!(
            !m.sandbox.exec(&["test", "-L", &link]).status.success(),
            "{link} is left"
        );
    }
    m.run_expecting(manifest, 0, &["status kind-runtime", "status kind-both"]);
}

// ------------------------------------------------- subscriptions that fire
//
// Issue 23: `file#` and `package#` subscriptions restart their subscribers on
// a plain run, on a real systemd, with a real package built by dpkg-deb and
// installed, upgraded and removed by dpkg inside the sandbox.

#[e2e_test(requires = "root, systemd")]
fn an_edited_configuration_restarts_its_subscriber_on_a_plain_run() {
    let m = machine();
    m.service("demo-app", true, true);
    m.service("demo-other", true, true);
    m.sandbox.write_file("/etc/demo/app.conf", "workers = 2\n");
    let manifest = "
- service:
    - demo-app:
        ensure: running
        subscribe: [file#/etc/demo/app.conf]
    - demo-other:
        ensure: running
";
    let args = ["--json", "--detailed-exitcodes"];
    let run = m.run(manifest, &args);
    assert_eq!(run.code, 0, "first sight only records: {run:?}");
    assert_eq!(
        watched_states(resource(&run.report(), "service#demo-app")),
        ["recorded"]
    );
    let app = m.sandbox.main_pid("demo-app");
    let other = m.sandbox.main_pid("demo-other");

    m.sandbox.write_file("/etc/demo/app.conf", "workers = 4\n");
    let run = m.run(manifest, &args);
    assert_eq!(run.code, 2, "{run:?}");
    let report = run.report();
    let event = resource(&report, "service#demo-app");
    assert_eq!(
        event["actions"],
        serde_json::json!(["restarted"]),
        "{report:#}"
    );
    assert_eq!(
        event["triggered_by"][0]["reference"],
        "file#/etc/demo/app.conf"
    );
    let restarted = m.sandbox.main_pid("demo-app");
    assert!(
        restarted != 0 && restarted != app,
        "MainPID {app} -> {restarted}"
    );
    assert_eq!(
        m.sandbox.main_pid("demo-other"),
        other,
        "demo-other untouched"
    );

    let run = m.run(manifest, &args);
    assert_eq!(run.code, 0, "a second run restarts nothing: {run:?}");
    assert_eq!(m.sandbox.main_pid("demo-app"), restarted);

    // Noop: said, not done, not recorded; the next real run restarts.
    m.sandbox.write_file("/etc/demo/app.conf", "workers = 8\n");
    let run = m.run(manifest, &["--json", "--detailed-exitcodes", "--noop"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(
        resource(&run.report(), "service#demo-app")["noop_message"],
        "Would have restarted via subscribe"
    );
    assert_eq!(
        m.sandbox.main_pid("demo-app"),
        restarted,
        "noop restarts nothing"
    );
    assert_eq!(
        m.run(manifest, &args).code,
        2,
        "the real run still restarts"
    );
    let restarted = m.sandbox.main_pid("demo-app");

    // A directory: a file added below it is a change.
    let manifest = "
- service:
    - demo-app:
        ensure: running
        subscribe: [file#/etc/demo]
";
    assert_eq!(
        m.run(manifest, &args).code,
        0,
        "first sight of the directory"
    );
    m.sandbox.write_file("/etc/demo/conf.d/tls.conf", "on\n");
    assert_eq!(m.run(manifest, &args).code, 2);
    assert_ne!(m.sandbox.main_pid("demo-app"), restarted);

    // A FIFO: demo-app is started all the same, then fails, naming why; a
    // path outside watch_paths is only a warning; the other converges.
    let out = m.sandbox.exec(&["mkfifo", "/etc/demo/pipe"]);
    assert!(out.status.success());
    m.sandbox.systemctl_ok(&["stop", "--", "demo-app"]);
    m.sandbox.systemctl_ok(&["stop", "--", "demo-other"]);
    let manifest = "
- service:
    - demo-app:
        ensure: running
        subscribe: [file#/etc/demo/pipe, file#/root/.profile]
    - demo-other:
        ensure: running
";
    let run = m.run(manifest, &args);
    assert_eq!(run.code, 6, "changes and a failure: {run:?}");
    let report = run.report();
    let app = resource(&report, "service#demo-app");
    let errors = app["errors"].to_string();
    assert!(errors.contains("/etc/demo/pipe is a FIFO"), "{errors}");
    assert!(!errors.contains("outside watch_paths"), "{errors}");
    assert_eq!(app["actions"], serde_json::json!(["started"]), "{report:#}");
    let warnings = app["warnings"].to_string();
    assert!(
        warnings.contains("file#/root/.profile is outside watch_paths"),
        "{warnings}"
    );
    assert_eq!(m.sandbox.is_active("demo-app"), "active");
    assert_eq!(m.sandbox.is_active("demo-other"), "active");

    // Outside watch_paths alone: converged, with the warning, and
    // --refresh restarts it, as the design says.
    let manifest = "
- service:
    - demo-app:
        ensure: running
        subscribe: [file#/root/.profile]
";
    let run = m.run(manifest, &args);
    assert_eq!(run.code, 0, "{run:?}");
    let before = m.sandbox.main_pid("demo-app");
    let run = m.run(
        manifest,
        &[
            "--json",
            "--detailed-exitcodes",
            "--refresh",
            "file#/root/.profile",
        ],
    );
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(
        resource(&run.report(), "service#demo-app")["actions"],
        serde_json::json!(["restarted"])
    );
    assert_ne!(m.sandbox.main_pid("demo-app"), before, "restarted");
}

#[e2e_test(requires = "root, systemd")]
fn a_package_upgrade_and_removal_restart_the_subscriber_and_a_failed_restart_is_retried() {
    let m = machine();
    m.service_that_can_fail("demo-pkgd");
    m.install_package("demo-watched", "1.0");
    let manifest = "
- service:
    - demo-pkgd:
        ensure: running
        subscribe: [package#demo-watched]
";
    let args = ["--json", "--detailed-exitcodes"];
    let run = m.run(manifest, &args);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        watched_states(resource(&run.report(), "service#demo-pkgd")),
        ["recorded"]
    );

    // Upgraded: one restart, saying from which version to which.
    let before = m.sandbox.main_pid("demo-pkgd");
    m.install_package("demo-watched", "2.0");
    let run = m.run(manifest, &args);
    assert_eq!(run.code, 2, "{run:?}");
    let report = run.report();
    assert_eq!(
        resource(&report, "service#demo-pkgd")["triggered_by"],
        serde_json::json!([{"reference": "package#demo-watched", "change": "version 1.0 -> 2.0"}]),
        "{report:#}"
    );
    let upgraded = m.sandbox.main_pid("demo-pkgd");
    assert!(upgraded != 0 && upgraded != before);
    assert_eq!(m.run(manifest, &args).code, 0, "nothing changed since");

    // Removed, while the service cannot start: the restart fails...
    m.sandbox.write_file("/etc/demo/fail", "");
    let out = m.sandbox.exec(&["dpkg", "-r", "demo-watched"]);
    assert!(out.status.success());
    let run = m.run(manifest, &args);
    assert_eq!(run.code & 4, 4, "a failure: {run:?}");
    assert_eq!(resource(&run.report(), "service#demo-pkgd")["failed"], true);

    // ... and the next run retries it with no new change.
    m.sandbox.exec(&["rm", "-f", "/etc/demo/fail"]);
    let run = m.run(manifest, &args);
    assert_eq!(run.code, 2, "{run:?}");
    let report = run.report();
    assert_eq!(
        resource(&report, "service#demo-pkgd")["triggered_by"][0]["change"],
        "removed 2.0",
        "{report:#}"
    );
    assert_eq!(m.state("demo-pkgd").0, "active");
    assert_eq!(m.run(manifest, &args).code, 0);
}

/// The shell commands of docs/try-it.md's "Step by step", in order, as the
/// page writes them (the indentation of its list taken off).
fn try_it_steps() -> String {
    let page = std::fs::read_to_string(build::workspace_root().join("docs/try-it.md"))
        .expect("docs/try-it.md");
    let section = &page[page.find("### Step by step").expect("the section")..];
    let mut script = String::new();
    let mut inside = None;
    for line in section.lines() {
        match (inside, line.trim_start()) {
            (None, "```sh") => inside = Some(line.len() - line.trim_start().len()),
            (Some(_), "```") => inside = None,
            (Some(indent), _) => {
                script.push_str(line.get(indent..).unwrap_or(""));
                script.push('\n');
            }
            (None, _) => {}
        }
    }
    script
}

/// docs/try-it.md's sandbox by hand, run as written: boot, a policy run
/// inside (noop, converge, nothing to do), the watch repairing a stop, and
/// the stop leaving nothing behind. Only its paths are the test's own, and
/// the cargo builds of step 1 are the ones this suite already made.
#[e2e_test(requires = "root, systemd")]
fn docs_try_it_boots_runs_watches_and_stops_as_written() {
    let share = policy_host_e2e::scratch::Scratch::new("try-it");
    let boxes = policy_host_e2e::scratch::Scratch::new("try-it-box");
    let sandbox_dir = boxes.join(format!("try-{}", std::process::id()));
    let mut script = try_it_steps();
    let replace = |script: &mut String, from: &str, to: &str| {
        assert!(
            script.contains(from),
            "docs/try-it.md no longer says {from:?}"
        );
        *script = script.replacen(from, to, 1);
    };
    replace(
        &mut script,
        "export TRY=/var/tmp/policy-host-try BOX=/run/policy-host-try/box SDBOX=$PWD/tests/sandbox/sdbox.sh\n",
        &format!(
            "export TRY={} BOX={} SDBOX=$PWD/tests/sandbox/sdbox.sh\ntrap '$SDBOX stop $BOX' EXIT\n",
            share.path().display(),
            sandbox_dir.display()
        ),
    );
    replace(
        &mut script,
        "cargo build -p policy-host --bin host && cp target/debug/host $TRY/host",
        &format!("cp {} $TRY/host", build::host_binary().display()),
    );
    replace(
        &mut script,
        "cargo build --release --target wasm32-wasip2 -p manifest-policy\n",
        "",
    );
    replace(
        &mut script,
        "cp target/wasm32-wasip2/release/manifest_policy.wasm $TRY/",
        &format!(
            "cp {} $TRY/",
            build::policy_wasm("manifest-policy").display()
        ),
    );
    let out = std::process::Command::new("bash")
        .args(["-euo", "pipefail", "-c", &script])
        .current_dir(build::workspace_root())
        .output()
        .expect("bash");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let said = format!("--- script\n{script}\n--- stdout\n{stdout}\n--- stderr\n{stderr}");
    assert!(out.status.success(), "{}: {said}", out.status);
    for expected in [
        "service#try-web  Would have started, would have enabled",
        "service#try-old  stopped, disabled",
        // The run with nothing to do, both units as the policy says, and
        // try-web running again after its stop: the watch repaired it.
        "exit code 0\nactive\ninactive\nactive\n",
        "service#try-web: started",
    ] {
        assert!(stdout.contains(expected), "{expected:?} missing: {said}");
    }
    assert!(!sandbox_dir.exists(), "sdbox.sh stop removes its directory");
}
