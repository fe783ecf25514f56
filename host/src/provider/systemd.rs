//! The systemd backend: over D-Bus when the system bus answers (status,
//! jobs on systemd's job engine, unit files, what a settle window reads),
//! otherwise the design's `systemctl` commands (docs/service-type.md), with
//! `--` before every unit name; the run's daemon-reload and SysV scripts'
//! enablement always go through `systemctl`. It reports
//! what systemd said (`status` carries the `is-active` and `is-enabled`
//! words) and carries out what it is asked to; what a word means for the
//! desired state is the guest's to decide.
//!
//! It only talks to systemd: names are checked, allowed, refused in a noop
//! run, timed and recorded by the guard layer over it (`guard`), which also
//! makes the run's reloads.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use super::backend::{locked, Applied, Backend, Budget, Change, JobId, JobResult, Observed};
use super::dbus::{DbusError, LoadedFiles, SystemdBus, UnitAnswers};
use super::guard::{Guard, Guarded};
use super::jobs::JobWatch;
use super::liveness::{self, Liveness};
use super::parse::{read_is_active, read_is_enabled, Word};
use super::runner::{CommandOutput, CommandRunner};
use super::systemctl::Systemctl;
use super::unit_name::mangle;
use super::unit_watch::UnitWatch;
use super::{job_result, unit_files};
use crate::contract::{ProviderError, Restarting, ServiceStatus};
use crate::service_name::CheckedName;
use crate::text::Untrusted;

/// The provider's settings for one run.
#[derive(Debug, Clone)]
pub struct SystemdConfig {
    /// Where systemctl is, or why it is unavailable.
    pub systemctl: Result<PathBuf, String>,
    /// The longest a single systemctl command may take.
    pub timeout: Duration,
    /// A dry run: mutating operations are refused and no daemon-reload is made.
    pub noop: bool,
    /// When set, operations on units it does not allow are refused.
    pub allow: Option<super::UnitAllowlist>,
    /// How status is read.
    pub status_via: StatusVia,
    /// How many jobs of this run may be pending at once.
    pub jobs: usize,
    /// How long a started unit must stay up for its start to count.
    pub settle: Duration,
    /// A status waits for a job pending for its unit, whoever queued it
    /// (a run's reads must see the state after it); `host status` only
    /// reports, and does not.
    pub await_unit_jobs: bool,
}

/// How `status` reads a unit's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusVia {
    /// Over D-Bus when the system bus and systemd on it answer; otherwise
    /// with `systemctl is-active` and `is-enabled`.
    Auto,
    /// Always with `systemctl` (`provider = "systemctl"`).
    Systemctl,
}

/// The systemd provider: the guard layer over the systemd backend.
pub type SystemdProvider = Guarded<SystemdBackend>;

impl Guarded<SystemdBackend> {
    pub fn new(config: SystemdConfig, runner: Box<dyn CommandRunner>) -> Self {
        let guard = Guard {
            allow: config.allow,
            noop: config.noop,
            timeout: config.timeout,
            jobs: config.jobs,
            settle: config.settle,
        };
        let mut backend = SystemdBackend::new(
            Systemctl::new(config.systemctl, runner),
            config.status_via,
            config.timeout,
        );
        backend.await_unit_jobs = config.await_unit_jobs;
        Guarded::over(backend, guard)
    }
}

/// How often `systemctl show` is asked whether a unit's job ended, when a
/// status must wait for a job systemctl did not queue.
const JOB_POLL: Duration = Duration::from_millis(100);

/// Where a SysV init script for a service would be (systemctl's
/// `SYSTEM_SYSVINIT_PATH`).
const SYSV_INIT_DIR: &str = "/etc/init.d";

/// Talks to systemd: over D-Bus while the system bus works (status, jobs,
/// unit files), with systemctl otherwise.
pub struct SystemdBackend {
    systemctl: Systemctl,
    /// The system bus, while it works.
    dbus: Option<SystemdBus>,
    /// The bus is to be connected to at the first question (see
    /// [`SystemdBackend::connect_once`]).
    connect_pending: bool,
    /// The jobs queued over the bus, once the first one is (or a status
    /// found a unit with a job to wait for).
    jobs: Option<JobWatch>,
    /// Units' `PropertiesChanged`, while a settle window watches them.
    unit_watch: Option<UnitWatch>,
    /// Why systemd is asked with systemctl, when it is.
    status_note: Option<String>,
    timeout: Duration,
    /// See [`SystemdConfig::await_unit_jobs`].
    await_unit_jobs: bool,
}

/// systemd's error answer over D-Bus.
struct Refusal {
    name: String,
    message: String,
}

impl SystemdBackend {
    fn new(systemctl: Systemctl, status_via: StatusVia, timeout: Duration) -> Self {
        let (connect_pending, status_note) = match (status_via, systemctl.unavailable_reason()) {
            (StatusVia::Systemctl, _) => (false, Some("provider = \"systemctl\"".to_owned())),
            (StatusVia::Auto, Some(_)) => (false, None),
            (StatusVia::Auto, None) => (true, None),
        };
        if let Some(why) = &status_note {
            tracing::info!("status is read with systemctl: {why}");
        }
        Self {
            systemctl,
            dbus: None,
            connect_pending,
            jobs: None,
            unit_watch: None,
            status_note,
            timeout,
            await_unit_jobs: true,
        }
    }

