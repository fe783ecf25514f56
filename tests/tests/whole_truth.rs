//! What the machine says is the whole truth, under a watch on a real
//! systemd: with one policy failing and another repaired by a run for its
//! event, the report, the metrics and `host status` still say the machine
//! is not well, and which policy fails; a refused settings document shows
//! in all three; a `--noop` run does not overwrite them; a unit someone
//! keeps stopping is held back as a fight, not called a crash loop, and
//! the machine is not well while it is held.

use std::time::Duration;

use policy_host_e2e::build;
use policy_host_e2e::machine::{machine, Machine};
use policy_host_e2e::metrics::{self, Samples};
use policy_host_e2e::requires::e2e_test;
use policy_host_e2e::watching::{eventually, start_watch_as, unit_journal};
use serde_json::Value;

const UNIT: &str = "ph-truth";
const DIR: &str = "/etc/ph-truth";
const CONFIG: &str = "/etc/ph-truth/host.toml";
const REPORT: &str = "/var/lib/ph-truth/last-run.json";
const METRICS: &str = "/var/lib/ph-truth/textfile/policy-host.prom";
/// The two policies' names in the metrics: the manifest policy twice.
const FAILING: &str = "manifest_policy.wasm";
const HEALTHY: &str = "manifest_policy.wasm#2";

