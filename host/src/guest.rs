//! The guest boundary: the one place that turns what a policy returned into
//! the host's own types, and decides what to believe of it.
//!
//! A policy is untrusted. Everything it returns is checked here before any
//! other part of the host sees it: resource names must be `service#NAME`
//! with a valid service name, every string and list is bounded, and the whole
//! text (its failure message included) is held to `--report-limit`.
//!
//! **The host believes only what it did.** In a normal run each resource's
//! actions, `changed`, `refreshed` and final state come from the calls the
//! host executed and the statuses it returned, not from the policy's account;
//! the policy contributes what only it knows (what it asked for, its errors,
//! its order). Where the two disagree the resource fails with a message that
//! names the disagreement, and a unit the host changed that the report leaves
//! out (or that a policy changed before it failed) gets an event of its own.
//! In a noop run nothing executes: the "would have" claims are the policy's,
//! and each event says so (`source: "policy"`).
//!
//! The references of a policy's subscriptions are its text too: what the
//! host found of them joins the events within the same limit
//! (`guest/subscriptions.rs`).
//!
//! What comes out holds no contract type, so the `report` module only renders.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::contract::{self, Action, Ensure, ErrorKind, Operation};
use crate::provider::{Call, CallRecord, Outcome, UnitState};
use crate::runtime::RunFailure;
use crate::service_name::{quote, CheckedName};
use crate::text::{truncate, Untrusted, TRUNCATED};
use crate::watch::survey::Survey;

mod subscriptions;

pub use subscriptions::{Counts, Trigger, WatchReport};

/// The longest single string (a message, a resource name) kept from a guest.
const MAX_GUEST_STRING: usize = 4096;
/// The most errors kept per event.
const MAX_ERRORS_PER_EVENT: usize = 100;
/// The most actions one resource can have taken (start or stop or restart,
/// then enable or disable); more is a malformed report.
const MAX_ACTIONS: usize = 8;

/// The desired state the policy declared for a resource.
#[derive(Debug, Clone, Serialize)]
pub struct Requested {
    pub ensure: &'static str,
    pub enable: Option<bool>,
}

/// The state found when a resource was done.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Final {
    pub ensure: &'static str,
    pub enabled: bool,
}

impl From<UnitState> for Final {
    fn from(s: UnitState) -> Self {
        Self {
            ensure: if s.running { "running" } else { "stopped" },
            enabled: s.enabled,
        }
    }
}

/// Who vouches for a resource's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// Derived from the calls the host executed and the statuses it returned.
    Host,
    /// The policy's own account: a noop run's "would have" claims.
    Policy,
}

/// One resource's outcome, as the host believes it.
#[derive(Debug, Clone, Serialize)]
pub struct ResourceEvent {
    pub resource: String,
    pub changed: bool,
    pub refreshed: bool,
    pub noop: bool,
    /// The policy's words, shown escaped ([`Untrusted`]).
    pub noop_message: Option<Untrusted>,
    pub actions: Vec<&'static str>,
    pub failed: bool,
    /// The policy's errors and the host's, shown escaped ([`Untrusted`]).
    pub errors: Vec<Untrusted>,
    /// What the policy asked for; `None` for a unit the host changed that
    /// the policy's report left out.
    pub requested: Option<Requested>,
    #[serde(rename = "final")]
    pub final_state: Option<Final>,
    pub source: Source,
    /// What the host found of the service's subscriptions: the references
    /// it watches, what triggered the service, warnings for the references
    /// it does not watch, and counts (`watched`, `triggered_by`,
    /// `warnings`, `reference_counts` in the event's JSON).
    #[serde(flatten)]
    pub watch: WatchReport,
    /// For a start, restart or settle window of this service that failed:
    /// the last lines the unit wrote to the journal, as the host read them
    /// (the unit's text, escaped when shown; never the policy's).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub journal: Vec<Untrusted>,
}

/// What the host takes from one run of a guest.
#[derive(Debug, Clone, Default)]
pub struct GuestOutcome {
    pub resources: Vec<ResourceEvent>,
    /// Problems with the run as a whole: policy-level errors from the guest,
    /// a malformed or truncated report.
    pub errors: Vec<Untrusted>,
    /// Why the policy did not finish: a limit, a trap (panic, stack overflow).
    pub failure: Option<RunFailure>,
    /// What is left of `--report-limit` for the rest of the guest's text
    /// (its subscriptions' references).
    room: usize,
}

