//! The guest boundary: the one place that turns what a policy returned into
//! the host's own types, and decides what to believe of it.
//!
//! A policy is untrusted. Everything it returns is checked here before any
//! other part of the host sees it: resource names must be `service#NAME`
//! with a valid service name, every string and list is bounded, and the whole
//! report is held to `--report-limit` as it is written: each entry of each
//! list costs the bytes of its JSON, and what does not fit is cut with an
//! error saying how many entries of which list were not shown.
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
//! (`guest/subscriptions.rs`). Bounding the policy's text is `guest/bounds.rs`;
//! reconciling its claims with the host's record, `guest/reconcile.rs`.
//!
//! What comes out holds no contract type, so the `report` module only renders.

use crate::left_alone::{LeftAlone, LeftAloneEvent};
use serde::{Serialize, Serializer};

use crate::contract;
use crate::provider::{CallRecord, UnitState};
use crate::resource::ResourceRef;
use crate::runtime::RunFailure;
use crate::subscriptions::survey::Survey;
use crate::text::{json_len_at, truncate, Untrusted, TRUNCATED};

mod bounds;
mod reconcile;
mod subscriptions;
#[cfg(test)]
mod tests;

use self::bounds::{Bounded, Budget, MAX_GUEST_STRING};
use self::reconcile::HostRecord;
pub use crate::contract::{Done, State};
pub use subscriptions::{Counts, Trigger, WatchReport};

/// The desired state the policy declared for a resource.
#[derive(Debug, Clone, Serialize)]
pub struct Requested {
    #[serde(serialize_with = "word")]
    pub ensure: State,
    pub enable: Option<bool>,
}

/// The state found when a resource was done.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Final {
    #[serde(serialize_with = "word")]
    pub ensure: State,
    pub enabled: bool,
}

impl From<UnitState> for Final {
    fn from(s: UnitState) -> Self {
        Self {
            ensure: State::of(s.running),
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
    /// Always a `service#NAME`, checked where the guest gave it.
    pub resource: ResourceRef,
    pub changed: bool,
    pub refreshed: bool,
    pub noop: bool,
    /// The policy's words, shown escaped ([`Untrusted`]).
    pub noop_message: Option<Untrusted>,
    #[serde(serialize_with = "words")]
    pub actions: Vec<Done>,
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
    /// Set when the service's unit is left alone (paused by the operator,
    /// held back after a crash loop): changes the host refused for that
    /// reason are said here, and are not a failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub left_alone: Option<LeftAloneEvent>,
}

/// What became of one resource, in parts that add up: every resource is
/// exactly one of these. Decided in one place ([`ResourceEvent::outcome`],
/// from the event the run ended with), and read by every consumer: the
/// summary, the human report, the metrics, the watch's lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceOutcome {
    /// Changed, and nothing failed.
    Changed,
    /// Failed; `after_changes` when something was changed first (the
    /// changes are real: a later run starts from them).
    Failed { after_changes: bool },
    /// Its unit was left alone (paused by the operator, held back after a
    /// crash loop), and nothing else failed.
    LeftAlone,
    /// Needed nothing.
    Unchanged,
}

impl ResourceOutcome {
    /// Its word in the machine's state: `changed`, `failed`,
    /// `failed-after-changes`, `left-alone`, `unchanged`.
    pub fn as_str(self) -> &'static str {
        match self {
            ResourceOutcome::Changed => "changed",
            ResourceOutcome::Failed {
                after_changes: false,
            } => "failed",
            ResourceOutcome::Failed {
                after_changes: true,
            } => "failed-after-changes",
            ResourceOutcome::LeftAlone => "left-alone",
            ResourceOutcome::Unchanged => "unchanged",
        }
    }

    /// The outcome `word` names ([`Self::as_str`]).
    pub fn parse(word: &str) -> Option<Self> {
        [
            ResourceOutcome::Changed,
            ResourceOutcome::Failed {
                after_changes: false,
            },
            ResourceOutcome::Failed {
                after_changes: true,
            },
            ResourceOutcome::LeftAlone,
            ResourceOutcome::Unchanged,
        ]
        .into_iter()
        .find(|o| o.as_str() == word)
    }
}

impl ResourceEvent {
    /// What became of the resource: a failure first, then a unit left
    /// alone, then a change.
    pub fn outcome(&self) -> ResourceOutcome {
        if self.failed {
            ResourceOutcome::Failed {
                after_changes: self.changed,
            }
        } else if self.left_alone.is_some() {
            ResourceOutcome::LeftAlone
        } else if self.changed {
            ResourceOutcome::Changed
        } else {
            ResourceOutcome::Unchanged
        }
    }

    /// Whether a watch says a line of it: it changed or failed (a unit
    /// left alone says so only when something was done of it anyway).
    pub fn worth_a_line(&self) -> bool {
        match self.outcome() {
            ResourceOutcome::Changed | ResourceOutcome::Failed { .. } => true,
            ResourceOutcome::LeftAlone => self.changed,
            ResourceOutcome::Unchanged => false,
        }
    }
}

