//! The guard's generic layers: each one job, the same for any operation on
//! any backend, each wrapping the service below it ([`Over`]). The
//! unit-specific ones (the run's reload, jobs, settle windows) are in
//! `reload.rs`, `units.rs`, `jobs.rs` and `settle.rs`.

use std::time::{Duration, Instant};

use super::stack::Over;
use super::{Run, Service};
use crate::contract::{Operation, Progress, ProviderError, ServiceStatus};
use crate::left_alone::{Kind, LeftAlone};
use crate::provider::backend::Budget;
use crate::provider::{Call, CallRecord, Outcome, Provider, UnitAllowlist, UnitState};
use crate::service_name::{quote, CheckedName};
use crate::text::Untrusted;

/// The outermost layer: one [`CallRecord`] per operation, whatever any
/// layer below did with it (so a refusal is recorded like a change), and
/// one per daemon-reload. It is what the runtime calls a provider.
#[derive(Debug, Clone, Default)]
pub struct Record {
    pub(super) calls: Calls,
}

/// The run's records: those made, and the guest's call under way.
///
/// The call under way is recorded when it returns, after any daemon-reload
/// it made (which the [`super::Reload`] layer records first, as its own
/// call). Meanwhile the layers below complete it ([`Calls::current`]): its
/// clock, a left-alone refusal, a failed start's journal. A job or window
/// refers to its call by its place ([`Calls::next`] while it is under
/// way): a job queued now, or one that ends before its call returns (with
/// `jobs = 1`), completes the right record.
#[derive(Debug, Clone, Default)]
pub(crate) struct Calls {
    made: Vec<CallRecord>,
    current: Option<Current>,
    /// How many records were handed out before `made`'s first: a place
    /// counts from the run's first record, so that a window judged after
    /// its record was handed out still names it ([`super::settle`]).
    taken: usize,
}

/// The guest's call under way.
#[derive(Debug, Clone)]
struct Current {
    record: CallRecord,
    /// Its clock: from the call, or from where a layer restarted it.
    started: Instant,
    /// The name as the guest sent it, for the log.
    name: String,
    /// Its time is taken ([`Calls::stop_clock`]): what follows is not.
    stopped: bool,
}

impl Calls {
    /// A guest's call begins: its clock starts now.
    fn begin(&mut self, operation: Operation, name: &str) {
        self.current = Some(Current {
            record: new_record(Call::Guest(operation), Some(name), None),
            started: Instant::now(),
            name: name.to_owned(),
            stopped: false,
        });
    }

    /// The call under way is recorded, ending with `error` (or well); its
    /// record is returned, for a status to add what it found.
    fn end(&mut self, error: Option<&ProviderError>) -> &mut CallRecord {
        let Current {
            mut record,
            started,
            name,
            stopped,
        } = self.current.take().expect("a call under way");
        trace(record.operation, Some(&name), started, error);
        record.outcome = error.map_or(Outcome::Ok, Outcome::of);
        record.error = error.map(|e| Untrusted::new(e.message()));
        if !stopped {
            record.duration = started.elapsed();
        }
        self.made.push(record);
        self.made.last_mut().expect("just recorded")
    }

    /// The call under way's clock starts again now: what came before (the
    /// run's daemon-reload, a wait for a job or a window) is not its time.
    pub(super) fn restart_clock(&mut self) {
        if let Some(current) = &mut self.current {
            current.started = Instant::now();
        }
    }

    /// The call under way's time is taken now: the change is made, and
    /// what follows (a settle window opened) is not its time; a job that
    /// ends before the call returns sets it again, to the job's end.
    pub(super) fn stop_clock(&mut self) {
        if let Some(current) = &mut self.current {
            current.record.duration = current.started.elapsed();
            current.stopped = true;
        }
    }

    /// The record of the guest's call under way.
    pub(super) fn current(&mut self) -> Option<&mut CallRecord> {
        self.current.as_mut().map(|c| &mut c.record)
    }

