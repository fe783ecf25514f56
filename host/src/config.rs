//! The machine's host configuration file (`/etc/policy-host/host.toml`), so
//! operators can set limits and the unit allowlist per machine. Command-line
//! options override it.
//!
//! ```toml
//! allow_units = ["web-*", "nginx.service"]
//! trusted_keys_dir = "/etc/policy-host/trusted-keys"
//!
//! [limits]
//! cpu_time_secs = 10
//! memory_mib = 64
//! call_budget = 10000
//! log_bytes = 1048576
//! report_bytes = 1048576
//! wall_clock_secs = 900
//! systemctl_timeout_secs = 90
//! ```

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::Deserialize;

/// Where the host looks for its configuration when `--config` is not given.
pub const DEFAULT_CONFIG_FILE: &str = "/etc/policy-host/host.toml";

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostConfig {
    /// Glob patterns of the units policies may touch; empty = any unit.
    #[serde(default)]
    pub allow_units: Vec<String>,
    pub trusted_keys_dir: Option<PathBuf>,
    #[serde(default)]
    pub limits: LimitSettings,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitSettings {
    pub cpu_time_secs: Option<f64>,
    pub memory_mib: Option<u64>,
    pub call_budget: Option<u64>,
    pub log_bytes: Option<u64>,
    pub report_bytes: Option<u64>,
    pub wall_clock_secs: Option<f64>,
    pub systemctl_timeout_secs: Option<f64>,
}

impl HostConfig {
    /// Reads `path`. The default file may be absent (then everything is
    /// default); a file named with `--config` must exist. A file that does not
    /// parse is always an error naming the line and field.
    pub fn load(path: &Path, explicit: bool) -> anyhow::Result<Self> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => {
                return Ok(Self::default())
            }
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("reading host configuration {}", path.display()))
            }
        };
        toml::from_str(&text).with_context(|| format!("host configuration {}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_example() {
        let text = include_str!("config.rs")
            .lines()
            .filter_map(|l| l.strip_prefix("//! "))
            .skip_while(|l| !l.starts_with("```toml"))
            .skip(1)
            .take_while(|l| !l.starts_with("```"))
            .collect::<Vec<_>>()
            .join("\n");
        let config: HostConfig = toml::from_str(&text).unwrap();
        assert_eq!(config.allow_units, ["web-*", "nginx.service"]);
        assert_eq!(config.limits.memory_mib, Some(64));
        assert_eq!(config.limits.wall_clock_secs, Some(900.0));
    }

    #[test]
    fn unknown_field_is_named_with_its_line() {
        let err =
            toml::from_str::<HostConfig>("allow_units = []\n[limits]\ncpu_secs = 3\n").unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains("cpu_secs") && message.contains("line 3"),
            "{message}"
        );
    }

    #[test]
    fn absent_default_file_is_empty_but_absent_explicit_file_is_an_error() {
        let missing = Path::new("/nonexistent/policy-host.toml");
        assert_eq!(
            HostConfig::load(missing, false).unwrap(),
            HostConfig::default()
        );
        assert!(HostConfig::load(missing, true).is_err());
    }
}
