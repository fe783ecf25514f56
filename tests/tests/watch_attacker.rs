//! `host watch` under a local attacker: an unprivileged user on the same
//! machine (a throwaway system user, created in the sandbox by the test and
//! removed by it), against a watch on a real systemd with its bus. Each test
//! asserts what the victim sees: runs counted by rewrites of the report
//! file, restarts by the unit's main PID, exit codes, files unchanged.

use std::time::{Duration, Instant};

use policy_host_e2e::machine::{machine, Machine};
use policy_host_e2e::outcome::text;
use policy_host_e2e::requires::e2e_test;
use policy_host_e2e::watching::{
    eventually, install_settings, journal, report_stamp, start_watch, wait_quiet, SETTINGS, WATCH,
};

/// SIGHUP: the watch reads host.toml again and runs everything, as its
/// resync does.
fn full_run(m: &Machine) {
    m.sandbox.systemctl_ok(&[
        "kill",
        "--kill-whom=main",
        "--signal=SIGHUP",
        &format!("{WATCH}.service"),
    ]);
}

/// The metrics file the watches here write.
const METRICS: &str = "/var/lib/ph-watch.prom";

/// A system user of the sandbox, for one test; removed on drop.
struct Attacker<'a> {
    m: &'a Machine,
    name: &'static str,
}

impl<'a> Attacker<'a> {
    fn create(m: &'a Machine, name: &'static str) -> Self {
        let out = m
            .sandbox
            .exec(&["useradd", "--system", "--no-create-home", name]);
        assert!(out.status.success(), "useradd: {}", text(&out.stderr));
        Self { m, name }
    }

    /// `sh -c SCRIPT` as the attacker (no capabilities, no other group).
    fn sh(&self, script: &str) -> std::process::Output {
        self.m.sandbox.exec(&[
            "setpriv",
            &format!("--reuid={}", self.name),
            &format!("--regid={}", self.name),
            "--clear-groups",
            "--",
            "sh",
            "-c",
            script,
        ])
    }
}

impl Drop for Attacker<'_> {
    fn drop(&mut self) {
        let _ = self.m.sandbox.exec(&["userdel", self.name]);
    }
}

/// The watch's unique names on the system bus, as `busctl list` shows them
/// to anyone (with their PID): every connection the watch holds now.
fn unique_names(m: &Machine) -> Vec<String> {
    let pid = m.sandbox.main_pid(&format!("{WATCH}.service")).to_string();
    let list = text(
        &m.sandbox
            .exec(&["busctl", "--system", "list", "--no-legend", "--unique"])
            .stdout,
    );
    let names: Vec<String> = list
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let name = fields.next()?;
            (fields.next()? == pid).then(|| name.to_owned())
        })
        .collect();
    assert!(!names.is_empty(), "no bus connection of PID {pid}:\n{list}");
    names
}

/// A sample of the watch's metrics file, by its series' name.
fn metric(m: &Machine, name: &str) -> Option<f64> {
    let metrics = text(&m.sandbox.exec(&["cat", METRICS]).stdout);
    metrics
        .lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.strip_prefix(name))
        .and_then(|rest| rest.split_whitespace().last())
        .and_then(|v| v.parse().ok())
}

const ONE_UNIT: &str = "- service:\n    - wx-web:\n        ensure: running\n        enable: true\n";

/// Signals that imitate systemd's, sent by a local user straight to the
/// watch's connection (so the bus delivers them whatever the match rules
/// say), 25 of each kind, make no run; systemd's own still do: a stop is
/// repaired, and the metrics count what was dropped.
#[e2e_test(requires = "root, systemd, minisign")]
fn signals_sent_straight_to_the_watch_by_another_user_wake_nothing() {
    let m = machine();
    m.service("wx-web", true, true);
    install_settings(&m, ONE_UNIT);
    start_watch(&m, &["--metrics", METRICS]);
    wait_quiet(&m);
    let attacker = Attacker::create(&m, "ph-attacker");
    let names = unique_names(&m).join(" ");
    let pid = m.sandbox.main_pid(&format!("{WATCH}.service"));
    let runs_before = report_stamp(&m);

    let unit_path = "/org/freedesktop/systemd1/unit/wx_2dweb_2eservice";
    let forged: [String; 4] = [
        format!(
            "busctl --system emit --destination=$watch {unit_path} org.freedesktop.DBus.Properties \
             PropertiesChanged 'sa{{sv}}as' org.freedesktop.systemd1.Unit 1 ActiveState s inactive 0"
        ),
        "busctl --system emit --destination=$watch /org/freedesktop/systemd1 \
             org.freedesktop.systemd1.Manager Reloading b false"
        .to_owned(),
        "busctl --system emit --destination=$watch /org/freedesktop/DBus org.freedesktop.DBus \
             NameOwnerChanged sss org.freedesktop.systemd1 :1.0 :1.999"
        .to_owned(),
        "busctl --system emit --destination=$watch /org/freedesktop/systemd1 \
             org.freedesktop.systemd1.Manager UnitFilesChanged"
        .to_owned(),
    ];
    for signal in &forged {
        let out = attacker.sh(&format!(
            "for i in $(seq 25); do for watch in {names}; do {signal} || exit 1; done; done"
        ));
        assert!(
            out.status.success(),
            "the bus took the attacker's signals: {signal}: {}",
            text(&out.stderr)
        );
    }
    // Far longer than the debounce and a run.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        report_stamp(&m),
        runs_before,
        "no run for 100 forged signals:\n{}",
        journal(&m)
    );
    assert_eq!(m.sandbox.main_pid(&format!("{WATCH}.service")), pid);

    // systemd's own signals still count: a stop is repaired, and that run's
    // metrics say how many forged signals were dropped.
    m.sandbox.systemctl_ok(&["stop", "wx-web"]);
    assert!(
        eventually(Duration::from_secs(10), || m.sandbox.is_active("wx-web")
            == "active"),
        "{}",
        journal(&m)
    );
    assert!(
        eventually(Duration::from_secs(5), || metric(
            &m,
            "policy_host_watch_signals_dropped_total"
        )
        .is_some_and(|n| n >= 100.0)),
        "{}",
        text(&m.sandbox.exec(&["cat", METRICS]).stdout)
    );
}

