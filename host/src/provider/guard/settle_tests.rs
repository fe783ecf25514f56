//! The settle window, on a simulated clock: a backend of the test's own
//! whose units die (or are restarted by "systemd") at scripted moments,
//! and whose `watch_units` moves the clock to the next moment something
//! happens instead of sleeping.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::jobs::WAIT_SLICE;
use super::*;
use crate::contract::ErrorKind;
use crate::provider::backend::{Applied, Backend, Budget, JobId, JobResult, Observed};
use crate::provider::liveness::Liveness;
use crate::provider::{Call, Outcome, Provider};
use crate::text::Untrusted;

/// What becomes of a unit after its start.
#[derive(Clone, Copy)]
enum Fate {
    /// It dies this long after its start (`failed`, exit status 3).
    Dies(Duration),
    /// systemd restarts it this many times, the first this long after.
    Loops(Duration, u32),
}

#[derive(Default)]
struct Seen {
    /// `liveness UNIT`, `watch UNIT`, `journal UNIT`, `start UNIT`, ...
    log: Vec<String>,
}

struct SettlingBackend {
    now: Instant,
    /// Starts are queued jobs (systemd's job engine), each ending this
    /// long after its submission (per unit; 0 when not given).
    queue: Option<HashMap<String, Duration>>,
    /// Queued jobs and when each ends.
    jobs: Vec<(JobId, Instant)>,
    fates: HashMap<String, Fate>,
    started: HashMap<String, Instant>,
    seen: Arc<Mutex<Seen>>,
}

impl SettlingBackend {
    fn log(&self, line: String) {
        self.seen.lock().unwrap().log.push(line);
    }

    /// When `unit`'s fate happens, if it has one and was started.
    fn moment(&self, unit: &str) -> Option<Instant> {
        let started = self.started.get(unit)?;
        Some(match self.fates.get(unit)? {
            Fate::Dies(after) | Fate::Loops(after, _) => *started + *after,
        })
    }

    fn state(&self, unit: &str) -> Liveness {
        let up = Liveness {
            active: "active".into(),
            sub: "running".into(),
            invocation: Some("aa".into()),
            restarts: Some(0),
            result: Some("success".into()),
            ..Liveness::default()
        };
        let exit = Some(super::super::liveness::MainExit { code: 1, status: 3 });
        match (self.moment(unit), self.fates.get(unit)) {
            (Some(at), Some(Fate::Dies(_))) if self.now >= at => Liveness {
                active: "failed".into(),
                sub: "failed".into(),
                result: Some("exit-code".into()),
                main_exit: exit,
                ..up
            },
            (Some(at), Some(Fate::Loops(_, n))) if self.now >= at => Liveness {
                invocation: Some("bb".into()),
                restarts: Some(*n),
                result: Some("exit-code".into()),
                main_exit: exit,
                ..up
            },
            _ => up,
        }
    }
}

