//! systemd over the system bus: the connection (made at the first question
//! that could use it), and every question and job the backend sends that
//! way. Each answer is a [`BusAnswer`]: systemd's answer, its refusal, or
//! "ask systemctl instead" when there is no bus or it failed (it is then
//! dropped for the rest of the run, so a bus restart costs no wrong answer).
//!
//! `dbus` holds the connection and the one-round-trip status; `jobs` follows
//! the jobs queued here through `JobRemoved`; `unit_files` enables and
//! disables; `known_enablement` keeps the run's enablement answers while
//! nothing says a link moved; `dropins` finds drop-ins systemd has not
//! loaded; `unit_signals` waits on units' `PropertiesChanged` for settle
//! windows; `rules` makes every match rule. `follow` is not the run's: the
//! watch's own connection, following managed units' signals between runs.
//!
//! Everything here runs on the process's one tokio runtime
//! ([`crate::io_runtime`]): the run's questions block on it, the follower
//! is a task on it.

pub(crate) mod dbus;
pub(crate) mod dropins;
pub(crate) mod follow;
pub(crate) mod jobs;
pub(crate) mod known_enablement;
pub(crate) mod rules;
pub(crate) mod unit_files;
pub(crate) mod unit_signals;

use std::path::Path;
use std::time::{Duration, Instant};

use self::dbus::{DbusError, LoadedFiles, SystemdBus, UnitAnswers};
use self::jobs::{JobEnd, JobWatch};
use self::known_enablement::KnownEnablement;
use self::unit_files::UnitFileChange;
use self::unit_signals::UnitSignals;
use crate::contract::ProviderError;
use crate::provider::backend::{locked, Budget, Change, JobId, JobResult};
use crate::provider::job_result;
use crate::provider::liveness::Liveness;
use crate::provider::parse::read_is_enabled;
use crate::provider::runner::CommandOutput;

/// What asking over the bus gave.
pub(crate) enum BusAnswer<T> {
    /// systemd answered.
    Answered(T),
    /// systemd refused (a D-Bus error reply: no such unit, masked, ...).
    Refused(Refusal),
    /// No bus, or it failed: systemctl is to answer instead.
    Fallback,
}

impl<T> BusAnswer<T> {
    /// systemd's answer made into another value; a refusal or a fallback
    /// stays what it is.
    fn map<U>(self, f: impl FnOnce(T) -> U) -> BusAnswer<U> {
        match self {
            BusAnswer::Answered(answer) => BusAnswer::Answered(f(answer)),
            BusAnswer::Refused(refusal) => BusAnswer::Refused(refusal),
            BusAnswer::Fallback => BusAnswer::Fallback,
        }
    }
}

/// systemd's error answer over D-Bus.
pub(crate) struct Refusal {
    name: String,
    message: String,
}

impl Refusal {
    /// A refusal of a status question.
    pub(crate) fn status_error(self) -> ProviderError {
        ProviderError::CommandFailed(format!(
            "systemd answered over D-Bus: {}: {}",
            self.name, self.message
        ))
    }

    /// A refusal of a change, worded as systemctl words it ("Failed to
    /// start web.service: Unit web.service not found.", "Failed to enable
    /// unit: Unit file web.service is masked.").
    pub(crate) fn change_error(self, change: Change, unit: &str) -> ProviderError {
        let what = if change.is_enablement() { "unit" } else { unit };
        ProviderError::CommandFailed(format!(
            "{} over D-Bus failed: Failed to {} {what}: {}",
            job_result::method(change),
            change.verb(),
            self.message
        ))
    }
}

/// The system bus, while it works, and what is followed on it.
pub(crate) struct Bus {
    dbus: Option<SystemdBus>,
    /// The bus is to be connected to at the first question (see
    /// [`Bus::connect_once`]).
    connect_pending: bool,
    /// The jobs queued over the bus, once the first one is (or a status
    /// found a unit with a job to wait for).
    jobs: Option<JobWatch>,
    /// Units' `PropertiesChanged`, while a settle window watches them.
    unit_signals: Option<UnitSignals>,
    /// The enablement statuses read, while nothing says a link moved.
    enablement: KnownEnablement,
    /// Why systemd is asked with systemctl, when it is.
    note: Option<String>,
}

