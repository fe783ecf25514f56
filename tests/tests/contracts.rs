//! A host upgrade strands no policy: the kept policies of every earlier
//! contract (`tests/fixtures/contracts/`, built once from the project's own
//! history, never rebuilt) run on this host against a real systemd, as the
//! current ones do; a policy of a contract newer than the host is refused
//! with what to do.

use std::path::{Path, PathBuf};

use policy_host_e2e::build::{self, host_command, workspace_root};
use policy_host_e2e::machine::{machine, mutating_calls, state, Machine};
use policy_host_e2e::outcome::text;
use policy_host_e2e::requires::e2e_test;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// `tests/fixtures/contracts`.
fn kept_dir() -> PathBuf {
    workspace_root().join("tests/fixtures/contracts")
}

/// A kept policy: the contract it speaks, and its file.
struct Kept {
    contract: String,
    file: PathBuf,
    sha256: String,
}

/// The table of the fixtures' README: every kept file, with its digest.
fn kept() -> Vec<Kept> {
    let readme = std::fs::read_to_string(kept_dir().join("README.md")).unwrap();
    let kept: Vec<Kept> = readme
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            // | contract | commit | file | sha256 |
            (cells.len() == 6 && cells[3].ends_with(".wasm")).then(|| Kept {
                contract: cells[1].to_owned(),
                file: kept_dir().join(cells[3]),
                sha256: cells[4].to_owned(),
            })
        })
        .collect();
    assert!(kept.len() >= 4, "the README lists the kept files");
    kept
}

