//! End-to-end: what operators see and collect — several policies in one run,
//! the report and metrics files, -v/-q, colour, `host inspect`, completions,
//! the man page and JSON logs — with the real host and the fake systemctl.

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use policy_host_e2e::build::{
    host_binary, host_command, policy_wasm, run_args, sign_file, signed_policy, test_key,
    trust_args,
};
use policy_host_e2e::fake_systemctl::{temp_dir, FakeSystemctl};
use policy_host_e2e::outcome::text;
use policy_host_e2e::requires::e2e_test;
use serde_json::Value;

fn host_run(fake: &FakeSystemctl, args: &[&std::ffi::OsStr]) -> Output {
    fake.host_run().args(args).output()
}

#[track_caller]
fn assert_code(out: &Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "--- stdout\n{}\n--- stderr\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// The harness runs the binary cargo built for these tests.
#[test]
fn the_harness_runs_the_host_cargo_built_for_these_tests() {
    assert_eq!(
        policy_host_e2e::build::host_binary(),
        std::path::PathBuf::from(env!("CARGO_BIN_EXE_host"))
    );
}

#[test]
fn a_directory_of_policies_runs_in_name_order_and_later_ones_see_earlier_changes() {
    let fake = FakeSystemctl::example_units();
    fake.unit("web", "active", "enabled");
    let dir = fake.root().join("policies");
    fs::create_dir(&dir).unwrap();
    for package in ["example-policy", "manifest-policy"] {
        let signed = signed_policy(package);
        let name = signed.file_name().unwrap();
        fs::copy(&signed, dir.join(name)).unwrap();
        let mut sig = signed.clone().into_os_string();
        sig.push(".minisig");
        let mut target = dir.join(name).into_os_string();
        target.push(".minisig");
        fs::copy(sig, target).unwrap();
    }
    let site = fake.root().join("site.yaml");
    fs::write(
        &site,
        "- service:\n    - web:\n        subscribe: [service#httpd]\n",
    )
    .unwrap();
    sign_file(&site);
    let out = host_run(
        &fake,
        &[
            dir.as_os_str(),
            "--settings".as_ref(),
            site.as_os_str(),
            "--json".as_ref(),
        ],
    );
    assert_code(&out, 0);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let policies = report["policies"]
        .as_array()
        .expect("one report with every policy");
    let names: Vec<&str> = policies
        .iter()
        .map(|p| p["policy"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["example_policy.wasm", "manifest_policy.wasm"]);
    assert_eq!(report["summary"]["resources"], 4);
    assert_eq!(report["summary"]["changed"], 4);
    assert_eq!(
        policies[1]["resources"][0]["actions"],
        serde_json::json!(["restarted"]),
        "web subscribes to service#httpd, which the first policy started"
    );
    assert_eq!(
        fake.daemon_reloads(),
        2,
        "one reload before the first call and one after the last enablement change, for both policies"
    );
    assert_eq!(fake.calls().last().unwrap(), "daemon-reload");
}

#[e2e_test(requires = "promtool")]
fn report_and_metrics_files_are_written() {
    let fake = FakeSystemctl::example_units();
    let report_file = fake.root().join("reports/last-run.json");
    let metrics_file = fake.root().join("textfile/policy-host.prom");
    let policy = signed_policy("example-policy");
    let out = host_run(
        &fake,
        &[
            policy.as_os_str(),
            "--report".as_ref(),
            report_file.as_os_str(),
            "--metrics".as_ref(),
            metrics_file.as_os_str(),
        ],
    );
    assert_code(&out, 0);
    let report: Value = serde_json::from_str(&fs::read_to_string(&report_file).unwrap()).unwrap();
    assert_eq!(report["summary"]["changed"], 3);
    assert_eq!(report["summary"]["success"], true);
    policy_host_e2e::metrics::checked(&metrics_file);
    let metrics = fs::read_to_string(&metrics_file).unwrap();
    for line in [
        "policy_host_resources{state=\"total\"} 3",
        "policy_host_resources{state=\"changed\"} 3",
        "policy_host_resources{state=\"failed\"} 0",
        "policy_host_resources{state=\"unchanged\"} 0",
        "policy_host_run_success 1",
        "# TYPE policy_host_run_duration_seconds gauge",
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "{line:?} missing from:\n{metrics}"
        );
    }
    let stamp: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("policy_host_last_run_timestamp_seconds "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(stamp > 1.7e9, "{stamp}");
    let leftovers: Vec<_> = fs::read_dir(report_file.parent().unwrap())
        .unwrap()
        .collect();
    assert_eq!(
        leftovers.len(),
        1,
        "no temporary files left beside the report"
    );
}

#[e2e_test(requires = "promtool")]
fn a_run_that_cannot_happen_still_reports_failure_to_monitoring() {
    let fake = FakeSystemctl::example_units();
    let dir = temp_dir("unsigned-metrics");
    let policy = dir.join("p.wasm");
    fs::copy(policy_wasm("example-policy"), &policy).unwrap();
    let metrics_file = dir.join("m.prom");
    let report_file = dir.join("r.json");
    let out = host_run(
        &fake,
        &[
            policy.as_os_str(),
            "--metrics".as_ref(),
            metrics_file.as_os_str(),
            "--report".as_ref(),
            report_file.as_os_str(),
        ],
    );
    assert_code(&out, 1);
    let metrics = policy_host_e2e::metrics::checked(&metrics_file);
    assert_eq!(metrics.value("policy_host_run_success"), 0.0);
    let report: Value = serde_json::from_str(&fs::read_to_string(&report_file).unwrap()).unwrap();
    assert!(
        report["error"].as_str().unwrap().contains("not signed"),
        "{report}"
    );
    assert_eq!(fake.calls(), Vec::<String>::new());
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn verbose_lists_every_call_and_quiet_prints_only_failures() {
    let fake = FakeSystemctl::example_units();
    let policy = signed_policy("example-policy");
    let out = host_run(&fake, &[policy.as_os_str(), "-v".as_ref()]);
    assert_code(&out, 0);
    let said = text(&out.stdout);
    for call in [
        "daemon-reload",
        "status        httpd",
        "start         httpd",
        "enable        httpd",
    ] {
        assert!(
            said.contains(&format!("call {call}")),
            "{call:?} not listed:\n{said}"
        );
    }
    assert!(said.contains(" ms  ok"), "{said}");

    let fake = FakeSystemctl::example_units();
    let out = host_run(&fake, &[policy.as_os_str(), "-q".as_ref()]);
    assert_code(&out, 0);
    assert_eq!(
        text(&out.stdout),
        "",
        "nothing failed, so -q prints nothing"
    );

    let fake = FakeSystemctl::example_units();
    fake.fail("start", "httpd", 1, "Job for httpd.service failed.");
    let out = host_run(&fake, &[policy.as_os_str(), "-q".as_ref()]);
    assert_code(&out, 1);
    let lines: Vec<String> = text(&out.stdout).lines().map(String::from).collect();
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(
        lines[0].starts_with("service#httpd") && lines[0].contains("FAILED"),
        "{lines:?}"
    );
}

#[test]
fn human_output_is_one_line_per_resource_and_a_summary() {
    let fake = FakeSystemctl::example_units();
    let out = host_run(&fake, &[signed_policy("example-policy").as_os_str()]);
    assert_code(&out, 0);
    let said = text(&out.stdout);
    let lines: Vec<&str> = said.lines().collect();
    assert!(lines[0].starts_with("signed by key "), "{said}");
    assert!(
        lines[1].starts_with("service#httpd") && lines[1].ends_with("started, enabled"),
        "{said}"
    );
    assert!(lines[2].ends_with("stopped, disabled"), "{said}");
    assert!(
        lines[3].starts_with("service#metrics-agent") && lines[3].ends_with("started"),
        "{said}"
    );
    assert!(
        lines[4].contains("3 resources, 3 changed, 0 failed, 0 unchanged")
            && lines[4].contains(" in "),
        "{said}"
    );
}

/// Runs `host run` under `script`, which gives it a terminal.
fn on_a_terminal(fake: &FakeSystemctl, no_color: bool) -> String {
    let policy = signed_policy("example-policy");
    let key = test_key().public_key;
    let extra: Vec<String> = run_args()
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let command = format!(
        "{} run {} --trusted-key {} --noop {}",
        host_binary().display(),
        policy.display(),
        key.display(),
        extra.join(" ")
    );
    let mut cmd = fake.command("script");
    cmd.args(["-qec", &command, "/dev/null"]);
    if no_color {
        cmd.env("NO_COLOR", "1");
    }
    let out = cmd.output().expect("run script (util-linux)");
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
}

#[test]
fn colour_only_on_a_terminal_and_never_with_no_color() {
    let fake = FakeSystemctl::example_units();
    assert!(
        on_a_terminal(&fake, false).contains("\x1b["),
        "colour on a terminal"
    );
    assert!(
        !on_a_terminal(&fake, true).contains("\x1b["),
        "NO_COLOR disables colour"
    );
    let out = host_run(
        &fake,
        &[
            signed_policy("example-policy").as_os_str(),
            "--noop".as_ref(),
        ],
    );
    assert!(
        !text(&out.stdout).contains("\x1b["),
        "no colour into a pipe"
    );
}

fn sha256(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().unwrap();
    text(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}

#[test]
fn inspect_shows_size_digest_world_imports_exports_and_signer() {
    let policy = signed_policy("example-policy");
    let mut cmd = host_command();
    cmd.arg("inspect")
        .arg(&policy)
        .args(trust_args())
        .arg("--json");
    let out = cmd.output().unwrap();
    assert_code(&out, 0);
    let info: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(info["size"], fs::metadata(&policy).unwrap().len());
    assert_eq!(info["sha256"], sha256(&policy).as_str());
    assert_eq!(info["world"], "policy-host:policy/policy");
    let imports: Vec<&str> = info["imports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        imports.contains(&"policy-host:policy/service-provider@0.6.0"),
        "{imports:?}"
    );
    assert!(
        imports
            .iter()
            .all(|i| i.starts_with("wasi:") || i.starts_with("policy-host:policy/")),
        "{imports:?}"
    );
    assert_eq!(info["exports"], serde_json::json!(["run", "subscriptions"]));
    assert_eq!(info["signature"]["status"], "valid");
    let key_line = fs::read_to_string(test_key().public_key).unwrap();
    let key_id = key_line
        .lines()
        .next()
        .unwrap()
        .rsplit(' ')
        .next()
        .unwrap()
        .to_owned();
    assert_eq!(info["signature"]["key_id"], key_id.as_str());

    let other = policy_wasm("raw-calls-fixture").with_file_name("other-world.wasm");
    let out = host_command().arg("inspect").arg(&other).output().unwrap();
    assert_code(&out, 0);
    let said = text(&out.stdout);
    assert!(said.contains("world:     refused:"), "{said}");
    assert!(said.contains("signature: unsigned"), "{said}");
}

/// The `.cwasm` entries of a compile cache directory.
fn cache_entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .map(|entries| {
            entries
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".cwasm"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn compile_fills_the_cache_a_first_run_loads_and_refuses_what_is_not_signed_or_not_a_policy() {
    let fake = FakeSystemctl::example_units();
    let cache = fake.root().join("compiled");
    let policy = signed_policy("example-policy");
    let compile = |what: &Path| {
        host_command()
            .arg("compile")
            .arg(what)
            .args(trust_args())
            .arg("--cache-dir")
            .arg(&cache)
            .output()
            .unwrap()
    };
    let out = compile(&policy);
    assert_code(&out, 0);
    let said = text(&out.stdout);
    assert!(said.starts_with("compiled: "), "{said}");
    assert!(said.contains("example_policy.wasm"), "{said}");
    let entries = cache_entries(&cache);
    assert_eq!(entries.len(), 1, "{entries:?}");
    let out = compile(&policy);
    assert_code(&out, 0);
    assert!(
        text(&out.stdout).starts_with("already compiled: "),
        "{}",
        text(&out.stdout)
    );

    // The policy's first run loads what `compile` made: no compile at all.
    let out = host_run(
        &fake,
        &[
            policy.as_os_str(),
            "--cache-dir".as_ref(),
            cache.as_os_str(),
            "--json".as_ref(),
        ],
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["compile"]["cache"], "hit", "{report:#}");
    assert_eq!(report["summary"]["success"], true, "{report:#}");

    // Bytes their signature does not cover, and a signed component that is
    // not a policy: refused, naming why, and nothing is added to the cache.
    let dir = temp_dir("compile-refused");
    let tampered = dir.join("example_policy.wasm");
    let mut bytes = fs::read(&policy).unwrap();
    bytes.extend_from_slice(b"\0");
    fs::write(&tampered, bytes).unwrap();
    fs::copy(
        policy.with_extension("wasm.minisig"),
        dir.join("example_policy.wasm.minisig"),
    )
    .unwrap();
    let out = compile(&tampered);
    assert_code(&out, 1);
    assert!(
        text(&out.stderr).contains("its signature is not valid: nothing was compiled"),
        "{}",
        text(&out.stderr)
    );
    let other = dir.join("other-world.wasm");
    fs::copy(
        policy_wasm("raw-calls-fixture").with_file_name("other-world.wasm"),
        &other,
    )
    .unwrap();
    sign_file(&other);
    let out = compile(&other);
    assert_code(&out, 1);
    assert!(
        text(&out.stderr).contains("it is not a policy this host runs: nothing was compiled"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(cache_entries(&cache), entries);
}

#[test]
fn completions_and_man_page_come_from_the_command_line_definition() {
    let out = host_command()
        .args(["completions", "bash"])
        .output()
        .unwrap();
    assert_code(&out, 0);
    let script = text(&out.stdout);
    assert!(
        script.contains("_host()") && script.contains("--allow-unit"),
        "bash completion"
    );
    let checked = Command::new("bash")
        .arg("-n")
        .arg("-c")
        .arg(&script)
        .status()
        .unwrap();
    assert!(checked.success(), "the completion script is valid bash");

    let out = host_command().arg("man").output().unwrap();
    assert_code(&out, 0);
    let page = text(&out.stdout);
    assert!(
        page.starts_with(".ie") || page.contains(".TH host"),
        "roff: {}",
        &page[..200.min(page.len())]
    );
    assert!(
        page.contains(".SH \"HOST RUN\"") && page.contains("allow\\-unit"),
        "run's options are documented"
    );
}

#[test]
fn json_logs_are_one_object_per_line() {
    let fake = FakeSystemctl::example_units();
    let mut cmd = fake.host_command();
    cmd.args(["--log-format", "json", "--log-level", "info", "run"])
        .arg(signed_policy("example-policy"))
        .args(run_args());
    let out = cmd.output().unwrap();
    assert_code(&out, 0);
    let lines: Vec<String> = text(&out.stderr).lines().map(String::from).collect();
    assert!(!lines.is_empty());
    for line in &lines {
        let event: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(
            event["level"].is_string() && event["message"].is_string(),
            "{line}"
        );
    }
    assert!(
        lines.iter().any(|l| l.contains("signature verified")),
        "{lines:#?}"
    );
}

/// `host status` applies the allowlist as a run does: a unit outside it is
/// not read (systemctl never hears of it), and its line says why.
#[test]
fn status_says_when_a_unit_is_outside_the_allowlist() {
    let fake = FakeSystemctl::example_units();
    let status = |extra: &[&str]| {
        let mut cmd = fake.host_command();
        cmd.args(["status", "httpd", "legacy-ftpd", "--provider", "systemctl"])
            .args(extra);
        cmd.output().expect("run host status")
    };
    let out = status(&["--allow-unit", "http*", "--json"]);
    assert_code(&out, 1);
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["units"][0]["active"], "inactive", "{json:#}");
    assert_eq!(json["units"][1]["error_kind"], "denied", "{json:#}");
    assert!(
        json["units"][1]["error"]
            .as_str()
            .unwrap()
            .contains("unit legacy-ftpd is not allowed on this machine (--allow-unit http*)"),
        "{json:#}"
    );
    assert!(
        fake.calls().iter().all(|c| !c.contains("legacy-ftpd")),
        "{:?}",
        fake.calls()
    );
    let human = status(&["--allow-unit", "http*"]);
    assert!(
        text(&human.stdout).contains("\nlegacy-ftpd  error: unit legacy-ftpd is not allowed"),
        "{}",
        text(&human.stdout)
    );
    // Without an allowlist, both are read.
    assert_code(&status(&[]), 0);
}

/// Called as `policy-host` (the Debian package's name), every message and
/// hint names `policy-host`, never `host`.
#[test]
fn messages_use_the_name_the_binary_was_called_by() {
    let fake = FakeSystemctl::example_units();
    let dir = fake.root().join("bin-renamed");
    fs::create_dir_all(&dir).unwrap();
    let renamed = dir.join("policy-host");
    std::os::unix::fs::symlink(host_binary(), &renamed).unwrap();
    // An unsigned policy: the refusal says how to sign it.
    let policy = fake.root().join("unsigned.wasm");
    fs::copy(policy_wasm("example-policy"), &policy).unwrap();
    let mut cmd = fake.command(&renamed);
    cmd.arg("run").arg(&policy).args(run_args());
    let out = cmd.output().unwrap();
    assert_code(&out, 1);
    let stderr = text(&out.stderr);
    assert!(stderr.starts_with("policy-host: error: "), "{stderr}");
    assert!(
        stderr.contains("sign it with `policy-host sign`"),
        "{stderr}"
    );
    assert!(!stderr.contains("`host "), "{stderr}");
    // The man page lists only pages that exist.
    let out = fake.command(&renamed).arg("man").output().unwrap();
    assert_code(&out, 0);
    let page = text(&out.stdout);
    assert!(page.contains("policy\\-host\\-run(8)"), "{page}");
    assert!(!page.contains("policy\\-host\\-help(8)"), "{page}");
}

/// `host status` with no unit named: the last run from the report host.toml
/// names, its source, then the units it managed, unquoted.
#[test]
fn status_with_no_names_shows_the_last_run_and_its_units() {
    let fake = FakeSystemctl::example_units();
    let report = fake.root().join("last-run.json");
    let config = fake.root().join("host.toml");
    fs::write(
        &config,
        format!("report_file = {:?}\n", report.display().to_string()),
    )
    .unwrap();
    let status = |json: bool| {
        let mut cmd = fake.host_command();
        cmd.arg("status").arg("--config").arg(&config);
        if json {
            cmd.arg("--json");
        }
        cmd.output().unwrap()
    };
    // No run yet.
    let out = status(false);
    assert_code(&out, 0);
    assert!(
        text(&out.stdout).contains("last run: unknown: no run yet"),
        "{}",
        text(&out.stdout)
    );

    let policy = signed_policy("example-policy");
    let out = host_run(
        &fake,
        &[policy.as_os_str(), "--config".as_ref(), config.as_os_str()],
    );
    assert_code(&out, 0);
    assert!(report.is_file(), "host.toml's report_file was written");
    let out = status(false);
    assert_code(&out, 0);
    let said = text(&out.stdout);
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines[0], "machine: well: 1 policy converged", "{said}");
    assert!(
        lines[1].starts_with("resources: 3 (3 changed, 0 failed, 0 left alone, 0 unchanged)"),
        "{said}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("policy example_policy.wasm: changed (")
                && l.contains(" ago, by hand): 3 resources, 3 changed")),
        "{said}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("  policy: ") && l.contains("example_policy.wasm (sha256:")),
        "{said}"
    );
    let units = lines
        .iter()
        .position(|l| *l == "units of the last run:")
        .unwrap_or_else(|| panic!("{said}"));
    assert_eq!(lines[units + 1], "httpd  active  enabled", "{said}");
    assert!(!said.contains('"'), "names unquoted: {said}");
    let json: Value = serde_json::from_slice(&status(true).stdout).unwrap();
    assert_eq!(json["last_run"]["summary"]["success"], true, "{json:#}");
    assert_eq!(
        json["last_run"]["policies"][0]["outcome"], "changed",
        "{json:#}"
    );
    assert_eq!(json["units"].as_array().unwrap().len(), 3, "{json:#}");
}
