//! `host watch`: one full run, then a run of the policies an event
//! concerns whenever something they manage changes, until SIGTERM or
//! SIGINT. Drift is repaired within a second of the event, and nothing is
//! done while nothing changes: no polling, no D-Bus question, no process.
//!
//! - [`wake`]: what wakes a watch: a unit's signal runs at once, a file's change after `debounce` (the rest of its burst), what comes meanwhile in one run;
//! - [`targets`]: what the runs showed each policy concerns (units, files,
//!   documents) and what every policy reads (host.toml, trusted keys);
//! - [`bus`]: the managed units' signals over the system bus;
//! - [`files`]: the followed files, with inotify;
//! - [`signals`], [`notify`]: the process's side of systemd.
//!
//! Each run is a `host run` of those policies ([`run::cycle`]): the same
//! admission (a changed document is verified again; one that fails is
//! refused, said once, and its policy waits for a good one), the same
//! lock (held only while a run runs, so `host run` and `host status` work
//! beside a watch), the same report and metrics files.

mod bus;
mod files;
mod journal;
mod notify;
mod signals;
mod targets;
mod wake;

use std::collections::{BTreeMap, VecDeque};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context as _;

use crate::cli::{RunArgs, WatchArgs};
use crate::commands::run::{self, Cycled, Selection, Settling, Sink};
use crate::guest::ResourceOutcome;
use crate::left_alone::backoff::{self, Backoff};
use crate::left_alone::{until_words, Kind, LeftAlone, Reason};
use crate::provider::Windows;
use crate::report::catalogue;
use crate::report::machine::{self, RunCause, WatchState};
use crate::report::result::{PolicyResult, StartWhy};
use crate::report::RunReport;
use crate::resource::UnitName;
use crate::settings::ConfigFile;

use self::journal::{Line, Lines};
use self::targets::{Followed, Targets};
use self::wake::{Cause, Due, FollowUp, Pending, Wake};

/// The longest a run can take within the host's own bounds (the lock wait
/// and the wall clock, by default 10 and 15 minutes), for the watchdog.
const RUN_BOUND: Duration = Duration::from_secs(30 * 60);
/// The most runs kept waiting for settle windows (each with its reports):
/// a run every 40 ms for a whole 1 s window is 25.
const SETTLING: usize = 64;
/// How soon a run that could not happen (the lock busy, host.toml wrong)
/// is tried again, when nothing else wakes the watch first.
const RETRY: Duration = Duration::from_secs(5);

/// Watches until SIGTERM or SIGINT; returns the exit code (0). Root only,
/// refused before anything else (no bus, no inotify, no file read): a
/// watch of another user could never run (the state directory and the lock
/// are root's) and would only retry, and hold the bus's attention, forever.
pub fn execute(watch_args: &WatchArgs) -> anyhow::Result<i32> {
    refuse_unless_root()?;
    let mut timing = Timing::resolve(watch_args).context("reading the watch's settings")?;
    let args = &watch_args.run;
    let (wakes, woken) = std::sync::mpsc::channel();
    signals::start(wakes.clone()).context("taking SIGTERM, SIGINT and SIGHUP")?;
    let bus =
        bus::UnitFollower::start(wakes.clone()).context("starting to follow the system bus")?;
    let mut files = files::FileWatch::start(wakes).context("starting inotify")?;
    let mut watch = Watch::new(Lines::choose());
    let watchdog = notify::Watchdog::start();
    let salt = u64::from(std::process::id())
        ^ SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
    let mut due = Due {
        selection: Selection::All,
        causes: vec![Cause::Start],
    };
    let mut next_resync = wake::next_resync(Instant::now(), timing.resync, salt);
    let mut ready = false;
    loop {
        if let Some(dog) = &watchdog {
            dog.alive_for(RUN_BOUND);
        }
        let me = watch.account(&timing, bus.dropped(), next_resync);
        let ran = watch.run(args, &due, me);
        // host.toml may have changed (SIGHUP, or a change the watch saw):
        // its timing too, from the run's own reading of it. A run that
        // could not happen keeps the last (it said why).
        if let Some(now) = ran
            .config
            .as_ref()
            .and_then(|file| Timing::of(watch_args, file).ok())
        {
            timing = now;
        }
        bus.follow(watch.targets.units());
        files.follow(&watch.followed(args));
        if due.selection == Selection::All {
            next_resync = wake::next_resync(Instant::now(), timing.resync, salt ^ watch.runs);
        }
        let status = watch.status();
        if ready {
            notify::status(&status);
        } else {
            notify::ready(&status);
            ready = true;
        }
        let mut pending = Pending::following(ran.follow_ups);
        match watch.wait(
            &woken,
            &mut pending,
            (next_resync, timing.debounce),
            watchdog.as_ref(),
        ) {
            Next::Run(next) => due = next,
            Next::Stop(signal) => {
                notify::stopping();
                // Runs whose windows are open are judged now, and reported.
                watch.settle(&[], true);
                // Monitoring sees the watch stop, not a watch gone quiet.
                let mut me = watch.account(&timing, bus.dropped(), next_resync);
                me.up = false;
                if let Err(e) = run::note_watch(args, me) {
                    tracing::warn!("the watch's end is not in the metrics: {e:#}");
                }
                watch
                    .lines
                    .note(&format!("{signal} received: the watch ends"));
                return Ok(0);
            }
        }
    }
}

