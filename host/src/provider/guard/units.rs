//! The bottom of the stack: the backend, which only talks to systemd, with
//! the jobs it queues followed (`jobs.rs`) and the settle windows of its
//! starts (`settle.rs`). One type, not two layers: a job that ends well
//! opens its start's window, and a window's verdict is how the job ended.

use super::jobs::Awaited;
use super::{job_key, Described, Jobs, Run, Settle};
use crate::contract::{ProviderError, ServiceStatus};
use crate::provider::backend::{Backend, Budget, Observed};
use crate::service_name::CheckedName;

/// The backend with its jobs and settle windows, under [`super::Reload`].
#[derive(Debug)]
pub struct Units<B> {
    pub(super) backend: B,
    pub(super) jobs: Jobs,
    pub(super) settle: Settle,
}

impl<B: Backend> Units<B> {
    pub(crate) fn new(backend: B, jobs: Jobs, settle: Settle) -> Self {
        Self {
            backend,
            jobs,
            settle,
        }
    }

    /// Reads `unit` once its pending job has ended and its settle window
    /// has been judged (not in a watch's run: there the window is judged
    /// at its end or when the unit moves, and the status reads the unit as
    /// it is); the status's clock starts after that wait.
    /// `files_changed_too`: see [`Backend::status`].
    pub(super) fn read(
        &mut self,
        unit: &CheckedName,
        files_changed_too: bool,
        run: &mut Run<'_>,
    ) -> Result<Observed, ProviderError> {
        let key = job_key(unit);
        self.wait_for(Awaited::Unit(&key), run);
        if self.status_waits_for_window() {
            self.close_window(&key, true, run);
        }
        run.calls.restart_clock();
        self.backend.status(unit, &run.budget(), files_changed_too)
    }

    /// The status a guest is given for `unit`, read last: it carries how
    /// the unit's last job (or its settle window) ended, once.
    pub(super) fn answer(
        &mut self,
        unit: &CheckedName,
        mut status: ServiceStatus,
    ) -> ServiceStatus {
        status.job = self.jobs.ended.remove(&job_key(unit));
        status
    }

    /// See [`Backend::tells_files_changed`].
    pub(super) fn tells_files_changed(&mut self, time: &Budget) -> bool {
        self.backend.tells_files_changed(time)
    }

    pub(super) fn daemon_reload(&mut self, time: &Budget) -> Result<(), ProviderError> {
        self.backend.daemon_reload(time)
    }

    /// Every pending job awaited (within its time) and every open window
    /// judged (a watch's run leaves its windows open), so that each record
    /// says how its job ended.
    pub(super) fn finish(&mut self, run: &mut Run<'_>) {
        self.wait_for(Awaited::All, run);
        self.close_windows(run);
    }

    /// [`Self::finish`], and how each job ended forgotten: the records
    /// that said it are handed out.
    pub(super) fn hand_out(&mut self, run: &mut Run<'_>) {
        self.finish(run);
        self.jobs.ended.clear();
    }
}

impl<B: Backend> Described for Units<B> {
    fn name(&self) -> &'static str {
        self.backend.name()
    }

    fn unavailable_reason(&self) -> Option<&str> {
        self.backend.unavailable_reason()
    }

    fn status_reader(&mut self) -> (&'static str, Option<&str>) {
        self.backend.status_reader()
    }
}
