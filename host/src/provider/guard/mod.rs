//! The guard layer, the same over every backend. Each operation a guest
//! asks for passes, in order:
//!
//! 1. the name check (a unit name systemd would take, never an option);
//! 2. the allowlist (`allow_units`);
//! 3. availability (systemctl found);
//! 4. units left alone: a change of a unit the operator paused, or a start
//!    of one held back after a crash loop, is refused before any reload,
//!    and its record says so ([`crate::left_alone`]);
//! 5. the run's one daemon-reload: before its first change, and before its
//!    first status unless the backend can tell whether the unit's files
//!    changed since systemd loaded them (over D-Bus, `NeedDaemonReload`);
//!    then only a status of a unit whose files changed makes it, and that
//!    unit is read again after it. A watch's run for an event skips it
//!    before a change of a unit read unchanged ([`ReloadBeforeChange`]);
//! 6. noop (a change is refused in a dry run);
//! 7. the deadline (the per-command timeout, cut at the run's wall clock);
//! 8. the backend, which talks to systemd;
//! 9. the record: one [`CallRecord`] per operation, whatever happened.
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

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant, SystemTime};

mod jobs;
mod settle;

use self::jobs::Awaited;
use super::backend::{Backend, Budget, Change, JobId};
use super::liveness::Liveness;
use super::{Call, CallRecord, Outcome, Provider, UnitAllowlist, UnitState};
use crate::contract::{JobOutcome, Operation, Progress, ProviderError, ServiceStatus};
use crate::left_alone::LeftAlone;
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
    /// Units whose changes are refused for now: paused by the operator,
    /// held back after a crash loop.
    pub left_alone: LeftAlone,
    /// Whether a change makes the run's daemon-reload first.
    pub reload_before_change: ReloadBeforeChange,
}

/// When the run's one daemon-reload comes before a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReloadBeforeChange {
    /// Before the run's first change, whatever the statuses said (the
    /// design's rule: a timer run, a watch's first run and its resyncs).
    #[default]
    Always,
    /// Only when the changed unit was not read in this run with its files
    /// unchanged (as systemd has them loaded). A watch's run for an event
    /// saves the reload (~0.1 s with a few hundred units) that way: a stop
    /// or a disable repaired does not wait for systemd to load every unit
    /// again. A unit whose files changed still makes it, at its status.
    UnlessReadUnchanged,
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
    /// Units read in this run, before its reload, with their files as
    /// systemd has them loaded (see [`ReloadBeforeChange`]).
    read_unchanged: HashSet<String>,
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
            read_unchanged: HashSet::new(),
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

    /// Why `operation` of `unit` is refused for now, if it is: the unit is
    /// paused or held back ([`LeftAlone`]), by the name systemd knows it by.
    fn left_alone(
        &self,
        unit: &CheckedName,
        operation: Operation,
    ) -> Option<(crate::left_alone::Kind, String)> {
        let systemd_name = crate::provider::unit_name::mangle(unit.as_str())?;
        let reason = self.guard.left_alone.forbidding(&systemd_name, operation)?;
        Some((reason.kind, reason.why.clone()))
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
        } else if reload_to_come {
            self.read_unchanged.insert(job_key(unit));
        }
        let mut status = observed.status;
        status.job = self.ended.remove(&job_key(unit));
        Ok(status)
    }

    /// The run's reload before a change of `unit`, unless the rule lets a
    /// unit read unchanged go without it.
    fn reload_before_change(&mut self, unit: &CheckedName) -> Result<(), ProviderError> {
        let skip = self.guard.reload_before_change == ReloadBeforeChange::UnlessReadUnchanged
            && self.reload == Reload::Pending
            && self.read_unchanged.contains(&job_key(unit));
        if skip {
            tracing::debug!(
                unit = unit.as_str(),
                "no reload before the change: files unchanged"
            );
            return Ok(());
        }
        self.reload_once()
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
                Untrusted::new(if CheckedName::check(s).is_ok() {
                    s.to_owned()
                } else {
                    quote(s)
                })
            }),
            outcome: error.map_or(Outcome::Ok, Outcome::of),
            error: error.map(|e| Untrusted::new(e.message())),
            state: None,
            journal: Vec::new(),
            left_alone: None,
            duration: started.elapsed(),
        });
        self.calls.last_mut().expect("just recorded")
    }
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
        let mut left_alone = None;
        let refused = match self.admit(name) {
            Ok(unit) => match self.left_alone(&unit, operation) {
                // Refused before the reload: a unit left alone makes none.
                Some((kind, why)) => {
                    left_alone = Some(kind);
                    ProviderError::Denied(format!("{operation} {unit} refused: {why}"))
                }
                None => match self.reload_before_change(&unit) {
                    Ok(()) if !self.guard.noop => {
                        return self.submit(operation, change, &unit, name);
                    }
                    Ok(()) => ProviderError::Denied(format!(
                        "{operation} {unit} refused: this is a noop run"
                    )),
                    Err(e) => e,
                },
            },
            Err(e) => e,
        };
        self.record(Call::Guest(operation), Some(name), started, Some(&refused))
            .left_alone = left_alone;
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
mod jobs_tests;
#[cfg(test)]
mod settle_tests;
