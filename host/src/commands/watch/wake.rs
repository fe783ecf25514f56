//! What wakes a watch, and how wakes become runs: events are gathered for
//! a short `debounce` after the first one, then run as one, for the
//! policies they concern (level-triggered: an event only says which policy
//! to run; the run reads everything afresh).

use crate::report::machine::RunCause;
use std::collections::BTreeSet;
use std::fmt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::commands::run::Selection;

/// One event a watcher saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Wake {
    /// A unit's `ActiveState` or `SubState` moved (systemd's name).
    Unit(String),
    /// systemd finished reloading its unit files (`Reloading(false)`).
    Reloaded,
    /// A watched file or directory changed.
    Path(PathBuf),
    /// Something may have been missed (the bus came back, systemd was
    /// re-executed, inotify's queue overflowed): everything runs.
    Missed(&'static str),
    /// SIGHUP: host.toml is read again, and everything runs.
    Hangup,
    /// SIGTERM or SIGINT: the watch ends after the run under way.
    Stop(&'static str),
}

/// Why a watch runs (as kube-rs' `ReconcileReason`): what it saw, or what
/// it asked for itself. Its words are the lines' `CAUSE=`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Cause {
    /// The watch began: its first, full run.
    Start,
    /// The periodic full run.
    Resync,
    /// Something a watcher saw, in words (`web.service changed`).
    Event(String),
    /// A unit held back after a crash loop may be started again.
    HoldEnded(String),
    /// An operator's timed pause ended.
    PauseEnded,
    /// The last run could not happen: it is tried again.
    Retry,
    /// Causes beyond the named ones, counted.
    More(usize),
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::Start => f.write_str("start"),
            Cause::Resync => f.write_str("resync"),
            Cause::Event(words) => f.write_str(words),
            Cause::HoldEnded(unit) => write!(f, "the hold of {unit} ended"),
            Cause::PauseEnded => f.write_str("a pause ended"),
            Cause::Retry => f.write_str("a run that could not happen"),
            Cause::More(n) => write!(f, "{n} more"),
        }
    }
}

/// A run the watch asks for after one ends (as kube-rs' `Action`): when, for
/// which policies (`None`: all of them), and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FollowUp {
    pub(crate) at: Instant,
    pub(crate) keys: Option<BTreeSet<String>>,
    pub(crate) cause: Cause,
}

/// Why a run happens, said in its log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Due {
    pub(crate) selection: Selection,
    /// The first few causes.
    pub(crate) causes: Vec<Cause>,
}

impl Due {
    /// What caused the run, in one word, for the machine's state: the
    /// first cause's kind.
    pub(crate) fn run_cause(&self) -> RunCause {
        match self.causes.first() {
            Some(Cause::Start) => RunCause::Start,
            Some(Cause::Resync) => RunCause::Resync,
            Some(Cause::HoldEnded(_)) => RunCause::HoldEnded,
            Some(Cause::PauseEnded) => RunCause::PauseEnded,
            Some(Cause::Retry) => RunCause::Retry,
            Some(Cause::Event(_) | Cause::More(_)) | None => RunCause::Event,
        }
    }

    /// The causes in words, as the run's line says them.
    pub(crate) fn causes_said(&self) -> String {
        let said: Vec<String> = self.causes.iter().map(Cause::to_string).collect();
        said.join(", ")
    }
}

/// At most this many causes are named in a run's line; the rest counted.
const NAMED_CAUSES: usize = 3;

impl Wake {
    /// Whether more of its kind may follow at once, so that its run waits
    /// the debounce for them: a file (`sed -i` writes and renames, dpkg
    /// writes its status several times while it upgrades). A unit's state
    /// moving, or systemd's reload, is one signal: its run starts at once,
    /// and what comes while it runs makes one more.
    pub(crate) fn may_burst(&self) -> bool {
        matches!(self, Wake::Path(_))
    }
}

/// The wakes gathered since the last run.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    /// When the first wake that may be one of a burst came.
    first_burst: Option<Instant>,
    /// When the first wake that is one signal came (or is due: a run the
    /// last one asked for).
    first_lone: Option<Instant>,
    all: bool,
    keys: BTreeSet<String>,
    causes: Vec<Cause>,
    more_causes: usize,
}

impl Pending {
    /// Adds a wake that may be one of a burst and concerns the policies
    /// `keys` (`None`: all of them), seen at `now`; a wake that concerns
    /// none is dropped.
    pub(crate) fn add(&mut self, keys: Option<BTreeSet<String>>, cause: Cause, now: Instant) {
        if self.take_keys(keys) {
            self.first_burst = Some(self.first_burst.map_or(now, |first| first.min(now)));
            self.name(cause);
        }
    }

    /// Adds a wake that is one signal, due `at` (now, or a run planned for
    /// later: a retry, a hold's end).
    pub(crate) fn add_lone(&mut self, keys: Option<BTreeSet<String>>, cause: Cause, at: Instant) {
        if self.take_keys(keys) {
            // The earliest: a wake planned for later does not delay one
            // that came now.
            self.first_lone = Some(self.first_lone.map_or(at, |first| first.min(at)));
            self.name(cause);
        }
    }

