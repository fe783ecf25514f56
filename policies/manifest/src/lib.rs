//! The built-in manifest policy: `host run manifest.wasm --settings site.yaml`
//! applies a manifest in the YAML format of docs/service-type.md (or the same structure as
//! JSON) without writing any Rust.

use guest_sdk::prelude::*;

/// Reads the manifest from the settings, for this machine (entries whose
/// `when` does not match its facts are left out, and reported); running
/// without settings is an error, because an empty desired state is almost
/// certainly a mistake.
pub fn manifest(ctx: &Context) -> Result<Policy, PolicyError> {
    let text = ctx
        .settings()
        .ok_or("no manifest given: run with --settings FILE (YAML or JSON)")?;
    Ok(guest_sdk::manifest::parse_manifest_for(text, &ctx.facts())?)
}

guest_sdk::export_policy!(manifest);

#[cfg(test)]
mod tests {
    use super::*;

    const SITE: &str = "\
- service:
    - db:
        ensure: running
        enable: true
    - web:
        ensure: running
        subscribe:
          - service#db
    - old:
        ensure: stopped
";

    #[test]
    fn applies_the_manifest_given_as_settings() {
        let mut system = SimulatedSystem::new()
            .with_unit("db", UnitState::stopped())
            .with_unit("web", UnitState::running())
            .with_unit("old", UnitState::running().enabled());
        let report = guest_sdk::run(
            manifest,
            &mut system,
            &RunOptions::default().with_settings(SITE),
        );
        assert!(report.succeeded(), "{report:#?}");
        assert_eq!(
            system.mutating_calls(),
            ["start db", "enable db", "restart web", "stop old"],
            "web is restarted because db, which it subscribes to, changed"
        );
    }

    #[test]
    fn entries_for_other_machines_are_left_out_and_said() {
        let site = "- service:\n    - web:\n        when: { role: web }\n    - db:\n        when: { role: db }\n";
        let mut system = SimulatedSystem::new()
            .with_fact("role", "db")
            .with_unit("web", UnitState::stopped())
            .with_unit("db", UnitState::stopped());
        let report = guest_sdk::run(
            manifest,
            &mut system,
            &RunOptions::default().with_settings(site),
        );
        assert_eq!(system.mutating_calls(), ["start db"]);
        assert_eq!(
            report.why_left_out("service#web"),
            Some("when role = web (this machine: db)")
        );
    }

    #[test]
    fn missing_settings_is_a_policy_error_and_nothing_runs() {
        let mut system = SimulatedSystem::new().with_unit("db", UnitState::stopped());
        let report = guest_sdk::run(manifest, &mut system, &RunOptions::default());
        assert_eq!(report.errors.len(), 1);
        assert!(
            report.errors[0].contains("--settings"),
            "{:?}",
            report.errors
        );
        assert!(system.calls().is_empty());
    }

    #[test]
    fn malformed_manifest_is_reported_with_its_line() {
        let mut system = SimulatedSystem::new();
        let report = guest_sdk::run(
            manifest,
            &mut system,
            &RunOptions::default().with_settings("- service:\n    - db:\n        ensure: up\n"),
        );
        assert!(report.errors[0].contains("line 3"), "{:?}", report.errors);
        assert!(system.calls().is_empty());
    }
}
