//! The machine's state: every configured policy's latest outcome, whatever
//! run took it (the timer's, a watch's run for one event, a run by hand of
//! one policy). A run of some policies merges into the state of the others,
//! so that the report file, the metrics and `host status` never say less
//! than the machine is: a policy that failed an hour ago and has not run
//! since still fails here, a refused document is that policy's outcome, and
//! a `--noop` run is kept apart.
//!
//! Kept in the state directory (`machine.json`, root's alone), changed only
//! under the run lock, and written whole as the report file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::{Counts, Report, RunReport};
use crate::guest::{Done, ResourceEvent, ResourceOutcome};
use crate::left_alone::{Kind, LeftAlone};
use crate::resource::ResourceRef;
use crate::state_file::{self, Versioned};
use crate::text::{json_len_at, millis, truncate, Untrusted};

/// `text`, cut to [`MAX_WORDS`] with a marker that says so.
fn bounded(text: &str) -> String {
    truncate(text.to_owned(), MAX_WORDS, " [cut]")
}

/// The state file's name in the state directory.
pub const FILE_NAME: &str = "machine.json";
/// A refusal's or an error's words, as kept: enough to act on.
const MAX_WORDS: usize = 2048;
/// Failed resources kept per policy, with their errors.
const MAX_RESOURCES: usize = 1000;
/// Far more than the state of any machine's policies (each bounded).
const MAX_BYTES: u64 = 64 << 20;

/// What drove a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Drive {
    /// `host run` started by systemd (the timer's service).
    Timer,
    /// `host watch`.
    Watch,
    /// `host run` typed by someone.
    Manual,
}

impl Drive {
    pub fn as_str(self) -> &'static str {
        match self {
            Drive::Timer => "timer",
            Drive::Watch => "watch",
            Drive::Manual => "manual",
        }
    }

    /// A `host run`'s drive: systemd gives every service it starts an
    /// `INVOCATION_ID`, nobody's shell has one.
    pub fn of_run() -> Self {
        if std::env::var_os("INVOCATION_ID").is_some() {
            Drive::Timer
        } else {
            Drive::Manual
        }
    }
}

/// What caused a run, in one word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunCause {
    Timer,
    Manual,
    /// A watch's first run.
    Start,
    /// Something a watch saw changed.
    Event,
    /// A watch's periodic full run.
    Resync,
    /// A watch's run that could not happen, tried again.
    Retry,
    /// A unit's crash-loop hold ended.
    HoldEnded,
    /// An operator's timed pause ended.
    PauseEnded,
}

impl RunCause {
    pub fn as_str(self) -> &'static str {
        match self {
            RunCause::Timer => "timer",
            RunCause::Manual => "manual",
            RunCause::Start => "start",
            RunCause::Event => "event",
            RunCause::Resync => "resync",
            RunCause::Retry => "retry",
            RunCause::HoldEnded => "hold-ended",
            RunCause::PauseEnded => "pause-ended",
        }
    }
}

/// How a policy's latest try ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyOutcome {
    /// It ran and needed nothing (units left alone are not failures).
    Unchanged,
    /// It ran and changed something; nothing failed.
    Changed,
    /// It ran and something failed (a resource, the policy itself, or the
    /// run was cut short).
    Failed,
    /// Its policy or settings document was refused: it did not run.
    Refused,
}

impl PolicyOutcome {
    /// How `run` ended.
    pub fn of(run: &RunReport) -> Self {
        if !run.summary.success {
            PolicyOutcome::Failed
        } else if run.summary.counts.changed > 0 {
            PolicyOutcome::Changed
        } else {
            PolicyOutcome::Unchanged
        }
    }

    /// Whether the machine is as this policy wants it.
    pub fn converged(self) -> bool {
        matches!(self, PolicyOutcome::Unchanged | PolicyOutcome::Changed)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PolicyOutcome::Unchanged => "unchanged",
            PolicyOutcome::Changed => "changed",
            PolicyOutcome::Failed => "failed",
            PolicyOutcome::Refused => "refused",
        }
    }
}