/// The watch is root's: another user's is refused before it starts
/// anything.
fn refuse_unless_root() -> anyhow::Result<()> {
    let euid = crate::fs_safety::euid();
    if euid != 0 {
        anyhow::bail!(
            "the watch applies policies as root and keeps root's state: run it as root (as \
             policy-host-watch.service does), not as uid {euid}"
        );
    }
    Ok(())
}

/// When a watch runs: `resync` and `debounce`, from the flags, else
/// host.toml's `[watch]`, else their defaults.
struct Timing {
    resync: Duration,
    debounce: Duration,
}

impl Timing {
    /// Before the first run: host.toml read for the watch's settings alone.
    fn resolve(args: &WatchArgs) -> anyhow::Result<Self> {
        Self::of(args, &ConfigFile::load(args.run.trust.config.path())?)
    }

    /// From a run's reading of host.toml.
    fn of(args: &WatchArgs, file: &ConfigFile) -> anyhow::Result<Self> {
        let values = args.watch_flags.resolve(file)?;
        Ok(Self {
            resync: values.resync,
            debounce: values.debounce,
        })
    }
}

/// What one run of the watch gave: host.toml as it read it (`None` when
/// the run could not happen), and the runs it asks for next.
struct Ran {
    config: Option<ConfigFile>,
    follow_ups: Vec<FollowUp>,
}

enum Next {
    Run(Due),
    Stop(&'static str),
}

/// What the watch knows between runs.
struct Watch {
    lines: Lines,
    targets: Targets,
    /// Policies refused, with the message said (each said once).
    refused: BTreeMap<String, String>,
    /// The starts the watch made of each unit, and the holds they began.
    hold: Holds,
    /// When the next of the operator's timed pauses ends: a full run then.
    pause_ends: Option<SystemTime>,
    /// The last error of a run that could not happen (said once).
    failed: Option<String>,
    last_repair: Option<String>,
    runs: u64,
    /// When the watch started.
    started: SystemTime,
    /// The last run for an event: when, and what woke it.
    last_event_run: Option<(u64, String)>,
    /// The engine and the compiled policies, from one run to the next.
    kept: run::Kept,
    /// The settle windows its runs left open, shared by them all.
    windows: Windows,
    /// Runs whose reports wait for their windows (or for an earlier run's),
    /// oldest first: reported in that order.
    settling: VecDeque<Settling>,
}

impl Watch {
    fn new(lines: Lines) -> Self {
        Self {
            lines,
            targets: Targets::default(),
            refused: BTreeMap::new(),
            hold: Holds::default(),
            pause_ends: None,
            failed: None,
            last_repair: None,
            runs: 0,
            started: SystemTime::now(),
            last_event_run: None,
            kept: run::Kept::default(),
            windows: Windows::default(),
            settling: VecDeque::new(),
        }
    }

