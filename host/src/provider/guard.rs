//! The guard layer, the same over every backend. Each operation a guest
//! asks for passes, in order:
//!
//! 1. the name check (a unit name systemd would take, never an option);
//! 2. the allowlist (`allow_units`);
//! 3. availability (systemctl found);
//! 4. the run's one daemon-reload: before its first change, and before its
//!    first status unless the backend can tell whether the unit's files
//!    changed since systemd loaded them (over D-Bus, `NeedDaemonReload`);
//!    then only a status of a unit whose files changed makes it, and that
//!    unit is read again after it;
//! 5. noop (a change is refused in a dry run);
//! 6. the deadline (the per-command timeout, cut at the run's wall clock);
//! 7. the backend, which talks to systemd;
//! 8. the record: one [`CallRecord`] per operation, whatever happened.
//!
//! It also ends the run: one daemon-reload after enablement changes.
//!
//! Jobs a backend queues (start, stop and restart over D-Bus) are followed
//! here, the same way for every backend: at most `jobs` of them are pending
//! at once (a submission waits for a slot), each has the per-command
//! timeout from its submission (cut at the run's deadline, and at the
//! interruption's grace), a `status` of a unit waits for its pending job and
//! carries how it ended, and the record of the call that queued a job is
//! completed with the job's result when it ends. With `jobs = 1` a call
//! returns only when its job has ended, with its failure as its error, as
//! systemctl does. No record is handed out while a job of it is pending.
//!
//! A start or restart counts only when the unit stays up: after its job
//! ended well, a settle window opens (`settle`, 1 s by default). The
//! unit's next `status` waits for the window's end (watching the unit, so
//! that a unit that dies is judged at once) and judges it: still up, with
//! the same invocation and no automatic restart, or the start failed, in
//! systemd's words, and the status says so as the start's outcome (and its
//! record too). Windows of units started side by side run side by side. A
//! failed start, restart or window also gets the last lines the unit wrote
//! to the journal, in its record only (never given to a guest).

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime};

use super::backend::{Applied, Backend, Budget, Change, JobId, JobResult};
use super::liveness::Liveness;
use super::{Call, CallRecord, Outcome, Provider, UnitAllowlist, UnitState};
use crate::contract::{JobOutcome, Operation, Progress, ProviderError, ServiceStatus};
use crate::service_name::{quote, CheckedName};
use crate::text::Untrusted;

/// The guard's settings for one run.
#[derive(Debug, Clone)]
pub struct Guard {
    /// When set, operations on units it does not allow are refused.
    pub allow: Option<UnitAllowlist>,
    /// A dry run: changes are refused and no daemon-reload is made.
    pub noop: bool,
    /// The longest a single exchange with systemd may take, and a job from
    /// its submission to its end.
    pub timeout: Duration,
    /// How many jobs of this run may be pending at once; 1 makes every
    /// call wait for its job.
    pub jobs: usize,
    /// How long a unit must stay up after its start or restart job ended
    /// for the start to count; zero judges it when the job ends.
    pub settle: Duration,
}

/// The settle window of a start or restart whose job ended well.
#[derive(Debug, Clone)]
struct Window {
    unit: String,
    operation: Operation,
    /// The index in `calls` of the call that made the start.
    record: usize,
    opened: Instant,
    ends: Instant,
    /// The unit as the job left it, when the backend could tell.
    baseline: Option<Liveness>,
    /// When the start was asked for, by the wall clock: the journal's
    /// lines of the unit from then on are the ones of this start.
    since: SystemTime,
}

/// A job queued for this run and not yet ended.
#[derive(Debug, Clone)]
struct PendingJob {
    id: JobId,
    unit: String,
    operation: Operation,
    change: Change,
    /// The index in `calls` of the call that queued it.
    record: usize,
    submitted: Instant,
}

/// Whether the run's first daemon-reload has happened.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reload {
    Pending,
    Done,
    /// It failed; every later operation fails with this message, because the
    /// unit files systemd sees may be out of date.
    Failed(String),
}

