//! The guard's following of queued jobs, over a backend of the test's own
//! that queues every job and ends each after a scripted time; and the run's
//! reload over a backend that, like systemd over D-Bus, says whether a
//! unit's files changed since systemd loaded them.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::*;
use crate::contract::{ErrorKind, JobOutcome};
use crate::provider::backend::{Applied, Backend, Budget, JobId, JobResult, Observed};
use crate::provider::{Call, Outcome, Provider};
use crate::text::Untrusted;

/// How a unit's job goes: it ends `after` its submission, with `result`;
/// `None`: it never ends.
#[derive(Clone)]
struct Script {
    after: Option<Duration>,
    result: JobResult,
}

#[derive(Default)]
struct Seen {
    /// The most jobs pending at once.
    most_pending: usize,
    /// (job, cancelled) for every job given up.
    abandoned: Vec<(JobId, bool)>,
    submitted: Vec<String>,
    /// What reached the backend: `status UNIT`, `reload`, `start UNIT`, ...
    log: Vec<String>,
}

struct QueueingBackend {
    scripts: HashMap<String, Script>,
    pending: Vec<(JobId, Instant, Script)>,
    next: u64,
    seen: Arc<Mutex<Seen>>,
    /// Units whose files changed on disk since systemd loaded them, until
    /// a reload.
    files_changed: HashSet<String>,
    /// Units whose status cannot tell (the bus failed and systemctl
    /// answered).
    cannot_tell: HashSet<String>,
    /// The reload fails with this.
    reload_error: Option<String>,
}

impl Backend for QueueingBackend {
    fn unavailable_reason(&self) -> Option<&str> {
        None
    }
    fn status_reader(&mut self) -> (&'static str, Option<&str>) {
        ("dbus", None)
    }
    fn tells_files_changed(&mut self, _: &Budget) -> bool {
        true
    }
    /// A unit whose files changed reads `stale` until a reload.
    fn status(
        &mut self,
        unit: &CheckedName,
        _: &Budget,
        files_changed_too: bool,
    ) -> Result<Observed, ProviderError> {
        let unit = unit.as_str();
        let asked = if files_changed_too { " (files?)" } else { "" };
        self.seen
            .lock()
            .unwrap()
            .log
            .push(format!("status {unit}{asked}"));
        let changed = self.files_changed.contains(unit);
        Ok(Observed {
            status: ServiceStatus {
                name: unit.to_owned(),
                provider: "systemd".into(),
                enabled: false,
                running: true,
                active_word: if changed { "stale" } else { "active" }.into(),
                enabled_word: "disabled".into(),
                job: None,
                restarting: None,
            },
            files_changed: (files_changed_too && !self.cannot_tell.contains(unit))
                .then_some(changed),
        })
    }
    fn change(
        &mut self,
        change: Change,
        unit: &CheckedName,
        _: &Budget,
    ) -> Result<Applied, ProviderError> {
        self.seen
            .lock()
            .unwrap()
            .log
            .push(format!("{} {unit}", change.verb()));
        if !change.is_job() {
            return Ok(Applied::Done);
        }
        let script = self.scripts.get(unit.as_str()).cloned().unwrap_or(Script {
            after: Some(Duration::from_millis(20)),
            result: Ok(()),
        });
        self.next += 1;
        let id = JobId(self.next);
        self.pending.push((id, Instant::now(), script));
        let mut seen = self.seen.lock().unwrap();
        seen.most_pending = seen.most_pending.max(self.pending.len());
        seen.submitted.push(unit.to_string());
        Ok(Applied::Queued(id))
    }
    fn wait_jobs(&mut self, jobs: &[JobId], until: Instant) -> Vec<(JobId, JobResult)> {
        let next_end = self
            .pending
            .iter()
            .filter(|(id, ..)| jobs.contains(id))
            .filter_map(|(_, at, s)| s.after.map(|after| *at + after))
            .min();
        let wake = next_end.map_or(until, |end| end.min(until));
        std::thread::sleep(wake.saturating_duration_since(Instant::now()));
        let now = Instant::now();
        let (ended, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|(id, at, s)| jobs.contains(id) && s.after.is_some_and(|a| *at + a <= now));
        self.pending = kept;
        ended.into_iter().map(|(id, _, s)| (id, s.result)).collect()
    }
    fn abandon(&mut self, job: JobId, cancel: bool) -> String {
        self.pending.retain(|(id, ..)| *id != job);
        self.seen.lock().unwrap().abandoned.push((job, cancel));
        if cancel {
            "the job was cancelled"
        } else {
            "the job was left queued"
        }
        .to_owned()
    }
    fn daemon_reload(&mut self, _: &Budget) -> Result<(), ProviderError> {
        self.seen.lock().unwrap().log.push("reload".into());
        if let Some(error) = &self.reload_error {
            return Err(ProviderError::CommandFailed(error.clone()));
        }
        self.files_changed.clear();
        Ok(())
    }
}