    /// Waits for the next run: wakes gathered until due, or the resync.
    fn wait(
        &mut self,
        woken: &Receiver<Wake>,
        pending: &mut Pending,
        (next_resync, debounce): (Instant, Duration),
        watchdog: Option<&notify::Watchdog>,
    ) -> Next {
        loop {
            if self
                .windows
                .next_end()
                .is_some_and(|end| end <= Instant::now())
            {
                self.settle(&[], false);
            }
            self.report_settled();
            let now = Instant::now();
            if let Some(due) = pending.take_if_due(now, debounce) {
                return Next::Run(due);
            }
            if now >= next_resync {
                return Next::Run(Due {
                    selection: Selection::All,
                    causes: vec![Cause::Resync],
                });
            }
            let mut until = next_resync;
            if let Some(at) = pending.due_at(debounce) {
                until = until.min(at);
            }
            if let Some(end) = self.windows.next_end() {
                until = until.min(end);
            }
            if let Some(dog) = watchdog {
                // Alive while waiting, a little past the wait's end.
                dog.alive_for(until.saturating_duration_since(now) + Duration::from_secs(10));
            }
            match woken.recv_timeout(until.saturating_duration_since(now)) {
                Ok(wake) => {
                    // With what else came meanwhile (a run under way makes the
                    // wakes queue): one run for them all.
                    let mut moved = Vec::new();
                    for wake in std::iter::once(wake).chain(woken.try_iter()) {
                        if let Wake::Stop(signal) = wake {
                            return Next::Stop(signal);
                        }
                        if let Wake::Unit(unit) = &wake {
                            moved.push(unit.clone());
                        }
                        let (keys, cause) = self.targets.concerned(&wake);
                        if wake.may_burst() {
                            pending.add(keys, Cause::Event(cause), Instant::now());
                        } else {
                            pending.add_lone(keys, Cause::Event(cause), Instant::now());
                        }
                    }
                    // A unit that went down inside its window is judged now,
                    // before the run it wakes.
                    if !moved.is_empty() {
                        self.settle(&moved, false);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                // Every watcher is gone: only resyncs are left.
                Err(RecvTimeoutError::Disconnected) => {
                    std::thread::sleep(until.saturating_duration_since(Instant::now()));
                }
            }
        }
    }

    /// What the watch says of itself in the machine's state.
    fn account(&self, timing: &Timing, signals_dropped: u64, next_resync: Instant) -> WatchState {
        let next = SystemTime::now() + next_resync.saturating_duration_since(Instant::now());
        WatchState {
            up: true,
            pid: std::process::id(),
            started: machine::unix(self.started),
            resync_secs: timing.resync.as_secs(),
            next_resync: Some(machine::unix(next)),
            last_event_run: self.last_event_run.clone(),
            holds: self.hold.begun.clone(),
            signals_dropped,
        }
    }

    /// Runs what `due` says (a line per resource changed or failed);
    /// returns what the run read of host.toml and the runs it asks for
    /// next: the ends of holds and of the next timed pause, and a retry
    /// when it could not happen.
    fn run(&mut self, args: &RunArgs, due: &Due, mut me: WatchState) -> Ran {
        self.make_room();
        self.runs += 1;
        let cause = due.causes_said();
        let now = Instant::now();
        self.hold.backoff.forget_healthy(now);
        if matches!(due.run_cause(), RunCause::Event) {
            self.last_event_run = Some((machine::unix(SystemTime::now()), cause.clone()));
            me.last_event_run.clone_from(&self.last_event_run);
        }
        let held = self.held(now);
        let watch_run = run::WatchRun {
            windows: &self.windows,
            lock: self.settling.back().map(Settling::lock),
            selection: &due.selection,
            first: self.runs == 1,
            held,
            cause: due.run_cause(),
            said: cause.clone(),
            watch: me,
        };
        let mut sink = Results::new(&self.lines, &mut self.hold, &cause);
        let cycled = run::cycle(args, watch_run, &mut self.kept, &mut sink);
        if let Some(last) = sink.last {
            self.last_repair = Some(last);
        }
        let mut follow_ups = Vec::new();
        let config = match cycled {
            Ok(mut cycled) => {
                if self.failed.take().is_some() {
                    self.lines.note("runs happen again");
                }
                self.learn(&cycled);
                if let Some(settling) = cycled.settling.take() {
                    // One connection to systemd judges them all: the newest.
                    if let Some(older) = self.settling.back_mut() {
                        older.let_go_of_provider();
                    }
                    self.settling.push_back(settling);
                }
                Some(cycled.config)
            }
            Err(e) => {
                let message = format!("{e:#}");
                if self.failed.as_ref() != Some(&message) {
                    tracing::error!("a run could not happen ({cause}): {message}");
                    self.failed = Some(message);
                }
                follow_ups.push(FollowUp {
                    at: Instant::now() + RETRY,
                    keys: match &due.selection {
                        Selection::All => None,
                        Selection::Only(keys) => Some(keys.clone()),
                    },
                    cause: Cause::Retry,
                });
                None
            }
        };
        let now = Instant::now();
        follow_ups.extend(self.hold_ends(now));
        if let Some(end) = self.pause_ends {
            // A second late: the pause is over by then, whatever the rounding.
            let after =
                end.duration_since(SystemTime::now()).unwrap_or_default() + Duration::from_secs(1);
            follow_ups.push(FollowUp {
                at: now + after,
                keys: None,
                cause: Cause::PauseEnded,
            });
        }
        Ran { config, follow_ups }
    }

    /// Judges the open windows that are due (every one when `all`; see
    /// [`crate::provider::Provider::settle`]), then reports, in order, the
    /// runs no window holds back any more.
    fn settle(&mut self, moved: &[String], all: bool) {
        if let Some(provider) = self.settling.back_mut().and_then(Settling::provider) {
            provider.settle(moved, all);
        }
        self.report_settled();
    }

    /// At most [`SETTLING`] runs wait for their windows: past that (drifts
    /// coming faster than windows end, for long), the next run waits for
    /// the oldest windows' ends, so that what the watch keeps stays bounded.
    fn make_room(&mut self) {
        while self.settling.len() >= SETTLING {
            let Some(end) = self.windows.next_end() else {
                // Nothing open: the runs are reported now.
                self.report_settled();
                break;
            };
            std::thread::sleep(end.saturating_duration_since(Instant::now()));
            self.settle(&[], false);
        }
    }

    /// Reports, in order, the runs no window holds back any more (a later
    /// run's change may have ended the last one).
    fn report_settled(&mut self) {
        while self.settling.front().is_some_and(|s| !s.open()) {
            let Some(settled) = self.settling.pop_front() else {
                break;
            };
            let cause = settled.said().to_owned();
            let mut sink = Results::new(&self.lines, &mut self.hold, &cause);
            settled.finish(&mut sink);
            if let Some(last) = sink.last {
                self.last_repair = Some(last);
                notify::status(&self.status());
            }
        }
    }

    fn learn(&mut self, cycled: &Cycled) {
        for refusal in &cycled.refused {
            let (key, message) = (&refusal.key, &refusal.why);
            if self.refused.get(key) != Some(message) {
                // A journal entry of its own (`ACTION=refused`), as the
                // machine's state says it.
                let text = format!(
                    "policy {} refused, it does not run until a good one appears: {}",
                    crate::text::one_line(key),
                    crate::text::one_line(message)
                );
                self.lines.say(&Line {
                    policy: &refusal.name,
                    unit: None,
                    action: "refused",
                    cause: "its document changed or was read again",
                    text: &text,
                });
                self.refused.insert(key.clone(), message.clone());
            }
        }
        for concern in &cycled.concerns {
            if self.refused.remove(&concern.key).is_some() {
                self.lines
                    .note(&format!("policy {} admitted again", concern.key));
            }
        }
        self.refused
            .retain(|key, _| cycled.planned.iter().any(|p| &p.key == key));
        self.targets
            .learn(&cycled.planned, &cycled.concerns, &cycled.inputs);
        self.pause_ends = next_pause_end(&cycled.inputs.pauses);
    }

    /// The units held back at `now`, as the next run leaves them alone.
    fn held(&self, now: Instant) -> LeftAlone {
        self.hold.held_now(now)
    }

    /// When each hold ends, with the policies of its unit: a run then, so
    /// that a unit that stays down is started again without another event.
    fn hold_ends(&self, now: Instant) -> Vec<FollowUp> {
        self.hold
            .backoff
            .held(now)
            .map(|(unit, until)| {
                let (keys, _) = self.targets.concerned(&Wake::Unit(unit.to_owned()));
                FollowUp {
                    at: until,
                    keys,
                    cause: Cause::HoldEnded(unit.to_owned()),
                }
            })
            .collect()
    }

    /// The paths to follow; before any run could read host.toml, host.toml
    /// alone (its fix is what the watch waits for).
    fn followed(&self, args: &RunArgs) -> Vec<Followed> {
        let followed = self.targets.followed();
        if !followed.is_empty() {
            return followed;
        }
        let config = args
            .trust
            .config
            .path()
            .map_or_else(|| crate::settings::DEFAULT_CONFIG_FILE.into(), Into::into);
        vec![Followed {
            path: config,
            tree: false,
        }]
    }

    /// systemd's `STATUS=`.
    fn status(&self) -> String {
        let (policies, units) = self.targets.counts();
        let mut status = watching(policies, units);
        if !self.refused.is_empty() {
            status.push_str(&format!("; {} refused", self.refused.len()));
        }
        let held = self.hold.backoff.held(Instant::now()).count();
        if held > 0 {
            status.push_str(&format!("; {held} held back"));
        }
        if let Some(repair) = &self.last_repair {
            status.push_str("; last: ");
            status.push_str(repair);
        }
        status
    }
}

/// Why the backoff holds a unit back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HoldReason {
    /// It died on its own (systemd said `failed`) after the host started it.
    CrashLoop,
    /// Someone kept stopping it, and the host kept starting it again.
    Fight,
}

impl HoldReason {
    /// Its label in the metrics.
    fn label(self) -> &'static str {
        match self {
            HoldReason::CrashLoop => catalogue::HOLD_REASONS[0],
            HoldReason::Fight => catalogue::HOLD_REASONS[1],
        }
    }

