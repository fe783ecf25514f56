//! The Prometheus text format, for node_exporter's textfile collector.

use std::fmt::Write as _;
use std::time::SystemTime;

use super::Report;

/// The metrics of one invocation. `report` is `None` when the run could not
/// happen at all (a refused signature, a missing file): that is a failed run
/// with nothing applied, and monitoring must see it.
pub fn render_metrics(report: Option<&Report>, duration_secs: f64, now: SystemTime) -> String {
    let summary = report.map(Report::summary);
    let count = |f: fn(&super::Summary) -> usize| summary.map_or(0, f);
    let timestamp = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let mut out = String::new();
    let mut gauge = |name: &str, help: &str, samples: &[(&str, f64)]| {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} gauge");
        for (labels, value) in samples {
            let _ = writeln!(out, "{name}{labels} {value}");
        }
    };
    gauge(
        "policy_host_resources",
        "Resources in the last run, by outcome.",
        &[
            ("{state=\"total\"}", count(|s| s.resources) as f64),
            ("{state=\"changed\"}", count(|s| s.changed) as f64),
            ("{state=\"failed\"}", count(|s| s.failed) as f64),
        ],
    );
    gauge(
        "policy_host_run_duration_seconds",
        "Duration of the last run.",
        &[("", duration_secs)],
    );
    gauge(
        "policy_host_last_run_timestamp_seconds",
        "When the last run ended, in seconds since the Unix epoch.",
        &[("", timestamp)],
    );
    let escape = |v: &str| {
        v.replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n")
    };
    let mut sources = Vec::new();
    for run in report.map(Report::runs).unwrap_or_default() {
        for (kind, source) in std::iter::once(("policy", &run.source))
            .chain(run.settings_source.as_ref().map(|s| ("settings", s)))
        {
            let labels = format!(
                "{{policy=\"{}\",kind=\"{kind}\",source=\"{}\",digest=\"{}\"}}",
                escape(&run.policy),
                escape(&source.location),
                escape(&source.digest)
            );
            sources.push((labels, f64::from(u8::from(source.stale))));
        }
    }
    let samples: Vec<(&str, f64)> = sources.iter().map(|(l, v)| (l.as_str(), *v)).collect();
    gauge(
        "policy_host_source_stale",
        "1 if the registry could not be reached and the last verified copy of this source ran, else 0; one series per policy and settings source of the last run.",
        &samples,
    );
    gauge(
        "policy_host_run_interrupted",
        "1 if the last run was cut short by a signal (SIGTERM, SIGINT, SIGHUP), else 0.",
        &[(
            "",
            f64::from(u8::from(report.is_some_and(|r| r.interruption().is_some()))),
        )],
    );
    gauge(
        "policy_host_run_success",
        "1 if the last run happened and every resource converged, else 0.",
        &[("", f64::from(u8::from(summary.is_some_and(|s| s.success))))],
    );
    out
}