/// A backend behind the guard: what the runtime calls a provider.
pub struct Guarded<B> {
    backend: B,
    guard: Guard,
    /// No exchange may run past this (the run's wall-clock limit).
    deadline: Option<Instant>,
    reload: Reload,
    /// An enable or disable succeeded (without a reload): the run ends
    /// with one daemon-reload, so systemd sees the new links.
    enablement_changed: bool,
    calls: Vec<CallRecord>,
    /// Jobs queued and not yet ended, oldest first.
    pending: Vec<PendingJob>,
    /// Per unit, how its last queued job ended, until a `status` says it.
    ended: HashMap<String, JobOutcome>,
    /// Settle windows still open, oldest first.
    windows: Vec<Window>,
}

impl<B: Backend> Guarded<B> {
    pub fn over(backend: B, guard: Guard) -> Self {
        Self {
            backend,
            guard,
            deadline: None,
            reload: Reload::Pending,
            enablement_changed: false,
            calls: Vec::new(),
            pending: Vec::new(),
            ended: HashMap::new(),
            windows: Vec::new(),
        }
    }

    /// Every operation recorded and not yet taken, in order.
    pub fn calls(&self) -> &[CallRecord] {
        &self.calls
    }

    fn budget(&self) -> Budget {
        Budget {
            timeout: self.guard.timeout,
            deadline: self.deadline,
        }
    }

    /// Steps 1 to 3: the name, the allowlist, availability.
    fn admit(&mut self, name: &str) -> Result<CheckedName, ProviderError> {
        let unit = CheckedName::check(name).map_err(ProviderError::InvalidName)?;
        if let Some(allow) = &self.guard.allow {
            if !allow.allows(unit.as_str()) {
                return Err(ProviderError::Denied(format!(
                    "unit {unit} is not allowed on this machine (--allow-unit {})",
                    allow.patterns().join(", ")
                )));
            }
        }
        if let Some(reason) = self.backend.unavailable_reason() {
            return Err(ProviderError::Unavailable(reason.to_owned()));
        }
        Ok(unit)
    }

    /// Whether a status must wait for the run's reload before it reads:
    /// always when the backend cannot tell whether the unit's files changed
    /// (the design's rule), and after a failed reload, which every later
    /// operation reports.
    fn reload_before_status(&mut self) -> bool {
        let budget = self.budget();
        !self.backend.tells_files_changed(&budget) || matches!(self.reload, Reload::Failed(_))
    }

    /// The unit's state; when its files changed since systemd loaded them
    /// (or the backend could not tell) and the run has not reloaded yet,
    /// the run's reload is made and the unit read again, so a guest never
    /// sees systemd's stale copy of a unit.
    fn observe(
        &mut self,
        unit: &CheckedName,
        started: &mut Instant,
    ) -> Result<ServiceStatus, ProviderError> {
        let reload_to_come = self.reload == Reload::Pending && !self.guard.noop;
        let mut observed = self.backend.status(unit, &self.budget(), reload_to_come)?;
        if reload_to_come && observed.files_changed != Some(false) {
            self.reload_once()?;
            *started = Instant::now();
            observed = self.backend.status(unit, &self.budget(), false)?;
        }
        let mut status = observed.status;
        status.job = self.ended.remove(&job_key(unit));
        Ok(status)
    }

    fn reload_once(&mut self) -> Result<(), ProviderError> {
        if self.guard.noop {
            return Ok(());
        }
        match &self.reload {
            Reload::Done => return Ok(()),
            Reload::Failed(message) => return Err(ProviderError::CommandFailed(message.clone())),
            Reload::Pending => {}
        }
        let result = self.daemon_reload();
        self.reload = match &result {
            Ok(()) => Reload::Done,
            Err(e) => Reload::Failed(e.message().to_owned()),
        };
        result
    }

    /// A daemon-reload, recorded as a call of the run.
    fn daemon_reload(&mut self) -> Result<(), ProviderError> {
        let started = Instant::now();
        let result = self.backend.daemon_reload(&self.budget());
        self.record(Call::DaemonReload, None, started, result.as_ref().err());
        result
    }

