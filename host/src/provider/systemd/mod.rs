//! The systemd backend: over D-Bus while the system bus answers (status,
//! jobs on systemd's job engine, unit files, what a settle window reads:
//! `bus`), otherwise the design's `systemctl` commands (`cli`,
//! docs/service-type.md); the run's daemon-reload, SysV scripts'
//! enablement and the unit's journal always go through `systemctl`. It
//! reports what systemd said (`status` carries the `is-active` and
//! `is-enabled` words) and carries out what it is asked to; what a word
//! means for the desired state is the guest's to decide.
//!
//! It only talks to systemd: names are checked, allowed, refused in a noop
//! run, timed and recorded by the guard layer built over it in
//! `provider/mod.rs`, which also makes the run's reloads. This module only
//! chooses, for each question, the bus or systemctl.

pub(crate) mod bus;
pub(crate) mod cli;
mod status;
#[cfg(test)]
mod tests;
pub(crate) mod words;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use self::bus::{Bus, BusAnswer};
use self::cli::parse::{read_is_enabled, Word};
use self::cli::runner::{CommandOutput, CommandRunner};
use self::cli::systemctl::Systemctl;
use self::cli::Cli;
use crate::contract::ProviderError;
use crate::provider::backend::{Applied, Backend, Budget, Change, JobId, JobResult, Observed};
use crate::provider::liveness::Liveness;
use crate::provider::unit_name::{mangle, object_path};
use crate::provider::UnitAllowlist;
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
    pub allow: Option<UnitAllowlist>,
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
    /// Units whose changes the guard refuses for now (paused, held back).
    pub left_alone: crate::left_alone::LeftAlone,
    /// Whether a change makes the run's daemon-reload first.
    pub reload_before_change: crate::provider::ReloadBeforeChange,
    /// A watch's run: its settle windows outlive it, judged later.
    pub windows: Option<crate::provider::RunWindows>,
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

/// Where a SysV init script for a service would be (systemctl's
/// `SYSTEM_SYSVINIT_PATH`).
const SYSV_INIT_DIR: &str = "/etc/init.d";

/// Talks to systemd: over the bus while it works, with systemctl otherwise.
pub struct SystemdBackend {
    bus: Bus,
    cli: Cli,
    timeout: Duration,
    /// See [`SystemdConfig::await_unit_jobs`].
    await_unit_jobs: bool,
}

impl SystemdBackend {
    pub(crate) fn new(config: &SystemdConfig, runner: Box<dyn CommandRunner>) -> Self {
        let systemctl = Systemctl::new(config.systemctl.clone(), runner);
        // The bus is tried unless the settings say systemctl, or there is
        // no systemd to ask (systemctl says why).
        let bus = match (config.status_via, systemctl.unavailable_reason()) {
            (StatusVia::Systemctl, _) => {
                let why = "provider = \"systemctl\"";
                tracing::info!("status is read with systemctl: {why}");
                Bus::not_used(Some(why.to_owned()))
            }
            (StatusVia::Auto, Some(_)) => Bus::not_used(None),
            (StatusVia::Auto, None) => Bus::to_connect(),
        };
        Self {
            bus,
            cli: Cli::new(systemctl),
            timeout: config.timeout,
            await_unit_jobs: config.await_unit_jobs,
        }
    }

    /// A budget of one exchange, with no deadline.
    fn one_exchange(&self) -> Budget {
        Budget {
            timeout: self.timeout,
            deadline: None,
        }
    }

    /// `is-enabled` of `service`: over the bus when it can be, except for a
    /// unit generated from a SysV init script, which is asked of
    /// systemctl, which asks `systemd-sysv-install` as systemd 252 does.
    fn is_enabled(&mut self, service: &CheckedName, time: &Budget) -> Result<Word, ProviderError> {
        if let Some(unit) = self.bus_name(service) {
            match self.bus.is_enabled(&unit, time, "status")? {
                BusAnswer::Answered(output)
                    if !(output.stdout.trim() == contract_words::GENERATED
                        && has_sysv_script(&unit)) =>
                {
                    return read_is_enabled(service.as_str(), &output);
                }
                BusAnswer::Refused(refusal) => return Err(refusal.status_error()),
                BusAnswer::Answered(_) | BusAnswer::Fallback => {}
            }
        }
        let output = self.cli.is_enabled(service.as_str(), time)?;
        read_is_enabled(service.as_str(), &output)
    }

    /// The unit's name on the bus, while the bus is up.
    fn bus_name(&self, service: &CheckedName) -> Option<String> {
        self.bus.is_up().then(|| mangle(service.as_str())).flatten()
    }

    /// Whether `unit` (mangled) is a SysV init script's, which systemctl
    /// enables and disables with `systemd-sysv-install`: a script in
    /// /etc/init.d and no native unit file (only the generated one).
    fn is_sysv(&mut self, unit: &str, time: &Budget) -> Result<bool, ProviderError> {
        if !has_sysv_script(unit) {
            return Ok(false);
        }
        Ok(match self.bus.is_enabled(unit, time, "enable")? {
            BusAnswer::Answered(output) => {
                [contract_words::GENERATED, ""].contains(&output.stdout.trim())
            }
            BusAnswer::Refused(_) | BusAnswer::Fallback => true,
        })
    }

