//! Status over D-Bus against the design's `systemctl` commands, on a real
//! systemd 252 in the sandbox with its system bus running: for units in
//! every `ActiveState` and every `is-enabled` word, a missing unit, a
//! SysV-only init script and names that systemctl mangles, `host status`
//! reading over D-Bus and `host status --provider systemctl` give the same
//! words and the same errors. And a converging run ends with one reload, so
//! that systemd's dependency graph shows the new `WantedBy=` links.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Output;

use policy_host_e2e::build;
use policy_host_e2e::requires::e2e_test;
use policy_host_e2e::sandbox::{sleep_service, Sandbox};
use serde_json::Value;

fn unit(body: &str, install: &str) -> String {
    format!("[Unit]\nDescription=status agreement\n\n[Service]\n{body}\n{install}")
}

const INSTALL: &str = "\n[Install]\nWantedBy=multi-user.target\n";
const SYSV_SCRIPT: &str = "#!/bin/sh\n### BEGIN INIT INFO\n# Provides:          legacy-sysv\n# Required-Start:    $remote_fs\n# Required-Stop:     $remote_fs\n# Default-Start:     2 3 4 5\n# Default-Stop:      0 1 6\n# Short-Description: a SysV-only service\n### END INIT INFO\nexit 0\n";

/// Waits until `unit` is in `state` (systemd's jobs run on their own).
fn wait_for(sandbox: &Sandbox, unit: &str, state: &str) {
    for _ in 0..200 {
        if sandbox.is_active(unit) == state {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("{unit} never became {state}: {}", sandbox.is_active(unit));
}

/// Puts units in every state the tables know.
fn set_up(sandbox: &Sandbox) {
    let s = sandbox;
    // ActiveState: active, inactive, failed, activating, deactivating, reloading.
    s.install_unit("st-active", &sleep_service("st-active"));
    s.install_unit("st-inactive", &sleep_service("st-inactive"));
    s.install_unit("st-failed", &unit("ExecStart=/bin/false", INSTALL));
    s.install_unit(
        "st-activating",
        &unit("Type=oneshot\nExecStart=/bin/sleep 600", INSTALL),
    );
    s.install_unit(
        "st-deactivating",
        &unit(
            "ExecStart=/bin/sleep infinity\nExecStop=/bin/sleep 600\nTimeoutStopSec=900",
            INSTALL,
        ),
    );
    s.install_unit(
        "st-reloading",
        &unit(
            "ExecStart=/bin/sleep infinity\nExecReload=/bin/sleep 600\nTimeoutStartSec=900",
            INSTALL,
        ),
    );
    // is-enabled words.
    s.install_unit("en-enabled", &sleep_service("en-enabled"));
    s.install_unit("en-runtime", &sleep_service("en-runtime"));
    s.install_unit("en-static", &unit("ExecStart=/bin/sleep infinity", ""));
    s.install_unit(
        "en-indirect",
        &unit(
            "ExecStart=/bin/sleep infinity",
            "\n[Install]\nAlso=en-static.service\n",
        ),
    );
    s.write_file("/opt/units/en-linked.service", &sleep_service("en-linked"));
    s.write_file(
        "/opt/units/en-linked-rt.service",
        &sleep_service("en-linked-rt"),
    );
    // A generator's unit: systemd-fstab-generator makes mnt-gen.mount of
    // this line at every daemon-reload.
    let fstab = s.exec(&[
        "sh",
        "-c",
        "echo 'tmpfs /mnt/gen tmpfs defaults 0 0' >> /etc/fstab",
    ]);
    assert!(fstab.status.success(), "{fstab:?}");
    s.write_file("/etc/init.d/legacy-sysv", SYSV_SCRIPT);
    s.exec(&["chmod", "755", "/etc/init.d/legacy-sysv"]);
    // Names systemctl mangles: `a+b` is the unit a\x2bb.service, `x.y` is x.y.service.
    s.install_unit("a\\x2bb.service", &sleep_service("mangled"));
    s.install_unit("x.y.service", &sleep_service("dotted"));
    s.systemctl_ok(&["daemon-reload"]);

    s.systemctl_ok(&[
        "start",
        "st-active",
        "st-deactivating",
        "st-reloading",
        "a\\x2bb.service",
    ]);
    s.systemctl(&["start", "st-failed"]);
    s.systemctl_ok(&["start", "--no-block", "st-activating"]);
    s.systemctl_ok(&["stop", "--no-block", "st-deactivating"]);
    s.systemctl_ok(&["reload", "--no-block", "st-reloading"]);
    wait_for(s, "st-failed", "failed");
    wait_for(s, "st-activating", "activating");
    wait_for(s, "st-deactivating", "deactivating");
    wait_for(s, "st-reloading", "reloading");

    s.systemctl_ok(&["enable", "en-enabled"]);
    s.systemctl_ok(&["enable", "--runtime", "en-runtime"]);
    s.exec(&[
        "ln",
        "-s",
        "/etc/systemd/system/en-enabled.service",
        "/etc/systemd/system/en-alias.service",
    ]);
    s.systemctl_ok(&["link", "/opt/units/en-linked.service"]);
    s.systemctl_ok(&["link", "--runtime", "/opt/units/en-linked-rt.service"]);
    s.systemctl_ok(&["mask", "en-masked.service"]);
    s.systemctl_ok(&["mask", "--runtime", "en-masked-rt.service"]);
    let transient = s.exec(&["systemd-run", "--unit=en-transient", "/bin/sleep", "600"]);
    assert!(transient.status.success(), "{transient:?}");
    s.systemctl_ok(&["daemon-reload"]);
}

const NAMES: &[&str] = &[
    "st-active",
    "st-active.service",
    "st-inactive",
    "st-failed",
    "st-activating",
    "st-deactivating",
    "st-reloading",
    "en-enabled",
    "en-runtime",
    "en-static",
    "en-indirect",
    "en-alias",
    "mnt-gen.mount",
    "en-transient",
    "en-linked",
    "en-linked-rt",
    "en-masked",
    "en-masked-rt",
    "no-such-unit",
    "legacy-sysv",
    "a+b",
    "x.y",
];

fn status(sandbox: &Sandbox, provider: &str) -> Value {
    let host = build::host_binary();
    let mut args = vec![
        host.to_str().unwrap(),
        "status",
        "--json",
        "--provider",
        provider,
    ];
    args.extend_from_slice(NAMES);
    let out = sandbox.exec(&args);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "host status printed no JSON ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// `host run` of the signed manifest policy with `settings`, as root inside
/// the sandbox, and its JSON report (panics, with stderr, when there is none).
fn run_manifest(sandbox: &Sandbox, settings: &Path) -> (Output, Value) {
    let host = build::host_binary();
    let policy = build::signed_policy("manifest-policy");
    let key = build::test_key().public_key;
    let out = sandbox.exec(&[
        host.to_str().unwrap(),
        "run",
        policy.to_str().unwrap(),
        "--settings",
        settings.to_str().unwrap(),
        "--trusted-key",
        key.to_str().unwrap(),
        "--json",
    ]);
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no report ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    (out, report)
}

fn word<'a>(report: &'a Value, name: &str, key: &str) -> &'a str {
    report["units"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["name"] == name)
        .and_then(|u| u[key].as_str())
        .unwrap_or_else(|| panic!("no {key} for {name}: {report:#}"))
}

#[e2e_test(requires = "root, systemd")]
fn dbus_and_systemctl_give_the_same_answers() {
    let host = build::host_binary();
    let sandbox = Sandbox::boot_for_test(&build::target_dir());
    let _ = host;
    sandbox.start_system_bus();
    set_up(&sandbox);

    let systemctl = status(&sandbox, "systemctl");
    let dbus = status(&sandbox, "auto");
    assert_eq!(systemctl["reader"], "systemctl", "{systemctl:#}");
    assert_eq!(dbus["reader"], "dbus", "{dbus:#}");
    assert_eq!(
        dbus["units"], systemctl["units"],
        "D-Bus:\n{dbus:#}\nsystemctl:\n{systemctl:#}"
    );

    // The set-up reached every word, so the comparison covered them all.
    let active: BTreeSet<&str> = [
        "st-active",
        "st-inactive",
        "st-failed",
        "st-activating",
        "st-deactivating",
        "st-reloading",
    ]
    .iter()
    .map(|n| word(&dbus, n, "active"))
    .collect();
    assert_eq!(
        active,
        BTreeSet::from([
            "active",
            "inactive",
            "failed",
            "activating",
            "deactivating",
            "reloading"
        ])
    );
    for (name, expected) in [
        ("en-enabled", "enabled"),
        ("en-runtime", "enabled-runtime"),
        ("en-static", "static"),
        ("en-indirect", "indirect"),
        ("en-alias", "alias"),
        ("mnt-gen.mount", "generated"),
        ("en-transient", "transient"),
        ("en-linked", "linked"),
        ("en-linked-rt", "linked-runtime"),
        ("en-masked", "masked"),
        ("en-masked-rt", "masked-runtime"),
        ("st-inactive", "disabled"),
        ("a+b", "disabled"),
        ("x.y", "disabled"),
    ] {
        assert_eq!(word(&dbus, name, "enabled"), expected, "{name}");
    }
    assert_eq!(
        word(&dbus, "a+b", "active"),
        "active",
        "a+b is the unit a\\x2bb.service"
    );
    assert_eq!(word(&dbus, "no-such-unit", "error_kind"), "not-found");
    // systemd-sysv-install answers for the script, not the generated unit.
    let sysv = word(&dbus, "legacy-sysv", "enabled");
    assert!(
        ["enabled", "disabled"].contains(&sysv),
        "legacy-sysv: {sysv}"
    );
}

#[e2e_test(requires = "root, systemd")]
fn a_converging_run_reloads_once_at_the_end_so_systemd_sees_the_new_links() {
    let sandbox = Sandbox::boot_for_test(&build::target_dir());
    sandbox.start_system_bus();
    for name in ["wb-a", "wb-b"] {
        sandbox.install_unit(name, &sleep_service(name));
    }
    let settings = sandbox.share_file(
        "manifest.yaml",
        "- service:\n    - wb-a:\n        ensure: running\n        enable: true\n    - wb-b:\n        ensure: running\n        enable: true\n",
    );
    build::sign_file(&settings);
    let (out, report) = run_manifest(&sandbox, &settings);
    assert!(out.status.success(), "{report:#}");
    assert_eq!(report["provider"]["status_reader"], "dbus", "{report:#}");
    let calls: Vec<&str> = report["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["operation"].as_str().unwrap())
        .collect();
    // The statuses read before the first change need no reload over D-Bus
    // (the units' files did not change); the run's reload precedes the
    // first change.
    let first_change = calls.iter().position(|c| *c != "status").unwrap();
    assert_eq!(calls[first_change], "daemon-reload", "{calls:?}");
    assert_eq!(calls.last(), Some(&"daemon-reload"), "{calls:?}");
    assert_eq!(
        calls.iter().filter(|c| **c == "daemon-reload").count(),
        2,
        "{calls:?}"
    );
    for name in ["wb-a", "wb-b"] {
        assert_eq!(sandbox.is_enabled(name), "enabled");
        let reverse = sandbox.systemctl(&["list-dependencies", "--reverse", "--plain", "--", name]);
        let text = String::from_utf8_lossy(&reverse.stdout);
        assert!(text.contains("multi-user.target"), "{name}: {text}");
    }
}

#[e2e_test(requires = "root, systemd")]
fn a_bus_restart_and_a_daemon_reexec_mid_run_give_no_wrong_answer_and_no_hang() {
    let sandbox = Sandbox::boot_for_test(&build::target_dir());
    sandbox.start_system_bus();
    let units: Vec<String> = (1..=8).map(|i| format!("rx-{i}")).collect();
    let mut yaml = String::from("- service:\n");
    for name in &units {
        // Each start takes half a second: the run lasts long enough for the
        // bus to restart and systemd to re-execute in the middle of it.
        sandbox.install_unit(
            name,
            &unit(
                "ExecStartPre=/bin/sleep 0.5\nExecStart=/bin/sleep infinity",
                INSTALL,
            ),
        );
        yaml.push_str(&format!(
            "    - {name}:\n        ensure: running\n        enable: true\n"
        ));
    }
    let settings = sandbox.share_file("reexec.yaml", &yaml);
    build::sign_file(&settings);
    let started = std::time::Instant::now();
    let report = std::thread::scope(|scope| {
        // Disturbs the run once it is applying (a unit has left
        // "inactive"), not at a fixed time: a cold compile on a busy machine
        // would otherwise put the restart before the run's first reload.
        let disturb = scope.spawn(|| {
            wait_until_started(&sandbox, "rx-1");
            sandbox.systemctl_ok(&["restart", "dbus.service"]);
            wait_until_started(&sandbox, "rx-3");
            sandbox.systemctl_ok(&["daemon-reexec"]);
        });
        let (_, report) = run_manifest(&sandbox, &settings);
        disturb.join().unwrap();
        report
    });
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    // Every answer the host believed was right: a unit the report calls
    // converged is running and enabled. A change systemctl itself failed
    // while systemd re-executed ("D-Bus connection terminated") is a
    // failure in the report, never a success.
    for resource in report["resources"].as_array().unwrap() {
        let name = resource["resource"]
            .as_str()
            .unwrap()
            .trim_start_matches("service#");
        if resource["failed"] == false {
            assert_eq!(sandbox.is_active(name), "active", "{name}: {resource:#}");
            assert_eq!(sandbox.is_enabled(name), "enabled", "{name}: {resource:#}");
        } else {
            assert!(
                !resource["errors"].as_array().unwrap().is_empty(),
                "{resource:#}"
            );
        }
    }
    // The bus failed under the reader at least once: it said so, and
    // systemctl answered for the rest of the run.
    assert_eq!(
        report["provider"]["status_reader"], "systemctl",
        "{report:#}"
    );
    assert!(
        report["provider"]["status_note"]
            .as_str()
            .is_some_and(|n| n.contains("D-Bus failed")),
        "{report:#}"
    );
    // The next run, on a settled system (over D-Bus again), converges.
    let (out, again) = run_manifest(&sandbox, &settings);
    assert!(out.status.success(), "{again:#}");
    assert_eq!(again["provider"]["status_reader"], "dbus", "{again:#}");
    for name in &units {
        assert_eq!(sandbox.is_active(name), "active", "{name}");
        assert_eq!(sandbox.is_enabled(name), "enabled", "{name}");
    }
}

/// Waits (up to a minute) until `unit` is no longer inactive: the run has
/// passed its first reload and its status reads and is starting units.
fn wait_until_started(sandbox: &Sandbox, unit: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while sandbox.is_active(unit) == "inactive" {
        assert!(
            std::time::Instant::now() < deadline,
            "the run never started {unit}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
