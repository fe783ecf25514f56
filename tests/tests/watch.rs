//! `host watch` on a real systemd 252 in the sandbox, started as systemd
//! starts the packaged service (`Type=notify`: systemd-run returns once the
//! watch said READY=1 after its first run): drift is repaired without any
//! run being asked for (a stop, a disable, a subscribed file replaced by
//! rename, `daemon-reexec` in between); units no policy manages wake
//! nothing; a settings document replaced by one that is not signed is
//! refused and its units are left alone until a good one appears; `host
//! run` works beside a watch; SIGTERM ends it with exit 0 and the lock free.

use std::time::{Duration, Instant};

use policy_host_e2e::build::sign_file;
use policy_host_e2e::machine::{machine, Machine};
use policy_host_e2e::requires::e2e_test;
use policy_host_e2e::sandbox::sleep_service;
use policy_host_e2e::watching::{
    assert_restarted_once, await_said, eventually, host_run_beside, host_run_no_wait,
    install_settings, journal, reloads, report_stamp, said_with, start_watch, start_watch_of,
    wait_quiet, REPORT, SETTINGS, WATCH,
};

fn web_and_db() -> String {
    "- service:\n    - wa-web:\n        ensure: running\n        enable: true\n    - wa-db:\n        ensure: running\n"
        .to_owned()
}

