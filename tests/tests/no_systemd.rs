//! A machine whose PID 1 is not systemd (a container, a chroot, a CI
//! runner), with the real `host` and the real `systemctl`: the run says so
//! once, first, in systemctl's own words, the report says the provider is
//! unavailable, and no unit is reported missing.

use std::path::Path;
use std::process::{Command, Output};

use policy_host_e2e::build::{host_binary, host_command, run_args, signed_policy};
use policy_host_e2e::outcome::text;
use policy_host_e2e::requires::e2e_test;
use serde_json::Value;

/// What systemctl 252 prints where PID 1 is not systemd.
const NOT_BOOTED: &str = "System has not been booted with systemd as init system (PID 1)";

/// `host ARGS` with the machine's own `PATH` (the real systemctl). Where
/// systemd does run, it runs in a mount namespace of its own in which
/// `/run/systemd` and `/run/dbus` are empty, so that systemctl finds no
/// systemd, as on a machine without it (root only).
fn host(args: &[&std::ffi::OsStr]) -> Output {
    let mut cmd = if Path::new("/run/systemd/system").exists() {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let euid = unsafe { libc::geteuid() };
        assert_eq!(
            euid, 0,
            "PID 1 is systemd here: hiding it from systemctl needs root"
        );
        let mut cmd = Command::new("unshare");
        cmd.args([
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            "mount -t tmpfs none /run/systemd && mount -t tmpfs none /run/dbus && exec \"$@\"",
            "sh",
        ])
        .arg(host_binary());
        cmd
    } else {
        host_command()
    };
    cmd.args(args);
    cmd.output().expect("run host")
}

fn run(extra: &[&str]) -> Output {
    let policy = signed_policy("example-policy");
    let mut args: Vec<std::ffi::OsString> = vec!["run".into(), policy.into_os_string()];
    args.extend(run_args());
    args.extend(extra.iter().map(Into::into));
    let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    host(&args)
}

#[e2e_test(requires = "systemctl")]
fn without_systemd_the_run_says_so_once_first_and_reports_no_unit_missing() {
    let out = run(&["--noop"]);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    let first_unit = lines
        .iter()
        .position(|l| l.starts_with("service#"))
        .expect("a line per unit");
    let said: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].contains(NOT_BOOTED))
        .collect();
    assert_eq!(said.len(), 1, "said once: {stdout}");
    assert!(said[0] < first_unit, "said before the units: {stdout}");
    assert!(
        lines[said[0]].starts_with("provider systemd unavailable: "),
        "{stdout}"
    );
    assert!(
        !stdout.contains("not found"),
        "no unit is missing: {stdout}"
    );
    for unit in ["httpd", "legacy-ftpd", "metrics-agent"] {
        let line = lines
            .iter()
            .find(|l| l.starts_with(&format!("service#{unit} ")))
            .unwrap_or_else(|| panic!("a line for {unit}: {stdout}"));
        assert!(line.contains("not checked"), "{line}");
    }
    // The log says it once too, whatever the number of units.
    assert_eq!(
        text(&out.stderr).matches(NOT_BOOTED).count(),
        1,
        "{}",
        text(&out.stderr)
    );
}

#[e2e_test(requires = "systemctl")]
fn without_systemd_the_json_report_says_the_provider_is_unavailable() {
    let out = run(&["--noop", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let provider = &report["provider"];
    assert_eq!(provider["name"], "systemd", "{report:#}");
    assert_eq!(provider["available"], false, "{report:#}");
    let detail = provider["detail"].as_str().expect("detail");
    assert!(detail.contains(NOT_BOOTED), "{detail}");
    for r in report["resources"].as_array().expect("resources") {
        assert_eq!(r["failed"], true, "{r:#}");
        let errors = r["errors"].to_string();
        assert!(!errors.contains("not found"), "{errors}");
    }
    assert!(
        report["calls"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["outcome"] == "unavailable"),
        "{report:#}"
    );
}
