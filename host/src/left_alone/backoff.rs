//! Storms held back: a unit the host had to start or restart 3 times within
//! 60 s is held back, as Kubernetes holds back a container in
//! CrashLoopBackOff: no start for 10 s, then twice as long after every
//! start it needed again, at most 5 min; forgotten once it needed no start
//! for 10 min. Time is given, never read, so the sequence is tested on a
//! simulated clock.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

/// Starts within [`WINDOW`] that begin a hold.
pub const STARTS: usize = 3;
pub const WINDOW: Duration = Duration::from_secs(60);
pub const FIRST_HOLD: Duration = Duration::from_secs(10);
pub const LONGEST_HOLD: Duration = Duration::from_secs(5 * 60);
/// A unit that needed no start for this long starts afresh.
pub const HEALTHY: Duration = Duration::from_secs(10 * 60);

/// A hold that began: its length and its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hold {
    pub length: Duration,
    pub until: Instant,
    /// Starts the host made of the unit within the last [`WINDOW`].
    pub recent_starts: usize,
}

/// What the host remembers of the units it started, per unit.
#[derive(Debug, Default)]
pub struct Backoff {
    units: BTreeMap<String, Unit>,
}

#[derive(Debug)]
struct Unit {
    /// The host's starts within the last [`WINDOW`].
    recent: VecDeque<Instant>,
    last_start: Instant,
    /// Holds since the unit was last healthy; the next is twice as long.
    holds: u32,
    held_until: Option<Instant>,
}

impl Backoff {
    /// The host started or restarted `unit` at `now`: the hold that begins
    /// with it, if one does.
    pub fn started(&mut self, unit: &str, now: Instant) -> Option<Hold> {
        let entry = self.units.entry(unit.to_owned()).or_insert_with(|| Unit {
            recent: VecDeque::new(),
            last_start: now,
            holds: 0,
            held_until: None,
        });
        if now.saturating_duration_since(entry.last_start) >= HEALTHY {
            entry.recent.clear();
            entry.holds = 0;
        }
        entry.last_start = now;
        entry.recent.push_back(now);
        while entry
            .recent
            .front()
            .is_some_and(|&at| now.saturating_duration_since(at) >= WINDOW)
        {
            entry.recent.pop_front();
        }
        if entry.holds == 0 && entry.recent.len() < STARTS {
            return None;
        }
        entry.holds += 1;
        let length = hold_length(entry.holds);
        entry.held_until = Some(now + length);
        Some(Hold {
            length,
            until: now + length,
            recent_starts: entry.recent.len(),
        })
    }

    /// The units held at `now`, with the end of each hold.
    pub fn held(&self, now: Instant) -> impl Iterator<Item = (&str, Instant)> + '_ {
        self.units.iter().filter_map(move |(unit, u)| {
            u.held_until
                .filter(|&until| until > now)
                .map(|until| (unit.as_str(), until))
        })
    }

    /// Forgets the units healthy for [`HEALTHY`] (a watch that runs for
    /// months keeps no unit it once started).
    pub fn forget_healthy(&mut self, now: Instant) {
        self.units
            .retain(|_, u| now.saturating_duration_since(u.last_start) < HEALTHY);
    }

    /// How many units the host remembers.
    pub fn len(&self) -> usize {
        self.units.len()
    }

    pub fn is_empty(&self) -> bool {
        self.units.is_empty()
    }
}

/// The `n`th hold (from 1): 10 s, 20 s, 40 s, ..., at most 5 min.
pub fn hold_length(n: u32) -> Duration {
    let doubled = FIRST_HOLD.saturating_mul(1u32 << n.saturating_sub(1).min(16));
    doubled.min(LONGEST_HOLD)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A unit that dies as soon as it starts, started by a watch that
    /// repairs it `reaction` after each death unless it is held, until
    /// `end`: the start times, from the first.
    pub(crate) fn crash_loop(reaction: Duration, end: Duration) -> Vec<Duration> {
        let zero = Instant::now();
        let mut backoff = Backoff::default();
        let mut starts = Vec::new();
        let mut now = zero;
        while now - zero < end {
            starts.push(now - zero);
            now = match backoff.started("web.service", now) {
                Some(hold) => hold.until,
                None => now + reaction,
            };
        }
        starts
    }

    #[test]
    fn holds_double_from_ten_seconds_to_five_minutes() {
        let lengths: Vec<u64> = (1..=8).map(|n| hold_length(n).as_secs()).collect();
        assert_eq!(lengths, [10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(hold_length(u32::MAX), LONGEST_HOLD);
    }

    #[test]
    fn a_crash_loop_is_started_three_times_then_held_back_exactly_so() {
        let reaction = Duration::from_millis(100);
        let starts = crash_loop(reaction, Duration::from_secs(3600));
        let millis: Vec<u128> = starts.iter().map(Duration::as_millis).collect();
        // Three starts 100 ms apart, then one after each hold: 10 s, 20 s,
        // 40 s, 80 s, 160 s, then every 5 min.
        let mut expected = vec![0, 100, 200, 10_200, 30_200, 70_200, 150_200, 310_200];
        let mut at = 310_200;
        while at + 300_000 < 3_600_000 {
            at += 300_000;
            expected.push(at);
        }
        assert_eq!(millis, expected);
        assert_eq!(starts.len(), 18, "host starts in the first hour");
    }

    #[test]
    fn starts_spread_over_more_than_a_minute_are_never_held() {
        let zero = Instant::now();
        let mut backoff = Backoff::default();
        for n in 0..10u64 {
            let hold = backoff.started("web.service", zero + Duration::from_secs(31 * n));
            assert_eq!(hold, None, "start {n}");
        }
        // Two units count apart.
        assert_eq!(backoff.started("db.service", zero), None);
        assert_eq!(backoff.len(), 2);
    }

    #[test]
    fn ten_healthy_minutes_forget_the_holds() {
        let zero = Instant::now();
        let mut backoff = Backoff::default();
        let at = |s: u64| zero + Duration::from_secs(s);
        assert_eq!(backoff.started("web.service", at(0)), None);
        assert_eq!(backoff.started("web.service", at(1)), None);
        let first = backoff.started("web.service", at(2)).expect("held");
        assert_eq!(
            (first.length, first.until, first.recent_starts),
            (FIRST_HOLD, at(12), 3)
        );
        assert_eq!(
            backoff.held(at(5)).collect::<Vec<_>>(),
            [("web.service", at(12))]
        );
        assert_eq!(backoff.held(at(12)).count(), 0);
        // Needed again after its hold: twice as long.
        let second = backoff.started("web.service", at(12)).expect("held again");
        assert_eq!(second.length, Duration::from_secs(20));
        // Healthy for 9 minutes is not enough...
        let third = backoff
            .started("web.service", at(12 + 9 * 60))
            .expect("held");
        assert_eq!(third.length, Duration::from_secs(40));
        // ... 10 minutes is: three starts again before a hold, of 10 s.
        let later = 12 + 9 * 60 + 10 * 60;
        assert_eq!(backoff.started("web.service", at(later)), None);
        assert_eq!(backoff.started("web.service", at(later + 1)), None);
        assert_eq!(
            backoff
                .started("web.service", at(later + 2))
                .map(|h| h.length),
            Some(FIRST_HOLD)
        );
        backoff.forget_healthy(at(later + 2 + 600));
        assert!(backoff.is_empty());
    }
}