    /// The place the call under way takes when it is recorded (no other
    /// record is made between a change reaching the backend and its
    /// return).
    pub(super) fn next(&self) -> usize {
        self.taken + self.made.len()
    }

    /// The record at `place`, the call under way's included; `None` once
    /// it was handed out.
    pub(super) fn get_mut(&mut self, place: usize) -> Option<&mut CallRecord> {
        if place == self.next() {
            return self.current();
        }
        let at = place.checked_sub(self.taken)?;
        self.made.get_mut(at)
    }

    /// Records a call that is not the guest's (the run's daemon-reload).
    pub(super) fn add(&mut self, operation: Call, started: Instant, error: Option<&ProviderError>) {
        trace(operation, None, started, error);
        let mut record = new_record(operation, None, error);
        record.duration = started.elapsed();
        self.made.push(record);
    }

    pub(super) fn all(&self) -> &[CallRecord] {
        &self.made
    }

    /// Every record, leaving none.
    fn take(&mut self) -> Vec<CallRecord> {
        self.taken += self.made.len();
        std::mem::take(&mut self.made)
    }
}

fn new_record(operation: Call, service: Option<&str>, error: Option<&ProviderError>) -> CallRecord {
    CallRecord {
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
        duration: Duration::ZERO,
    }
}

fn trace(operation: Call, service: Option<&str>, started: Instant, error: Option<&ProviderError>) {
    tracing::debug!(
        operation = operation.verb(),
        service = service.unwrap_or(""),
        ms = crate::text::millis(started.elapsed()),
        error = error.map(ProviderError::message),
        "provider call"
    );
}

impl<S: Service<str>> Provider for Over<Record, S> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn unavailable_reason(&self) -> Option<&str> {
        self.inner.unavailable_reason()
    }

    fn status(&mut self, name: &str) -> Result<ServiceStatus, ProviderError> {
        self.step.calls.begin(Operation::Status, name);
        let result = self.inner.status(name, &mut Run::new(&mut self.step.calls));
        let call = self.step.calls.end(result.as_ref().err());
        if let Ok(status) = &result {
            call.state = Some(UnitState::of(status));
        }
        result
    }

    fn mutate(&mut self, operation: Operation, name: &str) -> Result<Progress, ProviderError> {
        self.step.calls.begin(operation, name);
        let result = self
            .inner
            .mutate(operation, name, &mut Run::new(&mut self.step.calls));
        self.step.calls.end(result.as_ref().err());
        result
    }

    fn set_deadline(&mut self, deadline: Instant) {
        self.inner.set_deadline(deadline);
    }

    /// Every job still pending is awaited first (within its time), so
    /// that each record says how its job ended.
    fn take_calls(&mut self) -> Vec<CallRecord> {
        self.inner.hand_out(&mut Run::new(&mut self.step.calls));
        self.step.calls.take()
    }

    fn status_reader(&mut self) -> (&'static str, Option<&str>) {
        self.inner.status_reader()
    }

    /// The run's last step, once every job and window is over: the reload
    /// after enablement changes ([`super::Reload`]).
    fn finish(&mut self) -> Result<(), ProviderError> {
        self.inner.finish(&mut Run::new(&mut self.step.calls))
    }

    fn settle(&mut self, changed: &[String], all: bool) {
        self.inner
            .settle(changed, all, &mut Run::new(&mut self.step.calls));
    }
}

/// The name check (a unit name systemd would take, never an option), the
/// allowlist (`allow_units`), availability: the layer that turns the
/// guest's text into a [`CheckedName`], which every layer below takes.
#[derive(Debug, Clone)]
pub struct Names {
    allow: Option<UnitAllowlist>,
}

impl Names {
    pub(crate) fn new(allow: Option<UnitAllowlist>) -> Self {
        Self { allow }
    }

