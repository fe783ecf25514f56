//! Bounding what a policy returned: each resource name checked as
//! `service#NAME`, each string and list cut to its bound, and the whole
//! report held to `--report-limit` as it is written: each entry of each
//! list charged the bytes of its JSON as the report is printed and saved
//! (pretty, indented), the entries that do not fit dropped with an error
//! saying how many of which list.

use std::collections::HashMap;

use serde::Serialize;

use super::reconcile::{self, HostRecord};
use super::{Final, LeftOutEntry, Requested, ResourceEvent, Source, WatchReport};
use crate::contract;
use crate::resource::ResourceRef;
use crate::service_name::quote;
use crate::text::{json_len_at, thousands, truncate, Untrusted, TRUNCATED};

/// The longest single string (a message, a resource name) kept from a guest.
pub(super) const MAX_GUEST_STRING: usize = 4096;
/// The most errors kept per event.
const MAX_ERRORS_PER_EVENT: usize = 100;
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

/// What `--report-limit` leaves of the report. Every entry of a list the
/// guest gave is charged what it takes in the JSON report as written (its
/// JSON and the comma before it), not only its text: 200,000 entries with
/// empty text are 200,000 entries of JSON.
#[derive(Debug)]
pub(super) struct Budget {
    limit: usize,
    left: usize,
}

impl Budget {
    pub(super) fn new(limit: usize) -> Self {
        Self { limit, left: limit }
    }

    /// The report limit, in bytes.
    pub(super) fn limit(&self) -> usize {
        self.limit
    }

    /// What is left of it.
    pub(super) fn left(&self) -> usize {
        self.left
    }

    /// Takes `bytes` when they fit.
    fn take(&mut self, bytes: usize) -> bool {
        let fits = bytes <= self.left;
        if fits {
            self.left -= bytes;
        }
        fits
    }

    /// Charges `bytes` the report shows whatever is left (the host's own
    /// record, a policy's failure): what is left shrinks, never below
    /// nothing.
    pub(super) fn charge(&mut self, bytes: usize) {
        self.left = self.left.saturating_sub(bytes);
    }
}

/// How deep the report's lists are (`policies[i].left_out[j]` in a
/// report of several policies, pretty-printed): their entries are charged
/// as written there, the deepest.
pub(super) const LIST_DEPTH: usize = 4;

/// What one entry of a list costs in the JSON report as written: its
/// pretty-printed JSON at [`LIST_DEPTH`], with its line break and comma.
pub(super) fn entry_cost<T: Serialize + ?Sized>(entry: &T) -> usize {
    json_len_at(entry, LIST_DEPTH)
}

/// The host's error saying that `not_shown` of the `given` entries of a
/// list were cut, and why.
fn truncated(not_shown: usize, given: usize, list: &str, why: &str) -> Untrusted {
    Untrusted::new(format!(
        "report truncated: {} of {} {list} not shown ({why})",
        thousands(not_shown),
        thousands(given)
    ))
}

fn limit_reason(budget: &Budget) -> String {
    format!("report limit {} bytes", budget.limit())
}

/// The run's errors: the host's own notices (a malformed or truncated
/// report: a few, always shown, uncharged) among the errors the guest's
/// report brought (its policy errors, its contradictions), which are
/// charged, at most [`MAX_ERRORS_PER_EVENT`], the first ones.
struct Errors {
    all: Vec<Untrusted>,
    given: usize,
    shown: usize,
    /// Why the first error not shown was cut.
    cut: Option<String>,
}

impl Errors {
    fn new() -> Self {
        Self {
            all: Vec::new(),
            given: 0,
            shown: 0,
            cut: None,
        }
    }

    fn notice(&mut self, text: impl Into<String>) {
        self.all.push(Untrusted::new(text));
    }

    fn offer(&mut self, error: Untrusted, budget: &mut Budget) {
        self.given += 1;
        if self.cut.is_some() {
            return;
        }
        if self.shown == MAX_ERRORS_PER_EVENT {
            self.cut = Some(format!("at most {MAX_ERRORS_PER_EVENT} are shown"));
        } else if !budget.take(entry_cost(&error)) {
            self.cut = Some(limit_reason(budget));
        } else {
            self.shown += 1;
            self.all.push(error);
        }
    }

    /// The errors, and last, when some were cut, the error that says so.
    fn finish(mut self) -> Vec<Untrusted> {
        if let Some(why) = self.cut {
            self.all.push(truncated(
                self.given - self.shown,
                self.given,
                "errors",
                &why,
            ));
        }
        self.all
    }
}

/// What is kept of a guest's report.
pub(super) struct Bounded {
    pub(super) events: Vec<ResourceEvent>,
    pub(super) errors: Vec<Untrusted>,
    pub(super) left_out: Vec<LeftOutEntry>,
    /// The resources left out on this machine, all of them: also those the
    /// limit did not show (an entry whose unit another entry applied is
    /// not counted).
    pub(super) left_out_count: usize,
}

