//! Settle windows: a start or restart counts only when its unit stays up
//! for `settle` after its job, with the same invocation and no automatic
//! restart; judged at the unit's next status, as early as it goes down.
//!
//! A watch's runs judge their windows later ([`Windows`]): a window may
//! outlive the run that opened it, so that the next drift is repaired at
//! once instead of after another unit's window; its verdict then reaches
//! the run's records when it comes ([`Verdict`]).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use super::jobs::WAIT_SLICE;
use super::{Run, Units};
use crate::contract::{JobOutcome, Operation, ProviderError};
use crate::provider::backend::{Backend, Budget, JobId};
use crate::provider::liveness::Liveness;
use crate::provider::Outcome;
use crate::text::Untrusted;

/// [`Units`]' state for one run: where its windows are kept, and whether
/// it waits for them.
#[derive(Debug, Clone)]
pub(crate) struct Settle {
    /// How long a unit must stay up after its start or restart job ended
    /// for the start to count; zero judges it when the job ends.
    span: Duration,
    /// The windows still open: this run's alone, or a watch's.
    windows: Windows,
    /// Which run this is, among those sharing `windows`.
    run: u64,
    /// A watch's run: a status does not wait for its unit's window, and the
    /// run ends with its windows still open ([`Windows`]).
    later: bool,
}

impl Settle {
    /// A run's own windows, each waited for and judged within it.
    pub(crate) fn new(span: Duration) -> Self {
        Self {
            span,
            windows: Windows::default(),
            run: 0,
            later: false,
        }
    }

    /// A watch's run, whose windows outlive it in `windows`.
    pub(crate) fn later(span: Duration, windows: RunWindows) -> Self {
        Self {
            span,
            windows: windows.windows,
            run: windows.run,
            later: true,
        }
    }
}

/// The settle windows of a watch's runs, open and judged: shared by them
/// all, so that any run's provider can judge any window (a run that
/// changes a unit ends the window an earlier run opened on it, as a run
/// ends its own), and each run learns its windows' verdicts when they come.
/// A run with its windows open holds the machine's lock until they close:
/// no other `host run` moves a unit inside one.
#[derive(Debug, Clone, Default)]
pub struct Windows {
    shared: Arc<Mutex<Registry>>,
}

#[derive(Debug, Default)]
struct Registry {
    /// Windows still open, oldest first.
    open: Vec<Window>,
    /// Failed windows whose run had handed out its records.
    verdicts: Vec<Owed>,
    /// Runs begun so far.
    runs: u64,
}

/// A failed window of a run whose records were handed out before it was
/// judged: what the record of its start must say.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// The place of the start's record among all its run's records.
    pub record: usize,
    pub error: ProviderError,
    pub journal: Vec<Untrusted>,
}

/// A verdict, and the run it is owed to.
#[derive(Debug)]
struct Owed {
    run: u64,
    verdict: Verdict,
}

/// One run's share of a watch's [`Windows`].
#[derive(Debug, Clone)]
pub struct RunWindows {
    windows: Windows,
    run: u64,
}

impl Windows {
    /// A new run's share.
    pub fn begin_run(&self) -> RunWindows {
        let run = {
            let mut registry = self.lock();
            registry.runs += 1;
            registry.runs
        };
        RunWindows {
            windows: self.clone(),
            run,
        }
    }

    /// When the first open window ends, if one is open.
    pub fn next_end(&self) -> Option<Instant> {
        self.lock().open.iter().map(|w| w.ends).min()
    }

    fn lock(&self) -> MutexGuard<'_, Registry> {
        // Nothing panics while holding it; a poisoned registry is still whole.
        self.shared
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn open(&self, window: Window) {
        let mut registry = self.lock();
        registry.open.retain(|w| w.unit != window.unit);
        registry.open.push(window);
    }

    fn take(&self, unit: &str) -> Option<Window> {
        let mut registry = self.lock();
        let at = registry.open.iter().position(|w| w.unit == unit)?;
        Some(registry.open.remove(at))
    }

    fn get(&self, unit: &str) -> Option<Window> {
        self.lock().open.iter().find(|w| w.unit == unit).cloned()
    }

    /// The units of the open windows, oldest first.
    fn units(&self) -> Vec<String> {
        self.lock().open.iter().map(|w| w.unit.clone()).collect()
    }

    fn first_unit(&self) -> Option<String> {
        self.lock().open.first().map(|w| w.unit.clone())
    }

    fn is_empty(&self) -> bool {
        self.lock().open.is_empty()
    }
}