impl Backend for SettlingBackend {
    fn unavailable_reason(&self) -> Option<&str> {
        None
    }
    fn status_reader(&mut self) -> (&'static str, Option<&str>) {
        ("dbus", None)
    }
    fn tells_files_changed(&mut self, _: &Budget) -> bool {
        true
    }
    fn status(
        &mut self,
        unit: &CheckedName,
        _: &Budget,
        _: bool,
    ) -> Result<Observed, ProviderError> {
        let now = self.state(&job_key(unit));
        Ok(Observed {
            status: ServiceStatus {
                name: unit.to_string(),
                provider: "systemd".into(),
                enabled: false,
                running: now.is_up(),
                active_word: now.active.clone(),
                enabled_word: "disabled".into(),
                job: None,
                restarting: None,
            },
            files_changed: Some(false),
        })
    }
    fn change(
        &mut self,
        change: Change,
        unit: &CheckedName,
        _: &Budget,
    ) -> Result<Applied, ProviderError> {
        self.log(format!("{} {unit}", change.verb()));
        self.started.insert(job_key(unit), self.now);
        let Some(delays) = &self.queue else {
            return Ok(Applied::Done);
        };
        let delay = delays.get(unit.as_str()).copied().unwrap_or_default();
        let id = JobId(self.jobs.len() as u64 + 100);
        self.jobs.push((id, self.now + delay));
        Ok(Applied::Queued(id))
    }
    /// The jobs of `jobs` that ended by now; when none has, the clock
    /// moves to the next end before `until` (or to `until`).
    fn wait_jobs(&mut self, jobs: &[JobId], until: Instant) -> Vec<(JobId, JobResult)> {
        let ours = |(id, _): &&(JobId, Instant)| jobs.contains(id);
        if !self
            .jobs
            .iter()
            .filter(ours)
            .any(|(_, end)| *end <= self.now)
        {
            let next = self.jobs.iter().filter(ours).map(|(_, end)| *end).min();
            self.now = next.map_or(until, |end| end.min(until)).max(self.now);
        }
        let now = self.now;
        let (ended, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.jobs)
            .into_iter()
            .partition(|(id, end)| jobs.contains(id) && *end <= now);
        self.jobs = kept;
        // Its unit started when its job ended.
        ended.into_iter().map(|(id, _)| (id, Ok(()))).collect()
    }
    fn daemon_reload(&mut self, _: &Budget) -> Result<(), ProviderError> {
        Ok(())
    }
    fn now(&self) -> Instant {
        self.now
    }
    fn watches_units(&self) -> bool {
        true
    }
    fn liveness_at_start(&mut self, unit: &str, _: &Budget) -> Option<Liveness> {
        Some(self.state(unit))
    }
    fn liveness(&mut self, unit: &str, _: &Budget) -> Result<Option<Liveness>, ProviderError> {
        self.log(format!("liveness {unit}"));
        Ok(Some(self.state(unit)))
    }
    /// Moves the clock to the first fate of `units` before `until` (and
    /// says so), or to `until`.
    fn watch_units(&mut self, units: &[String], until: Instant) -> bool {
        self.log(format!("watch {}", units.join(" ")));
        let next = units
            .iter()
            .filter_map(|u| self.moment(u))
            .filter(|at| *at > self.now && *at <= until)
            .min();
        self.now = next.unwrap_or(until);
        next.is_some()
    }
    fn journal(&mut self, unit: &str, _: std::time::SystemTime, _: &Budget) -> Vec<Untrusted> {
        self.log(format!("journal {unit}"));
        vec![Untrusted::new("boom: bad config")]
    }
}

const SETTLE: Duration = Duration::from_secs(1);

fn guarded(
    settle: Duration,
    fates: &[(&str, Fate)],
) -> (Guarded<SettlingBackend>, Arc<Mutex<Seen>>, Instant) {
    guarded_with(settle, fates, |_| {})
}

/// [`guarded`], with the guard's settings changed by `set`.
fn guarded_with(
    settle: Duration,
    fates: &[(&str, Fate)],
    set: impl FnOnce(&mut Guard),
) -> (Guarded<SettlingBackend>, Arc<Mutex<Seen>>, Instant) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let start = Instant::now();
    let backend = SettlingBackend {
        now: start,
        queue: None,
        jobs: Vec::new(),
        fates: fates
            .iter()
            .map(|(u, f)| (format!("{u}.service"), *f))
            .collect(),
        started: HashMap::new(),
        seen: seen.clone(),
    };
    let mut guard = Guard {
        allow: None,
        noop: false,
        timeout: Duration::from_secs(90),
        jobs: 1,
        settle,
        left_alone: Default::default(),
        reload_before_change: Default::default(),
        windows: None,
    };
    set(&mut guard);
    (crate::provider::guarded(backend, guard), seen, start)
}

fn elapsed(p: &Guarded<SettlingBackend>, since: Instant) -> Duration {
    p.backend().now().duration_since(since)
}

#[test]
fn a_unit_that_stays_up_counts_at_the_end_of_its_window() {
    let (mut p, _, t0) = guarded(SETTLE, &[]);
    assert_eq!(
        p.mutate(Operation::Start, "web").unwrap(),
        Progress::Finished
    );
    let status = p.status("web").unwrap();
    assert!(status.running && status.job.is_none(), "{status:?}");
    assert_eq!(
        elapsed(&p, t0),
        SETTLE,
        "the status waited for the window's end"
    );
    let calls = p.take_calls();
    assert!(calls.iter().all(|c| c.outcome.is_ok()), "{calls:?}");
}

