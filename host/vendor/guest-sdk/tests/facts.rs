//! Facts as a policy author tests them natively: one policy and one
//! manifest checked on each kind of machine with the simulated system.

use guest_sdk::prelude::*;

/// The built-in manifest policy, as `policies/manifest` writes it.
fn manifest(ctx: &Context) -> Result<Policy, PolicyError> {
    let text = ctx.settings().ok_or("no manifest")?;
    Ok(guest_sdk::manifest::parse_manifest_for(text, &ctx.facts())?)
}

const SITE: &str = "\
- service:
    - ssh:
    - nginx:
        when: { role: web }
        subscribe: [file#/etc/nginx/nginx.conf]
    - postgresql:
        when: { role: db }
";

fn machine(role: &str) -> SimulatedSystem {
    SimulatedSystem::new()
        .with_fact("role", role)
        .with_unit("ssh", UnitState::running())
        .with_unit("nginx", UnitState::stopped())
        .with_unit("postgresql", UnitState::stopped())
}

#[test]
fn each_machine_applies_its_part_and_reports_what_it_left_out() {
    let options = RunOptions::default().with_settings(SITE);
    let mut web = machine("web");
    let report = guest_sdk::run(manifest, &mut web, &options);
    report.assert_converged();
    web.assert_mutating_calls(&["start nginx"]);
    assert_eq!(
        report.why_left_out("service#postgresql"),
        Some("when role = db (this machine: web)")
    );
    assert!(report.event("service#postgresql").is_none());
    // Nothing was asked of a unit left out, not even its status.
    assert!(web
        .calls()
        .iter()
        .all(|c| !c.to_string().contains("postgresql")));

    let mut db = machine("db");
    let report = guest_sdk::run(manifest, &mut db, &options);
    db.assert_mutating_calls(&["start postgresql"]);
    assert_eq!(
        report.why_left_out("service#nginx"),
        Some("when role = web (this machine: db)")
    );
}

#[test]
fn a_noop_run_says_what_it_left_out_too() {
    let mut web = machine("web");
    let report = guest_sdk::run(manifest, &mut web, &RunOptions::noop().with_settings(SITE));
    assert!(web.mutating_calls().is_empty());
    assert_eq!(report.left_out.len(), 1);
    assert_eq!(report.left_out[0].resource, "service#postgresql");
}

#[test]
fn subscriptions_follow_the_facts() {
    let web = machine("web").facts();
    let declared = guest_sdk::subscriptions(manifest, Some(SITE), &web).unwrap();
    assert_eq!(declared.len(), 1);
    assert_eq!(declared[0].resource, "service#nginx");
    let db = machine("db").facts();
    assert!(guest_sdk::subscriptions(manifest, Some(SITE), &db)
        .unwrap()
        .is_empty());
}

#[test]
fn a_misspelt_fact_fails_the_run_before_anything_is_asked() {
    let mut web = machine("web");
    let report = guest_sdk::run(
        manifest,
        &mut web,
        &RunOptions::default()
            .with_settings("- service:\n    - nginx:\n        when: { rolle: web }\n"),
    );
    assert_eq!(report.errors.len(), 1, "{report:?}");
    assert!(
        report.errors[0].contains("`rolle` is not a fact"),
        "{}",
        report.errors[0]
    );
    assert!(web.calls().is_empty());
}

#[test]
fn the_hosts_facts_in_the_options_win_over_the_simulated_machine() {
    let seen = |ctx: &Context| -> Result<Policy, PolicyError> {
        let facts = ctx.facts();
        assert_eq!(ctx.fact("os.id"), Some("debian"), "the simulated machine's");
        assert_eq!(facts.os_version_id(), "13", "the options' over it");
        assert_eq!(facts.cpus(), Some(2));
        assert_eq!(facts.label("site"), Some("fra1"));
        assert_eq!(ctx.fact("nothing"), None);
        Ok(Policy::new())
    };
    let mut system = SimulatedSystem::new().with_fact("os.version_id", "12");
    let options = RunOptions::default()
        .with_fact("os.version_id", "13")
        .with_fact("site", "fra1");
    assert!(guest_sdk::run(seen, &mut system, &options).succeeded());
}