/// A resource the policy declares for other machines, and why not this
/// one, in the policy's words (`when role = web (this machine: db)`).
#[derive(Debug, Clone, Serialize)]
pub struct LeftOutEntry {
    /// A `service#NAME`, checked where the guest gave it.
    pub resource: ResourceRef,
    pub why: Untrusted,
    /// Set when another of the policy's entries applied this entry's unit
    /// on this machine (one unit declared once per kind of machine): the
    /// unit has its event among the resources, and only this entry of it
    /// was left out.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unit_applied: bool,
}

/// What the host takes from one run of a guest.
#[derive(Debug, Clone, Default)]
pub struct GuestOutcome {
    pub resources: Vec<ResourceEvent>,
    /// Resources the policy left out on this machine. One whose unit the
    /// report applied under another entry is kept, marked
    /// [`LeftOutEntry::unit_applied`]; one whose unit the host changed and
    /// the report has no event of is dropped with an error.
    pub left_out: Vec<LeftOutEntry>,
    /// How many resources the policy left out on this machine: all of
    /// them, also those `--report-limit` did not show (an entry whose unit
    /// another entry applied is not counted).
    pub left_out_count: usize,
    /// Problems with the run as a whole: policy-level errors from the guest,
    /// a malformed or truncated report.
    pub errors: Vec<Untrusted>,
    /// Why the policy did not finish: a limit, a trap (panic, stack overflow).
    pub failure: Option<RunFailure>,
    /// What is left of `--report-limit` for the rest of the guest's report
    /// (its subscriptions' references), with what each event reserved for
    /// its subscriptions' counts.
    room: usize,
}

impl GuestOutcome {
    /// Checks a guest's report (or takes its failure), keeping at most
    /// `max_bytes` of it as its JSON is written (`guest/bounds.rs`), and
    /// reconciles it with `calls`, the host's record of what this policy's
    /// run executed.
    pub fn new(
        outcome: Result<contract::Report, RunFailure>,
        calls: &[CallRecord],
        noop: bool,
        max_bytes: usize,
    ) -> Self {
        let mut budget = Budget::new(max_bytes);
        let reserve = subscriptions::counts_reserve();
        // A noop run executes nothing: its claims are the policy's.
        let host = (!noop).then(|| HostRecord::of(calls));
        let (kept, failure) = match outcome {
            Ok(report) => (
                bounds::bounded_report(report, host, &mut budget, reserve),
                None,
            ),
            Err(mut failure) => {
                failure.message = Untrusted::new(truncate(
                    failure.message.as_raw().to_owned(),
                    MAX_GUEST_STRING.min(max_bytes),
                    TRUNCATED,
                ));
                budget.charge(json_len_at(&failure, bounds::LIST_DEPTH));
                let events = host.map_or_else(Vec::new, |host| {
                    bounds::host_events(host, true, &mut budget, reserve)
                });
                (
                    Bounded {
                        events,
                        errors: Vec::new(),
                        left_out: Vec::new(),
                        left_out_count: 0,
                    },
                    Some(failure),
                )
            }
        };
        Self {
            room: budget.left() + reserve * kept.events.len(),
            resources: kept.events,
            left_out: kept.left_out,
            left_out_count: kept.left_out_count,
            errors: kept.errors,
            failure,
        }
    }

    /// Adds to each event what `survey` found of its service's
    /// subscriptions, within what is left of the report limit
    /// (`guest/subscriptions.rs`).
    pub fn watch(&mut self, survey: &Survey) {
        self.room = subscriptions::annotate(&mut self.resources, survey, self.room);
    }

    /// Says of each service whose unit is in `set` that it was left alone,
    /// and why in the host's words, whether or not the run refused it
    /// anything (a paused unit is said paused in every run's report).
    pub fn left_alone(&mut self, set: &LeftAlone) {
        if set.is_empty() {
            return;
        }
        for event in &mut self.resources {
            let Some(unit) = event.resource.unit() else {
                continue;
            };
            let Some(reason) = set.reason(unit.as_str()) else {
                continue;
            };
            let said = event.left_alone.get_or_insert_with(|| LeftAloneEvent {
                kind: reason.kind,
                why: String::new(),
                would: Vec::new(),
            });
            said.kind = reason.kind;
            said.why.clone_from(&reason.why);
        }
    }
}

/// A state as its word (`running`).
fn word<S: Serializer>(state: &State, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(state.as_str())
}

/// Actions as their words (`["started", "enabled"]`).
fn words<S: Serializer>(done: &[Done], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(done.iter().map(|d| d.as_str()))
}

/// For tests: the host's event of `resource` after `actions`, the rest as
/// a plain run leaves it; a test changes what it is about.
#[cfg(test)]
impl ResourceEvent {
    pub(crate) fn of_host(resource: &str, actions: Vec<Done>) -> Self {
        Self {
            resource: resource.into(),
            changed: !actions.is_empty(),
            refreshed: false,
            noop: false,
            noop_message: None,
            actions,
            failed: false,
            errors: Vec::new(),
            requested: None,
            final_state: None,
            source: Source::Host,
            watch: WatchReport::default(),
            journal: Vec::new(),
            left_alone: None,
        }
    }
}
