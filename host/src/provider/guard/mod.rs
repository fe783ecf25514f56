//! The guard, the same over every backend, as layers: each a small type
//! with one job, built in order by [`crate::provider::guarded`]. Each
//! operation a guest asks for passes, in order:
//!
//! 1. [`Names`]: the name check (a unit name systemd would take, never an
//!    option);
//! 2. [`Names`]: the allowlist (`allow_units`);
//! 3. [`Names`]: availability (systemctl found);
//! 4. [`LeftAloneUnits`]: a change of a unit the operator paused, or a
//!    start of one held back after a crash loop, is refused before any
//!    reload, and its record says so ([`crate::left_alone`]);
//! 5. [`Reload`]: the run's one daemon-reload, before its first change or,
//!    when the backend cannot tell that a unit's files are unchanged, its
//!    first status (`reload.rs` says when exactly);
//! 6. [`Noop`]: a change is refused in a dry run;
//! 7. [`Deadline`]: the per-command timeout, cut at the run's wall clock;
//! 8. the backend, which talks to systemd, through [`Jobs`] (the jobs it
//!    queues, followed) and [`Settle`] (the settle window of a start);
//! 9. [`Record`]: one [`CallRecord`] per operation, whatever happened.
//!
//! Steps 1 to 4, 6, 7 and 9 are generic (`layers.rs`); 5 and 8's
//! following are about units (`reload.rs`, `jobs.rs`, `settle.rs`). The
//! run ends with [`Reload`]'s one daemon-reload after enablement changes.
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

use std::time::{Duration, Instant};

mod jobs;
mod layers;
mod reload;
mod settle;

use self::jobs::Awaited;
pub(crate) use self::jobs::Jobs;
pub(crate) use self::layers::{Deadline, LeftAloneUnits, Names, Noop, Record};
pub(crate) use self::reload::Reload;
pub use self::reload::ReloadBeforeChange;
pub(crate) use self::settle::Settle;
use super::backend::{Backend, Change};
use super::{Call, CallRecord, Provider, UnitAllowlist, UnitState};
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
}

/// A backend behind the guard's layers: what the runtime calls a provider.
/// Its fields are the layers, in the order an operation meets them.
pub struct Guarded<B> {
    pub(super) names: Names,
    pub(super) left_alone: LeftAloneUnits,
    pub(super) reload: Reload,
    pub(super) noop: Noop,
    pub(super) deadline: Deadline,
    pub(super) jobs: Jobs,
    pub(super) settle: Settle,
    pub(super) backend: B,
    pub(super) record: Record,
}

impl<B: Backend> Guarded<B> {
    /// Every operation recorded and not yet taken, in order.
    pub fn calls(&self) -> &[CallRecord] {
        self.record.all()
    }

    /// Steps 1 to 3.
    fn admit(&self, name: &str) -> Result<CheckedName, ProviderError> {
        self.names.admit(name, &self.backend)
    }

    /// Steps 4 to 6 for a change of an admitted unit: `None` when it may go
    /// to the backend; else the refusal, and whether it left the unit alone.
    fn refusal(
        &mut self,
        operation: Operation,
        unit: &CheckedName,
    ) -> Option<(ProviderError, Option<crate::left_alone::Kind>)> {
        // Refused before the reload: a unit left alone makes none.
        if let Some((kind, refused)) = self.left_alone.refusal(unit, operation) {
            return Some((refused, Some(kind)));
        }
        if let Err(e) = self.reload_before_change(unit) {
            return Some((e, None));
        }
        self.noop.refusal(operation, unit).map(|e| (e, None))
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
        let call = self.record.add(
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
        let (refused, left_alone) = match self.admit(name) {
            Ok(unit) => match self.refusal(operation, &unit) {
                Some(refusal) => refusal,
                None => return self.submit(operation, change, &unit, name),
            },
            Err(e) => (e, None),
        };
        self.record
            .add(Call::Guest(operation), Some(name), started, Some(&refused))
            .left_alone = left_alone;
        Err(refused)
    }

    fn set_deadline(&mut self, deadline: Instant) {
        self.deadline.set(deadline);
    }

    /// Every job still pending is awaited first (within its time), so
    /// that each record says how its job ended.
    fn take_calls(&mut self) -> Vec<CallRecord> {
        self.wait_for(Awaited::All);
        self.close_windows();
        self.jobs.ended.clear();
        self.record.take()
    }

    fn status_reader(&mut self) -> (&'static str, Option<&str>) {
        self.backend.status_reader()
    }

    /// The run's last step, once every job and window is over: the reload
    /// after enablement changes ([`Reload`]).
    fn finish(&mut self) -> Result<(), ProviderError> {
        self.wait_for(Awaited::All);
        self.close_windows();
        self.reload_after_enablement()
    }
}

#[cfg(test)]
mod jobs_tests;
#[cfg(test)]
mod settle_tests;
