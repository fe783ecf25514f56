//! End-to-end: hostile policies. Each fixture under `tests/fixtures/hostile/`
//! (package `hostile-NAME`) attacks the host one way; the real `host` binary
//! runs it against the fake systemctl, and each test checks
//!
//! - the exact failure class (or error) in the JSON report,
//! - that the host did not crash: a normal exit code (not a signal) and no
//!   `panicked` on its stderr,
//! - through the fake systemctl's log, exactly which commands ran.
//!
//! Every run gets its own `--lock-file` and `--cache-dir` (in the fake's
//! directory), so these tests neither wait for each other nor for other test
//! binaries, and the timing checks include a compile.

use std::ffi::OsStr;
use std::fs;
use std::io::{BufRead, BufReader, ErrorKind};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use policy_host_e2e::build::{sign_file, signed_policy};
use policy_host_e2e::fake_systemctl::{show, FakeSystemctl};
use policy_host_e2e::outcome::{
    assert_contains, assert_shapes, json_calls, resource, run, truncate, Run,
};
use serde_json::Value;

/// The marker the host appends to a log it cut short (`host::runtime::capture`).
const LOG_MARKER: &str = "\n[policy output truncated: log limit reached]\n";
/// What the host appends to guest text it cut short (`host::text`).
const TEXT_MARKER: &str = "... [truncated by the host]";
/// The longest single guest string the host keeps (`host::guest`).
const MAX_GUEST_STRING: usize = 4096;

// ------------------------------------------------------------------ harness

/// The run lock of every run against `fake`.
fn lock_file(fake: &FakeSystemctl) -> PathBuf {
    fake.root().join("run.lock")
}

/// `host run POLICY --trusted-key PUB --lock-file LOCK --cache-dir CACHE
/// ARGS...` with the fake first on PATH. The compile cache is the fake's own
/// (so every run compiles, and nothing is written outside the fake).
fn host_command(fake: &FakeSystemctl, policy: &Path, args: &[&str]) -> Command {
    fake.host_run()
        .policy(policy)
        .args([OsStr::new("--lock-file"), lock_file(fake).as_os_str()])
        .args([
            "--cache-dir".as_ref(),
            fake.root().join("cache").as_os_str(),
        ])
        .args([
            "--state-dir".as_ref(),
            fake.root().join("state").as_os_str(),
        ])
        .args(args)
        .command()
}

fn host(fake: &FakeSystemctl, policy: &Path, args: &[&str]) -> Run {
    run(host_command(fake, policy, args))
}

/// The signed component of fixture `tests/fixtures/hostile/NAME`.
fn hostile(name: &str) -> PathBuf {
    signed_policy(&format!("hostile-{name}"))
}

/// `host run hostile-NAME --json ARGS...`.
fn host_hostile(fake: &FakeSystemctl, name: &str, args: &[&str]) -> Run {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    host(fake, &hostile(name), &all)
}

/// Writes a file into the fake's directory, signed with the test key (the
/// files are settings, which must be signed like policies).
fn write_file(fake: &FakeSystemctl, file: &str, text: &str) -> PathBuf {
    let path = fake.root().join(file);
    fs::write(&path, text).unwrap();
    sign_file(&path);
    path
}