impl GuestOutcome {
    /// Checks a guest's report (or takes its failure), keeping at most
    /// `max_bytes` of guest text, and reconciles it with `calls`, the host's
    /// record of what this policy's run executed.
    pub fn new(
        outcome: Result<contract::Report, RunFailure>,
        calls: &[CallRecord],
        noop: bool,
        max_bytes: usize,
    ) -> Self {
        let (claimed, mut errors, failure, cut, used) = match outcome {
            Ok(report) => {
                let (events, errors, cut, used) = bounded_report(report, max_bytes);
                (events, errors, None, cut, used)
            }
            Err(mut failure) => {
                failure.message = Untrusted::new(truncate(
                    failure.message.as_raw().to_owned(),
                    MAX_GUEST_STRING.min(max_bytes),
                    TRUNCATED,
                ));
                let used = failure.message.len();
                (Vec::new(), Vec::new(), Some(failure), false, used)
            }
        };
        let resources = if noop {
            claimed
        } else {
            reconcile(claimed, HostRecord::of(calls), cut || failure.is_some())
        };
        errors.truncate(MAX_ERRORS_PER_EVENT + 1);
        Self {
            resources,
            errors,
            failure,
            room: max_bytes.saturating_sub(used),
        }
    }

    /// Adds to each event what `survey` found of its service's
    /// subscriptions, within what is left of the report limit
    /// (`guest/subscriptions.rs`).
    pub fn watch(&mut self, survey: &Survey) {
        self.room = subscriptions::annotate(&mut self.resources, survey, self.room);
    }
}

/// What the host did, per service name, in call order.
#[derive(Default)]
struct HostRecord {
    /// Mutating operations that succeeded.
    executed: BTreeMap<String, Vec<Operation>>,
    /// The state the last successful status of each service returned.
    last_state: BTreeMap<String, UnitState>,
    /// Service names in the order the host first changed them.
    order: Vec<String>,
    /// Mutating operations that failed (a start whose unit did not stay
    /// up among them), with the host's message and the unit's journal.
    failed: BTreeMap<String, Vec<FailedCall>>,
}

/// A mutating call the host made that failed.
struct FailedCall {
    operation: Operation,
    error: String,
    journal: Vec<Untrusted>,
}

impl HostRecord {
    fn of(calls: &[CallRecord]) -> Self {
        let mut record = Self::default();
        for call in calls {
            let (Call::Guest(operation), Some(service)) = (call.operation, &call.service) else {
                continue;
            };
            if !call.outcome.is_ok() {
                // A unit a later status found gone (a transient unit after
                // its stop) has no last state any more.
                if operation == Operation::Status
                    && call.outcome == Outcome::Failed(ErrorKind::NotFound)
                {
                    record.last_state.remove(service);
                }
                if operation.is_mutating() && call.outcome != Outcome::Failed(ErrorKind::Denied) {
                    record
                        .failed
                        .entry(service.clone())
                        .or_default()
                        .push(FailedCall {
                            operation,
                            error: call.error.clone().unwrap_or_default(),
                            journal: call.journal.clone(),
                        });
                }
                continue;
            }
            if let Some(state) = call.state {
                record.last_state.insert(service.clone(), state);
            }
            if operation.is_mutating() {
                if !record.executed.contains_key(service) {
                    record.order.push(service.clone());
                }
                record
                    .executed
                    .entry(service.clone())
                    .or_default()
                    .push(operation);
            }
        }
        record
    }
}

/// The past tense reports use for an operation that was carried out.
fn done(operation: Operation) -> &'static str {
    match operation {
        Operation::Start => "started",
        Operation::Stop => "stopped",
        Operation::Restart => "restarted",
        Operation::Enable => "enabled",
        Operation::Disable => "disabled",
        Operation::Status => "queried",
    }
}

/// The operation an action word stands for, as the report names it.
fn verb_of(action: &str) -> &str {
    match action {
        "started" => "start",
        "stopped" => "stop",
        "restarted" => "restart",
        "enabled" => "enable",
        "disabled" => "disable",
        other => other,
    }
}