impl RunWindows {
    /// Whether a window this run opened is still open.
    pub fn open(&self) -> bool {
        self.windows.lock().open.iter().any(|w| w.run == self.run)
    }

    /// The verdicts of this run's failed windows that came since the last
    /// call, for records it handed out.
    pub fn take_verdicts(&self) -> Vec<Verdict> {
        let mut registry = self.windows.lock();
        let (mine, others) = std::mem::take(&mut registry.verdicts)
            .into_iter()
            .partition(|v| v.run == self.run);
        registry.verdicts = others;
        mine.into_iter().map(|v| v.verdict).collect()
    }
}

/// The settle window of a start or restart whose job ended well.
#[derive(Debug, Clone)]
pub(super) struct Window {
    unit: String,
    /// The run that opened it.
    run: u64,
    operation: Operation,
    /// The place in its run's records of the call that made the start.
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
        self.settle.windows.open(Window {
            unit: unit.to_owned(),
            run: self.settle.run,
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
        let Some(window) = self.settle.windows.take(unit) else {
            return;
        };
        let watched = [window.unit.clone()];
        let verdict = if wait {
            self.watch_window(&window, &watched, run)
        } else {
            None
        };
        let verdict = verdict.or_else(|| self.judge(&window, &time));
        self.deliver(window, verdict, run);
    }

    /// Judges the windows a watch's run left open, wherever they came
    /// from: every one when `all` (the watch ends), else those whose end
    /// came, and those of the units in `changed` (systemd said they moved)
    /// that went down, as early as that.
    pub(super) fn settle_due(&mut self, changed: &[String], all: bool, run: &mut Run<'_>) {
        let time = run.budget();
        let now = self.backend.now();
        for unit in self.settle.windows.units() {
            let Some(window) = self.settle.windows.get(&unit) else {
                continue;
            };
            if all || window.ends <= now {
                self.close_window(&unit, false, run);
            } else if changed.contains(&unit) {
                if let Some(why) = self.judge(&window, &time) {
                    if let Some(window) = self.settle.windows.take(&unit) {
                        self.deliver(window, Some(why), run);
                    }
                }
            }
        }
    }

    /// A window's verdict, to the record of its start: in the records at
    /// hand, or owed to its run when that handed them out (a watch's).
    /// Only a failed window changes anything: its start did not count.
    fn deliver(&mut self, window: Window, verdict: Option<String>, run: &mut Run<'_>) {
        let time = run.budget();
        if self.settle.windows.is_empty() {
            self.backend.unwatch();
        }
        let Some(why) = verdict else {
            return;
        };
        tracing::debug!(service = window.unit, why, "start did not stay up");
        let journal = self.backend.journal(&window.unit, window.since, &time);
        let error = ProviderError::CommandFailed(why);
        let ours = window.run == self.settle.run;
        match run.calls.get_mut(window.record).filter(|_| ours) {
            Some(call) => {
                call.outcome = Outcome::of(&error);
                call.error = Some(Untrusted::new(error.message()));
                call.journal = journal;
            }
            None => self.settle.windows.lock().verdicts.push(Owed {
                run: window.run,
                verdict: Verdict {
                    record: window.record,
                    error: error.clone(),
                    journal,
                },
            }),
        }
        // The unit's next status in this run says how its start ended; a
        // window of an earlier run is not this run's to say.
        if ours {
            self.jobs.ended.insert(
                window.unit,
                JobOutcome {
                    operation: window.operation,
                    error: Some(error),
                },
            );
        }
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

    /// Closes every open window, each at its end; a watch's run leaves
    /// them open ([`Windows`]).
    pub(super) fn close_windows(&mut self, run: &mut Run<'_>) {
        if self.settle.later {
            return;
        }
        while let Some(unit) = self.settle.windows.first_unit() {
            self.close_window(&unit, true, run);
        }
    }

    /// In a watch's run, where a status does not wait for its unit's
    /// window: this run's window of `unit`, if one is open, waited for and
    /// judged before the unit's enablement changes; the start's failure
    /// when it did not count.
    pub(super) fn start_counted(&mut self, unit: &str, run: &mut Run<'_>) -> Option<ProviderError> {
        let ours = self
            .settle
            .windows
            .get(unit)
            .is_some_and(|w| w.run == self.settle.run);
        if !self.settle.later || !ours {
            return None;
        }
        self.close_window(unit, true, run);
        self.jobs.ended.get(unit).and_then(|o| o.error.clone())
    }

    /// Whether a status waits for its unit's window: not in a watch's run,
    /// where the window is judged when it ends or the unit moves.
    pub(super) fn status_waits_for_window(&self) -> bool {
        !self.settle.later
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
