//! The shipped systemd units (`dist/systemd/policy-host.service`,
//! `policy-host.timer` and `policy-host-watch.service`) in a real systemd 252, booted in a throwaway sandbox
//! (see `policy_host_e2e::sandbox`): they pass `systemd-analyze verify`, and
//! the timer really runs the hardened service, which converges the units and
//! writes the report and the metrics.
//!
//! The units are installed as shipped; a test changes only what it must, with
//! drop-ins: a schedule of seconds instead of minutes, and a probe that
//! records what the service's processes see.
//!
//! These tests require root and systemd (`#[e2e_test(requires)]`).

use std::path::Path;
use std::time::{Duration, Instant};

use policy_host_e2e::build;
use policy_host_e2e::metrics::{self, Samples};
use policy_host_e2e::requires::e2e_test;
use policy_host_e2e::sandbox::{sleep_service, Sandbox};
use serde_json::Value;

const SERVICE: &str = "policy-host.service";
const TIMER: &str = "policy-host.timer";
const WATCH: &str = "policy-host-watch.service";
const REPORT: &str = "/var/lib/policy-host/last-run.json";
const METRICS: &str = "/var/lib/prometheus/node-exporter/policy-host.prom";
/// Where the probe (an `ExecStartPre=` of the service) writes what it saw.
const PROBE_OUT: &str = "/var/lib/policy-host/probe.txt";
/// How long a test waits for the timer to run the service.
const RUN_TIMEOUT: Duration = Duration::from_secs(30);

/// A sandbox with the host, the units, a trusted key and a signed policy
/// installed as `dist/README.md` says.
struct Machine {
    sandbox: Sandbox,
}

/// Builds what the test runs, boots a sandbox and installs everything.
fn machine() -> Machine {
    let host = build::host_binary();
    let policy = build::signed_policy("example-policy");
    let public_key = build::test_key().public_key;
    let sandbox = Sandbox::boot_for_test(&build::target_dir());
    let m = Machine { sandbox };
    m.install(&host, &policy, &public_key);
    m
}