#[e2e_test(requires = "root, systemd, minisign")]
fn a_watch_repairs_drift_by_itself_and_ignores_units_it_does_not_manage() {
    let m = machine();
    m.service("wa-web", true, true);
    m.service("wa-db", false, false);
    m.service("wa-other", false, false);
    install_settings(&m, &web_and_db());
    start_watch(&m, &[]);
    // The first run converged wa-db before READY=1.
    assert_eq!(m.sandbox.is_active("wa-db"), "active", "{}", journal(&m));

    // A stop: active again, without any run being asked for; the run
    // that started it says so when its settle window has passed.
    wait_quiet(&m);
    let reloads_before = reloads(&m);
    m.sandbox.systemctl_ok(&["stop", "wa-web"]);
    assert!(
        eventually(Duration::from_secs(10), || said_with(
            &m,
            "service#wa-web: started"
        )
        .is_some_and(|line| line.contains("wa-web.service changed"))),
        "wa-web was not started again:\n{}",
        journal(&m)
    );
    assert_eq!(m.sandbox.is_active("wa-web"), "active");
    // That run saved the daemon-reload: wa-web's files were as systemd had
    // them loaded.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(reloads(&m), reloads_before, "{}", journal(&m));
    // wa-web's unit file edited, then a stop: the repair starts what the
    // file now says (the run reloads, as the file changed on disk).
    m.sandbox.write_file(
        "/etc/systemd/system/wa-web.service",
        &sleep_service("wa-web").replace("[Service]\n", "[Service]\nEnvironment=EDITED=1\n"),
    );
    m.sandbox.systemctl_ok(&["stop", "wa-web"]);
    assert!(
        eventually(Duration::from_secs(10), || m.sandbox.is_active("wa-web")
            == "active"),
        "wa-web was not started again after its file changed:\n{}",
        journal(&m)
    );
    let out = m.sandbox.exec(&[
        "systemctl",
        "show",
        "-p",
        "Environment,NeedDaemonReload",
        "wa-web",
    ]);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains("Environment=EDITED=1") && shown.contains("NeedDaemonReload=no"),
        "{shown}"
    );
    assert!(reloads(&m) > reloads_before, "{}", journal(&m));
    // A disable: enabled again.
    m.sandbox.systemctl_ok(&["disable", "wa-web"]);
    assert!(
        eventually(Duration::from_secs(10), || said_with(
            &m,
            "service#wa-web: enabled"
        )
        .is_some_and(|line| line.contains("wa-web.service changed"))),
        "wa-web was not enabled again:\n{}",
        journal(&m)
    );
    assert_eq!(m.sandbox.is_enabled("wa-web"), "enabled");
    // Its link removed by hand: no `UnitFilesChanged`, and the watch asks
    // systemd nothing at the reload that follows; the reload's run (every
    // policy with units) reads wa-web and enables it again.
    wait_quiet(&m);
    let enabled_lines = || {
        journal(&m)
            .lines()
            .filter(|l| l.contains("service#wa-web: enabled"))
            .count()
    };
    let enabled_before = enabled_lines();
    let out = m.sandbox.exec(&[
        "rm",
        "/etc/systemd/system/multi-user.target.wants/wa-web.service",
    ]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(m.sandbox.is_enabled("wa-web"), "disabled");
    m.sandbox.systemctl_ok(&["daemon-reload"]);
    assert!(
        eventually(Duration::from_secs(10), || enabled_lines() > enabled_before
            && said_with(&m, "service#wa-web: enabled")
                .is_some_and(|line| line.contains("systemd reloaded"))),
        "wa-web was not enabled again after its link was removed and systemd reloaded:\n{}",
        journal(&m)
    );
    assert_eq!(m.sandbox.is_enabled("wa-web"), "enabled");
    assert!(
        journal(&m).contains("service#wa-db: started; cause: start"),
        "{}",
        journal(&m)
    );
    // In the journal with fields of their own: a unit's repairs are found
    // by its name.
    let out = m.sandbox.exec(&[
        "journalctl",
        "--no-pager",
        "-o",
        "cat",
        "-u",
        WATCH,
        "UNIT=wa-web.service",
        "ACTION=started",
    ]);
    let found = String::from_utf8_lossy(&out.stdout);
    assert!(
        found.contains("service#wa-web: started") && !found.contains("wa-db"),
        "{found}"
    );
    // systemd's view of the watch: what it follows, and its last repair.
    let out = m
        .sandbox
        .exec(&["systemctl", "show", "-p", "StatusText", "--value", WATCH]);
    let status = String::from_utf8_lossy(&out.stdout);
    assert!(
        status.contains("watching 1 policy, 2 units") && status.contains("service#wa-web"),
        "{status}"
    );

    // Quiet again (the follow-up of the host's own changes has run): a
    // unit no policy manages wakes no run.
    std::thread::sleep(Duration::from_millis(1500));
    let before = report_stamp(&m);
    assert!(!before.is_empty(), "no report written");
    for _ in 0..3 {
        m.sandbox.systemctl_ok(&["start", "wa-other"]);
        m.sandbox.systemctl_ok(&["stop", "wa-other"]);
    }
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(report_stamp(&m), before, "a run happened:\n{}", journal(&m));

    // `host run` beside the watch: the lock is free between runs.
    host_run_beside(&m);

    // systemd re-executed, then a stop: still repaired (the watch follows
    // systemd back onto the bus).
    m.sandbox.systemctl_ok(&["daemon-reexec"]);
    m.sandbox.systemctl_ok(&["stop", "wa-db"]);
    assert!(
        eventually(Duration::from_secs(10), || m.sandbox.is_active("wa-db")
            == "active"),
        "wa-db was not started again after daemon-reexec:\n{}",
        journal(&m)
    );

    // SIGTERM: exit 0, and the lock is free at once.
    m.sandbox.systemctl_ok(&["stop", WATCH]);
    let out = m.sandbox.exec(&[
        "systemctl",
        "show",
        "--property=Result,ExecMainStatus",
        "--",
        WATCH,
    ]);
    let shown = String::from_utf8_lossy(&out.stdout);
    // A transient unit that ended well is gone; one that failed stays.
    assert!(
        shown.contains("ExecMainStatus=0") && !shown.contains("Result=exit-code"),
        "{shown}\n{}",
        journal(&m)
    );
    host_run_beside(&m);
}

