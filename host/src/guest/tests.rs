//! The guest boundary's reconciliation, on recorded calls and reports.

use std::time::Duration;

use super::*;
use crate::contract::{self, Action, Ensure, ErrorKind, FinalState, Operation, RequestedState};
use crate::provider::{Call, Outcome};

fn call(operation: Operation, service: &str, state: Option<(bool, bool)>) -> CallRecord {
    CallRecord {
        operation: Call::Guest(operation),
        service: Some(Untrusted::new(service)),
        outcome: Outcome::Ok,
        error: None,
        state: state.map(|(running, enabled)| UnitState {
            running,
            enabled,
            failed: false,
        }),
        journal: Vec::new(),
        left_alone: None,
        duration: Duration::ZERO,
    }
}

fn event(name: &str, actions: &[Action], last: Option<(Ensure, bool)>) -> contract::Event {
    contract::Event {
        resource: format!("service#{name}"),
        changed: !actions.is_empty(),
        refreshed: false,
        noop: false,
        noop_message: None,
        actions: actions.to_vec(),
        failed: false,
        errors: Vec::new(),
        requested: RequestedState {
            ensure: Ensure::Running,
            enable: Some(true),
        },
        final_state: last.map(|(ensure, enabled)| FinalState { ensure, enabled }),
    }
}

fn outcome(events: Vec<contract::Event>, calls: &[CallRecord]) -> GuestOutcome {
    let report = contract::Report {
        events,
        errors: Vec::new(),
        left_out: Vec::new(),
    };
    GuestOutcome::new(Ok(report), calls, false, 1 << 20)
}

#[test]
fn an_honest_report_is_confirmed_by_the_host_record() {
    let calls = [
        call(Operation::Status, "web", Some((false, false))),
        call(Operation::Start, "web", None),
        call(Operation::Enable, "web", None),
        call(Operation::Status, "web", Some((true, true))),
    ];
    let out = outcome(
        vec![event(
            "web",
            &[Action::Started, Action::Enabled],
            Some((Ensure::Running, true)),
        )],
        &calls,
    );
    let web = &out.resources[0];
    assert!(!web.failed, "{:?}", web.errors);
    assert!(web.changed);
    assert_eq!(web.actions, [Done::Started, Done::Enabled]);
    assert_eq!(web.source, Source::Host);
    assert_eq!(
        web.final_state,
        Some(Final {
            ensure: State::Running,
            enabled: true
        })
    );
}

#[test]
fn claimed_actions_that_never_ran_fail_the_resource() {
    let out = outcome(
        vec![event("web", &[Action::Started, Action::Enabled], None)],
        &[],
    );
    let web = &out.resources[0];
    assert!(web.failed);
    assert!(!web.changed, "nothing executed, nothing changed");
    assert!(web.actions.is_empty());
    assert_eq!(
        web.errors,
        [
            "the policy reported web started, but no start was executed",
            "the policy reported web enabled, but no enable was executed",
        ]
    );
}

/// A start the host judged failed (its unit did not stay up) is a
/// failure whatever the policy says: claimed, or left out.
#[test]
fn a_start_that_did_not_stay_up_fails_its_resource_whatever_the_policy_says() {
    let mut start = call(Operation::Start, "web", None);
    start.outcome = Outcome::Failed(ErrorKind::CommandFailed);
    start.error = Some(Untrusted::new(
        "web.service did not stay up: 1s after its job ended it is failed",
    ));
    start.journal = vec![Untrusted::new("boom")];
    let calls = [start, call(Operation::Status, "web", Some((false, false)))];
    for claimed in [vec![Action::Started], vec![]] {
        let out = outcome(
            vec![event("web", &claimed, Some((Ensure::Stopped, false)))],
            &calls,
        );
        let web = &out.resources[0];
        assert!(web.failed && !web.changed, "{web:?}");
        assert!(web.actions.is_empty());
        assert!(
            web.errors
                .iter()
                .any(|e| e.as_raw().contains("did not stay up")),
            "{:?}",
            web.errors
        );
        assert_eq!(web.journal, [Untrusted::new("boom")]);
    }
}

