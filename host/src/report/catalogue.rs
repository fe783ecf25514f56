//! Every metric the host writes, in one list: name, type, help text and
//! labels. The metrics file is written from it (a sample of a metric not
//! listed here cannot be written), the docs' table is checked against it,
//! and the monitoring mixin's rules and dashboard may name only what it
//! lists (`dist/monitoring/`).

/// A metric's type, as the text format's `# TYPE` line says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    Counter,
}

impl Kind {
    pub const fn word(self) -> &'static str {
        match self {
            Kind::Gauge => "gauge",
            Kind::Counter => "counter",
        }
    }
}

/// Who writes a metric's samples, which says when they change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The machine's state: every configured policy's latest outcome,
    /// whatever run (timer, watch, by hand) last ran each.
    Machine,
    /// The last real run, of however many policies it took.
    LastRun,
    /// The last `--noop` run, apart from the machine's state.
    Noop,
    /// The watch, while it runs (written with each of its runs).
    Watch,
}

/// One metric: what its `# HELP` and `# TYPE` lines say, and the labels
/// its samples carry besides the machine's (host.toml `[labels]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metric {
    pub name: &'static str,
    pub kind: Kind,
    pub scope: Scope,
    pub labels: &'static [&'static str],
    pub help: &'static str,
}

const fn gauge(
    scope: Scope,
    name: &'static str,
    labels: &'static [&'static str],
    help: &'static str,
) -> Metric {
    Metric {
        name,
        kind: Kind::Gauge,
        scope,
        labels,
        help,
    }
}

const fn counter(
    scope: Scope,
    name: &'static str,
    labels: &'static [&'static str],
    help: &'static str,
) -> Metric {
    Metric {
        name,
        kind: Kind::Counter,
        scope,
        labels,
        help,
    }
}