    /// Records one call; returns the record, for a status to add what it found.
    fn record(
        &mut self,
        operation: Call,
        service: Option<&str>,
        started: Instant,
        error: Option<&ProviderError>,
    ) -> &mut CallRecord {
        tracing::debug!(
            operation = operation.verb(),
            service = service.unwrap_or(""),
            ms = crate::text::millis(started.elapsed()),
            error = error.map(ProviderError::message),
            "provider call"
        );
        self.calls.push(CallRecord {
            operation,
            service: service.map(|s| {
                if CheckedName::check(s).is_ok() {
                    s.to_owned()
                } else {
                    quote(s)
                }
            }),
            outcome: error.map_or(Outcome::Ok, Outcome::of),
            error: error.map(|e| e.message().to_owned()),
            state: None,
            journal: Vec::new(),
            duration: started.elapsed(),
        });
        self.calls.last_mut().expect("just recorded")
    }
}

/// The longest a wait for jobs goes without looking at the clock and at
/// the interruption again.
const WAIT_SLICE: Duration = Duration::from_millis(100);

/// Which pending jobs a wait is for.
#[derive(Debug, Clone, Copy)]
enum Awaited<'a> {
    /// The job of this unit, if it has one.
    Unit(&'a str),
    /// Any one of them: a slot for the next submission.
    Any,
    /// All of them.
    All,
}

impl<B: Backend> Guarded<B> {
    /// When `job` is given up: its timeout from submission, cut at the run's
    /// deadline. Also: whether the job would be cancelled then.
    fn job_until(&self, job: &PendingJob) -> (Instant, GiveUp) {
        let timeout = job.submitted + self.guard.timeout;
        let mut until = (timeout, GiveUp::Timeout);
        if let Some(deadline) = self.deadline.filter(|d| *d < until.0) {
            until = (deadline, GiveUp::Deadline);
        }
        if let Some(since) = crate::interrupt::since() {
            let grace_end = Instant::now() + crate::interrupt::GRACE.saturating_sub(since);
            if grace_end < until.0 {
                until = (grace_end, GiveUp::Interrupted);
            }
        }
        until
    }

    /// Waits for the jobs `awaited` names, completing the record of every
    /// job that ends meanwhile; a job still pending when it is given up
    /// (see [`GiveUp`]) ends `timed-out`.
    fn wait_for(&mut self, awaited: Awaited<'_>) {
        loop {
            let targets: Vec<usize> = (0..self.pending.len())
                .filter(|&i| match awaited {
                    Awaited::Unit(unit) => self.pending[i].unit == unit,
                    Awaited::Any | Awaited::All => true,
                })
                .collect();
            let Some((first, (until, why))) = targets
                .iter()
                .map(|&i| (i, self.job_until(&self.pending[i])))
                .min_by_key(|(_, (until, _))| *until)
            else {
                return;
            };
            let ids: Vec<JobId> = self.pending.iter().map(|j| j.id).collect();
            // In slices, so that a signal to the host cuts the wait short.
            let slice = until.min(Instant::now() + WAIT_SLICE);
            let ended = self.backend.wait_jobs(&ids, slice);
            let some_ended = !ended.is_empty();
            for (id, result) in ended {
                self.job_ended(id, result);
            }
            if some_ended {
                if matches!(awaited, Awaited::Any) {
                    return;
                }
                continue;
            }
            if Instant::now() >= until {
                let job = self.pending[first].clone();
                let what = self.backend.abandon(job.id, why != GiveUp::Interrupted);
                let error = why.error(&job, self.guard.timeout, &what);
                self.job_ended(job.id, Err(error));
                if matches!(awaited, Awaited::Any) {
                    return;
                }
            }
        }
    }