/// A shipped unit file, read on this side: the sandbox sees the workspace
/// only through its overlay's lower layer, which may lag behind edits.
fn shipped(unit: &str) -> String {
    let path = build::workspace_root().join("dist/systemd").join(unit);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// A command's output, trimmed: systemctl's one-word answers.
fn text(output: &[u8]) -> String {
    policy_host_e2e::outcome::text(output).trim().to_owned()
}

impl Machine {
    /// Runs `args` inside, panicking with its output unless it exits 0;
    /// returns its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let output = self.sandbox.exec(args);
        assert!(
            output.status.success(),
            "{args:?} in the sandbox failed ({}):\n{}\n{}",
            output.status,
            text(&output.stdout),
            text(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    fn install(&self, host: &Path, policy: &Path, public_key: &Path) {
        let path = |p: &Path| p.to_str().expect("UTF-8 path").to_string();
        // The binary, bind-mounted rather than copied (it is large, and the
        // sandbox's root lives in memory): the unit runs /usr/local/bin/host.
        self.ok(&[
            "sh",
            "-c",
            r#"set -e; mkdir -p /usr/local/bin; touch /usr/local/bin/host
               mount --bind -o ro "$1" /usr/local/bin/host"#,
            "sh",
            &path(host),
        ]);
        self.ok(&[
            "sh",
            "-c",
            r#"set -e
               install -d /etc/policy-host/policies /etc/policy-host/trusted-keys
               install -m 644 "$1" "$2" /etc/policy-host/policies/
               install -m 644 "$3" /etc/policy-host/trusted-keys/test.pub
               install -d /var/lib/prometheus/node-exporter"#,
            "sh",
            &path(policy),
            &path(&build::signature_path(policy)),
            &path(public_key),
        ]);
        for unit in [SERVICE, TIMER, WATCH] {
            self.sandbox
                .write_file(&format!("/etc/systemd/system/{unit}"), &shipped(unit));
        }
        self.sandbox.systemctl_ok(&["daemon-reload"]);
    }

    /// `systemd-analyze verify` of the installed `units` says nothing.
    fn assert_verified(&self, units: &[&str]) {
        let paths: Vec<String> = units
            .iter()
            .map(|unit| format!("/etc/systemd/system/{unit}"))
            .collect();
        let mut args = vec!["systemd-analyze", "verify"];
        args.extend(paths.iter().map(String::as_str));
        let verify = self.sandbox.exec(&args);
        assert!(
            verify.status.success() && verify.stderr.is_empty(),
            "systemd-analyze verify ({}):\n{}\n{}",
            verify.status,
            text(&verify.stdout),
            text(&verify.stderr)
        );
    }

    /// `systemctl show -p NAME --value UNIT`.
    fn property(&self, unit: &str, name: &str) -> String {
        let output = self
            .sandbox
            .systemctl(&["show", "-p", name, "--value", "--", unit]);
        text(&output.stdout)
    }

    fn state(&self, unit: &str) -> (String, String) {
        (self.sandbox.is_active(unit), self.sandbox.is_enabled(unit))
    }

    fn cat(&self, path: &str) -> String {
        self.ok(&["cat", path])
    }

    /// Installs `/etc/systemd/system/UNIT.d/NAME.conf` and reloads.
    fn drop_in(&self, unit: &str, name: &str, contents: &str) {
        self.sandbox.write_file(
            &format!("/etc/systemd/system/{unit}.d/{name}.conf"),
            contents,
        );
        self.sandbox.systemctl_ok(&["daemon-reload"]);
    }

    /// The service's last start, in monotonic microseconds (0: never).
    fn last_start(&self) -> u64 {
        let value = self.property(SERVICE, "ExecMainStartTimestampMonotonic");
        value.parse().unwrap_or_else(|_| panic!("{value:?}"))
    }

    /// Waits until the service has started after `after` (a
    /// [`last_start`](Self::last_start)) and finished; returns that start.
    fn wait_for_run(&self, after: u64) -> u64 {
        let deadline = Instant::now() + RUN_TIMEOUT;
        loop {
            let start = self.last_start();
            let exit: u64 = self
                .property(SERVICE, "ExecMainExitTimestampMonotonic")
                .parse()
                .unwrap_or(0);
            let active = self.property(SERVICE, "ActiveState");
            if start > after && exit >= start && active != "activating" {
                return start;
            }
            assert!(
                Instant::now() < deadline,
                "the timer did not run {SERVICE} within {RUN_TIMEOUT:?} \
                 (ActiveState={active}, start {start}, exit {exit});\n\
                 timer: {}\njournal:\n{}",
                text(
                    &self
                        .sandbox
                        .systemctl(&["status", "--no-pager", TIMER])
                        .stdout
                ),
                self.journal()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn journal(&self) -> String {
        text(
            &self
                .sandbox
                .exec(&["journalctl", "--no-pager", "-o", "cat", "-u", SERVICE])
                .stdout,
        )
    }

    /// Waits (journald stores a service's output asynchronously) until a
    /// line of `journalctl -t policy-host` contains `text`.
    fn wait_for_journal(&self, needle: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let tagged =
                self.sandbox
                    .exec(&["journalctl", "--no-pager", "-o", "cat", "-t", "policy-host"]);
            let tagged = text(&tagged.stdout);
            if tagged.contains(needle) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "no {needle:?} from policy-host in the journal:\n{tagged}\nthe service's journal:\n{}",
                self.journal()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Asserts the last run succeeded, with the journal when it did not.
    fn assert_succeeded(&self) {
        let result = (
            self.property(SERVICE, "Result"),
            self.property(SERVICE, "ExecMainStatus"),
        );
        assert_eq!(
            result,
            ("success".to_string(), "0".to_string()),
            "{SERVICE} failed; journal:\n{}",
            self.journal()
        );
    }

    /// The metrics file the service wrote, checked by `promtool`.
    fn metrics(&self) -> Samples {
        let text = self.cat(METRICS);
        metrics::check_text(&text);
        metrics::parse(&text)
    }

    /// The host's samples as Prometheus gets them: through Debian's
    /// node_exporter (its packaged unit, as user prometheus), whose textfile
    /// collector reads the directory the service writes into.
    fn scrape(&self) -> Samples {
        self.sandbox
            .systemctl_ok(&["start", "prometheus-node-exporter.service"]);
        let deadline = Instant::now() + Duration::from_secs(20);
        let page = loop {
            let out = self
                .sandbox
                .exec(&["curl", "-sSf", "http://127.0.0.1:9100/metrics"]);
            if out.status.success() {
                break String::from_utf8_lossy(&out.stdout).into_owned();
            }
            assert!(
                Instant::now() < deadline,
                "node_exporter did not answer within 20 s: {}
{}",
                text(&out.stderr),
                text(
                    &self
                        .sandbox
                        .exec(&["journalctl", "--no-pager", "-u", "prometheus-node-exporter"])
                        .stdout
                )
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        let ours: String = page
            .lines()
            .filter(|l| {
                l.starts_with("policy_host_") || l.starts_with("node_textfile_scrape_error")
            })
            .map(|l| format!("{l}\n"))
            .collect();
        metrics::parse(&ours)
    }

    fn report(&self) -> Value {
        let json = self.cat(REPORT);
        serde_json::from_str(&json)
            .unwrap_or_else(|e| panic!("{REPORT} is not JSON ({e}):\n{json}"))
    }
}

/// The timer schedule for a test: the empty assignment clears the shipped
/// `OnBootSec=` and `OnCalendar=`, then `schedule` applies, with no random
/// delay and to the tenth of a second.
fn test_schedule(schedule: &str) -> String {
    format!("[Timer]\nOnBootSec=\n{schedule}\nRandomizedDelaySec=0\nAccuracySec=100ms\n")
}

/// Records, from inside the service's sandbox, what its processes may do.
const PROBE: &str = r#"#!/bin/sh
{
  grep -E '^(NoNewPrivs|CapEff|CapBnd|Seccomp):' /proc/self/status
  try() { if touch "$2" 2>/dev/null; then echo "$1=writable"; rm -f "$2"; else echo "$1=read-only"; fi; }
  try etc /etc/policy-host/probe
  try usr /usr/local/probe
  try run /run/probe
  try run-lock /run/lock/probe
  try lock-dir /run/policy-host/probe
  try state /var/lib/policy-host/probe
  try cache /var/cache/policy-host/probe
  try metrics /var/lib/prometheus/node-exporter/probe
  if test -e /root/marker; then echo root-home=visible; else echo root-home=hidden; fi
} > /var/lib/policy-host/probe.txt 2>&1
"#;

#[e2e_test(requires = "root, systemd")]
fn the_units_pass_systemd_analyze_verify_and_are_hardened() {
    let m = machine();
    m.assert_verified(&[SERVICE, TIMER]);

    // The schedule as shipped: 2 minutes after boot, then at :00, :15, :30 and :45.
    let monotonic = m.property(TIMER, "TimersMonotonic");
    assert!(monotonic.contains("OnBootUSec=2min"), "{monotonic}");
    let calendar = m.property(TIMER, "TimersCalendar");
    assert!(
        calendar.contains("OnCalendar=*-*-* *:00/15:00"),
        "{calendar}"
    );
    assert_eq!(m.property(TIMER, "RandomizedDelayUSec"), "1min");
    assert_eq!(m.property(TIMER, "FixedRandomDelay"), "yes");
    assert_eq!(m.property(TIMER, "Persistent"), "yes");
    assert_eq!(m.property(TIMER, "Unit"), SERVICE);
    assert_eq!(m.property(SERVICE, "Type"), "oneshot");
    // The host itself is bounded: memory well above the policies' 64 MiB, and tasks.
    assert_eq!(m.property(SERVICE, "MemoryMax"), (512u64 << 20).to_string());
    assert_eq!(m.property(SERVICE, "MemorySwapMax"), "0");
    assert_eq!(m.property(SERVICE, "TasksMax"), "512");
    assert_eq!(m.property(SERVICE, "RuntimeDirectory"), "policy-host");
    assert_eq!(m.property(SERVICE, "RuntimeDirectoryMode"), "0700");
    assert_eq!(m.property(SERVICE, "RuntimeDirectoryPreserve"), "yes");
    assert_eq!(m.property(SERVICE, "StateDirectoryMode"), "0700");
    assert_eq!(m.property(SERVICE, "CacheDirectoryMode"), "0700");

    // systemd's own rating of the sandboxing: 0 is best, 10 worst; below 2 is "SAFE".
    let (exposure, security) = m.sandbox.exposure(SERVICE);
    assert!(exposure < 2.0, "exposure {exposure}:\n{security}");
}

#[e2e_test(requires = "root, systemd")]
fn the_timer_runs_the_policies_under_the_hardened_service() {
    let m = machine();
    // The example policy's units, away from their desired state.
    for name in ["httpd", "legacy-ftpd", "metrics-agent"] {
        m.sandbox.install_unit(name, &sleep_service(name));
    }
    m.sandbox.systemctl_ok(&["start", "legacy-ftpd"]);
    m.sandbox.systemctl_ok(&["enable", "legacy-ftpd"]);
    m.sandbox
        .write_file("/root/marker", "ProtectHome= hides this\n");
    m.sandbox
        .write_file("/usr/local/sbin/policy-host-probe", PROBE);
    m.ok(&["chmod", "755", "/usr/local/sbin/policy-host-probe"]);
    // The probe runs in the service's sandbox, as ExecStart= does.
    m.drop_in(
        SERVICE,
        "probe",
        "[Service]\nExecStartPre=/usr/local/sbin/policy-host-probe\n",
    );

    // Run 1: one second after the timer starts.
    m.drop_in(TIMER, "test", &test_schedule("OnActiveSec=1s"));
    m.sandbox.systemctl_ok(&["enable", "--now", TIMER]);
    assert_eq!(m.state(TIMER), ("active".into(), "enabled".into()));
    let started = Instant::now();
    let first = m.wait_for_run(0);
    eprintln!(
        "first run done {:?} after starting the timer",
        started.elapsed()
    );
    m.assert_succeeded();

    assert_eq!(m.state("httpd"), ("active".into(), "enabled".into()));
    assert_eq!(
        m.state("legacy-ftpd"),
        ("inactive".into(), "disabled".into())
    );
    assert_eq!(
        m.state("metrics-agent"),
        ("active".into(), "disabled".into()),
        "running, its boot setting left alone"
    );

    let report = m.report();
    assert_eq!(report["policies"][0]["verified"], true, "{report:#}");
    assert_eq!(report["summary"]["success"], true, "{report:#}");
    assert_eq!(report["summary"]["resources"], 3, "{report:#}");
    assert_eq!(report["summary"]["changed"], 3, "{report:#}");
    assert_eq!(report["summary"]["failed"], 0, "{report:#}");

    let metrics = m.metrics();
    assert_eq!(metrics.value("policy_host_run_success"), 1.0);
    assert_eq!(
        metrics.value(r#"policy_host_resources{state="total"}"#),
        3.0
    );
    assert_eq!(
        metrics.value(r#"policy_host_resources{state="changed"}"#),
        3.0
    );
    assert_eq!(
        metrics.value(r#"policy_host_resources{state="failed"}"#),
        0.0
    );
    assert!(metrics.value("policy_host_run_duration_seconds") > 0.0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let at = metrics.value("policy_host_last_run_timestamp_seconds");
    assert!((now - at).abs() < 120.0, "last run at {at}, now {now}");
    // Read by node_exporter, as Prometheus scrapes it: the same values, and
    // the textfile collector found nothing wrong with the file.
    let scraped = m.scrape();
    assert_eq!(scraped.value("node_textfile_scrape_error"), 0.0);
    for series in [
        "policy_host_run_success",
        r#"policy_host_resources{state="total"}"#,
        r#"policy_host_resources{state="changed"}"#,
        r#"policy_host_resources{state="failed"}"#,
        "policy_host_last_run_timestamp_seconds",
        r#"policy_host_source_stale{policy="example_policy.wasm",kind="policy"}"#,
        "policy_host_run_interrupted",
    ] {
        assert_eq!(scraped.value(series), metrics.value(series), "{series}");
    }
    let info = scraped.series("policy_host_source_info");
    assert_eq!(info.len(), 1, "{info:?}");
    assert!(
        info[0].contains(r#"kind="policy""#) && info[0].contains(r#"digest="sha256:"#),
        "{info:?}"
    );
    // node_exporter runs as its own user: it must be able to read them.
    let modes = m.ok(&["stat", "-c", "%a %U", METRICS, REPORT]);
    assert_eq!(modes.lines().collect::<Vec<_>>(), ["644 root", "644 root"]);

    // The sandboxing, as configured...
    for (property, expected) in [
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("ProtectHome", "yes"),
        ("PrivateTmp", "yes"),
        ("PrivateDevices", "yes"),
        ("PrivateNetwork", "yes"),
        ("ProtectKernelTunables", "yes"),
        ("ProtectControlGroups", "yes"),
        ("RestrictNamespaces", "yes"),
        ("CapabilityBoundingSet", ""),
        ("MemoryDenyWriteExecute", "no"),
    ] {
        assert_eq!(m.property(SERVICE, property), expected, "{property}");
    }
    // ...and as the service's processes saw it.
    let probe = m.cat(PROBE_OUT);
    let probe: Vec<&str> = probe.lines().collect();
    assert_eq!(
        probe,
        [
            "CapEff:\t0000000000000000",
            "CapBnd:\t0000000000000000",
            "NoNewPrivs:\t1",
            "Seccomp:\t2",
            "etc=read-only",
            "usr=read-only",
            "run=read-only",
            "run-lock=read-only",
            "lock-dir=writable",
            "state=writable",
            "cache=writable",
            "metrics=writable",
            "root-home=hidden",
        ],
        "what the service could do"
    );
    // The cache, the state and the run lock's directory are root's alone
    // (CacheDirectoryMode=, StateDirectoryMode=, RuntimeDirectoryMode=), and
    // the lock's directory is kept after the run (RuntimeDirectoryPreserve=).
    let modes = m.ok(&[
        "stat",
        "-c",
        "%n %a %U",
        "/var/cache/policy-host",
        "/var/lib/policy-host",
        "/run/policy-host",
        "/run/policy-host/lock",
    ]);
    assert_eq!(
        modes.lines().collect::<Vec<_>>(),
        [
            "/var/cache/policy-host 700 root",
            "/var/lib/policy-host 700 root",
            "/run/policy-host 700 root",
            "/run/policy-host/lock 600 root",
        ]
    );

    // Run 2: from a calendar schedule, as the shipped timer repeats (every 2
    // seconds here). It finds nothing to do, and loads the policy compiled
    // by run 1 from the cache.
    m.drop_in(TIMER, "test", &test_schedule("OnCalendar=*:*:0/2"));
    m.sandbox.systemctl_ok(&["restart", TIMER]);
    m.wait_for_run(first);
    m.sandbox.systemctl_ok(&["stop", TIMER]);
    m.assert_succeeded();
    let report = m.report();
    assert_eq!(report["summary"]["success"], true, "{report:#}");
    assert_eq!(report["summary"]["changed"], 0, "{report:#}");
    assert_eq!(report["policies"][0]["compile_cache"], "hit", "{report:#}");
    let metrics = m.metrics();
    assert_eq!(metrics.value("policy_host_run_success"), 1.0);
    assert_eq!(
        metrics.value(r#"policy_host_resources{state="changed"}"#),
        0.0
    );
    assert_eq!(m.state("httpd"), ("active".into(), "enabled".into()));
    assert_eq!(
        m.state("legacy-ftpd"),
        ("inactive".into(), "disabled".into())
    );

    // The journal names the runs "policy-host" (SyslogIdentifier=), not "host".
    m.wait_for_journal("3 resources, 0 changed, 0 failed, 3 unchanged");

    // The shipped schedule again, after the timer has fired: restarting the
    // timer (as a package upgrade or a changed drop-in does) leaves it armed.
    m.ok(&["rm", "/etc/systemd/system/policy-host.timer.d/test.conf"]);
    m.sandbox.systemctl_ok(&["daemon-reload"]);
    m.sandbox.systemctl_ok(&["restart", TIMER]);
    m.sandbox.systemctl_ok(&["daemon-reload"]);
    assert_eq!(m.property(TIMER, "SubState"), "waiting");
    let next = m.property(TIMER, "NextElapseUSecRealtime");
    assert!(!next.is_empty(), "no next run after a restart");
}

/// The source install's watch: it passes `systemd-analyze verify`, is
/// sandboxed as well as the run service, can be enabled (a link that starts
/// it at boot), replaces the timer (starting it stops the timer), converges
/// the example policy and repairs a stop.
#[e2e_test(requires = "root, systemd")]
fn the_watch_unit_is_enabled_replaces_the_timer_and_repairs_a_stop() {
    let m = machine();
    m.assert_verified(&[WATCH]);
    let (exposure, security) = m.sandbox.exposure(WATCH);
    assert!(exposure <= 2.0, "exposure {exposure}:\n{security}");
    for name in ["httpd", "legacy-ftpd", "metrics-agent"] {
        m.sandbox.install_unit(name, &sleep_service(name));
    }
    m.sandbox.systemctl_ok(&["enable", "--now", TIMER]);
    assert_eq!(m.state(TIMER), ("active".into(), "enabled".into()));
    m.sandbox.systemctl_ok(&["enable", "--now", WATCH]);
    assert_eq!(m.state(WATCH), ("active".into(), "enabled".into()));
    assert!(m
        .sandbox
        .exec(&[
            "test",
            "-L",
            &format!("/etc/systemd/system/multi-user.target.wants/{WATCH}")
        ])
        .status
        .success());
    assert_eq!(
        m.state(TIMER),
        ("inactive".into(), "enabled".into()),
        "one driver: the watch stopped the timer"
    );
    assert_eq!(m.state("httpd"), ("active".into(), "enabled".into()));
    m.sandbox.systemctl_ok(&["stop", "httpd"]);
    let until = Instant::now() + Duration::from_secs(10);
    while m.sandbox.is_active("httpd") != "active" && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        m.sandbox.is_active("httpd"),
        "active",
        "{}",
        m.ok(&["journalctl", "-u", WATCH, "--no-pager", "-n", "30"])
    );
    // Writes the report and the metrics the unit names, as the timer's runs do.
    assert_eq!(m.report()["summary"]["success"], true);
    // And the other way round: starting the timer stops the watch.
    // (A conflict orders nothing: the watch's stop may still be under way
    // when the timer's start is done.)
    m.sandbox.systemctl_ok(&["start", TIMER]);
    let until = Instant::now() + Duration::from_secs(20);
    while m.sandbox.is_active(WATCH) != "inactive" && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(m.sandbox.is_active(WATCH), "inactive");
    assert_eq!(m.sandbox.is_active(TIMER), "active");
}
