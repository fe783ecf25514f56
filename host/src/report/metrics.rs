//! The Prometheus text format, for node_exporter's textfile collector:
//! the machine's state ([`MachineState`]), every series one of the
//! [`catalogue`](super::catalogue)'s.

use std::fmt::Write as _;

use super::catalogue::{self, Metric};
use super::machine::{MachineState, PolicyOutcome};
use crate::left_alone::Kind;

/// The metrics of the machine's state. `machine` is the operator's labels
/// as Prometheus label pairs (`label_role`, `web`): every series carries
/// them, so that a central Prometheus groups results by role
/// (`sum by (label_role) (policy_host_resources{state="failed"})`).
pub fn render_metrics(state: &MachineState, machine: &[(String, String)]) -> String {
    let mut out = Series::new(machine);
    machine_series(&mut out, state);
    policy_series(&mut out, state);
    last_run_series(&mut out, state);
    noop_series(&mut out, state);
    watch_series(&mut out, state);
    out.text
}

/// The metrics file being written: each metric's `# HELP` and `# TYPE`
/// from the catalogue, each sample with the machine's labels after its own.
struct Series {
    text: String,
    machine: String,
}

impl Series {
    fn new(machine: &[(String, String)]) -> Self {
        let machine: Vec<String> = machine
            .iter()
            .map(|(name, value)| format!("{name}=\"{}\"", escape(value)))
            .collect();
        Self {
            text: String::new(),
            machine: machine.join(","),
        }
    }

    /// `metric`'s samples: each its label values (in the order the
    /// catalogue names the labels) and its value.
    fn write(&mut self, metric: &Metric, samples: &[(Vec<String>, f64)]) {
        let _ = writeln!(self.text, "# HELP {} {}", metric.name, metric.help);
        let _ = writeln!(self.text, "# TYPE {} {}", metric.name, metric.kind.word());
        for (values, value) in samples {
            debug_assert_eq!(values.len(), metric.labels.len(), "{}", metric.name);
            let mut pairs: Vec<String> = metric
                .labels
                .iter()
                .zip(values)
                .map(|(name, value)| format!("{name}=\"{}\"", escape(value)))
                .collect();
            if !self.machine.is_empty() {
                pairs.push(self.machine.clone());
            }
            let labels = if pairs.is_empty() {
                String::new()
            } else {
                format!("{{{}}}", pairs.join(","))
            };
            let _ = writeln!(self.text, "{}{labels} {value}", metric.name);
        }
    }

    /// One sample without labels of its own.
    fn one(&mut self, metric: &Metric, value: f64) {
        self.write(metric, &[(Vec::new(), value)]);
    }
}

fn flag(on: bool) -> f64 {
    f64::from(u8::from(on))
}

/// Whether the machine is well, and its resources and units in numbers.
fn machine_series(out: &mut Series, state: &MachineState) {
    let summary = &state.summary;
    out.one(&catalogue::RUN_SUCCESS, flag(summary.success));
    let c = &summary.counts;
    let counts = [c.resources, c.changed, c.failed, c.left_alone, c.unchanged];
    let samples: Vec<(Vec<String>, f64)> = catalogue::STATES
        .iter()
        .zip(counts)
        .map(|(state, n)| (vec![(*state).to_owned()], n as f64))
        .collect();
    out.write(&catalogue::RESOURCES, &samples);
    out.one(&catalogue::RESOURCES_NOT_APPLIED, c.left_out as f64);
    let held = state
        .left_alone
        .iter()
        .filter(|u| u.kind == Kind::Held)
        .count();
    let paused = state.left_alone.len() - held;
    let [paused_word, held_word] = catalogue::LEFT_ALONE_REASONS;
    out.write(
        &catalogue::UNITS_LEFT_ALONE,
        &[
            (vec![paused_word.into()], paused as f64),
            (vec![held_word.into()], held as f64),
        ],
    );
}