impl Bus {
    /// A bus to connect to at the first question.
    pub(crate) fn to_connect() -> Self {
        Self {
            dbus: None,
            connect_pending: true,
            jobs: None,
            unit_signals: None,
            enablement: KnownEnablement::default(),
            note: None,
        }
    }

    /// No bus: systemctl answers everything (`why`, for the report).
    pub(crate) fn not_used(why: Option<String>) -> Self {
        Self {
            connect_pending: false,
            note: why,
            ..Self::to_connect()
        }
    }

    /// Connects to the system bus at the first question that could use it,
    /// not when the provider is made: the host's start-up does not wait
    /// for the bus, and its first call to systemd begins as soon as the
    /// policy asks. Connecting is an exchange like any other: it may take
    /// the per-command timeout, cut at the run's wall clock; past that,
    /// it is not tried (the call itself then fails on the deadline).
    pub(crate) fn connect_once(&mut self, time: &Budget) {
        if !self.connect_pending {
            return;
        }
        let Ok(timeout) = time.now("connecting to the system bus") else {
            return;
        };
        self.connect_pending = false;
        match SystemdBus::connect(timeout) {
            Ok(dbus) => self.dbus = Some(dbus),
            Err(why) => {
                tracing::info!("status is read with systemctl: {why}");
                self.note = Some(why);
            }
        }
    }

    /// Whether questions go over the bus (now).
    pub(crate) fn is_up(&self) -> bool {
        self.dbus.is_some()
    }

    /// Why systemd is asked with systemctl, when it is.
    pub(crate) fn note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    /// Asks under the global lock, within the time budget.
    fn ask<T>(
        &mut self,
        time: &Budget,
        what: &str,
        ask: impl FnOnce(&SystemdBus, &mut Option<JobWatch>, Duration) -> Result<T, DbusError>,
    ) -> Result<BusAnswer<T>, ProviderError> {
        let Some(dbus) = &self.dbus else {
            return Ok(BusAnswer::Fallback);
        };
        let timeout = time.now(&format!("{what} over D-Bus"))?;
        let jobs = &mut self.jobs;
        Ok(match locked(|| ask(dbus, jobs, timeout)) {
            Ok(answer) => BusAnswer::Answered(answer),
            Err(DbusError::Reply { name, message }) => {
                BusAnswer::Refused(Refusal { name, message })
            }
            Err(DbusError::Transport(why)) => {
                self.drop_bus(&format!("{what} over D-Bus failed ({why})"));
                BusAnswer::Fallback
            }
        })
    }

    /// Stops using the bus for the rest of the run.
    fn drop_bus(&mut self, why: &str) {
        tracing::warn!("{why}; systemd is asked with systemctl for the rest of this run");
        self.dbus = None;
        self.jobs = None;
        self.unit_signals = None;
        self.enablement.forget_all();
        self.note = Some(format!("D-Bus failed during the run: {why}"));
    }

    /// A status's answers for `unit` (mangled) in one round trip and, when
    /// `loaded_too`, whether its files changed since systemd loaded it. Its
    /// enablement is the one read earlier in the run while nothing says a
    /// link moved since ([`known_enablement`]), else asked.
    pub(crate) fn status(
        &mut self,
        unit: &str,
        time: &Budget,
        loaded_too: bool,
    ) -> Result<BusAnswer<(UnitAnswers, Option<bool>)>, ProviderError> {
        let known = self.known_enablement(unit);
        let followed = self.jobs.is_some();
        let asked = known.is_none();
        let answer = self.ask(time, "status", |dbus, _, timeout| {
            dbus.unit_status(unit, loaded_too, known, timeout)
        })?;
        if let (BusAnswer::Answered(answers), true, true) = (&answer, asked, followed) {
            self.enablement.remember(unit, &answers.is_enabled);
        }
        Ok(answer.map(|answers| {
            let changed = answers
                .loaded
                .as_ref()
                .map(|loaded| files_changed(unit, loaded));
            (answers, changed)
        }))
    }

