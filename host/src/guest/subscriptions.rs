//! What the host found of each service's subscriptions, added to its event.
//! The references are the guest's text: a policy may declare 10,000 of
//! 4,000 bytes each, so they count against `--report-limit` with the rest
//! of its report, each entry charged its JSON as written. What matters most
//! goes in first (what triggered a restart, then the warnings, then every
//! watched reference's state); what does not fit is left out and counted,
//! and the counts of each state always cover every reference (each event
//! reserved room for them: [`counts_reserve`]).

use std::collections::HashMap;

use serde::Serialize;

use super::{Done, ResourceEvent};
use crate::subscriptions::survey::{Seen, ServiceWatch, Survey, Watched};
use crate::text::{json_len_at, Untrusted};

/// What the report says of a service's subscriptions (flattened into its
/// event).
#[derive(Debug, Clone, Default, Serialize)]
pub struct WatchReport {
    /// The `file#` and `package#` references the service subscribes to that
    /// the host watches, and what it found of each before the run
    /// (recorded, unchanged, changed, unreadable).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub watched: Vec<Watched>,
    /// The watched references whose change triggered the service's restart
    /// (or, when it was stopped, its start), and how each changed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub triggered_by: Vec<Trigger>,
    /// The references the host does not watch, each saying why: no error,
    /// they fire only on `--refresh`. The host's words around the guest's
    /// reference, shown escaped.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Untrusted>,
    /// How many references were found in each state: all of them, also
    /// those the lists above could not hold.
    #[serde(rename = "reference_counts", skip_serializing_if = "Option::is_none")]
    pub counts: Option<Counts>,
}

/// A watched reference that triggered a service, and how it changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Trigger {
    pub reference: String,
    /// As an operator reads it: `changed`, `appeared`, `version 1.0 -> 2.0`.
    pub change: String,
}

/// How many of a service's references were in each state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub recorded: usize,
    pub unchanged: usize,
    pub changed: usize,
    pub unreadable: usize,
    pub not_watched: usize,
    /// Entries of `watched`, `triggered_by` and `warnings` the report limit
    /// left out.
    pub left_out: usize,
}

/// How deep an event's fields are in a report (`policies[i].resources[j]`,
/// pretty-printed), and so its lists' entries one deeper.
const EVENT_DEPTH: usize = super::bounds::LIST_DEPTH + 1;

/// What `counts` take in their event's JSON as written.
fn counts_cost(counts: &Counts) -> usize {
    r#""reference_counts": "#.len() + json_len_at(counts, EVENT_DEPTH)
}

/// The most a service's `reference_counts` take in its event's JSON: each
/// event reserves it, so that the counts always fit. A guest's memory holds
/// fewer than 2^32 references, so no count is longer than `u32::MAX`.
pub(super) fn counts_reserve() -> usize {
    let most = u32::MAX as usize;
    counts_cost(&Counts {
        recorded: most,
        unchanged: most,
        changed: most,
        unreadable: most,
        not_watched: most,
        left_out: most,
    })
}

/// What `entry` adds to a list (`key`) of an event as written: with the
/// list's own key, line breaks and brackets when it is the first (an empty
/// list is not written).
fn cost<T: Serialize>(list_empty: bool, key: &str, entry: &T) -> usize {
    let list = if list_empty {
        // `,\n`, the indent, `"key": [`, and `\n`, the indent, `]`.
        2 * (2 * EVENT_DEPTH + 2) + key.len() + 5
    } else {
        0
    };
    list + json_len_at(entry, EVENT_DEPTH + 1)
}

impl Counts {
    fn of(watch: &ServiceWatch) -> Self {
        let mut counts = Self {
            not_watched: watch.not_watched.len(),
            ..Self::default()
        };
        for watched in &watch.references {
            *match watched.seen {
                Seen::Recorded => &mut counts.recorded,
                Seen::Unchanged => &mut counts.unchanged,
                Seen::Changed { .. } => &mut counts.changed,
                Seen::Unreadable { .. } => &mut counts.unreadable,
            } += 1;
        }
        counts
    }
}

