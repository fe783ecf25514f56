//! One policy's result, made once where its run ends and handed to every
//! consumer as the policy finishes (kube-rs `applier`'s stream of
//! results): the watch's journal lines and its crash-loop backoff, the
//! machine's state. A new consumer is one more sink, never one more
//! reading of the report.

use std::collections::BTreeSet;

use super::machine::PolicyOutcome;
use super::RunReport;
use crate::contract::{ErrorKind, Operation};
use crate::provider::{Call, CallRecord, Outcome};
use crate::resource::UnitName;
use crate::service_name::CheckedName;

/// What one policy's run came to, in typed values.
pub struct PolicyResult<'a> {
    /// The policy, as configured (what events name it by).
    pub key: &'a str,
    pub report: &'a RunReport,
    pub outcome: PolicyOutcome,
    /// The units it read or changed, as systemd names them.
    pub units: BTreeSet<UnitName>,
    /// The starts and restarts the host made for it, in order (tried,
    /// whatever came of them: a crash loop's starts fail).
    pub starts: Vec<Start>,
}

/// A start or restart the host made of a unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Start {
    pub unit: UnitName,
    pub why: StartWhy,
}

/// Why the host started a unit: what tells a crash loop from a fight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartWhy {
    /// It was found down: `failed` (it died on its own) or not (someone
    /// stopped it, or it ended cleanly), as the status before the start
    /// said.
    Down { failed: bool },
    /// A restart, for a subscription or a change earlier in the run:
    /// neither a crash nor a fight.
    Restart,
}

impl<'a> PolicyResult<'a> {
    /// The result of `report`, the run of the policy `key`.
    pub fn of(key: &'a str, report: &'a RunReport) -> Self {
        Self {
            key,
            report,
            outcome: PolicyOutcome::of(report),
            units: units_of(&report.calls),
            starts: starts_of(&report.calls),
        }
    }
}

/// The unit a call named, when the host took the name (a name it refused
/// names no unit).
fn unit_of(call: &CallRecord) -> Option<UnitName> {
    if call.outcome == Outcome::Failed(ErrorKind::InvalidName) {
        return None;
    }
    let name = call.service.as_ref()?;
    let checked = CheckedName::check(name.as_raw()).ok()?;
    UnitName::of_checked(&checked)
}

fn units_of(calls: &[CallRecord]) -> BTreeSet<UnitName> {
    calls.iter().filter_map(unit_of).collect()
}

/// The starts and restarts systemd was asked for (refused ones, by the
/// guard or a bad name, were never tried), each with what the unit's last
/// status before it found.
fn starts_of(calls: &[CallRecord]) -> Vec<Start> {
    let mut starts = Vec::new();
    for (i, call) in calls.iter().enumerate() {
        let Call::Guest(operation @ (Operation::Start | Operation::Restart)) = call.operation
        else {
            continue;
        };
        let tried = matches!(
            call.outcome,
            Outcome::Ok
                | Outcome::Failed(
                    ErrorKind::CommandFailed | ErrorKind::TimedOut | ErrorKind::NotFound
                )
        );
        let Some(unit) = unit_of(call).filter(|_| tried) else {
            continue;
        };
        let why = if operation == Operation::Restart {
            StartWhy::Restart
        } else {
            let found = calls[..i].iter().rev().find(|c| {
                c.operation == Call::Guest(Operation::Status) && unit_of(c).as_ref() == Some(&unit)
            });
            StartWhy::Down {
                failed: found.and_then(|c| c.state).is_some_and(|s| s.failed),
            }
        };
        starts.push(Start { unit, why });
    }
    starts
}