#[test]
fn a_unit_that_dies_is_judged_at_once_in_systemds_words_with_its_journal() {
    let (mut p, seen, t0) = guarded(SETTLE, &[("web", Fate::Dies(Duration::from_millis(500)))]);
    p.mutate(Operation::Start, "web").unwrap();
    let status = p.status("web").unwrap();
    assert_eq!(
        elapsed(&p, t0),
        Duration::from_millis(500),
        "judged when it died, not at 1 s"
    );
    assert!(!status.running);
    let job = status.job.expect("the start's outcome");
    assert_eq!(job.operation, Operation::Start);
    let message = job.error.expect("a failed start").message().to_owned();
    assert_eq!(
        message,
        "web.service did not stay up: 500ms after its job ended it is failed (failed); \
         last exit: Result: exit-code; main process exited with status 3"
    );
    let calls = p.take_calls();
    let start = calls
        .iter()
        .find(|c| c.operation == Call::Guest(Operation::Start))
        .unwrap();
    assert_eq!(start.outcome, Outcome::Failed(ErrorKind::CommandFailed));
    assert_eq!(
        start.error.as_ref().map(Untrusted::as_raw),
        Some(message.as_str())
    );
    assert_eq!(start.journal, [Untrusted::new("boom: bad config")]);
    assert!(seen
        .lock()
        .unwrap()
        .log
        .contains(&"journal web.service".to_owned()));
}

#[test]
fn automatic_restarts_within_the_window_are_a_crash_loop() {
    let (mut p, _, _) = guarded(
        SETTLE,
        &[("web", Fate::Loops(Duration::from_millis(300), 3))],
    );
    p.mutate(Operation::Restart, "web").unwrap();
    let job = p.status("web").unwrap().job.expect("the restart's outcome");
    assert_eq!(job.operation, Operation::Restart);
    let message = job.error.unwrap().message().to_owned();
    assert!(
        message
            .starts_with("web.service did not stay up: restarted 3 times by systemd since start"),
        "{message}"
    );
}

#[test]
fn windows_of_units_started_side_by_side_run_side_by_side() {
    let (mut p, _, t0) = guarded(SETTLE, &[]);
    for unit in ["a", "b", "c", "d"] {
        p.mutate(Operation::Start, unit).unwrap();
    }
    for unit in ["a", "b", "c", "d"] {
        assert!(p.status(unit).unwrap().job.is_none());
    }
    assert_eq!(
        elapsed(&p, t0),
        SETTLE,
        "one window for four starts, not four"
    );
}

/// Queued side by side (jobs in parallel): a job that ended while another
/// unit's window was being watched opens its own window then, not when its
/// status comes, so the run pays about one window, not one per unit.
#[test]
fn windows_of_queued_starts_open_when_their_jobs_end() {
    let (mut p, _, t0) = guarded_with(SETTLE, &[], |g| g.jobs = 64);
    // a's job ends at once, the others' 0.2 s later: while a's window is
    // watched.
    let ends = [("a", 0), ("b", 200), ("c", 200), ("d", 200)];
    p.backend_mut().queue = Some(
        ends.iter()
            .map(|(u, ms)| ((*u).to_owned(), Duration::from_millis(*ms)))
            .collect(),
    );
    for (unit, _) in ends {
        assert_eq!(p.mutate(Operation::Start, unit).unwrap(), Progress::Queued);
    }
    for (unit, _) in ends {
        let status = p.status(unit).unwrap();
        assert!(
            status.job.as_ref().is_some_and(|j| j.error.is_none()),
            "{status:?}"
        );
    }
    let took = elapsed(&p, t0);
    let bound = Duration::from_millis(200) + SETTLE + WAIT_SLICE;
    assert!(
        took <= bound,
        "four queued starts took {took:?}, more than one window after the last job ({bound:?})"
    );
}

