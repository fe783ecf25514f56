//! systemd's job engine over D-Bus: `StartUnit`, `StopUnit` and
//! `RestartUnit` with mode `replace` queue a job and return its object path;
//! the job's end is the `JobRemoved` signal, with its result.
//!
//! What systemd 252's own client does (`src/shared/bus-wait-for-jobs.c`),
//! done the same way here:
//!
//! - the match for `JobRemoved` is added and `Manager.Subscribe` called
//!   before the first job is queued (on the system bus systemd sends job
//!   signals to subscribers only), so no end is missed;
//! - a signal is matched to a job by its object path; one that arrives
//!   before the reply that names its path (or for a job of another client)
//!   is kept for a while, so a job that ended before its path was known is
//!   not lost;
//! - a job that did not end `done` is explained with the unit's `Result`, as
//!   systemctl's "Job for X failed because ..." is ([`crate::provider::job_result`]).
//!
//! The same subscription carries the signals that say unit files moved
//! (`UnitFilesChanged`, `Reloading`), which keep the run's enablement
//! answers honest ([`super::known_enablement`]): their matches are added
//! with `JobRemoved`'s, before `Subscribe`.

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::time::{Duration, Instant};

use futures_core::Stream;
use zbus::OwnedObjectPath;

use super::super::words::dbus::{member, JOB, MANAGER, MANAGER_PATH, SYSTEMD};
use super::dbus::{classify, transport, DbusError, SystemdBus};
use super::known_enablement::FilesMoved;
use super::rules;
use crate::provider::backend::{Change, JobId};

/// How many ends of jobs not (yet) known are kept.
const KEPT_UNKNOWN_ENDS: usize = 4096;

/// How a job ended, as `JobRemoved` says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JobEnd {
    /// `done`, `canceled`, `timeout`, `failed`, `dependency`, `skipped`, ...
    pub result: String,
    /// The unit the job was for (as systemd names it).
    pub unit: String,
}

/// A job this run queued.
#[derive(Debug, Clone)]
struct Queued {
    id: JobId,
    change: Change,
    path: String,
}

/// A job of this run that ended: what it was, how it ended.
pub(crate) type Ended = (JobId, (Change, JobEnd));

/// The jobs this run queued over the bus, and the signals that end them.
pub(crate) struct JobWatch {
    signals: zbus::MessageStream,
    /// `UnitFilesChanged` and `Reloading`, in that order.
    files_moved: [(FilesMoved, zbus::MessageStream); 2],
    book: JobBook,
}

/// Which job is which: the jobs of this run by object path, the ends not
/// yet handed out, and the ends of paths not (yet) known.
#[derive(Debug, Default)]
struct JobBook {
    next: u64,
    queued: Vec<Queued>,
    /// Jobs of this run that ended and were not yet handed out.
    ended: Vec<Ended>,
    /// Ends of jobs by path, of jobs not known when their signal came.
    unknown: HashMap<String, JobEnd>,
    unknown_order: VecDeque<String>,
}

impl JobBook {
    /// A job systemd queued at `path`: numbered, or ended at once when its
    /// end was seen before its path was known.
    fn queued(&mut self, change: Change, path: String) -> JobId {
        self.next += 1;
        let id = JobId(self.next);
        match self.unknown.remove(&path) {
            Some(end) => self.ended.push((id, (change, end))),
            None => self.queued.push(Queued { id, change, path }),
        }
        id
    }

    /// A `JobRemoved` for `path`.
    fn removed(&mut self, path: String, end: JobEnd) {
        match self.queued.iter().position(|q| q.path == path) {
            Some(at) => {
                let job = self.queued.remove(at);
                self.ended.push((job.id, (job.change, end)));
            }
            None => {
                if self.unknown_order.len() >= KEPT_UNKNOWN_ENDS {
                    if let Some(oldest) = self.unknown_order.pop_front() {
                        self.unknown.remove(&oldest);
                    }
                }
                self.unknown_order.push_back(path.clone());
                self.unknown.insert(path, end);
            }
        }
    }

    /// Hands out the ends of those of `jobs` that ended, each once.
    fn take_ended(&mut self, jobs: &[JobId]) -> Vec<Ended> {
        let (taken, kept) = std::mem::take(&mut self.ended)
            .into_iter()
            .partition(|(id, _)| jobs.contains(id));
        self.ended = kept;
        taken
    }

