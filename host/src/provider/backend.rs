//! What a backend is: the part of the provider that only talks to systemd.
//! It is handed names already checked and allowed, and a time budget; the
//! guard layer (`guard`) does the checking, the refusing and the recording,
//! the same for every backend.

use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use super::liveness::Liveness;
use crate::contract::{Operation, ProviderError, ServiceStatus};
use crate::service_name::CheckedName;
use crate::text::Untrusted;

/// Held around every exchange with systemd in this process (a systemctl
/// command, a D-Bus call), so that two providers (or threads) never
/// interleave them: the design's one global lock.
pub(super) static SYSTEMD_LOCK: Mutex<()> = Mutex::new(());

/// Runs `exchange` holding [`SYSTEMD_LOCK`].
pub(super) fn locked<T>(exchange: impl FnOnce() -> T) -> T {
    let _guard = SYSTEMD_LOCK
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    exchange()
}

/// One of the five operations that change a unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Start,
    Stop,
    Restart,
    Enable,
    Disable,
}

impl Change {
    /// The change an operation asks for; `None` for `status`.
    pub fn of(operation: Operation) -> Option<Self> {
        match operation {
            Operation::Status => None,
            Operation::Start => Some(Change::Start),
            Operation::Stop => Some(Change::Stop),
            Operation::Restart => Some(Change::Restart),
            Operation::Enable => Some(Change::Enable),
            Operation::Disable => Some(Change::Disable),
        }
    }

    /// The systemctl verb.
    pub fn verb(self) -> &'static str {
        match self {
            Change::Start => "start",
            Change::Stop => "stop",
            Change::Restart => "restart",
            Change::Enable => "enable",
            Change::Disable => "disable",
        }
    }

    /// Enable and disable change links, which systemd sees after a reload.
    pub fn is_enablement(self) -> bool {
        matches!(self, Change::Enable | Change::Disable)
    }

    /// Start, stop and restart are jobs systemd runs; the others are done
    /// when their call returns.
    pub fn is_job(self) -> bool {
        !self.is_enablement()
    }
}

/// A job systemd queued for this run, as its backend numbers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId(pub u64);

/// How far a change got when the backend returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// It is done (systemctl returned after the job, or it was no job).
    Done,
    /// systemd queued its job; [`Backend::wait_jobs`] says how it ends.
    Queued(JobId),
}

/// How a queued job ended, or why it is not known.
pub(crate) type JobResult = Result<(), ProviderError>;

/// What a backend's `status` found.
#[derive(Debug, Clone)]
pub struct Observed {
    pub status: ServiceStatus,
    /// Whether a unit file or drop-in of the unit changed on disk since
    /// systemd loaded it (systemd's `NeedDaemonReload`); `None` when the
    /// backend cannot tell, or was not asked.
    pub files_changed: Option<bool>,
}

/// How long one exchange with systemd may take: the per-command timeout,
/// cut at the run's deadline.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub timeout: Duration,
    pub deadline: Option<Instant>,
}

impl Budget {
    /// The time the exchange `what` may take now; an error naming it once
    /// the run's deadline has passed.
    pub fn now(&self, what: &str) -> Result<Duration, ProviderError> {
        match self.deadline {
            Some(deadline) => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(ProviderError::TimedOut(format!(
                        "{what}: not run, the run's wall-clock limit has passed"
                    )));
                }
                Ok(self.timeout.min(left))
            }
            None => Ok(self.timeout),
        }
    }
}

/// The part of a provider that talks to systemd.
pub trait Backend: Send {
    /// The name a `status` answer carries.
    fn name(&self) -> &'static str {
        "systemd"
    }
    /// `None` when the backend can work; otherwise why not.
    fn unavailable_reason(&self) -> Option<&str>;
    /// How status is read (`dbus` or `systemctl`), and why not over D-Bus
    /// when it is not.
    fn status_reader(&mut self) -> (&'static str, Option<&str>);
    /// Whether its next `status` will say if the unit's files changed since
    /// systemd loaded them. When it will not, the guard makes the run's
    /// daemon-reload before the first status, as the design does.
    fn tells_files_changed(&mut self, time: &Budget) -> bool {
        let _ = time;
        false
    }
    /// The unit's state, as systemd words it; with `files_changed_too`,
    /// also whether its files changed, when the backend can tell (it costs
    /// questions, so the guard asks only while the run's reload is to come).
    fn status(
        &mut self,
        unit: &CheckedName,
        time: &Budget,
        files_changed_too: bool,
    ) -> Result<Observed, ProviderError>;
    /// Carries out `change` (see [`Change`]): completely, or, for a job
    /// when the backend can hand it to systemd's job engine, up to its
    /// queueing. Enablement changes are made without a reload, which the
    /// guard makes once at the end.
    fn change(
        &mut self,
        change: Change,
        unit: &CheckedName,
        time: &Budget,
    ) -> Result<Applied, ProviderError>;
    /// Waits until one of `jobs` ends, or `until`, whichever is first, and
    /// says which jobs ended meanwhile (each job once, any of `jobs`).
    fn wait_jobs(&mut self, jobs: &[JobId], until: Instant) -> Vec<(JobId, JobResult)> {
        let _ = (jobs, until);
        Vec::new()
    }
    /// Gives up waiting for `job`: systemd is asked to cancel it when
    /// `cancel`, and it is forgotten; the answer says what became of it.
    fn abandon(&mut self, job: JobId, cancel: bool) -> String {
        let _ = (job, cancel);
        String::new()
    }
    /// Makes systemd read its unit files again.
    fn daemon_reload(&mut self, time: &Budget) -> Result<(), ProviderError>;

    /// The time settle windows are measured in: the clock, except for a
    /// test's backend, which simulates it (with [`Self::watch_units`]).
    fn now(&self) -> Instant {
        Instant::now()
    }

    /// What `unit` (mangled) looks like as its start or restart ended,
    /// when the backend can tell it cheaply (over D-Bus); the settle
    /// window compares its end with it. `None`: judged without.
    fn liveness_at_start(&mut self, unit: &str, time: &Budget) -> Option<Liveness> {
        let _ = (unit, time);
        None
    }

    /// Whether `unit` (mangled) is up, and how it went down if it is not
    /// ([`Liveness`]); `Ok(None)` when the backend cannot tell.
    fn liveness(&mut self, unit: &str, time: &Budget) -> Result<Option<Liveness>, ProviderError> {
        let _ = (unit, time);
        Ok(None)
    }

    /// Waits until one of `units` (mangled) changed state, or `until`;
    /// says whether one did. A backend that cannot watch waits `until`.
    fn watch_units(&mut self, units: &[String], until: Instant) -> bool {
        let _ = units;
        std::thread::sleep(until.saturating_duration_since(Instant::now()));
        false
    }

    /// Whether [`Self::watch_units`] sees changes as they happen (over
    /// D-Bus), rather than only waiting: a window is then looked at once
    /// before it is watched, so a unit that went down before the watch is
    /// judged at once.
    fn watches_units(&self) -> bool {
        false
    }

    /// No unit is watched any more: whatever [`Self::watch_units`] holds
    /// open can go.
    fn unwatch(&mut self) {}

    /// The last lines `unit` (mangled) wrote to the journal since `since`
    /// (see [`super::journal`]); none when the journal cannot be read.
    fn journal(&mut self, unit: &str, since: SystemTime, time: &Budget) -> Vec<Untrusted> {
        let _ = (unit, since, time);
        Vec::new()
    }
}
