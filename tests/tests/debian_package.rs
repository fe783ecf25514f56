//! The Debian package, tried as an operator uses it, inside the project's
//! systemd sandbox (nothing on the machine changes): built with cargo-deb,
//! linted by lintian, installed beside bind9-host (whose `host` keeps its
//! name), configured, run by its service and timer, reinstalled, upgraded,
//! removed and purged.

use std::path::{Path, PathBuf};
use std::process::Command;

use policy_host_e2e::build::{host_binary, target_dir, workspace_root};
use policy_host_e2e::outcome::text;
use policy_host_e2e::requires::e2e_test;
use policy_host_e2e::sandbox::{sleep_service, Disk, Sandbox};
use serde_json::Value;

/// Panics unless `program ARGS` runs and succeeds (beyond being on PATH,
/// which `#[e2e_test(requires)]` checks: the tool must also work).
#[track_caller]
fn require(program: &str, args: &[&str], install: &str) {
    assert!(
        tool_works(program, args),
        "this test needs {program} ({install})"
    );
}

fn tool_works(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The cargo target directory the package is built in: one of its own,
/// as shared target directories and CI caches set `CARGO_TARGET_DIR`, so
/// that nothing may depend on where cargo put its build.
fn package_target_dir() -> PathBuf {
    target_dir().join("debian-package-target")
}

/// The cargo profile the package tests package, and the directory cargo
/// puts it in: the debug build, the very `host` this suite tests (placed in
/// the package's target directory, then packaged with `--no-build`). These
/// tests check what the package holds and does, which the optimiser does
/// not change, and building wasmtime again, in release, held the suite's
/// test threads for minutes. `--profile` is build-package's own option, so
/// the release package differs only in it.
const PROFILE: &str = "dev";
const PROFILE_DIR: &str = "debug";

/// `dist/debian/build-package --profile dev --fast ARGS`, the one documented
/// command. `--fast` is cargo-deb's: the same files, xz at a lower level
/// (5 s a package here instead of 40, for 20% more bytes); what the tests
/// check is what the package holds and does, not how small it is.
fn build_package(args: &[&str]) {
    let mut cmd = Command::new(workspace_root().join("dist/debian/build-package"));
    cmd.current_dir(workspace_root())
        .env("CARGO_TARGET_DIR", package_target_dir())
        .args(["--profile", PROFILE, "--fast"])
        .args(args);
    let out = cmd.output().expect("run dist/debian/build-package");
    assert!(
        out.status.success(),
        "dist/debian/build-package {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The package at its own version and at a higher one, built once per
/// test process (the tests run in parallel and share the files).
fn packages() -> (PathBuf, PathBuf) {
    let (first, upgrade, _) = all_packages();
    (first, upgrade)
}

/// The package at a lower version than [`packages`]' first (`~previous1`
/// sorts before it), for upgrades from it and downgrades to it.
fn previous_package() -> PathBuf {
    all_packages().2
}

fn all_packages() -> (PathBuf, PathBuf, PathBuf) {
    static BUILT: std::sync::OnceLock<(PathBuf, PathBuf, PathBuf)> = std::sync::OnceLock::new();
    BUILT.get_or_init(build_packages).clone()
}

fn build_packages() -> (PathBuf, PathBuf, PathBuf) {
    require(
        "cargo",
        &["deb", "--version"],
        "cargo install cargo-deb --locked",
    );
    let dir = target_dir().join("debian-test");
    std::fs::create_dir_all(&dir).unwrap();
    // The suite's own `host`, where cargo would have built it in the
    // package's target directory (a copy: cargo-deb strips what it packs).
    let built = package_target_dir().join(PROFILE_DIR).join("host");
    std::fs::create_dir_all(built.parent().unwrap()).unwrap();
    std::fs::copy(host_binary(), &built).expect("placing host in the package's target directory");
    let first = dir.join("policy-host_first.deb");
    let upgrade = dir.join("policy-host_upgrade.deb");
    build_package(&["--no-build", "--output", first.to_str().unwrap()]);
    let version = deb_field(&first, "Version");
    build_package(&[
        "--no-build",
        "--deb-version",
        &format!("{version}+upgrade1"),
        "--output",
        upgrade.to_str().unwrap(),
    ]);
    let previous = dir.join("policy-host_previous.deb");
    build_package(&[
        "--no-build",
        "--deb-version",
        &format!("{version}~previous1"),
        "--output",
        previous.to_str().unwrap(),
    ]);
    (first, upgrade, previous)
}

/// A bare `cargo deb` cannot ship the built-in policy, which is not one of
/// cargo's own products: it stops, naming the command that can. cargo-deb
/// builds with the `deb` feature (host/Cargo.toml says so), and host's
/// build script, given that feature, stops when the policy is not staged
/// beside the build. The build script cargo built for this suite is run as
/// cargo runs it (a `cargo deb` build would compile wasmtime again first).
#[test]
fn a_bare_cargo_deb_stops_and_names_the_command_that_builds_the_package() {
    let manifest = std::fs::read_to_string(workspace_root().join("host/Cargo.toml")).unwrap();
    let metadata = &manifest[manifest
        .find("\n[package.metadata.deb]\n")
        .expect("cargo-deb's table")
        + 1..];
    let metadata = &metadata[..metadata[1..].find("\n[").map_or(metadata.len(), |i| i + 1)];
    assert!(
        metadata
            .lines()
            .any(|l| l.trim() == r#"features = ["deb"]"#),
        "cargo-deb must build with the deb feature:\n{metadata}"
    );
    let scripts = std::fs::read_dir(target_dir().join("debug/build"))
        .expect("cargo built host's build script")
        .flatten()
        .map(|e| e.path().join("build-script-build"))
        .filter(|p| {
            p.is_file()
                && p.parent()
                    .and_then(|d| d.file_name())
                    .is_some_and(|n| n.to_string_lossy().starts_with("policy-host-"))
        })
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
        .expect("host's build script");
    let scratch = tempfile::tempdir().unwrap();
    // OUT_DIR is <target>/<profile>/build/<package>-<hash>/out.
    let profile_dir = scratch.path().join(PROFILE_DIR);
    let out_dir = profile_dir.join("build/policy-host-0/out");
    std::fs::create_dir_all(&out_dir).unwrap();
    let run = || {
        Command::new(&scripts)
            .current_dir(workspace_root().join("host"))
            .env("CARGO_FEATURE_DEB", "1")
            .env("CARGO_MANIFEST_DIR", workspace_root().join("host"))
            .env("OUT_DIR", &out_dir)
            .env("PROFILE", "debug")
            .output()
            .expect("run host's build script")
    };
    let out = run();
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("manifest-policy.wasm is missing")
            && stderr.contains("Build the package with dist/debian/build-package"),
        "{stderr}"
    );
    assert!(!out_dir.join("embedded_sdk.rs").exists());
    // The policy alone is not enough: the declaration engine is shipped too.
    std::fs::write(profile_dir.join("manifest-policy.wasm"), b"\0asm").unwrap();
    let out = run();
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("declaration-engine.wasm is missing"),
        "{stderr}"
    );
    // Both staged, as build-package stages them: the build goes on.
    std::fs::write(profile_dir.join("declaration-engine.wasm"), b"\0asm").unwrap();
    let out = run();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(out_dir.join("embedded_sdk.rs").is_file());
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

#[e2e_test(requires = "root, systemd, cargo-deb, lintian, bind9-host")]
fn lintian_finds_no_error_and_no_unexplained_warning() {
    let (first, _) = packages();
    require("lintian", &["--version"], "apt-get install lintian");
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

/// The built-in policy is in the package as a regular file, byte for byte
/// the component cargo built in the package's own target directory.
#[e2e_test(requires = "root, systemd, cargo-deb, lintian, bind9-host")]
fn the_package_ships_the_built_policy_whatever_the_target_directory() {
    let (first, _) = packages();
    let unpacked = tempfile::Builder::new()
        .prefix("policy-host-deb-")
        .tempdir_in(target_dir())
        .unwrap();
    let out = Command::new("dpkg-deb")
        .arg("-x")
        .arg(&first)
        .arg(unpacked.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "dpkg-deb -x: {}", text(&out.stderr));
    let shipped = unpacked
        .path()
        .join("usr/lib/policy-host/manifest-policy.wasm");
    let meta = std::fs::symlink_metadata(&shipped).expect("the policy is in the package");
    assert!(meta.file_type().is_file(), "{meta:?}");
    let built = package_target_dir().join("wasm32-wasip2/release/manifest_policy.wasm");
    assert_eq!(
        std::fs::read(&shipped).unwrap(),
        std::fs::read(&built).unwrap(),
        "the shipped policy is not the component built in {}",
        package_target_dir().display()
    );
    assert!(std::fs::read(&shipped).unwrap().starts_with(b"\0asm"));
    let readme = unpacked
        .path()
        .join("usr/share/doc/policy-host/README.Debian");
    assert_eq!(
        std::fs::read_to_string(readme).unwrap(),
        std::fs::read_to_string(workspace_root().join("dist/debian/README.Debian")).unwrap()
    );
}

/// The commands README.Debian gives to make the built-in policy ready, in
/// order, and the `[[policy]]` lines it says to add.
fn readme_debian_steps(readme: &str) -> (Vec<String>, Vec<String>) {
    let indented: Vec<&str> = readme
        .lines()
        .filter_map(|l| l.strip_prefix("    "))
        .collect();
    let commands = indented
        .iter()
        .filter(|l| l.starts_with("policy-host ") || l.starts_with("install "))
        .map(|l| l.to_string())
        .collect();
    let policy = indented
        .iter()
        .skip_while(|l| **l != "[[policy]]")
        .take(3)
        .map(|l| l.to_string())
        .collect();
    (commands, policy)
}

/// The same, from the host.toml the package installs: `#   ` command lines,
/// and the commented `[[policy]]` that ends it.
fn host_toml_steps(host_toml: &str) -> (Vec<String>, Vec<String>) {
    let commands = host_toml
        .lines()
        .filter_map(|l| l.strip_prefix("#   "))
        .map(str::to_owned)
        .collect();
    let lines: Vec<&str> = host_toml.lines().collect();
    let policy = lines[lines.len() - 3..]
        .iter()
        .map(|l| l.strip_prefix('#').expect("commented").to_owned())
        .collect();
    (commands, policy)
}

/// The operator's configuration, as README.Debian and host.toml say, word
/// for word: a key for the machine, the shipped policy signed under the
/// name host.toml uses, a signed manifest that keeps `pkg-web` running and
/// enabled, the example uncommented.
fn configure_the_builtin_policy(sandbox: &Sandbox) {
    let s = Inside(sandbox);
    let readme = s.sh("zcat -f /usr/share/doc/policy-host/README.Debian");
    let host_toml = s.ok(&["cat", "/etc/policy-host/host.toml"]);
    let (commands, policy_lines) = readme_debian_steps(&readme);
    sandbox.install_unit("pkg-web", &sleep_service("pkg-web"));
    sandbox.write_file(
        "/etc/policy-host/manifest.yaml",
        "- service:\n    - pkg-web:\n        ensure: running\n        enable: true\n",
    );
    for command in &commands {
        s.sh(command);
    }
    let mut configured: Vec<&str> = host_toml.lines().collect();
    configured.truncate(configured.len() - 3);
    let configured = format!("{}\n{}\n", configured.join("\n"), policy_lines.join("\n"));
    sandbox.write_file("/etc/policy-host/host.toml", &configured);
}

#[e2e_test(requires = "root, systemd, cargo-deb, lintian, bind9-host")]
fn install_configure_run_upgrade_remove_and_purge() {
    let (first, upgrade) = packages();
    let sandbox = Sandbox::boot_for_test(&target_dir());
    let s = Inside(&sandbox);
    let path = |p: &Path| p.to_str().unwrap().to_owned();
    // This machine's image forbids maintainer scripts to act on services
    // (Docker's policy-rc.d, exit 101), which deb-systemd-invoke obeys; a
    // real machine has none. Removed in the sandbox's copy only.
    s.ok(&["rm", "-f", "/usr/sbin/policy-rc.d"]);

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
    // The engine a Python or JavaScript policy is composed with, where
    // `policy-host compose` looks for it. Given the manifest policy (no
    // declaration), compose gets past reading the engine and refuses the
    // declaration.
    let engine = s.ok(&[
        "policy-host",
        "inspect",
        "/usr/lib/policy-host/declaration-engine.wasm",
    ]);
    // Alone it is no policy: the host refuses it until a declaration is
    // plugged into its import.
    assert!(
        engine.contains("imports:   policy-host:declaration/declare@0.1.0")
            && engine.contains(
                "world:     refused: the policy imports `policy-host:declaration/declare@0.1.0`"
            ),
        "{engine}"
    );
    let refused = s.sh(
        "policy-host compose /usr/lib/policy-host/manifest-policy.wasm -o /tmp/composed.wasm 2>&1; echo \"exit $?\"",
    );
    assert!(
        refused.contains("with the engine /usr/lib/policy-host/declaration-engine.wasm: the declaration does not export")
            && refused.ends_with("exit 1\n"),
        "{refused}"
    );
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

    // The operator's configuration, as README.Debian and host.toml say, word
    // for word: a key for the machine, the shipped policy signed under the
    // name host.toml uses, a signed manifest, the example uncommented.
    let readme = s.sh("zcat -f /usr/share/doc/policy-host/README.Debian");
    let host_toml = s.ok(&["cat", "/etc/policy-host/host.toml"]);
    let (commands, policy_lines) = readme_debian_steps(&readme);
    assert_eq!(
        (commands.clone(), policy_lines.clone()),
        host_toml_steps(&host_toml),
        "README.Debian and host.toml give the same steps"
    );
    assert_eq!(commands.len(), 5, "{commands:#?}");
    configure_the_builtin_policy(&sandbox);
    let noop = s.ok(&["policy-host", "run", "--noop"]);
    assert!(noop.contains("pkg-web"), "{noop}");
    assert_eq!(sandbox.is_active("pkg-web"), "inactive");
    // A run by hand writes the report and metrics host.toml names, as the
    // timer's runs do: monitoring sees it, a --noop run apart from the
    // machine's state.
    let by_hand: Value =
        serde_json::from_str(&s.ok(&["cat", "/var/lib/policy-host/last-run.json"])).unwrap();
    assert_eq!(by_hand["noop_run"]["drive"], "manual", "{by_hand:#}");
    assert_eq!(by_hand["policies"], serde_json::json!([]), "{by_hand:#}");
    s.ok(&[
        "test",
        "-s",
        "/var/lib/prometheus/node-exporter/policy-host.prom",
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
    let metrics = s.ok(&["cat", "/var/lib/prometheus/node-exporter/policy-host.prom"]);
    policy_host_e2e::metrics::check_text(&metrics);
    let metrics = policy_host_e2e::metrics::parse(&metrics);
    assert_eq!(metrics.value("policy_host_run_success"), 1.0);
    assert_eq!(
        metrics.value(r#"policy_host_source_stale{policy="manifest-policy.wasm",kind="policy"}"#),
        0.0
    );
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

    // The watch, the timer's alternative, under the same sandbox: ready
    // after its first run, and a stop of a managed unit is repaired by
    // itself.
    s.ok(&[
        "systemd-analyze",
        "verify",
        "/usr/lib/systemd/system/policy-host-watch.service",
    ]);
    let watching = sandbox.exec(&["systemctl", "enable", "--now", "policy-host-watch.service"]);
    assert!(
        watching.status.success(),
        "the watch failed:\n{}",
        s.sh("journalctl -u policy-host-watch.service --no-pager -n 30 2>&1")
    );
    // Enabled for real (a link that starts it at boot), and the one driver:
    // the timer it replaces was stopped.
    assert_eq!(sandbox.is_enabled("policy-host-watch.service"), "enabled");
    assert!(s.exists("/etc/systemd/system/multi-user.target.wants/policy-host-watch.service"));
    assert_eq!(sandbox.is_active("policy-host.timer"), "inactive");
    let status = s.ok(&[
        "systemctl",
        "show",
        "-p",
        "StatusText",
        "--value",
        "policy-host-watch.service",
    ]);
    assert!(status.contains("watching 1 policy, 1 unit"), "{status}");
    s.ok(&["systemctl", "stop", "pkg-web"]);
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while sandbox.is_active("pkg-web") != "active" && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(
        sandbox.is_active("pkg-web"),
        "active",
        "{}",
        s.sh("journalctl -u policy-host-watch.service --no-pager -n 30 2>&1")
    );

    // Reinstalling and upgrading keep the edited host.toml and the state,
    // and compile what host.toml lists before the watch restarts: with the
    // compiled policy gone, the reinstall compiles it again. The watch is
    // stopped for that one (a run of its own would compile it first).
    let edited = s.ok(&["cat", "/etc/policy-host/host.toml"]);
    let install = |deb: &Path, said: &str| {
        let out = s.ok(&["dpkg", "-i", &path(deb)]);
        assert!(
            out.lines()
                .any(|l| l.starts_with(said) && l.contains("manifest-policy.wasm")),
            "{out}"
        );
        assert_eq!(
            s.sh("ls /var/cache/policy-host/ | grep -c '\\.cwasm$'")
                .trim(),
            "1"
        );
        assert_eq!(s.ok(&["cat", "/etc/policy-host/host.toml"]), edited);
        assert_eq!(
            s.ok(&["cat", "/var/lib/policy-host/versions.json"]),
            versions
        );
    };
    s.ok(&["systemctl", "stop", "policy-host-watch.service"]);
    s.sh("rm -f /var/cache/policy-host/*.cwasm");
    install(&first, "compiled: ");
    s.ok(&["systemctl", "start", "policy-host-watch.service"]);
    let watch_pid = sandbox.main_pid("policy-host-watch.service");
    install(&upgrade, "already compiled: ");
    let installed = s.ok(&["dpkg-query", "-W", "-f", "${Version}", "policy-host"]);
    assert!(installed.ends_with("+upgrade1"), "{installed}");
    // The running watch was restarted onto the new binary.
    assert_eq!(sandbox.is_active("policy-host-watch.service"), "active");
    assert_ne!(sandbox.main_pid("policy-host-watch.service"), watch_pid);
    s.ok(&["systemctl", "start", "policy-host.service"]);

    // Remove: the program goes, the configuration stays, the timer stops.
    s.ok(&["dpkg", "-r", "policy-host"]);
    assert!(!s.exists("/usr/sbin/policy-host"));
    assert!(s.exists("/etc/policy-host/host.toml"));
    assert_ne!(sandbox.is_active("policy-host.timer"), "active");
    assert_ne!(sandbox.is_active("policy-host-watch.service"), "active");
    // Purge: configuration, state and cache go; what the operator added stays.
    s.ok(&["dpkg", "-P", "policy-host"]);
    for gone in [
        "/etc/policy-host/host.toml",
        "/var/lib/policy-host",
        "/var/cache/policy-host",
    ] {
        assert!(!s.exists(gone), "{gone} is still there");
    }
    assert!(s.exists("/etc/policy-host/trusted-keys/local.pub"));
    assert!(s.exists("/etc/policy-host/policies/manifest-policy.wasm"));
    // bind9's host is untouched throughout.
    assert!(s.sh("host -V 2>&1 || true").contains("host 9."));
}

/// A ```TAG block of a section of a page of docs/, as written.
fn doc_block(page: &str, heading: &str, tag: &str) -> String {
    let text = std::fs::read_to_string(workspace_root().join("docs").join(page)).unwrap();
    let section = &text[text.find(heading).unwrap_or_else(|| panic!("{heading}"))..];
    let start = section.find(tag).expect(tag) + tag.len();
    let end = start + section[start..].find("```").expect("its end");
    section[start..end].to_owned()
}

/// The package's machine pulls from a registry that asks for a login, with
/// the login where docs/debian.md puts it (written by the page's recipe, no
/// Docker): `policy-host push`, `run --noop` typed by root, the timer's
/// service, `verify` and `status` all read it. The registry runs inside the
/// sandbox's own network namespace, under its systemd.
#[e2e_test(requires = "root, systemd, cargo-deb, docker-registry")]
fn oci_sources_read_the_registry_login_where_the_package_puts_it() {
    let (first, _) = packages();
    let sandbox = Sandbox::boot_for_test(&target_dir());
    let s = Inside(&sandbox);
    s.ok(&["dpkg", "-i", first.to_str().unwrap()]);

    let registry = "127.0.0.1:5000";
    sandbox.write_file(
        "/etc/test-registry/htpasswd",
        &policy_host_e2e::registry::htpasswd_line("fleet-reader", "s3cret"),
    );
    sandbox.write_file(
        "/etc/test-registry/config.yml",
        &format!(
            "version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: /var/lib/test-registry\nhttp:\n  addr: {registry}\nauth:\n  htpasswd:\n    realm: policy-host-test\n    path: /etc/test-registry/htpasswd\n"
        ),
    );
    s.ok(&[
        "systemd-run",
        "--unit=test-registry",
        "/usr/bin/docker-registry",
        "serve",
        "/etc/test-registry/config.yml",
    ]);
    s.sh("for i in $(seq 200); do bash -c 'exec 3<>/dev/tcp/127.0.0.1/5000' 2>/dev/null && exit 0; sleep 0.1; done; exit 1");

    // A key, the built-in policy and a manifest, signed under the names the
    // repositories bind.
    sandbox.install_unit("pkg-web", &sleep_service("pkg-web"));
    sandbox.write_file(
        "/root/out/web.yaml",
        "- service:\n    - pkg-web:\n        ensure: running\n",
    );
    s.sh("policy-host keygen --unencrypted --out /root/k \
          && install -m 0644 /root/k/policy-host.pub /etc/policy-host/trusted-keys/ops.pub \
          && cp /usr/lib/policy-host/manifest-policy.wasm /root/out/ \
          && policy-host sign /root/out/manifest-policy.wasm --key /root/k/policy-host.key \
          && policy-host sign /root/out/web.yaml --key /root/k/policy-host.key");
    let policy_ref = format!("oci://{registry}/policies/manifest-policy:1");
    let settings_ref = format!("oci://{registry}/settings/web:prod");
    let push = |file: &str, reference: &str| {
        sandbox.exec(&[
            "policy-host",
            "push",
            file,
            reference,
            "--insecure-registry",
            registry,
        ])
    };

    // No login yet: refused, naming the registry and the file that was read.
    let refused = push("/root/out/web.yaml", &settings_ref);
    let said = text(&refused.stderr);
    assert!(!refused.status.success(), "{said}");
    assert!(
        said.starts_with("policy-host: error:")
            && said.contains(registry)
            && said.contains("/root/.docker/config.json"),
        "{said}"
    );

    // The login, written as docs/debian.md says (only the registry's name
    // is this test's).
    let recipe = doc_block("debian.md", "## Registry logins", "```sh\n")
        .replace("registry.example.com:5000", registry);
    s.sh(&recipe);
    for (file, reference) in [
        ("/root/out/manifest-policy.wasm", &policy_ref),
        ("/root/out/web.yaml", &settings_ref),
    ] {
        let pushed = push(file, reference);
        assert!(pushed.status.success(), "{}", text(&pushed.stderr));
    }

    let host_toml = s.ok(&["cat", "/etc/policy-host/host.toml"]);
    sandbox.write_file(
        "/etc/policy-host/host.toml",
        &format!(
            "insecure_registries = [\"{registry}\"]\n{host_toml}\n[[policy]]\nsource = \"{policy_ref}\"\nsettings = \"{settings_ref}\"\n"
        ),
    );
    // Root's run by hand (no DOCKER_CONFIG) reads the package's login.
    let noop = s.ok(&["env", "-u", "DOCKER_CONFIG", "policy-host", "run", "--noop"]);
    assert!(noop.contains("pkg-web"), "{noop}");
    let verify = s.ok(&["policy-host", "verify", &settings_ref]);
    assert!(verify.contains("a run takes it"), "{verify}");
    // The timer's service reads it too, and converges.
    let started = sandbox.exec(&["systemctl", "start", "policy-host.service"]);
    assert!(
        started.status.success(),
        "the service failed:\n{}",
        s.sh("journalctl -u policy-host.service --no-pager -n 30 2>&1")
    );
    assert_eq!(sandbox.is_active("pkg-web"), "active");
    // Status: the last run, its sources with their digests, then the unit.
    let status = s.ok(&["policy-host", "status"]);
    assert!(
        status.starts_with("machine: well: 1 policy converged")
            && status.contains(&settings_ref)
            && status.contains("sha256:")
            && status.contains("pkg-web"),
        "{status}"
    );
    assert!(!status.contains("\"pkg-web"), "names unquoted:\n{status}");
    s.ok(&["systemctl", "stop", "test-registry"]);
}

/// Waits up to 10 s for `unit` to be active again (a repair by the watch).
fn repaired(sandbox: &Sandbox, unit: &str) -> bool {
    policy_host_e2e::watching::eventually(std::time::Duration::from_secs(10), || {
        sandbox.is_active(unit) == "active"
    })
}

/// The watch's journal since it was installed (the unit's own and systemd's
/// lines about it).
fn watch_journal(s: &Inside<'_>) -> String {
    s.sh("journalctl -u policy-host-watch.service --no-pager -o cat 2>&1")
}

/// How many times systemd started the watch (its "Started UNIT - ..." lines).
fn watch_starts(s: &Inside<'_>) -> usize {
    watch_journal(s)
        .lines()
        .filter(|l| l.starts_with("Started policy-host-watch.service"))
        .count()
}

/// Installs `deb` and configures the built-in policy, then enables the
/// watch as the docs say; it converges `pkg-web`.
fn install_and_watch(sandbox: &Sandbox, deb: &Path) {
    let s = Inside(sandbox);
    // Docker's policy-rc.d forbids maintainer scripts to act on services in
    // this machine's image; a real machine has none (see above).
    s.ok(&["rm", "-f", "/usr/sbin/policy-rc.d"]);
    s.ok(&["dpkg", "-i", deb.to_str().unwrap()]);
    configure_the_builtin_policy(sandbox);
    let watching = sandbox.exec(&["systemctl", "enable", "--now", "policy-host-watch.service"]);
    assert!(
        watching.status.success(),
        "the watch failed:\n{}",
        watch_journal(&s)
    );
    assert_eq!(
        sandbox.is_active("pkg-web"),
        "active",
        "{}",
        watch_journal(&s)
    );
}

/// The watch, enabled as the docs say beside a timer enabled before it,
/// comes back after a reboot on the same disk, alone (the timer stays
/// stopped), and repairs a stop.
#[e2e_test(requires = "root, systemd, cargo-deb, lintian, bind9-host")]
fn the_enabled_watch_comes_back_after_a_reboot_and_repairs_a_stop() {
    let (first, _) = packages();
    let disk = Disk::new().expect("a disk for the sandbox");
    {
        let sandbox = Sandbox::boot_on_for_test(&target_dir(), &disk, "basic.target");
        let s = Inside(&sandbox);
        s.ok(&["rm", "-f", "/usr/sbin/policy-rc.d"]);
        s.ok(&["dpkg", "-i", first.to_str().unwrap()]);
        configure_the_builtin_policy(&sandbox);
        s.ok(&["systemctl", "enable", "--now", "policy-host.timer"]);
        s.ok(&["systemctl", "enable", "--now", "policy-host-watch.service"]);
        assert_eq!(sandbox.is_enabled("policy-host-watch.service"), "enabled");
        assert_eq!(sandbox.is_active("policy-host-watch.service"), "active");
        assert_eq!(sandbox.is_active("policy-host.timer"), "inactive");
        assert_eq!(sandbox.is_active("pkg-web"), "active");
        sandbox.stop().expect("the machine powers off");
    }

    // The same disk, booted as a machine boots (to multi-user.target): what
    // the first boot enabled is there, and started.
    let sandbox = Sandbox::boot_on_for_test(&target_dir(), &disk, "multi-user.target");
    let s = Inside(&sandbox);
    assert_eq!(
        s.ok(&["dpkg-query", "-W", "-f", "${Status}", "policy-host"]),
        "install ok installed"
    );
    assert_eq!(
        sandbox.is_active("policy-host-watch.service"),
        "active",
        "{}",
        watch_journal(&s)
    );
    // Both enabled, exactly one drives: the boot left the timer stopped.
    assert_eq!(sandbox.is_enabled("policy-host.timer"), "enabled");
    assert_eq!(sandbox.is_active("policy-host.timer"), "inactive");
    // This boot's watch made its first run (its own line, from this boot).
    let boot = s.sh("journalctl -b -u policy-host-watch.service --no-pager -o cat 2>&1");
    assert!(
        boot.lines()
            .any(|l| l.starts_with("Started policy-host-watch.service")),
        "{boot}"
    );
    s.ok(&["systemctl", "stop", "pkg-web"]);
    assert!(repaired(&sandbox, "pkg-web"), "{}", watch_journal(&s));
    let boot = s.sh("journalctl -b -u policy-host-watch.service --no-pager -o cat 2>&1");
    assert!(
        boot.lines()
            .any(|l| l.contains("pkg-web") && l.contains("started")),
        "the watch says it repaired pkg-web:\n{boot}"
    );
}

/// An upgrade from a lower version and a downgrade back to it keep the
/// watch running (restarted once each, onto the installed binary), the
/// state readable (the next run has nothing to do) and the copied built-in
/// policy running. A state record of a format only a newer host reads is
/// refused with one message naming the file and what to do, and the watch
/// stays up instead of restarting in a loop.
#[e2e_test(requires = "root, systemd, cargo-deb, lintian, bind9-host")]
fn an_upgrade_and_a_downgrade_keep_the_watch_and_the_state() {
    let (first, _) = packages();
    let previous = previous_package();
    let sandbox = Sandbox::boot_for_test(&target_dir());
    let s = Inside(&sandbox);
    install_and_watch(&sandbox, &previous);
    let versions = s.ok(&["cat", "/var/lib/policy-host/versions.json"]);
    let nothing_to_do = |when: &str| {
        let run = sandbox.exec(&["policy-host", "run", "--json"]);
        let out = text(&run.stdout);
        assert!(run.status.success(), "{when}: {out}{}", text(&run.stderr));
        let report: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        assert_eq!(report["summary"]["success"], true, "{when}: {report:#}");
        assert_eq!(report["summary"]["changed"], 0, "{when}: {report:#}");
        assert!(
            out.contains("/etc/policy-host/policies/manifest-policy.wasm"),
            "{when}: the copied built-in policy ran: {out}"
        );
    };

    for (deb, what) in [(&first, "upgrade"), (&previous, "downgrade")] {
        let starts = watch_starts(&s);
        let pid = sandbox.main_pid("policy-host-watch.service");
        let out = s.ok(&["dpkg", "-i", deb.to_str().unwrap()]);
        if what == "downgrade" {
            assert!(out.contains("downgrading policy-host"), "{out}");
        }
        assert_eq!(
            s.ok(&["dpkg-query", "-W", "-f", "${Version}", "policy-host"]),
            deb_field(deb, "Version"),
            "{what}"
        );
        assert_eq!(
            sandbox.is_active("policy-host-watch.service"),
            "active",
            "{what}: {}",
            watch_journal(&s)
        );
        assert_ne!(sandbox.main_pid("policy-host-watch.service"), pid, "{what}");
        assert_eq!(watch_starts(&s), starts + 1, "{what}: restarted once");
        assert_eq!(
            s.ok(&["cat", "/var/lib/policy-host/versions.json"]),
            versions,
            "{what}"
        );
        nothing_to_do(what);
        s.ok(&["systemctl", "stop", "pkg-web"]);
        assert!(
            repaired(&sandbox, "pkg-web"),
            "{what}: {}",
            watch_journal(&s)
        );
    }

    // A record only a newer host reads (as one that changed the format would
    // leave behind, before a downgrade): one message, the watch stays up.
    let newer = versions.replacen("\"format\": 1", "\"format\": 99", 1);
    assert_ne!(newer, versions, "the record says its format: {versions}");
    sandbox.write_file("/var/lib/policy-host/versions.json", &newer);
    let pid = sandbox.main_pid("policy-host-watch.service");
    s.ok(&["systemctl", "reload", "policy-host-watch.service"]);
    std::thread::sleep(std::time::Duration::from_secs(12));
    let journal = watch_journal(&s);
    let said: Vec<&str> = journal
        .lines()
        .filter(|l| l.contains("/var/lib/policy-host/versions.json has format 99"))
        .collect();
    assert_eq!(said.len(), 1, "said once, though retried:\n{journal}");
    assert!(
        said[0].contains("a newer policy-host wrote")
            && said[0].contains("install the newer policy-host again"),
        "{}",
        said[0]
    );
    assert_eq!(sandbox.is_active("policy-host-watch.service"), "active");
    assert_eq!(
        sandbox.main_pid("policy-host-watch.service"),
        pid,
        "no restart"
    );
    assert_eq!(
        s.ok(&[
            "systemctl",
            "show",
            "-p",
            "NRestarts",
            "--value",
            "policy-host-watch.service"
        ])
        .trim(),
        "0"
    );
    let by_hand = sandbox.exec(&["policy-host", "run"]);
    assert_eq!(by_hand.status.code(), Some(1), "{}", text(&by_hand.stderr));
    assert!(text(&by_hand.stderr).contains("versions.json has format 99"));
    // Doing what it says (the record moved away) lets the runs go on.
    s.ok(&[
        "mv",
        "/var/lib/policy-host/versions.json",
        "/root/versions.json.newer",
    ]);
    s.ok(&["systemctl", "reload", "policy-host-watch.service"]);
    nothing_to_do("after the newer record was moved away");
    s.ok(&["test", "-s", "/var/lib/policy-host/versions.json"]);
}
