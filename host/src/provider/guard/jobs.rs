//! Following the jobs a backend queues: at most `jobs` pending, each with
//! its timeout from submission (cancelled past it, or left to systemd once
//! an interruption's grace is over), a unit's status waiting for its job,
//! and the record of the call that queued a job completed when it ends.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::{job_key, starts, Guarded};
use crate::contract::{JobOutcome, Operation, Progress, ProviderError};
use crate::provider::backend::{Applied, Backend, Change, JobId, JobResult};
use crate::provider::{job_result, Call, Outcome};
use crate::service_name::CheckedName;
use crate::text::Untrusted;

/// The longest a wait for jobs goes without looking at the clock and at
/// the interruption again.
pub(super) const WAIT_SLICE: Duration = Duration::from_millis(100);

/// Which pending jobs a wait is for.
#[derive(Debug, Clone, Copy)]
pub(super) enum Awaited<'a> {
    /// The job of this unit, if it has one.
    Unit(&'a str),
    /// Any one of them: a slot for the next submission.
    Any,
    /// All of them.
    All,
}

/// The layer's state for one run: the jobs queued and not yet ended, and
/// how each unit's last one ended.
#[derive(Debug, Clone)]
pub(crate) struct Jobs {
    /// How many jobs of this run may be pending at once; 1 makes every
    /// call wait for its job.
    pub(crate) slots: usize,
    /// Jobs queued and not yet ended, oldest first.
    pub(super) pending: Vec<PendingJob>,
    /// Per unit, how its last queued job ended, until a `status` says it.
    pub(super) ended: HashMap<String, JobOutcome>,
}

impl Jobs {
    pub(crate) fn new(slots: usize) -> Self {
        Self {
            slots,
            pending: Vec::new(),
            ended: HashMap::new(),
        }
    }
}

/// A job queued for this run and not yet ended.
#[derive(Debug, Clone)]
pub(super) struct PendingJob {
    pub(super) id: JobId,
    pub(super) unit: String,
    operation: Operation,
    change: Change,
    /// The index in the records of the call that queued it.
    record: usize,
    submitted: Instant,
}

impl<B: Backend> Guarded<B> {
    /// When `job` is given up: its timeout from submission, cut at the run's
    /// deadline. Also: whether the job would be cancelled then.
    pub(super) fn job_until(&self, job: &PendingJob) -> (Instant, GiveUp) {
        let timeout = job.submitted + self.deadline.timeout;
        let mut until = (timeout, GiveUp::Timeout);
        if let Some(deadline) = self.deadline.at().filter(|d| *d < until.0) {
            until = (deadline, GiveUp::Deadline);
        }
        if let Some(since) = crate::interrupt::since() {
            let grace_end = Instant::now() + crate::interrupt::GRACE.saturating_sub(since);
            if grace_end < until.0 {
                until = (grace_end, GiveUp::Interrupted);
            }
        }
        until
    }

    /// Waits for the jobs `awaited` names, completing the record of every
    /// job that ends meanwhile; a job still pending when it is given up
    /// (see [`GiveUp`]) ends `timed-out`.
    pub(super) fn wait_for(&mut self, awaited: Awaited<'_>) {
        loop {
            let targets: Vec<usize> = (0..self.jobs.pending.len())
                .filter(|&i| match awaited {
                    Awaited::Unit(unit) => self.jobs.pending[i].unit == unit,
                    Awaited::Any | Awaited::All => true,
                })
                .collect();
            let Some((first, (until, why))) = targets
                .iter()
                .map(|&i| (i, self.job_until(&self.jobs.pending[i])))
                .min_by_key(|(_, (until, _))| *until)
            else {
                return;
            };
            let ids: Vec<JobId> = self.jobs.pending.iter().map(|j| j.id).collect();
            // In slices, so that a signal to the host cuts the wait short.
            let slice = until.min(Instant::now() + WAIT_SLICE);
            let ended = self.backend.wait_jobs(&ids, slice);
            let some_ended = !ended.is_empty();
            for (id, result) in ended {
                self.job_ended(id, result);
            }
            if some_ended {
                if matches!(awaited, Awaited::Any) {
                    return;
                }
                continue;
            }
            if Instant::now() >= until {
                let job = self.jobs.pending[first].clone();
                let what = self.backend.abandon(job.id, why != GiveUp::Interrupted);
                let error = why.error(&job, self.deadline.timeout, &what);
                self.job_ended(job.id, Err(error));
                if matches!(awaited, Awaited::Any) {
                    return;
                }
            }
        }
    }

