use super::*;
use crate::import::declare::{LeftOut, Service as DeclaredService};

fn service(name: &str, ensure: DeclaredEnsure, enable: Option<bool>) -> DeclaredService {
    DeclaredService {
        name: name.into(),
        ensure,
        enable,
        subscribe: Vec::new(),
    }
}

/// The declaration a Python or JS policy would return for db, web and old.
fn site() -> Declaration {
    let mut web = service("web", DeclaredEnsure::Running, None);
    web.subscribe.push("service#db".into());
    Declaration {
        services: vec![
            service("db", DeclaredEnsure::Running, Some(true)),
            web,
            service("old", DeclaredEnsure::Stopped, Some(false)),
        ],
        left_out: vec![LeftOut {
            name: "cache".into(),
            why: "when role = cache (this machine: web)".into(),
        }],
    }
}

#[test]
fn a_declaration_is_applied_by_the_sdk_in_order_with_its_subscriptions() {
    let mut system = SimulatedSystem::new()
        .with_unit("db", UnitState::stopped())
        .with_unit("web", UnitState::running())
        .with_unit("old", UnitState::running().enabled());
    let report = guest_sdk::run(
        |_: &Context| Ok::<_, String>(policy_of(site())),
        &mut system,
        &RunOptions::default(),
    );
    assert!(report.succeeded(), "{report:#?}");
    assert_eq!(
        system.mutating_calls(),
        [
            "start db",
            "enable db",
            "restart web",
            "stop old",
            "disable old"
        ]
    );
    assert_eq!(
        report.why_left_out("service#cache"),
        Some("when role = cache (this machine: web)")
    );

    // The engine's idempotency: a second run changes nothing.
    system.clear_calls();
    let again = guest_sdk::run(
        |_: &Context| Ok::<_, String>(policy_of(site())),
        &mut system,
        &RunOptions::default(),
    );
    assert!(again.succeeded(), "{again:#?}");
    assert!(system.mutating_calls().is_empty(), "{:?}", system.calls());
}

#[test]
fn an_unset_enable_leaves_the_boot_setting_alone() {
    let declared = policy_of(Declaration {
        services: vec![service("web", DeclaredEnsure::Running, None)],
        left_out: vec![],
    });
    let mut system = SimulatedSystem::new().with_unit("web", UnitState::running().enabled());
    let report = guest_sdk::run(
        |_: &Context| Ok::<_, String>(declared.clone()),
        &mut system,
        &RunOptions::default(),
    );
    assert!(report.succeeded(), "{report:#?}");
    assert!(system.mutating_calls().is_empty());
    assert_eq!(report.events[0].requested.enable, None);
}

#[test]
fn a_bad_declaration_is_refused_whole_by_the_sdk_and_nothing_runs() {
    let mut bad = site();
    bad.services[0].name = "../etc/passwd".into();
    bad.services[1].subscribe = vec!["service#later".into(), "nohash".into()];
    bad.services
        .push(service("later", DeclaredEnsure::Running, None));
    let mut system = SimulatedSystem::new().with_unit("db", UnitState::stopped());
    let report = guest_sdk::run(
        |_: &Context| Ok::<_, String>(policy_of(bad)),
        &mut system,
        &RunOptions::default(),
    );
    assert!(system.calls().is_empty(), "{:?}", system.calls());
    assert_eq!(report.errors.len(), 3, "{:#?}", report.errors);
    assert!(report.errors[0].contains("service#../etc/passwd"));
    assert!(report.errors[1].contains("declared later"));
    assert!(report.errors[2].contains("expected TYPE#NAME"));
}

#[test]
fn a_long_error_is_cut_on_a_character_boundary_and_says_how_much_is_missing() {
    let short = "Traceback: ValueError".to_string();
    assert_eq!(bounded(short.clone()), short);
    let long = "é".repeat(ERROR_LIMIT); // two bytes each
    let cut = bounded(long.clone());
    assert!(cut.len() < long.len());
    assert!(cut.starts_with("éé"));
    assert!(
        cut.ends_with(&format!(
            "... ({} more bytes not shown)",
            long.len() - ERROR_LIMIT
        )),
        "{}",
        &cut[cut.len() - 60..]
    );
}
