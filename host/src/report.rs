//! The run report: what the guest said happened, joined with what the host
//! actually executed; rendered for people or as one JSON document.

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use crate::provider::{CallRecord, Operation};
use crate::runtime::bindings::types;

/// The largest number of events accepted from a guest; a report claiming more
/// is malformed (a policy cannot have applied that many resources in one run).
pub const MAX_EVENTS: usize = 100_000;

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

impl From<types::Event> for ResourceEvent {
    fn from(e: types::Event) -> Self {
        Self {
            resource: e.resource,
            changed: e.changed,
            refreshed: e.refreshed,
            noop: e.noop,
            noop_message: e.noop_message,
            actions: e.actions.into_iter().map(action_name).collect(),
            failed: e.failed,
            errors: e.errors,
            requested: Requested {
                ensure: e.requested.ensure.into(),
                enable: e.requested.enable,
            },
            final_state: e.final_.map(|f| Final {
                ensure: f.ensure.into(),
                enabled: f.enabled,
            }),
        }
    }
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
    pub provider: ProviderInfo,
    pub resources: Vec<ResourceEvent>,
    /// Problems with the run as a whole: policy-level errors from the guest,
    /// a trap, a malformed report.
    pub errors: Vec<String>,
    pub calls: Vec<CallRecord>,
    pub log: String,
    pub summary: Summary,
}

impl RunReport {
    /// Joins the guest's report (or its failure) with the host's records.
    pub fn new(
        policy: String,
        noop: bool,
        signature: SignatureReport,
        provider: ProviderInfo,
        outcome: Result<types::Report, String>,
        calls: Vec<CallRecord>,
        log: String,
        duration: Duration,
    ) -> Self {
        let (resources, errors) = match outcome {
            Ok(report) if report.events.len() > MAX_EVENTS => (
                Vec::new(),
                vec![format!(
                    "malformed report: {} events is more than the limit of {MAX_EVENTS}",
                    report.events.len()
                )],
            ),
            Ok(report) => (
                report.events.into_iter().map(ResourceEvent::from).collect(),
                report.errors,
            ),
            Err(trap) => (Vec::new(), vec![format!("policy failed: {trap}")]),
        };
        let changed = resources.iter().filter(|r| r.changed).count();
        let failed = resources.iter().filter(|r| r.failed).count();
        let summary = Summary {
            resources: resources.len(),
            changed,
            failed,
            unchanged: resources.iter().filter(|r| !r.changed && !r.failed).count(),
            duration_ms: (duration.as_secs_f64() * 1e6).round() / 1e3,
            success: failed == 0 && errors.is_empty(),
        };
        Self {
            policy,
            noop,
            signature,
            provider,
            resources,
            errors,
            calls,
            log,
            summary,
        }
    }

    /// The process exit code: 0 converged, 1 any failure; with
    /// `detailed` Puppet's 0 no changes, 2 changes, 4 failures, 6 both.
    pub fn exit_code(&self, detailed: bool) -> i32 {
        let failures = !self.summary.success;
        let changes = self.summary.changed > 0;
        if detailed {
            (if changes { 2 } else { 0 }) | (if failures { 4 } else { 0 })
        } else {
            i32::from(failures)
        }
    }

    /// The report for people: a line per resource, then a summary.
    pub fn render_human(&self) -> String {
        let mut out = String::new();
        match (&self.signature.key_id, &self.signature.warning) {
            (Some(key_id), _) => {
                let comment = self.signature.trusted_comment.as_deref().unwrap_or("");
                let _ = writeln!(out, "signed by key {key_id} ({comment})");
            }
            (None, Some(warning)) => {
                let _ = writeln!(out, "warning: {warning}");
            }
            (None, None) => {}
        }
        if let Some(detail) = self
            .provider
            .detail
            .as_deref()
            .filter(|_| !self.provider.available)
        {
            let _ = writeln!(out, "provider {} unavailable: {detail}", self.provider.name);
        }
        let width = self
            .resources
            .iter()
            .map(|r| r.resource.len())
            .max()
            .unwrap_or(0);
        for r in &self.resources {
            let _ = writeln!(out, "{:<width$}  {}", r.resource, describe(r));
        }
        for e in &self.errors {
            let _ = writeln!(out, "error: {e}");
        }
        if !self.log.trim().is_empty() {
            let _ = writeln!(out, "policy log:");
            for line in self.log.lines() {
                let _ = writeln!(out, "  | {line}");
            }
        }
        let s = &self.summary;
        let mode = if self.noop { " (noop)" } else { "" };
        let mutating = self
            .calls
            .iter()
            .filter(|c| c.operation.is_mutating() && c.outcome == "ok")
            .count();
        let reloads = self
            .calls
            .iter()
            .filter(|c| c.operation == Operation::DaemonReload)
            .count();
        let _ = writeln!(
            out,
            "{}{mode}: {} resources, {} {}, {} failed, {} unchanged; {mutating} changes made, {reloads} daemon-reload, in {:.2}s",
            self.policy,
            s.resources,
            s.changed,
            if self.noop { "would change" } else { "changed" },
            s.failed,
            s.unchanged,
            s.duration_ms / 1000.0
        );
        out
    }
}

fn describe(r: &ResourceEvent) -> String {
    if r.failed {
        let done = if r.actions.is_empty() {
            String::new()
        } else {
            format!(" (after {})", r.actions.join(", "))
        };
        return format!("FAILED{done}: {}", r.errors.join("; "));
    }
    if let Some(message) = &r.noop_message {
        return message.clone();
    }
    if r.actions.is_empty() {
        "unchanged".to_owned()
    } else {
        r.actions.join(", ")
    }
}