fn sha256(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Every earlier version of `wit/released/` but the current one has kept
/// policies, each the very file the README lists (not rebuilt), and the
/// host says which contract each was built against.
#[test]
fn every_earlier_contract_has_its_kept_policies_and_the_host_names_their_contract() {
    let kept = kept();
    let current = std::fs::read_to_string(workspace_root().join("wit/policy.wit")).unwrap();
    let mut released: Vec<String> = std::fs::read_dir(workspace_root().join("wit/released"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter_map(|name| name.strip_suffix(".wit").map(str::to_owned))
        .collect();
    released.sort();
    for version in &released {
        if current.contains(&format!("package policy-host:policy@{version};")) {
            continue;
        }
        for policy in ["example_policy.wasm", "manifest_policy.wasm"] {
            assert!(
                kept.iter()
                    .any(|k| &k.contract == version && k.file.ends_with(policy)),
                "no kept {policy} of contract {version}"
            );
        }
    }
    for k in &kept {
        assert_eq!(
            sha256(&k.file),
            k.sha256,
            "{} is not the file that was kept: kept policies are never rebuilt",
            k.file.display()
        );
        let out = host_command()
            .args(["inspect", "--json"])
            .arg(&k.file)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        let info: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(info["world"], "policy-host:policy/policy", "{info:#}");
        assert_eq!(info["contract"], k.contract.as_str(), "{info:#}");
        assert_eq!(info["problem"], Value::Null, "{info:#}");
    }
}

/// Puts `unit` (installed on first use) in the given state, whatever an
/// earlier run left it in.
fn reset(m: &Machine, unit: &str, running: bool, enabled: bool) {
    if m.sandbox.is_enabled(unit).is_empty() {
        m.service(unit, running, enabled);
        return;
    }
    m.sandbox
        .systemctl_ok(&[if running { "start" } else { "stop" }, "--", unit]);
    m.sandbox
        .systemctl_ok(&[if enabled { "enable" } else { "disable" }, "--", unit]);
    assert_eq!(m.state(unit), state(running, enabled));
}

/// The example policy's units, as a fresh machine has them.
fn fresh_example_units(m: &Machine) {
    reset(m, "httpd", false, false);
    reset(m, "legacy-ftpd", true, true);
    reset(m, "metrics-agent", false, false);
}

const MANIFEST: &str = "\
- service:
    - kept-a:
        ensure: running
        enable: true
    - kept-b:
        ensure: stopped
        enable: false
";

/// Runs `policy` on a fresh machine: it converges (exit 2, a success),
/// then a second run has nothing to do (exit 0, no change).
fn converges_then_nothing_to_do(m: &Machine, policy: &Path, label: &str) {
    let manifest = policy.to_string_lossy().contains("manifest");
    let settings = manifest.then_some(MANIFEST);
    if manifest {
        reset(m, "kept-a", false, false);
        reset(m, "kept-b", true, true);
    } else {
        fresh_example_units(m);
    }
    let args = ["--json", "--detailed-exitcodes"];
    let first = m.run_policy(policy, settings, &args);
    assert_eq!(first.code, 2, "{label}: converges: {first:?}");
    let report = first.report();
    assert_eq!(report["summary"]["success"], true, "{label}: {report:#}");
    if manifest {
        assert_eq!(m.state("kept-a"), state(true, true), "{label}");
        assert_eq!(m.state("kept-b"), state(false, false), "{label}");
    } else {
        assert_eq!(m.state("httpd"), state(true, true), "{label}");
        assert_eq!(m.state("legacy-ftpd"), state(false, false), "{label}");
        assert_eq!(m.sandbox.is_active("metrics-agent"), "active", "{label}");
    }
    let second = m.run_policy(policy, settings, &args);
    assert_eq!(second.code, 0, "{label}: nothing to do: {second:?}");
    let report = second.report();
    assert_eq!(mutating_calls(&report), Vec::<String>::new(), "{label}");
    assert_eq!(report["summary"]["changed"], 0, "{label}: {report:#}");
    assert_eq!(report["summary"]["success"], true, "{label}: {report:#}");
}

/// The kept 0.4.0 and 0.5.0 policies, and the current ones built now, run on
/// this host against a real systemd: each converges a fresh machine, then
/// has nothing to do.
#[e2e_test(requires = "root, systemd")]
fn the_kept_policies_of_every_earlier_contract_converge_then_have_nothing_to_do() {
    let m = machine();
    for k in kept() {
        let policy = build::signed_copy(&k.file, &format!("kept-{}", k.contract));
        converges_then_nothing_to_do(
            &m,
            &policy,
            &format!("{} @{}", k.file.display(), k.contract),
        );
    }
    for package in ["example-policy", "manifest-policy"] {
        // Signed after the kept ones of the same name, as a rebuilt policy
        // is: the rollback record accepts it.
        let policy = build::signed_copy(&build::policy_wasm(package), "current");
        converges_then_nothing_to_do(&m, &policy, &format!("{package} (current contract)"));
    }
}

/// A policy built against a contract newer than this host (the kept 0.5.0
/// example, its imports renamed to @0.9.0) is refused before anything runs,
/// and the refusal says to upgrade the host first.
#[e2e_test(requires = "root, systemd")]
fn a_policy_of_a_newer_contract_is_refused_and_says_to_upgrade_the_host() {
    let kept = kept();
    let source = kept
        .iter()
        .find(|k| k.contract == "0.5.0" && k.file.ends_with("example_policy.wasm"))
        .expect("the kept 0.5.0 example");
    let bytes = std::fs::read(&source.file).unwrap();
    let newer = replace_all(&bytes, b"@0.5.0", b"@0.9.0");
    assert!(newer != bytes, "the component names its contract");
    let dir = tempfile::tempdir_in(build::target_dir()).unwrap();
    let renamed = dir.path().join("newer_policy.wasm");
    std::fs::write(&renamed, &newer).unwrap();
    let policy = build::signed_copy(&renamed, "newer-contract");

    let m = machine();
    fresh_example_units(&m);
    let run = m.run_policy(&policy, None, &["--json"]);
    assert_ne!(run.code, 0, "{run:?}");
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(
        said.contains("policy-host:policy@0.9.0")
            && said.contains("upgrade the host to one that speaks @0.9.0 or later"),
        "{said}"
    );
    // Nothing was changed on its behalf.
    assert_eq!(m.state("httpd"), state(false, false));
    assert_eq!(m.state("legacy-ftpd"), state(true, true));
}

fn replace_all(haystack: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    assert_eq!(from.len(), to.len(), "the component's layout must not move");
    let mut out = haystack.to_vec();
    let mut i = 0;
    while i + from.len() <= out.len() {
        if &out[i..i + from.len()] == from {
            out[i..i + from.len()].copy_from_slice(to);
            i += from.len();
        } else {
            i += 1;
        }
    }
    out
}
