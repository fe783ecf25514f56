//! The run report: what the guest said happened (as the `guest` module
//! checked it), joined with what the host actually executed; rendered for
//! people, as one JSON document, or as Prometheus metrics. Renders only: it
//! holds no contract type and decides nothing about what to believe.

pub mod catalogue;
mod human;
pub mod machine;
mod metrics;
pub mod result;

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::guest::{GuestOutcome, LeftOutEntry, ResourceEvent, ResourceOutcome};
use crate::provider::CallRecord;
use crate::runtime::RunFailure;
use crate::text::{millis, Untrusted};

/// What the host checked of the policy's signature.
#[derive(Debug, Clone, Serialize)]
pub struct SignatureReport {
    pub verified: bool,
    pub key_id: Option<String>,
    pub trusted_comment: Option<Untrusted>,
    pub warning: Option<String>,
    /// The settings document's signature, when the run had settings: the
    /// settings are the desired state as much as the code is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settings: Option<Box<SignatureReport>>,
}

impl SignatureReport {
    pub fn verified(v: crate::signature::Verified) -> Self {
        Self {
            verified: true,
            key_id: Some(v.key_id),
            trusted_comment: Some(v.trusted_comment),
            warning: None,
            settings: None,
        }
    }

    pub fn unverified(warning: &str) -> Self {
        Self {
            verified: false,
            key_id: None,
            trusted_comment: None,
            warning: Some(warning.to_owned()),
            settings: None,
        }
    }
}

/// Where a policy or settings document came from: a path or a registry
/// reference, and the digest of what ran (the manifest digest for a
/// reference, the SHA-256 of the bytes for a file).
#[derive(Debug, Clone, Serialize)]
pub struct SourceReport {
    pub location: String,
    pub digest: String,
    /// The registry could not be reached, and this is the last copy
    /// verified for this reference.
    pub stale: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stale_reason: Option<String>,
}

/// A run cut short by a signal: by which, what it had changed, and what it
/// did not reach.
#[derive(Debug, Clone, Serialize)]
pub struct Interruption {
    pub signal: &'static str,
    /// The resources changed before the run stopped.
    pub done: Vec<String>,
    /// The resources whose changes were not made (their calls were not
    /// run), and the policies that did not start.
    pub not_reached: Vec<String>,
}

/// How the policy's code was obtained.
#[derive(Debug, Clone, Serialize)]
pub struct CompileInfo {
    pub cache: crate::runtime::CacheOutcome,
    pub duration_ms: f64,
}

impl CompileInfo {
    /// How `policy` was obtained: from the cache or compiled, and how long
    /// that and its linking took.
    pub fn of(policy: &crate::runtime::LoadedPolicy) -> Self {
        Self {
            cache: policy.cache,
            duration_ms: millis(policy.load_time),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ProviderInfo {
    pub name: &'static str,
    pub available: bool,
    pub detail: Option<String>,
    /// How status was read: `dbus` or `systemctl`.
    pub status_reader: &'static str,
    /// Why not over D-Bus, when not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_note: Option<String>,
}

/// Resources by outcome, in parts that add up: every resource is exactly
/// one of `changed`, `failed`, `left_alone` or `unchanged`. A run's
/// summary and the machine's state count the same way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Counts {
    pub resources: usize,
    /// Resources changed that did not fail.
    pub changed: usize,
    /// Resources that failed, whether or not something was changed first.
    pub failed: usize,
    /// Of the failed ones, those that changed something before failing
    /// (the changes are real: a later run starts from them).
    pub failed_after_changes: usize,
    /// Resources whose unit was left alone (paused by the operator, held
    /// back after a crash loop) and that did not fail otherwise.
    pub left_alone: usize,
    pub unchanged: usize,
    /// Resources the policies declare for other machines (their `when`
    /// did not match this one's facts): not among `resources`. An entry
    /// left out whose unit another entry applied is not counted.
    pub left_out: usize,
}

impl Counts {
    /// The counts of `resources`, by the outcome each ended with.
    pub fn of_events(resources: &[crate::guest::ResourceEvent]) -> Self {
        let count = |wanted: fn(ResourceOutcome) -> bool| {
            resources.iter().filter(|r| wanted(r.outcome())).count()
        };
        Counts {
            resources: resources.len(),
            changed: count(|o| o == ResourceOutcome::Changed),
            failed: count(|o| matches!(o, ResourceOutcome::Failed { .. })),
            failed_after_changes: count(|o| {
                o == ResourceOutcome::Failed {
                    after_changes: true,
                }
            }),
            left_alone: count(|o| o == ResourceOutcome::LeftAlone),
            unchanged: count(|o| o == ResourceOutcome::Unchanged),
            left_out: 0,
        }
    }

    /// Adds `other`'s counts.
    pub fn add(&mut self, other: &Counts) {
        self.resources += other.resources;
        self.changed += other.changed;
        self.failed += other.failed;
        self.failed_after_changes += other.failed_after_changes;
        self.left_alone += other.left_alone;
        self.unchanged += other.unchanged;
        self.left_out += other.left_out;
    }
}

/// What a run did: its resources' counts, its policies that failed as a
/// whole, how long it took, and whether it succeeded.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    #[serde(flatten)]
    pub counts: Counts,
    /// Policies that failed as a whole (a policy-level error, a limit, a
    /// trap), whatever their resources say: a policy that failed before
    /// reporting any resource still counts here.
    pub policies_failed: usize,
    pub duration_ms: f64,
    pub success: bool,
}

impl Summary {
    /// The counts of `resources`, as one policy's run: no policy-level
    /// failure, no duration, success when none failed.
    pub fn of_events(resources: &[crate::guest::ResourceEvent]) -> Self {
        let counts = Counts::of_events(resources);
        Summary {
            success: counts.failed == 0,
            counts,
            policies_failed: 0,
            duration_ms: 0.0,
        }
    }
}

/// Everything one `host run` of one policy produced.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// Where the policy comes from, as configured (a path or an `oci://`
    /// reference): what the machine's state knows it by from run to run.
    #[serde(skip)]
    pub key: String,
    pub policy: String,
    /// The machine's labels (host.toml `[labels]`), for grouping reports.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    pub source: SourceReport,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settings_source: Option<SourceReport>,
    pub noop: bool,
    pub signature: SignatureReport,
    pub compile: CompileInfo,
    pub provider: ProviderInfo,
    pub resources: Vec<ResourceEvent>,
    /// Resources the policy declares for other machines, and why not this
    /// one (the policy's words, shown escaped).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<LeftOutEntry>,
    /// Problems with the run as a whole: policy-level errors from the guest,
    /// a malformed or truncated report. Shown escaped.
    pub errors: Vec<Untrusted>,
    /// Why the policy did not finish: a limit, a trap (panic, stack overflow).
    pub failure: Option<RunFailure>,
    pub calls: Vec<CallRecord>,
    pub log: Untrusted,
    pub summary: Summary,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<Interruption>,
}