#[test]
fn changes_left_out_of_the_report_get_an_event_of_their_own() {
    let calls = [
        call(Operation::Stop, "sshd", None),
        call(Operation::Disable, "sshd", None),
        call(Operation::Status, "sshd", Some((false, false))),
    ];
    let out = outcome(Vec::new(), &calls);
    let sshd = &out.resources[0];
    assert_eq!(sshd.resource, "service#sshd");
    assert!(sshd.failed && sshd.changed);
    assert_eq!(sshd.actions, [Done::Stopped, Done::Disabled]);
    assert!(sshd.requested.is_none());
    assert_eq!(
        sshd.errors,
        ["sshd was stopped and disabled by the policy but not reported"]
    );
}

#[test]
fn a_final_state_the_host_did_not_see_fails_the_resource() {
    let calls = [call(Operation::Status, "web", Some((false, false)))];
    let out = outcome(
        vec![event("web", &[], Some((Ensure::Running, true)))],
        &calls,
    );
    assert_eq!(
        out.resources[0].errors,
        ["the policy reported web running and enabled, but its last status was stopped and disabled"]
    );
    assert_eq!(
        out.resources[0].final_state,
        Some(Final {
            ensure: State::Stopped,
            enabled: false
        })
    );
}

#[test]
fn changes_made_before_a_trap_are_reported() {
    let failure = RunFailure {
        class: "trap",
        message: Untrusted::new("x".repeat(1 << 20)),
        output: None,
    };
    let calls = [call(Operation::Restart, "db", None)];
    let out = GuestOutcome::new(Err(failure), &calls, false, 1 << 20);
    assert_eq!(out.resources[0].actions, [Done::Restarted]);
    assert!(out.resources[0].refreshed);
    assert!(out.resources[0].errors[0].as_raw().contains("never came"));
    let message = &out.failure.unwrap().message;
    assert!(message.len() <= MAX_GUEST_STRING + TRUNCATED.len());
}

#[test]
fn a_noop_run_keeps_the_policys_claims_and_says_whose_they_are() {
    let mut claim = event("web", &[Action::Started], None);
    claim.noop = true;
    claim.noop_message = Some("Would have started".into());
    let report = contract::Report {
        events: vec![claim],
        errors: Vec::new(),
        left_out: Vec::new(),
    };
    let out = GuestOutcome::new(Ok(report), &[], true, 1 << 20);
    let web = &out.resources[0];
    assert_eq!(web.source, Source::Policy);
    assert!(web.changed && !web.failed);
    assert_eq!(
        web.noop_message.as_ref().map(Untrusted::as_raw),
        Some("Would have started")
    );
}

