//! The service type's behaviour, against the simulated system: every row of
//! the seed's idempotency table, every subscribe special case, noop mode,
//! verification of the final state, and policy validation.

use guest_sdk::prelude::*;
use guest_sdk::{apply, Event};

fn one(service: Service) -> Policy {
    Policy::new().service(service)
}

/// Applies `policy` to a system holding `web` in `state`; returns the event and the system.
fn run_web(service: Service, state: UnitState, options: &RunOptions) -> (Event, SimulatedSystem) {
    let mut system = SimulatedSystem::new().with_unit("web", state);
    let report = apply(&one(service), &mut system, options);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    (report.events[0].clone(), system)
}

#[test]
fn idempotency_table_row_by_row() {
    let running = UnitState::running();
    let stopped = UnitState::stopped();
    // (desired service, current state, expected mutating calls)
    let rows: Vec<(&str, Service, UnitState, Vec<&str>)> = vec![
        (
            "running/running",
            Service::new("web").running(),
            running,
            vec![],
        ),
        (
            "running/stopped",
            Service::new("web").running(),
            stopped,
            vec!["start web"],
        ),
        (
            "stopped/stopped",
            Service::new("web").stopped(),
            stopped,
            vec![],
        ),
        (
            "stopped/running",
            Service::new("web").stopped(),
            running,
            vec!["stop web"],
        ),
        (
            "enable:true/enabled",
            Service::new("web").enable(true),
            running.enabled(),
            vec![],
        ),
        (
            "enable:true/disabled",
            Service::new("web").enable(true),
            running.disabled(),
            vec!["enable web"],
        ),
        (
            "enable:false/enabled",
            Service::new("web").enable(false),
            running.enabled(),
            vec!["disable web"],
        ),
        (
            "enable:false/disabled",
            Service::new("web").enable(false),
            running.disabled(),
            vec![],
        ),
        (
            "enable:nil/enabled",
            Service::new("web"),
            running.enabled(),
            vec![],
        ),
        (
            "enable:nil/disabled",
            Service::new("web"),
            running.disabled(),
            vec![],
        ),
    ];
    for (row, service, state, expected) in rows {
        let (event, system) = run_web(service, state, &RunOptions::default());
        assert_eq!(system.mutating_calls(), expected, "row {row}");
        assert_eq!(event.changed, !expected.is_empty(), "row {row}: changed");
        assert!(!event.failed, "row {row}: {:?}", event.errors);
        let status_calls = system
            .calls()
            .iter()
            .filter(|c| c.operation == Operation::Status)
            .count();
        let expected_status = if expected.is_empty() { 1 } else { 2 };
        assert_eq!(
            status_calls, expected_status,
            "row {row}: status is re-queried only after a change"
        );
    }
}

#[test]
fn ensure_defaults_to_running() {
    let (event, system) = run_web(
        Service::new("web"),
        UnitState::stopped(),
        &RunOptions::default(),
    );
    assert_eq!(system.mutating_calls(), ["start web"]);
    assert_eq!(event.requested.ensure, Ensure::Running);
    assert_eq!(event.requested.enable, None);
}

#[test]
fn running_state_is_applied_before_enabled_state() {
    let (event, system) = run_web(
        Service::new("web").stopped().enable(false),
        UnitState::running().enabled(),
        &RunOptions::default(),
    );
    assert_eq!(system.mutating_calls(), ["stop web", "disable web"]);
    assert_eq!(event.actions, [Action::Stopped, Action::Disabled]);
    let final_state = event.final_state.unwrap();
    assert_eq!(
        (final_state.ensure, final_state.enabled),
        (Ensure::Stopped, false)
    );
}

#[test]
fn subscribe_restarts_a_running_service_that_should_run() {
    let options = RunOptions::default().with_refreshed("file#/etc/web.conf");
    let (event, system) = run_web(
        Service::new("web").subscribe("file#/etc/web.conf"),
        UnitState::running(),
        &options,
    );
    assert_eq!(system.mutating_calls(), ["restart web"]);
    assert!(event.refreshed && event.changed);
    assert_eq!(event.actions, [Action::Restarted]);
}

#[test]
fn subscribe_starts_not_restarts_a_stopped_service_that_should_run() {
    let options = RunOptions::default().with_refreshed("file#/etc/web.conf");
    let (event, system) = run_web(
        Service::new("web").subscribe("file#/etc/web.conf"),
        UnitState::stopped(),
        &options,
    );
    assert_eq!(system.mutating_calls(), ["start web"]);
    assert!(!event.refreshed);
}