fn guarded(
    jobs: usize,
    timeout: Duration,
    scripts: &[(&str, Script)],
) -> (Guarded<QueueingBackend>, Arc<Mutex<Seen>>) {
    guarded_with(jobs, timeout, scripts, |_| {})
}

/// [`guarded`], with the guard's settings changed by `set`.
fn guarded_with(
    jobs: usize,
    timeout: Duration,
    scripts: &[(&str, Script)],
    set: impl FnOnce(&mut Guard),
) -> (Guarded<QueueingBackend>, Arc<Mutex<Seen>>) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let backend = QueueingBackend {
        scripts: scripts
            .iter()
            .map(|(unit, s)| ((*unit).to_owned(), s.clone()))
            .collect(),
        pending: Vec::new(),
        next: 0,
        seen: seen.clone(),
        files_changed: HashSet::new(),
        cannot_tell: HashSet::new(),
        reload_error: None,
    };
    let mut guard = Guard {
        allow: None,
        noop: false,
        timeout,
        jobs,
        settle: Duration::ZERO,
        left_alone: Default::default(),
        reload_before_change: Default::default(),
        windows: None,
    };
    set(&mut guard);
    (crate::provider::guarded(backend, guard), seen)
}

/// The calls of the guest's operations (the run's reload left out).
fn guest_calls(p: &mut Guarded<QueueingBackend>) -> Vec<CallRecord> {
    p.take_calls()
        .into_iter()
        .filter(|c| c.operation != Call::DaemonReload)
        .collect()
}

fn failing(after_ms: u64, message: &str) -> Script {
    Script {
        after: Some(Duration::from_millis(after_ms)),
        result: Err(ProviderError::CommandFailed(message.into())),
    }
}

fn never() -> Script {
    Script {
        after: None,
        result: Ok(()),
    }
}

#[test]
fn no_more_than_jobs_are_pending_and_every_record_gets_its_jobs_result() {
    let (mut p, seen) = guarded(
        3,
        Duration::from_secs(10),
        &[("u4", failing(30, "Job for u4.service failed."))],
    );
    for unit in ["u1", "u2", "u3", "u4", "u5", "u6", "u7"] {
        assert_eq!(
            p.mutate(Operation::Start, unit),
            Ok(Progress::Queued),
            "{unit}"
        );
    }
    assert_eq!(seen.lock().unwrap().most_pending, 3);
    let calls = p.take_calls();
    let starts: Vec<_> = calls
        .iter()
        .filter(|c| c.operation == Call::Guest(Operation::Start))
        .collect();
    assert_eq!(starts.len(), 7);
    for call in &starts {
        if call.service.as_ref().map(Untrusted::as_raw) == Some("u4") {
            assert_eq!(call.outcome, Outcome::Failed(ErrorKind::CommandFailed));
            assert_eq!(
                call.error.as_ref().map(Untrusted::as_raw),
                Some("Job for u4.service failed.")
            );
        } else {
            assert_eq!(call.outcome, Outcome::Ok, "{call:?}");
        }
        // The record's time runs to the job's end, not only its queueing.
        assert!(call.duration >= Duration::from_millis(20), "{call:?}");
    }
}

#[test]
fn status_waits_for_the_units_job_and_says_how_it_ended_once() {
    let (mut p, _) = guarded(
        8,
        Duration::from_secs(10),
        &[("db", failing(80, "Job for db.service failed."))],
    );
    assert_eq!(p.mutate(Operation::Start, "db"), Ok(Progress::Queued));
    let started = Instant::now();
    let status = p.status("db").unwrap();
    assert!(started.elapsed() >= Duration::from_millis(60), "it waited");
    assert_eq!(
        status.job,
        Some(JobOutcome {
            operation: Operation::Start,
            error: Some(ProviderError::CommandFailed(
                "Job for db.service failed.".into()
            )),
        })
    );
    assert_eq!(p.status("db").unwrap().job, None, "said once");
    // Another unit's status says nothing of db's job.
    assert_eq!(p.mutate(Operation::Restart, "db"), Ok(Progress::Queued));
    assert_eq!(p.status("web").unwrap().job, None);
}

