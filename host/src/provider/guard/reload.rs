//! Step 5, the run's one daemon-reload: before its first change, and before
//! its first status unless the backend can tell whether the unit's files
//! changed since systemd loaded them (over D-Bus, `NeedDaemonReload`); then
//! only a status of a unit whose files changed makes it, and that unit is
//! read again after it. A watch's run for an event skips it before a change
//! of a unit read unchanged ([`ReloadBeforeChange`]). The run ends with one
//! more after enablement changes.

use std::collections::HashSet;
use std::time::Instant;

use super::{job_key, Guarded};
use crate::contract::{ProviderError, ServiceStatus};
use crate::provider::backend::Backend;
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

/// The layer's state for one run.
#[derive(Debug, Clone)]
pub(crate) struct Reload {
    pub(crate) rule: ReloadBeforeChange,
    state: State,
    /// An enable or disable succeeded (without a reload): the run ends
    /// with one daemon-reload, so systemd sees the new links.
    pub(crate) enablement_changed: bool,
    /// Units read in this run, before its reload, with their files as
    /// systemd has them loaded (see [`ReloadBeforeChange`]).
    read_unchanged: HashSet<String>,
}

impl Reload {
    pub(crate) fn new(rule: ReloadBeforeChange) -> Self {
        Self {
            rule,
            state: State::Pending,
            enablement_changed: false,
            read_unchanged: HashSet::new(),
        }
    }
}

impl<B: Backend> Guarded<B> {
    /// Whether a status must wait for the run's reload before it reads:
    /// always when the backend cannot tell whether the unit's files changed
    /// (the design's rule), and after a failed reload, which every later
    /// operation reports.
    pub(super) fn reload_before_status(&mut self) -> bool {
        let budget = self.deadline.budget();
        !self.backend.tells_files_changed(&budget) || matches!(self.reload.state, State::Failed(_))
    }

    /// The unit's state; when its files changed since systemd loaded them
    /// (or the backend could not tell) and the run has not reloaded yet,
    /// the run's reload is made and the unit read again, so a guest never
    /// sees systemd's stale copy of a unit.
    pub(super) fn observe(
        &mut self,
        unit: &CheckedName,
        started: &mut Instant,
    ) -> Result<ServiceStatus, ProviderError> {
        let reload_to_come = self.reload.state == State::Pending && !self.noop.on;
        let budget = self.deadline.budget();
        let mut observed = self.backend.status(unit, &budget, reload_to_come)?;
        if reload_to_come && observed.files_changed != Some(false) {
            self.reload_once()?;
            *started = Instant::now();
            observed = self.backend.status(unit, &self.deadline.budget(), false)?;
        } else if reload_to_come {
            self.reload.read_unchanged.insert(job_key(unit));
        }
        let mut status = observed.status;
        status.job = self.jobs.ended.remove(&job_key(unit));
        Ok(status)
    }

    /// The run's reload before a change of `unit`, unless the rule lets a
    /// unit read unchanged go without it.
    pub(super) fn reload_before_change(&mut self, unit: &CheckedName) -> Result<(), ProviderError> {
        let skip = self.reload.rule == ReloadBeforeChange::UnlessReadUnchanged
            && self.reload.state == State::Pending
            && self.reload.read_unchanged.contains(&job_key(unit));
        if skip {
            tracing::debug!(
                unit = unit.as_str(),
                "no reload before the change: files unchanged"
            );
            return Ok(());
        }
        self.reload_once()
    }

    pub(super) fn reload_once(&mut self) -> Result<(), ProviderError> {
        if self.noop.on {
            return Ok(());
        }
        match &self.reload.state {
            State::Done => return Ok(()),
            State::Failed(message) => return Err(ProviderError::CommandFailed(message.clone())),
            State::Pending => {}
        }
        let result = self.daemon_reload();
        self.reload.state = match &result {
            Ok(()) => State::Done,
            Err(e) => State::Failed(e.message().to_owned()),
        };
        result
    }

    /// A daemon-reload, recorded as a call of the run.
    fn daemon_reload(&mut self) -> Result<(), ProviderError> {
        let started = Instant::now();
        let result = self.backend.daemon_reload(&self.deadline.budget());
        self.record
            .add(Call::DaemonReload, None, started, result.as_ref().err());
        result
    }

    /// The run's last reload: one when enable or disable ran, so that
    /// systemd's view of the links (`list-dependencies`, `show`) catches
    /// up. None in a noop run, none when nothing changed.
    pub(super) fn reload_after_enablement(&mut self) -> Result<(), ProviderError> {
        if !self.reload.enablement_changed || self.noop.on {
            return Ok(());
        }
        self.reload.enablement_changed = false;
        self.daemon_reload()
    }
}