fn manifest_policy() -> PathBuf {
    signed_policy("manifest-policy")
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {value:#}"))
        .iter()
        .map(|e| e.as_str().expect("a string").to_string())
        .collect()
}

#[track_caller]
fn assert_no_systemctl(fake: &FakeSystemctl) {
    assert_eq!(fake.calls(), Vec::<String>::new(), "systemctl must not run");
}

// ------------------------------------------------------------ CPU and memory

#[test]
fn endless_loop_is_stopped_at_its_cpu_time_limit() {
    let fake = FakeSystemctl::new();
    let r = host_hostile(&fake, "endless-loop", &["--cpu-time", "1"]);
    let json = r.assert_failure("cpu-time-limit");
    assert_contains(json["failure"]["message"].as_str().unwrap(), "limit of 1s");
    assert!(
        r.elapsed >= Duration::from_secs(1),
        "stopped before its second was up: {:?}",
        r.elapsed
    );
    // Which limit stopped it is the failure class; the bound only says it
    // was stopped long before anything else would have (the 900 s wall
    // clock). How closely a limit is kept is the benchmark's to measure: a
    // tight bound here fails on a busy machine, not on a broken limit.
    assert!(
        r.run_time(&json) < Duration::from_secs(15),
        "a 1 s CPU limit took {:?} ({:?} with the compile)",
        r.run_time(&json),
        r.elapsed
    );
    assert_eq!(json["resources"], Value::Array(Vec::new()));
    assert_no_systemctl(&fake);
}

#[test]
fn endless_loop_is_stopped_at_the_wall_clock_limit_when_that_is_shorter() {
    let fake = FakeSystemctl::new();
    let r = host_hostile(
        &fake,
        "endless-loop",
        &["--cpu-time", "30", "--wall-clock", "1"],
    );
    let json = r.assert_failure("wall-clock-limit");
    assert_contains(json["failure"]["message"].as_str().unwrap(), "limit of 1s");
    // Stopped long before its 30 s of CPU time were up.
    assert!(
        r.run_time(&json) < Duration::from_secs(15),
        "a 1 s wall-clock limit took {:?} ({:?} with the compile)",
        r.run_time(&json),
        r.elapsed
    );
    assert_no_systemctl(&fake);
}

#[test]
fn alloc_bomb_is_stopped_at_its_memory_limit() {
    let fake = FakeSystemctl::new();
    let r = host_hostile(&fake, "alloc-bomb", &["--memory-limit", "32"]);
    let json = r.assert_failure("memory-limit");
    let message = json["failure"]["message"].as_str().unwrap();
    assert_contains(message, &format!("limit of {} bytes", 32 << 20));
    assert_no_systemctl(&fake);

    // The default limit (64 MiB) holds too.
    let r = host_hostile(&fake, "alloc-bomb", &[]);
    let json = r.assert_failure("memory-limit");
    assert_contains(
        json["failure"]["message"].as_str().unwrap(),
        &format!("limit of {} bytes", 64 << 20),
    );
    assert_no_systemctl(&fake);

    // A [[policy]] of host.toml may have a limit of its own, over the
    // run's (the default here).
    let config = fake.root().join("host.toml");
    fs::write(
        &config,
        format!(
            "[[policy]]\nsource = \"{}\"\nmemory_mib = 16\n",
            hostile("alloc-bomb").display()
        ),
    )
    .unwrap();
    let r = fake
        .host_run()
        .args(["--config".as_ref(), config.as_os_str(), "--json".as_ref()])
        .run();
    let json = r.assert_failure("memory-limit");
    assert_contains(
        json["failure"]["message"].as_str().unwrap(),
        &format!("limit of {} bytes", 16 << 20),
    );
    assert_no_systemctl(&fake);
}

#[test]
fn unbounded_recursion_is_a_stack_overflow() {
    let fake = FakeSystemctl::new();
    let r = host_hostile(&fake, "deep-recursion", &["--report-limit", "65536"]);
    let json = r.assert_failure("stack-overflow");
    let message = json["failure"]["message"].as_str().unwrap();
    assert_contains(message, "descend");
    // A trap message lists the guest's frames: bounded like any guest text.
    assert!(
        message.len() <= MAX_GUEST_STRING + TEXT_MARKER.len(),
        "a trap message of {} bytes",
        message.len()
    );
    assert!(r.stdout.len() < 64 * 1024, "{} bytes", r.stdout.len());
    assert!(r.stderr.len() < 64 * 1024, "{} bytes", r.stderr.len());
    assert_no_systemctl(&fake);
}

// ---------------------------------------------------------------- call budget

#[test]
fn restart_loop_is_cut_off_at_the_call_budget() {
    let fake = FakeSystemctl::new();
    fake.unit("web", "active", "enabled");
    let unit = write_file(&fake, "unit.txt", "web\n");
    let r = host_hostile(
        &fake,
        "restart-loop",
        &["--call-budget", "50", "--settings", unit.to_str().unwrap()],
    );
    let json = r.assert_failure("call-budget");
    assert_contains(
        json["failure"]["message"].as_str().unwrap(),
        "budget of 50 provider calls",
    );
    assert_shapes(&fake);
    // Each restart's settle window is judged when the next restart of the
    // unit comes (one `show`), the last before the records are handed out.
    let mut expected = vec!["daemon-reload".to_string()];
    expected.extend((0..50).flat_map(|_| ["restart --system -- web".to_string(), show("web")]));
    assert_eq!(fake.calls(), expected);
    let calls = json_calls(&json);
    assert_eq!(calls.len(), 51, "the reload and 50 restarts: {calls:#?}");
    assert!(calls[1..]
        .iter()
        .all(|c| c.0 == "restart" && c.1.as_deref() == Some("web") && c.2 == "ok"));
}

#[test]
fn restart_loop_is_cut_off_by_the_default_call_budget() {
    // 100,000 restarts against the default budget of 10,000. The unit is
    // outside the allowlist, so every call is counted but denied in the host
    // and none reaches the (slow) fake systemctl.
    let fake = FakeSystemctl::new();
    fake.unit("web", "active", "enabled");
    let unit = write_file(&fake, "unit.txt", "web\n");
    let r = host_hostile(
        &fake,
        "restart-loop",
        &[
            "--allow-unit",
            "elsewhere-*",
            "--settings",
            unit.to_str().unwrap(),
        ],
    );
    let json = r.assert_failure("call-budget");
    assert_contains(
        json["failure"]["message"].as_str().unwrap(),
        "budget of 10000 provider calls",
    );
    let calls = json_calls(&json);
    assert_eq!(calls.len(), 10_000);
    assert!(calls.iter().all(|c| c.0 == "restart" && c.2 == "denied"));
    assert_no_systemctl(&fake);
}

// ----------------------------------------------------------------- output

#[test]
fn stdout_flood_is_truncated_at_the_log_limit_and_the_run_succeeds() {
    let fake = FakeSystemctl::new();
    for (args, limit) in [(&[][..], 1 << 20), (&["--log-limit", "4096"][..], 4096)] {
        let r = host_hostile(&fake, "stdout-flood", args);
        r.assert_exit(0);
        let json = r.json();
        assert_eq!(json["failure"], Value::Null);
        assert_eq!(json["summary"]["success"], true);
        assert_eq!(resource(&json, "stdout-flood")["failed"], false);
        let log = json["log"].as_str().unwrap();
        assert!(
            log.len() <= limit + LOG_MARKER.len(),
            "log of {} bytes for a limit of {limit}",
            log.len()
        );
        assert!(log.len() >= limit, "the log keeps up to its limit");
        assert!(log.starts_with("flood line 00000000 "), "{}", truncate(log));
        assert!(log.ends_with(LOG_MARKER), "no marker at the end of the log");
        assert!(
            r.stdout.len() < 2 * limit + 64 * 1024,
            "the report is {} bytes",
            r.stdout.len()
        );
    }
    assert_no_systemctl(&fake);
}

#[test]
fn panic_is_a_trap_with_the_message_in_the_log() {
    let fake = FakeSystemctl::new();
    let r = host_hostile(&fake, "panic", &[]);
    let json = r.assert_failure("trap");
    let message = "hostile panic fixture: deliberate panic 7f3a9c";
    assert_contains(json["log"].as_str().unwrap(), message);
    // The failure carries the end of what the guest printed: its panic
    // here, a Python traceback or a JavaScript stack elsewhere.
    let failure = &json["failure"];
    assert_contains(failure["output"].as_str().unwrap(), message);
    assert!(
        !r.stderr.contains(message),
        "guest output must stay in the log, not reach the host's stderr:\n{}",
        r.stderr
    );
    assert_no_systemctl(&fake);
}

// ------------------------------------------------------------ unit allowlist

/// A machine with `web-a` (to be allowed) and `sshd` (not to be).
fn allowlist_fake() -> FakeSystemctl {
    let fake = FakeSystemctl::new();
    fake.unit("web-a", "inactive", "disabled")
        .unit("sshd", "active", "enabled");
    fake
}

/// The manifest policy starting `web-a` and stopping and disabling `sshd`.
fn allowlist_run(fake: &FakeSystemctl, extra: &[&str]) -> Run {
    let yaml = "- service:\n    - web-a:\n        ensure: running\n    - sshd:\n        ensure: stopped\n        enable: false\n";
    let site = write_file(fake, "site.yaml", yaml);
    let mut args = vec!["--settings", site.to_str().unwrap(), "--json"];
    args.extend_from_slice(extra);
    host(fake, &manifest_policy(), &args)
}

#[track_caller]
fn assert_sshd_denied_web_a_applied(fake: &FakeSystemctl, r: &Run) {
    r.assert_exit(1);
    assert_shapes(fake);
    let json = r.json();
    assert_eq!(json["failure"], Value::Null);
    let sshd_calls: Vec<_> = json_calls(&json)
        .into_iter()
        .filter(|c| c.1.as_deref() == Some("sshd"))
        .collect();
    assert!(!sshd_calls.is_empty(), "{:#}", json["calls"]);
    assert!(
        sshd_calls.iter().all(|c| c.2 == "denied"),
        "{sshd_calls:#?}"
    );
    let sshd = resource(&json, "sshd");
    assert_eq!(sshd["failed"], true);
    assert!(
        strings(&sshd["errors"])
            .iter()
            .any(|e| e.contains("not allowed") && e.contains("web-*")),
        "{:#}",
        sshd["errors"]
    );
    assert!(
        fake.calls().iter().all(|c| !c.contains("sshd")),
        "sshd reached systemctl: {:#?}",
        fake.calls()
    );
    assert_eq!(
        fake.state("sshd").unwrap(),
        ("active".into(), "enabled".into())
    );
    assert_eq!(resource(&json, "web-a")["failed"], false);
    assert_eq!(fake.mutating_calls(), ["start --system -- web-a"]);
    assert_eq!(fake.active("web-a").unwrap(), "active");
}

#[test]
fn allow_unit_denies_other_units_without_running_systemctl() {
    let fake = allowlist_fake();
    let r = allowlist_run(&fake, &["--allow-unit", "web-*"]);
    assert_sshd_denied_web_a_applied(&fake, &r);
}

#[test]
fn allow_units_from_the_config_file_deny_other_units() {
    let fake = allowlist_fake();
    let config = write_file(&fake, "host.toml", "allow_units = [\"web-*\"]\n");
    let r = allowlist_run(&fake, &["--config", config.to_str().unwrap()]);
    assert_sshd_denied_web_a_applied(&fake, &r);
}

// ------------------------------------------------------------------- imports

#[test]
fn component_importing_an_unknown_interface_is_refused_at_load() {
    let fake = FakeSystemctl::new();
    fake.unit("web", "active", "enabled");
    let r = host_hostile(&fake, "custom-import", &[]);
    r.assert_exit(1);
    assert_eq!(r.stdout, "", "no report for a policy that never ran");
    let lines: Vec<&str> = r.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line on stderr, got:\n{}", r.stderr);
    assert_contains(lines[0], "evil:exec/exec");
    assert_no_systemctl(&fake);
}

/// A newline the component model allows inside an import name (`url=<...>`)
/// is shown escaped, on the one error line: it never makes a second
/// `host: error:` line that the policy wrote.
#[test]
fn an_import_name_cannot_forge_a_second_error_line() {
    let fake = FakeSystemctl::new();
    let policy = fake.root().join("forger.wasm");
    let component = wat::parse_str(
        r#"(component (import "url=<x\nhost: error: all units converged>" (instance)))"#,
    )
    .expect("a component with that import");
    fs::write(&policy, component).unwrap();
    sign_file(&policy);
    let r = host(&fake, &policy, &["--json"]);
    r.assert_exit(1);
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line on stderr, got:\n{}", r.stderr);
    assert!(lines[0].starts_with("host: error: "), "{}", r.stderr);
    assert_contains(lines[0], "`url=<x\\nhost: error: all units converged>`");
    assert_no_systemctl(&fake);
}

// ---------------------------------------------------------------------- WASI

#[test]
fn wasi_gives_no_way_out_of_the_sandbox() {
    let fake = FakeSystemctl::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let created = fake.root().join("created-by-the-guest");
    let settings = write_file(
        &fake,
        "escape.txt",
        &format!("connect=127.0.0.1:{port}\ncreate={}\n", created.display()),
    );
    let r = host_hostile(
        &fake,
        "wasi-escape",
        &["--settings", settings.to_str().unwrap()],
    );
    r.assert_exit(0);
    let json = r.json();
    assert_eq!(json["failure"], Value::Null);
    let log = json["log"].as_str().unwrap();
    assert!(!log.contains("ESCAPED"), "something got out:\n{log}");
    for attempt in [
        "read-file",
        "create-file",
        "read-dir",
        "read-dir-cwd",
        "env-var",
        "env-vars",
        "args",
        "tcp-connect-test",
        "tcp-connect-ssh",
        "tcp-listen",
        "udp-bind",
        "udp-send",
        "resolve",
        "spawn",
    ] {
        assert_contains(log, &format!("escape {attempt}: blocked: "));
    }
    assert_contains(
        log,
        "escape env-var: blocked: environment variable not found",
    );
    assert_contains(log, "escape env-vars: blocked: no environment variables");
    assert_contains(log, "escape args: blocked: no arguments");
    assert!(!created.exists(), "the guest created {}", created.display());
    match listener.accept() {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        other => panic!("the guest reached the test's listener: {other:?}"),
    }
    assert_no_systemctl(&fake);
}

// ------------------------------------------------------------------ reports

fn bad_report(fake: &FakeSystemctl, mode: &str, args: &[&str]) -> Run {
    let settings = write_file(fake, "mode.txt", mode);
    let mut all = vec!["--settings", settings.to_str().unwrap()];
    all.extend_from_slice(args);
    host_hostile(fake, "bad-report", &all)
}

#[test]
fn malformed_resource_name_in_a_report_is_an_error() {
    let fake = FakeSystemctl::new();
    let r = bad_report(&fake, "malformed", &[]);
    r.assert_exit(1);
    let json = r.json();
    assert_eq!(json["failure"], Value::Null);
    assert_eq!(json["summary"]["success"], false);
    let errors = strings(&json["errors"]);
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("malformed report") && e.contains("\"service#a b\"")),
        "{errors:#?}"
    );
    let kept: Vec<_> = json["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["resource"].as_str().unwrap())
        .collect();
    assert_eq!(kept, ["service#ok"], "the malformed event is not kept");
    assert_no_systemctl(&fake);
}

