//! The contract is a promise to every installed policy: a change to
//! `wit/policy.wit` bumps its version, and every version this host runs is
//! kept as released in `wit/released/` (the earlier ones generate the
//! bindings the host runs old policies with).

use std::path::{Path, PathBuf};

use policy_host::contract::ContractVersion;

fn wit_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit")
}

/// The declarations, without comments or layout: what a policy links against.
fn declarations(wit: &str) -> Vec<String> {
    wit.lines()
        .map(|line| line.split("//").next().unwrap_or("").trim())
        .filter(|line| !line.is_empty())
        .map(str::to_owned)
        .collect()
}

fn released(version: &str) -> String {
    let path = wit_dir().join("released").join(format!("{version}.wit"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}: every version the host runs is kept as released",
            path.display()
        )
    })
}

#[test]
fn a_change_to_the_contract_bumps_its_version() {
    let current = std::fs::read_to_string(wit_dir().join("policy.wit")).unwrap();
    let version = ContractVersion::CURRENT.as_str();
    assert!(
        current.contains(&format!("package policy-host:policy@{version};")),
        "wit/policy.wit's package version is not ContractVersion::CURRENT ({version})"
    );
    assert_eq!(
        declarations(&current),
        declarations(&released(version)),
        "wit/policy.wit differs from wit/released/{version}.wit, the contract released as \
         {version}: a change to the contract is a new version. Bump the package version, copy \
         the file to wit/released/NEW.wit, keep the example and manifest policies of the last \
         commit that spoke {version} in tests/fixtures/contracts/, and add {version}'s bindings \
         to host/src/contract/earlier.rs (a comment-only change needs none of this)"
    );
}

#[test]
fn every_version_the_host_runs_is_kept_as_released_and_nothing_else() {
    let mut kept: Vec<String> = std::fs::read_dir(wit_dir().join("released"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .map(|name| {
            name.strip_suffix(".wit")
                .unwrap_or_else(|| panic!("wit/released/{name} is not a .wit file"))
                .to_owned()
        })
        .collect();
    kept.sort();
    let mut runs: Vec<String> = ContractVersion::ALL
        .iter()
        .map(|v| v.as_str().to_owned())
        .collect();
    runs.sort();
    assert_eq!(kept, runs, "wit/released/ and ContractVersion::ALL");
    for version in &kept {
        assert!(
            released(version).contains(&format!("package policy-host:policy@{version};")),
            "wit/released/{version}.wit declares another version"
        );
    }
}