#[test]
fn with_one_job_each_call_returns_after_its_job_with_its_failure() {
    let (mut p, seen) = guarded(
        1,
        Duration::from_secs(10),
        &[("bad", failing(20, "Job for bad.service failed."))],
    );
    assert_eq!(p.mutate(Operation::Start, "good"), Ok(Progress::Finished));
    assert_eq!(
        p.mutate(Operation::Start, "bad"),
        Err(ProviderError::CommandFailed(
            "Job for bad.service failed.".into()
        ))
    );
    assert_eq!(seen.lock().unwrap().most_pending, 1);
    // Nothing is left for a status to say: the call said it.
    assert_eq!(p.status("bad").unwrap().job, None);
    let calls = guest_calls(&mut p);
    assert_eq!(calls[1].outcome, Outcome::Failed(ErrorKind::CommandFailed));
}

#[test]
fn a_job_that_never_ends_is_cancelled_at_the_timeout_and_the_others_end() {
    let (mut p, seen) = guarded(8, Duration::from_millis(300), &[("stuck", never())]);
    let started = Instant::now();
    for unit in ["a", "stuck", "b"] {
        assert_eq!(p.mutate(Operation::Start, unit), Ok(Progress::Queued));
    }
    let status = p.status("stuck").unwrap();
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(280) && waited < Duration::from_secs(3),
        "{waited:?}"
    );
    let error = status.job.unwrap().error.unwrap();
    assert_eq!(error.kind(), ErrorKind::TimedOut);
    assert!(
        error
            .message()
            .starts_with("StartUnit stuck.service: its job did not end within 300ms")
            && error.message().ends_with("the job was cancelled"),
        "{error:?}"
    );
    assert_eq!(seen.lock().unwrap().abandoned, [(JobId(2), true)]);
    let calls = guest_calls(&mut p);
    let outcomes: Vec<_> = calls.iter().map(|c| c.outcome).collect();
    assert_eq!(
        outcomes,
        [
            Outcome::Ok,
            Outcome::Failed(ErrorKind::TimedOut),
            Outcome::Ok,
            Outcome::Ok
        ]
    );
}

#[test]
fn the_runs_deadline_cuts_a_jobs_wait() {
    let (mut p, seen) = guarded(8, Duration::from_secs(60), &[("stuck", never())]);
    p.set_deadline(Instant::now() + Duration::from_millis(200));
    assert_eq!(p.mutate(Operation::Stop, "stuck"), Ok(Progress::Queued));
    let started = Instant::now();
    let calls = guest_calls(&mut p);
    assert!(started.elapsed() < Duration::from_secs(2));
    let error = calls[0].error.as_ref().map(Untrusted::as_raw).unwrap();
    assert!(
        error.starts_with(
            "StopUnit stuck.service: its job had not ended at the run's wall-clock limit"
        ),
        "{error}"
    );
    assert_eq!(seen.lock().unwrap().abandoned.len(), 1);
}

#[test]
fn a_second_job_of_a_unit_waits_for_its_first() {
    let (mut p, seen) = guarded(8, Duration::from_secs(10), &[]);
    p.mutate(Operation::Start, "web").unwrap();
    p.mutate(Operation::Restart, "web").unwrap();
    assert_eq!(seen.lock().unwrap().most_pending, 1);
    let calls = p.take_calls();
    assert!(calls.iter().all(|c| c.outcome == Outcome::Ok));
}

#[test]
fn a_units_two_spellings_share_its_job() {
    let (mut p, _) = guarded(
        8,
        Duration::from_secs(10),
        &[("web", failing(60, "Job for web.service failed."))],
    );
    assert_eq!(p.mutate(Operation::Start, "web"), Ok(Progress::Queued));
    let status = p.status("web.service").unwrap();
    assert_eq!(
        status
            .job
            .and_then(|j| j.error)
            .map(|e| e.message().to_owned()),
        Some("Job for web.service failed.".to_owned())
    );
}

/// What reached the backend, in order.
fn backend_log(seen: &Arc<Mutex<Seen>>) -> Vec<String> {
    seen.lock().unwrap().log.clone()
}

#[test]
fn statuses_of_unchanged_units_make_no_reload_and_the_first_change_does() {
    let (mut p, seen) = guarded(8, Duration::from_secs(10), &[]);
    assert_eq!(p.status("web").unwrap().active_word, "active");
    assert_eq!(p.status("db").unwrap().active_word, "active");
    // While the run's reload is to come, a status asks whether the files
    // changed; after it, not.
    assert_eq!(
        backend_log(&seen),
        ["status web (files?)", "status db (files?)"]
    );
    p.mutate(Operation::Enable, "web").unwrap();
    p.mutate(Operation::Start, "db").unwrap();
    assert_eq!(
        backend_log(&seen),
        [
            "status web (files?)",
            "status db (files?)",
            "reload",
            "enable web",
            "start db"
        ]
    );
    let verbs: Vec<_> = p.take_calls().iter().map(|c| c.operation.verb()).collect();
    assert_eq!(
        verbs,
        ["status", "status", "daemon-reload", "enable", "start"]
    );
}

