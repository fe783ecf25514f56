//! End-to-end: the host believes only what it did. A lying policy
//! (`tests/fixtures/hostile/liar`) runs through the real `host` binary
//! against the fake systemctl, and each test asserts what the operator sees:
//! the exit code, the summary, the metrics, the human report, and what a
//! later policy is told changed. Text a policy writes can neither drive the
//! terminal nor forge a line of the host's output.

use std::path::{Path, PathBuf};

use policy_host_e2e::build::{sign_file, signed_policy};
use policy_host_e2e::fake_systemctl::FakeSystemctl;
use policy_host_e2e::outcome::{resource, Run};
use policy_host_e2e::requires::e2e_test;
use serde_json::Value;

fn liar() -> PathBuf {
    signed_policy("hostile-liar")
}

fn host(fake: &FakeSystemctl, policies: &[&Path], mode: &str, args: &[&str]) -> Run {
    let settings = fake.root().join("mode.txt");
    std::fs::write(&settings, mode).unwrap();
    sign_file(&settings);
    let mut run = fake
        .host_run()
        .args(["--settings".as_ref(), settings.as_os_str()]);
    for policy in policies {
        run = run.policy(policy);
    }
    run.args(args).run()
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {value:#}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

#[e2e_test(requires = "promtool")]
fn changes_a_policy_leaves_out_of_its_report_are_reported_and_fail_the_run() {
    let fake = FakeSystemctl::new();
    fake.unit("sshd", "active", "enabled");
    let metrics = fake.root().join("policy_host.prom");
    let r = host(
        &fake,
        &[&liar()],
        "unreported",
        &[
            "--json",
            "--detailed-exitcodes",
            "--metrics",
            metrics.to_str().unwrap(),
        ],
    );
    assert_eq!(
        fake.mutating_calls(),
        [
            "stop --system -- sshd",
            "disable --no-reload --system -- sshd"
        ]
    );
    // Changes and a failure: 2 | 4.
    r.assert_exit(6);
    let json = r.json();
    let sshd = resource(&json, "sshd");
    assert_eq!(sshd["actions"], serde_json::json!(["stopped", "disabled"]));
    assert_eq!(sshd["changed"], true);
    assert_eq!(sshd["failed"], true);
    assert_eq!(sshd["requested"], Value::Null);
    assert_eq!(
        strings(&sshd["errors"]),
        ["sshd was stopped and disabled by the policy but not reported"]
    );
    // The parts add up: sshd is counted once, as failed (after changes).
    assert_eq!(json["summary"]["resources"], 1);
    assert_eq!(json["summary"]["changed"], 0);
    assert_eq!(json["summary"]["failed"], 1);
    assert_eq!(json["summary"]["failed_after_changes"], 1);
    assert_eq!(json["summary"]["unchanged"], 0);
    let metrics = policy_host_e2e::metrics::checked(&metrics);
    assert_eq!(metrics.value("policy_host_run_success"), 0.0);
    assert_eq!(
        metrics.value("policy_host_resources{state=\"changed\"}"),
        0.0
    );
    assert_eq!(
        metrics.value("policy_host_resources{state=\"failed\"}"),
        1.0
    );

    // The human report names sshd and what was done to it.
    fake.unit("sshd", "active", "enabled");
    let human = host(&fake, &[&liar()], "unreported", &[]);
    human.assert_exit(1);
    let line = human
        .stdout
        .lines()
        .find(|l| l.starts_with("service#sshd"))
        .unwrap_or_else(|| panic!("sshd is not named:\n{}", human.stdout));
    assert!(
        line.contains("FAILED (after stopped, disabled): sshd was stopped and disabled by the policy but not reported"),
        "{line}"
    );
    // The summary counts sshd once: failed, after changes.
    assert!(
        human.stdout.contains(
            ": 1 resource, 0 changed, 1 failed (1 after changes), 0 unchanged; 2 changes made"
        ),
        "{}",
        human.stdout
    );
}

#[test]
fn a_policy_that_fails_before_applying_anything_says_so_and_is_counted() {
    let fake = FakeSystemctl::new();
    fake.unit("web", "inactive", "disabled");
    let panic = signed_policy("hostile-panic");
    let human = fake.host_run().policy(&panic).run();
    human.assert_exit(1);
    assert!(
        human.stdout.contains(
            "hostile_panic.wasm: the policy failed before applying anything; 0 changes made"
        ),
        "{}",
        human.stdout
    );
    assert!(!human.stdout.contains("0 resources"), "{}", human.stdout);
    // With a policy that converges beside it, the combined line counts it.
    let example = signed_policy("example-policy");
    fake.example_units_unconverged();
    let both = fake
        .host_run()
        .policy(&example)
        .policy(&panic)
        .args(["--json"])
        .run();
    both.assert_exit(1);
    let json = both.json();
    assert_eq!(json["summary"]["policies_failed"], 1, "{json:#}");
    assert_eq!(json["summary"]["resources"], 3, "{json:#}");
    assert_eq!(json["summary"]["changed"], 3, "{json:#}");
    let human = fake.host_run().policy(&example).policy(&panic).run();
    assert!(
        human
            .stdout
            .contains("2 policies (1 failed): 3 resources, 0 changed, 0 failed, 3 unchanged in "),
        "{}",
        human.stdout
    );
}

#[test]
fn claims_without_calls_fail_and_are_not_passed_on_as_changes() {
    let fake = FakeSystemctl::new();
    fake.unit("web", "inactive", "disabled");
    let r = host(
        &fake,
        &[&liar()],
        "phantom",
        &["--json", "--detailed-exitcodes"],
    );
    assert_eq!(fake.mutating_calls(), Vec::<String>::new());
    // A failure, and no change: 4, not 2.
    r.assert_exit(4);
    let json = r.json();
    let web = resource(&json, "web");
    assert_eq!(web["changed"], false);
    assert_eq!(
        web["source"], "host",
        "outcomes come from the host's record"
    );
    assert_eq!(web["actions"], serde_json::json!([]));
    assert_eq!(web["final"], Value::Null, "the host never saw its state");
    assert_eq!(
        strings(&web["errors"]),
        [
            "the policy reported web started, but no start was executed",
            "the policy reported web enabled, but no enable was executed",
        ]
    );
    assert_eq!(json["summary"]["changed"], 0);
}

#[test]
fn a_later_policy_is_refreshed_only_by_changes_the_host_made() {
    // `host run liar.wasm manifest.wasm`: the liar claims it started web;
    // the manifest subscribes web-proxy to service#web. Were the claim
    // believed, web-proxy would be restarted.
    let fake = FakeSystemctl::new();
    fake.unit("web", "inactive", "disabled")
        .unit("web-proxy", "active", "enabled");
    let settings =
        "# mode: phantom\n- service:\n    - web-proxy:\n        subscribe: [service#web]\n";
    let r = host(
        &fake,
        &[&liar(), &signed_policy("manifest-policy")],
        settings,
        &["--json"],
    );
    let json = r.json();
    let policies = json["policies"].as_array().expect("two reports");
    assert_eq!(policies.len(), 2);
    let proxy = resource(&policies[1], "web-proxy");
    assert_eq!(proxy["refreshed"], false, "{proxy:#}");
    assert_eq!(proxy["changed"], false);
    assert_eq!(fake.mutating_calls(), Vec::<String>::new());
    assert_eq!(json["summary"]["changed"], 0);
}

/// The characters no policy may put on the operator's terminal.
fn forbidden(c: char) -> bool {
    c.is_control() && c != '\n'
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}')
}

#[track_caller]
fn assert_terminal_safe(what: &str, text: &str) {
    if let Some((i, c)) = text.char_indices().find(|(_, c)| forbidden(*c)) {
        panic!("{what} holds {c:?} at byte {i}:\n{}", text.escape_debug());
    }
    for line in text.lines() {
        assert!(
            !line.starts_with(liar_text::FORGED_LINE) && !line.starts_with("host: info: all good"),
            "{what} has a forged line: {line:?}"
        );
        assert!(
            !line.starts_with("example.wasm:"),
            "{what} has a forged summary: {line:?}"
        );
    }
}

mod liar_text {
    pub(crate) const FORGED_LINE: &str = "service#sshd  unchanged";
}

#[test]
fn policy_text_cannot_drive_the_terminal_or_forge_lines() {
    for noop in [false, true] {
        let fake = FakeSystemctl::new();
        fake.unit("web", "active", "enabled");
        let mut args = vec!["-v", "--log-level", "info"];
        if noop {
            args.push("--noop");
        }
        let r = host(&fake, &[&liar()], "forged-text", &args);
        r.assert_exit(1);
        assert_terminal_safe("stdout", &r.stdout);
        assert_terminal_safe("stderr", &r.stderr);
        // The text is shown, escaped, not dropped.
        assert!(r.stdout.contains("\\x1b[2J"), "{}", r.stdout);
        assert!(r.stdout.contains("\\u{202e}"), "{}", r.stdout);
        // Every line of the policy's log keeps the host's prefix.
        let log: Vec<&str> = r
            .stdout
            .lines()
            .skip_while(|l| *l != "policy log:")
            .skip(1)
            .take_while(|l| l.starts_with("  | "))
            .collect();
        assert!(log.len() >= 3, "{}", r.stdout);
    }

    // The JSON report keeps the text whole: valid, lossless within bounds.
    let fake = FakeSystemctl::new();
    fake.unit("web", "active", "enabled");
    let r = host(&fake, &[&liar()], "forged-text", &["--json"]);
    let json = r.json();
    let errors = strings(&resource(&json, "web")["errors"]);
    assert!(
        errors.iter().any(|e| e.contains("\x1b]52;c;")),
        "{errors:?}"
    );
}