    /// Connects to the system bus at the first question that could use it,
    /// not when the provider is made: the host's start-up does not wait
    /// for the bus, and its first call to systemd begins as soon as the
    /// policy asks. Connecting is an exchange like any other: it may take
    /// the per-command timeout, cut at the run's wall clock; past that,
    /// it is not tried (the call itself then fails on the deadline).
    fn connect_once(&mut self, time: &Budget) {
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
                self.status_note = Some(why);
            }
        }
    }

    /// `systemctl is-enabled --system -- NAME`, or its answer over D-Bus, read.
    fn is_enabled(&mut self, service: &CheckedName, time: &Budget) -> Result<Word, ProviderError> {
        let output = self.is_enabled_output(service, time)?;
        read_is_enabled(service.as_str(), &output)
    }

    /// A status's answers over D-Bus, in one round trip, and whether the
    /// unit's files changed since systemd loaded it; `None` when
    /// systemctl is to answer instead (no bus, or it failed). A unit
    /// generated from a SysV init script has its `is-enabled` asked of
    /// systemctl, which asks `systemd-sysv-install` as systemd 252 does.
    fn status_over_dbus(
        &mut self,
        service: &CheckedName,
        time: &Budget,
        loaded_too: bool,
    ) -> Result<Option<(UnitAnswers, Option<bool>)>, ProviderError> {
        let Some(unit) = self.dbus.as_ref().and_then(|_| mangle(service.as_str())) else {
            return Ok(None);
        };
        let Some(answers) = self.over_dbus(time, "status", |dbus, _, timeout| {
            dbus.unit_status(&unit, loaded_too, timeout)
        })?
        else {
            return Ok(None);
        };
        let mut answers = answers.map_err(Refusal::status_error)?;
        if answers.is_enabled.stdout.trim() == "generated" && has_sysv_script(&unit) {
            answers.is_enabled = self
                .systemctl
                .output(&["is-enabled", "--system", "--", service.as_str()], time)?;
        }
        let changed = answers
            .loaded
            .as_ref()
            .map(|loaded| files_changed(&unit, loaded));
        Ok(Some((answers, changed)))
    }

    /// What `systemctl is-enabled --system -- NAME` prints, asked over D-Bus
    /// when it can be. A unit generated from a SysV init script is asked of
    /// systemctl, which asks `systemd-sysv-install` as systemd 252 does.
    fn is_enabled_output(
        &mut self,
        service: &CheckedName,
        time: &Budget,
    ) -> Result<CommandOutput, ProviderError> {
        if let Some(unit) = self.dbus.as_ref().and_then(|_| mangle(service.as_str())) {
            if let Some(output) = self.over_dbus(time, "status", |dbus, _, timeout| {
                dbus.is_enabled(&unit, timeout)
            })? {
                let output = output.map_err(Refusal::status_error)?;
                if !(output.stdout.trim() == "generated" && has_sysv_script(&unit)) {
                    return Ok(output);
                }
            }
        }
        self.systemctl
            .output(&["is-enabled", "--system", "--", service.as_str()], time)
    }

    /// Asks over D-Bus under the global lock, within the time budget: the
    /// answer, or systemd's refusal. `None` when the bus failed: it is then
    /// dropped for the rest of the run (with a warning), and the caller asks
    /// systemctl, so a bus restart costs no wrong answer.
    fn over_dbus<T>(
        &mut self,
        time: &Budget,
        what: &str,
        ask: impl FnOnce(&SystemdBus, &mut Option<JobWatch>, Duration) -> Result<T, DbusError>,
    ) -> Result<Option<Result<T, Refusal>>, ProviderError> {
        let timeout = time.now(&format!("{what} over D-Bus"))?;
        let Some(dbus) = &self.dbus else {
            return Ok(None);
        };
        let jobs = &mut self.jobs;
        match locked(|| ask(dbus, jobs, timeout)) {
            Ok(answer) => Ok(Some(Ok(answer))),
            Err(DbusError::Reply { name, message }) => Ok(Some(Err(Refusal { name, message }))),
            Err(DbusError::Transport(why)) => {
                self.drop_bus(&format!("{what} over D-Bus failed ({why})"));
                Ok(None)
            }
        }
    }

    /// Stops using the bus for the rest of the run.
    fn drop_bus(&mut self, why: &str) {
        tracing::warn!("{why}; systemd is asked with systemctl for the rest of this run");
        self.dbus = None;
        self.jobs = None;
        self.unit_watch = None;
        self.status_note = Some(format!("D-Bus failed during the run: {why}"));
    }

    /// Whether `unit` (mangled) is a SysV init script's, which systemctl
    /// enables and disables with `systemd-sysv-install`: a script in
    /// /etc/init.d and no native unit file (only the generated one).
    fn is_sysv(&mut self, unit: &str, time: &Budget) -> Result<bool, ProviderError> {
        if !has_sysv_script(unit) {
            return Ok(false);
        }
        let state = self.over_dbus(time, "enable", |dbus, _, timeout| {
            dbus.is_enabled(unit, timeout)
        })?;
        Ok(match state {
            Some(Ok(output)) => matches!(output.stdout.trim(), "generated" | ""),
            Some(Err(_)) | None => true,
        })
    }

    /// Queues `change` (a job) over the bus; `None` when systemctl is to
    /// make it instead.
    fn job_over_dbus(
        &mut self,
        change: Change,
        unit: &str,
        time: &Budget,
    ) -> Result<Option<JobId>, ProviderError> {
        let queued = self.over_dbus(time, change.verb(), |dbus, jobs, timeout| {
            if jobs.is_none() {
                *jobs = Some(JobWatch::subscribe(dbus, timeout)?);
            }
            let jobs = jobs.as_mut().expect("just subscribed");
            jobs.submit(dbus, change, unit, timeout)
        })?;
        match queued {
            None => Ok(None),
            Some(Ok(id)) => Ok(Some(id)),
            Some(Err(refusal)) => Err(refusal.change_error(change, unit)),
        }
    }

    /// `EnableUnitFiles`, or `DisableUnitFiles` then, when the unit still
    /// reads `enabled-runtime`, `DisableUnitFiles` with `runtime`; `None`
    /// when systemctl is to make it instead (no bus, a SysV script).
    fn unit_files_over_dbus(
        &mut self,
        change: Change,
        unit: &str,
        time: &Budget,
    ) -> Result<Option<()>, ProviderError> {
        if self.dbus.is_none() || self.is_sysv(unit, time)? {
            return Ok(None);
        }
        let verb = change.verb();
        let answer = self.over_dbus(time, verb, |dbus, _, timeout| {
            if change == Change::Enable {
                let enabled = unit_files::enable(dbus, unit, timeout)?;
                if enabled.linked(unit) || !enabled.carries_install_info {
                    return Ok(Ok(()));
                }
                // No link made: right only when its links were there.
                let state = dbus.is_enabled(unit, timeout)?;
                if read_is_enabled(unit, &state).is_ok_and(|w| w.counts) {
                    return Ok(Ok(()));
                }
                let word = state.stdout.trim().to_owned();
                let changes: Vec<String> =
                    enabled.changes.iter().map(ToString::to_string).collect();
                return Ok(Err(ProviderError::CommandFailed(format!(
                    "enable {unit}: systemd made none of its links (EnableUnitFiles reported {}); \
                     systemctl is-enabled says {word:?}",
                    if changes.is_empty() {
                        "no change".to_owned()
                    } else {
                        changes.join(", ")
                    }
                ))));
            }
            unit_files::disable(dbus, unit, false, timeout)?;
            // Only the word itself counts; anything else (the unit gone, an
            // error) leaves the verification to the guest.
            let left = dbus
                .is_enabled(unit, timeout)
                .map(|o| o.stdout.trim().to_owned());
            if left.is_ok_and(|word| word == "enabled-runtime") {
                unit_files::disable(dbus, unit, true, timeout)?;
            }
            Ok(Ok(()))
        })?;
        match answer {
            None => Ok(None),
            Some(Ok(result)) => result.map(Some),
            Some(Err(refusal)) => Err(refusal.change_error(change, unit)),
        }
    }

    /// Waits, within `time`, for the job at `path` that systemd queued for
    /// a unit (another unit's dependency, or another client's job), so
    /// that its status is read after it. Over the bus only; a failure to
    /// wait leaves the status to be read as it is.
    fn wait_for_unit_job(
        &mut self,
        unit: &str,
        path: &str,
        time: &Budget,
    ) -> Result<(), ProviderError> {
        let timeout = time.now("waiting for the unit's job")?;
        let until = Instant::now() + timeout;
        // Followed first, then asked again: a job that ended before the
        // subscription was made is no longer the unit's job, and one that
        // ends after it cannot be missed.
        let followed =
            self.over_dbus(time, "waiting for the unit's job", |dbus, jobs, timeout| {
                if jobs.is_none() {
                    *jobs = Some(JobWatch::subscribe(dbus, timeout)?);
                }
                let watch = jobs.as_mut().expect("just subscribed");
                let id = watch.follow(path);
                let still = dbus.unit_job(unit, timeout)?.0.as_deref() == Some(path);
                if !still {
                    watch.forget(id);
                }
                Ok(still.then_some(id))
            })?;
        let Some(Ok(Some(id))) = followed else {
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

    /// With systemctl: waits, within `time`, until `unit` has no pending
    /// job (systemctl cannot follow a job it did not queue: `show` is
    /// asked again every [`JOB_POLL`]).
    fn poll_unit_job(&mut self, unit: &str, time: &Budget) -> Result<(), ProviderError> {
        let until = Instant::now() + time.now("waiting for the unit's job")?;
        while Instant::now() < until && crate::interrupt::since().is_none() {
            let pending = self.show_liveness(unit, time).is_ok_and(|l| l.job_pending);
            if !pending {
                break;
            }
            std::thread::sleep(JOB_POLL.min(until.saturating_duration_since(Instant::now())));
        }
        Ok(())
    }

    /// `systemctl show` of what tells whether `unit` is up.
    fn show_liveness(&mut self, unit: &str, time: &Budget) -> Result<Liveness, ProviderError> {
        let property = format!("--property={}", liveness::SHOW_PROPERTIES);
        let output = self
            .systemctl
            .output(&["show", &property, "--system", "--", unit], time)?;
        if !output.success() {
            return Err(super::parse::command_failed(
                &format!("show {property} --system -- {unit}"),
                &output,
            ));
        }
        Ok(liveness::from_show(&output.stdout))
    }

    /// How a job that ended `end` went: its error unless it was `done`,
    /// explained with the unit's `Result` as systemctl explains it.
    fn job_result(&mut self, change: Change, end: &super::jobs::JobEnd) -> JobResult {
        let unit_result = if job_result::needs_unit_result(&end.result, &end.unit) {
            let unit = end.unit.clone();
            self.over_dbus(
                &Budget {
                    timeout: self.timeout,
                    deadline: None,
                },
                "the unit's result",
                |dbus, _, timeout| dbus.service_result(&unit, timeout),
            )
            .ok()
            .flatten()
            .and_then(Result::ok)
        } else {
            None
        };
        job_result::outcome(change, &end.result, &end.unit, unit_result.as_deref())
    }
}

/// Whether the unit's files changed since systemd loaded it: its
/// `NeedDaemonReload`, or a drop-in on disk that systemd did not load (a
/// drop-in directory made since, which systemd 252 does not notice).
fn files_changed(unit: &str, loaded: &LoadedFiles) -> bool {
    if loaded.need_daemon_reload {
        return true;
    }
    let roots = super::dropins::SEARCH_PATHS.map(Path::new);
    match super::dropins::unloaded_dropin(unit, &loaded.dropin_paths, &roots) {
        Some(path) => {
            tracing::debug!(unit, dropin = %path.display(), "a drop-in systemd has not loaded");
            true
        }
        None => false,
    }
}

/// Whether /etc/init.d has a script for `unit` (mangled, `NAME.service`).
fn has_sysv_script(unit: &str) -> bool {
    unit.strip_suffix(".service")
        .is_some_and(|base| Path::new(SYSV_INIT_DIR).join(base).exists())
}

impl Refusal {
    /// A refusal of a status question.
    fn status_error(self) -> ProviderError {
        ProviderError::CommandFailed(format!(
            "systemd answered over D-Bus: {}: {}",
            self.name, self.message
        ))
    }

    /// A refusal of a change, worded as systemctl words it ("Failed to
    /// start web.service: Unit web.service not found.", "Failed to enable
    /// unit: Unit file web.service is masked.").
    fn change_error(self, change: Change, unit: &str) -> ProviderError {
        let what = if change.is_enablement() { "unit" } else { unit };
        ProviderError::CommandFailed(format!(
            "{} over D-Bus failed: Failed to {} {what}: {}",
            job_result::method(change),
            change.verb(),
            self.message
        ))
    }
}

impl Backend for SystemdBackend {
    fn unavailable_reason(&self) -> Option<&str> {
        self.systemctl.unavailable_reason()
    }

    /// When no call was made, the bus is connected to now, so that the
    /// report says how status would have been read.
    fn status_reader(&mut self) -> (&'static str, Option<&str>) {
        self.connect_once(&Budget {
            timeout: self.timeout,
            deadline: None,
        });
        if self.dbus.is_some() {
            ("dbus", None)
        } else {
            ("systemctl", self.status_note.as_deref())
        }
    }

    /// Over D-Bus, whether a unit's answers say that its files changed
    /// since systemd loaded them; with systemctl they do not.
    fn tells_files_changed(&mut self, time: &Budget) -> bool {
        self.connect_once(time);
        self.dbus.is_some()
    }

    /// `systemctl is-active` and `is-enabled` of the unit, and over D-Bus,
    /// when asked, whether its files changed since systemd loaded it.
    fn status(
        &mut self,
        unit: &CheckedName,
        time: &Budget,
        files_changed_too: bool,
    ) -> Result<Observed, ProviderError> {
        self.connect_once(time);
        let mut over_dbus = self.status_over_dbus(unit, time, files_changed_too)?;
        // A job systemd queued for the unit (another unit's dependency)
        // is waited for: the state after it is the one that counts.
        let pending_job = over_dbus.as_ref().and_then(|(a, _)| a.job.0.clone());
        if let Some(path) = pending_job.filter(|_| self.await_unit_jobs) {
            let mangled = mangle(unit.as_str()).unwrap_or_else(|| unit.to_string());
            self.wait_for_unit_job(&mangled, &path, time)?;
            over_dbus = self.status_over_dbus(unit, time, files_changed_too)?;
        }
        let via_dbus = over_dbus.is_some();
        let (active, enabled, files_changed) = match over_dbus {
            Some((answers, files_changed)) => (
                answers.is_active,
                read_is_enabled(unit.as_str(), &answers.is_enabled)?,
                files_changed,
            ),
            None => (
                self.systemctl
                    .output(&["is-active", "--system", "--", unit.as_str()], time)?,
                self.is_enabled(unit, time)?,
                None,
            ),
        };
        let mut active = read_is_active(&active)?;
        let mut restarting = None;
        // `activating` is also systemd's word between two runs it makes by
        // itself (`auto-restart`), and, with systemctl, the word of a unit
        // whose job is pending: asked once more only then.
        let mangled = mangle(unit.as_str()).unwrap_or_else(|| unit.to_string());
        if matches!(active.word, "activating" | "deactivating" | "reloading") {
            if !via_dbus && self.await_unit_jobs {
                let pending = self
                    .show_liveness(&mangled, time)
                    .is_ok_and(|l| l.job_pending);
                if pending {
                    self.poll_unit_job(&mangled, time)?;
                    let output = self
                        .systemctl
                        .output(&["is-active", "--system", "--", unit.as_str()], time)?;
                    active = read_is_active(&output)?;
                }
            }
            if active.word == "activating" {
                if let Ok(Some(now)) = self.liveness(&mangled, time) {
                    // The later reading is the one that counts: the unit
                    // may have left `auto-restart` meanwhile (systemd ran
                    // it again), and its word and sub-state must agree.
                    if !now.active.is_empty() && now.active != active.word {
                        active = read_is_active(&CommandOutput {
                            code: Some(0),
                            stdout: format!("{}\n", now.active),
                            stderr: String::new(),
                        })?;
                    }
                    if now.is_auto_restarting() {
                        restarting = Some(Restarting {
                            restarts: now.restarts.unwrap_or(0),
                            last_exit: match now.last_exit() {
                                e if e.is_empty() => "how its last run ended is not known".into(),
                                e => e,
                            },
                        });
                    }
                }
            }
        }
        tracing::debug!(
            unit = %unit,
            active = active.word,
            enabled = enabled.word,
            restarting = restarting.as_ref().map(|r| r.restarts),
            "status read"
        );
        let status = ServiceStatus {
            name: unit.to_string(),
            provider: self.name().to_owned(),
            enabled: enabled.counts,
            running: active.counts,
            active_word: active.word.to_owned(),
            enabled_word: enabled.word.to_owned(),
            // The guard adds how a queued job ended.
            job: None,
            restarting,
        };
        Ok(Observed {
            status,
            files_changed,
        })
    }

    /// `systemctl start|stop|restart --system -- NAME`, and `enable|disable
    /// --no-reload --system -- NAME`.
    ///
    /// `disable` is carried out completely: a plain `disable` leaves a
    /// runtime enablement (the links in `/run/systemd/system`), so when
    /// `is-enabled` says `enabled-runtime` afterwards, `systemctl disable
    /// --runtime --no-reload --system -- NAME` follows. This is what the
    /// contract's `disable` means; whether to disable is the guest's call.
    fn change(
        &mut self,
        change: Change,
        unit: &CheckedName,
        time: &Budget,
    ) -> Result<Applied, ProviderError> {
        self.connect_once(time);
        if let Some(mangled) = self.dbus.as_ref().and_then(|_| mangle(unit.as_str())) {
            if change.is_job() {
                if let Some(job) = self.job_over_dbus(change, &mangled, time)? {
                    return Ok(Applied::Queued(job));
                }
            } else if self.unit_files_over_dbus(change, &mangled, time)?.is_some() {
                return Ok(Applied::Done);
            }
        }
        self.change_with_systemctl(change, unit, time)?;
        Ok(Applied::Done)
    }

    fn wait_jobs(&mut self, jobs: &[JobId], until: Instant) -> Vec<(JobId, JobResult)> {
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
                .map(|(id, (change, end))| (id, self.job_result(change, &end)))
                .collect(),
            Err(e) => {
                let why = match e {
                    DbusError::Transport(why) => why,
                    DbusError::Reply { name, message } => format!("{name}: {message}"),
                };
                self.drop_bus(&format!("waiting for jobs over D-Bus failed ({why})"));
                jobs.iter().map(|id| (*id, Err(lost(&why)))).collect()
            }
        }
    }

    fn abandon(&mut self, job: JobId, cancel: bool) -> String {
        let (Some(dbus), Some(watch)) = (&self.dbus, &mut self.jobs) else {
            return "the system bus is gone".to_owned();
        };
        if cancel {
            locked(|| watch.cancel(dbus, job, self.timeout))
        } else {
            watch.forget(job);
            "the job was left queued (not cancelled)".to_owned()
        }
    }

    fn daemon_reload(&mut self, time: &Budget) -> Result<(), ProviderError> {
        self.systemctl.change(&["daemon-reload"], time)
    }

    /// Over D-Bus only: with systemctl it would cost a process per start,
    /// and the window is judged without it (a start by hand sets the
    /// restart count to 0).
    fn liveness_at_start(&mut self, unit: &str, time: &Budget) -> Option<Liveness> {
        self.dbus.as_ref()?;
        match self.over_dbus(time, "liveness", |dbus, _, timeout| {
            dbus.liveness(unit, timeout)
        }) {
            Ok(Some(Ok(liveness))) => Some(liveness),
            _ => None,
        }
    }

    /// Over D-Bus (one round trip), or `systemctl show`.
    fn liveness(&mut self, unit: &str, time: &Budget) -> Result<Option<Liveness>, ProviderError> {
        if self.dbus.is_some() {
            match self.over_dbus(time, "liveness", |dbus, _, timeout| {
                dbus.liveness(unit, timeout)
            })? {
                Some(Ok(liveness)) => return Ok(Some(liveness)),
                Some(Err(refusal)) => return Err(refusal.status_error()),
                None => {}
            }
        }
        self.show_liveness(unit, time).map(Some)
    }

    /// `PropertiesChanged` of the units' object paths, over D-Bus; with
    /// systemctl, a wait until `until` (one `show` at the window's end).
    fn watch_units(&mut self, units: &[String], until: Instant) -> bool {
        let budget = Budget {
            timeout: self.timeout,
            deadline: None,
        };
        if self.dbus.is_some() && self.unit_watch.is_none() {
            let opened = self.over_dbus(&budget, "watching units", |dbus, jobs, timeout| {
                if jobs.is_none() {
                    *jobs = Some(JobWatch::subscribe(dbus, timeout)?);
                }
                UnitWatch::open(dbus, timeout)
            });
            if let Ok(Some(Ok(watch))) = opened {
                self.unit_watch = Some(watch);
            }
        }
        let (Some(dbus), Some(watch)) = (&self.dbus, &mut self.unit_watch) else {
            std::thread::sleep(until.saturating_duration_since(Instant::now()));
            return false;
        };
        let paths: Vec<String> = units
            .iter()
            .map(|u| super::unit_name::object_path(u))
            .collect();
        match watch.wait(dbus, &paths, until) {
            Ok(changed) => changed,
            Err(e) => {
                let why = match e {
                    DbusError::Transport(why) => why,
                    DbusError::Reply { name, message } => format!("{name}: {message}"),
                };
                self.drop_bus(&format!("watching units over D-Bus failed ({why})"));
                false
            }
        }
    }

    fn watches_units(&self) -> bool {
        self.dbus.is_some()
    }

    fn unwatch(&mut self) {
        self.unit_watch = None;
    }

    fn journal(&mut self, unit: &str, since: SystemTime, time: &Budget) -> Vec<Untrusted> {
        // journald may not have written what the unit said just before it
        // died: `--sync` returns once it has.
        let _ = self.systemctl.journalctl(&["--sync"], time);
        let args = super::journal::arguments(unit, since);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        match self.systemctl.journalctl(&args, time) {
            Some(output) if output.success() => super::journal::lines(&output.stdout),
            _ => Vec::new(),
        }
    }
}

