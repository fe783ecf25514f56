//! What `host status` with no unit named shows first: the machine's state,
//! read from the report file host.toml names (`report_file`) as the same
//! typed state the runs wrote, what drives it (the watch or the timer), and
//! the timer's next run as systemd says it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::guest::ResourceOutcome;
use crate::left_alone::Kind;
use crate::provider::runner::{CommandRunner, ProcessRunner};
use crate::report::machine::{
    Drive, MachineState, PolicyOutcome, PolicyState, RunCause, WatchState,
};
use crate::text::one_line;

/// The timer that runs host.toml's list (the package's, and dist/systemd's).
pub(super) const TIMER: &str = "policy-host.timer";

/// The machine's state, as the report file says it: the same type the runs
/// wrote.
#[derive(Debug, Serialize)]
pub(super) struct LastRun {
    pub(super) report: PathBuf,
    #[serde(flatten)]
    pub(super) state: MachineState,
}

/// A unit of the host's own (the timer, the watch), as systemd says it.
#[derive(Debug, Serialize)]
pub(super) struct Timer {
    pub(super) unit: &'static str,
    pub(super) active: String,
    pub(super) enabled: String,
    /// `NextElapseUSecRealtime`, as systemctl prints it; empty when none.
    pub(super) next: String,
    pub(super) last: String,
}

/// What drives the machine's runs: the watch, the timer, or nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum Driver {
    Watch,
    Timer,
    Nothing,
}

impl LastRun {
    /// Reads the report at `path`; `Ok(None)` when there is none yet.
    pub(super) fn read(path: &Path) -> anyhow::Result<Option<Self>> {
        Ok(MachineState::read_report(path)?.map(|state| Self {
            report: path.to_owned(),
            state,
        }))
    }

    /// The units the policies' latest runs managed, as the policies named
    /// them (`service#web` → `web`).
    pub(super) fn units(&self) -> Vec<String> {
        let mut units: Vec<String> = Vec::new();
        for resource in self.state.policies.iter().flat_map(|p| &p.resources) {
            let name = resource.resource.name();
            if !units.iter().any(|u| u == name) {
                units.push(name.to_owned());
            }
        }
        units
    }

    /// Whether the machine is as its policies want it.
    pub(super) fn well(&self) -> bool {
        self.state.summary.success
    }

    /// The lines for people (report text escaped).
    pub(super) fn render(&self, driver: Driver, now: SystemTime) -> String {
        let mut out = String::new();
        let state = &self.state;
        let _ = writeln!(out, "{}", verdict(state));
        let c = &state.summary.counts;
        let _ = writeln!(
            out,
            "resources: {} ({} changed, {} failed, {} left alone, {} unchanged) at each policy's latest run",
            c.resources, c.changed, c.failed, c.left_alone, c.unchanged
        );
        let _ = writeln!(out, "{}", drive_line(driver, state.watch.as_ref(), now));
        if let Some(run) = &state.last_run {
            let _ = writeln!(out, "{}", last_run_line(run, now));
        }
        for policy in &state.policies {
            render_policy(&mut out, policy, now);
        }
        for unit in state.left_alone.iter().filter(|u| u.kind == Kind::Held) {
            let _ = writeln!(
                out,
                "held back: {}: {}",
                one_line(unit.unit.as_deref().unwrap_or("every unit")),
                one_line(&unit.why)
            );
        }
        if let Some(noop) = &state.noop_run {
            let _ = writeln!(
                out,
                "last --noop run: {} ({}): would change {} (apart from the machine's state){}",
                rfc3339(noop.ended),
                ago(noop.ended, now),
                noop.would_change,
                noop.error
                    .as_deref()
                    .map(|e| format!("; could not happen: {}", one_line(e)))
                    .unwrap_or_default()
            );
        }
        out
    }
}

