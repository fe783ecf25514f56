use std::time::{Duration, SystemTime};

use super::*;
use crate::left_alone::Reason;
use crate::report::{Report, RunReport, SourceReport};

/// A run of the policy `key` whose resources are `events`.
fn run(key: &str, events: Vec<ResourceEvent>) -> RunReport {
    let source = SourceReport {
        location: format!("/etc/policy-host/policies/{key}.wasm"),
        digest: "sha256:aa".into(),
        stale: false,
        stale_reason: None,
    };
    let mut report = RunReport::of_test(key, source, None, events);
    report.policy = format!("{key}.wasm");
    report
}

fn event(name: &str, changed: bool, failed: bool) -> ResourceEvent {
    ResourceEvent {
        changed,
        failed,
        errors: if failed {
            vec![Untrusted::new("start failed: exit-code")]
        } else {
            Vec::new()
        },
        ..ResourceEvent::of_host(&format!("service#{name}"), Vec::new())
    }
}

const T0: u64 = 1_700_000_000;

fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(T0 + secs)
}

struct Run<'a> {
    report: Option<&'a Report>,
    refused: &'a [Refusal],
    noop: bool,
    configured: Option<Vec<String>>,
    left_alone: LeftAlone,
    cause: RunCause,
}

impl Default for Run<'_> {
    fn default() -> Self {
        Self {
            report: None,
            refused: &[],
            noop: false,
            configured: None,
            left_alone: LeftAlone::default(),
            cause: RunCause::Event,
        }
    }
}

fn record(state: &mut MachineState, run: Run<'_>, secs: u64) {
    let empty = Report::new(Vec::new());
    state.record(
        Ran {
            how: How {
                drive: Drive::Watch,
                cause: run.cause,
            },
            said: Some("web.service changed".into()),
            noop: run.noop,
            result: Ok(run.report.unwrap_or(&empty)),
            refused: run.refused,
            configured: run.configured,
            left_alone: &run.left_alone,
            duration: Duration::from_millis(40),
            labels: BTreeMap::new(),
        },
        at(secs),
    );
}

/// A real run for an event that produced `report`, `secs` after T0.
fn record_report(state: &mut MachineState, report: &Report, secs: u64) {
    record(
        state,
        Run {
            report: Some(report),
            ..Run::default()
        },
        secs,
    );
}

#[test]
fn an_event_run_of_one_policy_keeps_the_failure_of_another() {
    let mut state = MachineState::empty();
    let both = Report::new(vec![
        run("db", vec![event("postgresql", false, true)]),
        run("web", vec![event("nginx", true, false)]),
    ]);
    record(
        &mut state,
        Run {
            report: Some(&both),
            cause: RunCause::Start,
            ..Run::default()
        },
        0,
    );
    assert!(!state.summary.success);
    // web drifts and is repaired by a run of web alone.
    let web = Report::new(vec![run("web", vec![event("nginx", true, false)])]);
    record_report(&mut state, &web, 60);
    assert!(!state.summary.success, "db still fails: {state:#?}");
    assert_eq!(state.summary.policies_failed, 1);
    assert_eq!(state.summary.counts.failed, 1);
    let db = &state.policies[0];
    assert_eq!(
        (db.key.as_str(), db.outcome, db.current, db.at),
        ("db", PolicyOutcome::Failed, false, T0)
    );
    assert_eq!(db.cause, RunCause::Start);
    assert_eq!(
        db.resources[0].errors,
        [Untrusted::new("start failed: exit-code")]
    );
    let web = &state.policies[1];
    assert_eq!(
        (web.outcome, web.current, web.at, web.repairs),
        (PolicyOutcome::Changed, true, T0 + 60, 2)
    );
    let last = state.last_run.as_ref().unwrap();
    assert_eq!(last.policies, ["web"]);
    assert_eq!(last.said.as_deref(), Some("web.service changed"));
    // db repaired: the machine is well again.
    let db = Report::new(vec![run("db", vec![event("postgresql", true, false)])]);
    record_report(&mut state, &db, 120);
    assert!(state.summary.success, "{state:#?}");
}

#[test]
fn a_refused_document_is_its_policys_outcome_until_a_good_one_runs() {
    let mut state = MachineState::empty();
    let web = Report::new(vec![run("web", vec![event("nginx", false, false)])]);
    record_report(&mut state, &web, 0);
    assert!(state.summary.success);
    let refused = [Refusal::new(
        "web".into(),
        "/etc/policy-host/policies/web.wasm",
        "web.wasm: signature \"x\" verification failed\n(rollback)".into(),
    )];
    record(
        &mut state,
        Run {
            refused: &refused,
            ..Run::default()
        },
        10,
    );
    assert!(!state.summary.success);
    assert_eq!(state.summary.policies_refused, 1);
    let policy = &state.policies[0];
    assert_eq!(policy.outcome, PolicyOutcome::Refused);
    assert_eq!(policy.policy, "web.wasm");
    assert!(policy
        .refused
        .as_ref()
        .unwrap()
        .as_raw()
        .contains("verification failed"));
    assert!(policy.resources.is_empty());
    record_report(&mut state, &web, 20);
    assert!(state.summary.success);
    assert_eq!(state.policies[0].refused, None);
}