#[test]
fn enormous_report_is_truncated_at_the_report_limit() {
    let fake = FakeSystemctl::new();
    let r = bad_report(&fake, "many-events", &["--report-limit", "100000"]);
    r.assert_exit(1);
    assert!(
        r.elapsed < Duration::from_secs(20),
        "200,000 events took {:?}",
        r.elapsed
    );
    let json = r.json();
    assert_eq!(json["failure"], Value::Null);
    let kept = json["resources"].as_array().unwrap().len();
    // Each event is charged its JSON, about 230 bytes.
    assert!(kept > 0 && kept * 200 <= 100_000, "kept {kept} events");
    let errors = strings(&json["errors"]);
    assert_eq!(
        errors,
        [format!(
            "report truncated: {} of 200,000 resources not shown (report limit 100000 bytes)",
            thousands(200_000 - kept)
        )]
    );
    assert_eq!(json["summary"]["resources"], kept);
    assert!(
        r.stdout.len() <= 100_000 + REPORT_ALLOWANCE,
        "{}",
        r.stdout.len()
    );
    assert_no_systemctl(&fake);
}

/// What a JSON report may take beyond `--report-limit`: the host's own
/// fields (policy, source, signature, compile, provider, summary, its
/// notices of what it cut), with no call and an empty log.
const REPORT_ALLOWANCE: usize = 8 * 1024;

