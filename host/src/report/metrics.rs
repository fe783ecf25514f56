//! The Prometheus text format, for node_exporter's textfile collector.

use std::fmt::Write as _;
use std::time::SystemTime;

use super::Report;
use crate::guest::Done;

/// The metrics of one invocation. `report` is `None` when the run could not
/// happen at all (a refused signature, a missing file): that is a failed run
/// with nothing applied, and monitoring must see it. `machine` is the
/// operator's labels as Prometheus label pairs (`label_role`, `web`): every
/// series carries them, so that a central Prometheus groups results by role
/// (`sum by (label_role) (policy_host_resources{state="failed"})`).
pub fn render_metrics(
    report: Option<&Report>,
    machine: &[(String, String)],
    duration_secs: f64,
    now: SystemTime,
) -> String {
    let mut gauges = Gauges::new(machine);
    resource_gauges(&mut gauges, report);
    timing_gauges(&mut gauges, duration_secs, now);
    source_gauges(&mut gauges, report);
    outcome_gauges(&mut gauges, report);
    gauges.out
}

/// The metrics file being written: gauges, each sample with the machine's
/// labels after its own.
struct Gauges {
    out: String,
    machine: String,
}

impl Gauges {
    fn new(machine: &[(String, String)]) -> Self {
        let machine: Vec<String> = machine
            .iter()
            .map(|(name, value)| format!("{name}=\"{}\"", escape(value)))
            .collect();
        Self {
            out: String::new(),
            machine: machine.join(","),
        }
    }

    fn gauge(&mut self, name: &str, help: &str, samples: &[(&str, f64)]) {
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} gauge");
        for (labels, value) in samples {
            let labels = with_machine(labels, &self.machine);
            let _ = writeln!(self.out, "{name}{labels} {value}");
        }
    }
}

/// What became of the last run's resources.
fn resource_gauges(gauges: &mut Gauges, report: Option<&Report>) {
    let summary = report.map(Report::summary);
    let count = |f: fn(&super::Summary) -> usize| summary.map_or(0, f) as f64;
    gauges.gauge(
        "policy_host_resources",
        "Resources in the last run, by outcome (changed, failed, left_alone and unchanged add up to total; a resource that failed after changes counts as failed; left_alone: its unit paused by the operator or held back after a crash loop).",
        &[
            ("{state=\"total\"}", count(|s| s.resources)),
            ("{state=\"changed\"}", count(|s| s.changed)),
            ("{state=\"failed\"}", count(|s| s.failed)),
            ("{state=\"left_alone\"}", count(|s| s.left_alone)),
            ("{state=\"unchanged\"}", count(|s| s.unchanged)),
        ],
    );
    gauges.gauge(
        "policy_host_resources_not_applied",
        "Resources the last run's policies declare for other machines: their `when` did not match this machine's facts (not counted in policy_host_resources).",
        &[("", count(|s| s.left_out))],
    );
    let [paused, held] = left_alone_by_kind(report);
    gauges.gauge(
        "policy_host_units_left_alone",
        "Resources of the last run whose unit was left alone, by why: paused by the operator or held (held back after 3 starts within 60 s, a crash loop).",
        &[
            ("{reason=\"paused\"}", paused as f64),
            ("{reason=\"held\"}", held as f64),
        ],
    );
}

/// Where the last run's policies and settings came from.
fn source_gauges(gauges: &mut Gauges, report: Option<&Report>) {
    let (stale, info) = source_series(report);
    gauges.gauge(
        "policy_host_source_stale",
        "1 if the registry could not be reached and the last verified copy of this source ran, else 0; one series per policy and kind (policy or settings) of the last run.",
        &borrowed(&stale),
    );
    gauges.gauge(
        "policy_host_source_info",
        "Where each policy and settings source of the last run came from and the digest that ran; always 1, one series per policy and kind, replaced by the next run's.",
        &borrowed(&info),
    );
}