/// `machine: well: ...` or `machine: NOT WELL: ...` and why.
fn verdict(state: &MachineState) -> String {
    let s = &state.summary;
    if s.success {
        return format!(
            "machine: well: {} {} converged",
            s.policies,
            plural(s.policies, "policy", "policies")
        );
    }
    let mut why = Vec::new();
    if s.policies_failed > 0 {
        why.push(format!(
            "{} of {} policies failed",
            s.policies_failed, s.policies
        ));
    }
    if s.policies_refused > 0 {
        why.push(format!("{} refused", s.policies_refused));
    }
    if s.units_held_back > 0 {
        why.push(format!(
            "{} {} held back",
            s.units_held_back,
            plural(s.units_held_back, "unit", "units")
        ));
    }
    if let Some(error) = &state.error {
        why.push(format!(
            "the last run could not happen: {}",
            one_line(error)
        ));
    }
    if why.is_empty() {
        why.push("the last run was cut short".to_owned());
    }
    format!("machine: NOT WELL: {}", why.join(", "))
}

/// The last real run: when, how it came about, what it took.
fn last_run_line(run: &crate::report::machine::LastRun, now: SystemTime) -> String {
    let said = run
        .said
        .as_deref()
        .map(|s| format!(" ({})", one_line(s)))
        .unwrap_or_default();
    format!(
        "last run: {} ({}), {}{said}; {} {}{}",
        rfc3339(run.ended),
        ago(run.ended, now),
        how_words(run.drive, run.cause),
        run.policies.len(),
        plural(run.policies.len(), "policy", "policies"),
        run.interrupted
            .as_deref()
            .map(|s| format!(", cut short by {s}"))
            .unwrap_or_default()
    )
}

/// One policy: its outcome, when and why it ran, what failed.
fn render_policy(out: &mut String, policy: &PolicyState, now: SystemTime) {
    let outcome = match policy.outcome {
        PolicyOutcome::Failed => "FAILED",
        PolicyOutcome::Refused => "REFUSED",
        other => other.as_str(),
    };
    let c = &policy.counts;
    let _ = writeln!(
        out,
        "policy {}: {outcome} ({}, {}{}): {} resources, {} changed, {} failed, {} left alone",
        one_line(&policy.policy),
        ago(policy.at, now),
        how_words(policy.drive, policy.cause),
        if policy.current {
            ""
        } else {
            "; not in the last run"
        },
        c.resources,
        c.changed,
        c.failed,
        c.left_alone,
    );
    if let Some(why) = &policy.refused {
        let _ = writeln!(out, "  refused: {why}");
    }
    for error in &policy.errors {
        let _ = writeln!(out, "  error: {error}");
    }
    let failed = policy
        .resources
        .iter()
        .filter(|r| matches!(r.outcome, ResourceOutcome::Failed { .. }));
    for resource in failed.take(10) {
        let errors: Vec<String> = resource.errors.iter().map(ToString::to_string).collect();
        let _ = writeln!(
            out,
            "  failed: {}: {}",
            resource.resource,
            errors.join("; ")
        );
    }
    for resource in policy
        .resources
        .iter()
        .filter(|r| r.left_alone == Some(Kind::Paused))
    {
        let _ = writeln!(out, "  paused: {}", resource.resource);
    }
    for source in &policy.sources {
        let _ = writeln!(
            out,
            "  {}: {}{}{}",
            one_line(&source.kind),
            one_line(&source.location),
            if source.digest.is_empty() {
                String::new()
            } else {
                format!(" ({})", one_line(&source.digest))
            },
            if source.stale {
                ", STALE: the registry could not be reached"
            } else {
                ""
            }
        );
    }
}