/// One resource of a policy's latest run, as the state keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceState {
    /// `service#NAME`.
    pub resource: ResourceRef,
    #[serde(with = "outcome_word")]
    pub outcome: ResourceOutcome,
    /// What was done (`started`, `enabled`, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<String>,
    /// Why it failed (the host's and the policy's words, kept as given).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<Untrusted>,
    /// How its unit is left alone (`paused`, `held`), when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left_alone: Option<Kind>,
    /// What restarted it: the kinds of the references that changed
    /// (`file`, `package`), or `service` for a change earlier in the run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restarted_for: Vec<String>,
}

/// What restarted `event`'s service, when it was restarted: the kinds of
/// the references that changed (`file`, `package`), or `service` for a
/// change earlier in the run (or `--refresh`).
fn restarted_for(event: &ResourceEvent) -> Vec<String> {
    let mut kinds: Vec<String> = Vec::new();
    if !event.actions.contains(&Done::Restarted) {
        return kinds;
    }
    for trigger in &event.watch.triggered_by {
        if let Some((kind, _)) = trigger.reference.split_once('#') {
            if !kinds.iter().any(|k| k == kind) {
                kinds.push(kind.to_owned());
            }
        }
    }
    if kinds.is_empty() {
        kinds.push("service".to_owned());
    }
    kinds
}

impl ResourceState {
    fn of(event: &ResourceEvent) -> Self {
        let restarted_for = restarted_for(event);
        Self {
            resource: event.resource.clone(),
            outcome: event.outcome(),
            actions: event
                .actions
                .iter()
                .map(|a| a.as_str().to_owned())
                .collect(),
            errors: event
                .errors
                .iter()
                .map(|e| Untrusted::new(bounded(e.as_raw())))
                .collect(),
            left_alone: event.left_alone.as_ref().map(|a| a.kind),
            restarted_for,
        }
    }
}

/// Where a policy's or its settings' document came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceState {
    /// `policy` or `settings`.
    pub kind: String,
    pub location: String,
    pub digest: String,
    pub stale: bool,
}

/// One configured policy's latest outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyState {
    /// Where it comes from, as configured (a path or an `oci://`
    /// reference): what identifies it from run to run.
    pub key: String,
    /// Its name in reports.
    pub policy: String,
    pub outcome: PolicyOutcome,
    /// When it last ran or was refused (Unix seconds).
    pub at: u64,
    pub drive: Drive,
    pub cause: RunCause,
    /// Whether the last run took it. A policy the last run did not take
    /// (a watch's run for another policy's event, a run by hand of one)
    /// keeps its outcome, said not current.
    pub current: bool,
    /// Why its document was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<Untrusted>,
    /// The policy's own failure and errors (a trap, a limit, a malformed
    /// report, the reload after the run).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<Untrusted>,
    pub counts: Counts,
    /// Failed ones first; cut to the report limit (`resources_not_shown`
    /// says how many were), the counts staying whole.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ResourceState>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub resources_not_shown: usize,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<SourceState>,
    /// Whether its signature was verified, and by which key.
    #[serde(default)]
    pub verified: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
    /// How its code was obtained: `hit`, `miss`, `disabled` (the cache), or
    /// `kept` (a watch's copy from an earlier run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile_cache: Option<String>,
    /// Resources its real runs changed since the state was made.
    #[serde(default)]
    pub repairs: u64,
}