/// A change refused only because the unit is left alone is said, not a
/// failure; any other failure of the unit still fails it.
#[test]
fn a_refusal_of_a_unit_left_alone_is_said_and_other_failures_still_fail() {
    use crate::left_alone::Kind;
    let mut start = call(Operation::Start, "web", None);
    start.outcome = Outcome::Failed(ErrorKind::Denied);
    start.error = Some(Untrusted::new(
        "start web refused: held back after 3 starts within 60s (a crash loop)",
    ));
    start.left_alone = Some(Kind::Held);
    let mut failed_event = event("web", &[Action::Enabled], None);
    failed_event.failed = true;
    failed_event.errors = vec!["start web.service failed: refused".into()];
    let calls = [
        call(Operation::Status, "web", Some((false, false))),
        call(Operation::Enable, "web", None),
        start.clone(),
    ];
    let out = outcome(vec![failed_event.clone()], &calls);
    let web = &out.resources[0];
    assert!(!web.failed, "{web:?}");
    assert!(web.errors.is_empty(), "{:?}", web.errors);
    assert_eq!(web.actions, [Done::Enabled], "the enable happened");
    let alone = web.left_alone.as_ref().expect("said left alone");
    assert_eq!(
        (alone.kind, &alone.would[..]),
        (Kind::Held, &[Operation::Start][..])
    );

    // The same refusal beside a status that failed: a failure.
    let mut status = call(Operation::Status, "web", None);
    status.outcome = Outcome::Failed(ErrorKind::TimedOut);
    let out = outcome(vec![failed_event], &[status, start]);
    assert!(out.resources[0].failed);
    assert!(out.resources[0].left_alone.is_some());
    // An unmarked denial (noop, the allowlist) is no pause.
    let mut denied = call(Operation::Start, "web", None);
    denied.outcome = Outcome::Failed(ErrorKind::Denied);
    let mut failed = event("web", &[], None);
    failed.failed = true;
    let out = outcome(vec![failed], &[denied]);
    assert!(out.resources[0].failed && out.resources[0].left_alone.is_none());
}

fn left_out(resource: &str, why: &str) -> contract::LeftOut {
    contract::LeftOut {
        resource: resource.into(),
        why: why.into(),
    }
}

/// One unit with an entry per kind of machine (`app` stopped where `role:
/// db`, running where `role: web`): the entry that applies has its event,
/// the other is left out, and the two do not contradict each other, in a
/// run and in `--noop` alike.
#[test]
fn an_entry_left_out_whose_unit_another_entry_applied_is_no_contradiction() {
    let calls = [
        call(Operation::Status, "app", Some((false, false))),
        call(Operation::Start, "app", None),
        call(Operation::Status, "app", Some((true, false))),
    ];
    let why = "when role = db (this machine: web); app is applied here by item 1's entry 2 \
               (when role = web)";
    for (noop, calls) in [(false, &calls[..]), (true, &calls[..1])] {
        let mut applied = event("app", &[Action::Started], Some((Ensure::Running, false)));
        applied.noop = noop;
        let report = contract::Report {
            events: vec![applied],
            errors: Vec::new(),
            // In the other spelling too: one unit.
            left_out: vec![
                left_out("service#app", why),
                left_out("service#app.service", "when role = test"),
                left_out("service#db", "when role = db (this machine: web)"),
            ],
        };
        let out = GuestOutcome::new(Ok(report), calls, noop, 1 << 20);
        assert!(out.errors.is_empty(), "noop {noop}: {:?}", out.errors);
        assert_eq!(out.resources.len(), 1, "noop {noop}");
        assert!(!out.resources[0].failed, "{:?}", out.resources[0].errors);
        let left: Vec<(String, &str, bool)> = out
            .left_out
            .iter()
            .map(|l| (l.resource.to_string(), l.why.as_raw(), l.unit_applied))
            .collect();
        assert_eq!(
            left,
            [
                ("service#app".to_owned(), why, true),
                ("service#app.service".to_owned(), "when role = test", true),
                (
                    "service#db".to_owned(),
                    "when role = db (this machine: web)",
                    false
                ),
            ],
            "noop {noop}"
        );
    }
}