pub const RUN_SUCCESS: Metric = gauge(
    Scope::Machine,
    "policy_host_run_success",
    &[],
    "1 when the machine is in its desired state: every configured policy's latest real run converged, no policy or settings document is refused, and no unit is held back by the crash-loop backoff; else 0.",
);
pub const RESOURCES: Metric = gauge(
    Scope::Machine,
    "policy_host_resources",
    &["state"],
    "Resources of every configured policy's latest real run, by outcome (changed, failed, left_alone and unchanged add up to total; a resource that failed after changes counts as failed; left_alone: its unit paused by the operator or held back).",
);
pub const RESOURCES_NOT_APPLIED: Metric = gauge(
    Scope::Machine,
    "policy_host_resources_not_applied",
    &[],
    "Resources the policies declare for other machines: their `when` did not match this machine's facts (not counted in policy_host_resources).",
);
pub const POLICY_SUCCESS: Metric = gauge(
    Scope::Machine,
    "policy_host_policy_success",
    &["policy"],
    "1 when this policy's latest real run converged, else 0 (it failed, or its document was refused).",
);
pub const POLICY_REFUSED: Metric = gauge(
    Scope::Machine,
    "policy_host_policy_refused",
    &["policy"],
    "1 when this policy's policy or settings document was refused at its latest try (signature, rollback, contract version, unreadable, registry down with no kept copy): it did not run, its units were left alone.",
);
pub const POLICY_LAST_RUN: Metric = gauge(
    Scope::Machine,
    "policy_host_policy_last_run_timestamp_seconds",
    &["policy"],
    "When this policy last ran or was refused, in seconds since the Unix epoch.",
);
pub const UNITS_LEFT_ALONE: Metric = gauge(
    Scope::Machine,
    "policy_host_units_left_alone",
    &["reason"],
    "Units the host leaves alone now, by why: paused by the operator (`host pause`), or held back by the watch's backoff (a crash loop or a fight).",
);
pub const SOURCE_STALE: Metric = gauge(
    Scope::Machine,
    "policy_host_source_stale",
    &["policy", "kind"],
    "1 if the registry could not be reached and the last verified copy of this source ran, else 0; one series per policy and kind (policy or settings).",
);
pub const SOURCE_INFO: Metric = gauge(
    Scope::Machine,
    "policy_host_source_info",
    &["policy", "kind", "source", "digest"],
    "Where each policy and settings source came from and the digest that ran; always 1, one series per policy and kind, replaced when another digest runs.",
);
pub const REPAIRS: Metric = counter(
    Scope::Machine,
    "policy_host_repairs_total",
    &["policy"],
    "Resources this policy's real runs changed (drift repaired, or a first convergence), since the host's state directory was made.",
);
pub const RUN_DURATION: Metric = gauge(
    Scope::LastRun,
    "policy_host_run_duration_seconds",
    &[],
    "Duration of the last real run.",
);
pub const LAST_RUN: Metric = gauge(
    Scope::LastRun,
    "policy_host_last_run_timestamp_seconds",
    &[],
    "When the last real run ended (of every policy or of those an event concerned), in seconds since the Unix epoch.",
);
pub const LAST_RUN_INFO: Metric = gauge(
    Scope::LastRun,
    "policy_host_last_run_info",
    &["drive", "cause"],
    "What drove the last real run (timer, watch or manual) and what caused it (timer, manual, start, event, resync, retry, hold-ended, pause-ended); always 1.",
);
pub const RESTARTS: Metric = gauge(
    Scope::LastRun,
    "policy_host_restarts",
    &["cause"],
    "Services restarted by the last real run, by cause: a watched file or package that changed, or a service changed earlier in the run (or named by --refresh).",
);
pub const RUN_INTERRUPTED: Metric = gauge(
    Scope::LastRun,
    "policy_host_run_interrupted",
    &[],
    "1 if the last real run was cut short by a signal (SIGTERM, SIGINT, SIGHUP), else 0.",
);
pub const NOOP_LAST_RUN: Metric = gauge(
    Scope::Noop,
    "policy_host_noop_last_run_timestamp_seconds",
    &[],
    "When the last --noop run ended, in seconds since the Unix epoch (a noop run changes no other series).",
);
pub const NOOP_WOULD_CHANGE: Metric = gauge(
    Scope::Noop,
    "policy_host_noop_would_change",
    &[],
    "Resources the last --noop run would have changed.",
);
pub const WATCH_UP: Metric = gauge(
    Scope::Watch,
    "policy_host_watch_up",
    &[],
    "1 while the watch runs; the watch writes 0 as it stops. A file that says 1 while its last run is older than two resyncs means a watch that died.",
);
pub const WATCH_START: Metric = gauge(
    Scope::Watch,
    "policy_host_watch_start_timestamp_seconds",
    &[],
    "When the running watch started, in seconds since the Unix epoch.",
);
pub const WATCH_RESYNC: Metric = gauge(
    Scope::Watch,
    "policy_host_watch_resync_seconds",
    &[],
    "The watch's resync interval: it runs every policy at least this often, so the metrics are never older than this while it is up.",
);
pub const WATCH_SIGNALS_DROPPED: Metric = counter(
    Scope::Watch,
    "policy_host_watch_signals_dropped_total",
    &[],
    "Signals sent to the watch by someone other than systemd (or, for NameOwnerChanged, the bus), dropped since the watch started: a local user trying to make it run.",
);
pub const WATCH_HOLDS: Metric = counter(
    Scope::Watch,
    "policy_host_watch_holds_total",
    &["reason"],
    "Units the watch's backoff held back since it started, by why: crash_loop (the unit died on its own after the host started it, 3 times within 60 s) or fight (someone kept stopping it and the host kept starting it).",
);

/// Every metric, in the order the metrics file has them.
pub const METRICS: &[Metric] = &[
    RUN_SUCCESS,
    RESOURCES,
    RESOURCES_NOT_APPLIED,
    POLICY_SUCCESS,
    POLICY_REFUSED,
    POLICY_LAST_RUN,
    UNITS_LEFT_ALONE,
    SOURCE_STALE,
    SOURCE_INFO,
    REPAIRS,
    RUN_DURATION,
    LAST_RUN,
    LAST_RUN_INFO,
    RESTARTS,
    RUN_INTERRUPTED,
    NOOP_LAST_RUN,
    NOOP_WOULD_CHANGE,
    WATCH_UP,
    WATCH_START,
    WATCH_RESYNC,
    WATCH_SIGNALS_DROPPED,
    WATCH_HOLDS,
];