impl PolicyState {
    fn ran(run: &RunReport, at: u64, how: How, repairs: u64) -> Self {
        let mut errors: Vec<Untrusted> = run
            .errors
            .iter()
            .map(|e| Untrusted::new(bounded(e.as_raw())))
            .collect();
        if let Some(failure) = &run.failure {
            let said = failure
                .output
                .as_ref()
                .map(|output| format!("; the policy's output ends with: {output}"))
                .unwrap_or_default();
            errors.insert(
                0,
                Untrusted::new(bounded(&format!(
                    "{} ({}){said}",
                    failure.message, failure.class
                ))),
            );
        }
        let mut sources = vec![SourceState {
            kind: "policy".into(),
            location: run.source.location.clone(),
            digest: run.source.digest.clone(),
            stale: run.source.stale,
        }];
        if let Some(settings) = &run.settings_source {
            sources.push(SourceState {
                kind: "settings".into(),
                location: settings.location.clone(),
                digest: settings.digest.clone(),
                stale: settings.stale,
            });
        }
        // Failures first: they are what an operator reads.
        let mut resources: Vec<ResourceState> =
            run.resources.iter().map(ResourceState::of).collect();
        resources.sort_by_key(|r| !matches!(r.outcome, ResourceOutcome::Failed { .. }));
        let resources_not_shown = resources.len().saturating_sub(MAX_RESOURCES);
        resources.truncate(MAX_RESOURCES);
        Self {
            key: run.key.clone(),
            policy: run.policy.clone(),
            outcome: PolicyOutcome::of(run),
            at,
            drive: how.drive,
            cause: how.cause,
            current: true,
            refused: None,
            errors,
            counts: run.summary.counts,
            resources,
            resources_not_shown,
            sources,
            verified: run.signature.verified,
            key_id: run.signature.key_id.clone(),
            compile_cache: serde_json::to_value(run.compile.cache)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned)),
            repairs: repairs
                + run.summary.counts.changed as u64
                + run.summary.counts.failed_after_changes as u64,
        }
    }

    fn refused(refusal: &Refusal, at: u64, how: How, repairs: u64) -> Self {
        Self {
            key: refusal.key.clone(),
            policy: refusal.name.clone(),
            outcome: PolicyOutcome::Refused,
            at,
            drive: how.drive,
            cause: how.cause,
            current: true,
            refused: Some(Untrusted::new(bounded(&refusal.why))),
            errors: Vec::new(),
            counts: Counts::default(),
            resources: Vec::new(),
            resources_not_shown: 0,
            sources: Vec::new(),
            verified: false,
            key_id: None,
            compile_cache: None,
            repairs,
        }
    }
}

/// A policy whose document was refused: its key in the state, where its
/// policy comes from, its name, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub key: String,
    /// The policy's location as configured.
    pub source: String,
    pub name: String,
    pub why: String,
}

impl Refusal {
    /// The refusal of the policy at `source` (its state key `key`): named
    /// by its file name, or by the reference.
    pub fn new(key: String, source: &str, why: String) -> Self {
        let name = if source.starts_with("oci://") {
            source.to_owned()
        } else {
            Path::new(source)
                .file_name()
                .map_or_else(|| source.to_owned(), |n| n.to_string_lossy().into_owned())
        };
        Self {
            key,
            source: source.to_owned(),
            name,
            why,
        }
    }
}

/// A policy's key in the machine's state: where it comes from, and its
/// settings document when it has one (the manifest policy listed twice,
/// with two manifests, is two policies).
pub fn state_key(policy: &str, settings: Option<&str>) -> String {
    match settings {
        Some(settings) => format!("{policy} --settings {settings}"),
        None => policy.to_owned(),
    }
}

/// A unit the host leaves alone now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnitLeftAlone {
    /// As systemd names it; none: every unit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    pub kind: Kind,
    /// Until when (Unix seconds); none: until `host resume`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<u64>,
    pub why: String,
}

/// The last real run, of however many policies it took.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LastRun {
    pub drive: Drive,
    pub cause: RunCause,
    /// The watch's words for what woke it (`web.service changed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub said: Option<String>,
    /// When it ended (Unix seconds).
    pub ended: u64,
    pub duration_ms: f64,
    /// The policies it took, by key.
    pub policies: Vec<String>,
    /// Why it could not happen at all, when it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The signal that cut it short.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<String>,
    /// Services it restarted, by cause (`file`, `package`, `service`).
    pub restarts: BTreeMap<String, usize>,
}