    /// Takes `keys` in; false when they are no policy's.
    fn take_keys(&mut self, keys: Option<BTreeSet<String>>) -> bool {
        match keys {
            Some(keys) if keys.is_empty() => return false,
            Some(keys) => self.keys.extend(keys),
            None => self.all = true,
        }
        true
    }

    /// Names `cause`, up to [`NAMED_CAUSES`]; the rest counted.
    fn name(&mut self, cause: Cause) {
        if self.causes.len() < NAMED_CAUSES {
            if !self.causes.contains(&cause) {
                self.causes.push(cause);
            }
        } else if !self.causes.contains(&cause) {
            self.more_causes += 1;
        }
    }

    /// The runs a run asked for next, each due at its time.
    pub(crate) fn following(follow_ups: Vec<FollowUp>) -> Self {
        let mut pending = Self::default();
        for follow_up in follow_ups {
            pending.add_lone(follow_up.keys, follow_up.cause, follow_up.at);
        }
        pending
    }

    /// When the gathered wakes are due: `debounce` after the first that may
    /// be one of a burst (a lone signal does not cut a burst short: a run
    /// mid-way through dpkg's writes would restart twice), else at the
    /// first lone one.
    pub(crate) fn due_at(&self, debounce: Duration) -> Option<Instant> {
        match (self.first_burst, self.first_lone) {
            (Some(burst), _) => Some(burst + debounce),
            (None, lone) => lone,
        }
    }

    /// The run the gathered wakes make, if they are due at `now`; they are
    /// then forgotten.
    pub(crate) fn take_if_due(&mut self, now: Instant, debounce: Duration) -> Option<Due> {
        if self.due_at(debounce)? > now {
            return None;
        }
        let taken = std::mem::take(self);
        let mut causes = taken.causes;
        if taken.more_causes > 0 {
            causes.push(Cause::More(taken.more_causes));
        }
        Some(Due {
            selection: if taken.all {
                Selection::All
            } else {
                Selection::Only(taken.keys)
            },
            causes,
        })
    }
}