/// What the report for people may take beyond `--report-limit`: the same,
/// and, for each of its five lists, 4 KiB beyond the list's JSON
/// (`host::report::human`).
const HUMAN_ALLOWANCE: usize = REPORT_ALLOWANCE + 5 * 4096;

/// `n` with a comma between groups of three digits, as the host writes
/// counts.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// 200,000 resources left out with empty reasons made a 4.4 MB report
/// under a 1 MiB limit when only their text was counted: the limit bounds
/// the report as written, stdout's and `--report`'s, and the report for
/// people; the summary counts every entry.
#[test]
fn two_hundred_thousand_left_out_entries_are_held_to_the_report_limit() {
    let fake = FakeSystemctl::new();
    for limit in [None, Some(100_000)] {
        let file = fake.root().join("report.json");
        let mut args = vec!["--report", file.to_str().unwrap()];
        let limit_text = limit.map(|l: usize| l.to_string());
        if let Some(limit) = &limit_text {
            args.extend(["--report-limit", limit]);
        }
        let limit = limit.unwrap_or(1 << 20);
        let r = bad_report(&fake, "many-left-out", &args);
        r.assert_exit(1);
        assert!(
            r.elapsed < Duration::from_secs(30),
            "200,000 entries took {:?}",
            r.elapsed
        );
        assert!(
            r.stdout.len() <= limit + REPORT_ALLOWANCE,
            "a JSON report of {} bytes under a limit of {limit}",
            r.stdout.len()
        );
        let written = fs::read(&file).unwrap();
        assert!(
            written.len() <= limit + REPORT_ALLOWANCE,
            "a report file of {} bytes under a limit of {limit}",
            written.len()
        );
        let json = r.json();
        let shown = json["left_out"].as_array().map_or(0, Vec::len);
        assert!(shown > limit / 100, "what fits is shown: {shown}");
        assert_eq!(
            json["summary"]["left_out"], 200_000,
            "counted before cutting"
        );
        assert_eq!(
            strings(&json["errors"]),
            [format!(
                "report truncated: {} of 200,000 left-out entries not shown (report limit {limit} bytes)",
                thousands(200_000 - shown)
            )]
        );
        eprintln!(
            "limit {limit}: JSON report {} bytes, file {} bytes, {shown} entries shown",
            r.stdout.len(),
            written.len()
        );

        // The report for people: bounded too, and it says what it left out.
        let mut human_args = vec!["--settings"];
        let settings = write_file(&fake, "mode.txt", "many-left-out");
        human_args.push(settings.to_str().unwrap());
        if let Some(limit) = &limit_text {
            human_args.extend(["--report-limit", limit]);
        }
        let r = host(&fake, &hostile("bad-report"), &human_args);
        r.assert_exit(1);
        assert!(
            r.stdout.len() <= limit + HUMAN_ALLOWANCE,
            "a human report of {} bytes under a limit of {limit}",
            r.stdout.len()
        );
        assert_contains(&r.stdout, "left-out entries not shown");
        eprintln!("limit {limit}: human report {} bytes", r.stdout.len());
    }
    assert_no_systemctl(&fake);
}