#[test]
fn a_watch_run_changes_a_unit_read_unchanged_without_the_reload() {
    let (mut p, seen) = guarded_with(8, Duration::from_secs(10), &[], |g| {
        g.reload_before_change = ReloadBeforeChange::UnlessReadUnchanged;
    });
    p.status("web").unwrap();
    p.mutate(Operation::Start, "web.service").unwrap();
    assert_eq!(
        backend_log(&seen),
        ["status web (files?)", "start web.service"],
        "read unchanged (under either of its names): no reload"
    );
    // A unit never read in this run may have changed files: the reload.
    p.mutate(Operation::Enable, "db").unwrap();
    // And then none again.
    p.mutate(Operation::Start, "app").unwrap();
    assert_eq!(
        backend_log(&seen)[2..],
        ["reload", "enable db", "start app"]
    );
}

#[test]
fn a_watch_run_still_reloads_for_a_unit_whose_files_changed() {
    let (mut p, seen) = guarded_with(8, Duration::from_secs(10), &[], |g| {
        g.reload_before_change = ReloadBeforeChange::UnlessReadUnchanged;
    });
    p.backend_mut().files_changed.insert("web".into());
    p.status("db").unwrap();
    assert_eq!(p.status("web").unwrap().active_word, "active");
    p.mutate(Operation::Restart, "web").unwrap();
    assert_eq!(
        backend_log(&seen),
        [
            "status db (files?)",
            "status web (files?)",
            "reload",
            "status web",
            "restart web"
        ]
    );
}

#[test]
fn a_unit_whose_files_changed_is_read_again_after_the_runs_one_reload() {
    let (mut p, seen) = guarded(8, Duration::from_secs(10), &[]);
    p.backend_mut().files_changed.insert("web".into());
    assert_eq!(p.status("db").unwrap().active_word, "active");
    // The guest sees the unit as systemd has it after the reload.
    assert_eq!(p.status("web").unwrap().active_word, "active");
    p.backend_mut().files_changed.insert("app".into());
    // One reload a run: a unit changed after it is not reloaded again (the
    // design's rule), and the change that follows makes none either.
    assert_eq!(p.status("app").unwrap().active_word, "stale");
    p.mutate(Operation::Start, "app").unwrap();
    assert_eq!(
        backend_log(&seen),
        [
            "status db (files?)",
            "status web (files?)",
            "reload",
            "status web",
            "status app",
            "start app"
        ]
    );
    let calls = p.take_calls();
    let verbs: Vec<_> = calls.iter().map(|c| c.operation.verb()).collect();
    assert_eq!(
        verbs,
        ["status", "daemon-reload", "status", "status", "start"],
        "one record per status asked, the reload its own"
    );
    assert_eq!(
        calls[2].service.as_ref().map(Untrusted::as_raw),
        Some("web")
    );
}

#[test]
fn a_status_that_cannot_tell_makes_the_reload_and_reads_again() {
    let (mut p, seen) = guarded(8, Duration::from_secs(10), &[]);
    p.backend_mut().cannot_tell.insert("web".into());
    p.status("web").unwrap();
    assert_eq!(
        backend_log(&seen),
        ["status web (files?)", "reload", "status web"]
    );
}

#[test]
fn a_noop_run_never_reloads_even_for_a_changed_unit() {
    let (mut p, seen) = guarded_with(8, Duration::from_secs(10), &[], |g| g.noop = true);
    p.backend_mut().files_changed.insert("web".into());
    assert_eq!(p.status("web").unwrap().active_word, "stale");
    assert!(p.mutate(Operation::Start, "web").is_err());
    assert_eq!(backend_log(&seen), ["status web"]);
}

#[test]
fn after_a_failed_reload_every_operation_fails_with_its_message() {
    let (mut p, seen) = guarded(8, Duration::from_secs(10), &[]);
    p.backend_mut().reload_error = Some("Access denied".into());
    p.backend_mut().files_changed.insert("web".into());
    assert_eq!(
        p.status("web"),
        Err(ProviderError::CommandFailed("Access denied".into()))
    );
    // An unchanged unit too: what systemd has loaded may be out of date.
    assert_eq!(
        p.status("db"),
        Err(ProviderError::CommandFailed("Access denied".into()))
    );
    assert_eq!(
        p.mutate(Operation::Start, "db"),
        Err(ProviderError::CommandFailed("Access denied".into()))
    );
    assert_eq!(backend_log(&seen), ["status web (files?)", "reload"]);
}
