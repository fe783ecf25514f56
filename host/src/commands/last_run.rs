//! What `host status` with no unit named shows first: the last run, read
//! from the report file host.toml names (`report_file`), and the timer's
//! next run as systemd says it.

use crate::resource::ResourceRef;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::Context as _;
use serde::Serialize;
use serde_json::Value;

use crate::provider::runner::{CommandRunner, ProcessRunner};
use crate::text::one_line;

/// The largest report read: a run's report is bounded by the report limit.
const MAX_REPORT_BYTES: u64 = 64 << 20;

/// The timer that runs host.toml's list (the package's, and dist/systemd's).
pub(super) const TIMER: &str = "policy-host.timer";

/// The last run, as its report says.
#[derive(Debug, Serialize)]
pub(super) struct LastRun {
    pub(super) report: PathBuf,
    /// When the report was written (Unix seconds).
    pub(super) written: u64,
    pub(super) success: bool,
    pub(super) noop: bool,
    /// The run could not happen: why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) error: Option<String>,
    pub(super) resources: u64,
    pub(super) changed: u64,
    pub(super) failed: u64,
    pub(super) unchanged: u64,
    /// `service#web: ...` for each resource that failed (the first ten).
    pub(super) failures: Vec<String>,
    pub(super) sources: Vec<Source>,
    /// The units the run's resources name (`service#web` → `web`).
    #[serde(skip)]
    pub(super) units: Vec<String>,
}

/// One policy's or settings document's source in the last run.
#[derive(Debug, Serialize)]
pub(super) struct Source {
    pub(super) kind: &'static str,
    pub(super) policy: String,
    pub(super) location: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) digest: Option<String>,
    pub(super) stale: bool,
}

/// The timer, as systemd says it.
#[derive(Debug, Serialize)]
pub(super) struct Timer {
    pub(super) unit: &'static str,
    pub(super) active: String,
    pub(super) enabled: String,
    /// `NextElapseUSecRealtime`, as systemctl prints it; empty when none.
    pub(super) next: String,
    pub(super) last: String,
}

impl LastRun {
    /// Reads the report at `path`; `Ok(None)` when there is none yet.
    pub(super) fn read(path: &Path) -> anyhow::Result<Option<Self>> {
        let meta = match std::fs::metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
            Ok(meta) => meta,
        };
        if meta.len() > MAX_REPORT_BYTES {
            anyhow::bail!("{} is {} bytes, not a report", path.display(), meta.len());
        }
        let written = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs());
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let report: Value = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a policy host report", path.display()))?;
        Ok(Some(Self::from_report(path, written, &report)))
    }

    fn from_report(path: &Path, written: u64, report: &Value) -> Self {
        let summary = &report["summary"];
        let count = |key: &str| summary[key].as_u64().unwrap_or(0);
        // One policy's report, several under `policies`, or a run that
        // could not happen (`error`).
        let runs: Vec<&Value> = match report["policies"].as_array() {
            Some(policies) => policies.iter().collect(),
            None if report.get("policy").is_some() => vec![report],
            None => Vec::new(),
        };
        let mut failures = Vec::new();
        let mut sources = Vec::new();
        let mut units = Vec::new();
        for run in &runs {
            let policy = run["policy"].as_str().unwrap_or_default().to_owned();
            for (kind, source) in [
                ("policy", &run["source"]),
                ("settings", &run["settings_source"]),
            ] {
                if let Some(location) = source["location"].as_str() {
                    sources.push(Source {
                        kind,
                        policy: policy.clone(),
                        location: location.to_owned(),
                        digest: source["digest"]
                            .as_str()
                            .filter(|d| !d.is_empty())
                            .map(str::to_owned),
                        stale: source["stale"].as_bool().unwrap_or(false),
                    });
                }
            }
            for resource in run["resources"].as_array().into_iter().flatten() {
                let name = resource["resource"].as_str().unwrap_or_default();
                let service = ResourceRef::parse_service(name).ok();
                if let Some(unit) = service.as_ref().map(ResourceRef::name) {
                    if !units.iter().any(|u| u == unit) {
                        units.push(unit.to_owned());
                    }
                }
                if resource["failed"].as_bool() == Some(true) && failures.len() < 10 {
                    let errors: Vec<&str> = resource["errors"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .collect();
                    failures.push(format!("{name}: {}", errors.join("; ")));
                }
            }
        }
        Self {
            report: path.to_owned(),
            written,
            success: summary["success"].as_bool().unwrap_or(false),
            noop: runs.iter().any(|r| r["noop"].as_bool() == Some(true)),
            error: report["error"].as_str().map(str::to_owned),
            resources: count("resources"),
            changed: count("changed"),
            failed: count("failed"),
            unchanged: count("unchanged"),
            failures,
            sources,
            units,
        }
    }

    /// The lines for people (report text escaped).
    pub(super) fn render(&self, now: SystemTime) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let when = SystemTime::UNIX_EPOCH + Duration::from_secs(self.written);
        let ago = now
            .duration_since(when)
            .map(|d| {
                format!(
                    "{} ago",
                    humantime::format_duration(Duration::from_secs(d.as_secs()))
                )
            })
            .unwrap_or_else(|_| "in the future".to_owned());
        let outcome = match (&self.error, self.success) {
            (Some(error), _) => format!("could not happen: {}", one_line(error)),
            (None, true) => "success".to_owned(),
            (None, false) => "FAILED".to_owned(),
        };
        let noop = if self.noop { " (noop)" } else { "" };
        let _ = writeln!(
            out,
            "last run{noop}: {} ({ago}): {outcome}; {} resources, {} changed, {} failed, {} unchanged",
            humantime::format_rfc3339_seconds(when),
            self.resources,
            self.changed,
            self.failed,
            self.unchanged
        );
        for failure in &self.failures {
            let _ = writeln!(out, "  failed: {}", one_line(failure));
        }
        for source in &self.sources {
            let _ = writeln!(
                out,
                "{} of {}: {}{}{}",
                source.kind,
                one_line(&source.policy),
                one_line(&source.location),
                source
                    .digest
                    .as_deref()
                    .map(|d| format!(" ({})", one_line(d)))
                    .unwrap_or_default(),
                if source.stale {
                    ", STALE: the registry could not be reached"
                } else {
                    ""
                }
            );
        }
        out
    }
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