    /// What it is, in the hold's words.
    fn words(self) -> String {
        match self {
            HoldReason::CrashLoop => "it died on its own each time (a crash loop)".to_owned(),
            HoldReason::Fight => format!(
                "someone stopped it each time and the host started it again (a fight: `{}` \
                 lets the other side have it)",
                crate::program::command("pause UNIT")
            ),
        }
    }
}

/// The watch's backoff: the starts it made of each unit, the holds they
/// began, and why.
#[derive(Default)]
struct Holds {
    backoff: Backoff,
    /// Why each unit held back is held.
    why: BTreeMap<String, HoldReason>,
    /// Holds begun since the watch started, by why.
    begun: BTreeMap<String, u64>,
}

impl Holds {
    /// The units held back at `now`, each with why, as a run leaves them
    /// alone.
    fn held_now(&self, now: Instant) -> LeftAlone {
        held_now(&self.backoff, &self.why, now)
    }
}

/// The units held back at `now`, each with why, as a run leaves them alone.
fn held_now(backoff: &Backoff, holding: &BTreeMap<String, HoldReason>, now: Instant) -> LeftAlone {
    let mut held = LeftAlone::default();
    for (unit, until) in backoff.held(now) {
        let until = SystemTime::now() + until.saturating_duration_since(now);
        let reason = holding.get(unit).copied().unwrap_or(HoldReason::CrashLoop);
        held.insert(
            unit.to_owned(),
            Reason {
                kind: Kind::Held,
                until: Some(until),
                why: format!(
                    "held back after {} starts within {}s: {} {}",
                    backoff::STARTS,
                    backoff::WINDOW.as_secs(),
                    reason.words(),
                    until_words(Some(until))
                ),
            },
        );
    }
    held
}

/// The watch's sink: each policy's result, as it finishes, said in the
/// journal and counted by the backoff.
struct Results<'w> {
    lines: &'w Lines,
    hold: &'w mut Holds,
    cause: &'w str,
    /// The last line said, for the status.
    last: Option<String>,
}

