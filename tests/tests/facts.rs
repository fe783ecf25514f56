//! Facts (issue 33) on a real systemd 252 in the sandbox: `host facts`
//! says what the machine's own files and tools say; host.toml's labels
//! select the manifest's entries (`when`), the rest are reported as not
//! applied, in `--noop` too; a fact the machine does not have stops the
//! run before anything changes; a bad label is refused, naming it; the
//! report and the metrics carry the labels.

use std::path::PathBuf;

use policy_host_e2e::machine::{machine, mutating_calls, Machine, Run};
use policy_host_e2e::metrics;
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
    m.sandbox.share_file(name, &format!("[labels]\n{labels}"))
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