/// What one run produced, before it is summarised.
#[derive(Debug, Clone)]
pub struct RunRecord {
    pub key: String,
    pub policy: String,
    pub source: SourceReport,
    pub settings_source: Option<SourceReport>,
    pub noop: bool,
    pub signature: SignatureReport,
    pub compile: CompileInfo,
    pub provider: ProviderInfo,
    pub outcome: GuestOutcome,
    pub calls: Vec<CallRecord>,
    pub log: String,
    pub duration: Duration,
}

impl RunReport {
    /// Joins the guest's checked outcome with the host's records.
    pub fn new(record: RunRecord) -> Self {
        let GuestOutcome {
            resources,
            left_out,
            left_out_count,
            errors,
            failure,
            ..
        } = record.outcome;
        let policy_failed = !errors.is_empty() || failure.is_some();
        let mut summary = Summary::of_events(&resources);
        summary.counts.left_out = left_out_count;
        summary.policies_failed = usize::from(policy_failed);
        summary.duration_ms = millis(record.duration);
        summary.success = summary.counts.failed == 0 && !policy_failed;
        Self {
            key: record.key,
            policy: record.policy,
            labels: BTreeMap::new(),
            source: record.source,
            settings_source: record.settings_source,
            noop: record.noop,
            signature: record.signature,
            compile: record.compile,
            provider: record.provider,
            resources,
            left_out,
            errors,
            failure,
            calls: record.calls,
            log: Untrusted::new(record.log),
            summary,
            interrupted: None,
        }
    }
}

impl RunReport {
    /// Adds what followed the policy's own calls as the run's last policy:
    /// the provider's closing calls (the one daemon-reload), whether they
    /// failed, and the time they took.
    pub fn close(&mut self, calls: Vec<CallRecord>, failure: Option<String>, took: Duration) {
        self.calls.extend(calls);
        self.summary.duration_ms += millis(took);
        if let Some(failure) = failure {
            self.errors.push(Untrusted::new(failure));
            self.summary.success = false;
        }
    }
}

pub use human::{render_human, Style, Verbosity};
pub use metrics::render_metrics;

/// The report of one invocation: one policy's report, or, with several
/// policies, all of them in order with a combined summary.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Report {
    Single(Box<RunReport>),
    Several {
        /// The machine's labels (each policy's report has them too).
        #[serde(skip_serializing_if = "BTreeMap::is_empty")]
        labels: BTreeMap<String, String>,
        policies: Vec<RunReport>,
        summary: Summary,
        #[serde(skip_serializing_if = "Option::is_none")]
        interrupted: Option<Interruption>,
    },
}

impl Report {
    pub fn new(mut reports: Vec<RunReport>) -> Self {
        if reports.len() == 1 {
            return Report::Single(Box::new(reports.remove(0)));
        }
        let mut counts = Counts::default();
        for report in &reports {
            counts.add(&report.summary.counts);
        }
        let summary = Summary {
            counts,
            policies_failed: reports.iter().map(|r| r.summary.policies_failed).sum(),
            duration_ms: reports.iter().map(|r| r.summary.duration_ms).sum(),
            success: reports.iter().all(|r| r.summary.success),
        };
        Report::Several {
            labels: BTreeMap::new(),
            policies: reports,
            summary,
            interrupted: None,
        }
    }

