//! The human report's tests.

use super::*;
use crate::guest::{Counts, Trigger, WatchReport};
use crate::subscriptions::survey::{Seen, Watched};

fn event(actions: Vec<Done>, watch: WatchReport) -> ResourceEvent {
    ResourceEvent {
        watch,
        ..ResourceEvent::of_host("service#web", actions)
    }
}

const PLAIN: Style = Style { color: false };

#[test]
fn a_few_first_seen_references_are_named() {
    let watch = WatchReport {
        watched: vec![Watched::seen("file#/etc/a.conf", Seen::Recorded)],
        counts: Some(Counts {
            recorded: 1,
            ..Counts::default()
        }),
        ..WatchReport::default()
    };
    assert_eq!(
        describe(&event(Vec::new(), watch.clone()), false, PLAIN),
        "unchanged (file#/etc/a.conf first seen: recorded, nothing to restart)"
    );
    // A noop run records nothing.
    assert_eq!(
        describe(&event(Vec::new(), watch), true, PLAIN),
        "unchanged (file#/etc/a.conf first seen: recorded by a run without --noop, \
         nothing to restart)"
    );
}

#[test]
fn many_references_are_counted_not_listed() {
    let long = format!("file#/etc/{}", "a".repeat(4_000));
    let watch = WatchReport {
        watched: vec![Watched::seen(long.clone(), Seen::Recorded); 250],
        triggered_by: vec![
            Trigger {
                reference: long.clone(),
                change: "changed".into()
            };
            250
        ],
        counts: Some(Counts {
            recorded: 10_000,
            changed: 10_000,
            left_out: 9_750,
            ..Counts::default()
        }),
        ..WatchReport::default()
    };
    let unchanged = describe(&event(Vec::new(), watch.clone()), false, PLAIN);
    assert_eq!(
        unchanged,
        "unchanged (10,000 references first seen: recorded, nothing to restart)"
    );
    let restarted = describe(&event(vec![Done::Restarted], watch), false, PLAIN);
    assert!(
        restarted.ends_with(" changed and 9,997 more)"),
        "{restarted}"
    );
    assert!(restarted.len() < 1_000, "{}", restarted.len());
}

#[test]
fn warnings_go_under_the_event_line_and_the_rest_are_counted() {
    let watch = WatchReport {
        warnings: (0..250)
            .map(|i| {
                Untrusted::new(format!(
                    "foo#{i}\x1b[2J is not a file# or package# reference: not watched; it fires only on --refresh"
                ))
            })
            .collect(),
        counts: Some(Counts {
            not_watched: 10_000,
            ..Counts::default()
        }),
        ..WatchReport::default()
    };
    let mut out = String::new();
    warnings(&mut out, &event(Vec::new(), watch), PLAIN);
    assert_eq!(
        out,
        "    warning: foo#0\\x1b[2J is not a file# or package# reference: not watched; it fires only on --refresh\n\
         \x20   warning: foo#1\\x1b[2J is not a file# or package# reference: not watched; it fires only on --refresh\n\
         \x20   warning: foo#2\\x1b[2J is not a file# or package# reference: not watched; it fires only on --refresh\n\
         \x20   warning: 9,997 more references not watched; they fire only on --refresh\n"
    );
}

#[test]
fn numbers_are_grouped_by_thousands() {
    assert_eq!(thousands(0), "0");
    assert_eq!(thousands(999), "999");
    assert_eq!(thousands(1_000), "1,000");
    assert_eq!(thousands(10_000), "10,000");
    assert_eq!(thousands(1_234_567), "1,234,567");
}