    /// The name checked, or why the operation is refused (`unavailable`:
    /// why the backend cannot work, if it cannot).
    pub(crate) fn admit(
        &self,
        name: &str,
        unavailable: Option<&str>,
    ) -> Result<CheckedName, ProviderError> {
        let unit = CheckedName::check(name).map_err(ProviderError::InvalidName)?;
        if let Some(allow) = &self.allow {
            if !allow.allows(unit.as_str()) {
                return Err(ProviderError::Denied(format!(
                    "unit {unit} is not allowed on this machine (--allow-unit {})",
                    allow.patterns().join(", ")
                )));
            }
        }
        if let Some(reason) = unavailable {
            return Err(ProviderError::Unavailable(reason.to_owned()));
        }
        Ok(unit)
    }
}

impl<S: Service<CheckedName>> Service<str> for Over<Names, S> {
    fn status(&mut self, name: &str, run: &mut Run<'_>) -> Result<ServiceStatus, ProviderError> {
        let unit = self.step.admit(name, self.inner.unavailable_reason())?;
        self.inner.status(&unit, run)
    }

    fn mutate(
        &mut self,
        operation: Operation,
        name: &str,
        run: &mut Run<'_>,
    ) -> Result<Progress, ProviderError> {
        let unit = self.step.admit(name, self.inner.unavailable_reason())?;
        self.inner.mutate(operation, &unit, run)
    }

    fn set_deadline(&mut self, deadline: Instant) {
        self.inner.set_deadline(deadline);
    }

    fn hand_out(&mut self, run: &mut Run<'_>) {
        self.inner.hand_out(run);
    }

    fn settle(&mut self, changed: &[String], all: bool, run: &mut Run<'_>) {
        self.inner.settle(changed, all, run);
    }

    fn finish(&mut self, run: &mut Run<'_>) -> Result<(), ProviderError> {
        self.inner.finish(run)
    }
}

/// A change of a unit the operator paused, or a start of one held back
/// after a crash loop, is refused ([`crate::left_alone`]), and its record
/// says so; before the run's reload, so that such a unit makes none.
#[derive(Debug, Clone)]
pub struct LeftAloneUnits {
    units: LeftAlone,
}

impl LeftAloneUnits {
    pub(crate) fn new(units: LeftAlone) -> Self {
        Self { units }
    }

    /// Why `operation` of `unit` is refused for now, if it is, by the name
    /// systemd knows the unit by; the kind goes on the call's record.
    pub(crate) fn refusal(
        &self,
        unit: &CheckedName,
        operation: Operation,
    ) -> Option<(Kind, ProviderError)> {
        let systemd_name = crate::provider::unit_name::mangle(unit.as_str())?;
        let reason = self.units.forbidding(&systemd_name, operation)?;
        let error = ProviderError::Denied(format!("{operation} {unit} refused: {}", reason.why));
        Some((reason.kind, error))
    }
}

impl<S: Service<CheckedName>> Service<CheckedName> for Over<LeftAloneUnits, S> {
    fn status(
        &mut self,
        unit: &CheckedName,
        run: &mut Run<'_>,
    ) -> Result<ServiceStatus, ProviderError> {
        self.inner.status(unit, run)
    }

    fn mutate(
        &mut self,
        operation: Operation,
        unit: &CheckedName,
        run: &mut Run<'_>,
    ) -> Result<Progress, ProviderError> {
        if let Some((kind, refused)) = self.step.refusal(unit, operation) {
            if let Some(call) = run.calls.current() {
                call.left_alone = Some(kind);
            }
            return Err(refused);
        }
        self.inner.mutate(operation, unit, run)
    }

    fn set_deadline(&mut self, deadline: Instant) {
        self.inner.set_deadline(deadline);
    }

    fn hand_out(&mut self, run: &mut Run<'_>) {
        self.inner.hand_out(run);
    }

    fn settle(&mut self, changed: &[String], all: bool, run: &mut Run<'_>) {
        self.inner.settle(changed, all, run);
    }

