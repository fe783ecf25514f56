//! `host watch` on the sandbox's real systemd, started as systemd starts
//! the packaged service (`Type=notify`: `systemd-run` returns once the watch
//! said READY=1 after its first run), and what the tests read of it: its
//! journal, the report its runs rewrite, the restarts it made.

use std::time::{Duration, Instant};

use crate::build;
use crate::machine::Machine;

/// The transient unit the watch runs as.
pub const WATCH: &str = "ph-watch";
/// Where the watch's settings live, inside the sandbox (written from
/// inside, so that inotify sees each change as an operator's would be).
pub const SETTINGS: &str = "/etc/ph-watch/manifest.yaml";
/// The report file: written by every run, so its changes count runs.
pub const REPORT: &str = "/var/lib/ph-watch-report.json";

/// Signs `manifest` (outside: the test key is there) and installs it and
/// its signature at [`SETTINGS`].
pub fn install_settings(m: &Machine, manifest: &str) {
    let signed = m.sandbox.share_file("manifest.yaml", manifest);
    build::sign_file(&signed);
    let signature = build::signature_path(&signed);
    let out = m.sandbox.exec(&[
        "sh",
        "-c",
        r#"mkdir -p /etc/ph-watch && cp "$1" /etc/ph-watch/manifest.yaml.new && cp "$2" /etc/ph-watch/manifest.yaml.minisig && mv /etc/ph-watch/manifest.yaml.new /etc/ph-watch/manifest.yaml"#,
        "sh",
        signed.to_str().unwrap(),
        signature.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
}

/// Starts `host watch` as a notify service and waits for READY=1.
pub fn start_watch(m: &Machine, extra: &[&str]) {
    start_watch_of(m, m.policy.to_str().unwrap(), extra);
}

/// [`start_watch`] of the policy at `policy` (inside the sandbox).
pub fn start_watch_of(m: &Machine, policy: &str, extra: &[&str]) {
    let mut args = vec![policy, "--settings", SETTINGS, "--report", REPORT];
    args.extend_from_slice(extra);
    start_watch_as(m, WATCH, &args);
}

/// `host watch ARGS --trusted-key KEY` as the notify service `unit`,
/// waiting for READY=1.
pub fn start_watch_as(m: &Machine, unit: &str, args: &[&str]) {
    let mut command = vec![
        "systemd-run",
        "--unit",
        unit,
        "--property=Type=notify",
        "--property=NotifyAccess=main",
        "--property=TimeoutStartSec=120",
        "--",
        m.host.to_str().unwrap(),
        "watch",
        "--trusted-key",
        m.trusted_key.to_str().unwrap(),
    ];
    command.extend_from_slice(args);
    let out = m.sandbox.exec(&command);
    assert!(
        out.status.success(),
        "the watch did not become ready: {}{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        unit_journal(m, unit)
    );
}

/// What the watch wrote (its stdout and stderr, in the journal).
pub fn journal(m: &Machine) -> String {
    unit_journal(m, WATCH)
}

/// What `unit` wrote to the journal.
pub fn unit_journal(m: &Machine, unit: &str) -> String {
    let out = m
        .sandbox
        .exec(&["journalctl", "--no-pager", "-o", "cat", "-u", unit]);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `host run --no-wait --detailed-exitcodes` of what the watch runs.
pub fn host_run_no_wait(m: &Machine) -> std::process::Output {
    m.sandbox.exec(&[
        m.host.to_str().unwrap(),
        "run",
        m.policy.to_str().unwrap(),
        "--trusted-key",
        m.trusted_key.to_str().unwrap(),
        "--settings",
        SETTINGS,
        "--no-wait",
        "--detailed-exitcodes",
    ])
}

/// [`host_run_no_wait`]: succeeds, changing nothing.
pub fn host_run_beside(m: &Machine) {
    let out = host_run_no_wait(m);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Waits up to `limit` for the watch to say a line that contains `text`
/// and `also`; the line, or a panic with the watch's journal.
pub fn await_said(m: &Machine, limit: Duration, text: &str, also: &str) -> String {
    let mut line = None;
    let came = eventually(limit, || {
        line = said_with(m, text).filter(|l| l.contains(also));
        line.is_some()
    });
    assert!(
        came,
        "the watch did not say {text:?} with {also:?}:
{}",
        journal(m)
    );
    line.unwrap_or_default()
}

/// The last line the watch said that contains `text`.
pub fn said_with(m: &Machine, text: &str) -> Option<String> {
    journal(m)
        .lines()
        .rev()
        .find(|l| l.contains(text))
        .map(str::to_owned)
}

/// Waits up to `limit` for `done`; says whether it came.
pub fn eventually(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    done()
}

/// Waits for `unit` to run under a PID other than `pid` (after `what`),
/// then for the follow-up runs: the watch said exactly one restart of it.
pub fn assert_restarted_once(m: &Machine, unit: &str, pid: u32, what: &str) {
    assert!(
        eventually(Duration::from_secs(10), || m.sandbox.main_pid(unit) != pid),
        "{unit} was not restarted after {what}:\n{}",
        journal(m)
    );
    std::thread::sleep(Duration::from_millis(1500));
    let said = journal(m);
    assert_eq!(
        said.matches(&format!("service#{unit}: restarted")).count(),
        1,
        "one restart after {what}, not more:\n{said}"
    );
}

/// How many times systemd reloaded so far (its own journal lines).
pub fn reloads(m: &Machine) -> usize {
    let out = m
        .sandbox
        .exec(&["journalctl", "--no-pager", "-o", "cat", "_PID=1"]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|line| line.starts_with("Reloading"))
        .count()
}

/// The report file's modification time (nanoseconds), or 0.
pub fn report_stamp(m: &Machine) -> String {
    let out = m.sandbox.exec(&["stat", "-c", "%Y.%y", REPORT]);
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Waits (up to 10 s) until no run has written the report for 1 s: the
/// follow-up run of the watch's own changes (the first run's reload among
/// them) is over, so a drift made next is what wakes the next run.
pub fn wait_quiet(m: &Machine) {
    let mut last = report_stamp(m);
    let mut since = Instant::now();
    let started = Instant::now();
    while since.elapsed() < Duration::from_secs(1) {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the watch did not become quiet:\n{}",
            journal(m)
        );
        std::thread::sleep(Duration::from_millis(100));
        let now = report_stamp(m);
        if now != last {
            last = now;
            since = Instant::now();
        }
    }
}
