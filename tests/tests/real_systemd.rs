//! The `host` binary against a real systemd 252, booted in a throwaway
//! sandbox (see `policy_host_e2e::sandbox`). Every test checks the units'
//! real state with `systemctl` inside the sandbox, not only the host's report.
//!
//! These tests need root and Linux namespaces; where those are missing they
//! skip with a message, unless `CI=true`, where they fail.

use std::path::PathBuf;
use std::process::Output;

use policy_host_e2e::build;
use policy_host_e2e::sandbox::{sleep_service, Sandbox};
use serde_json::Value;

/// A sandbox with the manifest policy and the host binary ready inside.
struct Machine {
    sandbox: Sandbox,
    host: PathBuf,
    policy: PathBuf,
    trusted_key: PathBuf,
}

/// Builds what the test runs, then boots a sandbox; `None` means skip.
fn machine() -> Option<Machine> {
    let host = build::host_binary();
    let policy = build::signed_policy("manifest-policy");
    let trusted_key = build::test_key().public_key;
    let sandbox = Sandbox::boot_or_skip(&build::target_dir())?;
    Some(Machine {
        sandbox,
        host,
        policy,
        trusted_key,
    })
}

/// One run of the host: exit code, output and (with `--json`) the report.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit code {}\n--- stdout:\n{}\n--- stderr:\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

impl Run {
    fn report(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("the host printed no JSON report ({e}):\n{self:?}"))
    }
}

impl Machine {
    /// Installs a `sleep infinity` service and puts it in the given state.
    fn service(&self, name: &str, running: bool, enabled: bool) {
        self.sandbox.install_unit(name, &sleep_service(name));
        if running {
            self.sandbox.systemctl_ok(&["start", "--", name]);
        }
        if enabled {
            self.sandbox.systemctl_ok(&["enable", "--", name]);
        }
        assert_eq!(self.state(name), state(running, enabled));
    }

    /// `(is-active, is-enabled)` of a unit, as systemd says.
    fn state(&self, name: &str) -> (String, String) {
        (self.sandbox.is_active(name), self.sandbox.is_enabled(name))
    }

    /// Runs `host run MANIFEST-POLICY --settings <manifest> ARGS` inside,
    /// with the policy signed by the test key and that key trusted.
    fn run(&self, manifest: &str, args: &[&str]) -> Run {
        let settings = self.sandbox.share_file("manifest.yaml", manifest);
        let mut command = vec![
            self.host.to_str().unwrap(),
            "run",
            self.policy.to_str().unwrap(),
            "--trusted-key",
            self.trusted_key.to_str().unwrap(),
            "--settings",
            settings.to_str().unwrap(),
        ];
        command.extend_from_slice(args);
        let Output {
            status,
            stdout,
            stderr,
        } = self.sandbox.exec(&command);
        Run {
            code: status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
        }
    }
}

fn state(running: bool, enabled: bool) -> (String, String) {
    (
        if running { "active" } else { "inactive" }.to_string(),
        if enabled { "enabled" } else { "disabled" }.to_string(),
    )
}

/// The report's entry for `resource` (e.g. `service#demo-a`).
fn resource<'a>(report: &'a Value, resource: &str) -> &'a Value {
    report["resources"]
        .as_array()
        .expect("resources is an array")
        .iter()
        .find(|r| r["resource"] == resource)
        .unwrap_or_else(|| panic!("no {resource} in the report:\n{report:#}"))
}

/// The report's systemctl calls that change something, as `"start demo-a"`.
fn mutating_calls(report: &Value) -> Vec<String> {
    calls(report)
        .filter(|(op, _)| op != "daemon-reload" && op != "status")
        .map(|(op, service)| format!("{op} {service}"))
        .collect()
}

/// How many calls of `operation` the report lists.
fn count_calls(report: &Value, operation: &str) -> usize {
    calls(report).filter(|(op, _)| op == operation).count()
}

fn calls(report: &Value) -> impl Iterator<Item = (String, String)> + '_ {
    report["calls"]
        .as_array()
        .expect("calls is an array")
        .iter()
        .map(|c| {
            (
                c["operation"].as_str().unwrap_or_default().to_string(),
                c["service"].as_str().unwrap_or_default().to_string(),
            )
        })
}

fn actions(resource: &Value) -> Vec<&str> {
    resource["actions"]
        .as_array()
        .expect("actions is an array")
        .iter()
        .map(|a| a.as_str().unwrap_or_default())
        .collect()
}

fn errors(resource: &Value) -> String {
    resource["errors"]
        .as_array()
        .expect("errors is an array")
        .iter()
        .map(|e| e.as_str().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

const CONVERGE: &str = "
- service:
    - demo-a:
        ensure: running
        enable: true
    - demo-b:
        ensure: stopped
        enable: false
";

#[test]
fn sandbox_boots_a_private_systemd_and_stops_it_without_a_trace() {
    let Some(sandbox) = Sandbox::boot_or_skip(&build::target_dir()) else {
        return;
    };
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

#[test]
fn converges_start_stop_enable_disable_then_second_run_changes_nothing() {
    let Some(m) = machine() else { return };
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
    assert_eq!(
        calls(&report).next().map(|(op, _)| op).as_deref(),
        Some("daemon-reload"),
        "daemon-reload comes first: {report:#}"
    );
    assert_eq!(report["summary"]["changed"], 2, "{report:#}");
    assert_eq!(report["summary"]["success"], true, "{report:#}");
    assert_eq!(m.state("demo-a"), state(true, true));
    assert_eq!(m.state("demo-b"), state(false, false));

    let second = m.run(CONVERGE, &["--json", "--detailed-exitcodes"]);
    assert_eq!(second.code, 0, "nothing to change: {second:?}");
    let report = second.report();
    assert_eq!(mutating_calls(&report), Vec::<String>::new(), "{report:#}");
    assert_eq!(count_calls(&report, "daemon-reload"), 1, "{report:#}");
    assert_eq!(report["summary"]["changed"], 0, "{report:#}");
    assert_eq!(m.state("demo-a"), state(true, true));
    assert_eq!(m.state("demo-b"), state(false, false));

    let plain = m.run(CONVERGE, &[]);
    assert_eq!(
        plain.code, 0,
        "converged, without --detailed-exitcodes: {plain:?}"
    );
}

#[test]
fn noop_reports_what_would_change_and_changes_nothing() {
    let Some(m) = machine() else { return };
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

#[test]
fn refresh_restarts_a_subscribed_running_service() {
    let Some(m) = machine() else { return };
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

#[test]
fn a_unit_that_fails_to_start_is_a_failure_with_systemds_message() {
    let Some(m) = machine() else { return };
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

#[test]
fn a_missing_unit_is_service_not_found() {
    let Some(m) = machine() else { return };
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

#[test]
fn a_masked_unit_cannot_be_started() {
    let Some(m) = machine() else { return };
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