/// Adds to each of `events` what `survey` found of its service's
/// references, within `room` bytes of JSON (with what each event reserved
/// for its counts, which always go in): first, in every event, the
/// references that triggered it (those that changed, when the service was
/// restarted, or found stopped, started: what a triggered subscription does
/// then, or would have in a noop run); then the warnings; then the watched
/// references. Returns the room left.
pub(super) fn annotate(events: &mut [ResourceEvent], survey: &Survey, room: usize) -> usize {
    let by_resource: HashMap<&str, &ServiceWatch> = survey
        .services
        .iter()
        .map(|s| (s.resource.as_str(), s))
        .collect();
    let mut room = Room(room);
    let watches: Vec<Option<&ServiceWatch>> = events
        .iter()
        .map(|e| by_resource.get(e.resource.to_string().as_str()).copied())
        .collect();
    // The counts go in whatever is left: what each takes when the lists
    // are done (its `left_out` too) is held back first.
    let reserve = counts_reserve();
    for (event, watch) in events.iter_mut().zip(&watches) {
        if let Some(watch) = watch {
            room.0 = room.0.saturating_sub(reserve);
            event.watch.counts = Some(Counts::of(watch));
        }
    }
    for (event, watch) in events.iter_mut().zip(&watches) {
        let Some(watch) = watch else { continue };
        let triggered = event
            .actions
            .iter()
            .any(|a| matches!(a, Done::Restarted | Done::Started));
        if !triggered {
            continue;
        }
        for watched in watch.changed() {
            let Seen::Changed { change } = &watched.seen else {
                continue;
            };
            let trigger = Trigger {
                reference: watched.reference.clone(),
                change: change.to_string(),
            };
            let bytes = cost(
                event.watch.triggered_by.is_empty(),
                "triggered_by",
                &trigger,
            );
            if room.take(&mut event.watch, bytes) {
                event.watch.triggered_by.push(trigger);
            }
        }
    }
    for (event, watch) in events.iter_mut().zip(&watches) {
        let Some(watch) = watch else { continue };
        for warning in &watch.not_watched {
            let bytes = cost(event.watch.warnings.is_empty(), "warnings", warning);
            if room.take(&mut event.watch, bytes) {
                event.watch.warnings.push(Untrusted::new(warning.clone()));
            }
        }
    }
    for (event, watch) in events.iter_mut().zip(&watches) {
        let Some(watch) = watch else { continue };
        for watched in &watch.references {
            let bytes = cost(event.watch.watched.is_empty(), "watched", watched);
            if room.take(&mut event.watch, bytes) {
                event.watch.watched.push(watched.clone());
            }
        }
    }
    for counts in events.iter().filter_map(|e| e.watch.counts.as_ref()) {
        room.0 += reserve.saturating_sub(counts_cost(counts));
    }
    room.0
}

/// What is left of the report limit.
struct Room(usize);