    /// Forgets `job`; its path, when it was still pending.
    fn forget(&mut self, job: JobId) -> Option<String> {
        let at = self.queued.iter().position(|q| q.id == job)?;
        Some(self.queued.remove(at).path)
    }
}

impl JobWatch {
    /// Adds the match for `JobRemoved` (and for the signals that say unit
    /// files moved) and subscribes to systemd's signals.
    pub(crate) fn subscribe(bus: &SystemdBus, timeout: Duration) -> Result<Self, DbusError> {
        let signals = manager_signals(bus, member::JOB_REMOVED, timeout)?;
        let files_moved = [
            (
                FilesMoved::UnitFilesChanged,
                manager_signals(bus, member::UNIT_FILES_CHANGED, timeout)?,
            ),
            (
                FilesMoved::Reloading,
                manager_signals(bus, member::RELOADING, timeout)?,
            ),
        ];
        bus.call::<_, ()>(
            SYSTEMD,
            MANAGER_PATH,
            MANAGER,
            member::SUBSCRIBE,
            &(),
            timeout,
        )?;
        Ok(Self {
            signals,
            files_moved,
            book: JobBook::default(),
        })
    }

    /// The signals received since the last call that say unit files moved,
    /// without waiting.
    pub(crate) fn files_moved(&mut self, bus: &SystemdBus) -> Result<Vec<FilesMoved>, DbusError> {
        let mut moved = Vec::new();
        for (kind, stream) in &mut self.files_moved {
            for message in ready(bus, stream) {
                message.map_err(classify)?;
                moved.push(*kind);
            }
        }
        Ok(moved)
    }

    /// Queues `change` (a job) for `unit` (mangled), mode `replace`.
    pub(crate) fn submit(
        &mut self,
        bus: &SystemdBus,
        change: Change,
        unit: &str,
        timeout: Duration,
    ) -> Result<JobId, DbusError> {
        debug_assert!(change.is_job(), "not a job: {change:?}");
        let method = crate::provider::job_result::method(change);
        let path: OwnedObjectPath = bus.call(
            SYSTEMD,
            MANAGER_PATH,
            MANAGER,
            method,
            &(unit, "replace"),
            timeout,
        )?;
        Ok(self.book.queued(change, path.as_str().to_owned()))
    }

    /// Follows a job this run did not queue (systemd queued it as another
    /// unit's dependency, or another client did), known by its `path`,
    /// so that [`Self::wait`] can wait for its end. Its `change` is the
    /// book's only: nobody reads its result.
    pub(crate) fn follow(&mut self, path: &str) -> JobId {
        self.book.queued(Change::Start, path.to_owned())
    }

    /// Waits until one of `jobs` has ended, or `until`; hands out every job
    /// of `jobs` that ended. A failed bus ends them all, with the error.
    pub(crate) fn wait(
        &mut self,
        bus: &SystemdBus,
        jobs: &[JobId],
        until: Instant,
    ) -> Result<Vec<Ended>, DbusError> {
        loop {
            self.read_ready(bus)?;
            let ended = self.book.take_ended(jobs);
            if !ended.is_empty() {
                return Ok(ended);
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Vec::new());
            }
            let signals = &mut self.signals;
            let next = bus.runtime.block_on(async {
                tokio::time::timeout(
                    left,
                    std::future::poll_fn(|cx| Pin::new(&mut *signals).poll_next(cx)),
                )
                .await
            });
            match next {
                // Nothing more before `until`.
                Err(_) => return Ok(Vec::new()),
                Ok(None) => return Err(transport("the system bus connection closed")),
                Ok(Some(message)) => self.note(message.map_err(classify)?),
            }
        }
    }

    /// Asks systemd to cancel `job`, and forgets it; says what became of it.
    pub(crate) fn cancel(&mut self, bus: &SystemdBus, job: JobId, timeout: Duration) -> String {
        let Some(path) = self.book.forget(job) else {
            return "it was not pending".to_owned();
        };
        let answer: Result<(), DbusError> =
            bus.call(SYSTEMD, &path, JOB, member::CANCEL, &(), timeout);
        match answer {
            Ok(()) => {
                "the job was cancelled (systemd leaves the unit as the job left it)".to_owned()
            }
            Err(DbusError::Reply { message, .. }) => {
                format!("cancelling the job failed: {message}")
            }
            Err(DbusError::Transport(why)) => format!("cancelling the job failed: {why}"),
        }
    }

    /// Forgets `job` without cancelling it: it stays queued in systemd.
    pub(crate) fn forget(&mut self, job: JobId) {
        self.book.forget(job);
    }

    /// Reads every signal already received, without waiting.
    fn read_ready(&mut self, bus: &SystemdBus) -> Result<(), DbusError> {
        for message in ready(bus, &mut self.signals) {
            self.note(message.map_err(classify)?);
        }
        Ok(())
    }

    /// Takes one `JobRemoved` signal into account.
    fn note(&mut self, message: zbus::Message) {
        let Ok((_, path, unit, result)) = message
            .body()
            .deserialize::<(u32, OwnedObjectPath, String, String)>()
        else {
            return;
        };
        self.book
            .removed(path.as_str().to_owned(), JobEnd { result, unit });
    }
}