    /// `unit`'s enablement as this run read it, while the signals read so
    /// far say no link moved since; `None` while the run does not follow
    /// systemd's signals (before its first job), which alone would say so.
    fn known_enablement(&mut self, unit: &str) -> Option<CommandOutput> {
        let (Some(dbus), Some(watch)) = (&self.dbus, &mut self.jobs) else {
            return None;
        };
        match watch.files_moved(dbus) {
            Ok(moved) => {
                for signal in moved {
                    self.enablement.signal(signal);
                }
            }
            Err(e) => {
                tracing::debug!("reading systemd's signals failed ({})", e.describe());
                self.enablement.forget_all();
                return None;
            }
        }
        let known = self.enablement.recall(unit).cloned();
        if known.is_some() {
            tracing::debug!(
                unit,
                "enablement as read earlier in this run: no link moved since"
            );
        }
        known
    }

    /// Forgets every enablement read: links may have moved in ways no
    /// answer listed (a daemon-reload, a change made with systemctl).
    pub(crate) fn forget_enablement(&mut self) {
        self.enablement.forget_all();
    }

    /// What `systemctl is-enabled` would print for `unit` (mangled).
    pub(crate) fn is_enabled(
        &mut self,
        unit: &str,
        time: &Budget,
        what: &str,
    ) -> Result<BusAnswer<CommandOutput>, ProviderError> {
        self.ask(time, what, |dbus, _, timeout| {
            dbus.is_enabled(unit, timeout)
        })
    }

    /// Queues `change` (a job) for `unit` (mangled), following it from now.
    pub(crate) fn queue(
        &mut self,
        change: Change,
        unit: &str,
        time: &Budget,
    ) -> Result<BusAnswer<JobId>, ProviderError> {
        self.ask(time, change.verb(), |dbus, jobs, timeout| {
            let jobs = subscribed(jobs, dbus, timeout)?;
            jobs.submit(dbus, change, unit, timeout)
        })
    }

    /// `EnableUnitFiles`, or `DisableUnitFiles` then, when the unit still
    /// reads `enabled-runtime`, `DisableUnitFiles` with `runtime`. The
    /// enablement of every unit their links name is forgotten; when a call
    /// failed, every unit's.
    pub(crate) fn unit_files(
        &mut self,
        change: Change,
        unit: &str,
        time: &Budget,
    ) -> Result<BusAnswer<Result<(), ProviderError>>, ProviderError> {
        let followed = self.jobs.is_some();
        let mut calls = Vec::new();
        let answer = self.ask(time, change.verb(), |dbus, _, timeout| {
            if change == Change::Enable {
                enable(dbus, unit, timeout, &mut calls)
            } else {
                disable(dbus, unit, timeout, &mut calls).map(Ok)
            }
        });
        self.enablement.own_calls(unit, &calls, followed);
        if !matches!(answer, Ok(BusAnswer::Answered(_))) {
            self.enablement.forget_all();
        }
        answer
    }

