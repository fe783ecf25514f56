//! End-to-end: the monitoring mixin (dist/monitoring/) as Prometheus reads
//! it. `promtool check rules` accepts its rule files, and `promtool test
//! rules` runs their unit tests: every alert fires in one case and stays
//! quiet in another, on series shaped as the host writes them. (That every
//! alert has such cases, and that the rules and the dashboard name only the
//! host's metrics, is checked without promtool by the host's unit tests,
//! `report::catalogue::catalogue_docs`.)

use std::path::PathBuf;
use std::process::Command;

use policy_host_e2e::build::workspace_root;
use policy_host_e2e::outcome::text;
use policy_host_e2e::requires::e2e_test;

fn monitoring() -> PathBuf {
    workspace_root().join("dist/monitoring")
}

/// The `.yaml` files of `dir`, in name order, as paths relative to
/// dist/monitoring/.
fn yaml_files(dir: &str) -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(monitoring().join(dir))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".yaml"))
        .map(|name| format!("{dir}/{name}").trim_start_matches("./").to_owned())
        .collect();
    files.sort();
    files
}

#[track_caller]
fn promtool(args: &[&str], files: &[String]) -> String {
    let out = Command::new("promtool")
        .args(args)
        .args(files)
        .current_dir(monitoring())
        .output()
        .expect("run promtool (Debian's prometheus package)");
    let said = text(&out.stdout) + &text(&out.stderr);
    assert!(
        out.status.success(),
        "promtool {} {} ({}):\n{said}",
        args.join(" "),
        files.join(" "),
        out.status
    );
    said
}

#[e2e_test(requires = "promtool")]
fn promtool_accepts_the_rule_files() {
    let rules = yaml_files(".");
    assert_eq!(rules, ["alerts.yaml", "rules.yaml"]);
    let said = promtool(&["check", "rules"], &rules);
    assert_eq!(said.matches("SUCCESS").count(), rules.len(), "{said}");
}

#[e2e_test(requires = "promtool")]
fn the_rules_unit_tests_pass() {
    let tests = yaml_files("tests");
    assert!(tests.len() >= 2, "{tests:?}");
    let said = promtool(&["test", "rules"], &tests);
    assert_eq!(said.matches("SUCCESS").count(), tests.len(), "{said}");
    assert!(!said.contains("FAILED"), "{said}");
}