#[e2e_test(requires = "root, systemd, minisign")]
fn a_subscribed_file_replaced_by_rename_restarts_once_and_an_unsigned_document_is_refused() {
    let m = machine();
    m.service("wb-web", true, false);
    m.sandbox.write_file("/etc/wb/app.conf", "workers = 2\n");
    let manifest = "- service:\n    - wb-web:\n        ensure: running\n        subscribe: [\"file#/etc/wb/app.conf\"]\n";
    install_settings(&m, manifest);
    // The policy, signed, in a directory of the machine's, as an operator
    // installs it.
    let name = m.policy.file_name().unwrap().to_str().unwrap().to_owned();
    let policy = format!("/etc/ph-watch/{name}");
    let out = m.sandbox.exec(&[
        "sh",
        "-c",
        r#"cp "$1" "$2" && cp "$1.minisig" "$2.minisig""#,
        "sh",
        m.policy.to_str().unwrap(),
        &policy,
    ]);
    assert!(out.status.success(), "{out:?}");
    start_watch_of(&m, &policy, &["--watch-path", "/etc/wb"]);
    let pid = m.sandbox.main_pid("wb-web");

    // sed -i replaces the file by rename: one restart, by a run that took
    // the policy's component as the watch's first run built it.
    let out = m.sandbox.exec(&["sed", "-i", "s/2/4/", "/etc/wb/app.conf"]);
    assert!(out.status.success());
    assert_restarted_once(&m, "wb-web", pid, "sed -i");
    assert_eq!(compile_cache(&m), "kept", "{:#}", last_report(&m));

    // The settings replaced by a document nobody signed: refused, said,
    // and the unit is left alone, even when it stops.
    let pid = m.sandbox.main_pid("wb-web");
    m.sandbox.write_file(
        SETTINGS,
        "- service:\n    - wb-web:\n        ensure: stopped\n",
    );
    assert!(
        eventually(Duration::from_secs(10), || journal(&m).contains("refused")),
        "{}",
        journal(&m)
    );
    assert_eq!(
        m.sandbox.main_pid("wb-web"),
        pid,
        "the unsigned document was applied"
    );
    m.sandbox.systemctl_ok(&["stop", "wb-web"]);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(m.sandbox.is_active("wb-web"), "inactive", "{}", journal(&m));

    // A good document again: admitted, and the unit is repaired.
    install_settings(&m, manifest);
    assert!(
        eventually(Duration::from_secs(10), || m.sandbox.is_active("wb-web")
            == "active"),
        "{}",
        journal(&m)
    );
    assert!(
        eventually(Duration::from_secs(10), || journal(&m)
            .contains("admitted again")),
        "{}",
        journal(&m)
    );

    // The policy itself replaced by one its signature does not cover
    // (replaced by rename, as an installer does): refused, its units left
    // alone; the signed one back: admitted, and the drift repaired.
    let refusals = journal(&m).matches("refused").count();
    let out = m.sandbox.exec(&[
        "sh",
        "-c",
        r#"cp "$1" "$1.new" && printf '\0' >> "$1.new" && mv "$1.new" "$1""#,
        "sh",
        &policy,
    ]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        eventually(Duration::from_secs(10), || journal(&m)
            .matches("refused")
            .count()
            > refusals),
        "the tampered policy was not refused:\n{}",
        journal(&m)
    );
    m.sandbox.systemctl_ok(&["stop", "wb-web"]);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(m.sandbox.is_active("wb-web"), "inactive", "{}", journal(&m));
    let out = m.sandbox.exec(&[
        "sh",
        "-c",
        r#"cp "$1" "$2.new" && mv "$2.new" "$2""#,
        "sh",
        m.policy.to_str().unwrap(),
        &policy,
    ]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        eventually(Duration::from_secs(10), || m.sandbox.is_active("wb-web")
            == "active"),
        "the signed policy back did not repair wb-web:\n{}",
        journal(&m)
    );

    // A policy replaced by other signed bytes (the same code with one more
    // custom section) runs as compiled from its own bytes: the component
    // kept for the earlier ones is not taken for it.
    let mut bytes = std::fs::read(&m.policy).unwrap();
    bytes.extend_from_slice(b"\x00\x05\x04kept");
    let other = m.sandbox.share_file(&name, bytes);
    sign_file(&other);
    let stamp = report_stamp(&m);
    let out = m.sandbox.exec(&[
        "sh",
        "-c",
        r#"cp "$1.minisig" "$2.minisig.new" && cp "$1" "$2.new" && mv "$2.minisig.new" "$2.minisig" && mv "$2.new" "$2""#,
        "sh",
        other.to_str().unwrap(),
        &policy,
    ]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        eventually(Duration::from_secs(10), || report_stamp(&m) != stamp
            && compile_cache(&m) != "kept"),
        "no run of the other policy compiled it:\n{:#}\n{}",
        last_report(&m),
        journal(&m)
    );
    assert_eq!(compile_cache(&m), "miss", "{:#}", last_report(&m));
}