    fn finish(&mut self, run: &mut Run<'_>) -> Result<(), ProviderError> {
        self.inner.finish(run)
    }
}

/// A dry run refuses every change. Above the run's reload: in a dry run
/// that layer makes none either, so a change refused here would not have
/// made one below ([`super::Reload`]).
#[derive(Debug, Clone, Copy)]
pub struct Noop {
    on: bool,
}

impl Noop {
    pub(crate) fn new(on: bool) -> Self {
        Self { on }
    }

    /// Why `operation` of `unit` is refused, in a dry run.
    pub(crate) fn refusal(self, operation: Operation, unit: &CheckedName) -> Option<ProviderError> {
        self.on.then(|| {
            ProviderError::Denied(format!("{operation} {unit} refused: this is a noop run"))
        })
    }
}

impl<S: Service<CheckedName>> Service<CheckedName> for Over<Noop, S> {
    fn status(
        &mut self,
        unit: &CheckedName,
        run: &mut Run<'_>,
    ) -> Result<ServiceStatus, ProviderError> {
        self.inner.status(unit, run)
    }

    fn mutate(
        &mut self,
        operation: Operation,
        unit: &CheckedName,
        run: &mut Run<'_>,
    ) -> Result<Progress, ProviderError> {
        if let Some(refused) = self.step.refusal(operation, unit) {
            return Err(refused);
        }
        self.inner.mutate(operation, unit, run)
    }

    fn set_deadline(&mut self, deadline: Instant) {
        self.inner.set_deadline(deadline);
    }

    fn hand_out(&mut self, run: &mut Run<'_>) {
        self.inner.hand_out(run);
    }

    fn settle(&mut self, changed: &[String], all: bool, run: &mut Run<'_>) {
        self.inner.settle(changed, all, run);
    }

    fn finish(&mut self, run: &mut Run<'_>) -> Result<(), ProviderError> {
        self.inner.finish(run)
    }
}

/// The per-command timeout, cut at the run's wall clock: it holds both,
/// and hands every operation below it its time ([`Budget`], in [`Run`]),
/// jobs and settle windows included.
#[derive(Debug, Clone)]
pub struct Deadline {
    /// The longest a single exchange with systemd may take, and a job from
    /// its submission to its end.
    timeout: Duration,
    /// No exchange may run past this (the run's wall-clock limit).
    at: Option<Instant>,
}

impl Deadline {
    pub(crate) fn new(timeout: Duration) -> Self {
        Self { timeout, at: None }
    }

    /// What one exchange with systemd may take.
    pub(crate) fn budget(&self) -> Budget {
        Budget {
            timeout: self.timeout,
            deadline: self.at,
        }
    }
}

impl<S: Service<CheckedName>> Service<CheckedName> for Over<Deadline, S> {
    fn status(
        &mut self,
        unit: &CheckedName,
        run: &mut Run<'_>,
    ) -> Result<ServiceStatus, ProviderError> {
        run.budget = Some(self.step.budget());
        self.inner.status(unit, run)
    }

    fn mutate(
        &mut self,
        operation: Operation,
        unit: &CheckedName,
        run: &mut Run<'_>,
    ) -> Result<Progress, ProviderError> {
        run.budget = Some(self.step.budget());
        self.inner.mutate(operation, unit, run)
    }

    /// Kept here: the layers below get it with each operation's budget.
    fn set_deadline(&mut self, deadline: Instant) {
        self.step.at = Some(deadline);
    }

    fn hand_out(&mut self, run: &mut Run<'_>) {
        run.budget = Some(self.step.budget());
        self.inner.hand_out(run);
    }

    fn settle(&mut self, changed: &[String], all: bool, run: &mut Run<'_>) {
        run.budget = Some(self.step.budget());
        self.inner.settle(changed, all, run);
    }

    fn finish(&mut self, run: &mut Run<'_>) -> Result<(), ProviderError> {
        run.budget = Some(self.step.budget());
        self.inner.finish(run)
    }
}
