//! Following the jobs a backend queues: at most `jobs` pending, each with
//! its timeout from submission (cancelled past it, or left to systemd once
//! an interruption's grace is over), a unit's status waiting for its job,
//! and the record of the call that queued a job completed when it ends.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::{job_key, starts, Run, Units};
use crate::contract::{JobOutcome, Operation, Progress, ProviderError};
use crate::provider::backend::{Applied, Backend, Budget, Change, JobId, JobResult};
use crate::provider::{job_result, Outcome};
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

/// [`Units`]' state for one run: the jobs queued and not yet ended, and
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

impl<B: Backend> Units<B> {
    /// When `job` is given up: its timeout from submission, cut at the run's
    /// deadline (both in `time`). Also: whether the job would be cancelled
    /// then.
    pub(super) fn job_until(job: &PendingJob, time: &Budget) -> (Instant, GiveUp) {
        let timeout = job.submitted + time.timeout;
        let mut until = (timeout, GiveUp::Timeout);
        if let Some(deadline) = time.deadline.filter(|d| *d < until.0) {
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
    pub(super) fn wait_for(&mut self, awaited: Awaited<'_>, run: &mut Run<'_>) {
        let time = run.budget();
        loop {
            let targets: Vec<usize> = (0..self.jobs.pending.len())
                .filter(|&i| match awaited {
                    Awaited::Unit(unit) => self.jobs.pending[i].unit == unit,
                    Awaited::Any | Awaited::All => true,
                })
                .collect();
            let Some((first, (until, why))) = targets
                .iter()
                .map(|&i| (i, Self::job_until(&self.jobs.pending[i], &time)))
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
                self.job_ended(id, result, run);
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
                let error = why.error(&job, time.timeout, &what);
                self.job_ended(job.id, Err(error), run);
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
    pub(super) fn job_ended(&mut self, id: JobId, result: JobResult, run: &mut Run<'_>) {
        let Some(at) = self.jobs.pending.iter().position(|j| j.id == id) else {
            return;
        };
        let job = self.jobs.pending.remove(at);
        let (result, journal) = match result {
            Err(error) if starts(job.change) && !matches!(error, ProviderError::TimedOut(_)) => {
                let (error, journal) = self.explain(&job.unit, error, job.submitted, &run.budget());
                (Err(error), journal)
            }
            other => (other, Vec::new()),
        };
        if result.is_ok() && starts(job.change) {
            self.open_window(
                &job.unit,
                job.operation,
                job.record,
                job.submitted,
                &run.budget(),
            );
        }
        tracing::debug!(
            operation = job.operation.verb(),
            service = job.unit,
            ms = crate::text::millis(job.submitted.elapsed()),
            error = result.as_ref().err().map(ProviderError::message),
            "job ended"
        );
        if let Some(call) = run.calls.get_mut(job.record) {
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

    /// Makes the change `operation` asks for on `unit`, waiting first for
    /// a slot (and for a job of the same unit); a queued job is followed,
    /// or, with `jobs = 1`, awaited here. The call's clock starts when the
    /// change reaches the backend.
    pub(super) fn change(
        &mut self,
        operation: Operation,
        unit: &CheckedName,
        run: &mut Run<'_>,
    ) -> Result<Progress, ProviderError> {
        let change = Change::of(operation).expect("mutate is never asked for status");
        let key = job_key(unit);
        if change.is_job() {
            self.wait_for(Awaited::Unit(&key), run);
            // A new job of the unit ends the window of its last start now.
            self.close_window(&key, false, run);
            while self.jobs.pending.len() >= self.jobs.slots.max(1) {
                self.wait_for(Awaited::Any, run);
            }
        } else if let Some(failed) = self.start_counted(&key, run) {
            // An enablement change is never made after a start that did not
            // count, as after any failed start.
            return Err(ProviderError::CommandFailed(format!(
                "{} {key} was not made: the start before it did not count ({})",
                operation.verb(),
                failed.message()
            )));
        }
        run.calls.restart_clock();
        let started = Instant::now();
        let time = run.budget();
        let (result, journal) = match self.backend.change(change, unit, &time) {
            Err(error) if starts(change) && !matches!(error, ProviderError::TimedOut(_)) => {
                let (error, journal) = self.explain(&key, error, started, &time);
                (Err(error), journal)
            }
            other => (other, Vec::new()),
        };
        run.calls.stop_clock();
        if let Some(call) = run.calls.current() {
            call.journal = journal;
        }
        // The place the record of this call takes when it returns: no
        // other record is made before.
        let record = run.calls.next();
        let id = match result? {
            Applied::Done => {
                if starts(change) {
                    self.open_window(&key, operation, record, started, &time);
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
            record,
            submitted: started,
        });
        if self.jobs.slots > 1 {
            return Ok(Progress::Queued);
        }
        self.wait_for(Awaited::Unit(&key), run);
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