impl Room {
    /// Takes `bytes` when they fit; otherwise counts one entry of `watch`
    /// left out.
    fn take(&mut self, watch: &mut WatchReport, bytes: usize) -> bool {
        if bytes <= self.0 {
            self.0 -= bytes;
            return true;
        }
        if let Some(counts) = &mut watch.counts {
            counts.left_out += 1;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guest::GuestOutcome;
    use crate::subscriptions::Change;

    fn event(name: &str, actions: Vec<Done>) -> ResourceEvent {
        ResourceEvent::of_host(&format!("service#{name}"), actions)
    }

    fn service(name: &str, references: Vec<Watched>, not_watched: Vec<String>) -> ServiceWatch {
        ServiceWatch {
            resource: format!("service#{name}"),
            service: name.to_owned(),
            references,
            not_watched,
        }
    }

    /// `n` references of about `len` bytes each, all distinct.
    fn many(n: usize, len: usize, seen: Seen) -> Vec<Watched> {
        (0..n)
            .map(|i| {
                Watched::seen(
                    format!("file#/etc/{i:05}/{}", "a".repeat(len - 16)),
                    seen.clone(),
                )
            })
            .collect()
    }

    /// `events` as a report of several policies writes them (pretty).
    fn written(events: &[ResourceEvent]) -> usize {
        let report = serde_json::json!({ "policies": [{ "resources": events }] });
        serde_json::to_string_pretty(&report).unwrap().len()
    }

    #[test]
    fn ten_thousand_references_of_four_thousand_bytes_stay_within_the_limit() {
        let survey = Survey {
            services: vec![service(
                "web",
                many(10_000, 4_000, Seen::Recorded),
                (0..10_000)
                    .map(|i| {
                        format!(
                            "foo#{i:05}{} is not a file# or package# reference",
                            "b".repeat(3_990)
                        )
                    })
                    .collect(),
            )],
        };
        let limit = 1 << 20;
        let mut events = vec![event("web", Vec::new())];
        let before = written(&events);
        let room = annotate(&mut events, &survey, limit);
        let watch = &events[0].watch;
        let counts = watch.counts.clone().unwrap();
        assert_eq!(counts.recorded, 10_000);
        assert_eq!(counts.not_watched, 10_000);
        let listed = watch.watched.len() + watch.warnings.len();
        assert!(listed > 100 && listed < 300, "{listed} listed");
        assert_eq!(counts.left_out, 20_000 - listed);
        assert!(room < 4_100, "what fits is used: {room} left");
        // Charged as written: the event grew by at most what was charged.
        assert!(written(&events) - before <= limit - room);
    }

    #[test]
    fn two_hundred_thousand_tiny_references_are_charged_as_written() {
        let tiny: Vec<Watched> = (0..200_000)
            .map(|i| Watched::seen(format!("file#/{i}"), Seen::Unchanged))
            .collect();
        let survey = Survey {
            services: vec![service("web", tiny, Vec::new())],
        };
        let limit = 100_000;
        let mut events = vec![event("web", Vec::new())];
        let before = written(&events);
        let room = annotate(&mut events, &survey, limit);
        assert!(
            written(&events) - before <= limit - room,
            "{}",
            written(&events)
        );
        let counts = events[0].watch.counts.clone().unwrap();
        assert_eq!(counts.unchanged, 200_000);
        assert_eq!(counts.left_out, 200_000 - events[0].watch.watched.len());
        assert!(counts.left_out > 150_000, "{counts:?}");
    }

    #[test]
    fn what_an_event_reserves_holds_any_counts() {
        let counts = Counts {
            recorded: u32::MAX as usize,
            left_out: 123,
            ..Counts::default()
        };
        assert!(counts_cost(&counts) <= counts_reserve());
    }

    #[test]
    fn what_triggered_a_restart_comes_first_then_warnings_then_states() {
        let changed = Seen::Changed {
            change: Change::Content,
        };
        let survey = Survey {
            services: vec![
                service("first", many(100, 1_000, Seen::Unchanged), Vec::new()),
                service(
                    "web",
                    vec![Watched::seen("file#/etc/web.conf", changed)],
                    vec!["foo#bar is not watched".into()],
                ),
            ],
        };
        let mut events = vec![
            event("first", Vec::new()),
            event("web", vec![Done::Restarted]),
        ];
        annotate(&mut events, &survey, 5_000);
        let web = &events[1].watch;
        assert_eq!(
            web.triggered_by,
            [Trigger {
                reference: "file#/etc/web.conf".into(),
                change: "changed".into()
            }]
        );
        assert_eq!(web.warnings, ["foo#bar is not watched"]);
        let first = &events[0].watch;
        assert_eq!(
            first.watched.len(),
            3,
            "the rest of the room: 3 of 1,000 bytes and their JSON"
        );
        assert_eq!(first.counts.as_ref().unwrap().left_out, 97);
        assert_eq!(first.counts.as_ref().unwrap().unchanged, 100);
    }

    #[test]
    fn a_started_service_is_triggered_and_an_unchanged_one_is_not() {
        let changed = Seen::Changed {
            change: Change::Appeared,
        };
        let survey = Survey {
            services: vec![
                service(
                    "web",
                    vec![Watched::seen("file#/etc/a", changed.clone())],
                    Vec::new(),
                ),
                service(
                    "db",
                    vec![Watched::seen("file#/etc/a", changed)],
                    Vec::new(),
                ),
            ],
        };
        let mut events = vec![event("web", vec![Done::Started]), event("db", Vec::new())];
        annotate(&mut events, &survey, 1 << 20);
        assert_eq!(events[0].watch.triggered_by[0].change, "appeared");
        assert!(events[1].watch.triggered_by.is_empty());
        assert_eq!(events[1].watch.watched.len(), 1);
    }

    #[test]
    fn the_guests_own_text_leaves_less_room_for_its_references() {
        let report = crate::contract::Report {
            events: Vec::new(),
            errors: vec!["e".repeat(4_000); 20],
            left_out: Vec::new(),
        };
        let mut outcome = GuestOutcome::new(Ok(report), &[], false, 100_000);
        outcome.resources.push(event("web", Vec::new()));
        let survey = Survey {
            services: vec![service("web", many(100, 1_000, Seen::Recorded), Vec::new())],
        };
        outcome.watch(&survey);
        let watched = outcome.resources[0].watch.watched.len();
        // 20 errors of about 4,020 bytes as written, then references of
        // about 1,100.
        assert_eq!(watched, 17, "{watched}");
    }
}
