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

/// One unit for the whole fleet, an entry per role: `app` is stopped on
/// database machines and runs on web ones.
const ONE_UNIT_PER_ROLE: &str = "\
- service:
    - app:
        ensure: stopped
        when: { role: db }
    - app:
        ensure: running
        when: { role: web }
";

#[test]
fn one_unit_with_an_entry_per_role_is_applied_once_and_its_other_entry_says_which_applied() {
    for (role, other, entry, found, call) in [
        ("web", "db", 2, UnitState::stopped(), "start app"),
        ("db", "web", 1, UnitState::running(), "stop app"),
    ] {
        for noop in [true, false] {
            let options = if noop {
                RunOptions::noop()
            } else {
                RunOptions::default()
            }
            .with_settings(ONE_UNIT_PER_ROLE);
            let mut system = SimulatedSystem::new()
                .with_fact("role", role)
                .with_unit("app", found);
            let report = guest_sdk::run(manifest, &mut system, &options);
            report.assert_converged();
            if noop {
                assert!(system.mutating_calls().is_empty(), "{role}");
            } else {
                system.assert_mutating_calls(&[call]);
            }
            // What was left out, compared with what was applied: the one
            // unit applied is left out only by its other entry, which says
            // which entry applied it here.
            let applied: Vec<&str> = report.events.iter().map(|e| e.resource.as_str()).collect();
            assert_eq!(applied, ["service#app"], "{role}");
            let left: Vec<(&str, &str)> = report
                .left_out
                .iter()
                .map(|l| (l.resource.as_str(), l.why.as_str()))
                .collect();
            assert_eq!(
                left,
                [(
                    "service#app",
                    format!(
                        "when role = {other} (this machine: {role}); app is applied here by \
                         item 1's entry {entry} (when role = {role})"
                    )
                    .as_str()
                )],
                "{role}, noop: {noop}"
            );
        }
    }
}