    /// Waits, within `time`, for the job at `path` that systemd queued for
    /// `unit` (another unit's dependency, or another client's job), so
    /// that its status is read after it. A failure to wait leaves the
    /// status to be read as it is.
    pub(crate) fn wait_for_unit_job(
        &mut self,
        unit: &str,
        path: &str,
        time: &Budget,
    ) -> Result<(), ProviderError> {
        let what = "waiting for the unit's job";
        let until = Instant::now() + time.now(what)?;
        // Followed first, then asked again: a job that ended before the
        // subscription was made is no longer the unit's job, and one that
        // ends after it cannot be missed.
        let followed = self.ask(time, what, |dbus, jobs, timeout| {
            let watch = subscribed(jobs, dbus, timeout)?;
            let id = watch.follow(path);
            let still = dbus.unit_job(unit, timeout)?.0.as_deref() == Some(path);
            if !still {
                watch.forget(id);
            }
            Ok(still.then_some(id))
        })?;
        let BusAnswer::Answered(Some(id)) = followed else {
            return Ok(());
        };
        if let (Some(dbus), Some(watch)) = (&self.dbus, &mut self.jobs) {
            if watch
                .wait(dbus, &[id], until)
                .is_ok_and(|ended| ended.is_empty())
            {
                watch.forget(id);
            }
        }
        Ok(())
    }

    /// What tells whether `unit` is up, in one round trip.
    pub(crate) fn liveness(
        &mut self,
        unit: &str,
        time: &Budget,
    ) -> Result<BusAnswer<Liveness>, ProviderError> {
        self.ask(time, "liveness", |dbus, _, timeout| {
            dbus.liveness(unit, timeout)
        })
    }

    /// The jobs among `jobs` that ended by `until`, with how they went;
    /// every one of them failed when the bus is gone or fails meanwhile.
    pub(crate) fn wait_jobs(
        &mut self,
        jobs: &[JobId],
        until: Instant,
        timeout: Duration,
    ) -> Vec<(JobId, JobResult)> {
        let lost = |why: &str| {
            ProviderError::CommandFailed(format!(
                "the system bus failed while the job was pending ({why}); how it ended is not known"
            ))
        };
        let (Some(dbus), Some(watch)) = (&self.dbus, &mut self.jobs) else {
            return jobs.iter().map(|id| (*id, Err(lost("no bus")))).collect();
        };
        match watch.wait(dbus, jobs, until) {
            Ok(ended) => ended
                .into_iter()
                .map(|(id, (change, end))| (id, self.job_result(change, &end, timeout)))
                .collect(),
            Err(e) => {
                let why = e.describe();
                self.drop_bus(&format!("waiting for jobs over D-Bus failed ({why})"));
                jobs.iter().map(|id| (*id, Err(lost(&why)))).collect()
            }
        }
    }

    /// How a job that ended `end` went: its error unless it was `done`,
    /// explained with the unit's `Result` as systemctl explains it.
    fn job_result(&mut self, change: Change, end: &JobEnd, timeout: Duration) -> JobResult {
        let unit_result = if job_result::needs_unit_result(&end.result, &end.unit) {
            let budget = Budget {
                timeout,
                deadline: None,
            };
            match self.ask(&budget, "the unit's result", |dbus, _, timeout| {
                dbus.service_result(&end.unit, timeout)
            }) {
                Ok(BusAnswer::Answered(result)) => Some(result),
                _ => None,
            }
        } else {
            None
        };
        job_result::outcome(change, &end.result, &end.unit, unit_result.as_deref())
    }

    /// Cancels a job past its timeout, or stops following it.
    pub(crate) fn abandon(&mut self, job: JobId, cancel: bool, timeout: Duration) -> String {
        let (Some(dbus), Some(watch)) = (&self.dbus, &mut self.jobs) else {
            return "the system bus is gone".to_owned();
        };
        if cancel {
            locked(|| watch.cancel(dbus, job, timeout))
        } else {
            watch.forget(job);
            "the job was left queued (not cancelled)".to_owned()
        }
    }