    /// Completes the record of the call that queued `id` with how its job
    /// ended, and keeps that for the unit's next `status`; a start or
    /// restart that ended well opens its settle window, one that failed is
    /// explained in systemd's words and the unit's.
    fn job_ended(&mut self, id: JobId, result: JobResult) {
        let Some(at) = self.pending.iter().position(|j| j.id == id) else {
            return;
        };
        let job = self.pending.remove(at);
        let (result, journal) = match result {
            Err(error) if starts(job.change) && !matches!(error, ProviderError::TimedOut(_)) => {
                let (error, journal) = self.explain(&job.unit, error, job.submitted);
                (Err(error), journal)
            }
            other => (other, Vec::new()),
        };
        if result.is_ok() && starts(job.change) {
            self.open_window(&job.unit, job.operation, job.record, job.submitted);
        }
        tracing::debug!(
            operation = job.operation.verb(),
            service = job.unit,
            ms = crate::text::millis(job.submitted.elapsed()),
            error = result.as_ref().err().map(ProviderError::message),
            "job ended"
        );
        if let Some(call) = self.calls.get_mut(job.record) {
            call.outcome = result.as_ref().err().map_or(Outcome::Ok, Outcome::of);
            call.error = result.as_ref().err().map(|e| e.message().to_owned());
            call.journal = journal;
            call.duration = job.submitted.elapsed();
        }
        self.ended.insert(
            job.unit,
            JobOutcome {
                operation: job.operation,
                error: result.err(),
            },
        );
    }

    /// Makes `change` on `unit`, waiting first for a slot (and for a job of
    /// the same unit); a queued job is followed, or, with `jobs = 1`,
    /// awaited here.
    fn submit(
        &mut self,
        operation: Operation,
        change: Change,
        unit: &CheckedName,
        name: &str,
    ) -> Result<Progress, ProviderError> {
        let key = job_key(unit);
        if change.is_job() {
            self.wait_for(Awaited::Unit(&key));
            // A new job of the unit ends the window of its last start now.
            self.close_window(&key, false);
            while self.pending.len() >= self.guard.jobs.max(1) {
                self.wait_for(Awaited::Any);
            }
        }
        let started = Instant::now();
        let (result, journal) = match self.backend.change(change, unit, &self.budget()) {
            Err(error) if starts(change) && !matches!(error, ProviderError::TimedOut(_)) => {
                let (error, journal) = self.explain(&key, error, started);
                (Err(error), journal)
            }
            other => (other, Vec::new()),
        };
        self.record(
            Call::Guest(operation),
            Some(name),
            started,
            result.as_ref().err(),
        )
        .journal = journal;
        self.enablement_changed |= result.is_ok() && change.is_enablement();
        let id = match result? {
            Applied::Done => {
                if starts(change) {
                    self.open_window(&key, operation, self.calls.len() - 1, started);
                }
                return Ok(Progress::Finished);
            }
            Applied::Queued(id) => id,
        };
        self.pending.push(PendingJob {
            id,
            unit: key.clone(),
            operation,
            change,
            record: self.calls.len() - 1,
            submitted: started,
        });
        if self.guard.jobs > 1 {
            return Ok(Progress::Queued);
        }
        self.wait_for(Awaited::Unit(&key));
        match self.ended.remove(&key).and_then(|o| o.error) {
            Some(error) => Err(error),
            None => Ok(Progress::Finished),
        }
    }
}

impl<B: Backend> Guarded<B> {
    /// Opens the settle window of a start or restart of `unit` whose job
    /// just ended well (none when `settle` is zero).
    fn open_window(&mut self, unit: &str, operation: Operation, record: usize, asked: Instant) {
        if self.guard.settle.is_zero() {
            return;
        }
        let opened = self.backend.now();
        let baseline = self.backend.liveness_at_start(unit, &self.budget());
        self.windows.retain(|w| w.unit != unit);
        self.windows.push(Window {
            unit: unit.to_owned(),
            operation,
            record,
            opened,
            ends: opened + self.guard.settle,
            baseline,
            since: wall_clock(asked),
        });
    }