/// The last `--noop` run: what it would have done, apart from the machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NoopRun {
    pub ended: u64,
    pub drive: Drive,
    pub policies: Vec<String>,
    /// Resources it would have changed.
    pub would_change: usize,
    pub counts: Counts,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A watch, as it said of itself at its last run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchState {
    /// Whether it runs (it says `false` as it stops).
    pub up: bool,
    pub pid: u32,
    /// When it started (Unix seconds).
    pub started: u64,
    pub resync_secs: u64,
    /// When its next full run is due (Unix seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_resync: Option<u64>,
    /// Its last run for an event: when, and what woke it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_event_run: Option<(u64, String)>,
    /// Holds begun since it started, by why (`crash_loop`, `fight`).
    #[serde(default)]
    pub holds: BTreeMap<String, u64>,
    /// Signals it dropped (not from systemd).
    #[serde(default)]
    pub signals_dropped: u64,
}

/// The machine's whole state, by policy: what the report file, the metrics
/// and `host status` say.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineState {
    pub format: u32,
    /// When it was last written (Unix seconds).
    pub written: u64,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    pub summary: MachineSummary,
    pub policies: Vec<PolicyState>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_alone: Vec<UnitLeftAlone>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run: Option<LastRun>,
    /// Why the last run could not happen (also in `last_run`): a report
    /// reader's first question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noop_run: Option<NoopRun>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch: Option<WatchState>,
}

/// The machine in numbers: whether it is as its policies want it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MachineSummary {
    /// Every policy converged at its latest run, none is refused, no unit
    /// is held back, and the last run could happen.
    pub success: bool,
    pub policies: usize,
    pub policies_failed: usize,
    pub policies_refused: usize,
    pub units_held_back: usize,
    pub units_paused: usize,
    #[serde(flatten)]
    pub counts: Counts,
}

impl Versioned for MachineState {
    const FORMAT: u32 = 1;

    fn format(&self) -> u32 {
        self.format
    }

    fn empty() -> Self {
        Self {
            format: Self::FORMAT,
            written: 0,
            labels: BTreeMap::new(),
            summary: MachineSummary::default(),
            policies: Vec::new(),
            left_alone: Vec::new(),
            last_run: None,
            error: None,
            noop_run: None,
            watch: None,
        }
    }
}

/// How a run came about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct How {
    pub drive: Drive,
    pub cause: RunCause,
}

/// What one run gives the state.
pub struct Ran<'a> {
    pub how: How,
    /// The watch's words for its cause, when a watch ran it.
    pub said: Option<String>,
    pub noop: bool,
    /// The run's report, or why it could not happen.
    pub result: Result<&'a Report, String>,
    /// The policies whose documents were refused.
    pub refused: &'a [Refusal],
    /// Every configured policy, by key, when the run took the whole list:
    /// the others drop out (removed from host.toml). `None` for a run of
    /// some of them, which drops nobody.
    pub configured: Option<Vec<String>>,
    /// The units left alone as the run ends (pauses in force, holds).
    pub left_alone: &'a LeftAlone,
    pub duration: Duration,
    pub labels: BTreeMap<String, String>,
}

impl MachineState {
    /// The state kept in `state_dir`; empty on a new machine.
    pub fn open(state_dir: &Path) -> anyhow::Result<(PathBuf, Self)> {
        state_file::open::<Self>(
            state_dir,
            FILE_NAME,
            MAX_BYTES,
            "the machine's state",
            "move it away to start afresh: the next run of every policy writes it again",
        )
    }

    /// Writes the state to `path` (in the state directory).
    pub fn save(&self, path: &Path) -> anyhow::Result<()> {
        state_file::write(path, self)
    }

