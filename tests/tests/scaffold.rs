//! End-to-end: `host new-policy` scaffolds a policy crate that tests, builds,
//! signs and runs as generated, and refuses what it must refuse.
//!
//! The crate is scaffolded under the target directory, inside this
//! workspace's tree: its own `[workspace]` table is what lets it build there.
//! Its nested cargo commands share the workspace's target directory and get a
//! copy of the workspace's `Cargo.lock` (the generated files are left as they
//! are), so the registry dependencies, already built for both the test and
//! the `wasm32-wasip2` release profile, are reused and only guest-sdk and the
//! new crate are compiled: a few seconds, where a target directory of its own
//! takes about two minutes on two cores.

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Instant;

use policy_host_e2e::build::{host_binary, target_dir, test_key, trust_args, workspace_root};
use policy_host_e2e::fake_systemctl::FakeSystemctl;
use serde_json::Value;

/// A fresh directory for one test under `target/e2e-scaffold/`, kept when
/// the test fails (to inspect the crate), removed by [`Scratch::done`].
struct Scratch {
    dir: PathBuf,
    _lock: Option<fs::File>,
}

impl Scratch {
    fn root() -> PathBuf {
        target_dir().join("e2e-scaffold")
    }

    fn at(dir: PathBuf, lock: Option<fs::File>) -> Self {
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("create the scratch directory");
        Self { dir, _lock: lock }
    }

    /// `target/e2e-scaffold/<tag>-<pid>`.
    fn new(tag: &str) -> Self {
        Self::at(
            Self::root().join(format!("{tag}-{}", std::process::id())),
            None,
        )
    }

    /// `target/e2e-scaffold/<tag>`, the same path in every run, held under
    /// an exclusive lock. For crates that are built: cargo records the source
    /// files of a package inside the target directory by their path from the
    /// target directory, so a crate at a new path whose predecessor is still
    /// on disk would be taken as up to date; at the same path its sources are
    /// newer than the last build and are compiled again.
    fn fixed(tag: &str) -> Self {
        fs::create_dir_all(Self::root()).expect("create the scratch root");
        let lock = fs::File::create(Self::root().join(format!("{tag}.lock")))
            .expect("create the scratch lock");
        lock.lock().expect("lock the scratch directory");
        Self::at(Self::root().join(tag), Some(lock))
    }

    fn done(self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[track_caller]
fn assert_success(what: &str, output: &Output) {
    assert!(
        output.status.success(),
        "{what} failed ({})\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        text(&output.stdout),
        text(&output.stderr)
    );
}

/// `host ARGS...`.
fn host<S: AsRef<OsStr>>(args: &[S]) -> Output {
    Command::new(host_binary())
        .args(args)
        .output()
        .expect("run host")
}

/// `host new-policy DIR [EXTRA...]`.
fn new_policy(dir: &Path, extra: &[&str]) -> Output {
    Command::new(host_binary())
        .arg("new-policy")
        .arg(dir)
        .args(extra)
        .output()
        .expect("run host new-policy")
}

fn cargo_program() -> PathBuf {
    std::env::var_os("CARGO")
        .filter(|c| !c.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("cargo"))
}

/// `cargo ARGS...` in the `my-app-policy` crate at `dir`, sharing the
/// workspace's target directory; panics with cargo's output on failure or
/// when cargo did not compile the crate, returns stdout.
fn cargo(dir: &Path, args: &[&str]) -> String {
    let start = Instant::now();
    let output = Command::new(cargo_program())
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target_dir())
        .output()
        .expect("run cargo");
    assert_success(&format!("cargo {}", args.join(" ")), &output);
    eprintln!("cargo {}: {:.1?}", args.join(" "), start.elapsed());
    let compiling = format!("Compiling my-app-policy v0.1.0 ({})", dir.display());
    assert!(
        text(&output.stderr).contains(&compiling),
        "cargo {} did not compile the new crate:\n{}",
        args.join(" "),
        text(&output.stderr)
    );
    text(&output.stdout)
}

/// Installs the `wasm32-wasip2` standard library with rustup when missing
/// (as the other end-to-end tests' builds do).
fn ensure_wasm_target() {
    static CHECKED: OnceLock<()> = OnceLock::new();
    CHECKED.get_or_init(|| {
        let Ok(installed) = Command::new("rustup")
            .args(["target", "list", "--installed"])
            .output()
        else {
            return;
        };
        if !text(&installed.stdout)
            .lines()
            .any(|t| t.trim() == "wasm32-wasip2")
        {
            let status = Command::new("rustup")
                .args(["target", "add", "wasm32-wasip2"])
                .status();
            assert!(
                status.is_ok_and(|s| s.success()),
                "rustup target add wasm32-wasip2 failed"
            );
        }
    });
}

/// Every file under `dir`, relative, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        if entry.file_type().unwrap().is_dir() {
            out.extend(
                listing(&entry.path())
                    .into_iter()
                    .map(|f| format!("{name}/{f}")),
            );
        } else {
            out.push(name);
        }
    }
    out.sort();
    out
}

/// `host run POLICY --trusted-key TEST.pub ARGS...` against `fake`, with a
/// lock file of the fake's own: these runs touch no real unit, so they need
/// not wait for other runs on this machine.
fn run_policy(fake: &FakeSystemctl, policy: &Path, args: &[&str]) -> Output {
    fake.host_command()
        .arg("run")
        .arg(policy)
        .args(trust_args())
        .arg("--lock-file")
        .arg(fake.root().join("policy-host.lock"))
        .args(args)
        .output()
        .expect("run host")
}

