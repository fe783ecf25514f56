//! The last phase of a run: the report on stdout, then the report and the
//! metrics files, written whatever the run's outcome.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use anyhow::Context as _;

use crate::atomic_file;
use crate::report::{
    render_human, render_metrics, render_watch_metrics, Report, Style, Verbosity, WatchCounts,
};

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
    /// A watch's own counts, written with each of its runs' metrics.
    pub(super) watch: Option<WatchCounts>,
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

/// Writes the report and the metrics, for a run that happened or for one
/// that could not (`Err`); returns what could not be written.
pub(super) fn write(
    outputs: &Outputs,
    result: Result<&Report, &anyhow::Error>,
    started: Instant,
) -> Vec<String> {
    let mut failures = Vec::new();
    if let Some(path) = &outputs.report {
        let json = match result {
            Ok(report) => serde_json::to_string_pretty(report),
            Err(e) => serde_json::to_string_pretty(&Report::failed(e)),
        };
        let written = json
            .map_err(anyhow::Error::from)
            .and_then(|json| atomic_file::write(path, (json + "\n").as_bytes(), OUTPUT_MODE));
        if let Err(e) = written {
            failures.push(format!("writing the report {}: {e:#}", path.display()));
        }
    }
    if let Some(path) = &outputs.metrics {
        let mut metrics = render_metrics(
            result.ok(),
            &outputs.labels,
            started.elapsed().as_secs_f64(),
            SystemTime::now(),
        );
        if let Some(counts) = &outputs.watch {
            metrics.push_str(&render_watch_metrics(counts, &outputs.labels));
        }
        if let Err(e) = atomic_file::write(path, metrics.as_bytes(), OUTPUT_MODE) {
            failures.push(format!("writing the metrics {}: {e:#}", path.display()));
        }
    }
    failures
}