/// Converts the guest's report within `budget`, in the order of what
/// matters: its events (each, outside a noop run, first confirmed against
/// `host`, the host's record, so that what is charged is what is written),
/// then the events of units the host changed that the report does not
/// show, then the policy's errors, then the resources left out. Each event
/// also reserves `reserve` bytes for its subscriptions' counts. A list that
/// does not fit is cut where it stops fitting (the first malformed event or
/// entry ends its list too), with an error saying how many of its entries
/// were not shown; what the rest of the report counts (the resources left
/// out) counts them all.
pub(super) fn bounded_report(
    report: contract::Report,
    mut host: Option<HostRecord>,
    budget: &mut Budget,
    reserve: usize,
) -> Bounded {
    let mut errors = Errors::new();
    let (mut events, cut) = events(report.events, host.as_mut(), budget, reserve, &mut errors);
    if let Some(host) = host {
        events.extend(host_events(host, cut, budget, reserve));
    }
    for message in report.errors {
        errors.offer(bounded(message, MAX_GUEST_STRING), budget);
    }
    let (left_out, left_out_count) = left_out(report.left_out, &events, budget, &mut errors);
    Bounded {
        events,
        errors: errors.finish(),
        left_out,
        left_out_count,
    }
}

/// The events of units the host changed that no event shown names (all of
/// them, when the policy failed before reporting: `incomplete`). Shown
/// whatever is left, as the calls that made them are: the call budget
/// bounds them.
pub(super) fn host_events(
    host: HostRecord,
    incomplete: bool,
    budget: &mut Budget,
    reserve: usize,
) -> Vec<ResourceEvent> {
    let events = reconcile::unreported(host, incomplete);
    for event in &events {
        budget.charge(entry_cost(event) + reserve);
    }
    events
}

/// The guest's events that fit, each confirmed against `host` (outside a
/// noop run); and whether any was dropped.
fn events(
    guest: Vec<contract::Event>,
    mut host: Option<&mut HostRecord>,
    budget: &mut Budget,
    reserve: usize,
    errors: &mut Errors,
) -> (Vec<ResourceEvent>, bool) {
    let given = guest.len();
    let mut shown = Vec::new();
    for event in guest {
        let event = match ResourceEvent::from_guest(event) {
            Ok(event) => match host.as_deref_mut() {
                Some(host) => reconcile::confirmed(event, host),
                None => event,
            },
            Err(problem) => {
                errors.notice(problem);
                return (shown, true);
            }
        };
        let cost = entry_cost(&event) + reserve;
        if budget.take(cost) {
            shown.push(event);
            continue;
        }
        // A unit the host changed is shown whatever is left, as the call
        // that changed it is.
        if event.source == Source::Host && event.changed {
            budget.charge(cost);
            shown.push(event);
            continue;
        }
        let why = limit_reason(budget);
        errors
            .all
            .push(truncated(given - shown.len(), given, "resources", &why));
        return (shown, true);
    }
    (shown, false)
}

/// How `resources` name units, for the entries left out: whether any of
/// them names each unit, and whether the policy applied it (an event the
/// policy asked for, not only the host's).
fn units(resources: &[ResourceEvent]) -> HashMap<String, bool> {
    let mut units = HashMap::new();
    for event in resources {
        *units.entry(unit_key(&event.resource)).or_insert(false) |= event.requested.is_some();
    }
    units
}

/// What [`ResourceRef::same_unit`] compares: the unit, else the reference.
fn unit_key(resource: &ResourceRef) -> String {
    resource
        .unit()
        .map_or_else(|| resource.to_string(), |unit| unit.as_str().to_owned())
}

/// The resources left out that fit, and how many there are. An entry
/// whose unit the report applied under another entry (one unit, an entry
/// per kind of machine) is no contradiction: kept, marked, not counted. A
/// unit the host changed that the report gives no event of was not left
/// out, whatever the policy says: an error, and the entry dropped.
fn left_out(
    guest: Vec<contract::LeftOut>,
    resources: &[ResourceEvent],
    budget: &mut Budget,
    errors: &mut Errors,
) -> (Vec<LeftOutEntry>, usize) {
    let units = units(resources);
    let mut shown = Vec::new();
    let (mut given, mut count, mut cut) = (0, 0, false);
    for entry in guest {
        let mut entry = match LeftOutEntry::from_guest(entry) {
            Ok(entry) => entry,
            Err(problem) => {
                errors.notice(problem);
                break;
            }
        };
        match units.get(&unit_key(&entry.resource)) {
            Some(true) => entry.unit_applied = true,
            Some(false) => {
                errors.offer(
                    Untrusted::new(format!(
                        "malformed report: {} is said left out, and it was applied",
                        quote(&entry.resource.to_string())
                    )),
                    budget,
                );
                continue;
            }
            None => count += 1,
        }
        given += 1;
        cut = cut || !budget.take(entry_cost(&entry));
        if !cut {
            shown.push(entry);
        }
    }
    if shown.len() < given {
        errors.all.push(truncated(
            given - shown.len(),
            given,
            "left-out entries",
            &limit_reason(budget),
        ));
    }
    (shown, count)
}
