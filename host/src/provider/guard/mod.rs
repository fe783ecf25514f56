//! The guard, the same over every backend, as a stack of layers: each a
//! small type with one job that wraps the service below it ([`Over`]),
//! built in one place, [`crate::provider::guarded`], in the order an
//! operation meets them (as tower's `ServiceBuilder` builds a stack outside
//! the service it guards; the backend assembles no guard of its own):
//!
//! 1. [`Record`], outermost: one [`CallRecord`] per operation, whatever
//!    a layer below did with it, so that a refusal is recorded as surely as
//!    a change; the layers below complete it (their own calls, a job's
//!    end, a window's verdict);
//! 2. [`Names`]: the name check (a unit name systemd would take, never an
//!    option), the allowlist (`allow_units`) and availability (systemctl
//!    found): the guest's text becomes a [`CheckedName`] here, and every
//!    layer below takes only that;
//! 3. [`LeftAloneUnits`]: a change of a unit the operator paused, or a
//!    start of one held back after a crash loop, is refused, and its
//!    record says so ([`crate::left_alone`]); above the reload, so that
//!    such a unit makes none;
//! 4. [`Noop`]: a change is refused in a dry run. It meets a change before
//!    the run's reload does, as it must: in a dry run [`Reload`] never
//!    reloads (not even for a status), so a change it refuses would have
//!    made no reload below it either;
//! 5. [`Deadline`]: the per-command timeout, cut at the run's wall clock,
//!    handed to every layer below with each operation (in [`Run`]);
//!
//! and the unit-specific stack, which knows what systemd does with units:
//!
//! 6. [`Reload`]: the run's one daemon-reload, before its first change or,
//!    when the backend cannot tell that a unit's files are unchanged, its
//!    first status (`reload.rs` says when exactly); the clock of a status
//!    starts after it. The run ends with its one daemon-reload after
//!    enablement changes;
//! 7. [`Units`]: the backend, which only talks to systemd, with the jobs it
//!    queues followed ([`Jobs`]) and the settle windows of its starts
//!    ([`Settle`]); one type, because a job's end opens a window and a
//!    window's verdict is how the job ended.
//!
//! Layers 1 to 5 are generic (`layers.rs`); 6 and 7 are about units
//! (`reload.rs`, `units.rs`, `jobs.rs`, `settle.rs`). Every layer is
//! synchronous, and speaks [`Service`] to the one above it.
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
//! to the journal, in its record only (never given to a guest). A watch's
//! runs leave their windows open (`settle.rs`, [`Windows`]): a status reads
//! the unit at once, an enablement change waits for its start's window,
//! and the verdict reaches the run's records when it comes.

use std::time::{Duration, Instant};

mod jobs;
mod layers;
mod reload;
mod settle;
mod stack;
mod units;

pub(crate) use self::jobs::Jobs;
pub(crate) use self::layers::{Calls, Deadline, LeftAloneUnits, Names, Noop, Record};
pub(crate) use self::reload::Reload;
pub use self::reload::ReloadBeforeChange;
pub(crate) use self::settle::Settle;
pub use self::settle::{RunWindows, Verdict, Windows};
pub(crate) use self::stack::{Over, Stack};
pub(crate) use self::units::Units;
use super::backend::{Budget, Change};
use super::{CallRecord, UnitAllowlist};
use crate::contract::{Operation, Progress, ProviderError, ServiceStatus};
use crate::left_alone::LeftAlone;
use crate::service_name::CheckedName;

/// The guard's settings for one run, which [`crate::provider::guarded`]
/// hands to its layers.
#[derive(Debug, Clone)]
pub(crate) struct Guard {
    /// When set, operations on units it does not allow are refused.
    pub(crate) allow: Option<UnitAllowlist>,
    /// A dry run: changes are refused and no daemon-reload is made.
    pub(crate) noop: bool,
    /// The longest a single exchange with systemd may take, and a job from
    /// its submission to its end.
    pub(crate) timeout: Duration,
    /// How many jobs of this run may be pending at once; 1 makes every
    /// call wait for its job.
    pub(crate) jobs: usize,
    /// How long a unit must stay up after its start or restart job ended
    /// for the start to count; zero judges it when the job ends.
    pub(crate) settle: Duration,
    /// Units whose changes are refused for now: paused by the operator,
    /// held back after a crash loop.
    pub(crate) left_alone: LeftAlone,
    /// Whether a change makes the run's daemon-reload first.
    pub(crate) reload_before_change: ReloadBeforeChange,
    /// A watch's run: its windows outlive it there, judged later.
    pub(crate) windows: Option<RunWindows>,
}