/// Each policy's series, labelled by its name (a policy listed twice, the
/// manifest policy with two manifests, is told apart as `NAME#2`).
fn policy_series(out: &mut Series, state: &MachineState) {
    let mut seen: Vec<&str> = Vec::new();
    let names: Vec<String> = state
        .policies
        .iter()
        .map(|p| {
            let earlier = seen.iter().filter(|name| **name == p.policy).count();
            seen.push(&p.policy);
            match earlier {
                0 => p.policy.clone(),
                n => format!("{}#{}", p.policy, n + 1),
            }
        })
        .collect();
    let each = |f: &dyn Fn(&super::machine::PolicyState) -> f64| -> Vec<(Vec<String>, f64)> {
        state
            .policies
            .iter()
            .zip(&names)
            .map(|(p, name)| (vec![name.clone()], f(p)))
            .collect()
    };
    out.write(
        &catalogue::POLICY_SUCCESS,
        &each(&|p| flag(p.outcome.converged())),
    );
    out.write(
        &catalogue::POLICY_REFUSED,
        &each(&|p| flag(p.outcome == PolicyOutcome::Refused)),
    );
    out.write(&catalogue::POLICY_LAST_RUN, &each(&|p| p.at as f64));
    out.write(&catalogue::REPAIRS, &each(&|p| p.repairs as f64));
    // Bounded labels only: a series per policy and kind, whatever version
    // runs. Where a source is and which digest ran change with every push;
    // they go in the `_info` metric, whose one series per policy and kind
    // is replaced with the next run's, never added to.
    let mut stale = Vec::new();
    let mut info = Vec::new();
    for (policy, name) in state.policies.iter().zip(&names) {
        for source in &policy.sources {
            stale.push((vec![name.clone(), source.kind.clone()], flag(source.stale)));
            info.push((
                vec![
                    name.clone(),
                    source.kind.clone(),
                    source.location.clone(),
                    source.digest.clone(),
                ],
                1.0,
            ));
        }
    }
    out.write(&catalogue::SOURCE_STALE, &stale);
    out.write(&catalogue::SOURCE_INFO, &info);
}

/// The last real run: when, how long, why, what it restarted.
fn last_run_series(out: &mut Series, state: &MachineState) {
    let Some(run) = &state.last_run else {
        // No real run yet (only --noop runs): nothing to say of one, and
        // a timestamp of 0 that says so to an alert on the runs' age.
        out.one(&catalogue::LAST_RUN, 0.0);
        return;
    };
    out.one(&catalogue::RUN_DURATION, run.duration_ms / 1000.0);
    out.one(&catalogue::LAST_RUN, run.ended as f64);
    out.write(
        &catalogue::LAST_RUN_INFO,
        &[(
            vec![run.drive.as_str().into(), run.cause.as_str().into()],
            1.0,
        )],
    );
    let restarts: Vec<(Vec<String>, f64)> = catalogue::RESTART_CAUSES
        .iter()
        .map(|cause| {
            let n = run.restarts.get(*cause).copied().unwrap_or(0);
            (vec![(*cause).to_owned()], n as f64)
        })
        .collect();
    out.write(&catalogue::RESTARTS, &restarts);
    out.one(&catalogue::RUN_INTERRUPTED, flag(run.interrupted.is_some()));
}

/// The last --noop run, apart.
fn noop_series(out: &mut Series, state: &MachineState) {
    if let Some(noop) = &state.noop_run {
        out.one(&catalogue::NOOP_LAST_RUN, noop.ended as f64);
        out.one(&catalogue::NOOP_WOULD_CHANGE, noop.would_change as f64);
    }
}

/// The watch, when one writes the state.
fn watch_series(out: &mut Series, state: &MachineState) {
    let Some(watch) = &state.watch else {
        return;
    };
    out.one(&catalogue::WATCH_UP, flag(watch.up));
    out.one(&catalogue::WATCH_START, watch.started as f64);
    out.one(&catalogue::WATCH_RESYNC, watch.resync_secs as f64);
    out.one(
        &catalogue::WATCH_SIGNALS_DROPPED,
        watch.signals_dropped as f64,
    );
    let holds: Vec<(Vec<String>, f64)> = catalogue::HOLD_REASONS
        .iter()
        .map(|reason| {
            let n = watch.holds.get(*reason).copied().unwrap_or(0);
            (vec![(*reason).to_owned()], n as f64)
        })
        .collect();
    out.write(&catalogue::WATCH_HOLDS, &holds);
}

