//! The run report: what the guest said happened, joined with what the host
//! actually executed; rendered for people or as one JSON document.

mod human;
mod metrics;

use std::time::Duration;

use serde::Serialize;

use crate::provider::CallRecord;
use crate::runtime::bindings::types;
use crate::runtime::RunFailure;
use crate::service_name::{quote, CheckedName};

/// The longest single string (a message, a resource name) kept from a guest.
const MAX_GUEST_STRING: usize = 4096;
/// The most errors kept per event.
const MAX_ERRORS_PER_EVENT: usize = 100;
/// Appended where the host cut guest text short.
pub const TRUNCATED: &str = "... [truncated by the host]";

/// What the host checked of the policy's signature.
#[derive(Debug, Clone, Serialize)]
pub struct SignatureReport {
    pub verified: bool,
    pub key_id: Option<String>,
    pub trusted_comment: Option<String>,
    pub warning: Option<String>,
}

impl SignatureReport {
    pub fn verified(v: crate::signature::Verified) -> Self {
        Self {
            verified: true,
            key_id: Some(v.key_id),
            trusted_comment: Some(v.trusted_comment),
            warning: None,
        }
    }

    pub fn unverified(warning: &str) -> Self {
        Self {
            verified: false,
            key_id: None,
            trusted_comment: None,
            warning: Some(warning.to_owned()),
        }
    }
}

/// How the policy's code was obtained.
#[derive(Debug, Clone, Serialize)]
pub struct CompileInfo {
    pub cache: crate::runtime::CacheOutcome,
    pub duration_ms: f64,
}