impl<'w> Results<'w> {
    fn new(lines: &'w Lines, hold: &'w mut Holds, cause: &'w str) -> Self {
        Self {
            lines,
            hold,
            cause,
            last: None,
        }
    }
}

impl Sink for Results<'_> {
    /// The backoff counts a run's starts as it makes them: the next run,
    /// which may come before this one's windows end, holds back by them.
    fn acted(&mut self, result: &PolicyResult<'_>) {
        self.count_starts(result);
    }

    fn finished(&mut self, result: &PolicyResult<'_>) {
        if let Some(last) = log_changes(self.lines, result.report, self.cause) {
            self.last = Some(last);
        }
    }

    fn held(&self) -> LeftAlone {
        self.hold.held_now(Instant::now())
    }
}

impl Results<'_> {
    /// Counts the starts the run made of units found down (a restart for
    /// a subscription is neither a crash nor a fight); says each hold that
    /// begins, named for what it is.
    fn count_starts(&mut self, result: &PolicyResult<'_>) {
        let now = Instant::now();
        let policy = &result.report.policy;
        for start in &result.starts {
            let StartWhy::Down { failed } = start.why else {
                continue;
            };
            let unit = start.unit.as_str();
            let Some(hold) = self.hold.backoff.started(unit, now) else {
                continue;
            };
            let reason = if failed {
                HoldReason::CrashLoop
            } else {
                HoldReason::Fight
            };
            self.hold.why.insert(unit.to_owned(), reason);
            *self
                .hold
                .begun
                .entry(reason.label().to_owned())
                .or_default() += 1;
            let text = format!(
                "{policy}: {unit}: held back for {}: the host started it {} times within {}s and \
                 {}; no start before {}; cause: {}",
                humantime::format_duration(hold.length),
                hold.recent_starts,
                backoff::WINDOW.as_secs(),
                reason.words(),
                humantime::format_rfc3339_seconds(
                    SystemTime::now() + hold.until.saturating_duration_since(now)
                ),
                self.cause,
            );
            self.lines.say(&Line {
                policy,
                unit: Some(unit),
                action: "held",
                cause: self.cause,
                text: &text,
            });
        }
    }
}