#[test]
fn resources_left_out_are_kept_checked_and_never_one_the_host_changed() {
    let calls = [
        call(Operation::Status, "web", Some((false, false))),
        call(Operation::Start, "web", None),
        call(Operation::Status, "web", Some((true, false))),
    ];
    // The policy says web was left out, and web was started: the host
    // believes what it did.
    let report = contract::Report {
        events: Vec::new(),
        errors: Vec::new(),
        left_out: vec![
            left_out("service#db", "when role = db (this machine: web)"),
            left_out("service#web", "when role = nobody"),
        ],
    };
    let out = GuestOutcome::new(Ok(report), &calls, false, 1 << 20);
    assert_eq!(out.left_out.len(), 1);
    assert_eq!(out.left_out[0].resource, "service#db");
    assert_eq!(
        out.left_out[0].why.as_raw(),
        "when role = db (this machine: web)"
    );
    assert!(!out.left_out[0].unit_applied);
    assert!(out
        .resources
        .iter()
        .any(|r| r.resource == "service#web" && r.changed));
    assert!(
        out.errors.iter().any(|e| e
            .as_raw()
            .contains("\"service#web\" is said left out, and it was applied")),
        "{:?}",
        out.errors
    );

    // Another unit's event does not make the claim about web true.
    let report = contract::Report {
        events: vec![event("db", &[], Some((Ensure::Running, true)))],
        errors: Vec::new(),
        left_out: vec![left_out("service#web", "when role = nobody")],
    };
    let out = GuestOutcome::new(Ok(report), &calls, false, 1 << 20);
    assert!(out.left_out.is_empty(), "{:?}", out.left_out);
    assert!(
        out.errors.iter().any(|e| e
            .as_raw()
            .contains("\"service#web\" is said left out, and it was applied")),
        "{:?}",
        out.errors
    );

    // A name that is not a unit's ends the list, said.
    let report = contract::Report {
        events: Vec::new(),
        errors: Vec::new(),
        left_out: vec![left_out("service#a b", "x"), left_out("service#db", "y")],
    };
    let out = GuestOutcome::new(Ok(report), &[], false, 1 << 20);
    assert!(out.left_out.is_empty());
    assert!(
        out.errors[0].as_raw().contains("left-out resource"),
        "{:?}",
        out.errors
    );

    // Its text counts toward the report limit, and its reason is bounded.
    let report = contract::Report {
        events: Vec::new(),
        errors: Vec::new(),
        left_out: (0..1000)
            .map(|i| left_out(&format!("service#u{i}"), &"w".repeat(10_000)))
            .collect(),
    };
    let out = GuestOutcome::new(Ok(report), &[], false, 64 * 1024);
    assert!(out.left_out.len() < 1000);
    assert!(out.left_out.iter().all(|l| l.why.len() < 600));
    assert!(out
        .errors
        .iter()
        .any(|e| e.as_raw().contains("left-out entries not shown")));
    assert_eq!(out.left_out_count, 1000, "counted before cutting");
}

// ------------------------------------------------- the report limit, as written

/// The lists of `out` as the JSON report writes them (pretty, in a report
/// of several policies, the deepest), and its length.
fn written(out: &GuestOutcome) -> usize {
    serde_json::to_vec_pretty(&serde_json::json!({ "policies": [{
        "resources": out.resources,
        "left_out": out.left_out,
        "errors": out.errors,
        "failure": out.failure,
    }]}))
    .unwrap()
    .len()
}

/// What the host's own fields add to the lists it bounds: the keys above,
/// and its notices of what it cut (one per list, each under 160 bytes).
const ALLOWANCE: usize = 4 * 160 + 64;

/// The error that says `list` was cut, and how many of its entries.
fn cut_error(out: &GuestOutcome, list: &str) -> (usize, usize, String) {
    let error = out
        .errors
        .iter()
        .map(|e| e.as_raw().to_owned())
        .find(|e| e.starts_with("report truncated: ") && e.contains(&format!(" {list} not shown")))
        .unwrap_or_else(|| panic!("no error says {list} were cut: {:?}", out.errors));
    let number = |word: &str| word.replace(',', "").parse::<usize>().unwrap();
    let words: Vec<&str> = error.split(' ').collect();
    (number(words[2]), number(words[4]), error)
}

