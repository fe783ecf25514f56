//! `host status NAME...`: each unit as the provider reads it for a policy
//! (the `is-active` and `is-enabled` words, and what they count as), over
//! D-Bus or with systemctl as `--provider` says. Read-only: no reload, no
//! lock, no policy. For operators asking what the host sees, and for the
//! tests that hold the two readers to the same answers.
//!
//! The unit allowlist applies as it does to a policy: a unit outside it is
//! not read, and its line says so (`denied`, naming the patterns).

use std::fmt::Write as _;
use std::path::PathBuf;

use serde::Serialize;

use crate::cli::StatusArgs;
use crate::provider::runner::{find_in_path, ProcessRunner};
use crate::provider::{Provider, SystemdConfig, SystemdProvider};
use crate::service_name::quote;
use crate::settings::{ConfigFile, ProviderSettings};

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

#[derive(Debug, Serialize)]
struct StatusReport {
    reader: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reader_note: Option<String>,
    units: Vec<UnitStatus>,
}

pub fn execute(args: &StatusArgs) -> anyhow::Result<i32> {
    let file = ConfigFile::load(args.config.as_deref())?;
    let settings = ProviderSettings::resolve(&args.provider_flags, &file)?;
    let systemctl: Result<PathBuf, String> = std::env::var_os("PATH")
        .and_then(|path| find_in_path("systemctl", &path))
        .ok_or_else(|| "systemctl not found on PATH".to_owned());
    // A noop provider: queries only, and no daemon-reload.
    let mut provider = SystemdProvider::new(
        SystemdConfig {
            systemctl,
            timeout: settings.systemctl_timeout,
            noop: true,
            allow: settings.allow,
            status_via: settings.status_via,
            jobs: 1,
            settle: std::time::Duration::ZERO,
            // A report of the units as they are, pending jobs included.
            await_unit_jobs: false,
        },
        Box::new(ProcessRunner),
    );
    let mut units = Vec::new();
    let mut failed = false;
    for name in &args.names {
        units.push(match provider.status(name) {
            Ok(status) => UnitStatus {
                name: name.clone(),
                active: Some(status.active_word),
                enabled: Some(status.enabled_word),
                running: Some(status.running),
                counts_enabled: Some(status.enabled),
                error: None,
                error_kind: None,
            },
            Err(e) => {
                failed = true;
                UnitStatus {
                    name: name.clone(),
                    active: None,
                    enabled: None,
                    running: None,
                    counts_enabled: None,
                    error: Some(e.message().to_owned()),
                    error_kind: Some(e.kind().as_str()),
                }
            }
        });
    }
    let (reader, note) = provider.status_reader();
    let report = StatusReport {
        reader,
        reader_note: note.map(str::to_owned),
        units,
    };
    let text = if args.json {
        serde_json::to_string_pretty(&report)? + "\n"
    } else {
        let mut out = String::new();
        for unit in &report.units {
            let name = quote(&unit.name);
            match (&unit.active, &unit.enabled, &unit.error) {
                (Some(active), Some(enabled), _) => {
                    let _ = writeln!(out, "{name}  {active}  {enabled}");
                }
                (_, _, error) => {
                    let _ = writeln!(out, "{name}  error: {}", error.as_deref().unwrap_or(""));
                }
            }
        }
        let _ = writeln!(
            out,
            "(read {})",
            match &report.reader_note {
                None => format!("over {}", if reader == "dbus" { "D-Bus" } else { reader }),
                Some(note) => format!("with {reader}: {note}"),
            }
        );
        out
    };
    print!("{text}");
    Ok(i32::from(failed))
}
