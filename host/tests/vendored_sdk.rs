//! `host/vendor/` is what `cargo package -p contract-words -p guest-sdk`
//! makes of the workspace's crates (normalised manifests, guest-sdk's
//! `Cargo.lock`, the WIT contract inside guest-sdk), less cargo's two notes
//! on where it came from (`.cargo_vcs_info.json`, `Cargo.toml.orig`). One
//! line is rewritten: guest-sdk's lock lists contract-words as the registry
//! package cargo packaged beside it, with a checksum of that tarball (which
//! holds file times, so it changes with every checkout); a policy crate
//! takes contract-words from its `vendor/` (`[patch.crates-io]`), so the
//! entry is written as cargo writes a path package: no source, no checksum.
//! The host embeds it for `host new-policy`. This test fails when it drifts from
//! the sources;
//! `POLICY_HOST_REGENERATE=1 cargo test -p policy-host --test vendored_sdk`
//! writes it again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The crates vendored, in the order cargo packages them.
const CRATES: [&str; 2] = ["contract-words", "guest-sdk"];

/// What cargo adds to a package about the checkout it was made from: it
/// changes with every commit, and says nothing a policy crate needs.
const DROPPED: [&str; 2] = [".cargo_vcs_info.json", "Cargo.toml.orig"];

fn vendor_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("vendor")
}

/// Every file below `dir`, by path relative to it.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut found = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path.strip_prefix(dir).unwrap().to_str().unwrap().to_owned();
                found.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    found
}

/// `lock` with the entries of `package` written as a path package's.
fn as_path_package(lock: &str, package: &str) -> String {
    lock.split("\n[[package]]\n")
        .map(|entry| {
            if entry.starts_with(&format!("name = \"{package}\"\n")) {
                entry
                    .split_inclusive('\n')
                    .filter(|l| !l.starts_with("source = ") && !l.starts_with("checksum = "))
                    .collect::<String>()
            } else {
                entry.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n[[package]]\n")
}

/// `cargo package` of the vendored crates, unpacked, as `crate/path`.
fn packaged() -> BTreeMap<String, Vec<u8>> {
    let scratch = tempfile::tempdir().unwrap();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut package = Command::new(cargo);
    package
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .args([
            "package",
            "--no-verify",
            "--allow-dirty",
            "--offline",
            "--quiet",
        ])
        .arg("--target-dir")
        .arg(scratch.path());
    for name in CRATES {
        package.args(["-p", name]);
    }
    let out = package.output().expect("run cargo package");
    assert!(
        out.status.success(),
        "cargo package failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let unpacked = scratch.path().join("unpacked");
    std::fs::create_dir(&unpacked).unwrap();
    let mut all = BTreeMap::new();
    for entry in std::fs::read_dir(scratch.path().join("package")).unwrap() {
        let path = entry.unwrap().path();
        let Some(file) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let Some(stem) = file.strip_suffix(".crate") else {
            continue;
        };
        let name = CRATES
            .iter()
            .find(|c| stem.strip_prefix(**c).is_some_and(|v| v.starts_with('-')))
            .unwrap_or_else(|| panic!("cargo packaged an unexpected {file}"));
        let out = Command::new("tar")
            .arg("-xzf")
            .arg(&path)
            .arg("-C")
            .arg(&unpacked)
            .output()
            .expect("run tar");
        assert!(out.status.success(), "tar -xzf {file} failed");
        for (rel, contents) in files(&unpacked.join(stem)) {
            if !DROPPED.contains(&rel.as_str()) {
                all.insert(format!("{name}/{rel}"), contents);
            }
        }
    }
    let lock = all
        .get_mut("guest-sdk/Cargo.lock")
        .expect("cargo package writes guest-sdk's Cargo.lock");
    let text = String::from_utf8(std::mem::take(lock)).unwrap();
    *lock = as_path_package(&text, "contract-words").into_bytes();
    assert_eq!(
        all.keys().filter(|k| k.ends_with("/Cargo.toml")).count(),
        CRATES.len(),
        "one manifest per vendored crate"
    );
    all
}

#[test]
fn the_vendored_sdk_is_what_cargo_packages() {
    let expected = packaged();
    let vendored = files(&vendor_dir());
    if std::env::var_os("POLICY_HOST_REGENERATE").is_some() && vendored != expected {
        let _ = std::fs::remove_dir_all(vendor_dir());
        for (rel, contents) in &expected {
            let path = vendor_dir().join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, contents).unwrap();
        }
        return;
    }
    let stale: Vec<&String> = expected
        .keys()
        .chain(vendored.keys())
        .filter(|k| expected.get(*k) != vendored.get(*k))
        .collect();
    assert!(
        stale.is_empty(),
        "host/vendor is out of date (regenerate with POLICY_HOST_REGENERATE=1 cargo test -p policy-host --test vendored_sdk): {stale:#?}"
    );
}

#[test]
fn a_packaged_entry_is_rewritten_as_a_path_package() {
    let lock = "version = 4\n\n[[package]]\nname = \"contract-words\"\nversion = \"0.1.0\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\nchecksum = \"ab\"\n\n[[package]]\nname = \"serde\"\nversion = \"1.0.0\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\nchecksum = \"cd\"\n";
    assert_eq!(
        as_path_package(lock, "contract-words"),
        "version = 4\n\n[[package]]\nname = \"contract-words\"\nversion = \"0.1.0\"\n\n[[package]]\nname = \"serde\"\nversion = \"1.0.0\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\nchecksum = \"cd\"\n"
    );
}

#[test]
fn the_vendored_manifests_stand_alone() {
    for name in CRATES {
        let manifest = std::fs::read_to_string(vendor_dir().join(name).join("Cargo.toml")).unwrap();
        assert!(!manifest.contains("workspace = true"), "{name}: {manifest}");
        assert!(!manifest.contains("path = \"../"), "{name}: {manifest}");
    }
    // The contract travels inside guest-sdk.
    assert_eq!(
        std::fs::read(vendor_dir().join("guest-sdk/wit/policy.wit")).unwrap(),
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit/policy.wit")).unwrap()
    );
}