/// When the last run ended, and how long it took.
fn timing_gauges(gauges: &mut Gauges, duration_secs: f64, now: SystemTime) {
    let timestamp = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    gauges.gauge(
        "policy_host_run_duration_seconds",
        "Duration of the last run.",
        &[("", duration_secs)],
    );
    gauges.gauge(
        "policy_host_last_run_timestamp_seconds",
        "When the last run ended, in seconds since the Unix epoch.",
        &[("", timestamp)],
    );
}

/// What the last run restarted, and how it ended: cut short or not, a
/// success.
fn outcome_gauges(gauges: &mut Gauges, report: Option<&Report>) {
    let restarts: Vec<(String, f64)> = restarts_by_cause(report)
        .iter()
        .map(|(cause, count)| (format!("{{cause=\"{cause}\"}}"), *count as f64))
        .collect();
    gauges.gauge(
        "policy_host_restarts",
        "Services restarted by the last run, by cause: a watched file or package that changed, or a service changed earlier in the run (or named by --refresh).",
        &borrowed(&restarts),
    );
    gauges.gauge(
        "policy_host_run_interrupted",
        "1 if the last run was cut short by a signal (SIGTERM, SIGINT, SIGHUP), else 0.",
        &[(
            "",
            f64::from(u8::from(report.is_some_and(|r| r.interruption().is_some()))),
        )],
    );
    let success = report.map(Report::summary).is_some_and(|s| s.success);
    gauges.gauge(
        "policy_host_run_success",
        "1 if the last run happened and every resource converged, else 0.",
        &[("", f64::from(u8::from(success)))],
    );
}

/// A sample's labels (`{state="total"}` or none) with the machine's after them.
/// What a watch counts over its life, beside its runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WatchCounts {
    /// Signals addressed to the watch that systemd did not send (or, for
    /// `NameOwnerChanged`, the bus): dropped, never a wake.
    pub signals_dropped: u64,
}

/// The series of a watch, appended to its runs' metrics.
pub fn render_watch_metrics(counts: &WatchCounts, machine: &[(String, String)]) -> String {
    let machine: Vec<String> = machine
        .iter()
        .map(|(name, value)| format!("{name}=\"{}\"", escape(value)))
        .collect();
    let name = "policy_host_watch_signals_dropped_total";
    format!(
        "# HELP {name} Signals sent to the watch by someone other than systemd (or, for NameOwnerChanged, the bus), dropped since the watch started: a local user trying to make it run.\n\
         # TYPE {name} counter\n\
         {name}{} {}\n",
        with_machine("", &machine.join(",")),
        counts.signals_dropped
    )
}

fn with_machine(labels: &str, machine: &str) -> String {
    match (labels.strip_suffix('}'), machine.is_empty()) {
        (_, true) => labels.to_owned(),
        (Some(own), false) => format!("{own},{machine}}}"),
        (None, false) => format!("{{{machine}}}"),
    }
}

/// Resources left alone in `report`: paused, held.
fn left_alone_by_kind(report: Option<&Report>) -> [usize; 2] {
    let mut counts = [0; 2];
    for run in report.map(Report::runs).into_iter().flatten() {
        for alone in run.resources.iter().filter_map(|r| r.left_alone.as_ref()) {
            counts[usize::from(alone.kind == crate::left_alone::Kind::Held)] += 1;
        }
    }
    counts
}

/// One sample: its labels (`{a="b"}`) and its value.
type Sample = (String, f64);

/// The stale and info series of each policy's sources.
fn source_series(report: Option<&Report>) -> (Vec<Sample>, Vec<Sample>) {
    // Bounded labels only: a series per policy and kind, whatever version
    // runs. Where a source is and which digest ran change with every push;
    // they go in the `_info` metric, whose one series per policy and kind is
    // replaced with the next run's, never added to.
    // A policy listed twice (the manifest policy with two manifests) is told
    // apart as NAME#2, so that no two series are the same.
    let mut stale = Vec::new();
    let mut info = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for run in report.map(Report::runs).unwrap_or_default() {
        let earlier = seen.iter().filter(|name| **name == run.policy).count();
        seen.push(&run.policy);
        let policy = match earlier {
            0 => escape(&run.policy),
            n => format!("{}#{}", escape(&run.policy), n + 1),
        };
        for (kind, source) in std::iter::once(("policy", &run.source))
            .chain(run.settings_source.as_ref().map(|s| ("settings", s)))
        {
            let series = format!("policy=\"{policy}\",kind=\"{kind}\"");
            stale.push((format!("{{{series}}}"), f64::from(u8::from(source.stale))));
            info.push((
                format!(
                    "{{{series},source=\"{}\",digest=\"{}\"}}",
                    escape(&source.location),
                    escape(&source.digest)
                ),
                1.0,
            ));
        }
    }
    (stale, info)
}