#[test]
fn subscribe_is_ignored_for_ensure_stopped() {
    let options = RunOptions::default().with_refreshed("file#/etc/web.conf");
    for state in [UnitState::stopped(), UnitState::running()] {
        let (event, system) = run_web(
            Service::new("web")
                .stopped()
                .subscribe("file#/etc/web.conf"),
            state,
            &options,
        );
        let expected: &[&str] = if state.running { &["stop web"] } else { &[] };
        assert_eq!(system.mutating_calls(), expected);
        assert!(!event.refreshed);
    }
}

#[test]
fn unchanged_subscription_does_not_restart() {
    let options = RunOptions::default().with_refreshed("file#/etc/other.conf");
    let (_, system) = run_web(
        Service::new("web").subscribe("file#/etc/web.conf"),
        UnitState::running(),
        &options,
    );
    assert!(system.mutating_calls().is_empty());
}

#[test]
fn service_changed_earlier_in_the_run_triggers_its_subscribers() {
    let policy = Policy::new()
        .service(Service::new("db").enable(true))
        .service(Service::new("web").subscribe("service#db"))
        .service(Service::new("cache").subscribe("service#web"));
    let mut system = SimulatedSystem::new()
        .with_unit("db", UnitState::running().disabled())
        .with_unit("web", UnitState::running())
        .with_unit("cache", UnitState::running());
    let report = apply(&policy, &mut system, &RunOptions::default());
    assert_eq!(
        system.mutating_calls(),
        ["enable db", "restart web", "restart cache"],
        "a restart counts as a change, so it propagates down the chain"
    );
    assert!(report.succeeded());
}

#[test]
fn unchanged_earlier_service_does_not_trigger() {
    let policy = Policy::new()
        .service(Service::new("db"))
        .service(Service::new("web").subscribe("service#db"));
    let mut system = SimulatedSystem::new()
        .with_unit("db", UnitState::running())
        .with_unit("web", UnitState::running());
    apply(&policy, &mut system, &RunOptions::default());
    assert!(system.mutating_calls().is_empty());
}

#[test]
fn subscription_to_a_later_service_is_rejected_before_anything_is_applied() {
    let policy = Policy::new()
        .service(Service::new("web").subscribe("service#db"))
        .service(Service::new("db"));
    let mut system = SimulatedSystem::new()
        .with_unit("db", UnitState::stopped())
        .with_unit("web", UnitState::stopped());
    let report = apply(&policy, &mut system, &RunOptions::default());
    assert!(report.events.is_empty());
    assert_eq!(report.errors.len(), 1);
    assert!(
        report.errors[0].contains("declared later"),
        "{:?}",
        report.errors
    );
    assert!(
        system.calls().is_empty(),
        "nothing may be queried or changed"
    );
}

#[test]
fn noop_queries_but_never_mutates_and_explains() {
    let cases: Vec<(Service, UnitState, Vec<&str>, &str)> = vec![
        (
            Service::new("web").enable(true),
            UnitState::stopped(),
            vec![],
            "Would have started, would have enabled",
        ),
        (
            Service::new("web").stopped().enable(false),
            UnitState::running().enabled(),
            vec![],
            "Would have stopped, would have disabled",
        ),
        (
            Service::new("web").subscribe("file#/etc/web.conf"),
            UnitState::running(),
            vec!["file#/etc/web.conf"],
            "Would have restarted via subscribe",
        ),
    ];
    for (service, state, refreshed, message) in cases {
        let mut options = RunOptions::noop();
        options.refreshed = refreshed.into_iter().map(String::from).collect();
        let (event, system) = run_web(service, state, &options);
        assert!(
            system.mutating_calls().is_empty(),
            "{message}: {:?}",
            system.call_log()
        );
        assert_eq!(system.call_log(), ["status web"], "{message}");
        assert_eq!(
            system.unit("web"),
            Some(state),
            "{message}: state unchanged"
        );
        assert!(event.noop && event.changed, "{message}");
        assert_eq!(event.noop_message.as_deref(), Some(message));
    }
}

#[test]
fn noop_with_nothing_to_do_is_unchanged_without_message() {
    let (event, _) = run_web(
        Service::new("web"),
        UnitState::running(),
        &RunOptions::noop(),
    );
    assert!(event.noop && !event.changed);
    assert_eq!(event.noop_message, None);
}