/// What drives the machine, in one line.
fn drive_line(driver: Driver, watch: Option<&WatchState>, now: SystemTime) -> String {
    match (driver, watch) {
        (Driver::Watch, Some(watch)) => {
            let mut line = format!(
                "driven by the watch (pid {}) since {} ({})",
                watch.pid,
                rfc3339(watch.started),
                ago(watch.started, now)
            );
            match &watch.last_event_run {
                Some((at, cause)) => {
                    let _ = write!(
                        line,
                        "; last event run {} (cause: {})",
                        ago(*at, now),
                        one_line(cause)
                    );
                }
                None => line.push_str("; no event run yet"),
            }
            if let Some(next) = watch.next_resync {
                let _ = write!(line, "; next resync {}", rfc3339(next));
            }
            line
        }
        (Driver::Watch, None) => "driven by the watch, which has not run yet".to_owned(),
        (Driver::Timer, _) => format!("driven by the timer ({TIMER})"),
        (Driver::Nothing, _) => format!(
            "driven by nothing: no watch runs and {TIMER} is not active (runs happen only by hand)"
        ),
    }
}

/// How a run came about, in words: `by hand`, `by the timer`, `by the
/// watch, for an event`.
fn how_words(drive: Drive, cause: RunCause) -> &'static str {
    match (drive, cause) {
        (Drive::Manual, _) => "by hand",
        (Drive::Timer, _) => "by the timer",
        (Drive::Watch, RunCause::Start) => "by the watch, its first run",
        (Drive::Watch, RunCause::Resync) => "by the watch, a resync",
        (Drive::Watch, RunCause::Retry) => "by the watch, a retry",
        (Drive::Watch, RunCause::HoldEnded) => "by the watch, as a hold ended",
        (Drive::Watch, RunCause::PauseEnded) => "by the watch, as a pause ended",
        (Drive::Watch, _) => "by the watch, for an event",
    }
}

fn plural<'w>(n: usize, one: &'w str, many: &'w str) -> &'w str {
    if n == 1 {
        one
    } else {
        many
    }
}

fn rfc3339(unix: u64) -> String {
    humantime::format_rfc3339_seconds(SystemTime::UNIX_EPOCH + Duration::from_secs(unix))
        .to_string()
}

/// `3m 2s ago`, from Unix seconds.
fn ago(unix: u64, now: SystemTime) -> String {
    let when = SystemTime::UNIX_EPOCH + Duration::from_secs(unix);
    now.duration_since(when)
        .map(|d| {
            format!(
                "{} ago",
                humantime::format_duration(Duration::from_secs(d.as_secs()))
            )
        })
        .unwrap_or_else(|_| "in the future".to_owned())
}

impl Timer {
    /// Asks systemd with `systemctl show`; `None` when it cannot answer.
    pub(super) fn read(systemctl: &Path, timeout: Duration) -> Option<Self> {
        use crate::provider::systemd::words::property::{
            ACTIVE_STATE, LAST_TRIGGER, NEXT_ELAPSE_REALTIME, UNIT_FILE_STATE,
        };
        let properties = format!(
            "--property={ACTIVE_STATE},{UNIT_FILE_STATE},{NEXT_ELAPSE_REALTIME},{LAST_TRIGGER}"
        );
        let output = ProcessRunner
            .run(
                systemctl,
                &["show", &properties, "--system", "--", TIMER],
                timeout,
            )
            .ok()
            .filter(|o| o.success())?;
        let value = |key: &str| {
            output
                .stdout
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{key}=")))
                .unwrap_or_default()
                .to_owned()
        };
        Some(Self {
            unit: TIMER,
            active: value(ACTIVE_STATE),
            enabled: value(UNIT_FILE_STATE),
            next: value(NEXT_ELAPSE_REALTIME),
            last: value(LAST_TRIGGER),
        })
    }

    pub(super) fn render(&self) -> String {
        let next = if self.next.is_empty() || self.next == "n/a" {
            "no next run scheduled".to_owned()
        } else {
            format!("next run {}", self.next)
        };
        format!(
            "timer: {} {}, {}; {next}\n",
            self.unit,
            one_line(&self.active),
            one_line(&self.enabled)
        )
    }
}
