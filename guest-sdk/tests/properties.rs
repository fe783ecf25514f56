//! Property tests of the service type's apply logic against the simulated system.
//!
//! Random policies (services named from a small pool, so subscriptions can
//! point at each other), random unit states (some units missing), random
//! refreshed references and random injected faults are applied, and the
//! outcome is compared with an oracle written here straight from docs/service-type.md's
//! tables: phase 1 (subscribe restart only when `ensure: running` and running,
//! start when it should run but is stopped, stop when it should be stopped but
//! runs), then phase 2 (enable/disable only when `enable` is set and differs).
//! A `service#X` subscription triggers when X changed earlier in the same run;
//! a resource's remaining calls are skipped after its first failing call.

use std::collections::{BTreeMap, HashMap, HashSet};

use guest_sdk::prelude::*;
use guest_sdk::{apply, FinalState, Report};
use proptest::prelude::*;
use proptest::test_runner::Config;

/// Valid names, some with every kind of allowed punctuation.
const POOL: [&str; 10] = [
    "web",
    "db",
    "cache",
    "nginx.service",
    "my-app_v2",
    "a.b_c+d:e~f",
    "worker",
    "x",
    "getty:tty1",
    "Z9",
];

/// Non-service references a service may subscribe to or the host may refresh.
const FILES: [&str; 3] = ["file#/etc/app.conf", "file#/etc/web.conf", "file#/tmp/a#b"];

