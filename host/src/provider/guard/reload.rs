//! The run's one daemon-reload, layer 6: before its first change, and before
//! its first status unless the backend can tell whether the unit's files
//! changed since systemd loaded them (over D-Bus, `NeedDaemonReload`); then
//! only a status of a unit whose files changed makes it, and that unit is
//! read again after it. A watch's run for an event skips it before a change
//! of a unit read unchanged ([`ReloadBeforeChange`]). The run ends with one
//! more after enablement changes.

use std::collections::HashSet;
use std::time::Instant;

use super::stack::Over;
use super::{job_key, Run, Service, Units};
use crate::contract::{Operation, Progress, ProviderError, ServiceStatus};
use crate::provider::backend::{Backend, Change};
use crate::provider::Call;
use crate::service_name::CheckedName;

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

/// Whether the run's first daemon-reload has happened.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Pending,
    Done,
    /// It failed; every later operation fails with this message, because the
    /// unit files systemd sees may be out of date.
    Failed(String),
}

/// The layer's state for one run, over the backend with its jobs and
/// settle windows ([`Units`]), which it asks for the reload and the reads.
#[derive(Debug, Clone)]
pub struct Reload {
    rule: ReloadBeforeChange,
    /// A dry run: no reload at all, not even before a status (nothing is
    /// changed, systemd's view of the files included). So in a dry run
    /// this layer does nothing a change could notice, and the [`super::Noop`]
    /// layer may refuse changes above it.
    noop: bool,
    state: State,
    /// An enable or disable succeeded (without a reload): the run ends
    /// with one daemon-reload, so systemd sees the new links.
    enablement_changed: bool,
    /// Units read in this run, before its reload, with their files as
    /// systemd has them loaded (see [`ReloadBeforeChange`]).
    read_unchanged: HashSet<String>,
}

impl Reload {
    pub(crate) fn new(rule: ReloadBeforeChange, noop: bool) -> Self {
        Self {
            rule,
            noop,
            state: State::Pending,
            enablement_changed: false,
            read_unchanged: HashSet::new(),
        }
    }
}

impl<B: Backend> Service<CheckedName> for Over<Reload, Units<B>> {
    /// The unit's state; when its files changed since systemd loaded them
    /// (or the backend could not tell) and the run has not reloaded yet,
    /// the run's reload is made and the unit read again, so a guest never
    /// sees systemd's stale copy of a unit. The status's clock starts
    /// after the reload, which is recorded as its own call.
    fn status(
        &mut self,
        unit: &CheckedName,
        run: &mut Run<'_>,
    ) -> Result<ServiceStatus, ProviderError> {
        if self.reload_before_status(run) {
            let reloaded = self.reload_once(run);
            run.calls.restart_clock();
            reloaded?;
        }
        let reload_to_come = self.step.state == State::Pending && !self.step.noop;
        let observed = self.inner.read(unit, reload_to_come, run)?;
        if reload_to_come && observed.files_changed != Some(false) {
            self.reload_once(run)?;
            run.calls.restart_clock();
            let again = self.inner.read(unit, false, run)?;
            return Ok(self.inner.answer(unit, again.status));
        }
        if reload_to_come {
            self.step.read_unchanged.insert(job_key(unit));
        }
        Ok(self.inner.answer(unit, observed.status))
    }

    /// The run's reload first (unless the rule lets this change go
    /// without it); a failed one refuses the change.
    fn mutate(
        &mut self,
        operation: Operation,
        unit: &CheckedName,
        run: &mut Run<'_>,
    ) -> Result<Progress, ProviderError> {
        self.reload_before_change(unit, run)?;
        let result = self.inner.change(operation, unit, run);
        let enablement = Change::of(operation).is_some_and(Change::is_enablement);
        self.step.enablement_changed |= result.is_ok() && enablement;
        result
    }

    /// Nothing to keep: [`super::Deadline`], above, hands each operation
    /// its time.
    fn set_deadline(&mut self, _: Instant) {}

    fn hand_out(&mut self, run: &mut Run<'_>) {
        self.inner.hand_out(run);
    }

    fn settle(&mut self, changed: &[String], all: bool, run: &mut Run<'_>) {
        self.inner.settle_due(changed, all, run);
    }

    /// Once every job and window is over: the reload after enablement
    /// changes.
    fn finish(&mut self, run: &mut Run<'_>) -> Result<(), ProviderError> {
        self.inner.finish(run);
        self.reload_after_enablement(run)
    }
}

impl<B: Backend> Over<Reload, Units<B>> {
    /// Whether a status must wait for the run's reload before it reads:
    /// always when the backend cannot tell whether the unit's files changed
    /// (the design's rule), and after a failed reload, which every later
    /// operation reports.
    fn reload_before_status(&mut self, run: &Run<'_>) -> bool {
        !self.inner.tells_files_changed(&run.budget())
            || matches!(self.step.state, State::Failed(_))
    }

    /// The run's reload before a change of `unit`, unless the rule lets a
    /// unit read unchanged go without it.
    fn reload_before_change(
        &mut self,
        unit: &CheckedName,
        run: &mut Run<'_>,
    ) -> Result<(), ProviderError> {
        let skip = self.step.rule == ReloadBeforeChange::UnlessReadUnchanged
            && self.step.state == State::Pending
            && self.step.read_unchanged.contains(&job_key(unit));
        if skip {
            tracing::debug!(
                unit = unit.as_str(),
                "no reload before the change: files unchanged"
            );
            return Ok(());
        }
        self.reload_once(run)
    }

    fn reload_once(&mut self, run: &mut Run<'_>) -> Result<(), ProviderError> {
        if self.step.noop {
            return Ok(());
        }
        match &self.step.state {
            State::Done => return Ok(()),
            State::Failed(message) => return Err(ProviderError::CommandFailed(message.clone())),
            State::Pending => {}
        }
        let result = self.daemon_reload(run);
        self.step.state = match &result {
            Ok(()) => State::Done,
            Err(e) => State::Failed(e.message().to_owned()),
        };
        result
    }

    /// A daemon-reload, recorded as a call of the run.
    fn daemon_reload(&mut self, run: &mut Run<'_>) -> Result<(), ProviderError> {
        let started = Instant::now();
        let result = self.inner.daemon_reload(&run.budget());
        run.calls
            .add(Call::DaemonReload, started, result.as_ref().err());
        result
    }

    /// The run's last reload: one when enable or disable ran, so that
    /// systemd's view of the links (`list-dependencies`, `show`) catches
    /// up. None in a noop run, none when nothing changed.
    fn reload_after_enablement(&mut self, run: &mut Run<'_>) -> Result<(), ProviderError> {
        if !self.step.enablement_changed || self.step.noop {
            return Ok(());
        }
        self.step.enablement_changed = false;
        self.daemon_reload(run)
    }
}
