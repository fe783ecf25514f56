//! End-to-end: the real `host` binary runs real policy components against the
//! fake systemctl (first on `PATH`), which records every invocation.
//!
//! Every test that lets the host reach systemctl also checks that every
//! invocation had the shape `CMD --system -- NAME` or `daemon-reload`.
//!
//! These tests cover what only a run of the binary shows: command-line flags,
//! exit codes, the JSON and human reports, the host's call records,
//! daemon-reload, noop and name checks enforced by the host, limits, finding
//! systemctl, and refusing bad input. Each desired-state family (idempotency,
//! noop, subscribe, failures) keeps one run here to show it is wired through;
//! its table rows are asserted natively in guest-sdk/tests/service_type.rs,
//! and the rows of systemctl's output in host/src/provider/systemd/cli/parse.rs.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use policy_host_e2e::build::{host_command, policy_wasm, run_args, sign_file, signed_policy};
use policy_host_e2e::fake_systemctl::{show, temp_dir, FakeSystemctl};
use policy_host_e2e::outcome::{assert_contains, assert_shapes, json_calls, resource, run, Run};
use serde_json::Value;

/// `host run POLICY ARGS...` with the fake first on PATH.
fn host(fake: &FakeSystemctl, policy: &Path, args: &[&str]) -> Run {
    fake.host_run().policy(policy).args(args).run()
}

fn example() -> PathBuf {
    signed_policy("example-policy")
}

fn manifest_policy() -> PathBuf {
    signed_policy("manifest-policy")
}

/// Writes a settings file into the fake's directory, signed with the test
/// key: settings are signed like policies.
fn settings(fake: &FakeSystemctl, file: &str, text: &str) -> PathBuf {
    let path = fake.root().join(file);
    fs::write(&path, text).unwrap();
    sign_file(&path);
    path
}

/// `host run manifest.wasm --settings <yaml> --json ARGS...`.
fn manifest(fake: &FakeSystemctl, yaml: &str, args: &[&str]) -> Run {
    let file = settings(fake, "site.yaml", yaml);
    let mut all = vec!["--settings", file.to_str().unwrap(), "--json"];
    all.extend_from_slice(args);
    host(fake, &manifest_policy(), &all)
}