/// When the next timed pause in `paused.json` ends, if one does; a record
/// that cannot be read is the runs' to report.
fn next_pause_end(pauses: &std::path::Path) -> Option<SystemTime> {
    let dir = pauses.parent()?;
    let (_, record) = crate::left_alone::pause::Pauses::open(dir).ok()?;
    let now = SystemTime::now();
    record
        .listed(now)
        .into_iter()
        .filter_map(|(_, pause)| pause.until())
        .min()
}

/// Says one line per resource a policy's run changed or failed (nothing
/// for a run that changed nothing); returns the last, for the status.
fn log_changes(lines: &Lines, run: &RunReport, cause: &str) -> Option<String> {
    let mut last = None;
    if let Some(failure) = &run.failure {
        let what = format!("failed ({}): {}", failure.class, failure.message);
        let text = format!("{}: {what}; cause: {cause}", run.policy);
        lines.say(&Line {
            policy: &run.policy,
            unit: None,
            action: "failed",
            cause,
            text: &text,
        });
        last = Some(format!("{}: {what}", run.policy));
    }
    for resource in run.resources.iter().filter(|r| r.worth_a_line()) {
        let (action, what) = if matches!(resource.outcome(), ResourceOutcome::Failed { .. }) {
            let errors: Vec<String> = resource.errors.iter().map(ToString::to_string).collect();
            (
                "failed".to_owned(),
                format!("failed: {}", errors.join("; ")),
            )
        } else if resource.noop {
            // The policy's own account ("Would have started"), else
            // the action's words.
            let what = match &resource.noop_message {
                Some(message) => lowercase_first(&message.to_string()),
                None => "would change".to_owned(),
            };
            ("would change".to_owned(), what)
        } else {
            let actions: Vec<&str> = resource.actions.iter().map(|a| a.as_str()).collect();
            (actions.join(", "), actions.join(", "))
        };
        let unit = resource.resource.unit();
        let summary = format!("{}: {}: {what}", run.policy, resource.resource);
        let text = format!("{summary}; cause: {cause}");
        lines.say(&Line {
            policy: &run.policy,
            unit: unit.as_ref().map(UnitName::as_str),
            action: &action,
            cause,
            text: &text,
        });
        last = Some(summary);
    }
    last
}