/// 200,000 events with tiny names, likewise.
#[test]
fn two_hundred_thousand_events_are_held_to_the_report_limit() {
    let fake = FakeSystemctl::new();
    let r = bad_report(&fake, "many-events", &[]);
    r.assert_exit(1);
    assert!(
        r.stdout.len() <= (1 << 20) + REPORT_ALLOWANCE,
        "{}",
        r.stdout.len()
    );
    let kept = r.json()["resources"].as_array().unwrap().len();
    assert_contains(
        &r.stdout,
        &format!(
            "report truncated: {} of 200,000 resources not shown (report limit 1048576 bytes)",
            thousands(200_000 - kept)
        ),
    );
    let settings = write_file(&fake, "mode.txt", "many-events");
    let r = host(
        &fake,
        &hostile("bad-report"),
        &["--settings", settings.to_str().unwrap()],
    );
    r.assert_exit(1);
    assert!(
        r.stdout.len() <= (1 << 20) + HUMAN_ALLOWANCE,
        "{}",
        r.stdout.len()
    );
    assert_no_systemctl(&fake);
}

#[test]
fn huge_strings_in_a_report_are_cut_short() {
    let fake = FakeSystemctl::new();
    // In noop mode, where the noop message is the policy's own claim and is
    // kept; a normal run drops it (the host believes only what it did).
    let r = bad_report(&fake, "huge-strings", &["--noop"]);
    r.assert_exit(1);
    assert!(
        r.stdout.len() < 64 * 1024,
        "three 8 MiB strings made a report of {} bytes",
        r.stdout.len()
    );
    let json = r.json();
    let huge = resource(&json, "huge");
    let bounded = |text: &str| {
        assert!(
            text.len() <= MAX_GUEST_STRING + TEXT_MARKER.len(),
            "{}",
            text.len()
        );
        assert!(text.ends_with(TEXT_MARKER));
    };
    bounded(huge["noop_message"].as_str().unwrap());
    let errors = strings(&huge["errors"]);
    assert_eq!(errors.len(), 1);
    bounded(&errors[0]);
    let policy_errors = strings(&json["errors"]);
    assert_eq!(policy_errors.len(), 1);
    bounded(&policy_errors[0]);
    assert_no_systemctl(&fake);
}

