//! The last phase of a run: the report on stdout, then the machine's state
//! (the run merged into it) written as the report and the metrics files,
//! whatever the run's outcome.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::Context as _;

use crate::atomic_file;
use crate::left_alone::pause::Pauses;
use crate::left_alone::LeftAlone;
use crate::lock::{RunLock, Wait};
use crate::report::machine::{Drive, How, MachineState, Ran, Refusal, WatchState};
use crate::report::{render_human, render_metrics, Report, Style, Verbosity};
use crate::state_file::Versioned as _;

/// How the report is printed on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Printed {
    /// `--json`: the one JSON document.
    Json,
    /// The human report, at this verbosity (`-q`, `-v`).
    Human(Verbosity),
}

/// Where the report and the metrics go (`--report`/`report_file`,
/// `--metrics`/`metrics_file`): flags over host.toml, so a run by hand
/// writes what the timer's runs write and monitoring sees it.
#[derive(Debug, Clone, Default)]
pub(super) struct Outputs {
    pub(super) report: Option<PathBuf>,
    pub(super) metrics: Option<PathBuf>,
    /// host.toml's `[labels]`, as the metrics' label pairs.
    pub(super) labels: Vec<(String, String)>,
    /// host.toml's `[labels]` as they are, for the report.
    pub(super) machine_labels: std::collections::BTreeMap<String, String>,
    /// Where the machine's state is kept, when host.toml and the flags
    /// could be read.
    pub(super) state_dir: Option<PathBuf>,
    /// The run lock, for a run that could not happen: its outcome is
    /// recorded only under the lock.
    pub(super) lock_file: Option<PathBuf>,
    /// A watch's account of itself, written with each of its runs.
    pub(super) watch: Option<WatchState>,
    /// The report limit: the state as written is held to it.
    pub(super) report_limit: usize,
}

impl Outputs {
    /// Checks, before anything is changed, that both files can be written;
    /// the metrics' directory (node_exporter's textfile directory) is made,
    /// 0755, when missing.
    pub(super) fn check(&self) -> anyhow::Result<()> {
        if let Some(dir) = self.metrics.as_deref().and_then(Path::parent) {
            if !dir.as_os_str().is_empty() && !dir.exists() {
                use std::os::unix::fs::DirBuilderExt as _;
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o755)
                    .create(dir)
                    .with_context(|| format!("creating the metrics directory {}", dir.display()))?;
            }
        }
        let files = [
            ("report", self.report.as_deref()),
            ("metrics", self.metrics.as_deref()),
        ];
        for (option, path) in files {
            if let Some(path) = path {
                atomic_file::probe(path)
                    .with_context(|| format!("--{option} {}: cannot be written", path.display()))?;
            }
        }
        Ok(())
    }
}

/// Reports and metrics are read by monitoring (node_exporter runs as its own user).
const OUTPUT_MODE: u32 = 0o644;

/// Prints the report (human or JSON) on stdout.
pub(super) fn print(printed: Printed, report: &Report) -> anyhow::Result<()> {
    let text = match printed {
        Printed::Json => serde_json::to_string_pretty(report)? + "\n",
        Printed::Human(verbosity) => render_human(report, verbosity, Style::detect()),
    };
    // A closed pipe (`host run ... | head`) is an error to report, not a panic.
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .context("writing the report to stdout")
}

/// What a run gives its outputs: its report (or why it could not happen)
/// and how it came about, merged into the machine's state.
pub(super) struct Recorded<'a> {
    pub(super) result: Result<&'a Report, &'a anyhow::Error>,
    /// The policies whose documents were refused.
    pub(super) refused: &'a [Refusal],
    pub(super) how: How,
    /// The watch's words for what woke it.
    pub(super) said: Option<String>,
    pub(super) noop: bool,
    /// Every configured policy's key, when the run took them all.
    pub(super) configured: Option<Vec<String>>,
    /// The units a watch holds back as the run ends.
    pub(super) held: LeftAlone,
    pub(super) duration: Duration,
    /// Whether the caller holds the run lock (else it is tried, without
    /// waiting: a run under way writes the state itself).
    pub(super) locked: bool,
}