/// A label value in the text format: backslash, quote and newline escaped.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::guest::Done;
    use crate::report::machine::{Drive, How, Ran, RunCause, WatchState};
    use crate::report::{Report, RunReport, SourceReport};
    use crate::state_file::Versioned as _;

    /// The state after one real run that produced `report`.
    fn state_of(report: &Report) -> MachineState {
        let mut state = MachineState::empty();
        state.record(
            Ran {
                how: How {
                    drive: Drive::Manual,
                    cause: RunCause::Manual,
                },
                said: None,
                noop: false,
                result: Ok(report),
                refused: &[],
                configured: None,
                left_alone: &Default::default(),
                duration: Duration::from_secs(1),
                labels: Default::default(),
            },
            SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
        );
        state
    }

    /// The state after one run of `web.wasm`, with a watch up that made
    /// `fights` holds and dropped `dropped` signals.
    fn watched(fights: u64, dropped: u64) -> MachineState {
        let mut state = state_of(&Report::new(vec![run(
            "web.wasm",
            source("/p.wasm", "sha256:aa", false),
            None,
        )]));
        state.set_watch(Some(WatchState {
            up: true,
            pid: 7,
            started: 1_700_000_000,
            resync_secs: 900,
            next_resync: None,
            last_event_run: None,
            holds: [("fight".to_owned(), fights)].into(),
            signals_dropped: dropped,
        }));
        state
    }

    #[test]
    fn a_watch_writes_its_series_with_the_machines_labels() {
        let state = watched(2, 7);
        let text = render_metrics(&state, &[("label_role".into(), "web".into())]);
        assert!(
            text.contains("# TYPE policy_host_watch_signals_dropped_total counter\n"),
            "{text}"
        );
        for line in [
            "policy_host_watch_signals_dropped_total{label_role=\"web\"} 7",
            "policy_host_watch_up{label_role=\"web\"} 1",
            "policy_host_watch_holds_total{reason=\"fight\",label_role=\"web\"} 2",
            "policy_host_watch_holds_total{reason=\"crash_loop\",label_role=\"web\"} 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
        }
        let bare = render_metrics(&state, &[]);
        assert!(
            bare.contains("\npolicy_host_watch_signals_dropped_total 7\n"),
            "{bare}"
        );
    }

    #[test]
    fn every_series_written_is_one_of_the_catalogues() {
        let state = watched(0, 0);
        let text = render_metrics(&state, &[]);
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let name = line.split(['{', ' ']).next().unwrap();
            assert!(
                catalogue::find(name).is_some(),
                "{name} is not in the catalogue"
            );
        }
        let typed: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .collect();
        for metric in catalogue::METRICS {
            if metric.scope != catalogue::Scope::Noop {
                assert!(
                    typed.contains(&format!("{} {}", metric.name, metric.kind.word()).as_str()),
                    "{} missing",
                    metric.name
                );
            }
        }
    }

    fn source(location: &str, digest: &str, stale: bool) -> SourceReport {
        SourceReport {
            location: location.into(),
            digest: digest.into(),
            stale,
            stale_reason: None,
        }
    }

    fn run(policy: &str, source: SourceReport, settings: Option<SourceReport>) -> RunReport {
        RunReport::of_test(policy, source, settings, Vec::new())
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
            render_metrics(&state_of(&report), &[])
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
        // The manifest policy with two manifests: two policies of one name,
        // told apart in the state by their settings.
        let mut second = run(
            "manifest.wasm",
            source("/a/manifest.wasm", "sha256:1", true),
            None,
        );
        second.key = "manifest.wasm --settings /b.yaml".into();
        let report = Report::new(vec![
            run(
                "manifest.wasm",
                source("/a/manifest.wasm", "sha256:1", false),
                None,
            ),
            second,
        ]);
        let text = render_metrics(&state_of(&report), &[]);
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
        let text = render_metrics(&state_of(&report), &[]);
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
        let text = render_metrics(&state_of(&Report::new(vec![report])), &[]);
        for line in [
            "policy_host_restarts{cause=\"file\"} 2",
            "policy_host_restarts{cause=\"package\"} 1",
            "policy_host_restarts{cause=\"service\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
        }
    }
}
