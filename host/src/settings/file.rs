//! host.toml: read once per command, every key checked against the
//! declared settings, its `[[policy]]` list made absolute, its `[labels]`
//! checked.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};

use super::options::all_settings;
use super::value::{Lookup, Source};
use crate::facts::Labels;

/// Where the host looks for its configuration when `--config` is not given.
pub const DEFAULT_CONFIG_FILE: &str = "/etc/policy-host/host.toml";

/// The host configuration file, read once per command.
#[derive(Debug, Clone, Default)]
pub struct ConfigFile {
    /// `None` when the default file is absent: every value is then default.
    path: Option<PathBuf>,
    values: BTreeMap<String, toml::Value>,
    /// The `[[policy]]` tables: what `host run` with no policy named runs.
    pub policies: Vec<PolicyEntry>,
    /// The `[labels]` table, checked: the operator's names for this machine.
    labels: Labels,
}

/// One `[[policy]]` of host.toml: a policy and the settings it runs with,
/// each a file, a directory (policies only) or an `oci://` reference.
/// Relative paths are relative to host.toml's directory.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyEntry {
    pub source: String,
    #[serde(default)]
    pub settings: Option<String>,
    /// This policy's guest memory limit, in MiB, over `limits.memory_mib`
    /// (a large guest, such as a Python policy, beside small ones).
    #[serde(default)]
    pub memory_mib: Option<u64>,
}

impl PolicyEntry {
    /// [`Self::memory_mib`] in bytes.
    pub fn memory_bytes(&self) -> Option<usize> {
        self.memory_mib.map(|mib| (mib as usize) << 20)
    }
}

/// The most a `[[policy]]`'s `memory_mib` may say (64 GiB): a guest's
/// linear memory is 32-bit (4 GiB) per memory.
const MAX_POLICY_MEMORY_MIB: u64 = 1 << 16;

impl ConfigFile {
    /// Reads `--config FILE` (which must exist), or the default file (which
    /// may be absent). Unknown keys are errors naming the key and its line.
    pub fn load(explicit: Option<&Path>) -> anyhow::Result<Self> {
        let path = explicit.unwrap_or(Path::new(DEFAULT_CONFIG_FILE));
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && explicit.is_none() => {
                return Ok(Self::default())
            }
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("reading host configuration {}", path.display()))
            }
        };
        Self::parse(path, &text)
    }

    /// Parses `text` as the configuration file `path`.
    pub fn parse(path: &Path, text: &str) -> anyhow::Result<Self> {
        let mut table: toml::Table = toml::from_str(text)
            .with_context(|| format!("host configuration {}", path.display()))?;
        let policies = match table.remove("policy") {
            None => Vec::new(),
            Some(value) => {
                misplaced_setting(path, text, &value)?;
                let entries: Vec<PolicyEntry> = value.try_into().with_context(|| {
                    format!(
                        "host configuration {}: `[[policy]]` takes `source` and, optionally, `settings` and `memory_mib`",
                        path.display()
                    )
                })?;
                let dir = path.parent().unwrap_or(Path::new("/"));
                if let Some(entry) = entries.iter().find(|e| {
                    e.memory_mib
                        .is_some_and(|m| m == 0 || m > MAX_POLICY_MEMORY_MIB)
                }) {
                    bail!(
                        "host configuration {}: the [[policy]] of {}: memory_mib = {} is not \
                         between 1 and {MAX_POLICY_MEMORY_MIB}",
                        path.display(),
                        entry.source,
                        entry.memory_mib.unwrap_or_default()
                    );
                }
                entries
                    .into_iter()
                    .map(|entry| PolicyEntry {
                        source: relative_to(dir, &entry.source),
                        settings: entry.settings.map(|s| relative_to(dir, &s)),
                        memory_mib: entry.memory_mib,
                    })
                    .collect()
            }
        };
        let labels = match table.remove("labels") {
            None => Labels::default(),
            Some(value) => super::labels::read(path, text, value)?,
        };
        let mut values = BTreeMap::new();
        flatten("", table, &mut values);
        for key in values.keys() {
            if !all_settings().any(|s| s.key == key) {
                let line = line_of(text, key)
                    .map(|n| format!(" (line {n})"))
                    .unwrap_or_default();
                // `[limits]` then a top-level key: TOML reads it as the table's.
                if let Some((table, top)) = key.split_once('.') {
                    if all_settings().any(|s| s.key == top) {
                        bail!(
                            "host configuration {}: `{top}`{line} is below the `[{table}]` header, so TOML reads it as `{key}`; move it above `[{table}]`",
                            path.display()
                        );
                    }
                }
                let known: Vec<&str> = all_settings().map(|s| s.key).collect();
                bail!(
                    "host configuration {}: unknown setting `{key}`{line}; the settings are: {}",
                    path.display(),
                    known.join(", ")
                );
            }
        }
        Ok(Self {
            path: Some(path.to_owned()),
            values,
            policies,
            labels,
        })
    }

    /// The configuration file read, if any.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The operator's labels (`[labels]`); none when the file gives none.
    pub fn labels(&self) -> &Labels {
        &self.labels
    }

    /// The value of `key` (`limits.memory_mib`), when the file gives one.
    pub fn value(&self, key: &str) -> Option<&toml::Value> {
        self.values.get(key)
    }
}

impl Lookup for ConfigFile {
    fn lookup(&self, key: &'static str) -> Option<(&toml::Value, Source)> {
        let (value, path) = (self.value(key)?, self.path()?);
        Some((
            value,
            Source::File {
                path: path.to_owned(),
                key,
            },
        ))
    }
}

/// A setting written after a `[[policy]]` header: TOML reads every key
/// below the header as that policy's, so a top-level setting placed there
/// belongs to the policy. Said as such, rather than as an unknown field of
/// `[[policy]]`.
fn misplaced_setting(path: &Path, text: &str, policies: &toml::Value) -> anyhow::Result<()> {
    let tables = policies
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(toml::Value::as_table);
    for table in tables {
        for key in table.keys() {
            let is_setting = all_settings()
                .any(|s| s.key == key || s.key.split_once('.').is_some_and(|(t, _)| t == key));
            if is_setting {
                let line = line_of(text, key)
                    .map(|n| format!(" (line {n})"))
                    .unwrap_or_default();
                bail!(
                    "host configuration {}: `{key}`{line} is below a `[[policy]]` header, so TOML reads it as that policy's; move it above the first `[[policy]]`",
                    path.display()
                );
            }
        }
    }
    Ok(())
}

/// A path in host.toml, made absolute against its directory; a reference
/// stays as it is.
fn relative_to(dir: &Path, location: &str) -> String {
    if location.starts_with("oci://") || Path::new(location).is_absolute() || location.is_empty() {
        location.to_owned()
    } else {
        dir.join(location).display().to_string()
    }
}

/// `a = 1` and `[t] b = 2` as `a` and `t.b`; nested tables only one level
/// deep exist, but any depth is flattened so unknown ones are named whole.
fn flatten(prefix: &str, table: toml::Table, out: &mut BTreeMap<String, toml::Value>) {
    for (key, value) in table {
        let key = if prefix.is_empty() {
            key
        } else {
            format!("{prefix}.{key}")
        };
        match value {
            toml::Value::Table(inner) => flatten(&key, inner, out),
            value => {
                out.insert(key, value);
            }
        }
    }
}

/// The line where `key`'s last part is assigned, for error messages.
fn line_of(text: &str, key: &str) -> Option<usize> {
    let name = key.rsplit('.').next()?;
    text.lines()
        .position(|line| {
            line.trim_start()
                .strip_prefix(name)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .map(|i| i + 1)
}