    /// Waits until `until` or until one of `paths` (units' object paths)
    /// changed; `None` without a bus.
    pub(crate) fn watch_units(
        &mut self,
        paths: &[String],
        until: Instant,
        timeout: Duration,
    ) -> Option<bool> {
        if self.dbus.is_some() && self.unit_signals.is_none() {
            let budget = Budget {
                timeout,
                deadline: None,
            };
            let opened = self.ask(&budget, "watching units", |dbus, jobs, timeout| {
                subscribed(jobs, dbus, timeout)?;
                UnitSignals::open(dbus, timeout)
            });
            if let Ok(BusAnswer::Answered(watch)) = opened {
                self.unit_signals = Some(watch);
            }
        }
        let (Some(dbus), Some(watch)) = (&self.dbus, &mut self.unit_signals) else {
            return None;
        };
        match watch.wait(dbus, paths, until) {
            Ok(changed) => Some(changed),
            Err(e) => {
                let why = e.describe();
                self.drop_bus(&format!("watching units over D-Bus failed ({why})"));
                Some(false)
            }
        }
    }

    /// Stops watching units' properties.
    pub(crate) fn unwatch(&mut self) {
        self.unit_signals = None;
    }
}

/// The run's job watch, subscribed to at its first use.
fn subscribed<'a>(
    jobs: &'a mut Option<JobWatch>,
    dbus: &SystemdBus,
    timeout: Duration,
) -> Result<&'a mut JobWatch, DbusError> {
    if jobs.is_none() {
        *jobs = Some(JobWatch::subscribe(dbus, timeout)?);
    }
    Ok(jobs.as_mut().expect("just subscribed"))
}

/// `EnableUnitFiles`; when it made no link, right only when the unit's
/// links were already there. Its changes are added to `calls`.
fn enable(
    dbus: &SystemdBus,
    unit: &str,
    timeout: Duration,
    calls: &mut Vec<Vec<UnitFileChange>>,
) -> Result<Result<(), ProviderError>, DbusError> {
    let enabled = unit_files::enable(dbus, unit, timeout)?;
    calls.push(enabled.changes.clone());
    if enabled.linked(unit) || !enabled.carries_install_info {
        return Ok(Ok(()));
    }
    let state = dbus.is_enabled(unit, timeout)?;
    if read_is_enabled(unit, &state).is_ok_and(|w| w.counts) {
        return Ok(Ok(()));
    }
    let word = state.stdout.trim().to_owned();
    let changes: Vec<String> = enabled.changes.iter().map(ToString::to_string).collect();
    Ok(Err(ProviderError::CommandFailed(format!(
        "enable {unit}: systemd made none of its links (EnableUnitFiles reported {}); \
         systemctl is-enabled says {word:?}",
        if changes.is_empty() {
            "no change".to_owned()
        } else {
            changes.join(", ")
        }
    ))))
}

/// `DisableUnitFiles`, then with `runtime` when the unit still reads
/// `enabled-runtime`. Only that word counts; anything else (the unit gone,
/// an error) leaves the verification to the guest. Each call's changes
/// are added to `calls`.
fn disable(
    dbus: &SystemdBus,
    unit: &str,
    timeout: Duration,
    calls: &mut Vec<Vec<UnitFileChange>>,
) -> Result<(), DbusError> {
    calls.push(unit_files::disable(dbus, unit, false, timeout)?);
    let left = dbus
        .is_enabled(unit, timeout)
        .map(|o| o.stdout.trim().to_owned());
    if left.is_ok_and(|word| word == contract_words::ENABLED_RUNTIME) {
        calls.push(unit_files::disable(dbus, unit, true, timeout)?);
    }
    Ok(())
}

/// Whether the unit's files changed since systemd loaded it: its
/// `NeedDaemonReload`, or a drop-in on disk that systemd did not load (a
/// drop-in directory made since, which systemd 252 does not notice).
fn files_changed(unit: &str, loaded: &LoadedFiles) -> bool {
    if loaded.need_daemon_reload {
        return true;
    }
    let roots = dropins::SEARCH_PATHS.map(Path::new);
    match dropins::unloaded_dropin(unit, &loaded.dropin_paths, &roots) {
        Some(path) => {
            tracing::debug!(unit, dropin = %path.display(), "a drop-in systemd has not loaded");
            true
        }
        None => false,
    }
}
