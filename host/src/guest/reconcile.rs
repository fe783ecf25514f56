//! What the host believes of a policy's report: each claimed event's
//! actions, `changed`, `refreshed` and final state replaced by the host's
//! own record of the calls it executed and the statuses they returned
//! ([`confirmed`], one event at a time, so that `guest/bounds.rs` charges
//! the report limit what is written); every disagreement named as a
//! failure of the resource; and an event of its own for every unit the
//! host changed that the report left out ([`unreported`]).

use crate::resource::ResourceRef;
use std::collections::{BTreeMap, BTreeSet};

use super::{Final, ResourceEvent, Source, WatchReport};
use crate::contract::{Done, ErrorKind, Operation};
use crate::left_alone::LeftAloneEvent;
use crate::provider::{Call, CallRecord, Outcome, UnitState};
use crate::text::Untrusted;

/// What the host did, per service name, in call order.
#[derive(Default)]
pub(super) struct HostRecord {
    /// Mutating operations that succeeded.
    executed: BTreeMap<String, Vec<Operation>>,
    /// The state the last successful status of each service returned.
    last_state: BTreeMap<String, UnitState>,
    /// Service names in the order the host first changed them.
    order: Vec<String>,
    /// Mutating operations that failed (a start whose unit did not stay
    /// up among them), with the host's message and the unit's journal.
    failed: BTreeMap<String, Vec<FailedCall>>,
    /// Changes the guard refused because the unit is left alone.
    left_alone: BTreeMap<String, LeftAloneEvent>,
    /// Services a status of failed.
    status_failed: BTreeSet<String>,
}

/// A mutating call the host made that failed.
struct FailedCall {
    operation: Operation,
    error: String,
    journal: Vec<Untrusted>,
}

impl HostRecord {
    pub(super) fn of(calls: &[CallRecord]) -> Self {
        let mut record = Self::default();
        for call in calls {
            let (Call::Guest(operation), Some(service)) = (call.operation, &call.service) else {
                continue;
            };
            // The raw name keys the record; messages made of it are
            // escaped when shown, as every event's errors are.
            let service = service.as_raw();
            if !call.outcome.is_ok() {
                // A unit a later status found gone (a transient unit after
                // its stop) has no last state any more.
                if operation == Operation::Status {
                    record.status_failed.insert(service.to_owned());
                    if call.outcome == Outcome::Failed(ErrorKind::NotFound) {
                        record.last_state.remove(service);
                    }
                }
                if let (true, Some(kind)) = (operation.is_mutating(), call.left_alone) {
                    let refused =
                        record
                            .left_alone
                            .entry(service.to_owned())
                            .or_insert_with(|| LeftAloneEvent {
                                kind,
                                why: call
                                    .error
                                    .as_ref()
                                    .map(|e| e.as_raw().to_owned())
                                    .unwrap_or_default(),
                                would: Vec::new(),
                            });
                    refused.would.push(operation);
                    continue;
                }
                if operation.is_mutating() && call.outcome != Outcome::Failed(ErrorKind::Denied) {
                    record
                        .failed
                        .entry(service.to_owned())
                        .or_default()
                        .push(FailedCall {
                            operation,
                            error: call
                                .error
                                .as_ref()
                                .map(|e| e.as_raw().to_owned())
                                .unwrap_or_default(),
                            journal: call.journal.clone(),
                        });
                }
                continue;
            }
            if let Some(state) = call.state {
                record.last_state.insert(service.to_owned(), state);
            }
            if operation.is_mutating() {
                if !record.executed.contains_key(service) {
                    record.order.push(service.to_owned());
                }
                record
                    .executed
                    .entry(service.to_owned())
                    .or_default()
                    .push(operation);
            }
        }
        record
    }
}

/// "stopped and disabled", "started, enabled and restarted".
fn joined(done: &[Done]) -> String {
    let words: Vec<&str> = done.iter().map(|d| d.as_str()).collect();
    match &words[..] {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// A claimed event, its outcome replaced by the host's record of it (which
/// is taken out of `host`), failed with every disagreement named.
pub(super) fn confirmed(mut event: ResourceEvent, host: &mut HostRecord) -> ResourceEvent {
    let name = event.resource.name().to_owned();
    let executed = done(host.executed.remove(&name).unwrap_or_default());
    let failed_calls = host.failed.remove(&name).unwrap_or_default();
    let mut problems = claims_not_executed(&event, &name, &executed, &failed_calls);
    let other_failures = !failed_calls.is_empty() || host.status_failed.contains(&name);
    event.journal = failed_calls.into_iter().flat_map(|f| f.journal).collect();
    let unreported: Vec<Done> = executed
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
                claim.ensure.as_str(),
                enabled_word(claim.enabled),
                found.ensure.as_str(),
                enabled_word(found.enabled)
            ));
        }
    }
    event.changed = !executed.is_empty();
    event.refreshed = executed.contains(&Done::Restarted);
    event.actions = executed;
    event.final_state = found;
    event.noop_message = None;
    event.source = Source::Host;
    // Changes refused only because the unit is left alone are what the
    // operator or the hold asked for: said, not failed. The policy's
    // errors were its account of that refusal.
    if let Some(refused) = host.left_alone.remove(&name) {
        if problems.is_empty() && !other_failures {
            event.failed = false;
            event.errors.clear();
        }
        event.left_alone = Some(refused);
    }
    event.failed |= !problems.is_empty();
    event
        .errors
        .extend(problems.into_iter().map(Untrusted::new));
    event
}

/// The policy's claimed actions the host did not execute (or whose call
/// failed), and every call that failed, named; a call that failed fails
/// its resource whatever the policy says (a start whose unit did not stay
/// up is never a success).
fn claims_not_executed(
    event: &ResourceEvent,
    name: &str,
    executed: &[Done],
    failed_calls: &[FailedCall],
) -> Vec<String> {
    let mut problems = Vec::new();
    for claim in &event.actions {
        if !executed.contains(claim) {
            let (claim, verb) = (claim.as_str(), claim.verb().as_str());
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
    if !event.failed {
        for f in failed_calls {
            let problem = format!("{} {name}: {}", f.operation.verb(), f.error);
            if !problems.contains(&problem) {
                problems.push(problem);
            }
        }
    }
    problems
}

/// An event for every unit the host changed that no event named.
pub(super) fn unreported(mut host: HostRecord, report_incomplete: bool) -> Vec<ResourceEvent> {
    let mut events = Vec::new();
    for name in host.order {
        let Some(executed) = host.executed.remove(&name) else {
            continue;
        };
        // A change that executed passed the guard's name check: its name
        // always parses.
        let Ok(resource) = ResourceRef::parse_service(&format!("service#{name}")) else {
            continue;
        };
        let actions = done(executed);
        let why = if report_incomplete {
            " (its report was cut short or never came)"
        } else {
            ""
        };
        events.push(ResourceEvent {
            resource,
            changed: true,
            refreshed: actions.contains(&Done::Restarted),
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
            left_alone: None,
        });
    }
    events
}

/// What carrying out `operations` did, by the words reports use.
fn done(operations: Vec<Operation>) -> Vec<Done> {
    operations
        .into_iter()
        .filter_map(|o| o.word().done())
        .collect()
}

fn enabled_word(enabled: bool) -> &'static str {
    if enabled {
        "enabled"
    } else {
        "disabled"
    }
}