    /// Reads a report file as written (for `host status`, which may not
    /// read the state directory); `Ok(None)` when there is none yet.
    pub fn read_report(path: &Path) -> anyhow::Result<Option<Self>> {
        use anyhow::Context as _;
        let meta = match std::fs::metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
            Ok(meta) => meta,
        };
        if meta.len() > MAX_BYTES {
            anyhow::bail!("{} is {} bytes, not a report", path.display(), meta.len());
        }
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let state: Self = serde_json::from_str(&text).with_context(|| {
            format!(
                "{} is not a report of this policy-host (the machine's state, format {})",
                path.display(),
                Self::FORMAT
            )
        })?;
        Ok(Some(state))
    }

    /// Merges one run into the state: the policies it ran or refused take
    /// their new outcome; the others keep theirs, said not current; a
    /// `--noop` run changes only `noop_run`.
    pub fn record(&mut self, ran: Ran<'_>, now: SystemTime) {
        let at = unix(now);
        self.written = at;
        self.labels = ran.labels.clone();
        self.left_alone = left_alone_now(ran.left_alone);
        if ran.noop {
            self.noop_run = Some(noop_run(&ran, at));
            self.recount();
            return;
        }
        let mut taken: Vec<String> = Vec::new();
        let mut restarts: BTreeMap<String, usize> = super::catalogue::RESTART_CAUSES
            .map(|c| (c.to_owned(), 0))
            .into();
        let (error, interrupted) = match &ran.result {
            Ok(report) => {
                for run in report.runs() {
                    let repairs = self.repairs_of(&run.key);
                    self.put(PolicyState::ran(run, at, ran.how, repairs));
                    taken.push(run.key.clone());
                    for resource in &run.resources {
                        for cause in restarted_for(resource) {
                            *restarts.entry(cause).or_default() += 1;
                        }
                    }
                }
                (None, report.interruption().map(|i| i.signal.to_owned()))
            }
            Err(error) => (Some(bounded(error)), None),
        };
        for refusal in ran.refused {
            let repairs = self.repairs_of(&refusal.key);
            self.put(PolicyState::refused(refusal, at, ran.how, repairs));
            taken.push(refusal.key.clone());
        }
        for policy in &mut self.policies {
            policy.current = taken.contains(&policy.key);
        }
        if let Some(configured) = &ran.configured {
            self.policies
                .retain(|p| configured.contains(&p.key) || taken.contains(&p.key));
        }
        self.error.clone_from(&error);
        self.last_run = Some(LastRun {
            drive: ran.how.drive,
            cause: ran.how.cause,
            said: ran.said.clone(),
            ended: at,
            duration_ms: millis(ran.duration),
            policies: taken,
            error,
            interrupted,
            restarts,
        });
        self.recount();
    }

    /// Holds the state, as written (pretty JSON), to `limit` bytes (the
    /// report limit): the resources last in each policy's list (the
    /// unchanged and changed ones; failures come first) are cut, each
    /// policy saying how many of its own were, its counts whole.
    pub fn bound(&mut self, limit: usize) {
        let mut size = json_len_at(self, 0);
        while size > limit {
            // The policy with the most resources shown gives one up.
            let Some(policy) = self
                .policies
                .iter_mut()
                .filter(|p| !p.resources.is_empty())
                .max_by_key(|p| p.resources.len())
            else {
                return;
            };
            let cut = policy.resources.pop().expect("not empty");
            policy.resources_not_shown += 1;
            // The entry as written, at its depth, and its comma.
            size = size.saturating_sub(json_len_at(&cut, 4) + 1);
            if policy.resources_not_shown == 1 {
                size += r#","resources_not_shown": 1"#.len() + 8;
            }
            if size <= limit {
                size = json_len_at(self, 0);
            }
        }
    }

    /// The watch's holds the state says are still in force at `now`: a
    /// run beside a watch (by hand) keeps them, as the watch does.
    pub fn holds_in_force(&self, now: SystemTime) -> LeftAlone {
        let mut held = LeftAlone::default();
        let now = unix(now);
        for unit in &self.left_alone {
            if let (Kind::Held, Some(name), Some(until)) = (unit.kind, &unit.unit, unit.until) {
                if until > now {
                    held.insert(
                        name.clone(),
                        crate::left_alone::Reason {
                            kind: Kind::Held,
                            until: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(until)),
                            why: unit.why.clone(),
                        },
                    );
                }
            }
        }
        held
    }

    /// Says what the watch is, beside the runs.
    pub fn set_watch(&mut self, watch: Option<WatchState>) {
        self.watch = watch;
    }

    fn repairs_of(&self, key: &str) -> u64 {
        self.policies
            .iter()
            .find(|p| p.key == key)
            .map_or(0, |p| p.repairs)
    }

    /// Replaces the policy of `state`'s key, or adds it at the end.
    fn put(&mut self, state: PolicyState) {
        match self.policies.iter_mut().find(|p| p.key == state.key) {
            Some(have) => *have = state,
            None => self.policies.push(state),
        }
    }

    /// The summary, from the policies and the units left alone.
    fn recount(&mut self) {
        let mut counts = Counts::default();
        for policy in &self.policies {
            counts.add(&policy.counts);
        }
        let held = self
            .left_alone
            .iter()
            .filter(|u| u.kind == Kind::Held)
            .count();
        let paused = self.left_alone.len() - held;
        let failed = self
            .policies
            .iter()
            .filter(|p| p.outcome == PolicyOutcome::Failed)
            .count();
        let refused = self
            .policies
            .iter()
            .filter(|p| p.outcome == PolicyOutcome::Refused)
            .count();
        let interrupted = self
            .last_run
            .as_ref()
            .is_some_and(|r| r.interrupted.is_some());
        self.summary = MachineSummary {
            success: failed == 0
                && refused == 0
                && held == 0
                && self.error.is_none()
                && !interrupted
                && counts.failed == 0,
            policies: self.policies.len(),
            policies_failed: failed,
            policies_refused: refused,
            units_held_back: held,
            units_paused: paused,
            counts,
        };
    }
}

