//! The run-time half of `#[e2e_test(requires = "...")]` (the macro is the
//! compile-time half): a test that runs on a machine lacking what it
//! requires fails at once, naming it and how to get it.

#[path = "../macros/src/requirement.rs"]
mod requirement;

pub use policy_host_e2e_macros::e2e_test;

/// Panics naming every requirement of `names` this machine lacks.
#[track_caller]
pub fn check(names: &[&str]) {
    let missing: Vec<String> = names
        .iter()
        .filter_map(|name| match requirement::missing(name) {
            Ok(None) => None,
            Ok(Some(how)) => Some(format!("{name} ({how})")),
            Err(unknown) => Some(unknown),
        })
        .collect();
    assert!(
        missing.is_empty(),
        "this test requires what this machine lacks: {}",
        missing.join(", ")
    );
}

#[cfg(test)]
mod tests {
    use super::requirement::{missing, KNOWN};

    #[test]
    fn every_known_requirement_is_detected_and_an_unknown_one_is_named() {
        for (name, _) in KNOWN {
            // Detected one way or the other, never the unreachable arm.
            let _ = missing(name).unwrap();
        }
        let error = missing("docker").unwrap_err();
        assert!(
            error.contains("\"docker\"") && error.contains("docker-registry"),
            "{error}"
        );
    }

    #[test]
    fn a_program_on_path_is_found_and_one_that_is_not_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        let empty = Some(dir.path().as_os_str());
        assert_eq!(
            super::requirement::missing_in("minisign", empty).unwrap(),
            Some("apt-get install minisign")
        );
        let program = dir.path().join("minisign");
        std::fs::write(&program, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(
            super::requirement::missing_in("minisign", empty).unwrap(),
            None
        );
        // Not executable: not a program.
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(super::requirement::missing_in("minisign", empty)
            .unwrap()
            .is_some());
    }
}