impl SystemdBackend {
    /// The design's commands for `change`.
    fn change_with_systemctl(
        &mut self,
        change: Change,
        unit: &CheckedName,
        time: &Budget,
    ) -> Result<(), ProviderError> {
        let name = unit.as_str();
        if !change.is_enablement() {
            return self
                .systemctl
                .change(&[change.verb(), "--system", "--", name], time);
        }
        self.systemctl.change(
            &[change.verb(), "--no-reload", "--system", "--", name],
            time,
        )?;
        if change == Change::Disable {
            // Only the word itself counts; anything else (the unit gone, an
            // error) leaves the verification to the guest.
            if self.is_enabled(unit, time).map(|w| w.word) == Ok("enabled-runtime") {
                self.systemctl.change(
                    &[
                        "disable",
                        "--runtime",
                        "--no-reload",
                        "--system",
                        "--",
                        name,
                    ],
                    time,
                )?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::contract::{ErrorKind, Operation};
    use crate::provider::runner::RunError;
    use crate::provider::{Call, Outcome, Provider, UnitAllowlist, UnitState};

    /// A runner that answers from a script and records every argv.
    #[derive(Clone, Default)]
    struct ScriptedRunner {
        log: Arc<Mutex<Vec<String>>>,
        answers: Arc<Mutex<Vec<(String, CommandOutput)>>>,
    }

    impl ScriptedRunner {
        fn answer(self, args_prefix: &str, stdout: &str, stderr: &str, code: i32) -> Self {
            self.answers.lock().unwrap().push((
                args_prefix.to_owned(),
                CommandOutput {
                    code: Some(code),
                    stdout: stdout.into(),
                    stderr: stderr.into(),
                },
            ));
            self
        }

        fn log(&self) -> Vec<String> {
            self.log.lock().unwrap().clone()
        }
    }

    impl CommandRunner for ScriptedRunner {
        fn run(
            &self,
            program: &Path,
            args: &[&str],
            _: Duration,
        ) -> Result<CommandOutput, RunError> {
            let line = if program == Path::new("/usr/bin/journalctl") {
                format!("journalctl {}", args.join(" "))
            } else {
                assert_eq!(program, Path::new("/usr/bin/systemctl"));
                args.join(" ")
            };
            self.log.lock().unwrap().push(line.clone());
            let mut answers = self.answers.lock().unwrap();
            let matching: Vec<usize> = (0..answers.len())
                .filter(|&i| line.starts_with(answers[i].0.as_str()))
                .collect();
            Ok(match matching[..] {
                [] => CommandOutput {
                    code: Some(0),
                    stdout: String::new(),
                    stderr: String::new(),
                },
                // The last answer for a prefix stays; earlier ones are used up in order.
                [only] => answers[only].1.clone(),
                [first, ..] => answers.remove(first).1,
            })
        }
    }

    fn provider(runner: &ScriptedRunner, noop: bool) -> SystemdProvider {
        allowing(runner, noop, None)
    }

    fn allowing(
        runner: &ScriptedRunner,
        noop: bool,
        allow: Option<UnitAllowlist>,
    ) -> SystemdProvider {
        SystemdProvider::new(
            SystemdConfig {
                systemctl: Ok(PathBuf::from("/usr/bin/systemctl")),
                timeout: Duration::from_secs(5),
                noop,
                allow,
                status_via: StatusVia::Systemctl,
                jobs: 1,
                settle: Duration::ZERO,
                await_unit_jobs: true,
            },
            Box::new(runner.clone()),
        )
    }

    #[test]
    fn commands_are_the_designs_with_double_dash_and_one_reload() {
        let runner = ScriptedRunner::default()
            .answer("is-active", "inactive\n", "", 3)
            .answer("is-enabled", "disabled\n", "", 1);
        let mut p = provider(&runner, false);
        let status = p.status("web").unwrap();
        assert_eq!(
            status,
            ServiceStatus {
                name: "web".into(),
                provider: "systemd".into(),
                enabled: false,
                running: false,
                active_word: "inactive".into(),
                enabled_word: "disabled".into(),
                job: None,
                restarting: None,
            }
        );
        p.mutate(Operation::Start, "web").unwrap();
        p.mutate(Operation::Enable, "web").unwrap();
        p.mutate(Operation::Restart, "web").unwrap();
        p.mutate(Operation::Stop, "web").unwrap();
        p.mutate(Operation::Disable, "web").unwrap();
        p.finish().unwrap();
        assert_eq!(
            runner.log(),
            [
                "daemon-reload",
                "is-active --system -- web",
                "is-enabled --system -- web",
                "start --system -- web",
                "enable --no-reload --system -- web",
                "restart --system -- web",
                "stop --system -- web",
                "disable --no-reload --system -- web",
                "is-enabled --system -- web",
                "daemon-reload",
            ]
        );
        let ops: Vec<Call> = p.calls().iter().map(|c| c.operation).collect();
        assert_eq!(ops[0], Call::DaemonReload);
        assert_eq!(ops.last(), Some(&Call::DaemonReload));
        assert_eq!(ops.iter().filter(|o| **o == Call::DaemonReload).count(), 2);
    }

    #[test]
    fn enablement_changes_end_with_one_reload_and_nothing_else_does() {
        // Two enablement changes: one reload at the end for both.
        let runner = ScriptedRunner::default();
        let mut p = provider(&runner, false);
        p.mutate(Operation::Enable, "web").unwrap();
        p.mutate(Operation::Disable, "db").unwrap();
        p.finish().unwrap();
        p.finish().unwrap();
        assert_eq!(
            runner.log(),
            [
                "daemon-reload",
                "enable --no-reload --system -- web",
                "disable --no-reload --system -- db",
                "is-enabled --system -- db",
                "daemon-reload",
            ]
        );
        // Starts and stops only: no reload at the end.
        let runner = ScriptedRunner::default();
        let mut p = provider(&runner, false);
        p.mutate(Operation::Start, "web").unwrap();
        p.finish().unwrap();
        assert_eq!(runner.log(), ["daemon-reload", "start --system -- web"]);
        // A failed enable changed nothing: no reload either.
        let runner = ScriptedRunner::default().answer("enable", "", "Access denied\n", 1);
        let mut p = provider(&runner, false);
        p.mutate(Operation::Enable, "web").unwrap_err();
        p.finish().unwrap();
        assert_eq!(
            runner.log(),
            ["daemon-reload", "enable --no-reload --system -- web"]
        );
        // Noop: nothing at all.
        let runner = ScriptedRunner::default();
        let mut p = provider(&runner, true);
        p.mutate(Operation::Enable, "web").unwrap_err();
        p.finish().unwrap();
        assert!(runner.log().is_empty());
    }

    #[test]
    fn status_passes_on_the_words_systemctl_printed() {
        for (active, enabled, running, counts_enabled) in [
            ("active", "static", true, true),
            ("failed", "indirect", false, true),
            ("activating", "generated", false, true),
            ("reloading", "transient", true, true),
            ("inactive", "alias", false, true),
            ("deactivating", "enabled-runtime", false, true),
            ("inactive", "linked", false, false),
            ("inactive", "masked", false, false),
        ] {
            let runner = ScriptedRunner::default()
                .answer("is-active", &format!("{active}\n"), "", 3)
                .answer("is-enabled", &format!("{enabled}\n"), "", 0);
            let mut p = provider(&runner, false);
            let status = p.status("web").unwrap();
            assert_eq!(
                (status.active_word.as_str(), status.enabled_word.as_str()),
                (active, enabled)
            );
            assert_eq!((status.running, status.enabled), (running, counts_enabled));
            // The host's own record keeps the two states the reports use.
            assert_eq!(
                p.calls().last().unwrap().state,
                Some(UnitState {
                    running,
                    enabled: counts_enabled
                })
            );
        }
    }

    #[test]
    fn disable_of_a_runtime_enabled_unit_removes_the_runtime_enablement_too() {
        let runner = ScriptedRunner::default()
            .answer("is-active", "active\n", "", 0)
            .answer("is-enabled", "enabled-runtime\n", "", 0);
        let mut p = provider(&runner, false);
        assert_eq!(p.status("web").unwrap().enabled_word, "enabled-runtime");
        p.mutate(Operation::Disable, "web").unwrap();
        assert_eq!(
            runner.log(),
            [
                "daemon-reload",
                "is-active --system -- web",
                "is-enabled --system -- web",
                "disable --no-reload --system -- web",
                "is-enabled --system -- web",
                "disable --runtime --no-reload --system -- web",
            ]
        );
        // One operation, one record.
        let ops: Vec<Call> = p.calls().iter().map(|c| c.operation).collect();
        assert_eq!(
            ops,
            [
                Call::DaemonReload,
                Call::Guest(Operation::Status),
                Call::Guest(Operation::Disable)
            ]
        );
        assert_eq!(p.calls()[2].outcome, Outcome::Ok);
    }

    #[test]
    fn disable_adds_nothing_when_no_runtime_enablement_is_left() {
        // is-enabled says disabled after the disable: nothing follows.
        let runner = ScriptedRunner::default().answer("is-enabled", "disabled\n", "", 1);
        let mut p = provider(&runner, false);
        p.mutate(Operation::Disable, "web").unwrap();
        assert_eq!(
            runner.log(),
            [
                "daemon-reload",
                "disable --no-reload --system -- web",
                "is-enabled --system -- web"
            ]
        );
    }

    #[test]
    fn a_unit_enabled_in_etc_and_at_runtime_is_disabled_at_both_in_one_operation() {
        // `enabled` before (links in /etc and in /run); the plain disable
        // removes /etc's, after which it reads enabled-runtime. The host
        // remembers nothing of earlier calls: it looks.
        let runner = ScriptedRunner::default()
            .answer("is-enabled", "enabled-runtime\n", "", 0)
            .answer("is-enabled", "disabled\n", "", 1);
        let mut p = provider(&runner, false);
        p.mutate(Operation::Disable, "web").unwrap();
        assert_eq!(
            runner.log()[1..],
            [
                "disable --no-reload --system -- web",
                "is-enabled --system -- web",
                "disable --runtime --no-reload --system -- web",
            ]
        );
        assert_eq!(p.calls().len(), 2, "a reload and one disable");
    }

    #[test]
    fn a_failing_runtime_disable_fails_the_disable_with_its_command_line() {
        let runner = ScriptedRunner::default()
            .answer("is-active", "inactive\n", "", 3)
            .answer("is-enabled", "enabled-runtime\n", "", 0)
            .answer("disable --runtime", "", "Access denied\n", 1);
        let mut p = provider(&runner, false);
        p.status("web").unwrap();
        let err = p.mutate(Operation::Disable, "web").unwrap_err();
        assert_eq!(
            err,
            ProviderError::CommandFailed(
                "systemctl disable --runtime --no-reload --system -- web failed (exit status 1): Access denied"
                    .into()
            )
        );
        assert_eq!(
            p.calls().last().unwrap().outcome,
            Outcome::Failed(ErrorKind::CommandFailed)
        );
    }

    #[test]
    fn a_disable_whose_check_fails_leaves_the_verification_to_the_guest() {
        let runner = ScriptedRunner::default().answer(
            "is-enabled",
            "",
            "Failed to get unit file state for web.service: No such file or directory\n",
            1,
        );
        let mut p = provider(&runner, false);
        p.mutate(Operation::Disable, "web").unwrap();
        assert_eq!(runner.log().last().unwrap(), "is-enabled --system -- web");
    }

    #[test]
    fn invalid_names_never_reach_systemctl() {
        let runner = ScriptedRunner::default();
        let mut p = provider(&runner, false);
        for name in ["-H evil", "a;b", "", "--help"] {
            assert!(
                matches!(p.status(name), Err(ProviderError::InvalidName(_))),
                "{name}"
            );
            assert!(matches!(
                p.mutate(Operation::Start, name),
                Err(ProviderError::InvalidName(_))
            ));
        }
        assert!(runner.log().is_empty(), "{:?}", runner.log());
        assert!(p
            .calls()
            .iter()
            .all(|c| c.outcome == Outcome::Failed(ErrorKind::InvalidName)));
    }

    #[test]
    fn noop_refuses_mutations_and_does_not_reload() {
        let runner = ScriptedRunner::default()
            .answer("is-active", "active\n", "", 0)
            .answer("is-enabled", "enabled\n", "", 0);
        let mut p = provider(&runner, true);
        p.status("web").unwrap();
        assert!(matches!(
            p.mutate(Operation::Stop, "web"),
            Err(ProviderError::Denied(_))
        ));
        assert_eq!(
            runner.log(),
            ["is-active --system -- web", "is-enabled --system -- web"]
        );
    }

    #[test]
    fn failed_mutation_reports_exit_code_and_stderr() {
        let runner = ScriptedRunner::default().answer(
            "start",
            "",
            "Failed to start nosuch.service: Unit nosuch.service not found.\n",
            5,
        );
        let mut p = provider(&runner, false);
        let err = p.mutate(Operation::Start, "nosuch").unwrap_err();
        assert_eq!(
            err.message(),
            "systemctl start --system -- nosuch failed (exit status 5): Failed to start nosuch.service: Unit nosuch.service not found."
        );
    }

    /// A failed start says why in systemd's words (its `Result` and how
    /// the main process ended) and carries the unit's last journal lines
    /// in its record, escaped when shown.
    #[test]
    fn a_failed_start_is_explained_in_systemds_words_and_the_units() {
        let runner = ScriptedRunner::default()
            .answer(
                "start",
                "",
                "Job for web.service failed because the control process exited with error code.\n",
                1,
            )
            .answer(
                "show --property=",
                "ActiveState=failed\nSubState=failed\nInvocationID=00ff\nNRestarts=0\n\
                 Result=exit-code\nExecMainCode=1\nExecMainStatus=3\nJob=\n",
                "",
                0,
            )
            .answer("journalctl", "starting\nboom: \x1b[31mbad config\n", "", 0);
        let mut p = provider(&runner, false);
        let err = p.mutate(Operation::Start, "web").unwrap_err();
        assert!(
            err.message().ends_with(
                "control process exited with error code. (Result: exit-code; main process \
                 exited with status 3)"
            ),
            "{}",
            err.message()
        );
        let calls = p.take_calls();
        let start = calls.last().unwrap();
        let journal: Vec<&str> = start.journal.iter().map(|l| l.as_raw()).collect();
        assert_eq!(journal, ["starting", "boom: \x1b[31mbad config"]);
        assert!(!start.journal[1].to_string().contains('\x1b'));
        let asked = runner.log();
        assert!(
            asked.iter().any(|l| l.starts_with("journalctl ")
                && l.contains("_SYSTEMD_UNIT=web.service")
                && l.contains("--since=@")),
            "{asked:?}"
        );
    }

    #[test]
    fn failed_reload_fails_every_operation_without_retrying() {
        let runner = ScriptedRunner::default().answer("daemon-reload", "", "Access denied\n", 1);
        let mut p = provider(&runner, false);
        assert!(
            matches!(p.status("a"), Err(ProviderError::CommandFailed(m)) if m.contains("Access denied"))
        );
        assert!(matches!(
            p.mutate(Operation::Start, "a"),
            Err(ProviderError::CommandFailed(_))
        ));
        assert_eq!(runner.log(), ["daemon-reload"]);
    }

    #[test]
    fn units_outside_the_allowlist_are_denied_without_running_anything() {
        let runner = ScriptedRunner::default()
            .answer("is-active", "active\n", "", 0)
            .answer("is-enabled", "enabled\n", "", 0);
        let allow = UnitAllowlist::new(&["web-*".into()]).unwrap();
        let mut p = allowing(&runner, false, Some(allow));
        assert!(matches!(p.status("sshd"), Err(ProviderError::Denied(m)) if m.contains("sshd")));
        assert!(matches!(
            p.mutate(Operation::Stop, "sshd"),
            Err(ProviderError::Denied(_))
        ));
        assert!(runner.log().is_empty(), "{:?}", runner.log());
        p.status("web-api").unwrap();
        assert_eq!(
            p.calls()
                .iter()
                .filter(|c| c.outcome == Outcome::Failed(ErrorKind::Denied))
                .count(),
            2
        );
    }

    #[test]
    fn missing_systemctl_makes_every_call_unavailable() {
        let runner = ScriptedRunner::default();
        let mut p = SystemdProvider::new(
            SystemdConfig {
                systemctl: Err("systemctl not found on PATH".into()),
                timeout: Duration::from_secs(5),
                noop: false,
                allow: None,
                status_via: StatusVia::Systemctl,
                jobs: 1,
                settle: Duration::ZERO,
                await_unit_jobs: true,
            },
            Box::new(runner.clone()),
        );
        assert_eq!(
            p.status("web"),
            Err(ProviderError::Unavailable(
                "systemctl not found on PATH".into()
            ))
        );
        assert!(runner.log().is_empty());
    }

    #[test]
    fn systemctl_saying_there_is_no_systemd_is_asked_once_and_no_unit_is_missing() {
        let words =
            "System has not been booted with systemd as init system (PID 1). Can't operate.\n\
                     Failed to connect to bus: Host is down\n";
        let runner = ScriptedRunner::default()
            .answer("is-active", "", words, 1)
            .answer("is-enabled", "", words, 1)
            .answer("show", "", words, 1);
        let mut p = provider(&runner, true);
        let first = p.status("web").unwrap_err();
        assert_eq!(first.kind(), ErrorKind::Unavailable, "{first:?}");
        assert!(
            first
                .message()
                .contains("System has not been booted with systemd"),
            "{first:?}"
        );
        assert!(!first.message().contains("not found"), "{first:?}");
        let asked = runner.log().len();
        assert_eq!(
            p.status("db").unwrap_err(),
            first,
            "the same words for every unit"
        );
        assert_eq!(
            runner.log().len(),
            asked,
            "systemctl is not asked again: {:?}",
            runner.log()
        );
        assert_eq!(p.unavailable_reason(), Some(first.message()));
    }
}