#[test]
fn noop_propagates_would_be_changes_to_subscribers() {
    let policy = Policy::new()
        .service(Service::new("db"))
        .service(Service::new("web").subscribe("service#db"));
    let mut system = SimulatedSystem::new()
        .with_unit("db", UnitState::stopped())
        .with_unit("web", UnitState::running());
    let report = apply(&policy, &mut system, &RunOptions::noop());
    assert_eq!(
        report.event("service#web").unwrap().noop_message.as_deref(),
        Some("Would have restarted via subscribe")
    );
    assert!(system.mutating_calls().is_empty());
}

#[test]
fn desired_state_not_reached_is_an_error_saying_what_and_found() {
    let mut system = SimulatedSystem::new()
        .with_unit("web", UnitState::stopped())
        .with_no_effect(Operation::Start, "web");
    let report = apply(
        &one(Service::new("web").enable(true)),
        &mut system,
        &RunOptions::default(),
    );
    let event = &report.events[0];
    assert!(event.failed);
    assert_eq!(
        event.errors,
        ["failed to reach desired state: expected running and enabled, found stopped and enabled"]
    );
    assert!(!report.succeeded());
}

#[test]
fn failing_call_fails_its_resource_but_not_the_others() {
    let policy = Policy::new()
        .service(Service::new("broken").enable(true))
        .service(Service::new("web"));
    let mut system = SimulatedSystem::new()
        .with_unit("broken", UnitState::stopped())
        .with_unit("web", UnitState::stopped())
        .with_failure(
            Operation::Start,
            "broken",
            ProviderError::CommandFailed("Job for broken.service failed".into()),
        );
    let report = apply(&policy, &mut system, &RunOptions::default());
    let broken = report.event("service#broken").unwrap();
    assert!(broken.failed && !broken.changed);
    assert_eq!(
        broken.errors,
        ["start broken: Job for broken.service failed"]
    );
    assert!(
        !system
            .mutating_calls()
            .contains(&"enable broken".to_owned()),
        "phase 2 is not attempted after phase 1 failed"
    );
    assert!(!report.event("service#web").unwrap().failed);
    assert!(system.mutating_calls().contains(&"start web".to_owned()));
    assert_eq!(report.failed_count(), 1);
}

#[test]
fn missing_unit_fails_with_not_found() {
    let mut system = SimulatedSystem::new();
    let report = apply(
        &one(Service::new("nosuch")),
        &mut system,
        &RunOptions::default(),
    );
    assert_eq!(
        report.events[0].errors,
        ["status of nosuch: service not found: nosuch"]
    );
    assert!(report.events[0].final_state.is_none());
}

#[test]
fn invalid_names_are_rejected_before_any_provider_call() {
    for name in ["app@instance", "app; rm -rf /", "-H", "a b", "x/y", ""] {
        let mut system = SimulatedSystem::new().with_unit("web", UnitState::stopped());
        let policy = Policy::new()
            .service(Service::new("web"))
            .service(Service::new(name));
        let report = apply(&policy, &mut system, &RunOptions::default());
        assert!(
            system.calls().is_empty(),
            "{name:?}: {:?}",
            system.call_log()
        );
        assert_eq!(report.errors.len(), 1, "{name:?}");
        assert!(
            report.errors[0].contains(&format!("{name:?}")),
            "{name:?}: {}",
            report.errors[0]
        );
    }
}

#[test]
fn malformed_refresh_reference_is_rejected() {
    let mut system = SimulatedSystem::new().with_unit("web", UnitState::running());
    let report = apply(
        &one(Service::new("web")),
        &mut system,
        &RunOptions::default().with_refreshed("no-hash"),
    );
    assert!(
        report.errors[0].contains("TYPE#NAME"),
        "{:?}",
        report.errors
    );
    assert!(system.calls().is_empty());
}

#[test]
fn policy_function_error_is_reported_and_nothing_applied() {
    let mut system = SimulatedSystem::new().with_unit("web", UnitState::stopped());
    let report = guest_sdk::run(
        |_ctx: &Context| -> Result<Policy, PolicyError> {
            Err("settings missing key `port`".into())
        },
        &mut system,
        &RunOptions::default(),
    );
    assert_eq!(report.errors, ["policy: settings missing key `port`"]);
    assert!(system.calls().is_empty());
}
