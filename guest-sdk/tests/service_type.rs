//! The service type's behaviour, against the simulated system: every row of
//! the idempotency table (docs/service-type.md, Idempotency), every subscribe
//! special case, noop mode, verification of the final state, and policy
//! validation.
//!
//! The end-to-end suite (tests/tests/fake_systemctl.rs) keeps one run through
//! the `host` binary per behaviour family; the rows of each family are
//! asserted here, where they take microseconds.

use guest_sdk::prelude::*;
use guest_sdk::{apply, Event, FinalState};

fn one(service: Service) -> Policy {
    Policy::new().service(service)
}

fn final_state(running: bool, enabled: bool) -> FinalState {
    FinalState {
        ensure: if running {
            Ensure::Running
        } else {
            Ensure::Stopped
        },
        enabled,
    }
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
        // docs/service-type.md, Verification: `final` is what the last status
        // query found (the first one when nothing was done).
        let unit = system.unit("web").unwrap();
        assert_eq!(
            event.final_state,
            Some(final_state(unit.running, unit.enabled)),
            "row {row}: final state"
        );
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

/// docs/service-type.md, Files and packages the host watches: a `file#` or
/// `package#` reference the host found changed triggers only the service
/// it was found changed for, as the table says.
#[test]
fn a_watched_change_triggers_only_its_service() {
    let policy = Policy::new()
        .service(Service::new("web").subscribe("file#/etc/web.conf"))
        .service(Service::new("proxy").subscribe("file#/etc/web.conf"))
        .service(Service::new("db").subscribe("package#postgresql"));
    let mut system = SimulatedSystem::new()
        .with_unit("web", UnitState::running())
        .with_unit("proxy", UnitState::running())
        .with_unit("db", UnitState::stopped());
    // proxy restarted last time; web's restart failed and is retried; db
    // should run and is stopped: started, not restarted.
    let options = RunOptions::default()
        .with_changed("web", "file#/etc/web.conf")
        .with_changed("db", "package#postgresql");
    let report = apply(&policy, &mut system, &options);
    assert!(report.succeeded(), "{report:#?}");
    assert_eq!(system.mutating_calls(), ["restart web", "start db"]);
    assert!(report.events[0].refreshed);
    assert!(!report.events[1].changed);

    // A change the service does not subscribe to triggers nothing.
    let mut system = SimulatedSystem::new().with_unit("web", UnitState::running());
    let options = RunOptions::default().with_changed("web", "file#/etc/other.conf");
    apply(
        &one(Service::new("web").subscribe("file#/etc/web.conf")),
        &mut system,
        &options,
    );
    system.assert_no_mutating_calls();

    // Noop: the restart is told, nothing is done.
    let mut system = SimulatedSystem::new().with_unit("web", UnitState::running());
    let options = RunOptions::noop().with_changed("web", "file#/etc/web.conf");
    let report = apply(
        &one(Service::new("web").subscribe("file#/etc/web.conf")),
        &mut system,
        &options,
    );
    system.assert_no_mutating_calls();
    assert_eq!(
        report.events[0].noop_message.as_deref(),
        Some("Would have restarted via subscribe")
    );
}

/// A reference the host could not read never keeps its service from its
/// desired state: the service is applied as usual (started here, the
/// unreadable reference triggering nothing), then its event fails with the
/// host's reason, so that the host retries it next run. The other services
/// apply.
#[test]
fn an_unreadable_watched_reference_fails_its_service_after_applying_it() {
    let policy = Policy::new()
        .service(Service::new("web").enable(true).subscribe("file#/etc/pipe"))
        .service(Service::new("db"));
    let mut system = SimulatedSystem::new()
        .with_unit("web", UnitState::stopped())
        .with_unit("db", UnitState::stopped());
    let options = RunOptions::default()
        .with_unreadable("web", "file#/etc/pipe: /etc/pipe is a FIFO; only regular files, directories and symbolic links are read");
    let report = apply(&policy, &mut system, &options);
    let web = &report.events[0];
    assert!(web.failed);
    assert_eq!(web.actions, [Action::Started, Action::Enabled]);
    assert_eq!(web.errors.len(), 1, "{:?}", web.errors);
    assert!(web.errors[0].contains("is a FIFO"));
    assert!(!report.events[1].failed);
    // Started units are finished (settle window, phase two, verification)
    // after every service was begun.
    system.assert_calls(&[
        "status web",
        "start web",
        "status db",
        "start db",
        "status web",
        "enable web",
        "status web",
        "status db",
    ]);

    // Running already: nothing to do, no restart from the unreadable
    // reference, and still failed.
    let mut system = SimulatedSystem::new().with_unit("web", UnitState::running());
    let report = apply(
        &one(Service::new("web").subscribe("file#/etc/pipe")),
        &mut system,
        &RunOptions::default().with_unreadable("web", "file#/etc/pipe: is a FIFO"),
    );
    system.assert_no_mutating_calls();
    assert!(report.events[0].failed);
    assert!(report.events[0].actions.is_empty());

    // In noop mode too, what would be done is told, and the event fails.
    let mut system = SimulatedSystem::new().with_unit("web", UnitState::stopped());
    let report = apply(
        &one(Service::new("web").subscribe("file#/etc/pipe")),
        &mut system,
        &RunOptions::noop().with_unreadable("web", "file#/etc/pipe: is a FIFO"),
    );
    system.assert_no_mutating_calls();
    assert!(report.events[0].failed);
    assert_eq!(
        report.events[0].noop_message.as_deref(),
        Some("Would have started")
    );
}

#[test]
fn subscriptions_are_declared_from_the_same_policy_with_no_provider() {
    fn site(context: &Context<'_>) -> Result<Policy, String> {
        let conf = context.settings().unwrap_or("/etc/web.conf");
        Ok(Policy::new().service(Service::new("db")).service(
            Service::new("web")
                .subscribe(format!("file#{conf}"))
                .subscribe("service#db.service"),
        ))
    }
    let declared = guest_sdk::subscriptions(site, Some("/srv/web.conf"), &[]).unwrap();
    assert_eq!(declared.len(), 1, "db subscribes to nothing: {declared:?}");
    assert_eq!(declared[0].resource, "service#web");
    assert_eq!(
        declared[0].references,
        ["file#/srv/web.conf", "service#db.service"]
    );
    let error = guest_sdk::subscriptions(|_: &Context<'_>| Err::<Policy, _>("no site"), None, &[])
        .unwrap_err();
    assert_eq!(error, "policy: no site");
}

/// docs/service-type.md, Subscribe and refresh: `running` found stopped gets
/// a clean `start`, not a restart, and the event is not `refreshed`.
#[test]
fn subscribe_starts_not_restarts_a_stopped_service_that_should_run() {
    let options = RunOptions::default().with_refreshed("file#/etc/web.conf");
    for state in [UnitState::stopped(), UnitState::stopped().enabled()] {
        let (event, system) = run_web(
            Service::new("web").subscribe("file#/etc/web.conf"),
            state,
            &options,
        );
        assert_eq!(system.mutating_calls(), ["start web"], "{state:?}");
        assert!(event.changed && !event.refreshed, "{state:?}: {event:?}");
        assert_eq!(event.actions, [Action::Started], "{state:?}");
    }
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
        assert_eq!(event.changed, state.running, "{state:?}");
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

/// docs/service-type.md, Subscribe and refresh and The two phases: the earlier
/// service makes both its changes, then the subscriber restarts; once the
/// machine has converged, nothing changes, so nothing restarts.
#[test]
fn subscriber_restarts_after_an_earlier_change_and_not_once_converged() {
    let policy = Policy::new()
        .service(Service::new("db").running().enable(true))
        .service(
            Service::new("web")
                .running()
                .subscribe("file#/etc/web.conf")
                .subscribe("service#db"),
        );
    let mut system = SimulatedSystem::new()
        .with_unit("db", UnitState::stopped().disabled())
        .with_unit("web", UnitState::running().enabled());
    let report = apply(&policy, &mut system, &RunOptions::default());
    assert!(report.succeeded(), "{report:#?}");
    system.assert_mutating_calls(&["start db", "enable db", "restart web"]);
    let web = report.event("service#web").unwrap();
    assert!(web.refreshed && web.changed, "{web:?}");
    assert_eq!(web.actions, [Action::Restarted]);

    system.clear_calls();
    let report = apply(&policy, &mut system, &RunOptions::default());
    system.assert_no_mutating_calls();
    assert_eq!(report.changed_count(), 0);
    assert!(!report.event("service#web").unwrap().refreshed);
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
    assert_eq!(
        report.errors,
        ["service#web: subscribes to service#db, which is declared later; declare service#db first"]
    );
    assert!(!report.succeeded());
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

/// docs/service-type.md, Noop mode and its messages: a service with nothing
/// to do has no message.
#[test]
fn noop_with_nothing_to_do_is_unchanged_without_message() {
    for (service, state) in [
        (Service::new("web"), UnitState::running()),
        (
            Service::new("web").enable(true),
            UnitState::running().enabled(),
        ),
    ] {
        let (event, system) = run_web(service, state, &RunOptions::noop());
        assert!(event.noop && !event.changed, "{event:?}");
        assert_eq!(event.noop_message, None);
        assert!(event.actions.is_empty());
        system.assert_calls(&["status web"]);
    }
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

/// docs/service-type.md, Verification: a `start` that exits 0 but leaves the
/// unit stopped (a `Type=simple` unit whose program exits at once) fails the
/// service, naming what was expected (`and enabled` only when `enable` is
/// set) and what the second status query found, which is also `final`.
#[test]
fn desired_state_not_reached_is_an_error_saying_what_and_found() {
    let rows = [
        (
            Service::new("web").enable(true),
            UnitState::stopped(),
            vec!["start web", "enable web"],
            vec![Action::Started, Action::Enabled],
            "failed to reach desired state: expected running and enabled, found stopped and enabled",
        ),
        (
            Service::new("web").running(),
            UnitState::stopped().enabled(),
            vec!["start web"],
            vec![Action::Started],
            "failed to reach desired state: expected running, found stopped and enabled",
        ),
    ];
    for (service, state, calls, actions, error) in rows {
        let mut system = SimulatedSystem::new()
            .with_unit("web", state)
            .with_no_effect(Operation::Start, "web");
        let report = apply(&one(service), &mut system, &RunOptions::default());
        let event = &report.events[0];
        assert_eq!(system.mutating_calls(), calls);
        assert!(event.failed && event.changed, "{event:?}");
        assert_eq!(event.actions, actions);
        assert_eq!(event.errors, [error]);
        assert_eq!(event.final_state, Some(final_state(false, true)));
        assert!(!report.succeeded());
    }
}

/// docs/service-type.md, The two phases: a failed change skips that
/// service's remaining change, its status is queried again for the report,
/// and the services before and after it are applied as usual.
#[test]
fn failing_call_fails_its_resource_but_not_the_others() {
    let policy = Policy::new()
        .service(Service::new("a").enable(true))
        .service(Service::new("broken").enable(true))
        .service(Service::new("c").stopped().enable(false));
    let mut system = SimulatedSystem::new()
        .with_unit("a", UnitState::stopped())
        .with_unit("broken", UnitState::stopped())
        .with_unit("c", UnitState::running().enabled())
        .with_failure(
            Operation::Start,
            "broken",
            ProviderError::CommandFailed("Job for broken.service failed".into()),
        );
    let report = apply(&policy, &mut system, &RunOptions::default());
    system.assert_calls(&[
        "status a",
        "start a",
        "status broken",
        "start broken",
        // no `enable broken`: phase 2 is not attempted after phase 1 failed
        "status broken",
        "status c",
        "stop c",
        "disable c",
        "status c",
        // a start counts once the unit stayed up: the status that says so
        // comes after the others were begun, then phase 2
        "status a",
        "enable a",
        "status a",
    ]);
    let broken = report.event("service#broken").unwrap();
    assert!(broken.failed && !broken.changed);
    assert!(broken.actions.is_empty());
    assert_eq!(
        broken.errors,
        [
            "start broken: Job for broken.service failed",
            "failed to reach desired state: expected running and enabled, found stopped and disabled"
        ],
        "why the start failed, then what the verification found"
    );
    assert_eq!(broken.final_state, Some(final_state(false, false)));
    for name in ["service#a", "service#c"] {
        let event = report.event(name).unwrap();
        assert!(event.changed && !event.failed, "{event:?}");
    }
    assert_eq!(system.unit("c"), Some(UnitState::stopped().disabled()));
    assert_eq!(report.failed_count(), 1);
    assert_eq!(report.changed_count(), 2);
    assert!(!report.succeeded());
}

/// docs/service-type.md, The two phases: a failing first status query fails
/// the service with `status of NAME: ERROR` and nothing is changed; the
/// errors are the host's messages for what systemctl printed
/// (docs/service-type.md, Reading status: is-active / is-enabled).
#[test]
fn failing_status_query_fails_the_service_and_changes_nothing() {
    for message in [
        "invalid systemctl is-active output \"bogus-state\"",
        "invalid systemctl is-enabled output \"sort-of\"",
    ] {
        let mut system = SimulatedSystem::new()
            .with_unit("web", UnitState::stopped())
            .with_failure(
                Operation::Status,
                "web",
                ProviderError::CommandFailed(message.into()),
            );
        let report = apply(
            &one(Service::new("web").enable(true)),
            &mut system,
            &RunOptions::default(),
        );
        system.assert_calls(&["status web"]);
        let event = &report.events[0];
        assert!(event.failed && !event.changed, "{event:?}");
        assert_eq!(event.errors, [format!("status of web: {message}")]);
        assert_eq!(event.final_state, None);
        assert_eq!(system.unit("web"), Some(UnitState::stopped()));
    }
}

/// docs/service-type.md, Errors the provider returns: a missing unit is
/// `service not found`; it is not started, and the next service still is.
#[test]
fn missing_unit_fails_with_not_found() {
    let mut system = SimulatedSystem::new().with_unit("web", UnitState::stopped());
    let report = apply(
        &Policy::new()
            .service(Service::new("nosuch").running())
            .service(Service::new("web").running()),
        &mut system,
        &RunOptions::default(),
    );
    system.assert_mutating_calls(&["start web"]);
    let nosuch = report.event("service#nosuch").unwrap();
    assert!(nosuch.failed && !nosuch.changed);
    assert_eq!(
        nosuch.errors,
        ["status of nosuch: service not found: nosuch"]
    );
    assert!(nosuch.final_state.is_none());
    assert!(!report.event("service#web").unwrap().failed);
    assert_eq!(report.failed_count(), 1);
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

/// docs/service-type.md, The two phases and Service names: every invalid
/// name of a policy is reported, quoted, and nothing is queried, not even the
/// valid service declared before them.
#[test]
fn every_invalid_name_is_reported_before_any_provider_call() {
    let policy = Policy::new()
        .service(Service::new("web").running())
        .service(Service::new("app@x").running())
        .service(Service::new("-H").running());
    let mut system = SimulatedSystem::new().with_unit("web", UnitState::stopped());
    let report = apply(&policy, &mut system, &RunOptions::default());
    system.assert_calls(&[]);
    assert!(report.events.is_empty());
    assert_eq!(report.errors.len(), 2, "{:#?}", report.errors);
    assert!(
        report.errors[0].starts_with("service#app@x: invalid service name \"app@x\": "),
        "{}",
        report.errors[0]
    );
    assert!(
        report.errors[1].starts_with("service#-H: invalid service name \"-H\": "),
        "{}",
        report.errors[1]
    );
    assert!(!report.succeeded());
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

// ------------------------------------------------- names, as systemd compares them

/// docs/service-type.md, Kinds of units and names: `sfx2` and `sfx2.service`
/// are one unit, so declaring both (issue: started, then stopped, on every
/// run) is rejected before anything is queried, naming both declarations.
#[test]
fn one_unit_declared_in_two_spellings_is_rejected_before_any_call() {
    let policy = Policy::new()
        .service(Service::new("sfx2").running())
        .service(Service::new("sfx2.service").stopped())
        .service(Service::new("db"))
        .service(Service::new("db"));
    let mut system = SimulatedSystem::new()
        .with_unit("sfx2", UnitState::stopped())
        .with_unit("db", UnitState::stopped());
    let report = apply(&policy, &mut system, &RunOptions::default());
    system.assert_calls(&[]);
    assert!(report.events.is_empty());
    assert_eq!(
        report.errors,
        [
            "service#sfx2.service is declared more than once: service#sfx2 (declaration 1) and \
             service#sfx2.service (declaration 2) are the same unit, sfx2.service; declare it once",
            "service#db is declared more than once: service#db (declaration 3) and service#db \
             (declaration 4) are the same unit, db.service; declare it once",
        ]
    );
    assert!(!report.succeeded());
}

/// docs/service-type.md, Kinds of units and names: a subscription, a
/// `--refresh` reference and an earlier change match a service in either
/// spelling; each name is still sent as declared.
#[test]
fn subscriptions_match_a_unit_in_either_spelling() {
    let policy = Policy::new()
        .service(Service::new("db.service").running())
        .service(Service::new("web").running().subscribe("service#db"))
        .service(
            Service::new("api.service")
                .running()
                .subscribe("service#cache.service"),
        );
    let mut system = SimulatedSystem::new()
        .with_unit("db", UnitState::stopped())
        .with_unit("web.service", UnitState::running())
        .with_unit("api", UnitState::running());
    let options = RunOptions::default().with_refreshed("service#cache");
    let report = apply(&policy, &mut system, &options);
    assert!(report.succeeded(), "{report:#?}");
    system.assert_mutating_calls(&["start db.service", "restart web", "restart api.service"]);
    assert!(report.event("service#web").unwrap().refreshed);
    assert!(report.event("service#api.service").unwrap().refreshed);

    // A self-subscription in the other spelling is still one to itself.
    let report = apply(
        &one(Service::new("web").subscribe("service#web.service")),
        &mut system,
        &RunOptions::default(),
    );
    assert_eq!(
        report.errors,
        ["service#web: subscribes to service#web.service, which is itself"]
    );
}

// ------------------------------------------------------------- kinds of units

/// The error for `enable: false` on `web`, found `word`.
fn cannot_disable(word: &str, kind: &str, why: &str) -> String {
    format!(
        "enable: false cannot be applied to web: it is {kind} (systemctl is-enabled says \
         \"{word}\"). {why} Drop enable from this service, or mask the unit outside the policy \
         (systemctl mask web.service) if it must never start. Nothing was changed."
    )
}

/// docs/service-type.md, Kinds of units: `enable: false` on a unit whose boot
/// state `disable` cannot change fails after the first status query, before
/// any change (the running state included), saying what the unit is and
/// what to do, in a real run and in a noop run alike.
#[test]
fn enable_false_on_a_unit_disable_cannot_change_fails_before_any_change() {
    let rows = [
        (
            "static",
            "a static unit",
            "It has no [Install] section, so disable has nothing to remove, and it starts \
             whenever another unit needs it.",
        ),
        (
            "indirect",
            "an indirect unit",
            "It is not enabled itself: its [Install] section only names other units (Also=), \
             or another name or instance of it is enabled; disable would disable those instead.",
        ),
        (
            "generated",
            "a generated unit",
            "A systemd generator writes it at boot and on every daemon-reload, so disable has \
             nothing to remove.",
        ),
        (
            "transient",
            "a transient unit",
            "It was created at runtime (systemd-run) and has no unit file for disable to \
             change; it disappears once it stops.",
        ),
    ];
    for (word, kind, why) in rows {
        for options in [RunOptions::default(), RunOptions::noop()] {
            let state = UnitState::running().with_enabled_word(word);
            let (event, system) =
                run_web(Service::new("web").stopped().enable(false), state, &options);
            system.assert_calls(&["status web"]);
            assert!(event.failed && !event.changed, "{word}: {event:?}");
            assert!(event.actions.is_empty() && event.noop_message.is_none());
            assert_eq!(event.errors, [cannot_disable(word, kind, why)], "{word}");
            assert_eq!(event.final_state, Some(final_state(true, true)), "{word}");
            assert_eq!(system.unit("web"), Some(state), "{word}: unchanged");
        }
    }
}

/// docs/service-type.md, Kinds of units: `enable: false` on an alias names
/// the alias and says how to find the unit it points to; `disable` (which
/// would disable that unit and delete the alias) is never called.
#[test]
fn enable_false_on_an_alias_fails_naming_it_and_how_to_find_its_unit() {
    let state = UnitState::running().with_enabled_word("alias");
    let mut system = SimulatedSystem::new().with_unit("ali2", state);
    let report = apply(
        &one(Service::new("ali2").enable(false)),
        &mut system,
        &RunOptions::default(),
    );
    system.assert_calls(&["status ali2"]);
    let event = &report.events[0];
    assert!(event.failed && !event.changed);
    assert_eq!(
        event.errors,
        [
            "enable: false cannot be applied to ali2: it is an alias of another unit (systemctl \
          is-enabled says \"alias\"). Disabling it would disable the unit it names and delete \
          the alias. Manage the unit it points to instead: systemctl show -p Id ali2 gives its \
          name. Nothing was changed."
        ]
    );
    assert_eq!(system.unit("ali2"), Some(state));
}

/// docs/service-type.md, Kinds of units: without `enable: false` the words
/// that count as enabled need nothing, the running state is managed as
/// usual, and a second run changes nothing.
#[test]
fn units_disable_cannot_change_are_managed_without_enable_false() {
    for word in ["static", "indirect", "generated", "transient", "alias"] {
        for enable in [None, Some(true)] {
            let service = Service::new("web").running().enable_option(enable);
            let mut system = SimulatedSystem::new()
                .with_unit("web", UnitState::stopped().with_enabled_word(word));
            let report = apply(&one(service.clone()), &mut system, &RunOptions::default());
            assert!(report.succeeded(), "{word} {enable:?}: {report:#?}");
            system.assert_mutating_calls(&["start web"]);

            system.clear_calls();
            let report = apply(&one(service), &mut system, &RunOptions::default());
            assert!(report.succeeded() && report.changed_count() == 0);
            system.assert_calls(&["status web"]);
        }
    }
}

/// docs/service-type.md, Kinds of units: `enable: false` on a unit enabled
/// at runtime only (`systemctl enable --runtime`) is one `disable` (the
/// host removes the runtime enablement too), verified `disabled`; the next
/// run changes nothing.
#[test]
fn enable_false_on_enabled_runtime_converges_and_is_verified() {
    let service = Service::new("web").stopped().enable(false);
    let (event, mut system) = run_web(
        service.clone(),
        UnitState::running().with_enabled_word("enabled-runtime"),
        &RunOptions::default(),
    );
    system.assert_calls(&["status web", "stop web", "disable web", "status web"]);
    assert!(event.changed && !event.failed, "{event:?}");
    assert_eq!(event.actions, [Action::Stopped, Action::Disabled]);
    assert_eq!(event.final_state, Some(final_state(false, false)));
    assert_eq!(system.unit("web"), Some(UnitState::stopped().disabled()));

    system.clear_calls();
    let report = apply(&one(service.clone()), &mut system, &RunOptions::default());
    assert!(report.succeeded() && report.changed_count() == 0);
    system.assert_calls(&["status web"]);

    // A disable that leaves it enabled-runtime fails verification, as any other.
    let mut system = SimulatedSystem::new()
        .with_unit(
            "web",
            UnitState::stopped().with_enabled_word("enabled-runtime"),
        )
        .with_no_effect(Operation::Disable, "web");
    let report = apply(&one(service), &mut system, &RunOptions::default());
    system.assert_calls(&["status web", "disable web", "status web"]);
    assert_eq!(
        report.events[0].errors,
        ["failed to reach desired state: expected stopped and disabled, found stopped and enabled"]
    );
}

/// docs/service-type.md, Kinds of units: a unit enabled in /etc and at
/// runtime reads `enabled`. The contract's `disable` is complete (the host
/// removes the runtime enablement too), so one `disable` is asked for and
/// verified; the policy never asks twice.
#[test]
fn a_unit_enabled_in_etc_and_at_runtime_is_disabled_by_one_disable() {
    let service = Service::new("web").running().enable(false);
    let mut system = SimulatedSystem::new().with_unit("web", UnitState::running().enabled());
    let report = apply(&one(service.clone()), &mut system, &RunOptions::default());
    assert!(report.succeeded(), "{report:#?}");
    system.assert_calls(&["status web", "disable web", "status web"]);
    let event = &report.events[0];
    assert_eq!(event.actions, [Action::Disabled]);
    assert_eq!(event.final_state, Some(final_state(true, false)));

    // A disable after which the unit still reads enabled-runtime (something
    // enabled it again) is a failure to reach the desired state, with no
    // second disable: the policy holds no rule of the host's.
    let mut system = SimulatedSystem::new()
        .with_unit("web", UnitState::running().enabled())
        .with_enabled_word_after(Operation::Disable, "web", "enabled-runtime");
    let report = apply(&one(service.clone()), &mut system, &RunOptions::default());
    system.assert_calls(&["status web", "disable web", "status web"]);
    assert_eq!(
        report.events[0].errors,
        ["failed to reach desired state: expected running and disabled, found running and enabled"]
    );

    let mut system = SimulatedSystem::new().with_unit("web", UnitState::running().disabled());
    apply(&one(service), &mut system, &RunOptions::default());
    system.assert_no_mutating_calls();
}

/// docs/service-type.md, Kinds of units: a transient unit is gone once it
/// stopped; after a successful `stop` that is `ensure: stopped` reached (no
/// final state: nothing is left to query). Missing before anything was done,
/// it is still "service not found".
#[test]
fn a_transient_unit_gone_after_its_stop_is_stopped() {
    let service = Service::new("web").stopped();
    let transient = UnitState::running().with_enabled_word("transient");
    let (noop, system) = run_web(service.clone(), transient, &RunOptions::noop());
    assert_eq!(noop.noop_message.as_deref(), Some("Would have stopped"));
    assert_eq!(system.unit("web"), Some(transient));

    let (event, mut system) = run_web(service.clone(), transient, &RunOptions::default());
    system.assert_calls(&["status web", "stop web", "status web"]);
    assert!(event.changed && !event.failed, "{event:?}");
    assert_eq!(event.actions, [Action::Stopped]);
    assert!(event.errors.is_empty());
    assert_eq!(event.final_state, None);
    assert_eq!(system.unit("web"), None);

    // The next run finds no unit before doing anything: as the design says.
    system.clear_calls();
    let report = apply(&one(service), &mut system, &RunOptions::default());
    system.assert_calls(&["status web"]);
    assert_eq!(
        report.events[0].errors,
        ["status of web: service not found: web"]
    );

    // Gone is not enabled: `enable: true` is not reached.
    let (event, _) = run_web(
        Service::new("web").stopped().enable(true),
        transient,
        &RunOptions::default(),
    );
    assert!(event.failed && event.changed, "{event:?}");
    assert_eq!(
        event.errors,
        [
            "failed to reach desired state: expected stopped and enabled, found no unit web: it \
          was removed when it stopped (a transient unit)"
        ]
    );
}

/// docs/service-type.md, Kinds of units: only a `stop` that succeeded makes
/// a missing unit count as stopped.
#[test]
fn a_unit_missing_after_a_start_or_a_failed_stop_is_not_stopped() {
    let mut system = SimulatedSystem::new();
    let report = apply(
        &one(Service::new("web").stopped()),
        &mut system,
        &RunOptions::default(),
    );
    assert_eq!(
        report.events[0].errors,
        ["status of web: service not found: web"]
    );

    let mut system = SimulatedSystem::new()
        .with_unit("web", UnitState::running().with_enabled_word("transient"))
        .with_failure(
            Operation::Stop,
            "web",
            ProviderError::CommandFailed("Job for web.service canceled.".into()),
        );
    let report = apply(
        &one(Service::new("web").stopped()),
        &mut system,
        &RunOptions::default(),
    );
    let event = &report.events[0];
    assert!(event.failed && !event.changed);
    assert_eq!(
        event.errors,
        [
            "stop web: Job for web.service canceled.",
            "failed to reach desired state: expected stopped, found running and enabled"
        ]
    );
}

/// docs/service-type.md, Kinds of units: `linked` and `masked` count as
/// disabled; `enable: false` needs nothing, `enable: true` enables a linked
/// unit, and a masked unit cannot be started (systemd refuses).
#[test]
fn linked_and_masked_units() {
    for word in ["linked", "linked-runtime", "masked", "masked-runtime"] {
        let (event, system) = run_web(
            Service::new("web").stopped().enable(false),
            UnitState::stopped().with_enabled_word(word),
            &RunOptions::default(),
        );
        assert!(!event.changed && !event.failed, "{word}: {event:?}");
        system.assert_calls(&["status web"]);
    }

    let (event, system) = run_web(
        Service::new("web").running().enable(true),
        UnitState::stopped().with_enabled_word("linked"),
        &RunOptions::default(),
    );
    assert!(event.changed && !event.failed, "{event:?}");
    system.assert_mutating_calls(&["start web", "enable web"]);
    assert_eq!(system.unit("web"), Some(UnitState::running().enabled()));

    let (event, system) = run_web(
        Service::new("web").running(),
        UnitState::stopped().with_enabled_word("masked"),
        &RunOptions::default(),
    );
    system.assert_mutating_calls(&["start web"]);
    assert_eq!(
        event.errors,
        [
            "start web: systemctl start --system -- web failed (exit status 1): Failed to start \
          web.service: Unit web.service is masked.",
            "failed to reach desired state: expected running, found stopped and disabled"
        ]
    );
}

// ---------------------------------------------------------------------------
// Queued jobs (the host's `jobs` above 1, over D-Bus)
// ---------------------------------------------------------------------------

fn three_stopped_queued() -> SimulatedSystem {
    SimulatedSystem::new()
        .with_unit("a", UnitState::stopped())
        .with_unit("b", UnitState::stopped())
        .with_unit("c", UnitState::stopped())
        .with_queued_jobs()
}

#[test]
fn queued_jobs_are_all_submitted_before_any_is_awaited() {
    let mut system = three_stopped_queued();
    let policy = Policy::new()
        .service(Service::new("a").enable(true))
        .service(Service::new("b"))
        .service(Service::new("c").enable(true));
    let report = apply(&policy, &mut system, &RunOptions::default());
    assert!(report.succeeded(), "{report:?}");
    system.assert_calls(&[
        "status a", "start a", "status b", "start b", "status c", "start c",
        // a's job awaited, then its phase two, then the check.
        "status a", "enable a", "status a", // b's awaiting status is its check.
        "status b", "status c", "enable c", "status c",
    ]);
    let actions: Vec<_> = report.events.iter().map(|e| e.actions.clone()).collect();
    assert_eq!(
        actions,
        [
            vec![Action::Started, Action::Enabled],
            vec![Action::Started],
            vec![Action::Started, Action::Enabled],
        ]
    );
}

#[test]
fn a_failed_job_fails_its_resource_with_the_reason_and_skips_its_enablement() {
    let reason = "Job for b.service failed because the control process exited with error code.";
    let mut system = three_stopped_queued().with_failure(
        Operation::Start,
        "b",
        ProviderError::CommandFailed(reason.into()),
    );
    let policy = Policy::new()
        .service(Service::new("a").enable(true))
        .service(Service::new("b").enable(true))
        .service(Service::new("c").enable(true));
    let report = apply(&policy, &mut system, &RunOptions::default());
    let b = &report.events[1];
    assert!(b.failed);
    assert_eq!(
        b.errors,
        [
            format!("start b: {reason}"),
            "failed to reach desired state: expected running and enabled, found stopped and \
             disabled"
                .to_owned()
        ]
    );
    assert!(b.actions.is_empty() && !b.changed, "{b:?}");
    assert_eq!(b.final_state, Some(final_state(false, false)));
    assert!(!report.events[0].failed && !report.events[2].failed);
    system.assert_mutating_calls(&["start a", "start b", "start c", "enable a", "enable c"]);
}

#[test]
fn a_subscriber_is_refreshed_only_after_the_job_it_subscribes_to_ended() {
    let mut system = SimulatedSystem::new()
        .with_unit("db", UnitState::stopped())
        .with_unit("app", UnitState::running())
        .with_queued_jobs();
    let policy = Policy::new()
        .service(Service::new("db"))
        .service(Service::new("app").subscribe("service#db"));
    let report = apply(&policy, &mut system, &RunOptions::default());
    assert!(report.succeeded(), "{report:?}");
    system.assert_calls(&[
        "status db",
        "start db",
        // db's job ends (the status waits for it) before app is looked at.
        "status db",
        "status app",
        "restart app",
        "status app",
    ]);
    assert!(report.events[1].refreshed);

    // db's job fails: db did not change, so app is not restarted.
    let mut system = SimulatedSystem::new()
        .with_unit("db", UnitState::stopped())
        .with_unit("app", UnitState::running())
        .with_queued_jobs()
        .with_failure(
            Operation::Start,
            "db",
            ProviderError::CommandFailed("Job for db.service failed.".into()),
        );
    let report = apply(&policy, &mut system, &RunOptions::default());
    assert!(report.events[0].failed);
    assert!(!report.events[1].refreshed && !report.events[1].failed);
    system.assert_mutating_calls(&["start db"]);
}

#[test]
fn a_unit_that_cannot_be_queued_fails_at_once_as_before() {
    let mut system = SimulatedSystem::new()
        .with_unit("web", UnitState::stopped().with_enabled_word("masked"))
        .with_queued_jobs();
    let report = apply(
        &one(Service::new("web").enable(true)),
        &mut system,
        &RunOptions::default(),
    );
    let event = &report.events[0];
    assert!(event.failed);
    assert!(event.errors[0].starts_with("start web: "), "{event:?}");
    system.assert_calls(&["status web", "start web", "status web"]);
}

/// docs/service-type.md, Verification: a start counts only when the unit
/// stayed up through the host's settle window. One that died is a failed
/// start (its action not reported, phase two not made), with the host's
/// reason and, beside it, the verification's `failed to reach desired
/// state` (docs/service-type.md, item 19), whether the host ran the job to
/// its end or queued it.
#[test]
fn a_start_that_did_not_stay_up_fails_and_skips_phase_two() {
    for queued in [false, true] {
        let why = "web.service did not stay up: it failed 0.5 s after its start job ended";
        let mut system = SimulatedSystem::new()
            .with_unit("web", UnitState::stopped())
            .with_unit("db", UnitState::stopped())
            .with_death_after(Operation::Start, "web", why);
        if queued {
            system = system.with_queued_jobs();
        }
        let policy = Policy::new()
            .service(Service::new("web").enable(true))
            .service(Service::new("db").enable(true));
        let report = apply(&policy, &mut system, &RunOptions::default());
        system.assert_mutating_calls(&["start web", "start db", "enable db"]);
        let web = report.event("service#web").unwrap();
        assert!(web.failed && !web.changed, "queued {queued}: {web:?}");
        assert!(web.actions.is_empty());
        assert_eq!(
            web.errors,
            [
                format!("start web: {why}"),
                "failed to reach desired state: expected running and enabled, found stopped \
                 and disabled"
                    .to_owned()
            ]
        );
        assert_eq!(web.final_state, Some(final_state(false, false)));
        assert!(!report.event("service#db").unwrap().failed);
    }
}

/// A unit systemd is restarting by itself (`SubState=auto-restart`) is a
/// crash loop: reported failed with how often and why, and never started
/// by the policy; `ensure: stopped` stops it.
#[test]
fn a_crash_loop_is_a_failure_not_a_state_to_start() {
    let looping =
        UnitState::crash_looping(3, "Result: exit-code; main process exited with status 3");
    let (event, system) = run_web(
        Service::new("web").enable(true),
        looping,
        &RunOptions::default(),
    );
    system.assert_no_mutating_calls();
    assert!(event.failed && !event.changed, "{event:?}");
    assert_eq!(event.errors.len(), 1);
    assert!(
        event.errors[0].starts_with(
            "web is in a crash loop: restarted 3 times by systemd since start; \
             Result: exit-code; main process exited with status 3."
        ),
        "{}",
        event.errors[0]
    );
    assert_eq!(event.final_state, Some(final_state(false, false)));

    let (event, system) = run_web(
        Service::new("web").stopped(),
        looping,
        &RunOptions::default(),
    );
    system.assert_mutating_calls(&["stop web"]);
    assert!(event.changed && !event.failed, "{event:?}");
    assert_eq!(event.final_state, Some(final_state(false, false)));

    let (event, system) = run_web(Service::new("web").stopped(), looping, &RunOptions::noop());
    system.assert_no_mutating_calls();
    assert_eq!(event.noop_message.as_deref(), Some("Would have stopped"));
}