const MUTATING: [Operation; 5] = [
    Operation::Start,
    Operation::Stop,
    Operation::Restart,
    Operation::Enable,
    Operation::Disable,
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FaultKind {
    Fail,
    NoEffect,
}

#[derive(Debug, Clone)]
struct Declared {
    name: &'static str,
    ensure: Ensure,
    enable: Option<bool>,
    subscribe: Vec<String>,
}

#[derive(Debug, Clone)]
struct Scenario {
    services: Vec<Declared>,
    /// The initial state of each declared service's unit; `None`: no such unit.
    units: Vec<Option<UnitState>>,
    refreshed: Vec<String>,
    /// Later entries for the same (operation, service) win, as in the simulator.
    faults: Vec<(Operation, &'static str, FaultKind)>,
}

impl Scenario {
    fn policy(&self) -> Policy {
        let mut policy = Policy::new();
        for d in &self.services {
            let mut service = Service::new(d.name)
                .ensure(d.ensure)
                .enable_option(d.enable);
            for reference in &d.subscribe {
                service = service.subscribe(reference.clone());
            }
            policy.add(service);
        }
        policy
    }

    fn initial_units(&self) -> BTreeMap<&'static str, UnitState> {
        self.services
            .iter()
            .zip(&self.units)
            .filter_map(|(d, u)| u.map(|u| (d.name, u)))
            .collect()
    }

    fn fault_map(&self) -> HashMap<(Operation, &'static str), FaultKind> {
        self.faults
            .iter()
            .map(|&(op, name, kind)| ((op, name), kind))
            .collect()
    }

    fn system(&self, with_faults: bool) -> SimulatedSystem {
        system_of(
            &self.initial_units(),
            if with_faults { &self.faults } else { &[] },
        )
    }

    fn options(&self, noop: bool) -> RunOptions {
        RunOptions {
            noop,
            refreshed: self.refreshed.clone(),
            watched: Vec::new(),
            settings: None,
            facts: Vec::new(),
        }
    }
}

fn system_of(
    units: &BTreeMap<&'static str, UnitState>,
    faults: &[(Operation, &'static str, FaultKind)],
) -> SimulatedSystem {
    let mut system = SimulatedSystem::new();
    for (name, state) in units {
        system = system.with_unit(name, *state);
    }
    for &(op, name, kind) in faults {
        system = match kind {
            FaultKind::Fail => system.with_failure(
                op,
                name,
                ProviderError::CommandFailed(format!("injected failure of {op} {name}")),
            ),
            FaultKind::NoEffect => system.with_no_effect(op, name),
        };
    }
    system
}

/// The unit states a system holds for the scenario's services.
fn units_of(scenario: &Scenario, system: &SimulatedSystem) -> BTreeMap<&'static str, UnitState> {
    scenario
        .services
        .iter()
        .filter_map(|d| system.unit(d.name).map(|u| (d.name, u)))
        .collect()
}

// ---------------------------------------------------------------------------
// The oracle
// ---------------------------------------------------------------------------

/// What the oracle expects of one resource.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ExpectedEvent {
    resource: String,
    changed: bool,
    refreshed: bool,
    failed: bool,
    actions: Vec<Action>,
    final_state: Option<FinalState>,
}

#[derive(Debug)]
struct Expected {
    /// Mutating calls as "operation service", in order.
    calls: Vec<String>,
    events: Vec<ExpectedEvent>,
    units: BTreeMap<&'static str, UnitState>,
}

fn ensure_of(running: bool) -> Ensure {
    if running {
        Ensure::Running
    } else {
        Ensure::Stopped
    }
}

/// The tables of docs/service-type.md, written out without reference to the SDK's code.
fn oracle(
    services: &[Declared],
    initial: &BTreeMap<&'static str, UnitState>,
    refreshed: &[String],
    faults: &HashMap<(Operation, &'static str), FaultKind>,
    noop: bool,
) -> Expected {
    let mut units = initial.clone();
    let mut changed: HashSet<String> = refreshed.iter().cloned().collect();
    let mut calls = Vec::new();
    let mut events = Vec::new();

    for d in services {
        let resource = format!("service#{}", d.name);
        let status_fails = faults.get(&(Operation::Status, d.name)) == Some(&FaultKind::Fail);
        let found = match units.get(d.name) {
            Some(unit) if !status_fails => *unit,
            _ => {
                // Status failed (no such unit, or an injected failure): nothing else happens.
                events.push(ExpectedEvent {
                    resource,
                    changed: false,
                    refreshed: false,
                    failed: true,
                    actions: Vec::new(),
                    final_state: None,
                });
                continue;
            }
        };
        let triggered = d.subscribe.iter().any(|r| changed.contains(r));

        let mut plan = Vec::new();
        // Phase 1: the running state.
        match d.ensure {
            Ensure::Running if !found.running => plan.push(Action::Started),
            Ensure::Running if triggered => plan.push(Action::Restarted),
            Ensure::Stopped if found.running => plan.push(Action::Stopped),
            _ => {}
        }
        // Phase 2: the enabled state.
        match d.enable {
            Some(true) if !found.enabled => plan.push(Action::Enabled),
            Some(false) if found.enabled => plan.push(Action::Disabled),
            _ => {}
        }

        if noop {
            if !plan.is_empty() {
                changed.insert(resource.clone());
            }
            events.push(ExpectedEvent {
                resource,
                changed: !plan.is_empty(),
                refreshed: plan.contains(&Action::Restarted),
                failed: false,
                actions: plan,
                final_state: Some(FinalState {
                    ensure: ensure_of(found.running),
                    enabled: found.enabled,
                }),
            });
            continue;
        }

        let mut done = Vec::new();
        let mut failed = false;
        for action in plan {
            let (verb, op) = match action {
                Action::Started => ("start", Operation::Start),
                Action::Stopped => ("stop", Operation::Stop),
                Action::Restarted => ("restart", Operation::Restart),
                Action::Enabled => ("enable", Operation::Enable),
                Action::Disabled => ("disable", Operation::Disable),
            };
            calls.push(format!("{verb} {}", d.name));
            match faults.get(&(op, d.name)) {
                Some(FaultKind::Fail) => {
                    failed = true;
                    break;
                }
                Some(FaultKind::NoEffect) => {}
                None => {
                    let unit = units.get_mut(d.name).expect("unit exists");
                    *unit = match action {
                        Action::Started | Action::Restarted => unit.with_active_word("active"),
                        Action::Stopped => unit.with_active_word("inactive"),
                        Action::Enabled => unit.enabled(),
                        Action::Disabled => unit.disabled(),
                    }
                }
            }
            done.push(action);
        }

        let after = units[d.name];
        let reached =
            ensure_of(after.running) == d.ensure && d.enable.is_none_or(|e| e == after.enabled);
        if !done.is_empty() {
            changed.insert(resource.clone());
        }
        events.push(ExpectedEvent {
            resource,
            changed: !done.is_empty(),
            refreshed: done.contains(&Action::Restarted),
            failed: failed || !reached,
            actions: done,
            final_state: Some(FinalState {
                ensure: ensure_of(after.running),
                enabled: after.enabled,
            }),
        });
    }
    Expected {
        calls,
        events,
        units,
    }
}

fn actual_events(report: &Report) -> Vec<ExpectedEvent> {
    report
        .events
        .iter()
        .map(|e| ExpectedEvent {
            resource: e.resource.clone(),
            changed: e.changed,
            refreshed: e.refreshed,
            failed: e.failed,
            actions: e.actions.clone(),
            final_state: e.final_state,
        })
        .collect()
}

/// Runs the scenario's policy on `system` and checks calls, events and unit
/// states against the oracle; returns the report.
fn run_and_check(
    scenario: &Scenario,
    system: &mut SimulatedSystem,
    faults: &HashMap<(Operation, &'static str), FaultKind>,
    options: &RunOptions,
) -> Result<Report, TestCaseError> {
    let before = units_of(scenario, system);
    let expected = oracle(
        &scenario.services,
        &before,
        &options.refreshed,
        faults,
        options.noop,
    );
    system.clear_calls();
    let report = apply(&scenario.policy(), system, options);
    prop_assert!(
        report.errors.is_empty(),
        "policy rejected: {:?}",
        report.errors
    );
    // Each service's calls in its order; a started service's second phase
    // waits until the others were begun (the settle window), so the order
    // across services is not the tables'.
    prop_assert_eq!(
        per_service(&system.mutating_calls()),
        per_service(&expected.calls)
    );
    prop_assert_eq!(actual_events(&report), expected.events);
    prop_assert_eq!(units_of(scenario, system), expected.units);
    check_final_states(scenario, &report)?;
    Ok(report)
}

/// Calls ("operation service") grouped by service, each group in order.
fn per_service(calls: &[String]) -> BTreeMap<String, Vec<String>> {
    let mut grouped: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for call in calls {
        let service = call.split_once(' ').map_or("", |(_, s)| s).to_owned();
        grouped.entry(service).or_default().push(call.clone());
    }
    grouped
}

/// Every event that did not fail in a real run ends in the desired state.
fn check_final_states(scenario: &Scenario, report: &Report) -> Result<(), TestCaseError> {
    if report.events.first().is_some_and(|e| e.noop) {
        return Ok(());
    }
    for (d, event) in scenario.services.iter().zip(&report.events) {
        if event.failed {
            continue;
        }
        let found = event
            .final_state
            .ok_or_else(|| TestCaseError::fail(format!("{}: no final state", event.resource)))?;
        prop_assert_eq!(found.ensure, d.ensure, "{}", event.resource);
        if let Some(enable) = d.enable {
            prop_assert_eq!(found.enabled, enable, "{}", event.resource);
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------

/// A subscription: to an earlier service (by a raw index reduced later) or to a file.
#[derive(Debug, Clone)]
enum Sub {
    Earlier(usize),
    File(usize),
}

fn sub() -> impl Strategy<Value = Sub> {
    prop_oneof![
        3 => any::<usize>().prop_map(Sub::Earlier),
        1 => (0..FILES.len()).prop_map(Sub::File),
    ]
}

fn ensure() -> impl Strategy<Value = Ensure> {
    prop_oneof![Just(Ensure::Running), Just(Ensure::Stopped)]
}

fn enable() -> impl Strategy<Value = Option<bool>> {
    prop_oneof![Just(Some(true)), Just(Some(false)), Just(None)]
}

fn unit() -> impl Strategy<Value = Option<UnitState>> {
    prop_oneof![
        1 => Just(None),
        8 => (any::<bool>(), any::<bool>())
            .prop_map(|(running, enabled)| {
                let state = if running {
                    UnitState::running()
                } else {
                    UnitState::stopped()
                };
                Some(if enabled { state.enabled() } else { state })
            }),
    ]
}

fn operation() -> impl Strategy<Value = Operation> {
    prop_oneof![
        1 => Just(Operation::Status),
        5 => proptest::sample::select(MUTATING.to_vec()),
    ]
}

fn fault_kind() -> impl Strategy<Value = FaultKind> {
    prop_oneof![Just(FaultKind::Fail), Just(FaultKind::NoEffect)]
}

/// Any reference the host may pass as refreshed: files, or services of the pool
/// (declared in the policy or not).
fn refreshed_ref() -> impl Strategy<Value = String> {
    let all: Vec<String> = FILES
        .iter()
        .map(|f| f.to_string())
        .chain(POOL.iter().map(|n| format!("service#{n}")))
        .collect();
    proptest::sample::select(all)
}

fn scenario(max_faults: usize) -> impl Strategy<Value = Scenario> {
    (1..=8usize).prop_flat_map(move |n| {
        (
            Just(POOL.to_vec()).prop_shuffle(),
            proptest::collection::vec(
                (ensure(), enable(), proptest::collection::vec(sub(), 0..3)),
                n,
            ),
            proptest::collection::vec(unit(), n),
            proptest::collection::vec(refreshed_ref(), 0..3),
            proptest::collection::vec((any::<usize>(), operation(), fault_kind()), 0..=max_faults),
        )
            .prop_map(|(names, declared, units, refreshed, faults)| {
                let n = declared.len();
                let services = declared
                    .into_iter()
                    .enumerate()
                    .map(|(i, (ensure, enable, subs))| Declared {
                        name: names[i],
                        ensure,
                        enable,
                        subscribe: subs
                            .into_iter()
                            .map(|s| match s {
                                Sub::Earlier(k) if i > 0 => format!("service#{}", names[k % i]),
                                Sub::Earlier(k) => FILES[k % FILES.len()].to_owned(),
                                Sub::File(k) => FILES[k].to_owned(),
                            })
                            .collect(),
                    })
                    .collect();
                let faults = faults
                    .into_iter()
                    .map(|(k, op, kind)| (op, names[k % n], kind))
                    .collect();
                Scenario {
                    services,
                    units,
                    refreshed,
                    faults,
                }
            })
    })
}

fn config() -> Config {
    Config::with_cases(256)
}

// ---------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    /// With faults injected, each service's calls are exactly the tables'
    /// calls up to its first failing one; a later fault-free run converges
    /// (again as the tables say), and the run after that changes nothing.
    #[test]
    fn real_run_with_faults_matches_the_tables(s in scenario(4)) {
        let mut system = s.system(true);
        run_and_check(&s, &mut system, &s.fault_map(), &s.options(false))?;

        let mut fixed = system_of(&units_of(&s, &system), &[]);
        let converging = run_and_check(&s, &mut fixed, &HashMap::new(), &RunOptions::default())?;
        for (d, event) in s.services.iter().zip(&converging.events) {
            let present = fixed.unit(d.name).is_some();
            prop_assert_eq!(event.failed, !present, "{:?}", event);
        }

        run_and_check(&s, &mut fixed, &HashMap::new(), &RunOptions::default())?;
        prop_assert!(fixed.mutating_calls().is_empty(), "{:?}", fixed.mutating_calls());
    }

    /// Without faults, a run converges every existing unit to its desired
    /// state, and a second run on the resulting state makes no mutating call.
    #[test]
    fn fault_free_run_converges_and_the_second_run_is_a_no_op(s in scenario(0)) {
        let mut system = s.system(false);
        let report = run_and_check(&s, &mut system, &HashMap::new(), &s.options(false))?;
        for (d, event) in s.services.iter().zip(&report.events) {
            let present = system.unit(d.name).is_some();
            prop_assert_eq!(event.failed, !present, "{:?}", event);
        }
        prop_assert_eq!(report.succeeded(), s.units.iter().all(Option::is_some));

        system.clear_calls();
        let second = apply(&s.policy(), &mut system, &RunOptions::default());
        prop_assert!(system.mutating_calls().is_empty(), "{:?}", system.mutating_calls());
        prop_assert_eq!(second.changed_count(), 0);
    }

    /// Noop never makes a mutating call and leaves every unit as it was, even
    /// with faults injected; its plan is the tables' plan.
    #[test]
    fn noop_makes_no_mutating_call_and_changes_nothing(s in scenario(4)) {
        let mut system = s.system(true);
        let before = units_of(&s, &system);
        let report = run_and_check(&s, &mut system, &s.fault_map(), &s.options(true))?;
        prop_assert!(system.mutating_calls().is_empty(), "{:?}", system.mutating_calls());
        prop_assert_eq!(units_of(&s, &system), before);
        for event in &report.events {
            prop_assert!(event.noop);
            prop_assert_eq!(event.noop_message.is_some(), event.changed, "{:?}", event);
        }
    }

    /// On a fault-free system, noop says `changed` for exactly the services
    /// for which the real run makes a mutating call.
    #[test]
    fn noop_changed_is_whether_the_real_run_makes_a_call(s in scenario(0)) {
        let mut dry = s.system(false);
        let noop = apply(&s.policy(), &mut dry, &s.options(true));
        let mut real = s.system(false);
        apply(&s.policy(), &mut real, &s.options(false));
        prop_assert_eq!(noop.events.len(), s.services.len());
        for (d, event) in s.services.iter().zip(&noop.events) {
            let called = real
                .calls()
                .iter()
                .any(|c| c.operation.is_mutating() && c.service == d.name);
            prop_assert_eq!(event.changed, called, "{:?}", event);
        }
    }

    /// Jobs queued by the host (run in parallel, awaited at the unit's next
    /// `status`) give the report, the final units and, per service, the
    /// mutating calls that jobs ended before returning give, faults and all.
    #[test]
    fn queued_jobs_give_what_finished_jobs_give(s in scenario(4)) {
        let mut finished = s.system(true);
        let expected = apply(&s.policy(), &mut finished, &s.options(false));
        let mut queued = s.system(true).with_queued_jobs();
        let actual = apply(&s.policy(), &mut queued, &s.options(false));
        prop_assert_eq!(&actual, &expected);
        prop_assert_eq!(units_of(&s, &queued), units_of(&s, &finished));
        for d in &s.services {
            let of = |system: &SimulatedSystem| -> Vec<String> {
                system
                    .calls()
                    .iter()
                    .filter(|c| c.operation.is_mutating() && c.service == d.name)
                    .map(|c| c.to_string())
                    .collect()
            };
            prop_assert_eq!(of(&queued), of(&finished), "{}", d.name);
        }
    }
}