/// Signs `manifest` and installs it (and its signature) at `DIR/name`.
fn install(m: &Machine, name: &str, manifest: &str) {
    let signed = m.sandbox.share_file(name, manifest);
    build::sign_file(&signed);
    let signature = build::signature_path(&signed);
    let script = format!(
        "mkdir -p {DIR} && cp \"$1\" {DIR}/{name}.new && cp \"$2\" {DIR}/{name}.minisig && mv {DIR}/{name}.new {DIR}/{name}"
    );
    let out = m.sandbox.exec(&[
        "sh",
        "-c",
        &script,
        "sh",
        signed.to_str().unwrap(),
        signature.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
}

/// host.toml: the report, the metrics, and two policies: the first
/// manages a unit that does not exist (it fails at every run), the second
/// a healthy one.
fn configure(m: &Machine) {
    install(
        m,
        "failing.yaml",
        "- service:\n    - wt-missing:\n        ensure: running\n",
    );
    install(
        m,
        "healthy.yaml",
        "- service:\n    - wt-web:\n        ensure: running\n",
    );
    write_config(m, &["failing.yaml", "healthy.yaml"]);
}

/// host.toml: the report, the metrics, the state, and the manifest policy
/// once with each of `settings` (in `DIR`).
fn write_config(m: &Machine, settings: &[&str]) {
    let policy = m.policy.to_str().unwrap();
    let mut toml = format!(
        "report_file = \"{REPORT}\"\nmetrics_file = \"{METRICS}\"\nstate_dir = \"/var/lib/ph-truth/state\"\n"
    );
    for name in settings {
        toml.push_str(&format!(
            "[[policy]]\nsource = \"{policy}\"\nsettings = \"{DIR}/{name}\"\n"
        ));
    }
    m.sandbox.write_file(CONFIG, &toml);
}

fn start_watch(m: &Machine) {
    start_watch_as(m, UNIT, &["--config", CONFIG]);
}

fn journal(m: &Machine) -> String {
    unit_journal(m, UNIT)
}

fn report(m: &Machine) -> Value {
    let out = m.sandbox.exec(&["cat", REPORT]);
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

fn metrics(m: &Machine) -> Samples {
    let out = m.sandbox.exec(&["cat", METRICS]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    metrics::check_text(&text);
    metrics::parse(&text)
}

/// `host status --config` (human, or `--json`): its exit code and output.
fn status(m: &Machine, json: bool) -> (i32, String) {
    let mut args = vec![m.host.to_str().unwrap(), "status", "--config", CONFIG];
    if json {
        args.push("--json");
    }
    let out = m.sandbox.exec(&args);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// The policy `n` (0: the failing one) of the report.
fn policy(report: &Value, n: usize) -> &Value {
    &report["policies"][n]
}

#[e2e_test(requires = "root, systemd, minisign, promtool")]
fn under_the_watch_a_failing_policy_keeps_the_machine_unwell_through_another_policys_repair() {
    let m = machine();
    m.service("wt-web", true, true);
    configure(&m);
    start_watch(&m);
    wait_quiet_on(&m);

    // wt-web stopped: a run of the healthy policy alone repairs it.
    m.sandbox.systemctl_ok(&["stop", "wt-web"]);
    assert!(
        eventually(Duration::from_secs(10), || {
            let r = report(&m);
            m.sandbox.is_active("wt-web") == "active"
                && r["last_run"]["cause"] == "event"
                && r["last_run"]["policies"]
                    .as_array()
                    .is_some_and(|p| p.len() == 1)
        }),
        "no event run of the healthy policy alone:\n{:#}\n{}",
        report(&m),
        journal(&m)
    );
    let r = report(&m);
    assert_eq!(r["summary"]["success"], false, "{r:#}");
    assert_eq!(r["summary"]["policies_failed"], 1, "{r:#}");
    let failing = policy(&r, 0);
    assert_eq!(failing["outcome"], "failed", "{r:#}");
    assert_eq!(
        failing["current"], false,
        "the event run did not take it: {r:#}"
    );
    assert_eq!(
        failing["resources"][0]["resource"], "service#wt-missing",
        "{r:#}"
    );
    let healthy = policy(&r, 1);
    assert_eq!(healthy["current"], true, "{r:#}");
    // The repair, or the follow-up run that found nothing left to do.
    assert!(
        ["changed", "unchanged"].contains(&healthy["outcome"].as_str().unwrap_or_default()),
        "{r:#}"
    );
    assert_eq!(healthy["repairs"], 1, "the start that repaired it: {r:#}");
    assert_eq!(healthy["cause"], "event", "{r:#}");
    let samples = metrics(&m);
    assert_eq!(samples.value("policy_host_run_success"), 0.0);
    assert_eq!(
        samples.value(&format!(
            "policy_host_policy_success{{policy=\"{FAILING}\"}}"
        )),
        0.0
    );
    assert_eq!(
        samples.value(&format!(
            "policy_host_policy_success{{policy=\"{HEALTHY}\"}}"
        )),
        1.0
    );
    assert_eq!(
        samples.value("policy_host_last_run_info{drive=\"watch\",cause=\"event\"}"),
        1.0
    );
    assert_eq!(samples.value("policy_host_watch_up"), 1.0);
    let (code, said) = status(&m, false);
    assert_eq!(code, 1, "{said}");
    assert!(
        said.starts_with("machine: NOT WELL: 1 of 2 policies failed"),
        "{said}"
    );
    assert!(said.contains("driven by the watch (pid "), "{said}");
    assert!(said.contains("last event run "), "{said}");
    assert!(said.contains("next resync "), "{said}");
    assert!(
        said.lines()
            .any(|l| l.starts_with(&format!("policy {FAILING}: FAILED ("))
                && l.contains("not in the last run")),
        "{said}"
    );
    assert!(said.contains("  failed: service#wt-missing: "), "{said}");

    // A --noop run by hand says what it would do, apart: the machine's
    // state and its metrics stay as the real runs left them.
    let noop = m.sandbox.exec(&[
        m.host.to_str().unwrap(),
        "run",
        "--noop",
        "--config",
        CONFIG,
        "--trusted-key",
        m.trusted_key.to_str().unwrap(),
    ]);
    assert_eq!(noop.status.code(), Some(1), "{noop:?}");
    let r = report(&m);
    assert_eq!(r["summary"]["success"], false, "{r:#}");
    assert_eq!(r["noop_run"]["drive"], "manual", "{r:#}");
    assert_eq!(r["last_run"]["drive"], "watch", "{r:#}");
    let samples = metrics(&m);
    assert_eq!(samples.value("policy_host_run_success"), 0.0);
    assert!(samples.value("policy_host_noop_last_run_timestamp_seconds") > 1.7e9);
    let (_, said) = status(&m, false);
    assert!(said.contains("last --noop run: "), "{said}");
    assert!(said.contains("(apart from the machine's state)"), "{said}");

    // The healthy policy's settings replaced by an unsigned copy: refused,
    // and said so in the report, the metrics and the status.
    let out = m.sandbox.exec(&[
        "sh",
        "-c",
        &format!("printf -- '- service:\\n    - wt-web:\\n        ensure: stopped\\n' > {DIR}/healthy.yaml.new && mv {DIR}/healthy.yaml.new {DIR}/healthy.yaml"),
    ]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        eventually(Duration::from_secs(10), || policy(&report(&m), 1)
            ["outcome"]
            == "refused"),
        "the unsigned settings were not refused:\n{:#}\n{}",
        report(&m),
        journal(&m)
    );
    assert_eq!(
        m.sandbox.is_active("wt-web"),
        "active",
        "its units are left alone"
    );
    let r = report(&m);
    assert_eq!(r["summary"]["policies_refused"], 1, "{r:#}");
    assert!(
        policy(&r, 1)["refused"]
            .as_str()
            .is_some_and(|w| !w.is_empty()),
        "{r:#}"
    );
    let samples = metrics(&m);
    assert_eq!(
        samples.value(&format!(
            "policy_host_policy_refused{{policy=\"{HEALTHY}\"}}"
        )),
        1.0
    );
    assert_eq!(
        samples.value(&format!(
            "policy_host_policy_refused{{policy=\"{FAILING}\"}}"
        )),
        0.0
    );
    let (code, said) = status(&m, false);
    assert_eq!(code, 1, "{said}");
    assert!(said.contains("1 refused"), "{said}");
    assert!(said.contains(": REFUSED ("), "{said}");
    let (_, json) = status(&m, true);
    let json: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["driver"], "watch", "{json:#}");
    assert_eq!(
        json["last_run"]["policies"][1]["outcome"], "refused",
        "{json:#}"
    );

    // The watch stops: monitoring sees it stop, not a watch gone quiet.
    m.sandbox.systemctl_ok(&["stop", UNIT]);
    assert_eq!(metrics(&m).value("policy_host_watch_up"), 0.0);
    let (_, said) = status(&m, false);
    assert!(said.contains("driven by nothing"), "{said}");
}

#[e2e_test(requires = "root, systemd, minisign, promtool")]
fn a_unit_someone_keeps_stopping_is_held_back_as_a_fight_and_the_machine_is_not_well() {
    let m = machine();
    m.service("wt-web", true, true);
    install(
        &m,
        "healthy.yaml",
        "- service:\n    - wt-web:\n        ensure: running\n",
    );
    write_config(&m, &["healthy.yaml"]);
    start_watch(&m);
    wait_quiet_on(&m);
    // Stopped by hand three times, each time after the watch started it
    // again: the third start begins a hold.
    for round in 0..3 {
        m.sandbox.systemctl_ok(&["stop", "wt-web"]);
        assert!(
            eventually(Duration::from_secs(10), || m.sandbox.is_active("wt-web")
                == "active"),
            "round {round}: not started again:\n{}",
            journal(&m)
        );
        // Past the start's settle window: a stop now is someone's, not
        // the start failing.
        wait_quiet_on(&m);
    }
    let said = journal(&m);
    let hold = said
        .lines()
        .find(|l| l.contains("held back for"))
        .unwrap_or_else(|| panic!("no hold:\n{said}"));
    assert!(hold.contains("wt-web.service"), "{hold}");
    assert!(hold.contains("someone stopped it each time"), "{hold}");
    assert!(hold.contains("(a fight"), "{hold}");
    assert!(!hold.contains("crash loop"), "{hold}");
    // The machine is not well while the unit is held, and says why.
    let r = report(&m);
    assert_eq!(r["summary"]["units_held_back"], 1, "{r:#}");
    assert_eq!(r["summary"]["success"], false, "{r:#}");
    let samples = metrics(&m);
    assert_eq!(samples.value("policy_host_run_success"), 0.0);
    assert_eq!(
        samples.value("policy_host_units_left_alone{reason=\"held\"}"),
        1.0
    );
    assert_eq!(
        samples.value("policy_host_watch_holds_total{reason=\"fight\"}"),
        1.0
    );
    assert_eq!(
        samples.value("policy_host_watch_holds_total{reason=\"crash_loop\"}"),
        0.0
    );
    let (code, said) = status(&m, false);
    assert_eq!(code, 1, "{said}");
    assert!(said.contains("1 unit held back"), "{said}");
    assert!(said.contains("held back: wt-web.service: "), "{said}");
    m.sandbox.systemctl_ok(&["stop", UNIT]);
}

/// Waits until no run has written the report for 1 s.
fn wait_quiet_on(m: &Machine) {
    let stamp = || {
        let out = m.sandbox.exec(&["stat", "-c", "%Y.%y", REPORT]);
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let mut last = stamp();
    let mut quiet = 0;
    for _ in 0..100 {
        std::thread::sleep(Duration::from_millis(100));
        let now = stamp();
        if now == last {
            quiet += 1;
            if quiet >= 10 {
                return;
            }
        } else {
            quiet = 0;
            last = now;
        }
    }
    panic!("the watch did not become quiet:\n{}", journal(m));
}
