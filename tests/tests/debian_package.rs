//! The Debian package, tried as an operator uses it, inside the project's
//! systemd sandbox (nothing on the machine changes): built with cargo-deb,
//! linted by lintian, installed beside bind9-host (whose `host` keeps its
//! name), configured, run by its service and timer, reinstalled, upgraded,
//! removed and purged.

use std::path::{Path, PathBuf};
use std::process::Command;

use policy_host_e2e::build::{self, policy_wasm, sign_file, target_dir, workspace_root};
use policy_host_e2e::sandbox::{sleep_service, Sandbox};
use serde_json::Value;

fn skip_or_fail<T>(why: &str) -> Option<T> {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{why}; CI=true, so this is a failure, not a skip"
    );
    eprintln!("\n*** SKIPPED: {why}: the Debian package is NOT tested.\n");
    None
}

fn tool_works(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Builds the package (version `deb_version`, or the crate's) into `output`.
fn cargo_deb(output: &Path, deb_version: Option<&str>, no_build: bool) {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(workspace_root())
        .env("CARGO_TARGET_DIR", target_dir())
        .args(["deb", "-p", "policy-host", "--output"])
        .arg(output);
    if let Some(version) = deb_version {
        cmd.args(["--deb-version", version]);
    }
    if no_build {
        cmd.arg("--no-build");
    }
    let out = cmd.output().expect("run cargo deb");
    assert!(
        out.status.success(),
        "cargo deb failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The package at its own version and at a higher one, built once per
/// test process (the tests run in parallel and share the files).
fn packages() -> Option<(PathBuf, PathBuf)> {
    static BUILT: std::sync::OnceLock<Option<(PathBuf, PathBuf)>> = std::sync::OnceLock::new();
    BUILT.get_or_init(build_packages).clone()
}

fn build_packages() -> Option<(PathBuf, PathBuf)> {
    if !tool_works("cargo", &["deb", "--version"]) {
        return skip_or_fail("cargo-deb is not installed (cargo install cargo-deb --locked)");
    }
    // The built-in policy the package ships.
    policy_wasm("manifest-policy");
    let dir = target_dir().join("debian-test");
    std::fs::create_dir_all(&dir).unwrap();
    let first = dir.join("policy-host_first.deb");
    let upgrade = dir.join("policy-host_upgrade.deb");
    cargo_deb(&first, None, false);
    let version = deb_field(&first, "Version");
    cargo_deb(&upgrade, Some(&format!("{version}+upgrade1")), true);
    Some((first, upgrade))
}

fn deb_field(deb: &Path, field: &str) -> String {
    let out = Command::new("dpkg-deb")
        .arg("--field")
        .arg(deb)
        .arg(field)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

struct Inside<'a>(&'a Sandbox);

impl Inside<'_> {
    #[track_caller]
    fn ok(&self, args: &[&str]) -> String {
        let out = self.0.exec(args);
        assert!(
            out.status.success(),
            "{args:?} failed ({}):\n{}{}",
            out.status,
            text(&out.stdout),
            text(&out.stderr)
        );
        text(&out.stdout) + &text(&out.stderr)
    }

    fn exists(&self, path: &str) -> bool {
        self.0.exec(&["test", "-e", path]).status.success()
    }

    fn sh(&self, script: &str) -> String {
        self.ok(&["sh", "-c", script])
    }
}

#[test]
fn lintian_finds_no_error_and_no_unexplained_warning() {
    let Some((first, _)) = packages() else { return };
    if !tool_works("lintian", &["--version"]) {
        skip_or_fail::<()>("lintian is not installed");
        return;
    }
    let out = Command::new("lintian")
        .args(["--fail-on", "error,warning", "--no-tag-display-limit"])
        .arg(&first)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "lintian:\n{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert_eq!(deb_field(&first, "Section"), "admin");
    assert!(deb_field(&first, "Depends").contains("systemd"));
    assert!(deb_field(&first, "Depends").contains("libc6"));
    assert!(!deb_field(&first, "Homepage").is_empty() || !deb_field(&first, "Vcs-Git").is_empty());
}

#[test]
fn install_configure_run_upgrade_remove_and_purge() {
    let Some((first, upgrade)) = packages() else {
        return;
    };
    if !Path::new("/usr/bin/host").exists() {
        skip_or_fail::<()>("bind9-host is not installed (apt-get install bind9-host)");
        return;
    }
    let policy = build::signed_policy("manifest-policy");
    let key = build::test_key().public_key;
    let Some(sandbox) = Sandbox::boot_or_skip(&target_dir()) else {
        return;
    };
    let s = Inside(&sandbox);
    let path = |p: &Path| p.to_str().unwrap().to_owned();

    s.ok(&["dpkg", "-i", &path(&first)]);
    // bind9's host keeps its name; ours is policy-host.
    let bind = s.sh("host -V 2>&1 || true");
    assert!(bind.contains("host 9."), "host -V: {bind}");
    let help = s.ok(&["policy-host", "--help"]);
    assert!(help.contains("Usage: policy-host"), "{help}");
    let page = s.sh("MANPAGER=cat MANWIDTH=100 man policy-host 2>&1");
    assert!(
        page.contains("policy-host") && page.contains("POLICY-HOST RUN"),
        "{page}"
    );
    let page = s.sh("MANPAGER=cat man policy-host-run 2>&1");
    assert!(page.contains("--settings"), "{page}");
    for completion in [
        "/usr/share/bash-completion/completions/policy-host",
        "/usr/share/zsh/vendor-completions/_policy-host",
        "/usr/share/fish/vendor_completions.d/policy-host.fish",
    ] {
        assert!(s.exists(completion), "{completion}");
    }
    assert!(s.exists("/usr/lib/policy-host/manifest-policy.wasm"));
    s.ok(&[
        "systemd-analyze",
        "verify",
        "/usr/lib/systemd/system/policy-host.service",
    ]);
    let (exposure, security) = sandbox.exposure("policy-host.service");
    assert!(exposure <= 2.5, "exposure {exposure}:\n{security}");
    // Installing changed nothing: the timer is not enabled.
    assert_eq!(sandbox.is_enabled("policy-host.timer"), "disabled");
    // The default host.toml lists nothing: a run succeeds and does nothing.
    let out = s.ok(&["policy-host", "run", "--json"]);
    assert!(out.contains("\"success\": true"), "{out}");

    // The operator's configuration: a key, a signed policy and settings.
    sandbox.install_unit("pkg-web", &sleep_service("pkg-web"));
    let settings = sandbox.share_file(
        "site.yaml",
        "- service:\n    - pkg-web:\n        ensure: running\n        enable: true\n",
    );
    sign_file(&settings);
    s.ok(&[
        "sh",
        "-c",
        r#"set -e
           install -m 644 "$1" /etc/policy-host/trusted-keys/ops.pub
           install -d /etc/policy-host/policies
           install -m 644 "$2" /etc/policy-host/policies/manifest_policy.wasm
           install -m 644 "$3" /etc/policy-host/policies/manifest_policy.wasm.minisig
           install -m 644 "$4" /etc/policy-host/site.yaml
           install -m 644 "$5" /etc/policy-host/site.yaml.minisig
           cat >> /etc/policy-host/host.toml <<'TOML'

[[policy]]
source = "/etc/policy-host/policies/manifest_policy.wasm"
settings = "/etc/policy-host/site.yaml"
TOML"#,
        "sh",
        &path(&key),
        &path(&policy),
        &path(&build::signature_path(&policy)),
        &path(&settings),
        &path(&build::signature_path(&settings)),
    ]);
    let started = sandbox.exec(&["systemctl", "start", "policy-host.service"]);
    assert!(
        started.status.success(),
        "the service failed:\n{}",
        s.sh("journalctl -u policy-host.service --no-pager -n 30 2>&1")
    );
    assert_eq!(sandbox.is_active("pkg-web"), "active");
    assert_eq!(sandbox.is_enabled("pkg-web"), "enabled");
    let report: Value =
        serde_json::from_str(&s.ok(&["cat", "/var/lib/policy-host/last-run.json"])).unwrap();
    assert_eq!(report["summary"]["success"], true, "{report:#}");
    let versions = s.ok(&["cat", "/var/lib/policy-host/versions.json"]);

    // The timer, enabled as the README says, is scheduled.
    s.ok(&["systemctl", "enable", "--now", "policy-host.timer"]);
    assert_eq!(sandbox.is_active("policy-host.timer"), "active");
    let next = s.ok(&[
        "systemctl",
        "show",
        "-p",
        "NextElapseUSecRealtime",
        "--value",
        "policy-host.timer",
    ]);
    assert!(
        !next.trim().is_empty() && next.trim() != "n/a",
        "next: {next:?}"
    );

    // Reinstalling and upgrading keep the edited host.toml and the state.
    let edited = s.ok(&["cat", "/etc/policy-host/host.toml"]);
    for deb in [&first, &upgrade] {
        s.ok(&["dpkg", "-i", &path(deb)]);
        assert_eq!(s.ok(&["cat", "/etc/policy-host/host.toml"]), edited);
        assert_eq!(
            s.ok(&["cat", "/var/lib/policy-host/versions.json"]),
            versions
        );
    }
    let installed = s.ok(&["dpkg-query", "-W", "-f", "${Version}", "policy-host"]);
    assert!(installed.ends_with("+upgrade1"), "{installed}");
    s.ok(&["systemctl", "start", "policy-host.service"]);

    // Remove: the program goes, the configuration stays, the timer stops.
    s.ok(&["dpkg", "-r", "policy-host"]);
    assert!(!s.exists("/usr/sbin/policy-host"));
    assert!(s.exists("/etc/policy-host/host.toml"));
    assert_ne!(sandbox.is_active("policy-host.timer"), "active");
    // Purge: configuration, state and cache go; what the operator added stays.
    s.ok(&["dpkg", "-P", "policy-host"]);
    for gone in [
        "/etc/policy-host/host.toml",
        "/var/lib/policy-host",
        "/var/cache/policy-host",
    ] {
        assert!(!s.exists(gone), "{gone} is still there");
    }
    assert!(s.exists("/etc/policy-host/trusted-keys/ops.pub"));
    assert!(s.exists("/etc/policy-host/policies/manifest_policy.wasm"));
    // bind9's host is untouched throughout.
    assert!(s.sh("host -V 2>&1 || true").contains("host 9."));
}