#[test]
fn no_window_without_a_start_or_with_settle_off_or_in_a_noop_run() {
    let (mut p, seen, t0) = guarded(
        Duration::ZERO,
        &[("web", Fate::Dies(Duration::from_millis(1)))],
    );
    p.mutate(Operation::Start, "web").unwrap();
    p.status("web").unwrap();
    assert_eq!(elapsed(&p, t0), Duration::ZERO);
    assert!(seen
        .lock()
        .unwrap()
        .log
        .iter()
        .all(|l| !l.starts_with("watch")));

    let (mut p, seen, t0) = guarded(SETTLE, &[]);
    p.mutate(Operation::Stop, "web").unwrap();
    p.mutate(Operation::Enable, "web").unwrap();
    p.status("web").unwrap();
    assert_eq!(
        elapsed(&p, t0),
        Duration::ZERO,
        "a stop or enable opens no window"
    );
    assert!(seen
        .lock()
        .unwrap()
        .log
        .iter()
        .all(|l| !l.starts_with("liveness")));

    let (mut p, _, t0) = guarded_with(SETTLE, &[], |g| g.noop = true);
    assert!(p.mutate(Operation::Start, "web").is_err());
    p.status("web").unwrap();
    assert_eq!(elapsed(&p, t0), Duration::ZERO);
}

#[test]
fn a_window_the_guest_never_closed_is_judged_before_the_records_are_handed_out() {
    let (mut p, _, _) = guarded(SETTLE, &[("web", Fate::Dies(Duration::from_millis(200)))]);
    p.mutate(Operation::Start, "web").unwrap();
    let calls = p.take_calls();
    let start = calls
        .iter()
        .find(|c| c.operation == Call::Guest(Operation::Start))
        .unwrap();
    assert_eq!(
        start.outcome,
        Outcome::Failed(ErrorKind::CommandFailed),
        "{calls:?}"
    );
}

/// A watch's run ([`Windows`]): its status reads a unit as it is, its
/// records are handed out with the window still open, and the window is
/// judged when the watch asks, as late as its end; a unit that dies in it
/// is judged as early as systemd says it moved, and the verdict is owed to
/// the run, naming the start's record among all its run's records.
#[test]
fn a_watchs_run_hands_out_its_records_with_the_window_open_and_is_owed_its_verdict() {
    let windows = Windows::default();
    let run = windows.begin_run();
    let (mut p, seen, t0) = guarded_with(
        SETTLE,
        &[("bad", Fate::Dies(Duration::from_millis(600)))],
        |g| g.windows = Some(run.clone()),
    );
    p.mutate(Operation::Start, "good").unwrap();
    assert!(p.status("good").unwrap().running);
    // A first policy's records, then a second's, as a run takes them.
    let first = p.take_calls();
    assert_eq!(first.len(), 3, "the run's reload, the start, the status");
    p.mutate(Operation::Start, "bad").unwrap();
    let status = p.status("bad").unwrap();
    assert!(status.running && status.job.is_none(), "{status:?}");
    let second = p.take_calls();
    assert_eq!(
        elapsed(&p, t0),
        Duration::ZERO,
        "nothing waited for a window"
    );
    assert!(first.iter().chain(&second).all(|c| c.outcome.is_ok()));
    assert!(run.open());
    assert_eq!(windows.next_end(), Some(t0 + SETTLE));

    // 0.3 s: good moved (say), and is still up: its window stays open.
    p.backend_mut().now = t0 + Duration::from_millis(300);
    p.settle(&["good.service".to_owned()], false);
    assert!(run.open());
    assert!(run.take_verdicts().is_empty());

    // 0.7 s: bad died at 0.6 s; systemd says so: judged now, good's is not.
    p.backend_mut().now = t0 + Duration::from_millis(700);
    p.settle(&["bad.service".to_owned()], false);
    let verdicts = run.take_verdicts();
    assert_eq!(verdicts.len(), 1, "{verdicts:?}");
    assert_eq!(
        verdicts[0].record, 3,
        "bad's start, the run's fourth record"
    );
    assert!(
        verdicts[0]
            .error
            .message()
            .starts_with("bad.service did not stay up"),
        "{verdicts:?}"
    );
    assert_eq!(verdicts[0].journal, [Untrusted::new("boom: bad config")]);
    assert!(run.open(), "good's window is open until its end");
    assert!(seen
        .lock()
        .unwrap()
        .log
        .contains(&"journal bad.service".to_owned()));

    // Its end: good stayed up, no verdict is owed, nothing is open.
    p.backend_mut().now = t0 + SETTLE;
    p.settle(&[], false);
    assert!(!run.open());
    assert!(run.take_verdicts().is_empty());
    assert_eq!(windows.next_end(), None);
}

