//! Settle windows: a start or restart counts only when its unit stays up
//! for `settle` after its job, with the same invocation and no automatic
//! restart; judged at the unit's next status, as early as it goes down.

use std::time::{Duration, Instant, SystemTime};

use super::jobs::WAIT_SLICE;
use super::{Run, Units};
use crate::contract::{JobOutcome, Operation, ProviderError};
use crate::provider::backend::{Backend, Budget, JobId};
use crate::provider::liveness::Liveness;
use crate::provider::Outcome;
use crate::text::Untrusted;

/// [`Units`]' state for one run: the windows still open.
#[derive(Debug, Clone)]
pub(crate) struct Settle {
    /// How long a unit must stay up after its start or restart job ended
    /// for the start to count; zero judges it when the job ends.
    span: Duration,
    /// Settle windows still open, oldest first.
    windows: Vec<Window>,
}

impl Settle {
    pub(crate) fn new(span: Duration) -> Self {
        Self {
            span,
            windows: Vec::new(),
        }
    }
}

/// The settle window of a start or restart whose job ended well.
#[derive(Debug, Clone)]
pub(super) struct Window {
    unit: String,
    operation: Operation,
    /// The index in the records of the call that made the start.
    record: usize,
    opened: Instant,
    ends: Instant,
    /// The unit as the job left it, when the backend could tell.
    baseline: Option<Liveness>,
    /// When the start was asked for, by the wall clock: the journal's
    /// lines of the unit from then on are the ones of this start.
    since: SystemTime,
}

impl<B: Backend> Units<B> {
    /// Opens the settle window of a start or restart of `unit` whose job
    /// just ended well (none when `settle` is zero).
    pub(super) fn open_window(
        &mut self,
        unit: &str,
        operation: Operation,
        record: usize,
        asked: Instant,
        time: &Budget,
    ) {
        if self.settle.span.is_zero() {
            return;
        }
        let opened = self.backend.now();
        let baseline = self.backend.liveness_at_start(unit, time);
        self.settle.windows.retain(|w| w.unit != unit);
        self.settle.windows.push(Window {
            unit: unit.to_owned(),
            operation,
            record,
            opened,
            ends: opened + self.settle.span,
            baseline,
            since: wall_clock(asked),
        });
    }

    /// Waits for the end of `unit`'s settle window, if it has one open
    /// (when `wait`), and judges it: the unit is watched meanwhile, and
    /// judged at once when it changed for the worse; an interrupted run
    /// judges at once.
    pub(super) fn close_window(&mut self, unit: &str, wait: bool, run: &mut Run<'_>) {
        let time = run.budget();
        let Some(at) = self.settle.windows.iter().position(|w| w.unit == unit) else {
            return;
        };
        let window = self.settle.windows.remove(at);
        let watched = [window.unit.clone()];
        let verdict = if wait {
            self.watch_window(&window, &watched, run)
        } else {
            None
        };
        let verdict = verdict.or_else(|| self.judge(&window, &time));
        if self.settle.windows.is_empty() {
            self.backend.unwatch();
        }
        let Some(why) = verdict else {
            return;
        };
        tracing::debug!(service = window.unit, why, "start did not stay up");
        let journal = self.backend.journal(&window.unit, window.since, &time);
        let error = ProviderError::CommandFailed(why);
        if let Some(call) = run.calls.get_mut(window.record) {
            call.outcome = Outcome::of(&error);
            call.error = Some(Untrusted::new(error.message()));
            call.journal = journal;
        }
        self.jobs.ended.insert(
            window.unit,
            JobOutcome {
                operation: window.operation,
                error: Some(error),
            },
        );
    }

    /// Watches the unit of `window` until its end (or an interruption):
    /// the verdict as soon as a change of the unit made it fail; `None`
    /// when it did not (yet).
    pub(super) fn watch_window(
        &mut self,
        window: &Window,
        watched: &[String],
        run: &mut Run<'_>,
    ) -> Option<String> {
        let time = run.budget();
        // It may have gone down before anything watched it (a daemon that
        // exits at once): looked at once first, when changes are watched
        // (with systemctl, one look at the end is all there is).
        if self.backend.watches_units() {
            if let Some(verdict) = self.judge(window, &time) {
                return Some(verdict);
            }
        }
        loop {
            // Jobs of other units that ended meanwhile open their windows
            // now, not when their status comes: windows run side by side.
            self.take_ended_jobs(run);
            let now = self.backend.now();
            if now >= window.ends || crate::interrupt::since().is_some() {
                return None;
            }
            let until = window.ends.min(now + WAIT_SLICE);
            if self.backend.watch_units(watched, until) {
                if let Some(verdict) = self.judge(window, &time) {
                    return Some(verdict);
                }
            }
        }
    }

    /// Why the start `window` follows did not count; `None` when it stayed
    /// up so far (or its state could not be read: the status that follows
    /// says what it is).
    pub(super) fn judge(&mut self, window: &Window, time: &Budget) -> Option<String> {
        let now = self.backend.liveness(&window.unit, time).ok()??;
        if now.active.is_empty() {
            return None;
        }
        let after = self.backend.now().saturating_duration_since(window.opened);
        now.did_not_stay_up(window.baseline.as_ref(), &window.unit, after)
    }

    /// Completes the jobs that already ended, without waiting.
    pub(super) fn take_ended_jobs(&mut self, run: &mut Run<'_>) {
        if self.jobs.pending.is_empty() {
            return;
        }
        let ids: Vec<JobId> = self.jobs.pending.iter().map(|j| j.id).collect();
        for (id, result) in self.backend.wait_jobs(&ids, Instant::now()) {
            self.job_ended(id, result, run);
        }
    }

    /// Closes every open window, each at its end.
    pub(super) fn close_windows(&mut self, run: &mut Run<'_>) {
        while let Some(unit) = self.settle.windows.first().map(|w| w.unit.clone()) {
            self.close_window(&unit, true, run);
        }
    }

    /// A failed start or restart of `unit`, explained: systemd's `Result`
    /// and how the main process ended, when the error does not say them,
    /// and the last lines the unit wrote to the journal.
    pub(super) fn explain(
        &mut self,
        unit: &str,
        error: ProviderError,
        asked: Instant,
        time: &Budget,
    ) -> (ProviderError, Vec<Untrusted>) {
        let Ok(Some(now)) = self.backend.liveness(unit, time) else {
            return (error, Vec::new());
        };
        let journal = self.backend.journal(unit, wall_clock(asked), time);
        let last = now.last_exit();
        if last.is_empty() {
            return (error, journal);
        }
        let message = format!("{} ({last})", error.message());
        let error = match error {
            ProviderError::CommandFailed(_) => ProviderError::CommandFailed(message),
            other => other,
        };
        (error, journal)
    }
}

/// The wall-clock time of `at` (an instant of the past).
fn wall_clock(at: Instant) -> SystemTime {
    SystemTime::now() - Instant::now().saturating_duration_since(at)
}