    /// Says the machine's labels in the report and each policy's.
    pub fn set_labels<'l>(&mut self, labels: impl Iterator<Item = (&'l str, &'l str)>) {
        let labels: BTreeMap<String, String> = labels
            .map(|(name, value)| (name.to_owned(), value.to_owned()))
            .collect();
        match self {
            Report::Single(run) => run.labels = labels,
            Report::Several {
                labels: all,
                policies,
                ..
            } => {
                for run in policies.iter_mut() {
                    run.labels.clone_from(&labels);
                }
                *all = labels;
            }
        }
    }

    /// Marks the run interrupted by `signal`: it failed, whatever its
    /// resources say, and the report lists what was done and not reached
    /// (`not_started`: the policies that never ran).
    pub fn interrupt(&mut self, signal: &'static str, not_started: Vec<String>) {
        let done = self
            .runs()
            .iter()
            .flat_map(|r| &r.resources)
            .filter(|r| r.changed)
            .map(|r| r.resource.to_string())
            .collect();
        let mut not_reached: Vec<String> = self
            .runs()
            .iter()
            .flat_map(|r| &r.resources)
            .filter(|r| {
                r.errors
                    .iter()
                    .any(|e| e.as_raw().contains("interrupted by"))
            })
            .map(|r| r.resource.to_string())
            .collect();
        not_reached.extend(not_started);
        let interruption = Interruption {
            signal,
            done,
            not_reached,
        };
        match self {
            Report::Single(report) => {
                report.summary.success = false;
                report.interrupted = Some(interruption);
            }
            Report::Several {
                summary,
                interrupted,
                ..
            } => {
                summary.success = false;
                *interrupted = Some(interruption);
            }
        }
    }

    /// The interruption, when the run was cut short.
    pub fn interruption(&self) -> Option<&Interruption> {
        match self {
            Report::Single(report) => report.interrupted.as_ref(),
            Report::Several { interrupted, .. } => interrupted.as_ref(),
        }
    }

    pub fn runs(&self) -> &[RunReport] {
        match self {
            Report::Single(report) => std::slice::from_ref(report.as_ref()),
            Report::Several { policies, .. } => policies,
        }
    }

    pub fn summary(&self) -> &Summary {
        match self {
            Report::Single(report) => &report.summary,
            Report::Several { summary, .. } => summary,
        }
    }

    /// The process exit code: 0 converged, 1 any failure; with
    /// `detailed` Puppet's 0 no changes, 2 changes, 4 failures, 6 both.
    pub fn exit_code(&self, detailed: bool) -> i32 {
        let failures = !self.summary().success;
        let summary = self.summary();
        let changes = summary.counts.changed + summary.counts.failed_after_changes > 0;
        if detailed {
            (if changes { 2 } else { 0 }) | (if failures { 4 } else { 0 })
        } else {
            i32::from(failures)
        }
    }
}

/// For tests: the report of a run of the policy `policy` (its key too)
/// from `source`, whose resources are `resources`, with nothing else to say.
#[cfg(test)]
impl RunReport {
    pub(crate) fn of_test(
        policy: &str,
        source: SourceReport,
        settings: Option<SourceReport>,
        resources: Vec<ResourceEvent>,
    ) -> Self {
        let mut outcome = GuestOutcome::default();
        outcome.resources = resources;
        RunReport::new(RunRecord {
            key: policy.into(),
            policy: policy.into(),
            source,
            settings_source: settings,
            noop: false,
            signature: SignatureReport::unverified("test"),
            compile: CompileInfo {
                cache: crate::runtime::CacheOutcome::Hit,
                duration_ms: 0.0,
            },
            provider: ProviderInfo {
                name: "systemd",
                available: true,
                detail: None,
                status_reader: "dbus",
                status_note: None,
            },
            outcome,
            calls: Vec::new(),
            log: String::new(),
            duration: Duration::ZERO,
        })
    }
}

#[cfg(test)]
mod phase_tests {
    use super::*;

    #[test]
    fn a_resource_left_alone_is_counted_apart_and_the_parts_add_up() {
        use crate::left_alone::{Kind, LeftAloneEvent};
        let event = |changed: bool, failed: bool, alone: bool| crate::guest::ResourceEvent {
            changed,
            failed,
            left_alone: alone.then(|| LeftAloneEvent {
                kind: Kind::Held,
                why: "held".into(),
                would: vec![crate::contract::Operation::Start],
            }),
            ..crate::guest::ResourceEvent::of_host("service#web", Vec::new())
        };
        let resources = [
            event(true, false, true),
            event(false, false, true),
            event(false, true, true),
            event(true, false, false),
            event(false, false, false),
        ];
        let s = Summary::of_events(&resources);
        assert_eq!(
            (
                s.counts.resources,
                s.counts.changed,
                s.counts.failed,
                s.counts.left_alone,
                s.counts.unchanged
            ),
            (5, 1, 1, 2, 1)
        );
        assert!(!s.success);
    }
}
