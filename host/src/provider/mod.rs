//! The service provider: the six operations a guest may ask for, carried out
//! on systemd (over D-Bus when the system bus answers, else with
//! `systemctl`). This is the trusted side: it re-checks every name, it
//! reports only what systemd said and did, and it holds no desired-state
//! logic (that is the guest's).

pub mod allow;
pub(crate) mod backend;
pub(crate) mod guard;
pub(crate) mod job_result;
pub(crate) mod journal;
pub(crate) mod liveness;
pub(crate) mod systemd;
pub(crate) mod unit_name;

/// systemctl's output, read (public for the fuzz targets).
pub use systemd::cli::parse;
/// How commands are run (the host's own readers of systemctl use it too).
pub use systemd::cli::runner;

use std::time::{Duration, Instant};

use serde::{Serialize, Serializer};

use crate::contract::{ErrorKind, Operation, Progress, ProviderError, ServiceStatus};
pub use allow::UnitAllowlist;
pub(crate) use systemd::bus::follow::{BusEvent, UnitFollower};
pub use systemd::{StatusVia, SystemdConfig};

use self::backend::Backend;
use self::guard::{
    Deadline, Guard, Guarded, Jobs, LeftAloneUnits, Names, Noop, Record, Reload, Settle, Stack,
    Units,
};
pub use self::guard::{ReloadBeforeChange, RunWindows, Verdict, Windows};
use self::runner::{find_in_path, CommandRunner, ProcessRunner};
use self::systemd::SystemdBackend;

/// The systemd provider: the guard's layers over the systemd backend.
pub type SystemdProvider = Guarded<SystemdBackend>;

/// The provider the host runs policies with: the guard stack built here
/// ([`guarded`]) over the systemd backend, which only talks to systemd;
/// systemctl is run as a process.
pub fn systemd(config: SystemdConfig) -> SystemdProvider {
    systemd_with(config, Box::new(ProcessRunner))
}

/// [`systemd`] with commands run by `runner` (a test's script).
pub fn systemd_with(config: SystemdConfig, runner: Box<dyn CommandRunner>) -> SystemdProvider {
    let guard = Guard {
        allow: config.allow.clone(),
        noop: config.noop,
        timeout: config.timeout,
        jobs: config.jobs,
        settle: config.settle,
        left_alone: config.left_alone.clone(),
        reload_before_change: config.reload_before_change,
        windows: config.windows.clone(),
    };
    guarded(SystemdBackend::new(&config, runner), guard)
}

/// The guard stack over `backend`, built here as tower's `ServiceBuilder`
/// builds one, outside the service: its layers listed in the order an
/// operation meets them (why in this order: the list at the top of
/// `guard/mod.rs`).
pub(crate) fn guarded<B: Backend>(backend: B, guard: Guard) -> Guarded<B> {
    Stack::new()
        // Every call recorded, whatever a layer below does with it.
        .layer(Record::default())
        // The name checked, allowed, and the backend available.
        .layer(Names::new(guard.allow))
        // Units left alone: refused before any reload.
        .layer(LeftAloneUnits::new(guard.left_alone))
        // A dry run refuses changes (its Reload, below, never reloads).
        .layer(Noop::new(guard.noop))
        // Each exchange's time, from here down.
        .layer(Deadline::new(guard.timeout))
        // The unit-specific stack: the run's daemon-reload...
        .layer(Reload::new(guard.reload_before_change, guard.noop))
        // ...over the backend, its jobs followed and its starts settled.
        .over(Units::new(
            backend,
            Jobs::new(guard.jobs),
            match guard.windows {
                Some(windows) => Settle::later(guard.settle, windows),
                None => Settle::new(guard.settle),
            },
        ))
}

/// The running systemd's version as it says it over the system bus (the
/// manager's `Version`: `252.22-1~deb12u1`), on a connection of its own
/// (no process, and nothing a fake systemctl records); `None` when there is
/// no bus, no systemd on it, or no answer within `timeout` for each step.
/// The version of the systemd running, not of the systemctl installed.
pub fn systemd_version(timeout: Duration) -> Option<String> {
    let bus = systemd::bus::dbus::SystemdBus::connect(timeout).ok()?;
    bus.manager_version(timeout).ok()
}

/// systemctl on `PATH`, or why not.
pub fn systemctl_on_path() -> Result<std::path::PathBuf, String> {
    std::env::var_os("PATH")
        .and_then(|path| find_in_path("systemctl", &path))
        .ok_or_else(|| "systemctl not found on PATH".to_owned())
}