/// A stream of the manager's signal `member`, its match added (and
/// confirmed by the bus) within `timeout`.
fn manager_signals(
    bus: &SystemdBus,
    member: &'static str,
    timeout: Duration,
) -> Result<zbus::MessageStream, DbusError> {
    bus.signals(rules::manager_signal(member).map_err(transport)?, timeout)
}

/// Every message `stream` already received, without waiting.
fn ready(bus: &SystemdBus, stream: &mut zbus::MessageStream) -> Vec<zbus::Result<zbus::Message>> {
    bus.runtime.block_on(async {
        // Lets the connection's reader move what the socket holds.
        tokio::task::yield_now().await;
        let mut ready = Vec::new();
        std::future::poll_fn(|cx| loop {
            match Pin::new(&mut *stream).poll_next(cx) {
                std::task::Poll::Ready(Some(message)) => ready.push(message),
                _ => return std::task::Poll::Ready(()),
            }
        })
        .await;
        ready
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(result: &str) -> JobEnd {
        JobEnd {
            result: result.into(),
            unit: "web.service".into(),
        }
    }

    const A: &str = "/org/freedesktop/systemd1/job/41";
    const B: &str = "/org/freedesktop/systemd1/job/42";

    #[test]
    fn an_end_is_matched_to_its_job_by_path_and_handed_out_once() {
        let mut book = JobBook::default();
        let a = book.queued(Change::Start, A.into());
        let b = book.queued(Change::Stop, B.into());
        book.removed(B.into(), end("failed"));
        assert!(book.take_ended(&[a]).is_empty(), "a has not ended");
        assert_eq!(
            book.take_ended(&[a, b]),
            [(b, (Change::Stop, end("failed")))]
        );
        assert!(book.take_ended(&[a, b]).is_empty(), "handed out once");
    }

    #[test]
    fn an_end_seen_before_its_path_was_known_is_not_lost() {
        let mut book = JobBook::default();
        book.removed(A.into(), end("done"));
        let a = book.queued(Change::Restart, A.into());
        assert_eq!(book.take_ended(&[a]), [(a, (Change::Restart, end("done")))]);
    }

    #[test]
    fn ends_of_other_clients_jobs_are_kept_only_so_many() {
        let mut book = JobBook::default();
        for n in 0..KEPT_UNKNOWN_ENDS + 10 {
            book.removed(format!("/org/freedesktop/systemd1/job/{n}"), end("done"));
        }
        assert_eq!(book.unknown.len(), KEPT_UNKNOWN_ENDS);
        assert!(!book.unknown.contains_key("/org/freedesktop/systemd1/job/0"));
    }

    #[test]
    fn a_forgotten_job_ends_nothing() {
        let mut book = JobBook::default();
        let a = book.queued(Change::Start, A.into());
        assert_eq!(book.forget(a).as_deref(), Some(A));
        assert_eq!(book.forget(a), None);
        book.removed(A.into(), end("canceled"));
        assert!(book.take_ended(&[a]).is_empty());
    }
}
