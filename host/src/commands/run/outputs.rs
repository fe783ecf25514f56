//! The last phase of a run: the report on stdout, then the report and the
//! metrics files, written whatever the run's outcome.

use std::io::Write as _;
use std::time::{Instant, SystemTime};

use anyhow::Context as _;

use crate::atomic_file;
use crate::cli::RunArgs;
use crate::report::{render_human, render_metrics, Report, Style, Verbosity};

/// Reports and metrics are read by monitoring (node_exporter runs as its own user).
const OUTPUT_MODE: u32 = 0o644;

/// Prints the report (human or JSON) on stdout.
pub(super) fn print(args: &RunArgs, report: &Report) -> anyhow::Result<()> {
    let text = if args.json {
        serde_json::to_string_pretty(report)? + "\n"
    } else {
        let verbosity = match (args.quiet, args.verbose) {
            (true, _) => Verbosity::Quiet,
            (_, true) => Verbosity::Verbose,
            _ => Verbosity::Normal,
        };
        render_human(report, verbosity, Style::detect())
    };
    // A closed pipe (`host run ... | head`) is an error to report, not a panic.
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .context("writing the report to stdout")
}

/// Writes `--report` and `--metrics`, for a run that happened or for one
/// that could not (`Err`); returns what could not be written.
pub(super) fn write(
    args: &RunArgs,
    result: Result<&Report, &anyhow::Error>,
    started: Instant,
) -> Vec<String> {
    let mut failures = Vec::new();
    if let Some(path) = &args.report {
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
    if let Some(path) = &args.metrics {
        let metrics = render_metrics(
            result.ok(),
            started.elapsed().as_secs_f64(),
            SystemTime::now(),
        );
        if let Err(e) = atomic_file::write(path, metrics.as_bytes(), OUTPUT_MODE) {
            failures.push(format!("writing the metrics {}: {e:#}", path.display()));
        }
    }
    failures
}
