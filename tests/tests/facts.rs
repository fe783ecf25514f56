//! Facts (issue 33) on a real systemd 252 in the sandbox: `host facts`
//! says what the machine's own files and tools say; host.toml's labels
//! select the manifest's entries (`when`), the rest are reported as not
//! applied, in `--noop` too; a fact the machine does not have stops the
//! run before anything changes; a bad label is refused, naming it; the
//! report and the metrics carry the labels. Against the fake `systemctl`:
//! one unit with an entry per role converges on each kind of machine.

use std::fs;
use std::path::{Path, PathBuf};

use policy_host_e2e::build::{sign_file, signed_policy};
use policy_host_e2e::fake_systemctl::FakeSystemctl;
use policy_host_e2e::machine::{machine, mutating_calls, Machine, Run};
use policy_host_e2e::metrics;
use policy_host_e2e::outcome;
use policy_host_e2e::requires::e2e_test;
use serde_json::Value;

/// One manifest for the whole fleet: each machine takes its part.
const FLEET: &str = "\
- service:
    - fa-common:
    - fa-web:
        when: { role: web }
    - fa-db:
        when: { role: db, hostname: \"*\" }
- when: { os.id: debian, arch: \"[a-z]*\" }
  service:
    - fa-php:
        when: { role: web }
";

/// host.toml with `labels` (TOML lines under `[labels]`), shared into the
/// sandbox.
fn host_toml(m: &Machine, name: &str, labels: &str) -> PathBuf {
    m.sandbox.share_file(name, format!("[labels]\n{labels}"))
}

/// `sh -c SCRIPT` in the sandbox: its stdout, trimmed.
fn sh(m: &Machine, script: &str) -> String {
    let out = m.sandbox.exec(&["sh", "-c", script]);
    assert!(out.status.success(), "{script}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn host(m: &Machine, args: &[&str]) -> Run {
    let mut command = vec![m.host.to_str().unwrap()];
    command.extend_from_slice(args);
    let out = m.sandbox.exec(&command);
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[e2e_test(requires = "root, systemd")]
fn host_facts_says_what_the_machines_files_say() {
    let m = machine();
    let config = host_toml(&m, "host.toml", "role = \"web\"\nsite = \"fra1\"\n");
    let run = host(
        &m,
        &["facts", "--json", "--config", config.to_str().unwrap()],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let json: Value = serde_json::from_str(&run.stdout).expect("JSON");
    let facts = &json["facts"];
    let os_release = |key: &str| sh(&m, &format!(". /etc/os-release; printf %s \"${key}\""));
    assert_eq!(facts["hostname"], sh(&m, "cat /proc/sys/kernel/hostname"));
    assert_eq!(facts["os.id"], os_release("ID"));
    assert_eq!(facts["os.version_id"], os_release("VERSION_ID"));
    assert_eq!(facts["os.version_codename"], os_release("VERSION_CODENAME"));
    assert_eq!(facts["arch"], sh(&m, "dpkg --print-architecture"));
    assert_eq!(facts["kernel.release"], sh(&m, "uname -r"));
    assert_eq!(facts["cpus"], sh(&m, "getconf _NPROCESSORS_ONLN"));
    assert_eq!(
        facts["memory_mib"],
        sh(
            &m,
            "awk '/^MemTotal:/ { print int($2 / 1024) }' /proc/meminfo"
        )
    );
    assert_eq!(
        facts["systemd.version"],
        sh(&m, "systemctl --version | awk 'NR == 1 { print $2 }'")
    );
    assert_eq!(
        facts["host.version"],
        sh(
            &m,
            &format!("{} --version | awk '{{ print $2 }}'", m.host.display())
        )
    );
    assert_eq!(facts["role"], "web");
    assert_eq!(
        json["labels"],
        serde_json::json!({"role": "web", "site": "fra1"})
    );
    // Nothing secret: no machine id, no address.
    let machine_id = sh(&m, "cat /etc/machine-id");
    assert!(!run.stdout.contains(&machine_id), "{}", run.stdout);

    // The human form: one line per fact, the labels after the gathered ones.
    let run = host(&m, &["facts", "--config", config.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{run:?}");
    let names: Vec<&str> = run
        .stdout
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(names.first(), Some(&"hostname"), "{}", run.stdout);
    assert_eq!(
        &names[names.len() - 2..],
        ["role", "site"],
        "{}",
        run.stdout
    );
}

#[e2e_test(requires = "root, systemd, promtool")]
fn labels_select_the_manifests_entries_and_reports_say_what_was_left_out() {
    let m = machine();
    for name in ["fa-common", "fa-web", "fa-db", "fa-php"] {
        m.service(name, false, false);
    }
    let config = host_toml(&m, "host-web.toml", "role = \"web\"\nsite = \"fra1\"\n");
    let config = config.to_str().unwrap();

    // --noop says what would be done, and what is not for this machine.
    let run = m.run(FLEET, &["--config", config, "--noop"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("service#fa-db")
            && run
                .stdout
                .contains("not applied: when role = db (this machine: web)"),
        "{run:?}"
    );
    assert_eq!(m.sandbox.is_active("fa-web"), "inactive");

    let metrics_file = "/var/lib/fa-metrics/policy_host.prom";
    let run = m.run(
        FLEET,
        &["--config", config, "--json", "--metrics", metrics_file],
    );
    let report = run.report();
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        mutating_calls(&report),
        ["start fa-common", "start fa-web", "start fa-php"],
        "{report:#}"
    );
    assert_eq!(m.sandbox.is_active("fa-db"), "inactive", "left alone");
    assert_eq!(
        report["left_out"],
        serde_json::json!([{
            "resource": "service#fa-db",
            "why": "when role = db (this machine: web)"
        }])
    );
    assert_eq!(report["summary"]["left_out"], 1);
    assert_eq!(report["summary"]["resources"], 3);
    assert_eq!(
        report["labels"],
        serde_json::json!({"role": "web", "site": "fra1"})
    );
    let text = sh(&m, &format!("cat {metrics_file}")) + "\n";
    metrics::check_text(&text);
    let samples = metrics::parse(&text);
    assert_eq!(
        samples.value(
            "policy_host_resources{state=\"changed\",label_role=\"web\",label_site=\"fra1\"}"
        ),
        3.0
    );
    assert_eq!(
        samples.value("policy_host_resources_not_applied{label_role=\"web\",label_site=\"fra1\"}"),
        1.0
    );

    // The same signed manifest on a database machine.
    let config = host_toml(&m, "host-db.toml", "role = \"db\"\n");
    let run = m.run(FLEET, &["--config", config.to_str().unwrap(), "--json"]);
    let report = run.report();
    assert_eq!(mutating_calls(&report), ["start fa-db"], "{report:#}");
    let left: Vec<&str> = report["left_out"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["resource"].as_str().unwrap())
        .collect();
    assert_eq!(left, ["service#fa-web", "service#fa-php"]);
}

#[e2e_test(requires = "root, systemd")]
fn a_fact_the_machine_does_not_have_stops_the_run_before_anything_changes() {
    let m = machine();
    m.service("fa-web", false, false);
    let config = host_toml(&m, "host.toml", "role = \"web\"\n");
    let run = m.run(
        "- service:\n    - fa-web:\n        when: { rolle: web }\n",
        &["--config", config.to_str().unwrap()],
    );
    assert_ne!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("`rolle` is not a fact of this machine")
            || run.stderr.contains("`rolle` is not a fact of this machine"),
        "{run:?}"
    );
    assert_eq!(
        m.sandbox.is_active("fa-web"),
        "inactive",
        "nothing was applied"
    );
}

#[e2e_test(requires = "root, systemd")]
fn a_bad_label_is_refused_naming_it_and_nothing_runs() {
    let m = machine();
    m.service("fa-web", false, false);
    let long = "x".repeat(300);
    for (labels, said) in [
        (format!("role = \"{long}\"\n"), "256"),
        ("\"ro le\" = \"web\"\n".to_owned(), "ro le"),
        ("role = \"web/1\"\n".to_owned(), "web/1"),
        ("hostname = \"x\"\n".to_owned(), "hostname"),
    ] {
        let config = host_toml(&m, "bad.toml", &labels);
        let run = m.run(
            "- service:\n    - fa-web:\n",
            &["--config", config.to_str().unwrap()],
        );
        assert_ne!(run.code, 0, "{labels}: {run:?}");
        assert!(
            run.stderr.contains("labels") && run.stderr.contains(said),
            "{labels}: {run:?}"
        );
        assert_eq!(m.sandbox.is_active("fa-web"), "inactive", "{labels}");
        let run = host(&m, &["facts", "--config", config.to_str().unwrap()]);
        assert_ne!(run.code, 0, "{labels}: {run:?}");
        assert!(run.stderr.contains(said), "{labels}: {run:?}");
    }
}

/// One unit for the whole fleet, an entry per role (issue 43): `app` is
/// stopped on database machines and runs on web ones.
const ONE_UNIT_PER_ROLE: &str = "\
- service:
    - app:
        ensure: stopped
        when: { role: db }
    - app:
        ensure: running
        when: { role: web }
";

/// `host run manifest.wasm --settings ONE_UNIT_PER_ROLE` against `fake`,
/// labelled by `config`, with metrics written to `metrics`.
fn run_one_unit_per_role(
    fake: &FakeSystemctl,
    config: &Path,
    metrics: &Path,
    args: &[&str],
) -> outcome::Run {
    let settings = fake.root().join("site.yaml");
    fs::write(&settings, ONE_UNIT_PER_ROLE).unwrap();
    sign_file(&settings);
    fake.host_run()
        .policy(signed_policy("manifest-policy"))
        .args(["--config".as_ref(), config.as_os_str()])
        .args(["--settings".as_ref(), settings.as_os_str()])
        .args(["--metrics".as_ref(), metrics.as_os_str()])
        .args(args)
        .run()
}

/// `policy_host_run_success` in the metrics file (read without promtool:
/// the metrics' format is checked by the tests above).
fn run_success(metrics: &Path) -> f64 {
    let text = fs::read_to_string(metrics).expect("the metrics file");
    metrics::parse(&text)
        .0
        .iter()
        .find(|(series, _)| series.starts_with("policy_host_run_success"))
        .map(|(_, value)| *value)
        .unwrap_or_else(|| panic!("no policy_host_run_success in\n{text}"))
}

#[test]
fn one_unit_with_an_entry_per_role_converges_on_every_kind_of_machine() {
    for (role, other) in [("web", "db"), ("db", "web")] {
        // Found the other role's way; converged to this role's.
        let (found, wanted, call, line) = if role == "web" {
            ("inactive", "active", "start --system -- app", "started")
        } else {
            ("active", "inactive", "stop --system -- app", "stopped")
        };
        let fake = FakeSystemctl::new();
        fake.unit("app", found, "disabled");
        let config = fake.root().join("host.toml");
        fs::write(&config, format!("[labels]\nrole = \"{role}\"\n")).unwrap();
        let metrics = fake.root().join("policy_host.prom");
        // The entry of the other role is said, with the one that applies.
        let why = format!(
            "when role = {other} (this machine: {role}); app is applied here by \
             item 1's entry {n} (when role = {role})",
            n = if role == "db" { 1 } else { 2 },
        );

        // --noop: what would be done, and nothing said to contradict it.
        let noop = run_one_unit_per_role(&fake, &config, &metrics, &["--noop", "--json"]);
        noop.assert_exit(0);
        let report = noop.json();
        assert_eq!(
            report["errors"],
            serde_json::json!([]),
            "{role}: {report:#}"
        );
        assert_eq!(report["summary"]["success"], true, "{role}: {report:#}");
        assert_eq!(
            report["left_out"],
            serde_json::json!([{"resource": "service#app", "why": why, "unit_applied": true}]),
            "{role}"
        );
        assert_eq!(
            report["summary"]["left_out"], 0,
            "{role}: the unit is applied"
        );
        assert_eq!(fake.mutating_calls(), Vec::<String>::new(), "{role}");
        assert_eq!(run_success(&metrics), 1.0, "{role} --noop");

        // The run converges the unit to this role's entry.
        let run = run_one_unit_per_role(&fake, &config, &metrics, &[]);
        run.assert_exit(0);
        assert_eq!(fake.mutating_calls(), [call], "{role}: {run:?}");
        assert_eq!(fake.active("app").as_deref(), Some(wanted), "{role}");
        assert_eq!(run_success(&metrics), 1.0, "{role}");
        assert!(!run.stdout.contains("error"), "{role}: {}", run.stdout);
        let said: Vec<&str> = run
            .stdout
            .lines()
            .filter(|l| l.starts_with("service#app"))
            .collect();
        assert_eq!(said.len(), 2, "{role}: {}", run.stdout);
        assert!(said[0].ends_with(line), "{role}: {}", run.stdout);
        assert!(
            said[1].contains(&format!("other entry not applied: {why}")),
            "{role}: {}",
            run.stdout
        );
        assert!(
            !run.stdout.contains("not applied on this machine"),
            "{role}: the unit was applied: {}",
            run.stdout
        );

        // Then nothing is left to do.
        fake.clear_calls();
        let again = run_one_unit_per_role(&fake, &config, &metrics, &["--json"]);
        again.assert_exit(0);
        assert_eq!(again.json()["summary"]["changed"], 0, "{role}");
        assert_eq!(fake.mutating_calls(), Vec::<String>::new(), "{role}");
        assert_eq!(run_success(&metrics), 1.0, "{role}");
    }
}