/// "stopped and disabled", "started, enabled and restarted".
fn joined(words: &[&str]) -> String {
    match words {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// The guest's events with their outcomes replaced by the host's record,
/// then an event for every unit the host changed that no event names.
fn reconcile(
    claimed: Vec<ResourceEvent>,
    mut host: HostRecord,
    report_incomplete: bool,
) -> Vec<ResourceEvent> {
    let mut events = Vec::with_capacity(claimed.len());
    for mut event in claimed {
        let name = event
            .resource
            .strip_prefix("service#")
            .unwrap_or_default()
            .to_owned();
        let executed: Vec<&'static str> = host
            .executed
            .remove(&name)
            .unwrap_or_default()
            .into_iter()
            .map(done)
            .collect();
        let failed_calls = host.failed.remove(&name).unwrap_or_default();
        let mut problems = Vec::new();
        for claim in &event.actions {
            if !executed.contains(claim) {
                let verb = verb_of(claim);
                match failed_calls.iter().find(|f| f.operation.verb() == verb) {
                    Some(f) => problems.push(format!(
                        "the policy reported {name} {claim}, but its {verb} failed: {}",
                        f.error
                    )),
                    None => problems.push(format!(
                        "the policy reported {name} {claim}, but no {verb} was executed"
                    )),
                }
            }
        }
        // A call that failed fails its resource, whatever the policy says:
        // a start whose unit did not stay up is never a success.
        if !event.failed {
            for f in &failed_calls {
                let problem = format!("{} {name}: {}", f.operation.verb(), f.error);
                if !problems.contains(&problem) {
                    problems.push(problem);
                }
            }
        }
        event.journal = failed_calls.into_iter().flat_map(|f| f.journal).collect();
        let unreported: Vec<&str> = executed
            .iter()
            .filter(|a| !event.actions.contains(a))
            .copied()
            .collect();
        if !unreported.is_empty() {
            problems.push(format!(
                "{name} was {} by the policy but not reported",
                joined(&unreported)
            ));
        }
        if event.changed && executed.is_empty() && event.actions.is_empty() {
            problems.push(format!(
                "the policy reported {name} changed, but nothing was executed"
            ));
        }
        let found = host.last_state.get(&name).copied().map(Final::from);
        if let (Some(claim), Some(found)) = (&event.final_state, &found) {
            if claim != found {
                problems.push(format!(
                    "the policy reported {name} {} and {}, but its last status was {} and {}",
                    claim.ensure,
                    enabled_word(claim.enabled),
                    found.ensure,
                    enabled_word(found.enabled)
                ));
            }
        }
        event.changed = !executed.is_empty();
        event.refreshed = executed.contains(&"restarted");
        event.actions = executed;
        event.final_state = found;
        event.noop_message = None;
        event.source = Source::Host;
        event.failed |= !problems.is_empty();
        event
            .errors
            .extend(problems.into_iter().map(Untrusted::new));
        events.push(event);
    }
    for name in host.order {
        let Some(executed) = host.executed.remove(&name) else {
            continue;
        };
        let actions: Vec<&'static str> = executed.into_iter().map(done).collect();
        let why = if report_incomplete {
            " (its report was cut short or never came)"
        } else {
            ""
        };
        events.push(ResourceEvent {
            resource: format!("service#{name}"),
            changed: true,
            refreshed: actions.contains(&"restarted"),
            noop: false,
            noop_message: None,
            failed: true,
            errors: vec![Untrusted::new(format!(
                "{name} was {} by the policy but not reported{why}",
                joined(&actions)
            ))],
            actions,
            requested: None,
            final_state: host.last_state.get(&name).copied().map(Final::from),
            source: Source::Host,
            watch: WatchReport::default(),
            journal: host
                .failed
                .remove(&name)
                .unwrap_or_default()
                .into_iter()
                .flat_map(|f| f.journal)
                .collect(),
        });
    }
    events
}

fn enabled_word(enabled: bool) -> &'static str {
    if enabled {
        "enabled"
    } else {
        "disabled"
    }
}

fn ensure_name(e: Ensure) -> &'static str {
    match e {
        Ensure::Running => "running",
        Ensure::Stopped => "stopped",
    }
}

fn action_name(a: Action) -> &'static str {
    match a {
        Action::Started => "started",
        Action::Stopped => "stopped",
        Action::Restarted => "restarted",
        Action::Enabled => "enabled",
        Action::Disabled => "disabled",
    }
}

fn bounded(text: String, max: usize) -> Untrusted {
    Untrusted::new(truncate(text, max, TRUNCATED))
}

