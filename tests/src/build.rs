//! Builds what the end-to-end tests run: the `host` binary and policy
//! components. Each artefact is built at most once per test process; nested
//! cargo calls share the workspace's target directory, and are shaped so
//! that they reuse what the suite's own build made (the host as `cargo test
//! --workspace` builds it, every policy package in one invocation).
//!
//! Cargo's output is captured and shown only if a build fails, which keeps
//! test output quiet. Interactive commands (the demo, the benchmark) call
//! [`show_build_progress`] first: a first build of the host compiles wasmtime
//! and takes minutes, and cargo's own progress then reaches the terminal.

use std::collections::HashMap;
use std::hash::Hash;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, Once, OnceLock};

/// Whether nested `cargo build`s write their output to this process's
/// stderr (see [`show_build_progress`]).
static SHOW_PROGRESS: AtomicBool = AtomicBool::new(false);

/// From now on, the `cargo build`s of this process are shown as they run:
/// the command line, then cargo's own output (progress, `Compiling` lines,
/// and `Finished ... in 5m 12s` with its elapsed time) on this process's
/// stderr, instead of being captured. For interactive commands; the tests
/// leave it off.
pub fn show_build_progress() {
    SHOW_PROGRESS.store(true, Ordering::Relaxed);
}

/// The workspace root (the directory holding the workspace `Cargo.toml`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the e2e crate lives one level below the workspace root")
        .to_path_buf()
}

/// The cargo target directory: `CARGO_TARGET_DIR` if set (relative paths are
/// taken from the workspace root), else `<root>/target`.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => {
            let dir = PathBuf::from(dir);
            if dir.is_absolute() {
                dir
            } else {
                workspace_root().join(dir)
            }
        }
        _ => workspace_root().join("target"),
    }
}

fn cargo_program() -> PathBuf {
    std::env::var_os("CARGO")
        .filter(|c| !c.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("cargo"))
}

/// Installs the `wasm32-wasip2` standard library with rustup when it is
/// missing, so a fresh machine can build policies without a separate step.
/// Without rustup the build below fails and says what is missing.
fn ensure_wasm_target() {
    static CHECKED: OnceLock<()> = OnceLock::new();
    CHECKED.get_or_init(|| {
        let installed = Command::new("rustup")
            .args(["target", "list", "--installed"])
            .output();
        let Ok(installed) = installed else { return };
        if String::from_utf8_lossy(&installed.stdout)
            .lines()
            .any(|t| t.trim() == "wasm32-wasip2")
        {
            return;
        }
        eprintln!("installing the wasm32-wasip2 target: rustup target add wasm32-wasip2");
        let status = Command::new("rustup")
            .args(["target", "add", "wasm32-wasip2"])
            .status();
        assert!(
            status.is_ok_and(|s| s.success()),
            "rustup target add wasm32-wasip2 failed"
        );
    });
}