/// `watching 1 policy, 2 units`: the status's start.
fn watching(policies: usize, units: usize) -> String {
    format!(
        "watching {policies} {}, {units} {}",
        if policies == 1 { "policy" } else { "policies" },
        if units == 1 { "unit" } else { "units" }
    )
}

/// `text` with its first letter in lower case, for the middle of a line:
/// `Would have started` → `would have started`.
fn lowercase_first(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    #[test]
    fn the_status_counts_in_words_that_agree() {
        assert_eq!(watching(1, 1), "watching 1 policy, 1 unit");
        assert_eq!(watching(1, 2), "watching 1 policy, 2 units");
        assert_eq!(watching(0, 0), "watching 0 policies, 0 units");
        assert_eq!(watching(3, 1), "watching 3 policies, 1 unit");
    }

    #[test]
    fn a_noop_line_says_the_policys_account_once() {
        assert_eq!(
            lowercase_first("Would have started, would have enabled"),
            "would have started, would have enabled"
        );
        assert_eq!(lowercase_first(""), "");
    }

    fn timing(config: &std::path::Path, flags: &[&str]) -> anyhow::Result<Timing> {
        let mut argv = vec!["host", "watch", "--config", config.to_str().unwrap()];
        argv.extend_from_slice(flags);
        let cli = crate::cli::Cli::try_parse_from(argv).unwrap();
        let crate::cli::Command::Watch(args) = cli.command else {
            panic!("not a watch");
        };
        Timing::resolve(&args)
    }

    #[test]
    fn resync_and_debounce_come_from_the_flags_else_host_toml_else_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("host.toml");
        std::fs::write(&config, "").unwrap();
        let t = timing(&config, &[]).unwrap();
        assert_eq!(
            (t.resync, t.debounce),
            (Duration::from_secs(900), Duration::from_millis(100))
        );
        std::fs::write(&config, "[watch]\nresync_secs = 60\ndebounce_secs = 0.25\n").unwrap();
        let t = timing(&config, &[]).unwrap();
        assert_eq!(
            (t.resync, t.debounce),
            (Duration::from_secs(60), Duration::from_millis(250))
        );
        let t = timing(&config, &["--debounce", "0.5"]).unwrap();
        assert_eq!(
            (t.resync, t.debounce),
            (Duration::from_secs(60), Duration::from_millis(500))
        );
        std::fs::write(&config, "[watch]\nresync_secs = 0\n").unwrap();
        let error = format!("{:#}", timing(&config, &[]).err().unwrap());
        assert!(error.contains("watch.resync_secs"), "{error}");
    }
}