#[test]
fn a_noop_run_is_kept_apart_from_the_machines_state() {
    let mut state = MachineState::empty();
    let failing = Report::new(vec![run("web", vec![event("nginx", false, true)])]);
    record_report(&mut state, &failing, 0);
    let before = (
        state.policies.clone(),
        state.last_run.clone(),
        state.summary,
    );
    let would = Report::new(vec![run("web", vec![event("nginx", true, false)])]);
    record(
        &mut state,
        Run {
            report: Some(&would),
            noop: true,
            ..Run::default()
        },
        30,
    );
    assert_eq!(
        (
            state.policies.clone(),
            state.last_run.clone(),
            state.summary
        ),
        before
    );
    assert!(!state.summary.success);
    let noop = state.noop_run.as_ref().unwrap();
    assert_eq!((noop.ended, noop.would_change), (T0 + 30, 1));
}

#[test]
fn a_whole_run_drops_a_policy_removed_from_the_configuration() {
    let mut state = MachineState::empty();
    let both = Report::new(vec![
        run("db", vec![event("postgresql", false, true)]),
        run("web", vec![event("nginx", false, false)]),
    ]);
    record_report(&mut state, &both, 0);
    // A run of some policies drops nobody.
    let web = Report::new(vec![run("web", vec![event("nginx", false, false)])]);
    record_report(&mut state, &web, 5);
    assert_eq!(state.policies.len(), 2);
    record(
        &mut state,
        Run {
            report: Some(&web),
            configured: Some(vec!["web".into()]),
            cause: RunCause::Resync,
            ..Run::default()
        },
        10,
    );
    assert_eq!(state.policies.len(), 1);
    assert!(state.summary.success);
}

#[test]
fn a_unit_held_back_makes_the_machine_unwell_and_a_pause_does_not() {
    let mut state = MachineState::empty();
    let web = Report::new(vec![run("web", vec![event("nginx", false, false)])]);
    let mut left_alone = LeftAlone::default();
    left_alone.insert(
        "nginx.service".into(),
        Reason {
            kind: Kind::Paused,
            until: None,
            why: "paused by the operator".into(),
        },
    );
    record(
        &mut state,
        Run {
            report: Some(&web),
            left_alone: left_alone.clone(),
            ..Run::default()
        },
        0,
    );
    assert!(state.summary.success);
    assert_eq!(state.summary.units_paused, 1);
    left_alone.insert(
        "web.service".into(),
        Reason {
            kind: Kind::Held,
            until: Some(at(10)),
            why: "held back after 3 starts within 60s".into(),
        },
    );
    record(
        &mut state,
        Run {
            report: Some(&web),
            left_alone,
            ..Run::default()
        },
        1,
    );
    assert!(!state.summary.success);
    assert_eq!(state.summary.units_held_back, 1);
    assert_eq!(state.left_alone[1].until, Some(T0 + 10));
}

#[test]
fn the_state_reads_back_as_the_same_typed_value() {
    let mut state = MachineState::empty();
    let report = Report::new(vec![
        run("db", vec![event("postgresql", true, true)]),
        run("web", vec![event("nginx", true, false)]),
    ]);
    let refused = [Refusal::new(
        "x".into(),
        "oci://r/x:1",
        "registry down".into(),
    )];
    record(
        &mut state,
        Run {
            report: Some(&report),
            refused: &refused,
            ..Run::default()
        },
        0,
    );
    state.set_watch(Some(WatchState {
        up: true,
        pid: 42,
        started: T0,
        resync_secs: 900,
        next_resync: Some(T0 + 900),
        last_event_run: Some((T0, "web.service changed".into())),
        holds: [("fight".to_owned(), 1)].into(),
        signals_dropped: 3,
    }));
    let json = serde_json::to_string_pretty(&state).unwrap();
    let back: MachineState = serde_json::from_str(&json).unwrap();
    assert_eq!(back, state);
    // What monitoring and scripts read first is where they read it.
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(value["summary"]["success"], false);
    assert_eq!(value["summary"]["failed"], 1);
    assert_eq!(
        value["policies"][0]["resources"][0]["outcome"],
        "failed-after-changes"
    );
    assert_eq!(value["policies"][2]["outcome"], "refused");
}

#[test]
fn the_state_as_written_is_held_to_the_report_limit_failures_first() {
    let mut state = MachineState::empty();
    let mut events: Vec<ResourceEvent> = (0..3000)
        .map(|n| event(&format!("unit-{n:05}"), false, false))
        .collect();
    events.push(event("broken", false, true));
    let report = Report::new(vec![run("web", events)]);
    record_report(&mut state, &report, 0);
    let limit = 20_000;
    state.bound(limit);
    let written = serde_json::to_string_pretty(&state).unwrap();
    assert!(written.len() <= limit, "{} > {limit}", written.len());
    let policy = &state.policies[0];
    assert_eq!(policy.resources[0].resource, "service#broken");
    assert_eq!(
        policy.resources.len() + policy.resources_not_shown,
        3001,
        "every resource is shown or counted"
    );
    assert_eq!(policy.counts.resources, 3001, "the counts stay whole");
    assert!(written.contains("\"resources_not_shown\": "));
}

#[test]
fn a_watchs_holds_stand_for_a_run_beside_it_until_they_end() {
    let mut state = MachineState::empty();
    let mut held = LeftAlone::default();
    held.insert(
        "web.service".into(),
        Reason {
            kind: Kind::Held,
            until: Some(at(10)),
            why: "held back".into(),
        },
    );
    let web = Report::new(vec![run("web", vec![event("nginx", false, false)])]);
    record(
        &mut state,
        Run {
            report: Some(&web),
            left_alone: held,
            ..Run::default()
        },
        0,
    );
    assert_eq!(
        state
            .holds_in_force(at(5))
            .reason("web.service")
            .unwrap()
            .kind,
        Kind::Held
    );
    assert!(state.holds_in_force(at(10)).is_empty());
}