// --------------------------------------------------------------- wall clock

#[test]
fn hanging_status_is_cut_off_at_the_wall_clock_limit() {
    let fake = FakeSystemctl::new();
    fake.unit("slow", "active", "enabled")
        .unit("other", "active", "enabled")
        .hang("is-active", "slow", 60);
    let yaml =
        "- service:\n    - slow:\n        ensure: running\n    - other:\n        ensure: running\n";
    let site = write_file(&fake, "site.yaml", yaml);
    let r = host(
        &fake,
        &manifest_policy(),
        &[
            "--settings",
            site.to_str().unwrap(),
            "--json",
            "--wall-clock",
            "2",
            "--systemctl-timeout",
            "60",
        ],
    );
    // The status of `slow` times out at the deadline; the policy's next call
    // (the status of `other`) is past it and stops the run.
    // Cut off by the 2 s wall clock, long before the 60 s systemctl timeout
    // (a bound a busy machine cannot reach by itself).
    let json = r.assert_failure("wall-clock-limit");
    assert!(
        r.run_time(&json) < Duration::from_secs(20),
        "a 2 s wall-clock limit took {:?} ({:?} with the compile)",
        r.run_time(&json),
        r.elapsed
    );
    let status_ms = json["calls"][1]["duration_ms"].as_f64().unwrap();
    assert!(
        status_ms < 20_000.0,
        "the hung status was cut off after {status_ms} ms, not at the 2 s limit"
    );
    let calls = json_calls(&json);
    assert_eq!(
        calls,
        [
            ("daemon-reload".to_string(), None, "ok".to_string()),
            (
                "status".to_string(),
                Some("slow".to_string()),
                "timed-out".to_string()
            ),
        ]
    );
    assert_eq!(
        fake.calls(),
        ["daemon-reload", "is-active --system -- slow"]
    );
}

