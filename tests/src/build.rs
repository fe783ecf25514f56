//! Builds what the end-to-end tests run: the `host` binary and policy
//! components. Each artefact is built at most once per test process; nested
//! `cargo build` calls share the workspace's target directory.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

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

fn cargo() -> PathBuf {
    std::env::var_os("CARGO")
        .filter(|c| !c.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("cargo"))
}

/// Runs `cargo build ARGS` in the workspace root; panics with cargo's output
/// if the build fails.
fn cargo_build(args: &[&str]) {
    let output = Command::new(cargo())
        .arg("build")
        .args(args)
        .current_dir(workspace_root())
        .env("CARGO_TARGET_DIR", target_dir())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", cargo().display()));
    if !output.status.success() {
        panic!(
            "cargo build {} failed ({}):\n{}{}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// Builds the `host` binary (debug profile) once per process and returns its
/// path.
pub fn host_binary() -> PathBuf {
    static HOST: OnceLock<PathBuf> = OnceLock::new();
    HOST.get_or_init(|| {
        cargo_build(&["-p", "policy-host", "--bin", "host"]);
        let path = target_dir()
            .join("debug")
            .join(format!("host{}", std::env::consts::EXE_SUFFIX));
        assert!(path.is_file(), "cargo built no {}", path.display());
        path
    })
    .clone()
}

/// Builds the policy component of `package` (release, `wasm32-wasip2`) once
/// per package per process and returns the `.wasm` path.
pub fn policy_wasm(package: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let built = BUILT.get_or_init(|| Mutex::new(HashMap::new()));
    // Holding the lock while building serialises builds; cargo would take
    // its own lock on the target directory anyway.
    let mut built = built.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(path) = built.get(package) {
        return path.clone();
    }
    cargo_build(&["--release", "--target", "wasm32-wasip2", "-p", package]);
    let path = target_dir()
        .join("wasm32-wasip2")
        .join("release")
        .join(format!("{}.wasm", package.replace('-', "_")));
    assert!(path.is_file(), "cargo built no {}", path.display());
    built.insert(package.to_string(), path.clone());
    path
}