/// What the runtime needs of a provider: the guest's operations, the run's
/// deadline and the record of what was executed. A trait, so that the
/// runtime's metering is tested in process with a provider of the test's own.
pub trait Provider: Send {
    /// The name a `status` answer carries ("systemd").
    fn name(&self) -> &'static str;
    /// `None` when the provider can work; otherwise why not.
    fn unavailable_reason(&self) -> Option<&str>;
    fn status(&mut self, name: &str) -> Result<ServiceStatus, ProviderError>;
    /// Runs one of the five mutating operations: to its end, or, for a job
    /// systemd runs beside others, to its queueing (`status` then waits).
    fn mutate(&mut self, operation: Operation, name: &str) -> Result<Progress, ProviderError>;
    /// No command may run past `deadline` (the run's wall-clock limit).
    fn set_deadline(&mut self, deadline: Instant);
    /// The calls recorded so far, leaving none: several policies share one
    /// provider (and its one reload), each report gets its own calls.
    fn take_calls(&mut self) -> Vec<CallRecord>;
    /// How status is read (`dbus` or `systemctl`), and why not over D-Bus
    /// when it is not.
    fn status_reader(&mut self) -> (&'static str, Option<&str>) {
        ("systemctl", None)
    }
    /// Ends the run: whatever must follow the last operation (the one
    /// daemon-reload after enablement changes).
    fn finish(&mut self) -> Result<(), ProviderError> {
        Ok(())
    }
    /// A watch's: judges the settle windows its runs left open that are
    /// due: every one when `all`, else those that ended, and those of the
    /// units in `changed` that went down. A failed one's verdict is owed to
    /// its run ([`guard::RunWindows::take_verdicts`]).
    fn settle(&mut self, _changed: &[String], _all: bool) {}
}

/// What the host executed: an operation a guest asked for, or the run's own
/// daemon-reload, which no guest can ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    DaemonReload,
    Guest(Operation),
}

impl Call {
    pub fn verb(self) -> &'static str {
        match self {
            Call::DaemonReload => "daemon-reload",
            Call::Guest(operation) => operation.verb(),
        }
    }

    /// True for the calls that can change a unit.
    pub fn is_mutating(self) -> bool {
        matches!(self, Call::Guest(operation) if operation.is_mutating())
    }
}

impl Serialize for Call {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.verb())
    }
}

/// One operation the host carried out (or refused) during a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallRecord {
    pub operation: Call,
    /// The name as the guest sent it (checked or not: shown escaped);
    /// `None` for daemon-reload.
    pub service: Option<crate::text::Untrusted>,
    /// `ok` or the error kind (`invalid-name`, `command-failed`, ...).
    pub outcome: Outcome,
    /// The error's message: the host's words, with systemd's and the
    /// guest's in them (shown escaped).
    pub error: Option<crate::text::Untrusted>,
    /// What a successful `status` answered: the host's own record of the
    /// unit's state, which reports believe over a guest's account.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<UnitState>,
    /// For a failed start, restart or settle window: the last lines the
    /// unit wrote to the journal (the unit's text: escaped when shown).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub journal: Vec<crate::text::Untrusted>,
    /// Set when the guard refused the change because the unit is left
    /// alone (`paused` by the operator, `held` back after a crash loop):
    /// the report says so instead of a failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub left_alone: Option<crate::left_alone::Kind>,
    #[serde(rename = "duration_ms", serialize_with = "as_millis")]
    pub duration: Duration,
}

/// How one call ended: `ok`, or the contract's name of its error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    Failed(ErrorKind),
}

impl Outcome {
    /// The outcome of a call that failed with `error`.
    pub fn of(error: &ProviderError) -> Self {
        Outcome::Failed(error.kind())
    }

    pub fn is_ok(self) -> bool {
        self == Outcome::Ok
    }

    /// `ok`, or the error's name in the contract (`not-found`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Failed(kind) => kind.as_str(),
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Outcome {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// A unit's state as a `status` call found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct UnitState {
    pub running: bool,
    pub enabled: bool,
    /// systemd said `failed`: the unit died on its own (a unit someone
    /// stopped, or that ended cleanly, is `inactive`). What tells a crash
    /// loop from a fight.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub failed: bool,
}

impl UnitState {
    /// What `status` answered.
    pub fn of(status: &ServiceStatus) -> Self {
        Self {
            running: status.running,
            enabled: status.enabled,
            failed: status.active_word == contract_words::ActiveState::Failed.as_str(),
        }
    }
}

fn as_millis<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(crate::text::millis(*d))
}