#[test]
fn sleeping_guest_is_stopped_at_the_wall_clock_limit() {
    let fake = FakeSystemctl::new();
    let seconds = write_file(&fake, "seconds.txt", "120\n");
    let r = host_hostile(
        &fake,
        "sleep",
        &["--wall-clock", "2", "--settings", seconds.to_str().unwrap()],
    );
    // Stopped by the 2 s wall clock, long before its 120 s sleep ends.
    let json = r.assert_failure("wall-clock-limit");
    assert!(
        r.run_time(&json) < Duration::from_secs(20),
        "a 2 s wall-clock limit took {:?} ({:?} with the compile)",
        r.run_time(&json),
        r.elapsed
    );
    assert_no_systemctl(&fake);
}

// ---------------------------------------------------------------- run lock

/// Waits up to `limit` for `done`.
fn wait_for(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn spawn(mut cmd: Command) -> Child {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn host")
}

fn finish(child: Child, started: Instant) -> Run {
    let out = child.wait_with_output().expect("wait for host");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        elapsed: started.elapsed(),
    }
}

#[test]
fn two_runs_never_interleave_on_one_lock_file() {
    let fake = FakeSystemctl::new();
    fake.unit("slow", "inactive", "disabled")
        .unit("fast", "inactive", "disabled")
        .hang("is-active", "slow", 4);
    let slow = write_file(
        &fake,
        "slow.yaml",
        "- service:\n    - slow:\n        ensure: running\n",
    );
    let fast = write_file(
        &fake,
        "fast.yaml",
        "- service:\n    - fast:\n        ensure: running\n",
    );
    let manifest = manifest_policy();
    let args = |site: &Path| -> Vec<String> {
        vec![
            "--settings".into(),
            site.to_str().unwrap().into(),
            "--json".into(),
        ]
    };
    let command = |site: &Path, extra: &[&str]| {
        let mut all = args(site);
        all.extend(extra.iter().map(|s| s.to_string()));
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        host_command(&fake, &manifest, &all)
    };

    // The first run takes the lock and hangs in `is-active slow`.
    let first_started = Instant::now();
    let mut first = spawn(command(&slow, &[]));
    let first_pid = first.id();
    wait_for(Duration::from_secs(30), "the first run to hang", || {
        fake.calls()
            .iter()
            .any(|c| c == "is-active --system -- slow")
    });

    // The second, with --no-wait, fails at once naming the holder.
    let second = run(command(&fast, &["--no-wait"]));
    second.assert_exit(1);
    assert!(
        first.try_wait().unwrap().is_none(),
        "the second run only returned after the first had finished"
    );
    let lines: Vec<&str> = second
        .stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(lines.len(), 1, "{}", second.stderr);
    assert_contains(lines[0], &format!("pid {first_pid}"));
    assert_contains(lines[0], "--no-wait");
    assert_eq!(second.stdout, "");

    // The third waits, saying for whom, and runs once the first is done.
    let third_started = Instant::now();
    let mut third = spawn(command(&fast, &["--lock-timeout", "60"]));
    let mut third_stderr = BufReader::new(third.stderr.take().unwrap());
    let mut announcement = String::new();
    third_stderr.read_line(&mut announcement).unwrap();
    assert_contains(&announcement, "waiting for");
    assert_contains(&announcement, &format!("pid {first_pid}"));
    assert!(
        first.try_wait().unwrap().is_none(),
        "the third run waited although the first had finished"
    );

    let first = finish(first, first_started);
    // The fake's hung is-active exits 0 with no output, which the host does
    // not take for an answer: the first run fails `slow`, normally.
    first.assert_exit(1);
    assert_eq!(first.json()["failure"], Value::Null);
    let third = finish(third, third_started);
    third.assert_exit(0);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut third_stderr, &mut rest).unwrap();
    assert!(!rest.contains("panicked"), "{rest}");
    assert_eq!(fake.active("fast").unwrap(), "active");

    // Every call of the first run precedes every call of the third; the
    // second made none.
    assert_shapes(&fake);
    let calls = fake.calls();
    let last_slow = calls.iter().rposition(|c| c.ends_with(" slow")).unwrap();
    let first_fast = calls.iter().position(|c| c.ends_with(" fast")).unwrap();
    assert!(last_slow < first_fast, "interleaved: {calls:#?}");
    assert_eq!(calls[0], "daemon-reload", "{calls:#?}");
    assert_eq!(calls[last_slow + 1], "daemon-reload", "{calls:#?}");
    assert_eq!(fake.daemon_reloads(), 2, "{calls:#?}");
}
