//! `host status [NAME...]`: each unit as the provider reads it for a policy
//! (the `is-active` and `is-enabled` words, and what they count as), over
//! D-Bus or with systemctl as `--provider` says. Read-only: no reload, no
//! lock, no policy. For operators asking what the host sees, and for the
//! tests that hold the two readers to the same answers.
//!
//! With no unit named, what an operator asks first: the machine's state (the
//! report host.toml's `report_file` names), what drives it, the timer's next
//! run, then the units the policies manage.
//!
//! The unit allowlist applies as it does to a policy: a unit outside it is
//! not read, and its line says so (`denied`, naming the patterns).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::cli::StatusArgs;
use crate::left_alone::pause::Pauses;
use crate::provider::{Provider, SystemdConfig};
use crate::settings::{ConfigFile, OutputFlags, ProviderSettings, StateFlags};
use crate::text::one_line;

use super::last_run::{Driver, LastRun, Timer};

#[derive(Debug, Serialize)]
struct UnitStatus {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    active: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    enabled: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    running: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    counts_enabled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error_kind: Option<&'static str>,
}

/// One pause in force: its unit (none: every unit) and its end.
#[derive(Debug, Serialize)]
struct Paused {
    #[serde(skip_serializing_if = "Option::is_none")]
    unit: Option<String>,
    /// RFC 3339; none: until `host resume`.
    #[serde(skip_serializing_if = "Option::is_none")]
    until: Option<String>,
}

/// The pauses in force, from the state directory host.toml names; none
/// when it cannot be read (not root): status reads, it never refuses.
fn paused(file: &ConfigFile) -> Vec<Paused> {
    let Ok(state) = StateFlags::default().resolve(file) else {
        return Vec::new();
    };
    let Ok((_, pauses)) = Pauses::open(&state.state_dir) else {
        return Vec::new();
    };
    pauses
        .listed(std::time::SystemTime::now())
        .into_iter()
        .map(|(unit, pause)| Paused {
            unit: unit.map(str::to_owned),
            until: pause
                .until()
                .map(|at| humantime::format_rfc3339_seconds(at).to_string()),
        })
        .collect()
}

#[derive(Debug, Serialize)]
struct StatusReport {
    /// With no unit named: what drives the machine's runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    driver: Option<Driver>,
    /// With no unit named: the machine's state, or why it is not known.
    #[serde(skip_serializing_if = "Option::is_none")]
    last_run: Option<LastRun>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_run_unknown: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timer: Option<Timer>,
    /// The operator's pauses in force (`host pause`), when the state
    /// directory could be read.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    paused: Vec<Paused>,
    reader: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reader_note: Option<String>,
    units: Vec<UnitStatus>,
}

pub fn execute(args: &StatusArgs) -> anyhow::Result<i32> {
    let file = ConfigFile::load(args.config.path())?;
    let settings = ProviderSettings::resolve(&args.provider_flags, &file)?;
    let systemctl: Result<PathBuf, String> = crate::provider::systemctl_on_path();
    // A noop provider: queries only, and no daemon-reload.
    let mut provider = crate::provider::systemd(SystemdConfig {
        systemctl: systemctl.clone(),
        timeout: settings.systemctl_timeout,
        noop: true,
        allow: settings.allow,
        status_via: settings.status_via,
        jobs: 1,
        settle: std::time::Duration::ZERO,
        // A report of the units as they are, pending jobs included.
        await_unit_jobs: false,
        left_alone: crate::left_alone::LeftAlone::default(),
        reload_before_change: Default::default(),
        windows: None,
    });
    // No unit named: the overview, and the units of the last run.
    let overview = args.names.is_empty();
    let (last_run, last_run_unknown) = if overview {
        last_run(&file)?
    } else {
        (None, None)
    };
    let timer = overview
        .then(|| systemctl.as_ref().ok())
        .flatten()
        .and_then(|systemctl| Timer::read(systemctl, settings.systemctl_timeout));
    let driver = overview.then(|| driver(last_run.as_ref(), timer.as_ref()));
    let names: Vec<String> = if overview {
        last_run.as_ref().map(LastRun::units).unwrap_or_default()
    } else {
        args.names.clone()
    };
    let units: Vec<UnitStatus> = names.iter().map(|name| read(&mut provider, name)).collect();
    let failed =
        last_run.as_ref().is_some_and(|r| !r.well()) || units.iter().any(|u| u.error.is_some());
    let (reader, note) = provider.status_reader();
    let report = StatusReport {
        driver,
        last_run,
        last_run_unknown,
        timer,
        paused: if overview { paused(&file) } else { Vec::new() },
        reader,
        reader_note: note.map(str::to_owned),
        units,
    };
    let text = if args.json {
        serde_json::to_string_pretty(&report)? + "\n"
    } else {
        report.render(overview)
    };
    print!("{text}");
    Ok(i32::from(failed))
}