    /// Makes `change` over the bus; `None` when systemctl is to make it.
    fn change_over_bus(
        &mut self,
        change: Change,
        unit: &str,
        time: &Budget,
    ) -> Result<Option<Applied>, ProviderError> {
        if change.is_job() {
            return match self.bus.queue(change, unit, time)? {
                BusAnswer::Answered(job) => Ok(Some(Applied::Queued(job))),
                BusAnswer::Refused(refusal) => Err(refusal.change_error(change, unit)),
                BusAnswer::Fallback => Ok(None),
            };
        }
        if self.is_sysv(unit, time)? {
            return Ok(None);
        }
        match self.bus.unit_files(change, unit, time)? {
            BusAnswer::Answered(done) => done.map(|()| Some(Applied::Done)),
            BusAnswer::Refused(refusal) => Err(refusal.change_error(change, unit)),
            BusAnswer::Fallback => Ok(None),
        }
    }
}

/// Whether /etc/init.d has a script for `unit` (mangled, `NAME.service`).
fn has_sysv_script(unit: &str) -> bool {
    unit.strip_suffix(".service")
        .is_some_and(|base| Path::new(SYSV_INIT_DIR).join(base).exists())
}

impl Backend for SystemdBackend {
    fn unavailable_reason(&self) -> Option<&str> {
        self.cli.unavailable_reason()
    }

    /// When no call was made, the bus is connected to now, so that the
    /// report says how status would have been read.
    fn status_reader(&mut self) -> (&'static str, Option<&str>) {
        self.bus.connect_once(&self.one_exchange());
        if self.bus.is_up() {
            ("dbus", None)
        } else {
            ("systemctl", self.bus.note())
        }
    }

    /// Over D-Bus, whether a unit's answers say that its files changed
    /// since systemd loaded them; with systemctl they do not.
    fn tells_files_changed(&mut self, time: &Budget) -> bool {
        self.bus.connect_once(time);
        self.bus.is_up()
    }

    fn status(
        &mut self,
        unit: &CheckedName,
        time: &Budget,
        files_changed_too: bool,
    ) -> Result<Observed, ProviderError> {
        self.read_status(unit, time, files_changed_too)
    }

    fn change(
        &mut self,
        change: Change,
        unit: &CheckedName,
        time: &Budget,
    ) -> Result<Applied, ProviderError> {
        self.bus.connect_once(time);
        if let Some(mangled) = self.bus_name(unit) {
            if let Some(applied) = self.change_over_bus(change, &mangled, time)? {
                return Ok(applied);
            }
        }
        if change.is_enablement() {
            // systemctl's links are not in any answer the run reads.
            self.bus.forget_enablement();
        }
        self.cli.change(change, unit.as_str(), time)?;
        Ok(Applied::Done)
    }

    fn wait_jobs(&mut self, jobs: &[JobId], until: Instant) -> Vec<(JobId, JobResult)> {
        self.bus.wait_jobs(jobs, until, self.timeout)
    }

    fn abandon(&mut self, job: JobId, cancel: bool) -> String {
        self.bus.abandon(job, cancel, self.timeout)
    }

    fn daemon_reload(&mut self, time: &Budget) -> Result<(), ProviderError> {
        self.bus.forget_enablement();
        self.cli.daemon_reload(time)
    }

    /// Over D-Bus only: with systemctl it would cost a process per start,
    /// and the window is judged without it (a start by hand sets the
    /// restart count to 0).
    fn liveness_at_start(&mut self, unit: &str, time: &Budget) -> Option<Liveness> {
        match self.bus.liveness(unit, time) {
            Ok(BusAnswer::Answered(liveness)) => Some(liveness),
            _ => None,
        }
    }

    /// Over D-Bus (one round trip), or `systemctl show`.
    fn liveness(&mut self, unit: &str, time: &Budget) -> Result<Option<Liveness>, ProviderError> {
        match self.bus.liveness(unit, time)? {
            BusAnswer::Answered(liveness) => Ok(Some(liveness)),
            BusAnswer::Refused(refusal) => Err(refusal.status_error()),
            BusAnswer::Fallback => self.cli.liveness(unit, time).map(Some),
        }
    }

    /// `PropertiesChanged` of the units' object paths, over D-Bus; with
    /// systemctl, a wait until `until` (one `show` at the window's end).
    fn watch_units(&mut self, units: &[String], until: Instant) -> bool {
        let paths: Vec<String> = units.iter().map(|u| object_path(u)).collect();
        match self.bus.watch_units(&paths, until, self.timeout) {
            Some(changed) => changed,
            None => {
                std::thread::sleep(until.saturating_duration_since(Instant::now()));
                false
            }
        }
    }

    fn watches_units(&self) -> bool {
        self.bus.is_up()
    }

    fn unwatch(&mut self) {
        self.bus.unwatch();
    }

    fn journal(&mut self, unit: &str, since: SystemTime, time: &Budget) -> Vec<Untrusted> {
        self.cli.journal(unit, since, time)
    }
}

/// What systemctl would have printed for a word read another way.
fn printed(word: &str) -> CommandOutput {
    CommandOutput {
        code: Some(0),
        stdout: format!("{word}\n"),
        stderr: String::new(),
    }
}