/// What a `--noop` run would have done.
fn noop_run(ran: &Ran<'_>, at: u64) -> NoopRun {
    let (policies, counts, error) = match &ran.result {
        Ok(report) => {
            let mut counts = Counts::default();
            for run in report.runs() {
                counts.add(&run.summary.counts);
            }
            (
                report.runs().iter().map(|r| r.key.clone()).collect(),
                counts,
                None,
            )
        }
        Err(error) => (Vec::new(), Counts::default(), Some(bounded(error))),
    };
    NoopRun {
        ended: at,
        drive: ran.how.drive,
        policies,
        would_change: counts.changed + counts.failed_after_changes,
        counts,
        error,
    }
}

/// The units `left_alone` names, as the state lists them.
fn left_alone_now(left_alone: &LeftAlone) -> Vec<UnitLeftAlone> {
    left_alone
        .entries()
        .map(|(unit, reason)| UnitLeftAlone {
            unit: unit.map(str::to_owned),
            kind: reason.kind,
            until: reason.until.map(unix),
            why: reason.why.clone(),
        })
        .collect()
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Seconds since the Unix epoch.
pub fn unix(at: SystemTime) -> u64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A resource's outcome as one word: `changed`, `failed`,
/// `failed-after-changes`, `left-alone`, `unchanged`.
mod outcome_word {
    use serde::{Deserialize as _, Deserializer, Serializer};

    use crate::guest::ResourceOutcome;

    pub(super) fn serialize<S: Serializer>(
        outcome: &ResourceOutcome,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.serialize_str(outcome.as_str())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<ResourceOutcome, D::Error> {
        let word = String::deserialize(d)?;
        ResourceOutcome::parse(&word)
            .ok_or_else(|| serde::de::Error::custom(format!("not a resource outcome: {word}")))
    }
}

#[cfg(test)]
mod tests;