/// A watch started by a user other than root is refused at once, with one
/// message and a failing exit status, before it connects to anything (it
/// would otherwise retry every 5 s forever, holding nothing but noise).
#[e2e_test(requires = "root, systemd, minisign")]
fn an_unprivileged_watch_is_refused_at_start() {
    let m = machine();
    install_settings(&m, ONE_UNIT);
    let attacker = Attacker::create(&m, "ph-watcher");
    let started = Instant::now();
    let out = attacker.sh(&format!(
        "exec timeout 20 {} watch {} --trusted-key {} --settings {SETTINGS}",
        m.host.display(),
        m.policy.display(),
        m.trusted_key.display()
    ));
    let elapsed = started.elapsed();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        elapsed < Duration::from_secs(5),
        "refused at once: {elapsed:?}"
    );
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("run it as root") && stderr.contains("not as uid"),
        "{stderr}"
    );
    assert!(text(&out.stdout).is_empty());
}

/// A subscribed file's directory that another user can write: that user
/// points the subscribed name at a file only root can read. The host does
/// not follow the link (nor watch through it): no restart, whatever that
/// file does, and a warning naming the path. A link root made is followed.
#[e2e_test(requires = "root, systemd, minisign")]
fn a_link_planted_by_another_user_to_a_root_only_file_is_not_followed() {
    let m = machine();
    let attacker = Attacker::create(&m, "ph-planter");
    m.sandbox.write_file("/etc/wx-demo/app.conf", "port = 80\n");
    m.sandbox.write_file("/etc/wx-real.conf", "port = 80\n");
    let out = m.sandbox.exec(&["chown", "ph-planter", "/etc/wx-demo"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    m.service("wx-sub", true, false);
    install_settings(
        &m,
        "- service:\n    - wx-sub:\n        ensure: running\n        subscribe: [\"file#/etc/wx-demo/app.conf\"]\n",
    );
    start_watch(&m, &[]);
    wait_quiet(&m);
    let pid = m.sandbox.main_pid("wx-sub");
    let shadow = text(&m.sandbox.exec(&["sha256sum", "/etc/shadow"]).stdout);

    // The attack: the name now leads to /etc/shadow.
    let out = attacker.sh("ln -sfn /etc/shadow /etc/wx-demo/app.conf");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        eventually(Duration::from_secs(10), || journal(&m)
            .contains("is not followed")),
        "the watch says it does not follow the link:\n{}",
        journal(&m)
    );
    let said = journal(&m);
    let warning = said
        .lines()
        .find(|l| l.contains("is not followed"))
        .expect("the warning");
    assert!(
        warning.contains("file#/etc/wx-demo/app.conf")
            && warning.contains("/etc/shadow")
            && warning.contains("fs.protected_symlinks"),
        "{warning}"
    );
    // The root-only file changes, and a full run looks again (as a resync does).
    let out = m.sandbox.exec(&["chage", "-d", "0", "ph-planter"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_ne!(
        text(&m.sandbox.exec(&["sha256sum", "/etc/shadow"]).stdout),
        shadow
    );
    full_run(&m);
    std::thread::sleep(Duration::from_secs(2));
    wait_quiet(&m);
    assert_eq!(
        m.sandbox.main_pid("wx-sub"),
        pid,
        "never restarted for root's file:\n{}",
        journal(&m)
    );

    // A link root makes is followed: the file behind it edited restarts
    // the subscriber.
    let out = m
        .sandbox
        .exec(&["ln", "-sfn", "/etc/wx-real.conf", "/etc/wx-demo/app.conf"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // (A reference not followed is not watched either: the next full run,
    // here asked for, records what the link leads to.)
    full_run(&m);
    std::thread::sleep(Duration::from_secs(1));
    wait_quiet(&m);
    let pid = m.sandbox.main_pid("wx-sub");
    m.sandbox.write_file("/etc/wx-real.conf", "port = 81\n");
    full_run(&m);
    assert!(
        eventually(Duration::from_secs(10), || m.sandbox.main_pid("wx-sub")
            != pid),
        "root's link is followed:\n{}",
        journal(&m)
    );
}