/// Restarts of the last run, counted by cause.
fn restarts_by_cause(report: Option<&Report>) -> [(&'static str, usize); 3] {
    // Restarts by what caused them, a bounded label: `file` and `package`
    // (a watched reference changed), `service` (a service changed earlier in
    // the run, or --refresh named one). Every cause is always present.
    let mut restarts = [("file", 0usize), ("package", 0), ("service", 0)];
    for event in report
        .map(Report::runs)
        .unwrap_or_default()
        .iter()
        .flat_map(|r| &r.resources)
        .filter(|e| e.actions.contains(&Done::Restarted))
    {
        let causes: Vec<&str> = event
            .watch
            .triggered_by
            .iter()
            .filter_map(|t| t.reference.split_once('#').map(|(kind, _)| kind))
            .collect();
        for (cause, count) in &mut restarts {
            let by_it = causes.contains(cause) || (*cause == "service" && causes.is_empty());
            *count += usize::from(by_it);
        }
    }
    restarts
}

/// A label value in the text format: backslash, quote and newline escaped.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn borrowed(samples: &[(String, f64)]) -> Vec<(&str, f64)> {
    samples.iter().map(|(l, v)| (l.as_str(), *v)).collect()
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    #[test]
    fn a_watch_counts_the_signals_it_dropped_with_the_machines_labels() {
        let counts = super::WatchCounts { signals_dropped: 7 };
        let text = super::render_watch_metrics(&counts, &[("label_role".into(), "web".into())]);
        assert!(
            text.contains("# TYPE policy_host_watch_signals_dropped_total counter\n"),
            "{text}"
        );
        assert!(
            text.ends_with("policy_host_watch_signals_dropped_total{label_role=\"web\"} 7\n"),
            "{text}"
        );
        let bare = super::render_watch_metrics(&counts, &[]);
        assert!(
            bare.ends_with("policy_host_watch_signals_dropped_total 7\n"),
            "{bare}"
        );
    }

    use super::*;
    use crate::guest::GuestOutcome;
    use crate::report::{
        CompileInfo, ProviderInfo, RunRecord, RunReport, SignatureReport, SourceReport,
    };

    fn source(location: &str, digest: &str, stale: bool) -> SourceReport {
        SourceReport {
            location: location.into(),
            digest: digest.into(),
            stale,
            stale_reason: None,
        }
    }

    fn run(policy: &str, source: SourceReport, settings: Option<SourceReport>) -> RunReport {
        RunReport::new(RunRecord {
            policy: policy.into(),
            source,
            settings_source: settings,
            noop: false,
            signature: SignatureReport::unverified("test"),
            compile: CompileInfo {
                cache: crate::runtime::CacheOutcome::Hit,
                duration_ms: 0.0,
            },
            provider: ProviderInfo {
                name: "systemd",
                available: true,
                detail: None,
                status_reader: "systemctl",
                status_note: None,
            },
            outcome: GuestOutcome::default(),
            calls: Vec::new(),
            log: String::new(),
            duration: Duration::ZERO,
        })
    }

    /// The series (name and labels) of `metric` in `text`.
    fn series<'a>(text: &'a str, metric: &str) -> Vec<&'a str> {
        text.lines()
            .filter(|l| l.starts_with(&format!("{metric}{{")))
            .map(|l| l.rsplit_once(' ').unwrap().0)
            .collect()
    }

    #[test]
    fn a_new_version_or_place_replaces_series_instead_of_adding_them() {
        let render = |digest: &str, location: &str, stale: bool| {
            let report = Report::new(vec![run(
                "web.wasm",
                source(location, digest, stale),
                Some(source("/etc/site.yaml", "sha256:5e", false)),
            )]);
            render_metrics(Some(&report), &[], 1.0, SystemTime::UNIX_EPOCH)
        };
        let first = render("sha256:aa", "oci://r.example/policies/web:1", false);
        let second = render("sha256:bb", "oci://r.example/policies/web:2", true);
        assert_eq!(
            series(&first, "policy_host_source_stale"),
            series(&second, "policy_host_source_stale"),
        );
        assert_eq!(
            series(&second, "policy_host_source_stale"),
            [
                "policy_host_source_stale{policy=\"web.wasm\",kind=\"policy\"}",
                "policy_host_source_stale{policy=\"web.wasm\",kind=\"settings\"}",
            ]
        );
        assert!(
            second.contains("policy_host_source_stale{policy=\"web.wasm\",kind=\"policy\"} 1\n")
        );
        // The digest and place are in the info metric, one series per policy and kind.
        let info = series(&second, "policy_host_source_info");
        assert_eq!(info.len(), 2, "{second}");
        assert!(info[0].contains("digest=\"sha256:bb\"") && info[0].contains("web:2"));
        assert!(!first.contains("sha256:bb") && !second.contains("sha256:aa"));
    }

    #[test]
    fn a_policy_listed_twice_gets_series_of_its_own() {
        let report = Report::new(vec![
            run(
                "manifest.wasm",
                source("/a/manifest.wasm", "sha256:1", false),
                None,
            ),
            run(
                "manifest.wasm",
                source("/a/manifest.wasm", "sha256:1", true),
                None,
            ),
        ]);
        let text = render_metrics(Some(&report), &[], 1.0, SystemTime::UNIX_EPOCH);
        let stale = series(&text, "policy_host_source_stale");
        assert_eq!(
            stale,
            [
                "policy_host_source_stale{policy=\"manifest.wasm\",kind=\"policy\"}",
                "policy_host_source_stale{policy=\"manifest.wasm#2\",kind=\"policy\"}",
            ]
        );
    }

    #[test]
    fn label_values_are_escaped() {
        let report = Report::new(vec![run(
            "we\"b\n.wasm",
            source("C:\\x", "sha256:1", false),
            None,
        )]);
        let text = render_metrics(Some(&report), &[], 1.0, SystemTime::UNIX_EPOCH);
        assert!(text.contains("policy=\"we\\\"b\\n.wasm\""), "{text}");
        assert!(text.contains("source=\"C:\\\\x\""), "{text}");
    }

    #[test]
    fn restarts_are_counted_by_what_triggered_them() {
        use crate::guest::{ResourceEvent, Trigger, WatchReport};
        let event = |name: &str, actions: Vec<Done>, triggers: &[&str]| ResourceEvent {
            refreshed: actions.contains(&Done::Restarted),
            watch: WatchReport {
                triggered_by: triggers
                    .iter()
                    .map(|r| Trigger {
                        reference: r.to_string(),
                        change: "changed".into(),
                    })
                    .collect(),
                ..WatchReport::default()
            },
            ..ResourceEvent::of_host(&format!("service#{name}"), actions)
        };
        let mut report = run("web.wasm", source("/p.wasm", "sha256:aa", false), None);
        report.resources = vec![
            event("web", vec![Done::Restarted], &["file#/etc/web.conf"]),
            event(
                "proxy",
                vec![Done::Restarted],
                &["file#/etc/web.conf", "package#nginx"],
            ),
            event("app", vec![Done::Restarted], &[]),
            event("db", vec![Done::Started], &["package#postgresql"]),
        ];
        let text = render_metrics(
            Some(&Report::new(vec![report])),
            &[],
            1.0,
            SystemTime::UNIX_EPOCH,
        );
        for line in [
            "policy_host_restarts{cause=\"file\"} 2",
            "policy_host_restarts{cause=\"package\"} 1",
            "policy_host_restarts{cause=\"service\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
        }
    }
}