/// Runs `cargo ARGS` (a build) in the workspace root; panics with cargo's
/// output if it fails. With [`show_build_progress`], cargo's output goes
/// straight to stderr instead (and the panic says it is above).
fn cargo(args: &[&str]) {
    let mut command = Command::new(cargo_program());
    command
        .args(args)
        .current_dir(workspace_root())
        .env("CARGO_TARGET_DIR", target_dir());
    if SHOW_PROGRESS.load(Ordering::Relaxed) {
        eprintln!("$ cargo {}", args.join(" "));
        let status = command
            .status()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", cargo_program().display()));
        assert!(
            status.success(),
            "cargo {} failed ({status}); its output is above",
            args.join(" ")
        );
        return;
    }
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", cargo_program().display()));
    if !output.status.success() {
        panic!(
            "cargo {} failed ({}):\n{}{}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// The `host` binary to run.
///
/// In a test: the one cargo built for this test target (the end-to-end
/// tests are test targets of policy-host, so cargo builds its `host` before
/// running them; `CARGO_BIN_EXE_host` names the same file, beside the test
/// executable's `deps/` directory, and `operator.rs` checks the two agree).
/// Interactive commands ([`show_build_progress`]: the demo) build it first.
pub fn host_binary() -> PathBuf {
    static HOST: OnceLock<PathBuf> = OnceLock::new();
    HOST.get_or_init(|| {
        let name = format!("host{}", std::env::consts::EXE_SUFFIX);
        if SHOW_PROGRESS.load(Ordering::Relaxed) {
            cargo(&["build", "-p", "policy-host", "--bin", "host"]);
            return target_dir().join("debug").join(name);
        }
        let exe = std::env::current_exe().expect("the test executable's path");
        // <target>/<profile>/deps/<test>-<hash>
        let path = exe
            .parent()
            .and_then(Path::parent)
            .map(|profile| profile.join(&name))
            .expect("a test executable lies in <target>/<profile>/deps");
        assert!(
            path.is_file(),
            "no {} beside this test: the end-to-end tests are policy-host's test targets, \
             run them with cargo test -p policy-host (or --workspace)",
            path.display()
        );
        path
    })
    .clone()
}

/// The workspace's policy packages: `policies/*` and the fixtures under
/// `tests/fixtures/` (each a directory with a `Cargo.toml`), by package name.
fn policy_packages() -> Vec<String> {
    let root = workspace_root();
    let mut dirs = Vec::new();
    for parent in ["policies", "tests/fixtures", "tests/fixtures/hostile"] {
        for entry in std::fs::read_dir(root.join(parent))
            .into_iter()
            .flatten()
            .flatten()
        {
            dirs.push(entry.path());
        }
    }
    let mut names: Vec<String> = dirs
        .iter()
        .filter_map(|dir| std::fs::read_to_string(dir.join("Cargo.toml")).ok())
        .filter_map(|manifest| {
            manifest.lines().find_map(|line| {
                let value = line.trim().strip_prefix("name")?.trim().strip_prefix('=')?;
                Some(value.trim().trim_matches('"').to_owned())
            })
        })
        .collect();
    names.sort();
    names
}

/// What one test process makes at most once per key (a built policy, a
/// signed copy, a compiled cache): each caller's own static map of the
/// paths made so far.
pub type MadeOnce<K> = OnceLock<Mutex<HashMap<K, PathBuf>>>;

/// The path `make` gives for `key`, made the first time only (`make` is
/// told how many `made` holds already, to name its output). The lock is
/// held while `make` runs: two tests never make one thing side by side.
pub fn made_once<K: Eq + Hash>(
    made: &'static MadeOnce<K>,
    key: K,
    make: impl FnOnce(usize) -> PathBuf,
) -> PathBuf {
    let made = made.get_or_init(|| Mutex::new(HashMap::new()));
    let mut made = made.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(path) = made.get(&key) {
        return path.clone();
    }
    let path = make(made.len());
    made.insert(key, path.clone());
    path
}

/// Builds the policy component of `package` (release, `wasm32-wasip2`) and
/// returns the `.wasm` path. The first call builds every policy package of
/// the workspace in one cargo invocation (one feature resolution, the
/// shared crates compiled once, in parallel); later calls only look.
pub fn policy_wasm(package: &str) -> PathBuf {
    static BUILT: MadeOnce<String> = OnceLock::new();
    static ALL: Once = Once::new();
    // Builds are serialised (`made_once` holds its lock); cargo would take
    // its own lock on the target directory anyway.
    made_once(&BUILT, package.to_owned(), |_| {
        ensure_wasm_target();
        let all = policy_packages();
        let mut args = vec!["build", "--release", "--target", "wasm32-wasip2"];
        if all.iter().any(|p| p == package) {
            ALL.call_once(|| {
                for name in &all {
                    args.extend(["-p", name.as_str()]);
                }
                cargo(&args);
            });
        } else {
            args.extend(["-p", package]);
            cargo(&args);
        }
        let path = target_dir()
            .join("wasm32-wasip2")
            .join("release")
            .join(format!("{}.wasm", package.replace('-', "_")));
        assert!(path.is_file(), "cargo built no {}", path.display());
        path
    })
}

/// `POLICY.wasm.minisig`: where a policy's detached signature lives.
pub fn signature_path(policy: &Path) -> PathBuf {
    let mut name = policy.as_os_str().to_owned();
    name.push(".minisig");
    PathBuf::from(name)
}

/// The key pair the tests sign their policies with.
#[derive(Debug, Clone)]
pub struct TestKey {
    pub public_key: PathBuf,
    pub secret_key: PathBuf,
}

/// A fresh, unencrypted key pair made by `host keygen` once per process,
/// under the target directory (so a sandbox sharing it can read the public key).
pub fn test_key() -> TestKey {
    static KEY: OnceLock<TestKey> = OnceLock::new();
    KEY.get_or_init(|| keygen(&process_dir().join("key")))
        .clone()
}

/// The `host` binary as a command, for the subcommands a test runs by hand
/// (`keygen`, `sign`, `push`, `verify`, ...); `host run` goes through
/// [`HostRun`](crate::host_run::HostRun).
pub fn host_command() -> Command {
    Command::new(host_binary())
}

/// Runs `command` (a `host` subcommand), which must succeed; its stderr,
/// with `what`, in the panic otherwise.
fn host_ok(command: &mut Command, what: &str) {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("run {what}: {e}"));
    assert!(
        output.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `host keygen --unencrypted --out DIR`, which must succeed.
pub fn keygen(dir: &Path) -> TestKey {
    host_ok(
        host_command()
            .args(["keygen", "--unencrypted", "--out"])
            .arg(dir),
        "host keygen",
    );
    TestKey {
        public_key: dir.join("policy-host.pub"),
        secret_key: dir.join("policy-host.key"),
    }
}

/// `host sign FILE --key KEY`, which must succeed.
pub fn sign_with(file: &Path, key: &Path) {
    host_ok(
        host_command().arg("sign").arg(file).arg("--key").arg(key),
        &format!("host sign {}", file.display()),
    );
}

/// `["--trusted-key", PUB]` for the test key: what every `host run` of a
/// policy from [`signed_policy`] needs.
pub fn trust_args() -> Vec<std::ffi::OsString> {
    vec![
        "--trusted-key".into(),
        test_key().public_key.into_os_string(),
    ]
}

/// What every test's `host run` takes: [`trust_args`], plus a lock file and a
/// compile cache of this test process's own, so tests never wait on (or
/// leave entries in) the machine's `/run/lock` and `/var/cache` — and a stray
/// run elsewhere on the machine cannot stall them.
pub fn run_args() -> Vec<std::ffi::OsString> {
    let mut args = trust_args();
    args.extend(isolation_args());
    args
}

/// `--lock-file` and `--cache-dir` of this test process (see [`run_args`]),
/// and a `--state-dir` of this call's own, for tests that bring their own
/// keys. The state (the versions accepted, for rollback protection) is fresh
/// for every call: tests that sign files of one name in parallel must not
/// refuse each other's as rollbacks. Tests of rollback pass their own.
pub fn isolation_args() -> Vec<std::ffi::OsString> {
    static STATES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = STATES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    vec![
        "--lock-file".into(),
        process_dir().join("run.lock").into_os_string(),
        "--cache-dir".into(),
        process_dir().join("cache").into_os_string(),
        "--state-dir".into(),
        process_dir().join(format!("state-{n}")).into_os_string(),
    ]
}

/// The policy of `package`, copied to this process's own directory and signed
/// there with [`test_key`] by `host sign` (so concurrent test processes never
/// sign one file).
pub fn signed_policy(package: &str) -> PathBuf {
    static SIGNED: MadeOnce<String> = OnceLock::new();
    made_once(&SIGNED, package.to_owned(), |_| {
        let built = policy_wasm(package);
        let copy = process_dir().join(built.file_name().expect("wasm file name"));
        std::fs::copy(&built, &copy).expect("copy policy");
        sign_file(&copy);
        copy
    })
}

/// A copy of `file` (a kept fixture, say) in this process's own directory,
/// under `subdir`, signed there with [`test_key`]: the fixture itself is
/// never written to.
pub fn signed_copy(file: &Path, subdir: &str) -> PathBuf {
    let dir = process_dir().join(subdir);
    std::fs::create_dir_all(&dir).expect("create the copy's directory");
    let copy = dir.join(file.file_name().expect("a file name"));
    std::fs::copy(file, &copy).unwrap_or_else(|e| panic!("copy {}: {e}", file.display()));
    sign_file(&copy);
    copy
}

/// Signs any file with [`test_key`] (`host sign`), writing `FILE.minisig`:
/// for tests of what the host does with signed but unsuitable files.
pub fn sign_file(path: &Path) {
    sign_with(path, &test_key().secret_key);
}

/// A compile cache directory holding `policy` (signed by the test key) and
/// nothing else, compiled once per test process by `host compile`, as an
/// operator compiles a policy when installing it: what a sandboxed machine
/// is given (`Machine::precompile`), instead of compiling it again at each
/// machine's first run, and the `--cache-dir` of runs against the fake that
/// are not about compiling a large policy.
pub fn compiled_alone(policy: &Path) -> PathBuf {
    static DIRS: MadeOnce<PathBuf> = OnceLock::new();
    made_once(&DIRS, policy.to_owned(), |before| {
        let parent = process_dir().join("compiled");
        std::fs::create_dir_all(&parent).expect("create the compiled policies' directory");
        let dir = parent.join(before.to_string());
        host_ok(
            host_command()
                .arg("compile")
                .arg(policy)
                .arg("--cache-dir")
                .arg(&dir)
                .args(trust_args()),
            &format!("host compile {}", policy.display()),
        );
        dir
    })
}

/// `target/e2e/<pid>`: files of this test process, removed at the start of a
/// later process with the same pid.
fn process_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = target_dir()
            .join("e2e")
            .join(std::process::id().to_string());
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the e2e directory");
        dir
    })
    .clone()
}

/// Builds the `host` binary in the release profile (what the benchmark
/// measures: a debug build says nothing about speed) once per process and
/// returns its path. Only with the `bench` feature.
#[cfg(feature = "bench")]
pub fn host_binary_release() -> PathBuf {
    static HOST: OnceLock<PathBuf> = OnceLock::new();
    HOST.get_or_init(|| {
        cargo(&["build", "--release", "-p", "policy-host", "--bin", "host"]);
        let path = target_dir()
            .join("release")
            .join(format!("host{}", std::env::consts::EXE_SUFFIX));
        assert!(path.is_file(), "cargo built no {}", path.display());
        path
    })
    .clone()
}

/// The `minisign` command (Debian's minisign CLI). Panics, saying how to
/// install it, when it is missing (the tests that need it say
/// `#[e2e_test(requires = "minisign")]`).
pub fn minisign_command() -> Command {
    let installed = Command::new("minisign")
        .arg("-v")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        installed,
        "this test needs the `minisign` command (apt-get install minisign)"
    );
    Command::new("minisign")
}