impl ResourceEvent {
    /// Converts a guest event, checking its resource name and bounding its text.
    fn from_guest(e: contract::Event) -> Result<Self, String> {
        let name = e.resource.strip_prefix("service#").unwrap_or("");
        if CheckedName::check(name).is_err() {
            return Err(format!(
                "malformed report: resource {} is not service#NAME with a valid service name",
                quote(&truncate(e.resource, 256, "..."))
            ));
        }
        let mut errors: Vec<Untrusted> = e
            .errors
            .into_iter()
            .take(MAX_ERRORS_PER_EVENT + 1)
            .map(|m| bounded(m, MAX_GUEST_STRING))
            .collect();
        if errors.len() > MAX_ERRORS_PER_EVENT {
            errors.truncate(MAX_ERRORS_PER_EVENT);
            errors.push(Untrusted::new(format!("more errors{TRUNCATED}")));
        }
        Ok(Self {
            resource: e.resource,
            changed: e.changed,
            refreshed: e.refreshed,
            noop: e.noop,
            noop_message: e.noop_message.map(|m| bounded(m, MAX_GUEST_STRING)),
            actions: e
                .actions
                .into_iter()
                .take(MAX_ACTIONS)
                .map(action_name)
                .collect(),
            // A guest that reports errors has failed, whatever its flag says.
            failed: e.failed || !errors.is_empty(),
            errors,
            requested: Some(Requested {
                ensure: ensure_name(e.requested.ensure),
                enable: e.requested.enable,
            }),
            final_state: e.final_state.map(|f| Final {
                ensure: ensure_name(f.ensure),
                enabled: f.enabled,
            }),
            source: Source::Policy,
            watch: WatchReport::default(),
            journal: Vec::new(),
        })
    }

    /// The bytes of text this event holds, for the report size limit.
    fn text_size(&self) -> usize {
        self.resource.len()
            + self.noop_message.as_ref().map_or(0, Untrusted::len)
            + self.errors.iter().map(Untrusted::len).sum::<usize>()
    }
}

/// Converts the guest's report, keeping at most `max_bytes` of text: the rest
/// of the events are dropped, with an error saying so, rather than letting a
/// guest make the host build an enormous report. The flag says whether
/// anything was dropped; the count is the bytes of text kept.
fn bounded_report(
    report: contract::Report,
    max_bytes: usize,
) -> (Vec<ResourceEvent>, Vec<Untrusted>, bool, usize) {
    let total = report.events.len();
    let mut used = 0;
    let mut events = Vec::new();
    let mut errors: Vec<Untrusted> = Vec::new();
    let mut cut = false;
    for guest_event in report.events {
        match ResourceEvent::from_guest(guest_event) {
            Ok(event) => {
                used += event.text_size();
                if used > max_bytes {
                    errors.push(Untrusted::new(format!(
                        "report truncated: kept {} of {total} events, the report limit is {max_bytes} bytes",
                        events.len()
                    )));
                    cut = true;
                    break;
                }
                events.push(event);
            }
            Err(problem) => {
                errors.push(Untrusted::new(problem));
                cut = true;
                break;
            }
        }
    }
    for message in report.errors.into_iter().take(MAX_ERRORS_PER_EVENT) {
        used += message.len().min(MAX_GUEST_STRING);
        if used > max_bytes {
            errors.push(Untrusted::new(format!("policy errors{TRUNCATED}")));
            break;
        }
        errors.push(bounded(message, MAX_GUEST_STRING));
    }
    (events, errors, cut, used.min(max_bytes))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::contract::{FinalState, RequestedState};

    fn call(operation: Operation, service: &str, state: Option<(bool, bool)>) -> CallRecord {
        CallRecord {
            operation: Call::Guest(operation),
            service: Some(service.to_owned()),
            outcome: Outcome::Ok,
            error: None,
            state: state.map(|(running, enabled)| UnitState { running, enabled }),
            journal: Vec::new(),
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
        assert_eq!(web.actions, ["started", "enabled"]);
        assert_eq!(web.source, Source::Host);
        assert_eq!(
            web.final_state,
            Some(Final {
                ensure: "running",
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
        start.error =
            Some("web.service did not stay up: 1s after its job ended it is failed".into());
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
        assert_eq!(sshd.actions, ["stopped", "disabled"]);
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
                ensure: "stopped",
                enabled: false
            })
        );
    }

    #[test]
    fn changes_made_before_a_trap_are_reported() {
        let failure = RunFailure {
            class: "trap",
            message: Untrusted::new("x".repeat(1 << 20)),
        };
        let calls = [call(Operation::Restart, "db", None)];
        let out = GuestOutcome::new(Err(failure), &calls, false, 1 << 20);
        assert_eq!(out.resources[0].actions, ["restarted"]);
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
}