    /// Waits for the end of `unit`'s settle window, if it has one open
    /// (when `wait`), and judges it: the unit is watched meanwhile, and
    /// judged at once when it changed for the worse; an interrupted run
    /// judges at once.
    fn close_window(&mut self, unit: &str, wait: bool) {
        let Some(at) = self.windows.iter().position(|w| w.unit == unit) else {
            return;
        };
        let window = self.windows.remove(at);
        let watched = [window.unit.clone()];
        let verdict = if wait {
            self.watch_window(&window, &watched)
        } else {
            None
        };
        let verdict = verdict.or_else(|| self.judge(&window));
        if self.windows.is_empty() {
            self.backend.unwatch();
        }
        let Some(why) = verdict else {
            return;
        };
        tracing::debug!(service = window.unit, why, "start did not stay up");
        let journal = self
            .backend
            .journal(&window.unit, window.since, &self.budget());
        let error = ProviderError::CommandFailed(why);
        if let Some(call) = self.calls.get_mut(window.record) {
            call.outcome = Outcome::of(&error);
            call.error = Some(error.message().to_owned());
            call.journal = journal;
        }
        self.ended.insert(
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
    fn watch_window(&mut self, window: &Window, watched: &[String]) -> Option<String> {
        // It may have gone down before anything watched it (a daemon that
        // exits at once): looked at once first, when changes are watched
        // (with systemctl, one look at the end is all there is).
        if self.backend.watches_units() {
            if let Some(verdict) = self.judge(window) {
                return Some(verdict);
            }
        }
        loop {
            // Jobs of other units that ended meanwhile open their windows
            // now, not when their status comes: windows run side by side.
            self.take_ended_jobs();
            let now = self.backend.now();
            if now >= window.ends || crate::interrupt::since().is_some() {
                return None;
            }
            let until = window.ends.min(now + WAIT_SLICE);
            if self.backend.watch_units(watched, until) {
                if let Some(verdict) = self.judge(window) {
                    return Some(verdict);
                }
            }
        }
    }

    /// Why the start `window` follows did not count; `None` when it stayed
    /// up so far (or its state could not be read: the status that follows
    /// says what it is).
    fn judge(&mut self, window: &Window) -> Option<String> {
        let now = self.backend.liveness(&window.unit, &self.budget()).ok()??;
        if now.active.is_empty() {
            return None;
        }
        let after = self.backend.now().saturating_duration_since(window.opened);
        now.did_not_stay_up(window.baseline.as_ref(), &window.unit, after)
    }

    /// Completes the jobs that already ended, without waiting.
    fn take_ended_jobs(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let ids: Vec<JobId> = self.pending.iter().map(|j| j.id).collect();
        for (id, result) in self.backend.wait_jobs(&ids, Instant::now()) {
            self.job_ended(id, result);
        }
    }

    /// Closes every open window, each at its end.
    fn close_windows(&mut self) {
        while let Some(unit) = self.windows.first().map(|w| w.unit.clone()) {
            self.close_window(&unit, true);
        }
    }

    /// A failed start or restart of `unit`, explained: systemd's `Result`
    /// and how the main process ended, when the error does not say them,
    /// and the last lines the unit wrote to the journal.
    fn explain(
        &mut self,
        unit: &str,
        error: ProviderError,
        asked: Instant,
    ) -> (ProviderError, Vec<Untrusted>) {
        let budget = self.budget();
        let Ok(Some(now)) = self.backend.liveness(unit, &budget) else {
            return (error, Vec::new());
        };
        let journal = self.backend.journal(unit, wall_clock(asked), &budget);
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

/// A start or a restart: a change whose unit must then stay up.
fn starts(change: Change) -> bool {
    matches!(change, Change::Start | Change::Restart)
}

/// The name a unit's jobs are kept under: its unit name as systemd reads
/// it, so that `web` and `web.service` are one unit here too.
fn job_key(unit: &CheckedName) -> String {
    super::unit_name::mangle(unit.as_str()).unwrap_or_else(|| unit.to_string())
}

/// Why a pending job was given up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GiveUp {
    /// The per-command timeout, counted from its submission: cancelled.
    Timeout,
    /// The run's wall-clock limit: cancelled.
    Deadline,
    /// The run was interrupted and its grace is over: left to systemd.
    Interrupted,
}

impl GiveUp {
    fn error(self, job: &PendingJob, timeout: Duration, what: &str) -> ProviderError {
        let (method, unit) = (super::job_result::method(job.change), &job.unit);
        let why = match self {
            GiveUp::Timeout => format!(
                "its job did not end within {} (the provider timeout)",
                humantime::format_duration(timeout)
            ),
            GiveUp::Deadline => "its job had not ended at the run's wall-clock limit".to_owned(),
            GiveUp::Interrupted => format!(
                "its job had not ended {}s after the run was interrupted",
                crate::interrupt::GRACE.as_secs()
            ),
        };
        ProviderError::TimedOut(format!("{method} {unit}: {why}; {what}"))
    }
}

impl<B: Backend> Provider for Guarded<B> {
    fn name(&self) -> &'static str {
        self.backend.name()
    }

    fn unavailable_reason(&self) -> Option<&str> {
        self.backend.unavailable_reason()
    }

    fn status(&mut self, name: &str) -> Result<ServiceStatus, ProviderError> {
        // The clock starts after the run's daemon-reload, when this status
        // makes it: that is recorded as its own call.
        let admitted = self.admit(name).and_then(|unit| {
            if self.reload_before_status() {
                self.reload_once()?;
            }
            Ok(unit)
        });
        if let Ok(unit) = &admitted {
            let key = job_key(unit);
            self.wait_for(Awaited::Unit(&key));
            self.close_window(&key, true);
        }
        let mut started = Instant::now();
        let result = admitted.and_then(|unit| self.observe(&unit, &mut started));
        let call = self.record(
            Call::Guest(Operation::Status),
            Some(name),
            started,
            result.as_ref().err(),
        );
        if let Ok(status) = &result {
            call.state = Some(UnitState {
                running: status.running,
                enabled: status.enabled,
            });
        }
        result
    }

    fn mutate(&mut self, operation: Operation, name: &str) -> Result<Progress, ProviderError> {
        let change = Change::of(operation).expect("mutate is never asked for status");
        let started = Instant::now();
        let admitted = self
            .admit(name)
            .and_then(|unit| self.reload_once().map(|()| unit));
        let refused = match admitted {
            Ok(unit) if !self.guard.noop => return self.submit(operation, change, &unit, name),
            Ok(unit) => {
                ProviderError::Denied(format!("{operation} {unit} refused: this is a noop run"))
            }
            Err(e) => e,
        };
        self.record(Call::Guest(operation), Some(name), started, Some(&refused));
        Err(refused)
    }

    fn set_deadline(&mut self, deadline: Instant) {
        self.deadline = Some(deadline);
    }

    /// Every job still pending is awaited first (within its time), so
    /// that each record says how its job ended.
    fn take_calls(&mut self) -> Vec<CallRecord> {
        self.wait_for(Awaited::All);
        self.close_windows();
        self.ended.clear();
        std::mem::take(&mut self.calls)
    }

    fn status_reader(&mut self) -> (&'static str, Option<&str>) {
        self.backend.status_reader()
    }

    /// The run's last step: one daemon-reload when enable or disable ran,
    /// so that systemd's view of the links (`list-dependencies`, `show`)
    /// catches up. None in a noop run, none when nothing changed.
    fn finish(&mut self) -> Result<(), ProviderError> {
        self.wait_for(Awaited::All);
        self.close_windows();
        if !self.enablement_changed || self.guard.noop {
            return Ok(());
        }
        self.enablement_changed = false;
        self.daemon_reload()
    }
}

#[cfg(test)]
#[path = "guard_jobs_tests.rs"]
mod jobs_tests;

#[cfg(test)]
#[path = "guard_settle_tests.rs"]
mod settle_tests;