/// The guard's stack over backend `B`, as [`crate::provider::guarded`]
/// builds it: what the runtime calls a provider.
pub(crate) type Guarded<B> = Over<
    Record,
    Over<Names, Over<LeftAloneUnits, Over<Noop, Over<Deadline, Over<Reload, Units<B>>>>>>,
>;

impl<B> Guarded<B> {
    /// Every operation recorded and not yet taken, in order.
    pub fn calls(&self) -> &[CallRecord] {
        self.step.calls.all()
    }

    /// The backend at the bottom of the stack.
    #[cfg(test)]
    pub(crate) fn backend(&self) -> &B {
        &self.inner.inner.inner.inner.inner.inner.backend
    }

    #[cfg(test)]
    pub(crate) fn backend_mut(&mut self) -> &mut B {
        &mut self.inner.inner.inner.inner.inner.inner.backend
    }
}

/// What a layer of the guard is to the layer above it: the operations on
/// a unit named as `Name` (the guest's text above [`Names`], a
/// [`CheckedName`] below it), each carrying the run along ([`Run`]).
/// Synchronous, as every exchange with systemd is here.
pub(crate) trait Service<Name: ?Sized>: Described {
    fn status(&mut self, name: &Name, run: &mut Run<'_>) -> Result<ServiceStatus, ProviderError>;
    /// One of the five mutating operations (see [`super::Provider::mutate`]).
    fn mutate(
        &mut self,
        operation: Operation,
        name: &Name,
        run: &mut Run<'_>,
    ) -> Result<Progress, ProviderError>;
    /// No command may run past `deadline` (the run's wall-clock limit).
    fn set_deadline(&mut self, deadline: Instant);
    /// Every job and settle window over, each record completed: the records
    /// are handed out (a watch's run: its windows still open).
    fn hand_out(&mut self, run: &mut Run<'_>);
    /// Judges the open windows of a watch's runs that are due (see
    /// [`super::Provider::settle`]).
    fn settle(&mut self, changed: &[String], all: bool, run: &mut Run<'_>);
    /// Ends the run (see [`super::Provider::finish`]).
    fn finish(&mut self, run: &mut Run<'_>) -> Result<(), ProviderError>;
}

/// What the backend says of itself, passed up through every layer as it
/// says it.
pub(crate) trait Described: Send {
    /// The name a `status` answer carries ("systemd").
    fn name(&self) -> &'static str;
    /// `None` when the backend can work; otherwise why not.
    fn unavailable_reason(&self) -> Option<&str>;
    /// How status is read (`dbus` or `systemctl`), and why not over D-Bus
    /// when it is not.
    fn status_reader(&mut self) -> (&'static str, Option<&str>);
}

impl<Step: Send, S: Described> Described for Over<Step, S> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn unavailable_reason(&self) -> Option<&str> {
        self.inner.unavailable_reason()
    }

    fn status_reader(&mut self) -> (&'static str, Option<&str>) {
        self.inner.status_reader()
    }
}

/// What an operation carries down the stack: the run's records, which
/// [`Record`] owns and the layers below complete, and, below [`Deadline`],
/// the operation's time.
pub(crate) struct Run<'a> {
    pub(super) calls: &'a mut Calls,
    budget: Option<Budget>,
}

impl<'a> Run<'a> {
    fn new(calls: &'a mut Calls) -> Self {
        Self {
            calls,
            budget: None,
        }
    }

    /// What one exchange with systemd may take (set by [`Deadline`], above
    /// every layer that talks to systemd).
    fn budget(&self) -> Budget {
        self.budget
            .expect("the Deadline layer is above the unit layers")
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

#[cfg(test)]
mod jobs_tests;
#[cfg(test)]
mod settle_tests;