/// How the last run obtained the policy's code (the machine's report).
fn compile_cache(m: &Machine) -> String {
    last_report(m)["policies"][0]["compile_cache"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// How many times the crash-looping unit's process ran.
fn crash_starts(m: &Machine) -> usize {
    let out = m
        .sandbox
        .exec(&["sh", "-c", "cat /run/wc-crash.starts 2>/dev/null | wc -l"]);
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0)
}

/// The report file the watch's last run wrote.
fn last_report(m: &Machine) -> serde_json::Value {
    let out = m.sandbox.exec(&["cat", REPORT]);
    serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null)
}

#[e2e_test(requires = "root, systemd, minisign")]
fn a_crash_loop_is_held_back_while_another_unit_is_repaired_and_an_upgrade_restarts_once() {
    let m = machine();
    m.service("wc-web", true, true);
    m.install_package("wc-pkg", "1.0");
    // A daemon that dies as soon as it starts (no Restart=: only the host
    // starts it again), counting its starts.
    m.install_units(&[(
        "wc-crash".to_owned(),
        "[Service]\nExecStart=/bin/sh -c 'echo start >> /run/wc-crash.starts; exit 3'\n".to_owned(),
    )]);
    let manifest = "- service:\n    - wc-web:\n        ensure: running\n        subscribe: [\"package#wc-pkg\"]\n    - wc-crash:\n        ensure: running\n";
    install_settings(&m, manifest);
    start_watch(&m, &[]);

    // Started three times within a minute: held back for 10 s.
    assert!(
        eventually(Duration::from_secs(30), || said_with(
            &m,
            "held back for 10s"
        )
        .is_some()),
        "no hold:\n{}",
        journal(&m)
    );
    let held_at = Instant::now();
    let starts = crash_starts(&m);
    assert_eq!(starts, 3, "{}", journal(&m));
    let line = said_with(&m, "held back for 10s").unwrap();
    assert!(
        line.contains("wc-crash.service") && line.contains("3 times within 60s"),
        "{line}"
    );

    // Meanwhile another unit's stop is still repaired, and the run that
    // repairs it says the crash loop held, not failed.
    m.sandbox.systemctl_ok(&["stop", "wc-web"]);
    assert!(
        eventually(Duration::from_secs(5), || m.sandbox.is_active("wc-web")
            == "active"),
        "wc-web was not repaired during the hold:\n{}",
        journal(&m)
    );
    assert!(
        eventually(Duration::from_secs(3), || {
            let report = last_report(&m);
            let crash = report["policies"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|p| p["resources"].as_array().cloned().unwrap_or_default())
                .find(|e| e["resource"] == "service#wc-crash")
                .unwrap_or_default();
            crash["left_alone"] == "held" && crash["outcome"] == "left-alone"
        }),
        "{}",
        last_report(&m)
    );
    if held_at.elapsed() < Duration::from_secs(8) {
        assert_eq!(
            crash_starts(&m),
            3,
            "started during its hold:\n{}",
            journal(&m)
        );
    }
    // The hold ends: one start, then a hold twice as long.
    assert!(
        eventually(Duration::from_secs(20), || said_with(
            &m,
            "held back for 20s"
        )
        .is_some()),
        "{}",
        journal(&m)
    );
    assert_eq!(crash_starts(&m), 4, "{}", journal(&m));

    // A package upgrade restarts its subscriber exactly once.
    let pid = m.sandbox.main_pid("wc-web");
    m.install_package("wc-pkg", "2.0");
    assert_restarted_once(&m, "wc-web", pid, "the upgrade");
    let said = journal(&m);
    assert!(said.contains("/var/lib/dpkg/status changed"), "{said}");
}