/// A label whose values are a closed set: the metrics file writes a sample
/// of every one (0 when none), and rules and dashboards may match only these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LabelValues {
    pub metric: &'static str,
    pub label: &'static str,
    pub values: &'static [&'static str],
}

/// `policy_host_resources{state}`, in the order the file has them.
pub const STATES: [&str; 5] = ["total", "changed", "failed", "left_alone", "unchanged"];
/// `policy_host_units_left_alone{reason}`.
pub const LEFT_ALONE_REASONS: [&str; 2] = ["paused", "held"];
/// `policy_host_watch_holds_total{reason}`.
pub const HOLD_REASONS: [&str; 2] = ["crash_loop", "fight"];
/// `policy_host_restarts{cause}`.
pub const RESTART_CAUSES: [&str; 3] = ["file", "package", "service"];
/// `policy_host_source_*{kind}`.
pub const SOURCE_KINDS: [&str; 2] = ["policy", "settings"];
/// `policy_host_last_run_info{drive}`: [`super::machine::Drive`]'s words.
pub const DRIVES: [&str; 3] = ["timer", "watch", "manual"];
/// `policy_host_last_run_info{cause}`: [`super::machine::RunCause`]'s words.
pub const RUN_CAUSES: [&str; 8] = [
    "timer",
    "manual",
    "start",
    "event",
    "resync",
    "retry",
    "hold-ended",
    "pause-ended",
];

/// Every label with a closed set of values.
pub const LABEL_VALUES: &[LabelValues] = &[
    LabelValues {
        metric: RESOURCES.name,
        label: "state",
        values: &STATES,
    },
    LabelValues {
        metric: UNITS_LEFT_ALONE.name,
        label: "reason",
        values: &LEFT_ALONE_REASONS,
    },
    LabelValues {
        metric: WATCH_HOLDS.name,
        label: "reason",
        values: &HOLD_REASONS,
    },
    LabelValues {
        metric: RESTARTS.name,
        label: "cause",
        values: &RESTART_CAUSES,
    },
    LabelValues {
        metric: SOURCE_STALE.name,
        label: "kind",
        values: &SOURCE_KINDS,
    },
    LabelValues {
        metric: SOURCE_INFO.name,
        label: "kind",
        values: &SOURCE_KINDS,
    },
    LabelValues {
        metric: LAST_RUN_INFO.name,
        label: "drive",
        values: &DRIVES,
    },
    LabelValues {
        metric: LAST_RUN_INFO.name,
        label: "cause",
        values: &RUN_CAUSES,
    },
];

/// The metric named `name`, if the host writes one.
pub fn find(name: &str) -> Option<&'static Metric> {
    METRICS.iter().find(|m| m.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_prometheus_names_and_counters_end_in_total() {
        let name = regex::Regex::new("^policy_host_[a-z_]+$").unwrap();
        for (i, metric) in METRICS.iter().enumerate() {
            assert!(name.is_match(metric.name), "{}", metric.name);
            assert!(
                METRICS[..i].iter().all(|m| m.name != metric.name),
                "{} twice",
                metric.name
            );
            assert_eq!(
                metric.kind == Kind::Counter,
                metric.name.ends_with("_total"),
                "{}",
                metric.name
            );
            assert!(!metric.help.contains('\n'), "{}", metric.name);
        }
    }

    #[test]
    fn the_closed_label_sets_are_the_states_own_words() {
        use crate::report::machine::{Drive, RunCause};
        for set in LABEL_VALUES {
            let metric = find(set.metric).expect("a metric of the catalogue");
            assert!(metric.labels.contains(&set.label), "{set:?}");
        }
        let drives = [Drive::Timer, Drive::Watch, Drive::Manual].map(Drive::as_str);
        assert_eq!(drives, DRIVES);
        let causes = [
            RunCause::Timer,
            RunCause::Manual,
            RunCause::Start,
            RunCause::Event,
            RunCause::Resync,
            RunCause::Retry,
            RunCause::HoldEnded,
            RunCause::PauseEnded,
        ]
        .map(RunCause::as_str);
        assert_eq!(causes, RUN_CAUSES);
    }
}

#[cfg(test)]
#[path = "catalogue_docs.rs"]
mod catalogue_docs;