fn errors_of(value: &Value) -> Vec<String> {
    value["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("no errors array in {value:#}"))
        .iter()
        .map(|e| e.as_str().expect("errors are strings").to_string())
        .collect()
}

fn actions_of(value: &Value) -> Vec<String> {
    value["actions"]
        .as_array()
        .unwrap_or_else(|| panic!("no actions array in {value:#}"))
        .iter()
        .map(|e| e.as_str().unwrap().to_string())
        .collect()
}

#[track_caller]
fn assert_any_contains(items: &[String], needle: &str) {
    assert!(
        items.iter().any(|i| i.contains(needle)),
        "{needle:?} not found in {items:#?}"
    );
}

fn status_calls(name: &str) -> Vec<String> {
    vec![
        format!("is-active --system -- {name}"),
        format!("is-enabled --system -- {name}"),
    ]
}

// ---------------------------------------------------------------- converging

#[test]
fn converges_the_example_policy_in_order() {
    let fake = FakeSystemctl::example_units();
    let r = host(&fake, &example(), &["--json"]);
    r.assert_exit(0);
    assert_shapes(&fake);

    let mut expected = vec!["daemon-reload".to_string()];
    // A started service is finished after the others were begun: its
    // settle window is judged (one `show` at its end) by the status that
    // follows, then its second phase, then the verifying status.
    let mut settling = Vec::new();
    for (name, changes) in [
        ("httpd", ["start", "enable"].as_slice()),
        ("legacy-ftpd", &["stop", "disable"]),
        ("metrics-agent", &["start"]),
    ] {
        expected.extend(status_calls(name));
        if changes[0] == "start" {
            expected.push(format!("start --system -- {name}"));
            settling.push((name, &changes[1..]));
            continue;
        }
        for change in changes {
            match *change {
                // The contract's disable is complete: the host looks for a
                // runtime enablement left behind.
                "disable" => expected.extend([
                    format!("disable --no-reload --system -- {name}"),
                    format!("is-enabled --system -- {name}"),
                ]),
                _ => expected.push(format!("{change} --system -- {name}")),
            }
        }
        expected.extend(status_calls(name));
    }
    for (name, then) in settling {
        expected.push(show(name));
        expected.extend(status_calls(name));
        if then == ["enable"] {
            expected.push(format!("enable --no-reload --system -- {name}"));
            expected.extend(status_calls(name));
        }
    }
    // The links changed: one reload at the end, for all of them.
    expected.push("daemon-reload".to_string());
    assert_eq!(fake.calls(), expected);

    assert_eq!(
        fake.state("httpd").unwrap(),
        ("active".into(), "enabled".into())
    );
    assert_eq!(
        fake.state("legacy-ftpd").unwrap(),
        ("inactive".into(), "disabled".into())
    );
    assert_eq!(
        fake.state("metrics-agent").unwrap(),
        ("active".into(), "disabled".into()),
        "the boot setting of metrics-agent is left alone"
    );

    let json = r.json();
    assert_eq!(json["noop"], false);
    assert!(json["policy"].as_str().unwrap().contains("example_policy"));
    assert_eq!(json["provider"]["name"], "systemd");
    assert_eq!(json["provider"]["available"], true);
    assert_eq!(json["errors"], serde_json::json!([]));
    assert_eq!(json["resources"].as_array().unwrap().len(), 3);

    let httpd = resource(&json, "httpd");
    assert_eq!(httpd["changed"], true);
    assert_eq!(httpd["refreshed"], false);
    assert_eq!(httpd["noop"], false);
    assert_eq!(httpd["noop_message"], Value::Null);
    assert_eq!(httpd["failed"], false);
    assert_eq!(actions_of(httpd), ["started", "enabled"]);
    assert_eq!(
        httpd["requested"],
        serde_json::json!({"ensure": "running", "enable": true})
    );
    assert_eq!(
        httpd["final"],
        serde_json::json!({"ensure": "running", "enabled": true})
    );

    let ftpd = resource(&json, "legacy-ftpd");
    assert_eq!(actions_of(ftpd), ["stopped", "disabled"]);
    assert_eq!(
        ftpd["requested"],
        serde_json::json!({"ensure": "stopped", "enable": false})
    );
    assert_eq!(
        ftpd["final"],
        serde_json::json!({"ensure": "stopped", "enabled": false})
    );

    let metrics = resource(&json, "metrics-agent");
    assert_eq!(actions_of(metrics), ["started"]);
    assert_eq!(metrics["requested"]["enable"], Value::Null);
    assert_eq!(
        metrics["final"],
        serde_json::json!({"ensure": "running", "enabled": false})
    );

    let calls = json_calls(&json);
    assert_eq!(calls[0].0, "daemon-reload");
    assert_eq!(calls[0].1, None);
    assert!(calls.iter().all(|c| c.2 == "ok"), "{calls:#?}");
    assert!(calls
        .iter()
        .any(|c| c == &("start".into(), Some("httpd".into()), "ok".into())));
    assert!(json["calls"][0]["duration_ms"].is_number());
    assert_eq!(json["calls"][0]["error"], Value::Null);
    assert!(json["log"].is_string());

    let summary = &json["summary"];
    assert_eq!(summary["resources"], 3);
    assert_eq!(summary["changed"], 3);
    assert_eq!(summary["failed"], 0);
    assert_eq!(summary["unchanged"], 0);
    assert_eq!(summary["success"], true);
    assert!(summary["duration_ms"].is_number());
}

#[test]
fn detailed_exitcodes_distinguish_changes_and_failures() {
    let fake = FakeSystemctl::example_units();
    host(&fake, &example(), &["--detailed-exitcodes"]).assert_exit(2);
    host(&fake, &example(), &["--detailed-exitcodes"]).assert_exit(0);

    // A failure and no change: 4.
    let fake = FakeSystemctl::new();
    fake.unit("web", "inactive", "disabled")
        .fail("start", "web", 1, "Job for web.service failed.");
    let yaml = "- service:\n    - web:\n        ensure: running\n";
    manifest(&fake, yaml, &["--detailed-exitcodes"]).assert_exit(4);
    // Without --detailed-exitcodes a failure is 1.
    manifest(&fake, yaml, &[]).assert_exit(1);

    // A failure and a change: 6.
    fake.unit("db", "inactive", "disabled");
    let yaml =
        "- service:\n    - db:\n        ensure: running\n    - web:\n        ensure: running\n";
    manifest(&fake, yaml, &["--detailed-exitcodes"]).assert_exit(6);
    assert_shapes(&fake);
}

// --------------------------------------------------------------------- noop

// ------------------------------------------------------------ subscriptions

#[test]
fn refresh_restarts_a_running_subscriber() {
    let fake = FakeSystemctl::example_units();
    host(&fake, &example(), &[]).assert_exit(0);
    fake.clear_calls();

    let r = host(
        &fake,
        &example(),
        &["--refresh", "file#/etc/httpd/conf/httpd.conf", "--json"],
    );
    r.assert_exit(0);
    assert_shapes(&fake);
    assert_eq!(fake.mutating_calls(), ["restart --system -- httpd"]);
    let json = r.json();
    let httpd = resource(&json, "httpd");
    assert_eq!(httpd["refreshed"], true);
    assert_eq!(httpd["changed"], true);
    assert_eq!(actions_of(httpd), ["restarted"]);
    assert_eq!(resource(&json, "metrics-agent")["refreshed"], false);
}

/// `TYPE#NAME` has one parser, the SDK's: the policy refuses the run as a
/// whole, before it queries or changes anything. This is also the run that
/// shows how any policy-level refusal reaches the report (docs/service-type.md,
/// The two phases); the other validation rules are tested natively.
#[test]
fn invalid_refresh_reference_is_rejected() {
    let fake = FakeSystemctl::example_units();
    let r = host(&fake, &example(), &["--refresh", "no-hash-here", "--json"]);
    r.assert_exit(1);
    assert_eq!(fake.calls(), Vec::<String>::new(), "nothing may run");
    let json = r.json();
    assert_any_contains(
        &errors_of(&json),
        "refresh: invalid resource reference \"no-hash-here\"",
    );
    assert_eq!(json["resources"], serde_json::json!([]));
    assert_eq!(json["calls"], serde_json::json!([]));
    assert_eq!(json["summary"]["success"], false);
}

// ------------------------------------------------------------------ failures

/// Processes whose command line is exactly `sleep SECONDS`.
fn sleepers(seconds: &str) -> usize {
    let wanted = format!("sleep\0{seconds}\0");
    fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| fs::read(e.ok()?.path().join("cmdline")).ok())
        .filter(|c| c == wanted.as_bytes())
        .count()
}

#[test]
fn hanging_systemctl_times_out() {
    let fake = FakeSystemctl::new();
    fake.unit("web", "inactive", "disabled")
        .unit("db", "inactive", "disabled")
        .hang("start", "web", 47);
    let yaml =
        "- service:\n    - web:\n        ensure: running\n    - db:\n        ensure: running\n";
    let r = manifest(&fake, yaml, &["--systemctl-timeout", "1"]);
    r.assert_exit(1);
    assert!(
        r.elapsed < Duration::from_secs(20),
        "the run took {:?}",
        r.elapsed
    );
    let json = r.json();
    assert!(
        json_calls(&json)
            .iter()
            .any(|c| c.0 == "start" && c.1.as_deref() == Some("web") && c.2 == "timed-out"),
        "{:#}",
        json["calls"]
    );
    assert_eq!(
        resource(&json, "db")["failed"],
        false,
        "the run goes on after a timeout"
    );
    assert_eq!(
        sleepers("47"),
        0,
        "the timed-out systemctl was left running"
    );
    assert_any_contains(&errors_of(resource(&json, "web")), "timed out");
}

// ------------------------------------------------------------------- names

const HOSTILE_NAMES: &[&str] = &[
    "httpd; rm -rf /",
    "$(reboot)",
    "`reboot`",
    "-H evil",
    "-H",
    "--root=/",
    "--help",
    "a b",
    "../../x",
    "x/y",
    "x\ny",
    "",
    "a\0b",
    "café",
    "web|cat",
    "web&",
    "app@x",
];

fn escape(name: &str) -> String {
    name.replace('\\', "\\\\")
        .replace('\n', "\\n")
        .replace('\0', "\\0")
}

#[test]
fn host_rejects_hostile_names_from_a_guest_that_bypasses_the_sdk() {
    let fake = FakeSystemctl::new();
    let long = "a".repeat(300);
    let mut names: Vec<String> = HOSTILE_NAMES.iter().map(|s| s.to_string()).collect();
    names.push(long);
    let text: String = names.iter().map(|n| escape(n) + "\n").collect();
    let file = settings(&fake, "names.txt", &text);

    let r = host(
        &fake,
        &signed_policy("raw-calls-fixture"),
        &["--settings", file.to_str().unwrap(), "--json"],
    );
    assert!(
        fake.calls().iter().all(|c| c == "daemon-reload"),
        "systemctl ran with a hostile name: {:#?}",
        fake.calls()
    );
    r.assert_exit(1);
    let json = r.json();

    let calls = json_calls(&json);
    let operations: Vec<_> = calls.iter().filter(|c| c.0 != "daemon-reload").collect();
    assert_eq!(
        operations.len(),
        2 * names.len(),
        "one status and one start per name: {calls:#?}"
    );
    assert!(
        operations.iter().all(|c| c.2 == "invalid-name"),
        "{calls:#?}"
    );
    for op in ["status", "start"] {
        assert_eq!(operations.iter().filter(|c| c.0 == op).count(), names.len());
    }

    // The fixture reports its resources as `service#<hostile name>`: the host
    // refuses such a report as malformed rather than echoing it.
    assert_eq!(json["resources"].as_array().unwrap().len(), 0);
    let errors = errors_of(&json);
    assert_any_contains(&errors, "malformed report");
    assert_eq!(json["summary"]["success"], false);
}

#[test]
fn raw_calls_fixture_reaches_systemctl_with_a_valid_name() {
    // The control for the test above: the fixture's calls do arrive. And
    // only those of `run`: the start, stop and status it tries while it
    // declares its subscriptions reach nothing.
    let fake = FakeSystemctl::new();
    fake.unit("web", "inactive", "disabled");
    let file = settings(&fake, "names.txt", "web\n");
    let r = host(
        &fake,
        &signed_policy("raw-calls-fixture"),
        &["--settings", file.to_str().unwrap(), "--json"],
    );
    r.assert_exit(0);
    assert_shapes(&fake);
    assert_eq!(
        fake.calls(),
        [
            "daemon-reload",
            "is-active --system -- web",
            "is-enabled --system -- web",
            "start --system -- web",
            // The start's settle window, judged before the records are
            // handed out (the fixture never asks the status).
            &show("web"),
        ]
    );
}

// ------------------------------------------------------- the environment

#[test]
fn systemctl_runs_with_a_clean_environment() {
    let fake = FakeSystemctl::example_units();
    let mut cmd = fake.host_command();
    cmd.env("SECRET", "1")
        .env("LD_PRELOAD", "")
        .env("SYSTEMD_LOG_LEVEL", "debug")
        .arg("run")
        .arg(example())
        .args(run_args());
    run(cmd).assert_exit(0);
    let envs = fake.env_names();
    assert!(!envs.is_empty());
    for names in envs {
        let mut names = names.clone();
        names.sort();
        assert_eq!(names, ["LANG", "LC_ALL", "PATH"]);
    }
}

#[test]
fn no_systemctl_on_path_is_unavailable() {
    let fake = FakeSystemctl::example_units();
    let empty = temp_dir("empty-path");
    let mut cmd = host_command();
    cmd.env("PATH", &empty)
        .arg("run")
        .arg(example())
        .args(run_args())
        .arg("--json");
    let r = run(cmd);
    let _ = fs::remove_dir(&empty);
    r.assert_exit(1);
    assert_eq!(fake.calls(), Vec::<String>::new());
    let json = r.json();
    assert_eq!(json["provider"]["available"], false);
    assert_eq!(json["provider"]["name"], "systemd");
    let calls = json_calls(&json);
    assert!(!calls.is_empty());
    assert!(calls.iter().all(|c| c.2 == "unavailable"), "{calls:#?}");
    assert_any_contains(&errors_of(resource(&json, "httpd")), "systemctl not found");
    assert_eq!(json["summary"]["success"], false);
}

// -------------------------------------------------------------- bad input

#[track_caller]
fn assert_rejected(fake: &FakeSystemctl, r: &Run, mention: &str) {
    r.assert_exit(1);
    assert_eq!(fake.calls(), Vec::<String>::new(), "nothing may run");
    let lines: Vec<&str> = r.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line on stderr, got:\n{}", r.stderr);
    assert_contains(lines[0], mention);
}

#[test]
fn missing_policy_file_is_rejected() {
    let fake = FakeSystemctl::example_units();
    let missing = fake.root().join("nosuch.wasm");
    let r = host(&fake, &missing, &["--json"]);
    assert_rejected(&fake, &r, "nosuch.wasm");
}

#[test]
fn text_file_as_policy_is_rejected() {
    let fake = FakeSystemctl::example_units();
    let path = settings(&fake, "policy.wasm", "- service:\n    - web: {}\n");
    sign_file(&path);
    let r = host(&fake, &path, &["--json"]);
    assert_rejected(&fake, &r, "policy.wasm");
}

#[test]
fn core_wasm_module_is_rejected() {
    let fake = FakeSystemctl::example_units();
    let path = fake.root().join("core.wasm");
    fs::write(&path, b"\0asm\x01\0\0\0").unwrap();
    sign_file(&path);
    let r = host(&fake, &path, &["--json"]);
    assert_rejected(&fake, &r, "core.wasm");
    assert!(
        r.stderr.to_lowercase().contains("component"),
        "say it is a module, not a component: {}",
        r.stderr
    );
}

#[test]
fn missing_settings_file_is_rejected() {
    let fake = FakeSystemctl::example_units();
    let missing = fake.root().join("nosuch.yaml");
    let r = host(
        &fake,
        &manifest_policy(),
        &["--settings", missing.to_str().unwrap(), "--json"],
    );
    assert_rejected(&fake, &r, "nosuch.yaml");
}

#[test]
fn manifest_yaml_error_names_the_line() {
    let fake = FakeSystemctl::new();
    fake.unit("httpd", "inactive", "disabled");
    let yaml = "- service:\n    - httpd:\n        ensure: runing\n";
    let r = manifest(&fake, yaml, &[]);
    r.assert_exit(1);
    assert_eq!(fake.calls(), Vec::<String>::new(), "nothing may run");
    let errors = errors_of(&r.json());
    assert_any_contains(&errors, "line 3");
    assert_any_contains(&errors, "runing");

    // The human output shows it too.
    let file = settings(&fake, "site.yaml", yaml);
    let r = host(
        &fake,
        &manifest_policy(),
        &["--settings", file.to_str().unwrap()],
    );
    r.assert_exit(1);
    assert_contains(&format!("{}{}", r.stdout, r.stderr), "line 3");
}

// ------------------------------------------------------------ human output

#[test]
fn human_output_has_one_line_per_resource() {
    let fake = FakeSystemctl::example_units();
    let r = host(&fake, &example(), &[]);
    r.assert_exit(0);
    for name in [
        "service#httpd",
        "service#legacy-ftpd",
        "service#metrics-agent",
    ] {
        let lines = r
            .stdout
            .lines()
            .filter(|l| {
                l.split(|c: char| c.is_whitespace() || c == ':' || c == ',')
                    .any(|w| w == name)
            })
            .count();
        assert_eq!(lines, 1, "{name} in:\n{}", r.stdout);
    }
    assert!(
        serde_json::from_str::<Value>(&r.stdout).is_err(),
        "human output by default"
    );
}

#[test]
fn component_of_another_world_is_rejected() {
    let fake = FakeSystemctl::example_units();
    // The fixture's `other-world` binary is a wasi:cli/command component.
    let built = policy_wasm("raw-calls-fixture").with_file_name("other-world.wasm");
    assert!(built.is_file(), "{} was not built", built.display());
    let other = fake.root().join("other-world.wasm");
    fs::copy(&built, &other).unwrap();
    sign_file(&other);
    let r = host(&fake, &other, &["--json"]);
    assert_rejected(&fake, &r, "other-world.wasm");
}

// ------------------------------------------------------------ daemon-reload

// ------------------------------------------------------- finding systemctl

#[test]
fn non_executable_systemctl_earlier_on_path_is_skipped() {
    let fake = FakeSystemctl::example_units();
    let decoys = temp_dir("decoy-path");
    fs::write(decoys.join("systemctl"), "#!/bin/sh\nexit 0\n").unwrap(); // mode 644
    let dir_decoys = temp_dir("decoy-dir");
    fs::create_dir(dir_decoys.join("systemctl")).unwrap();
    let mut path = decoys.clone().into_os_string();
    path.push(":");
    path.push(&dir_decoys);
    path.push(":");
    path.push(fake.path_env());
    let mut cmd = host_command();
    cmd.env("PATH", path)
        .arg("run")
        .arg(example())
        .args(run_args());
    let r = run(cmd);
    let _ = fs::remove_dir_all(&decoys);
    let _ = fs::remove_dir_all(&dir_decoys);
    r.assert_exit(0);
    // Before the first call, and after the enablement changes.
    assert_eq!(fake.daemon_reloads(), 2);
}

#[test]
fn relative_path_entries_are_not_searched() {
    // `PATH=bin` run from the fake's directory would find bin/systemctl; a
    // relative entry depends on the working directory, so the host skips it.
    let fake = FakeSystemctl::example_units();
    let mut cmd = host_command();
    cmd.current_dir(fake.root())
        .env("PATH", "bin")
        .arg("run")
        .arg(example())
        .args(run_args())
        .arg("--json");
    let r = run(cmd);
    r.assert_exit(1);
    assert_eq!(fake.calls(), Vec::<String>::new());
    assert_eq!(r.json()["provider"]["available"], false);
}
