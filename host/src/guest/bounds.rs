//! Bounding what a policy returned: each resource name checked as
//! `service#NAME`, each string and list cut to its bound, and the whole
//! text held to `--report-limit`, the rest dropped with an error saying so.

use super::{Final, LeftOutEntry, Requested, ResourceEvent, Source, WatchReport};
use crate::contract;
use crate::resource::ResourceRef;
use crate::service_name::quote;
use crate::text::{truncate, Untrusted, TRUNCATED};

/// The longest single string (a message, a resource name) kept from a guest.
pub(super) const MAX_GUEST_STRING: usize = 4096;
/// The most errors kept per event.
pub(super) const MAX_ERRORS_PER_EVENT: usize = 100;
/// The longest reason kept for a resource left out: a few facts' worth.
const MAX_LEFT_OUT_WHY: usize = 512;
/// The most actions one resource can have taken (start or stop or restart,
/// then enable or disable); more is a malformed report.
const MAX_ACTIONS: usize = 8;

fn bounded(text: String, max: usize) -> Untrusted {
    Untrusted::new(truncate(text, max, TRUNCATED))
}

impl ResourceEvent {
    /// Converts a guest event, checking its resource name and bounding its text.
    pub(super) fn from_guest(e: contract::Event) -> Result<Self, String> {
        let Ok(resource) = ResourceRef::parse_service(&e.resource) else {
            return Err(format!(
                "malformed report: resource {} is not service#NAME with a valid service name",
                quote(&truncate(e.resource, 256, "..."))
            ));
        };
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
            resource,
            changed: e.changed,
            refreshed: e.refreshed,
            noop: e.noop,
            noop_message: e.noop_message.map(|m| bounded(m, MAX_GUEST_STRING)),
            actions: e
                .actions
                .into_iter()
                .take(MAX_ACTIONS)
                .map(|a| a.word())
                .collect(),
            // A guest that reports errors has failed, whatever its flag says.
            failed: e.failed || !errors.is_empty(),
            errors,
            requested: Some(Requested {
                ensure: e.requested.ensure.word(),
                enable: e.requested.enable,
            }),
            final_state: e.final_state.map(|f| Final {
                ensure: f.ensure.word(),
                enabled: f.enabled,
            }),
            source: Source::Policy,
            watch: WatchReport::default(),
            journal: Vec::new(),
            left_alone: None,
        })
    }

    /// The bytes of text this event holds, for the report size limit.
    fn text_size(&self) -> usize {
        self.resource.to_string().len()
            + self.noop_message.as_ref().map_or(0, Untrusted::len)
            + self.errors.iter().map(Untrusted::len).sum::<usize>()
    }
}

/// What is kept of a guest's report.
pub(super) struct Bounded {
    pub(super) events: Vec<ResourceEvent>,
    pub(super) errors: Vec<Untrusted>,
    pub(super) left_out: Vec<LeftOutEntry>,
    /// Whether any event was dropped.
    pub(super) cut: bool,
    /// The bytes of text kept.
    pub(super) used: usize,
}

impl LeftOutEntry {
    /// Converts a guest's `left-out`, checking its resource name like an
    /// event's and bounding its reason.
    fn from_guest(l: contract::LeftOut) -> Result<Self, String> {
        let Ok(resource) = ResourceRef::parse_service(&l.resource) else {
            return Err(format!(
                "malformed report: left-out resource {} is not service#NAME with a valid service name",
                quote(&truncate(l.resource, 256, "..."))
            ));
        };
        Ok(Self {
            resource,
            why: bounded(l.why, MAX_LEFT_OUT_WHY),
            unit_applied: false,
        })
    }
}

/// Converts the guest's report, keeping at most `max_bytes` of text: the rest
/// of the events are dropped, with an error saying so, rather than letting a
/// guest make the host build an enormous report. Resources left out come
/// last, within what is left (the first malformed one ends them).
pub(super) fn bounded_report(report: contract::Report, max_bytes: usize) -> Bounded {
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
    let total = report.left_out.len();
    let mut left_out = Vec::new();
    for guest_entry in report.left_out {
        let entry = match LeftOutEntry::from_guest(guest_entry) {
            Ok(entry) => entry,
            Err(problem) => {
                errors.push(Untrusted::new(problem));
                break;
            }
        };
        used += entry.resource.to_string().len() + entry.why.len();
        if used > max_bytes {
            errors.push(Untrusted::new(format!(
                "report truncated: kept {} of {total} resources left out, the report limit is {max_bytes} bytes",
                left_out.len()
            )));
            break;
        }
        left_out.push(entry);
    }
    Bounded {
        events,
        errors,
        left_out,
        cut,
        used: used.min(max_bytes),
    }
}