/// A later run that changes a unit ends the window an earlier run opened
/// on it, as a run ends its own: judged then, and owed to the earlier run,
/// never said to the later run's guest.
#[test]
fn a_later_runs_change_ends_an_earlier_runs_window_and_the_verdict_is_the_earlier_runs() {
    let windows = Windows::default();
    let (first, second) = (windows.begin_run(), windows.begin_run());
    let (mut p1, _, t0) = guarded_with(
        SETTLE,
        &[("web", Fate::Dies(Duration::from_millis(200)))],
        |g| g.windows = Some(first.clone()),
    );
    p1.mutate(Operation::Start, "web").unwrap();
    let _ = p1.take_calls();
    assert!(first.open());
    let (mut p2, _, _) = guarded_with(
        SETTLE,
        &[("web", Fate::Dies(Duration::from_millis(200)))],
        |g| g.windows = Some(second.clone()),
    );
    // The second run's backend saw the same start, 0.5 s ago.
    p2.backend_mut().now = t0 + Duration::from_millis(500);
    p2.backend_mut().started.insert("web.service".into(), t0);
    p2.mutate(Operation::Restart, "web").unwrap();
    assert!(!first.open(), "the restart ended the first run's window");
    let verdicts = first.take_verdicts();
    assert_eq!(verdicts.len(), 1, "{verdicts:?}");
    assert_eq!(verdicts[0].record, 1, "after the run's reload");
    assert!(second.take_verdicts().is_empty());
    let job = p2.status("web").unwrap().job;
    assert!(
        job.as_ref().is_none_or(|j| j.error.is_none()),
        "the second run's guest is told of its own restart only: {job:?}"
    );
    assert!(second.open(), "the restart opened the second run's window");
    // The watch ends: every window judged now.
    p2.settle(&[], true);
    assert!(!second.open());
    assert_eq!(windows.next_end(), None);
}

/// `host run`'s windows are its own: judged within it, as before.
#[test]
fn a_run_of_its_own_waits_for_its_windows_before_handing_out_its_records() {
    let (mut p, _, t0) = guarded(SETTLE, &[]);
    p.mutate(Operation::Start, "web").unwrap();
    let _ = p.take_calls();
    assert_eq!(elapsed(&p, t0), SETTLE);
}

/// In a watch's run an enablement change after a start waits for the
/// start's window: it is never made after a start that did not count.
#[test]
fn a_watchs_run_enables_a_unit_only_once_its_start_counted() {
    let windows = Windows::default();
    let (mut p, _, t0) = guarded_with(
        SETTLE,
        &[("bad", Fate::Dies(Duration::from_millis(400)))],
        |g| g.windows = Some(windows.begin_run()),
    );
    p.mutate(Operation::Start, "bad").unwrap();
    assert!(p.status("bad").unwrap().running, "read as it is, at once");
    let error = p.mutate(Operation::Enable, "bad").unwrap_err();
    assert_eq!(elapsed(&p, t0), Duration::from_millis(400));
    assert!(
        error.message().starts_with(
            "enable bad.service was not made: the start before it did not count (bad.service \
             did not stay up"
        ),
        "{error:?}"
    );
    assert!(!p
        .backend()
        .seen
        .lock()
        .unwrap()
        .log
        .iter()
        .any(|l| l.starts_with("enable")));
    let job = p.status("bad").unwrap().job.expect("the start's outcome");
    assert!(job.error.is_some());

    p.mutate(Operation::Start, "good").unwrap();
    p.status("good").unwrap();
    p.mutate(Operation::Enable, "good").unwrap();
    assert_eq!(
        elapsed(&p, t0),
        Duration::from_millis(400) + SETTLE,
        "good's enable waited for its window"
    );
}