#[e2e_test(requires = "root, systemd, minisign")]
fn a_paused_unit_is_left_alone_by_watch_and_timer_runs_until_resumed() {
    let m = machine();
    m.service("wd-web", true, true);
    m.sandbox.write_file("/etc/wd/app.conf", "workers = 2\n");
    install_settings(
        &m,
        "- service:\n    - wd-web:\n        ensure: running\n        enable: true\n        subscribe: [\"file#/etc/wd/app.conf\"]\n",
    );
    start_watch(&m, &["--watch-path", "/etc/wd"]);
    let host = m.host.to_str().unwrap();

    // Only root pauses: an unprivileged user is refused, and nothing is paused.
    let out = m.sandbox.exec(&[
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        host,
        "pause",
        "wd-web",
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("run this as root"),
        "{out:?}"
    );
    let out = m
        .sandbox
        .exec(&["test", "-e", "/var/lib/policy-host/paused.json"]);
    assert!(!out.status.success(), "an unprivileged user wrote a pause");

    // Paused: a configuration edited meanwhile restarts nothing...
    let out = m.sandbox.exec(&[host, "pause", "wd-web"]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("paused wd-web.service until `host resume`"),
        "{out:?}"
    );
    let pid = m.sandbox.main_pid("wd-web");
    std::thread::sleep(Duration::from_millis(500));
    let out = m.sandbox.exec(&["sed", "-i", "s/2/4/", "/etc/wd/app.conf"]);
    assert!(out.status.success());
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        m.sandbox.main_pid("wd-web"),
        pid,
        "restarted while paused:\n{}",
        journal(&m)
    );
    // ... until resumed: the change was kept for it, and reaches the daemon.
    let out = m.sandbox.exec(&[host, "resume", "wd-web"]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        eventually(Duration::from_secs(5), || m.sandbox.main_pid("wd-web")
            != pid),
        "the edit made during the pause never restarted wd-web:\n{}",
        journal(&m)
    );
    std::thread::sleep(Duration::from_millis(1500));

    let out = m.sandbox.exec(&[host, "pause", "wd-web"]);
    assert!(out.status.success(), "{out:?}");
    // Maintenance: a stop by hand stays.
    std::thread::sleep(Duration::from_millis(500));
    m.sandbox.systemctl_ok(&["stop", "wd-web"]);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(m.sandbox.is_active("wd-web"), "inactive", "{}", journal(&m));
    let report = last_report(&m);
    assert_eq!(report["summary"]["left_alone"], 1, "{report}");
    assert_eq!(report["summary"]["failed"], 0, "{report}");
    // A timer's run says so too, and succeeds.
    let out = m.sandbox.exec(&[
        host,
        "run",
        m.policy.to_str().unwrap(),
        "--trusted-key",
        m.trusted_key.to_str().unwrap(),
        "--settings",
        SETTINGS,
        "--detailed-exitcodes",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains(
            "paused: paused by the operator (host pause) until `host resume`; refused: start"
        ),
        "{text}"
    );
    assert_eq!(m.sandbox.is_active("wd-web"), "inactive");
    let out = m.sandbox.exec(&[host, "status"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("paused: wd-web.service until `host resume`"),
        "{out:?}"
    );

    // Resumed: the watch repairs it at once.
    let out = m.sandbox.exec(&[host, "resume", "wd-web"]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        eventually(Duration::from_secs(5), || m.sandbox.is_active("wd-web")
            == "active"),
        "wd-web was not repaired after resume:\n{}",
        journal(&m)
    );

    // A pause for a while ends by itself, and the watch repairs then.
    let out = m.sandbox.exec(&[host, "pause", "--for", "3s", "wd-web"]);
    assert!(out.status.success(), "{out:?}");
    std::thread::sleep(Duration::from_millis(300));
    m.sandbox.systemctl_ok(&["stop", "wd-web"]);
    std::thread::sleep(Duration::from_millis(1200));
    assert_eq!(m.sandbox.is_active("wd-web"), "inactive", "{}", journal(&m));
    assert!(
        eventually(Duration::from_secs(8), || m.sandbox.is_active("wd-web")
            == "active"),
        "wd-web was not repaired when its pause ended:\n{}",
        journal(&m)
    );
}

#[e2e_test(requires = "root, systemd, minisign")]
fn a_watch_of_many_units_stays_on_the_bus_and_is_quiet_when_nothing_changes() {
    let m = machine();
    let names: Vec<String> = (1..=40).map(|n| format!("wm-{n:02}")).collect();
    m.install_units(
        &names
            .iter()
            .map(|n| (n.clone(), policy_host_e2e::sandbox::sleep_service(n)))
            .collect::<Vec<_>>(),
    );
    let mut manifest = "- service:\n".to_owned();
    for name in &names {
        manifest.push_str(&format!("    - {name}:\n        ensure: running\n"));
    }
    install_settings(&m, &manifest);
    start_watch(&m, &[]);
    // Each repair run reloads systemd and moves units: dozens of signals
    // queued while the watch reads unit file states. A stop after each of
    // a few runs is still repaired within a second or two.
    for name in &names[..4] {
        m.sandbox.systemctl_ok(&["stop", name]);
        assert!(
            eventually(Duration::from_secs(3), || m.sandbox.is_active(name)
                == "active"),
            "{name} was not repaired:\n{}",
            journal(&m)
        );
        std::thread::sleep(Duration::from_millis(1500));
    }
    // Quiet: once the last repair's follow-ups are over (on a loaded
    // machine they may outlast the sleep above), no run (the report stays
    // as it is) and the bus is never lost.
    wait_quiet(&m);
    let before = report_stamp(&m);
    std::thread::sleep(Duration::from_secs(7));
    assert_eq!(report_stamp(&m), before, "a run happened:\n{}", journal(&m));
    let said = journal(&m);
    assert!(!said.contains("connection was lost"), "{said}");
}

/// A settle window is a wait on one unit, not on the machine: a drift of
/// another unit inside it is repaired at once, each start is still judged
/// at its window's end or when its unit dies, and no `host run` moves a
/// unit while a window is open (the watch holds the lock until then).
#[e2e_test(requires = "root, systemd, minisign")]
fn a_drift_inside_another_units_settle_window_is_repaired_at_once_and_every_window_is_judged() {
    const WINDOW_US: u64 = 3_000_000;
    let m = machine();
    for unit in ["wd-a", "wd-b", "wd-c"] {
        m.service(unit, true, true);
    }
    let manifest = "- service:\n    - wd-a:\n        ensure: running\n    - wd-b:\n        ensure: running\n    - wd-c:\n        ensure: running\n";
    install_settings(&m, manifest);
    start_watch(&m, &["--settle", "3"]);
    wait_quiet(&m);
    let up = |unit: &str| {
        assert!(
            eventually(Duration::from_secs(10), || m.sandbox.is_active(unit)
                == "active"),
            "{unit} was not started again:\n{}",
            journal(&m)
        );
        m.monotonic(unit, "ActiveEnterTimestampMonotonic")
    };

    // wd-a stopped and started again: its 3 s window opens.
    m.sandbox.systemctl_ok(&["stop", "wd-a"]);
    let a_up = up("wd-a");
    // Inside it, `host run` finds the machine's lock held.
    let out = host_run_no_wait(&m);
    let inside = m.monotonic("wd-a", "ActiveEnterTimestampMonotonic") == a_up
        && uptime_us(&m) < a_up + WINDOW_US;
    let said = String::from_utf8_lossy(&out.stderr);
    if inside {
        assert!(
            !out.status.success() && said.contains("not waiting (--no-wait)"),
            "a host run went ahead inside a settle window: {said}\n{}",
            journal(&m)
        );
    }
    // wd-b stopped inside wd-a's window: repaired before that window ends.
    m.sandbox.systemctl_ok(&["stop", "wd-b"]);
    let b_up = up("wd-b");
    assert!(
        b_up < a_up + WINDOW_US,
        "wd-b was started again {} ms after wd-a, not inside wd-a's window:\n{}",
        (b_up - a_up) / 1000,
        journal(&m)
    );
    // Each start is said when its window has passed, in order.
    await_said(&m, Duration::from_secs(10), "service#wd-b: started", "");
    let said = journal(&m);
    let (a_at, b_at) = (
        said.find("service#wd-a: started")
            .expect("wd-a's start said"),
        said.find("service#wd-b: started").unwrap(),
    );
    assert!(a_at < b_at, "{said}");

    // wd-c's next start does not stay up (its file now makes it exit 0.5 s
    // after it starts), inside wd-b's window: its window fails, in
    // systemd's words, while wd-b's goes on.
    m.sandbox.write_file(
        "/etc/systemd/system/wd-c.service",
        "[Service]\nExecStart=/bin/sh -c 'sleep 0.5; exit 3'\n",
    );
    m.sandbox.systemctl_ok(&["stop", "wd-b"]);
    up("wd-b");
    m.sandbox.systemctl_ok(&["stop", "wd-c"]);
    await_said(
        &m,
        Duration::from_secs(15),
        "service#wd-c: failed",
        "did not stay up",
    );
}

/// The sandbox's CLOCK_MONOTONIC, in microseconds (systemd's timestamps'
/// clock).
fn uptime_us(m: &Machine) -> u64 {
    let out = m.sandbox.exec(&["cat", "/proc/uptime"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let seconds: f64 = text
        .split_whitespace()
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(f64::MAX);
    (seconds * 1e6) as u64
}