    /// Completes the record of the call that queued `id` with how its job
    /// ended, and keeps that for the unit's next `status`; a start or
    /// restart that ended well opens its settle window, one that failed is
    /// explained in systemd's words and the unit's.
    pub(super) fn job_ended(&mut self, id: JobId, result: JobResult) {
        let Some(at) = self.jobs.pending.iter().position(|j| j.id == id) else {
            return;
        };
        let job = self.jobs.pending.remove(at);
        let (result, journal) = match result {
            Err(error) if starts(job.change) && !matches!(error, ProviderError::TimedOut(_)) => {
                let (error, journal) = self.explain(&job.unit, error, job.submitted);
                (Err(error), journal)
            }
            other => (other, Vec::new()),
        };
        if result.is_ok() && starts(job.change) {
            self.open_window(&job.unit, job.operation, job.record, job.submitted);
        }
        tracing::debug!(
            operation = job.operation.verb(),
            service = job.unit,
            ms = crate::text::millis(job.submitted.elapsed()),
            error = result.as_ref().err().map(ProviderError::message),
            "job ended"
        );
        if let Some(call) = self.record.get_mut(job.record) {
            call.outcome = result.as_ref().err().map_or(Outcome::Ok, Outcome::of);
            call.error = result.as_ref().err().map(|e| Untrusted::new(e.message()));
            call.journal = journal;
            call.duration = job.submitted.elapsed();
        }
        self.jobs.ended.insert(
            job.unit,
            JobOutcome {
                operation: job.operation,
                error: result.err(),
            },
        );
    }

    /// Makes `change` on `unit`, waiting first for a slot (and for a job of
    /// the same unit); a queued job is followed, or, with `jobs = 1`,
    /// awaited here.
    pub(super) fn submit(
        &mut self,
        operation: Operation,
        change: Change,
        unit: &CheckedName,
        name: &str,
    ) -> Result<Progress, ProviderError> {
        let key = job_key(unit);
        if change.is_job() {
            self.wait_for(Awaited::Unit(&key));
            // A new job of the unit ends the window of its last start now.
            self.close_window(&key, false);
            while self.jobs.pending.len() >= self.jobs.slots.max(1) {
                self.wait_for(Awaited::Any);
            }
        }
        let started = Instant::now();
        let (result, journal) = match self.backend.change(change, unit, &self.deadline.budget()) {
            Err(error) if starts(change) && !matches!(error, ProviderError::TimedOut(_)) => {
                let (error, journal) = self.explain(&key, error, started);
                (Err(error), journal)
            }
            other => (other, Vec::new()),
        };
        self.record
            .add(
                Call::Guest(operation),
                Some(name),
                started,
                result.as_ref().err(),
            )
            .journal = journal;
        self.reload.enablement_changed |= result.is_ok() && change.is_enablement();
        let id = match result? {
            Applied::Done => {
                if starts(change) {
                    self.open_window(&key, operation, self.record.last(), started);
                }
                return Ok(Progress::Finished);
            }
            Applied::Queued(id) => id,
        };
        self.jobs.pending.push(PendingJob {
            id,
            unit: key.clone(),
            operation,
            change,
            record: self.record.last(),
            submitted: started,
        });
        if self.jobs.slots > 1 {
            return Ok(Progress::Queued);
        }
        self.wait_for(Awaited::Unit(&key));
        match self.jobs.ended.remove(&key).and_then(|o| o.error) {
            Some(error) => Err(error),
            None => Ok(Progress::Finished),
        }
    }
}

/// Why a pending job was given up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum GiveUp {
    /// The per-command timeout, counted from its submission: cancelled.
    Timeout,
    /// The run's wall-clock limit: cancelled.
    Deadline,
    /// The run was interrupted and its grace is over: left to systemd.
    Interrupted,
}

impl GiveUp {
    pub(super) fn error(self, job: &PendingJob, timeout: Duration, what: &str) -> ProviderError {
        let (method, unit) = (job_result::method(job.change), &job.unit);
        let why = match self {
            GiveUp::Timeout => format!(
                "its job did not end within {} (the provider timeout)",
                humantime::format_duration(timeout)
            ),
            GiveUp::Deadline => "its job had not ended at the run's wall-clock limit".to_owned(),
            GiveUp::Interrupted => format!(
                "its job had not ended {}s after the run was interrupted",
                crate::interrupt::GRACE.as_secs()
            ),
        };
        ProviderError::TimedOut(format!("{method} {unit}: {why}; {what}"))
    }
}