/// Merges a run into the machine's state and writes it: to the state
/// directory, as the report file, and as the metrics. Returns what could
/// not be written.
pub(super) fn write(outputs: &Outputs, recorded: Recorded<'_>) -> Vec<String> {
    let mut failures = Vec::new();
    // A dry run with nowhere to say it (an operator trying a policy, as
    // any user) leaves the machine's state alone.
    if recorded.noop && outputs.report.is_none() && outputs.metrics.is_none() {
        return failures;
    }
    let _lock = match (recorded.locked, &outputs.lock_file) {
        (false, Some(lock)) => match RunLock::acquire_quietly(lock, Wait::No) {
            Ok(lock) => Some(lock),
            Err(e) => {
                // Said after the run's own error, which is what it is about.
                tracing::debug!(
                    "the machine's state is not updated with this run ({e:#}): the run under way writes it"
                );
                return failures;
            }
        },
        _ => None,
    };
    let (path, mut state) = match outputs.state_dir.as_deref().map(MachineState::open) {
        Some(Ok((path, state))) => (Some(path), state),
        Some(Err(e)) => {
            failures.push(format!("reading the machine's state: {e:#}"));
            (None, MachineState::empty())
        }
        None => (None, MachineState::empty()),
    };
    let mut left_alone = pauses_in_force(outputs.state_dir.as_deref());
    match outputs.watch {
        Some(_) => left_alone.extend(recorded.held.clone()),
        // Not the watch's run: the watch's holds stand until they end.
        None => left_alone.extend(state.holds_in_force(SystemTime::now())),
    }
    let error = recorded.result.as_ref().err().map(|e| format!("{e:#}"));
    state.record(
        Ran {
            how: recorded.how,
            said: recorded.said,
            noop: recorded.noop,
            result: match (recorded.result, error) {
                (Ok(report), _) => Ok(report),
                (Err(_), error) => Err(error.unwrap_or_default()),
            },
            refused: recorded.refused,
            configured: recorded.configured,
            left_alone: &left_alone,
            duration: recorded.duration,
            labels: outputs.machine_labels.clone(),
        },
        SystemTime::now(),
    );
    match (&outputs.watch, recorded.how.drive) {
        (Some(watch), _) => state.set_watch(Some(watch.clone())),
        // The timer drives the machine (the watch conflicts with it).
        (None, Drive::Timer) => state.set_watch(None),
        (None, _) => {}
    }
    state.bound(outputs.report_limit);
    if let Some(path) = &path {
        if let Err(e) = state.save(path) {
            failures.push(format!("{e:#}"));
        }
    }
    failures.extend(publish(outputs, &state));
    failures
}

/// Writes `state` as the report file and the metrics; returns what could
/// not be written.
pub(super) fn publish(outputs: &Outputs, state: &MachineState) -> Vec<String> {
    let mut failures = Vec::new();
    if let Some(path) = &outputs.report {
        let written = serde_json::to_string_pretty(state)
            .map_err(anyhow::Error::from)
            .and_then(|json| atomic_file::write(path, (json + "\n").as_bytes(), OUTPUT_MODE));
        if let Err(e) = written {
            failures.push(format!("writing the report {}: {e:#}", path.display()));
        }
    }
    if let Some(path) = &outputs.metrics {
        let metrics = render_metrics(state, &outputs.labels);
        if let Err(e) = atomic_file::write(path, metrics.as_bytes(), OUTPUT_MODE) {
            failures.push(format!("writing the metrics {}: {e:#}", path.display()));
        }
    }
    failures
}

/// The operator's pauses in force now; none when they cannot be read (the
/// run says why).
fn pauses_in_force(state_dir: Option<&Path>) -> LeftAlone {
    state_dir
        .and_then(|dir| Pauses::open(dir).ok())
        .map(|(_, pauses)| pauses.in_force(SystemTime::now()))
        .unwrap_or_default()
}

/// Says the watch's account of itself in the state, under the lock (not
/// waiting: a run under way writes it), and publishes the state.
pub(super) fn note_watch(outputs: &Outputs, watch: WatchState) -> anyhow::Result<()> {
    let (Some(lock), Some(dir)) = (&outputs.lock_file, &outputs.state_dir) else {
        anyhow::bail!("no state directory");
    };
    let _lock = RunLock::acquire(lock, Wait::No)?;
    let (path, mut state) = MachineState::open(dir)?;
    state.set_watch(Some(watch));
    state.save(&path)?;
    match publish(outputs, &state).as_slice() {
        [] => Ok(()),
        failures => anyhow::bail!("{}", failures.join("; ")),
    }
}