/// The next resync: `every`, give or take a tenth, so that a fleet's
/// machines do not all pull from the registry at once. `salt` varies it
/// (any number that differs between machines and runs).
pub(crate) fn next_resync(now: Instant, every: Duration, salt: u64) -> Instant {
    let tenth = every.as_millis() / 10;
    if tenth == 0 {
        return now + every;
    }
    // A spread of ±tenth, from the bits of `salt` (splitmix64's mixer).
    let mut x = salt.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    let spread = u128::from(x) % (2 * tenth + 1);
    let millis = every.as_millis() - tenth + spread;
    now + Duration::from_millis(u64::try_from(millis).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(words: &str) -> Cause {
        Cause::Event(words.to_owned())
    }

    fn keys(names: &[&str]) -> Option<BTreeSet<String>> {
        Some(names.iter().map(|n| (*n).to_owned()).collect())
    }

    #[test]
    fn wakes_within_the_debounce_make_one_run_of_the_policies_they_concern() {
        let t0 = Instant::now();
        let debounce = Duration::from_millis(100);
        let mut pending = Pending::default();
        assert_eq!(pending.take_if_due(t0, debounce), None);
        pending.add(keys(&["a.wasm"]), event("web.service changed"), t0);
        pending.add(
            keys(&["b.wasm"]),
            event("/etc/web.conf changed"),
            t0 + Duration::from_millis(60),
        );
        // The debounce counts from the first wake, not the last: a steady
        // trickle of events cannot hold a repair back.
        assert_eq!(pending.due_at(debounce), Some(t0 + debounce));
        assert_eq!(
            pending.take_if_due(t0 + Duration::from_millis(99), debounce),
            None
        );
        let due = pending
            .take_if_due(t0 + Duration::from_millis(100), debounce)
            .expect("due");
        assert_eq!(
            due.selection,
            Selection::Only(keys(&["a.wasm", "b.wasm"]).unwrap())
        );
        assert_eq!(
            due.causes_said(),
            "web.service changed, /etc/web.conf changed"
        );
        // Taken once.
        assert_eq!(pending.take_if_due(t0 + debounce * 5, debounce), None);
    }

    #[test]
    fn a_wake_that_concerns_no_policy_wakes_nothing() {
        let t0 = Instant::now();
        let mut pending = Pending::default();
        pending.add(keys(&[]), event("other.service changed"), t0);
        assert_eq!(pending.due_at(Duration::ZERO), None);
        assert_eq!(
            pending.take_if_due(t0 + Duration::from_secs(9), Duration::ZERO),
            None
        );
    }

    #[test]
    fn a_wake_for_everything_makes_a_full_run_and_causes_are_bounded() {
        let t0 = Instant::now();
        let mut pending = Pending::default();
        pending.add(keys(&["a.wasm"]), event("a"), t0);
        pending.add(None, event("host.toml changed"), t0);
        for i in 0..10 {
            pending.add(keys(&["a.wasm"]), event(&format!("unit{i} changed")), t0);
        }
        pending.add(keys(&["a.wasm"]), event("a"), t0);
        let due = pending.take_if_due(t0, Duration::ZERO).unwrap();
        assert_eq!(due.selection, Selection::All);
        assert_eq!(
            due.causes_said(),
            "a, host.toml changed, unit0 changed, 9 more"
        );
        assert_eq!(due.causes[3], Cause::More(9));
    }

    #[test]
    fn follow_ups_are_due_at_their_time_and_the_earliest_leads() {
        let t0 = Instant::now();
        let debounce = Duration::from_millis(100);
        let hold_end = t0 + Duration::from_secs(10);
        let retry = t0 + Duration::from_secs(5);
        let pending = Pending::following(vec![
            FollowUp {
                at: hold_end,
                keys: keys(&["a.wasm"]),
                cause: Cause::HoldEnded("web.service".into()),
            },
            FollowUp {
                at: retry,
                keys: keys(&["b.wasm"]),
                cause: Cause::Retry,
            },
        ]);
        // Due at the earliest follow-up's own time, not a debounce later.
        assert_eq!(pending.due_at(debounce), Some(retry));
        let mut pending = pending;
        assert_eq!(
            pending.take_if_due(retry - Duration::from_millis(1), debounce),
            None
        );
        let due = pending.take_if_due(retry, debounce).expect("due");
        assert_eq!(
            due.selection,
            Selection::Only(keys(&["a.wasm", "b.wasm"]).unwrap())
        );
        assert_eq!(
            due.causes_said(),
            "the hold of web.service ended, a run that could not happen"
        );
        assert!(Pending::following(Vec::new()).due_at(debounce).is_none());
    }

    #[test]
    fn a_units_signal_runs_at_once_a_files_change_waits_for_its_burst() {
        let t0 = Instant::now();
        let debounce = Duration::from_millis(100);
        assert!(!Wake::Unit("web.service".into()).may_burst());
        assert!(!Wake::Reloaded.may_burst());
        assert!(Wake::Path("/etc/web.conf".into()).may_burst());
        // A stop: one signal, due when it came.
        let mut pending = Pending::default();
        pending.add_lone(keys(&["a.wasm"]), event("web.service changed"), t0);
        assert_eq!(pending.due_at(debounce), Some(t0));
        assert!(pending.take_if_due(t0, debounce).is_some());
        // A file: the debounce, for the rest of its burst.
        pending.add(keys(&["a.wasm"]), event("/etc/web.conf changed"), t0);
        assert_eq!(pending.take_if_due(t0, debounce), None);
        // A unit's signal meanwhile does not cut the burst short (dpkg
        // restarting a service while it still writes its status).
        pending.add_lone(
            keys(&["b.wasm"]),
            event("db.service changed"),
            t0 + Duration::from_millis(10),
        );
        assert_eq!(pending.due_at(debounce), Some(t0 + debounce));
        let due = pending.take_if_due(t0 + debounce, debounce).expect("due");
        assert_eq!(
            due.selection,
            Selection::Only(keys(&["a.wasm", "b.wasm"]).unwrap())
        );
        // A follow-up planned for later does not hold back a signal now.
        let mut pending = Pending::following(vec![FollowUp {
            at: t0 + Duration::from_secs(10),
            keys: keys(&["a.wasm"]),
            cause: Cause::Retry,
        }]);
        pending.add_lone(keys(&["b.wasm"]), event("db.service changed"), t0);
        assert_eq!(pending.due_at(debounce), Some(t0));
    }

    #[test]
    fn a_watchs_own_reasons_say_what_they_are() {
        for (cause, words) in [
            (Cause::Start, "start"),
            (Cause::Resync, "resync"),
            (
                Cause::HoldEnded("web.service".into()),
                "the hold of web.service ended",
            ),
            (Cause::PauseEnded, "a pause ended"),
            (Cause::Retry, "a run that could not happen"),
        ] {
            assert_eq!(cause.to_string(), words);
        }
    }

    #[test]
    fn resyncs_spread_within_a_tenth_either_way() {
        let now = Instant::now();
        let every = Duration::from_secs(900);
        let mut seen = BTreeSet::new();
        for salt in 0..1000u64 {
            let at = next_resync(now, every, salt) - now;
            assert!(
                at >= Duration::from_secs(810) && at <= Duration::from_secs(990),
                "{at:?}"
            );
            seen.insert(at.as_secs() / 30);
        }
        // Spread over the whole range, not bunched: 180 s in 30 s bins.
        assert!(seen.len() >= 6, "{seen:?}");
        assert_eq!(
            next_resync(now, Duration::from_millis(5), 1),
            now + Duration::from_millis(5)
        );
    }
}