#[test]
fn scaffolded_policy_tests_builds_signs_and_runs() {
    let started = Instant::now();
    let scratch = Scratch::fixed("run");
    let dir = scratch.dir.join("my-app-policy");

    let out = new_policy(&dir, &[]);
    assert_success("host new-policy", &out);
    let stdout = text(&out.stdout);
    for line in [
        "created policy crate `my-app-policy` in ",
        "  Cargo.toml\n",
        "  src/lib.rs\n",
        "  README.md\n",
        "  .gitignore\n",
        "  build.sh\n",
        "  cargo test\n",
        "  cargo build --release --target wasm32-wasip2\n",
        "  host sign target/wasm32-wasip2/release/my_app_policy.wasm --key ",
        "  host run target/wasm32-wasip2/release/my_app_policy.wasm --noop\n",
    ] {
        assert!(stdout.contains(line), "{line:?} not in:\n{stdout}");
    }
    assert_eq!(
        listing(&dir),
        [
            ".gitignore",
            "Cargo.toml",
            "README.md",
            "build.sh",
            "src/lib.rs"
        ]
    );
    let manifest = fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    let sdk = fs::canonicalize(workspace_root().join("guest-sdk")).unwrap();
    assert!(
        manifest.contains(&format!("guest-sdk = {{ path = \"{}\" }}", sdk.display())),
        "{manifest}"
    );
    fs::copy(workspace_root().join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();

    // The generated native tests pass.
    let tests = cargo(&dir, &["test"]);
    for test in [
        "tests::converges_a_fresh_machine ... ok",
        "tests::second_run_changes_nothing ... ok",
        "tests::config_change_restarts_the_service ... ok",
        "tests::noop_explains_and_changes_nothing ... ok",
    ] {
        assert!(tests.contains(test), "{test:?} not in:\n{tests}");
    }

    // The component builds, and is signed the way the README says.
    ensure_wasm_target();
    cargo(&dir, &["build", "--release", "--target", "wasm32-wasip2"]);
    let built = target_dir().join("wasm32-wasip2/release/my_app_policy.wasm");
    let policy = scratch.dir.join("my_app_policy.wasm");
    fs::copy(&built, &policy).unwrap_or_else(|e| panic!("cargo built no {}: {e}", built.display()));
    let key = test_key();
    let out = host(&[
        OsStr::new("sign"),
        policy.as_os_str(),
        OsStr::new("--key"),
        key.secret_key.as_os_str(),
    ]);
    assert_success("host sign", &out);
    assert!(scratch.dir.join("my_app_policy.wasm.minisig").is_file());

    // It converges a machine where my-app is stopped and disabled.
    let fake = FakeSystemctl::new();
    fake.unit("my-app", "inactive", "disabled");
    let out = run_policy(&fake, &policy, &["--json"]);
    assert_success("host run", &out);
    assert_eq!(
        fake.mutating_calls(),
        ["start --system -- my-app", "enable --system -- my-app"]
    );
    assert_eq!(
        fake.state("my-app").unwrap(),
        ("active".into(), "enabled".into())
    );
    assert!(fake.rejected_calls().is_empty(), "{:?}", fake.calls());
    let report: Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    assert_eq!(report["resources"][0]["resource"], "service#my-app");
    assert_eq!(
        report["resources"][0]["actions"],
        serde_json::json!(["started", "enabled"])
    );

    // A second run changes nothing; a configuration change restarts it.
    fake.clear_calls();
    let out = run_policy(&fake, &policy, &["--detailed-exitcodes"]);
    assert_success("second host run", &out);
    assert!(fake.mutating_calls().is_empty(), "{:?}", fake.calls());
    let out = run_policy(
        &fake,
        &policy,
        &["--refresh", "file#/etc/my-app/config.toml"],
    );
    assert_success("host run --refresh", &out);
    assert_eq!(fake.mutating_calls(), ["restart --system -- my-app"]);

    eprintln!(
        "scaffold, test, build, sign, run: {:.1?}",
        started.elapsed()
    );
    scratch.done();
}

#[test]
fn refuses_a_non_empty_directory_and_writes_nothing() {
    let scratch = Scratch::new("non-empty");
    let dir = scratch.dir.join("existing");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("notes.txt"), "mine\n").unwrap();

    let out = new_policy(&dir, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("already exists and is not empty; nothing was written"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    assert_eq!(listing(&dir), ["notes.txt"]);
    assert_eq!(fs::read_to_string(dir.join("notes.txt")).unwrap(), "mine\n");
    scratch.done();
}

#[test]
fn refuses_an_invalid_crate_name_and_writes_nothing() {
    let scratch = Scratch::new("bad-name");

    let from_dir = scratch.dir.join("2fast");
    let out = new_policy(&from_dir, &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(
            "invalid crate name `2fast` (the directory's name): the name must not start with a digit; pass --name NAME"
        ),
        "{stderr}"
    );
    assert!(!from_dir.exists());

    for (name, why) in [
        ("my policy", "invalid character ' '"),
        ("fn", "`fn` is a Rust keyword"),
        ("", "the name is empty"),
    ] {
        let dir = scratch.dir.join("named");
        let out = new_policy(&dir, &["--name", name]);
        assert_eq!(out.status.code(), Some(1), "{name:?}");
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains(&format!("invalid crate name `{name}`: {why}")),
            "{name:?}: {stderr}"
        );
        assert!(!dir.exists(), "{name:?}");
    }

    // --name rescues a directory whose name is not a crate name.
    let out = new_policy(&from_dir, &["--name", "fast-policy"]);
    assert_success("host new-policy --name", &out);
    let manifest = fs::read_to_string(from_dir.join("Cargo.toml")).unwrap();
    assert!(manifest.contains("name = \"fast-policy\""), "{manifest}");
    scratch.done();
}