/// Milliseconds with microsecond precision, as reports show durations.
pub fn millis(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

#[derive(Debug, Clone, Serialize)]
pub struct ProviderInfo {
    pub name: &'static str,
    pub available: bool,
    pub detail: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Ensure {
    Running,
    Stopped,
}

impl From<types::Ensure> for Ensure {
    fn from(e: types::Ensure) -> Self {
        match e {
            types::Ensure::Running => Ensure::Running,
            types::Ensure::Stopped => Ensure::Stopped,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Requested {
    pub ensure: Ensure,
    pub enable: Option<bool>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Final {
    pub ensure: Ensure,
    pub enabled: bool,
}

/// One resource's outcome, as the guest reported it.
#[derive(Debug, Clone, Serialize)]
pub struct ResourceEvent {
    pub resource: String,
    pub changed: bool,
    pub refreshed: bool,
    pub noop: bool,
    pub noop_message: Option<String>,
    pub actions: Vec<&'static str>,
    pub failed: bool,
    pub errors: Vec<String>,
    pub requested: Requested,
    #[serde(rename = "final")]
    pub final_state: Option<Final>,
}

fn action_name(a: types::Action) -> &'static str {
    match a {
        types::Action::Started => "started",
        types::Action::Stopped => "stopped",
        types::Action::Restarted => "restarted",
        types::Action::Enabled => "enabled",
        types::Action::Disabled => "disabled",
    }
}

/// Cuts untrusted text to `max` bytes (at a character boundary), marking the cut.
fn bounded(mut text: String, max: usize) -> String {
    if text.len() > max {
        let cut = (0..=max)
            .rev()
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0);
        text.truncate(cut);
        text.push_str(TRUNCATED);
    }
    text
}

impl ResourceEvent {
    /// Converts a guest event, checking its resource name and bounding its text.
    fn from_guest(e: types::Event) -> Result<Self, String> {
        let name = e.resource.strip_prefix("service#").unwrap_or("");
        if CheckedName::check(name).is_err() {
            return Err(format!(
                "malformed report: resource {} is not service#NAME with a valid service name",
                quote(&e.resource)
            ));
        }
        let mut errors: Vec<String> = e
            .errors
            .into_iter()
            .take(MAX_ERRORS_PER_EVENT + 1)
            .map(|m| bounded(m, MAX_GUEST_STRING))
            .collect();
        if errors.len() > MAX_ERRORS_PER_EVENT {
            errors.truncate(MAX_ERRORS_PER_EVENT);
            errors.push(format!("more errors{TRUNCATED}"));
        }
        Ok(Self {
            resource: e.resource,
            changed: e.changed,
            refreshed: e.refreshed,
            noop: e.noop,
            noop_message: e.noop_message.map(|m| bounded(m, MAX_GUEST_STRING)),
            actions: e.actions.into_iter().take(8).map(action_name).collect(),
            // A guest that reports errors has failed, whatever its flag says.
            failed: e.failed || !errors.is_empty(),
            errors,
            requested: Requested {
                ensure: e.requested.ensure.into(),
                enable: e.requested.enable,
            },
            final_state: e.final_.map(|f| Final {
                ensure: f.ensure.into(),
                enabled: f.enabled,
            }),
        })
    }

    /// The bytes of text this event holds, for the report size limit.
    fn text_size(&self) -> usize {
        self.resource.len()
            + self.noop_message.as_ref().map_or(0, String::len)
            + self.errors.iter().map(String::len).sum::<usize>()
    }
}

/// Converts the guest's report, keeping at most `max_bytes` of text: the rest
/// of the events are dropped, with an error saying so, rather than letting a
/// guest make the host build an enormous report.
fn bounded_report(report: types::Report, max_bytes: usize) -> (Vec<ResourceEvent>, Vec<String>) {
    let total = report.events.len();
    let mut used = 0;
    let mut events = Vec::new();
    let mut errors: Vec<String> = Vec::new();
    for guest_event in report.events {
        match ResourceEvent::from_guest(guest_event) {
            Ok(event) => {
                used += event.text_size();
                if used > max_bytes {
                    errors.push(format!(
                        "report truncated: kept {} of {total} events, the report limit is {max_bytes} bytes",
                        events.len()
                    ));
                    break;
                }
                events.push(event);
            }
            Err(problem) => {
                errors.push(problem);
                break;
            }
        }
    }
    for message in report.errors.into_iter().take(MAX_ERRORS_PER_EVENT) {
        used += message.len().min(MAX_GUEST_STRING);
        if used > max_bytes {
            errors.push(format!("policy errors{TRUNCATED}"));
            break;
        }
        errors.push(bounded(message, MAX_GUEST_STRING));
    }
    (events, errors)
}

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub resources: usize,
    pub changed: usize,
    pub failed: usize,
    pub unchanged: usize,
    pub duration_ms: f64,
    pub success: bool,
}

/// Everything one `host run` of one policy produced.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    pub policy: String,
    pub noop: bool,
    pub signature: SignatureReport,
    pub compile: CompileInfo,
    pub provider: ProviderInfo,
    pub resources: Vec<ResourceEvent>,
    /// Problems with the run as a whole: policy-level errors from the guest,
    /// a malformed or truncated report.
    pub errors: Vec<String>,
    /// Why the policy did not finish: a limit, a trap (panic, stack overflow).
    pub failure: Option<RunFailure>,
    pub calls: Vec<CallRecord>,
    pub log: String,
    pub summary: Summary,
}

/// What one run produced, before it is summarised.
pub struct RunRecord {
    pub policy: String,
    pub noop: bool,
    pub signature: SignatureReport,
    pub compile: CompileInfo,
    pub provider: ProviderInfo,
    pub outcome: Result<types::Report, RunFailure>,
    pub calls: Vec<CallRecord>,
    pub log: String,
    pub duration: Duration,
}

impl RunReport {
    /// Joins the guest's report (or its failure) with the host's records,
    /// keeping at most `report_bytes` of guest text.
    pub fn new(record: RunRecord, report_bytes: usize) -> Self {
        let (resources, errors, failure) = match record.outcome {
            Ok(report) => {
                let (resources, errors) = bounded_report(report, report_bytes);
                (resources, errors, None)
            }
            Err(failure) => (Vec::new(), Vec::new(), Some(failure)),
        };
        let changed = resources.iter().filter(|r| r.changed).count();
        let failed = resources.iter().filter(|r| r.failed).count();
        let summary = Summary {
            resources: resources.len(),
            changed,
            failed,
            unchanged: resources.iter().filter(|r| !r.changed && !r.failed).count(),
            duration_ms: millis(record.duration),
            success: failed == 0 && errors.is_empty() && failure.is_none(),
        };
        Self {
            policy: record.policy,
            noop: record.noop,
            signature: record.signature,
            compile: record.compile,
            provider: record.provider,
            resources,
            errors,
            failure,
            calls: record.calls,
            log: record.log,
            summary,
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
        policies: Vec<RunReport>,
        summary: Summary,
    },
}

impl Report {
    pub fn new(mut reports: Vec<RunReport>) -> Self {
        if reports.len() == 1 {
            return Report::Single(Box::new(reports.remove(0)));
        }
        let sum = |f: fn(&Summary) -> usize| reports.iter().map(|r| f(&r.summary)).sum();
        let summary = Summary {
            resources: sum(|s| s.resources),
            changed: sum(|s| s.changed),
            failed: sum(|s| s.failed),
            unchanged: sum(|s| s.unchanged),
            duration_ms: reports.iter().map(|r| r.summary.duration_ms).sum(),
            success: reports.iter().all(|r| r.summary.success),
        };
        Report::Several {
            policies: reports,
            summary,
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
        let changes = self.summary().changed > 0;
        if detailed {
            (if changes { 2 } else { 0 }) | (if failures { 4 } else { 0 })
        } else {
            i32::from(failures)
        }
    }
}
