//! The guest boundary: the one place that turns what a policy returned into
//! the host's own types, and decides what to believe of it.
//!
//! A policy is untrusted. Everything it returns is checked here before any
//! other part of the host sees it: resource names must be `service#NAME`
//! with a valid service name, every string and list is bounded, the whole
//! text of the report is held to `--report-limit`, and a resource that
//! reports errors has failed whatever its own flag says. What comes out
//! holds no contract type, so the `report` module only renders.

use serde::Serialize;

use crate::contract::{self, Action, Ensure};
use crate::runtime::RunFailure;
use crate::service_name::{quote, CheckedName};
use crate::text::{truncate, TRUNCATED};

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

/// The state the policy found when it was done with a resource.
#[derive(Debug, Clone, Serialize)]
pub struct Final {
    pub ensure: &'static str,
    pub enabled: bool,
}

/// One resource's outcome, as the guest reported it, checked and bounded.
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

/// What the host takes from one run of a guest.
#[derive(Debug, Clone, Default)]
pub struct GuestOutcome {
    pub resources: Vec<ResourceEvent>,
    /// Problems with the run as a whole: policy-level errors from the guest,
    /// a malformed or truncated report.
    pub errors: Vec<String>,
    /// Why the policy did not finish: a limit, a trap (panic, stack overflow).
    pub failure: Option<RunFailure>,
}

impl GuestOutcome {
    /// Checks a guest's report (or takes its failure), keeping at most
    /// `max_bytes` of guest text.
    pub fn new(outcome: Result<contract::Report, RunFailure>, max_bytes: usize) -> Self {
        match outcome {
            Ok(report) => {
                let (resources, errors) = bounded_report(report, max_bytes);
                Self {
                    resources,
                    errors,
                    failure: None,
                }
            }
            Err(failure) => Self {
                failure: Some(failure),
                ..Self::default()
            },
        }
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

fn bounded(text: String, max: usize) -> String {
    truncate(text, max, TRUNCATED)
}

impl ResourceEvent {
    /// Converts a guest event, checking its resource name and bounding its text.
    fn from_guest(e: contract::Event) -> Result<Self, String> {
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
            actions: e
                .actions
                .into_iter()
                .take(MAX_ACTIONS)
                .map(action_name)
                .collect(),
            // A guest that reports errors has failed, whatever its flag says.
            failed: e.failed || !errors.is_empty(),
            errors,
            requested: Requested {
                ensure: ensure_name(e.requested.ensure),
                enable: e.requested.enable,
            },
            final_state: e.final_state.map(|f| Final {
                ensure: ensure_name(f.ensure),
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
fn bounded_report(report: contract::Report, max_bytes: usize) -> (Vec<ResourceEvent>, Vec<String>) {
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