/// The last run, from host.toml's `report_file`; or why it is not known.
fn last_run(file: &ConfigFile) -> anyhow::Result<(Option<LastRun>, Option<String>)> {
    Ok(match OutputFlags::default().resolve(file)?.report_file {
        None => (
            None,
            Some(format!(
                "no report_file in {}: set it there, so that every run writes its report",
                file.path()
                    .map_or("host.toml".into(), |p| p.display().to_string())
            )),
        ),
        Some(path) => match LastRun::read(&path)? {
            Some(run) => (Some(run), None),
            None => (
                None,
                Some(format!("no run yet ({} does not exist)", path.display())),
            ),
        },
    })
}

/// What drives the machine: a watch that said it is up and whose process
/// is alive (whatever unit runs it), else the timer when it is active,
/// else nothing.
fn driver(last_run: Option<&LastRun>, timer: Option<&Timer>) -> Driver {
    let watch = last_run.and_then(|run| run.state.watch.as_ref());
    if watch.is_some_and(|w| w.up && Path::new(&format!("/proc/{}", w.pid)).exists()) {
        Driver::Watch
    } else if timer.is_some_and(|t| t.active == "active") {
        Driver::Timer
    } else {
        Driver::Nothing
    }
}

/// One unit as the provider reads it, or why it could not.
fn read(provider: &mut impl Provider, name: &str) -> UnitStatus {
    match provider.status(name) {
        Ok(status) => UnitStatus {
            name: name.to_owned(),
            active: Some(status.active_word),
            enabled: Some(status.enabled_word),
            running: Some(status.running),
            counts_enabled: Some(status.enabled),
            error: None,
            error_kind: None,
        },
        Err(e) => UnitStatus {
            name: name.to_owned(),
            active: None,
            enabled: None,
            running: None,
            counts_enabled: None,
            error: Some(e.message().to_owned()),
            error_kind: Some(e.kind().as_str()),
        },
    }
}

impl StatusReport {
    /// The human form: the last run, the timer, then a line per unit.
    fn render(&self, overview: bool) -> String {
        let mut out = String::new();
        if let Some(run) = &self.last_run {
            let driver = self.driver.unwrap_or(Driver::Nothing);
            out.push_str(&run.render(driver, std::time::SystemTime::now()));
        }
        if let Some(why) = &self.last_run_unknown {
            let _ = writeln!(out, "last run: unknown: {}", one_line(why));
        }
        if let Some(timer) = &self.timer {
            out.push_str(&timer.render());
        }
        for pause in &self.paused {
            let _ = writeln!(
                out,
                "paused: {} until {} (runs leave it alone)",
                pause.unit.as_deref().map_or("every unit".into(), one_line),
                pause
                    .until
                    .clone()
                    .unwrap_or_else(|| crate::program::command("resume"))
            );
        }
        if overview && !self.units.is_empty() {
            let _ = writeln!(out, "units of the last run:");
        }
        for unit in &self.units {
            // Names the host checked, or the report's: shown as they are,
            // escaped where they would not be safe.
            let name = one_line(&unit.name);
            match (&unit.active, &unit.enabled, &unit.error) {
                (Some(active), Some(enabled), _) => {
                    let _ = writeln!(out, "{name}  {active}  {enabled}");
                }
                (_, _, error) => {
                    let _ = writeln!(out, "{name}  error: {}", error.as_deref().unwrap_or(""));
                }
            }
        }
        let reader = self.reader;
        let _ = writeln!(
            out,
            "(read {})",
            match &self.reader_note {
                None => format!("over {}", if reader == "dbus" { "D-Bus" } else { reader }),
                Some(note) => format!("with {reader}: {note}"),
            }
        );
        out
    }
}