#[test]
fn two_hundred_thousand_left_out_entries_with_empty_reasons_stay_within_the_limit() {
    let report = contract::Report {
        events: Vec::new(),
        errors: Vec::new(),
        left_out: (0..200_000)
            .map(|i| left_out(&format!("service#u{i}"), ""))
            .collect(),
    };
    let limit = 1 << 20;
    let out = GuestOutcome::new(Ok(report), &[], false, limit);
    assert!(written(&out) <= limit + ALLOWANCE, "{}", written(&out));
    assert!(written(&out) > limit - 100, "what fits is shown");
    let (not_shown, given, error) = cut_error(&out, "left-out entries");
    assert_eq!((not_shown, given), (200_000 - out.left_out.len(), 200_000));
    assert_eq!(
        error,
        format!(
            "report truncated: {} of 200,000 left-out entries not shown (report limit 1048576 bytes)",
            crate::text::thousands(not_shown)
        )
    );
    assert_eq!(out.left_out_count, 200_000, "counted before cutting");
}

#[test]
fn two_hundred_thousand_events_with_tiny_names_stay_within_the_limit() {
    for noop in [false, true] {
        let report = contract::Report {
            events: (0..200_000)
                .map(|i| event(&format!("u{i}"), &[], None))
                .collect(),
            errors: Vec::new(),
            left_out: Vec::new(),
        };
        let limit = 100_000;
        let out = GuestOutcome::new(Ok(report), &[], noop, limit);
        assert!(written(&out) <= limit + ALLOWANCE, "{}", written(&out));
        let (not_shown, given, _) = cut_error(&out, "resources");
        assert_eq!((not_shown, given), (200_000 - out.resources.len(), 200_000));
        assert!(!out.resources.is_empty());
    }
}

#[test]
fn claims_the_host_answers_count_as_written() {
    // Eight claimed actions, none executed: the host's eight errors on
    // each event are what is written, and what is charged.
    let claims = [Action::Started; 8];
    let report = contract::Report {
        events: (0..10_000)
            .map(|i| event(&format!("u{i}"), &claims, None))
            .collect(),
        errors: Vec::new(),
        left_out: Vec::new(),
    };
    let limit = 100_000;
    let out = GuestOutcome::new(Ok(report), &[], false, limit);
    assert!(
        out.resources[0].errors.len() >= 8,
        "{:?}",
        out.resources[0].errors
    );
    assert!(written(&out) <= limit + ALLOWANCE, "{}", written(&out));
    cut_error(&out, "resources");
}

#[test]
fn two_hundred_thousand_policy_errors_are_cut_and_said() {
    let report = contract::Report {
        events: Vec::new(),
        errors: vec![String::new(); 200_000],
        left_out: Vec::new(),
    };
    let out = GuestOutcome::new(Ok(report), &[], false, 1 << 20);
    let (not_shown, given, error) = cut_error(&out, "errors");
    assert_eq!((not_shown, given), (199_900, 200_000));
    assert!(error.ends_with("(at most 100 are shown)"), "{error}");

    // Control characters are six bytes each in JSON: charged as written.
    let report = contract::Report {
        events: Vec::new(),
        errors: vec!["\u{1}".repeat(4_000); 100],
        left_out: Vec::new(),
    };
    let limit = 64 * 1024;
    let out = GuestOutcome::new(Ok(report), &[], false, limit);
    assert!(written(&out) <= limit + ALLOWANCE, "{}", written(&out));
    let (not_shown, given, _) = cut_error(&out, "errors");
    assert_eq!((not_shown, given), (98, 100), "two of 24,000 bytes fit");
}

#[test]
fn left_out_reasons_of_control_characters_count_as_written() {
    let report = contract::Report {
        events: Vec::new(),
        errors: Vec::new(),
        left_out: (0..10_000)
            .map(|i| left_out(&format!("service#u{i}"), &"\u{1}".repeat(512)))
            .collect(),
    };
    let limit = 100_000;
    let out = GuestOutcome::new(Ok(report), &[], false, limit);
    assert!(written(&out) <= limit + ALLOWANCE, "{}", written(&out));
    assert_eq!(out.left_out_count, 10_000);
    cut_error(&out, "left-out entries");
}
