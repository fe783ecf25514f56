//! One settings model: every option of the host is declared once, in
//! [`SETTINGS`], with one name on the command line, one key in host.toml, one
//! default and one help text, and read from both places by the same code.
//!
//! The command line overrides the file, which overrides the default, except
//! for lists (`allow_units`), which add up. A bad value is an error that
//! names where it came from: `--memory-limit: ...` or
//! `/etc/policy-host/host.toml: limits.memory_mib: ...`. Values out of range
//! are errors, never silently changed.
//!
//! ```toml
//! allow_units = ["web-*", "nginx.service"]
//! trusted_keys_dir = "/etc/policy-host/trusted-keys"
//! lock_file = "/run/policy-host/lock"
//! lock_timeout_secs = 600
//! cache_dir = "/var/cache/policy-host"
//! state_dir = "/var/lib/policy-host"
//! registry_ca = "/etc/policy-host/registry-ca.pem"
//! insecure_registries = ["127.0.0.1:5000"]
//! registry_timeout_secs = 30
//! provider = "auto"
//!
//! [limits]
//! cpu_time_secs = 10
//! memory_mib = 64
//! call_budget = 10000
//! log_bytes = 1048576
//! report_bytes = 1048576
//! wall_clock_secs = 900
//! systemctl_timeout_secs = 90
//!
//! # What `host run` with no policy named runs, in order.
//! [[policy]]
//! source = "oci://registry.example.com/policies/web:1.4"
//! settings = "oci://registry.example.com/settings/web:prod"
//!
//! [[policy]]
//! source = "/etc/policy-host/policies/manifest-policy.wasm"
//! settings = "/etc/policy-host/manifest.yaml"
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context as _};

use crate::limits::Limits;
use crate::provider::UnitAllowlist;
use crate::signature::Trust;

/// Where the host looks for its configuration when `--config` is not given.
pub const DEFAULT_CONFIG_FILE: &str = "/etc/policy-host/host.toml";

/// The longest duration any setting accepts: one day.
const MAX_SECONDS: f64 = 86_400.0;
/// The most memory a policy may be given: 1 TiB, in MiB.
const MAX_MEMORY_MIB: u64 = 1 << 20;
/// The most bytes of log or report text a policy may be given: 1 GiB.
const MAX_TEXT_BYTES: u64 = 1 << 30;
/// The most provider calls one run may be given.
const MAX_CALLS: u64 = 1_000_000_000;

/// What kind of value a setting takes, and so how it is read and checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Seconds, more than 0 and at most a day; fractions allowed.
    Seconds,
    /// Mebibytes, a whole number from 1 to 1 TiB.
    Mebibytes,
    /// Bytes, a whole number from 1 to 1 GiB.
    Bytes,
    /// A whole number from 1 to a billion.
    Count,
    /// A path.
    Path,
    /// Glob patterns; the command line's add to the file's.
    Patterns,
    /// A path that is absent unless given.
    OptionalPath,
    /// Registry hosts (`host[:port]`); the command line's add to the file's.
    Hosts,
    /// One of a few words.
    Choice(&'static [&'static str]),
}

impl Kind {
    /// Whether the setting is a list that is empty unless given.
    pub fn is_list(self) -> bool {
        matches!(self, Kind::Patterns | Kind::Hosts)
    }
}

/// Which commands take a setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// `run`, `verify` and `inspect`: whom to trust.
    Trust,
    /// `run` only.
    Run,
    /// `run` and `push`: how registries are reached.
    Registry,
}

/// One option of the host.
#[derive(Debug)]
pub struct Setting {
    /// The command-line flag, without its dashes.
    pub flag: &'static str,
    /// The key in host.toml (`limits.memory_mib`).
    pub key: &'static str,
    pub value_name: &'static str,
    pub help: &'static str,
    /// The default, as it would be written on the command line; `None` for a
    /// list that is empty unless given.
    pub default: Option<&'static str>,
    pub kind: Kind,
    pub scope: Scope,
}

/// Every setting of the host.
pub const SETTINGS: &[Setting] = &[
    Setting {
        flag: "trusted-keys-dir",
        key: "trusted_keys_dir",
        value_name: "DIR",
        help: "The system directory of trusted *.pub keys, used when no --trusted-key is given",
        default: Some("/etc/policy-host/trusted-keys"),
        kind: Kind::Path,
        scope: Scope::Trust,
    },
    Setting {
        flag: "systemctl-timeout",
        key: "limits.systemctl_timeout_secs",
        value_name: "SECS",
        help: "The longest one systemctl command may take, in seconds",
        default: Some("90"),
        kind: Kind::Seconds,
        scope: Scope::Run,
    },
    Setting {
        flag: "cpu-time",
        key: "limits.cpu_time_secs",
        value_name: "SECS",
        help: "Guest CPU time per run, in seconds (host calls excluded)",
        default: Some("10"),
        kind: Kind::Seconds,
        scope: Scope::Run,
    },
    Setting {
        flag: "memory-limit",
        key: "limits.memory_mib",
        value_name: "MIB",
        help: "Guest memory, in MiB",
        default: Some("64"),
        kind: Kind::Mebibytes,
        scope: Scope::Run,
    },
    Setting {
        flag: "call-budget",
        key: "limits.call_budget",
        value_name: "N",
        help: "Provider calls per run",
        default: Some("10000"),
        kind: Kind::Count,
        scope: Scope::Run,
    },
    Setting {
        flag: "log-limit",
        key: "limits.log_bytes",
        value_name: "BYTES",
        help: "Captured policy stdout and stderr, in bytes",
        default: Some("1048576"),
        kind: Kind::Bytes,
        scope: Scope::Run,
    },
    Setting {
        flag: "report-limit",
        key: "limits.report_bytes",
        value_name: "BYTES",
        help: "Text in the policy's report, in bytes",
        default: Some("1048576"),
        kind: Kind::Bytes,
        scope: Scope::Run,
    },
    Setting {
        flag: "wall-clock",
        key: "limits.wall_clock_secs",
        value_name: "SECS",
        help: "The whole run, host calls included, in seconds",
        default: Some("900"),
        kind: Kind::Seconds,
        scope: Scope::Run,
    },
    Setting {
        flag: "allow-unit",
        key: "allow_units",
        value_name: "PATTERN",
        help: "Only let policies touch units matching this glob (e.g. 'web-*', 'nginx.service'); \
               repeatable, adds to the configuration file's; other units are denied",
        default: None,
        kind: Kind::Patterns,
        scope: Scope::Run,
    },
    Setting {
        flag: "lock-file",
        key: "lock_file",
        value_name: "FILE",
        help: "The lock file that keeps two runs on this machine from interleaving; its directory \
               must be root's alone (created 0700 when missing)",
        default: Some("/run/policy-host/lock"),
        kind: Kind::Path,
        scope: Scope::Run,
    },
    Setting {
        flag: "lock-timeout",
        key: "lock_timeout_secs",
        value_name: "SECS",
        help: "How long to wait for another run to release the lock, in seconds",
        default: Some("600"),
        kind: Kind::Seconds,
        scope: Scope::Run,
    },
    Setting {
        flag: "state-dir",
        key: "state_dir",
        value_name: "DIR",
        help: "Where the host keeps what it must remember between runs (root-only): the newest \
               signed version of each policy and settings file accepted, for rollback protection",
        default: Some("/var/lib/policy-host"),
        kind: Kind::Path,
        scope: Scope::Run,
    },
    Setting {
        flag: "cache-dir",
        key: "cache_dir",
        value_name: "DIR",
        help:
            "Where compiled policies are cached (root-only; unsafe entries are ignored and rebuilt)",
        default: Some("/var/cache/policy-host"),
        kind: Kind::Path,
        scope: Scope::Run,
    },
    Setting {
        flag: "provider",
        key: "provider",
        value_name: "auto|systemctl",
        help: "How status is read: auto (over D-Bus when the system bus and systemd on it \
               answer, else with systemctl) or systemctl (always `systemctl is-active` and \
               `is-enabled`); changes are always made with systemctl",
        default: Some("auto"),
        kind: Kind::Choice(&["auto", "systemctl"]),
        scope: Scope::Run,
    },
    Setting {
        flag: "registry-ca",
        key: "registry_ca",
        value_name: "FILE",
        help: "A PEM file of certificate authorities trusted for registries, besides the system's",
        default: None,
        kind: Kind::OptionalPath,
        scope: Scope::Registry,
    },
    Setting {
        flag: "insecure-registry",
        key: "insecure_registries",
        value_name: "HOST[:PORT]",
        help: "A registry spoken to over plain HTTP, without TLS (a test or an isolated network \
               only); repeatable, adds to the configuration file's",
        default: None,
        kind: Kind::Hosts,
        scope: Scope::Registry,
    },
    Setting {
        flag: "registry-timeout",
        key: "registry_timeout_secs",
        value_name: "SECS",
        help: "The longest one registry request may take, in seconds (never past the run's wall clock)",
        default: Some("30"),
        kind: Kind::Seconds,
        scope: Scope::Registry,
    },
];

fn setting(flag: &str) -> &'static Setting {
    SETTINGS
        .iter()
        .find(|s| s.flag == flag)
        .unwrap_or_else(|| panic!("no setting --{flag}"))
}

/// The values given on the command line for the settings of one scope.
/// Parsed by clap (as `#[command(flatten)]`), read by [`Resolver`].
#[derive(Debug, Clone, Default)]
pub struct Flags {
    values: BTreeMap<&'static str, Vec<String>>,
}

/// The command-line flags of the [`Scope::Trust`] settings.
#[derive(Debug, Clone, Default)]
pub struct TrustFlags(pub Flags);

/// The command-line flags of the [`Scope::Run`] settings.
#[derive(Debug, Clone, Default)]
pub struct RunFlags(pub Flags);

/// The command-line flags of the [`Scope::Registry`] settings.
#[derive(Debug, Clone, Default)]
pub struct RegistryFlags(pub Flags);

impl Flags {
    fn augment(cmd: clap::Command, scope: Scope) -> clap::Command {
        SETTINGS
            .iter()
            .filter(|s| s.scope == scope)
            .fold(cmd, |cmd, s| {
                let help = match s.default {
                    Some(default) => format!("{} [default: {default}]", s.help),
                    None => s.help.to_owned(),
                };
                let arg = clap::Arg::new(s.flag)
                    .long(s.flag)
                    .value_name(s.value_name)
                    .help(help);
                let arg = match s.kind {
                    Kind::Patterns | Kind::Hosts => arg.action(clap::ArgAction::Append),
                    Kind::Path | Kind::OptionalPath => arg.value_hint(clap::ValueHint::AnyPath),
                    _ => arg,
                };
                cmd.arg(arg)
            })
    }

    fn read(matches: &clap::ArgMatches, scope: Scope) -> Self {
        let values = SETTINGS
            .iter()
            .filter(|s| s.scope == scope)
            .filter_map(|s| {
                let given: Vec<String> = matches.get_many::<String>(s.flag)?.cloned().collect();
                Some((s.flag, given))
            })
            .collect();
        Self { values }
    }

    /// Sets a flag as if it had been given: for tests and for callers that
    /// build arguments in code.
    pub fn with(mut self, flag: &str, value: &str) -> Self {
        let flag = setting(flag).flag;
        self.values.entry(flag).or_default().push(value.to_owned());
        self
    }
}

macro_rules! clap_flags {
    ($ty:ident, $scope:expr) => {
        impl clap::FromArgMatches for $ty {
            fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
                Ok($ty(Flags::read(matches, $scope)))
            }
            fn update_from_arg_matches(
                &mut self,
                matches: &clap::ArgMatches,
            ) -> Result<(), clap::Error> {
                let update = Flags::read(matches, $scope);
                self.0.values.extend(update.values);
                Ok(())
            }
        }

        impl clap::Args for $ty {
            fn augment_args(cmd: clap::Command) -> clap::Command {
                Flags::augment(cmd, $scope)
            }
            fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
                Flags::augment(cmd, $scope)
            }
        }
    };
}

clap_flags!(TrustFlags, Scope::Trust);
clap_flags!(RunFlags, Scope::Run);
clap_flags!(RegistryFlags, Scope::Registry);

/// The host configuration file, read once per command.
#[derive(Debug, Clone, Default)]
pub struct ConfigFile {
    /// `None` when the default file is absent: every value is then default.
    path: Option<PathBuf>,
    values: BTreeMap<String, toml::Value>,
    /// The `[[policy]]` tables: what `host run` with no policy named runs.
    pub policies: Vec<PolicyEntry>,
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
}

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
                let entries: Vec<PolicyEntry> = value.try_into().with_context(|| {
                    format!(
                        "host configuration {}: `[[policy]]` takes `source` and, optionally, `settings`",
                        path.display()
                    )
                })?;
                let dir = path.parent().unwrap_or(Path::new("/"));
                entries
                    .into_iter()
                    .map(|entry| PolicyEntry {
                        source: relative_to(dir, &entry.source),
                        settings: entry.settings.map(|s| relative_to(dir, &s)),
                    })
                    .collect()
            }
        };
        let mut values = BTreeMap::new();
        flatten("", table, &mut values);
        for key in values.keys() {
            if !SETTINGS.iter().any(|s| s.key == key) {
                let line = line_of(text, key)
                    .map(|n| format!(" (line {n})"))
                    .unwrap_or_default();
                let known: Vec<&str> = SETTINGS.iter().map(|s| s.key).collect();
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
        })
    }

    /// The configuration file read, if any.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }
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

/// Where a value came from, as error messages name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Flag(&'static str),
    File { path: PathBuf, key: &'static str },
    Default,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Flag(flag) => write!(f, "--{flag}"),
            Source::File { path, key } => write!(f, "{}: {key}", path.display()),
            Source::Default => f.write_str("the default"),
        }
    }
}

/// A value as given: text from the command line, or a TOML value.
enum Raw<'a> {
    Text(&'a str),
    Toml(&'a toml::Value),
}

impl Raw<'_> {
    fn describe(&self) -> String {
        match self {
            Raw::Text(text) => format!("{text:?}"),
            Raw::Toml(value) => value.to_string(),
        }
    }

    fn number(&self) -> Option<f64> {
        match self {
            Raw::Text(text) => text.trim().parse().ok(),
            Raw::Toml(toml::Value::Integer(n)) => Some(*n as f64),
            Raw::Toml(toml::Value::Float(x)) => Some(*x),
            Raw::Toml(_) => None,
        }
    }

    fn whole(&self) -> Option<u64> {
        match self {
            Raw::Text(text) => text.trim().parse().ok(),
            Raw::Toml(toml::Value::Integer(n)) => u64::try_from(*n).ok(),
            Raw::Toml(_) => None,
        }
    }

    fn text(&self) -> Option<&str> {
        match self {
            Raw::Text(text) => Some(text),
            Raw::Toml(toml::Value::String(text)) => Some(text),
            Raw::Toml(_) => None,
        }
    }
}

/// Reads settings from the command line, then the file, then the defaults.
pub struct Resolver<'a> {
    flags: &'a Flags,
    file: &'a ConfigFile,
}

impl<'a> Resolver<'a> {
    pub fn new(flags: &'a Flags, file: &'a ConfigFile) -> Self {
        Self { flags, file }
    }

    /// The one value of `flag` and where it came from.
    fn raw(&self, flag: &str) -> (Raw<'_>, Source) {
        let s = setting(flag);
        if let Some(value) = self.flags.values.get(s.flag).and_then(|v| v.last()) {
            return (Raw::Text(value), Source::Flag(s.flag));
        }
        if let (Some(value), Some(path)) = (self.file.values.get(s.key), &self.file.path) {
            let source = Source::File {
                path: path.clone(),
                key: s.key,
            };
            return (Raw::Toml(value), source);
        }
        let default = s
            .default
            .unwrap_or_else(|| panic!("--{flag} has no default"));
        (Raw::Text(default), Source::Default)
    }

    pub fn seconds(&self, flag: &str) -> anyhow::Result<Duration> {
        let (raw, source) = self.raw(flag);
        match raw.number() {
            Some(s) if s.is_finite() && s > 0.0 && s <= MAX_SECONDS => {
                Ok(Duration::from_secs_f64(s))
            }
            _ => bail!(
                "{source}: expected more than 0 and at most {MAX_SECONDS} seconds, got {}",
                raw.describe()
            ),
        }
    }

    fn whole(&self, flag: &str, max: u64, unit: &str) -> anyhow::Result<u64> {
        let (raw, source) = self.raw(flag);
        match raw.whole() {
            Some(n) if (1..=max).contains(&n) => Ok(n),
            _ => bail!(
                "{source}: expected a whole number of {unit} from 1 to {max}, got {}",
                raw.describe()
            ),
        }
    }

    pub fn mebibytes_as_bytes(&self, flag: &str) -> anyhow::Result<usize> {
        let mib = self.whole(flag, MAX_MEMORY_MIB, "MiB")?;
        let bytes = mib << 20;
        usize::try_from(bytes).with_context(|| format!("--{flag}: {mib} MiB does not fit"))
    }

    pub fn bytes(&self, flag: &str) -> anyhow::Result<usize> {
        let n = self.whole(flag, MAX_TEXT_BYTES, "bytes")?;
        usize::try_from(n).with_context(|| format!("--{flag}: {n} bytes does not fit"))
    }

    pub fn count(&self, flag: &str) -> anyhow::Result<u64> {
        self.whole(flag, MAX_CALLS, "calls")
    }

    pub fn path(&self, flag: &str) -> anyhow::Result<PathBuf> {
        let (raw, source) = self.raw(flag);
        match raw.text() {
            Some(text) if !text.is_empty() => Ok(PathBuf::from(text)),
            _ => bail!("{source}: expected a path, got {}", raw.describe()),
        }
    }

    /// The path given, if any.
    pub fn optional_path(&self, flag: &str) -> anyhow::Result<Option<PathBuf>> {
        let s = setting(flag);
        if let Some(value) = self.flags.values.get(s.flag).and_then(|v| v.last()) {
            return Ok(Some(PathBuf::from(value)));
        }
        match (self.file.values.get(s.key), &self.file.path) {
            (Some(value), Some(path)) => match value.as_str() {
                Some(text) if !text.is_empty() => Ok(Some(PathBuf::from(text))),
                _ => bail!(
                    "{}: {}: expected a path, got {value}",
                    path.display(),
                    s.key
                ),
            },
            _ => Ok(None),
        }
    }

    /// One of the words the setting allows.
    pub fn choice(&self, flag: &str) -> anyhow::Result<&'static str> {
        let Kind::Choice(words) = setting(flag).kind else {
            panic!("--{flag} is not a choice");
        };
        let (raw, source) = self.raw(flag);
        match raw.text().and_then(|t| words.iter().find(|w| **w == t)) {
            Some(word) => Ok(word),
            None => bail!(
                "{source}: expected one of {}, got {}",
                words.join(", "),
                raw.describe()
            ),
        }
    }

    /// Registry hosts, the file's then the command line's, each checked.
    pub fn hosts(&self, flag: &str) -> anyhow::Result<Vec<String>> {
        let s = setting(flag);
        let mut hosts = Vec::new();
        let mut given: Vec<(String, Source)> = Vec::new();
        if let (Some(value), Some(path)) = (self.file.values.get(s.key), &self.file.path) {
            let source = Source::File {
                path: path.clone(),
                key: s.key,
            };
            let items = value.as_array().with_context(|| {
                format!("{source}: expected a list of host[:port], got {value}")
            })?;
            for item in items {
                let text = item
                    .as_str()
                    .with_context(|| format!("{source}: expected a string, got {item}"))?;
                given.push((text.to_owned(), source.clone()));
            }
        }
        for text in self.flags.values.get(s.flag).into_iter().flatten() {
            given.push((text.clone(), Source::Flag(s.flag)));
        }
        for (text, source) in given {
            crate::oci::OciRef::parse(&format!("oci://{text}/x"))
                .with_context(|| format!("{source}: {text:?} is not a registry host[:port]"))?;
            if !hosts.contains(&text) {
                hosts.push(text);
            }
        }
        Ok(hosts)
    }

    /// The file's list and then the command line's, in that order, each
    /// checked as an allowlist on its own so that a bad pattern is named
    /// with where it came from.
    pub fn patterns(&self, flag: &str) -> anyhow::Result<Vec<String>> {
        let s = setting(flag);
        let mut patterns = Vec::new();
        if let (Some(value), Some(path)) = (self.file.values.get(s.key), &self.file.path) {
            let source = Source::File {
                path: path.clone(),
                key: s.key,
            };
            let items = value
                .as_array()
                .with_context(|| format!("{source}: expected a list of strings, got {value}"))?;
            let mut from_file = Vec::new();
            for item in items {
                let text = item
                    .as_str()
                    .with_context(|| format!("{source}: expected a string, got {item}"))?;
                from_file.push(text.to_owned());
            }
            UnitAllowlist::new(&from_file).with_context(|| source.to_string())?;
            patterns.extend(from_file);
        }
        if let Some(given) = self.flags.values.get(s.flag) {
            UnitAllowlist::new(given).with_context(|| Source::Flag(s.flag).to_string())?;
            patterns.extend(given.iter().cloned());
        }
        Ok(patterns)
    }
}

/// Whom to trust, as `run`, `verify` and `inspect` all resolve it: the keys
/// given one by one, else the trusted-keys directory (flag, file, default).
pub fn resolve_trust(
    keys: &[PathBuf],
    flags: &TrustFlags,
    file: &ConfigFile,
) -> anyhow::Result<Trust> {
    Ok(Trust::new(
        keys.to_vec(),
        Resolver::new(&flags.0, file).path("trusted-keys-dir")?,
    ))
}

/// Everything `host run` needs to know beyond its policies.
#[derive(Debug)]
pub struct RunSettings {
    pub limits: Limits,
    pub systemctl_timeout: Duration,
    /// `provider`: `auto` or `systemctl`.
    pub status_via: crate::provider::StatusVia,
    pub allow: Option<UnitAllowlist>,
    pub lock_file: PathBuf,
    pub lock_timeout: Duration,
    pub cache_dir: PathBuf,
    pub state_dir: PathBuf,
}

impl RunSettings {
    pub fn resolve(flags: &RunFlags, file: &ConfigFile) -> anyhow::Result<Self> {
        let r = Resolver::new(&flags.0, file);
        let limits = Limits {
            cpu_time: r.seconds("cpu-time")?,
            memory_bytes: r.mebibytes_as_bytes("memory-limit")?,
            call_budget: r.count("call-budget")?,
            log_bytes: r.bytes("log-limit")?,
            report_bytes: r.bytes("report-limit")?,
            wall_clock: r.seconds("wall-clock")?,
        };
        let patterns = r.patterns("allow-unit")?;
        let allow = if patterns.is_empty() {
            None
        } else {
            Some(UnitAllowlist::new(&patterns)?)
        };
        Ok(Self {
            limits,
            systemctl_timeout: r.seconds("systemctl-timeout")?,
            status_via: match r.choice("provider")? {
                "systemctl" => crate::provider::StatusVia::Systemctl,
                _ => crate::provider::StatusVia::Auto,
            },
            allow,
            lock_file: r.path("lock-file")?,
            lock_timeout: r.seconds("lock-timeout")?,
            cache_dir: r.path("cache-dir")?,
            state_dir: r.path("state-dir")?,
        })
    }

    /// The settings with nothing given and no configuration file.
    pub fn defaults() -> Self {
        Self::resolve(&RunFlags::default(), &ConfigFile::default())
            .expect("the declared defaults are valid")
    }
}

/// The packaged `/etc/policy-host/host.toml`: every setting, commented out
/// at its default and explained, and how to list policies. Generated from
/// [`SETTINGS`], so it never drifts from the options.
pub fn host_toml_template() -> String {
    use std::fmt::Write as _;
    let mut out = String::from(
        "# /etc/policy-host/host.toml: the settings of policy host on this machine.\n\
         #\n\
         # Every setting is listed below at its default, commented out: uncomment a line to\n\
         # change it. The command line overrides this file (policy-host(8)). An unknown key or a\n\
         # bad value stops every run with an error that names it.\n\
         #\n\
         # `policy-host run` with no policy named runs the [[policy]] list at the end, in order.\n\
         # With none listed, a run succeeds and does nothing.\n",
    );
    let value = |s: &Setting| -> String {
        match (s.kind, s.default) {
            (Kind::Path | Kind::Choice(_), Some(default)) => format!("{default:?}"),
            (Kind::Patterns, _) => "[\"web-*\", \"nginx.service\"]".to_owned(),
            (Kind::Hosts, _) => "[\"registry.internal:5000\"]".to_owned(),
            (Kind::OptionalPath, _) => "\"/etc/policy-host/registry-ca.pem\"".to_owned(),
            (_, Some(default)) => default.to_owned(),
            (_, None) => "\"\"".to_owned(),
        }
    };
    let entry = |out: &mut String, s: &Setting, key: &str| {
        let _ = writeln!(out);
        let help = s.help.split_whitespace().collect::<Vec<_>>().join(" ");
        let mut line = String::from("#");
        for word in help.split(' ') {
            if line.len() + word.len() + 1 > 92 {
                let _ = writeln!(out, "{line}");
                line = String::from("#");
            }
            line.push(' ');
            line.push_str(word);
        }
        let _ = writeln!(out, "{line}");
        let default = match (s.kind, s.default) {
            (Kind::Patterns | Kind::Hosts, _) => "none".to_owned(),
            (Kind::OptionalPath, _) => "none".to_owned(),
            (_, Some(default)) => default.to_owned(),
            (_, None) => "none".to_owned(),
        };
        let _ = writeln!(out, "# (command line: --{}; default: {default})", s.flag);
        let _ = writeln!(out, "#{key} = {}", value(s));
    };
    for s in SETTINGS.iter().filter(|s| !s.key.contains('.')) {
        entry(&mut out, s, s.key);
    }
    let _ = writeln!(out, "\n[limits]");
    for s in SETTINGS.iter().filter(|s| s.key.starts_with("limits.")) {
        entry(&mut out, s, &s.key["limits.".len()..]);
    }
    out.push_str(
        "\n# The policies `policy-host run` runs, in order: each a signed policy (a file, a directory\n\
         # of *.wasm files, or an oci:// reference) and, optionally, its signed settings (a file or\n\
         # an oci:// reference). Relative paths are relative to this file's directory.\n\
         #\n\
         #[[policy]]\n\
         #source = \"oci://registry.example.com/policies/web:1.4\"\n\
         #settings = \"oci://registry.example.com/settings/web:prod\"\n\
         #\n",
    );
    out.push_str(BUILT_IN_POLICY_EXAMPLE);
    out
}

/// The end of the host.toml template: the built-in manifest policy, made
/// ready to run. Its command lines (`#   ...`) are the ones README.Debian
/// gives, word for word; tests/tests/debian_package.rs runs them inside the
/// sandbox and then this `[[policy]]`, uncommented.
pub const BUILT_IN_POLICY_EXAMPLE: &str = "\
# The built-in manifest policy (see /usr/share/doc/policy-host/README.Debian). Like every
# policy it runs only when a key this machine trusts signed it, under the file name given
# here. Once, a key for this machine (leave out --unencrypted to protect it with a
# password, which signing then asks for):
#   policy-host keygen --unencrypted --out /root/policy-host
#   install -m 0644 /root/policy-host/policy-host.pub /etc/policy-host/trusted-keys/local.pub
# Then, with the desired state written to /etc/policy-host/manifest.yaml, three commands:
#   install -D -m 0644 /usr/lib/policy-host/manifest-policy.wasm /etc/policy-host/policies/manifest-policy.wasm
#   policy-host sign /etc/policy-host/policies/manifest-policy.wasm --key /root/policy-host/policy-host.key
#   policy-host sign /etc/policy-host/manifest.yaml --key /root/policy-host/policy-host.key
# and uncomment these three lines:
#[[policy]]
#source = \"/etc/policy-host/policies/manifest-policy.wasm\"
#settings = \"/etc/policy-host/manifest.yaml\"
";

/// How `run` and `push` reach registries.
#[derive(Debug, Clone)]
pub struct RegistrySettings {
    pub ca: Option<PathBuf>,
    pub insecure: Vec<String>,
    pub timeout: Duration,
}

impl RegistrySettings {
    pub fn resolve(flags: &RegistryFlags, file: &ConfigFile) -> anyhow::Result<Self> {
        let r = Resolver::new(&flags.0, file);
        Ok(Self {
            ca: r.optional_path("registry-ca")?,
            insecure: r.hosts("insecure-registry")?,
            timeout: r.seconds("registry-timeout")?,
        })
    }

    /// How to reach registries with these settings; `deadline` is when the
    /// command must be over (a run's wall clock), if it has one.
    pub fn client_config(self, deadline: Option<std::time::Instant>) -> crate::oci::RegistryConfig {
        crate::oci::RegistryConfig {
            ca: self.ca,
            insecure: self.insecure,
            timeout: self.timeout,
            deadline,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> anyhow::Result<ConfigFile> {
        ConfigFile::parse(Path::new("/etc/policy-host/host.toml"), text)
    }

    fn run(flags: Flags, text: &str) -> anyhow::Result<RunSettings> {
        RunSettings::resolve(&RunFlags(flags), &file(text)?)
    }

    fn error(flags: Flags, text: &str) -> String {
        format!("{:#}", run(flags, text).expect_err("should be refused"))
    }

    #[test]
    fn every_default_is_valid_and_the_documented_example_parses() {
        let defaults = RunSettings::defaults();
        assert_eq!(defaults.limits.memory_bytes, 64 << 20);
        assert_eq!(defaults.systemctl_timeout, Duration::from_secs(90));
        assert!(defaults.allow.is_none());
        let text = include_str!("settings.rs")
            .lines()
            .filter_map(|l| l.strip_prefix("//! "))
            .skip_while(|l| !l.starts_with("```toml"))
            .skip(1)
            .take_while(|l| !l.starts_with("```"))
            .collect::<Vec<_>>()
            .join("\n");
        let settings = run(Flags::default(), &text).unwrap();
        assert_eq!(settings.limits.wall_clock, Duration::from_secs(900));
        assert_eq!(
            settings.allow.unwrap().patterns(),
            ["web-*", "nginx.service"]
        );
    }

    #[test]
    fn every_setting_has_one_flag_and_one_key() {
        for (i, a) in SETTINGS.iter().enumerate() {
            for b in &SETTINGS[i + 1..] {
                assert_ne!(a.flag, b.flag);
                assert_ne!(a.key, b.key);
            }
            let optional = a.kind.is_list() || a.kind == Kind::OptionalPath;
            assert_eq!(a.default.is_none(), optional, "{}", a.flag);
        }
    }

    #[test]
    fn the_command_line_overrides_the_file_which_overrides_the_default() {
        let text = "[limits]\nmemory_mib = 32\ncpu_time_secs = 2.5\n";
        let settings = run(Flags::default().with("memory-limit", "16"), text).unwrap();
        assert_eq!(settings.limits.memory_bytes, 16 << 20);
        assert_eq!(settings.limits.cpu_time, Duration::from_millis(2500));
        assert_eq!(settings.limits.call_budget, 10_000);
    }

    #[test]
    fn policies_are_listed_in_order_relative_to_the_file() {
        let config = file(
            "[[policy]]\nsource = \"oci://r.example/policies/web:1\"\nsettings = \"web.yaml\"\n\n[[policy]]\nsource = \"/usr/lib/p.wasm\"\n",
        )
        .unwrap();
        assert_eq!(
            config.policies,
            [
                PolicyEntry {
                    source: "oci://r.example/policies/web:1".into(),
                    settings: Some("/etc/policy-host/web.yaml".into()),
                },
                PolicyEntry {
                    source: "/usr/lib/p.wasm".into(),
                    settings: None,
                },
            ]
        );
        let err = format!("{:#}", file("[[policy]]\nsorce = \"x\"\n").unwrap_err());
        assert!(err.contains("`[[policy]]` takes `source`"), "{err}");
    }

    #[test]
    fn registry_settings_are_read_and_checked() {
        let config =
            file("insecure_registries = [\"127.0.0.1:5000\"]\nregistry_timeout_secs = 5\n")
                .unwrap();
        let flags = RegistryFlags(Flags::default().with("insecure-registry", "localhost:5001"));
        let registry = RegistrySettings::resolve(&flags, &config).unwrap();
        assert_eq!(registry.insecure, ["127.0.0.1:5000", "localhost:5001"]);
        assert_eq!(registry.timeout, Duration::from_secs(5));
        assert_eq!(registry.ca, None);
        let bad = file("insecure_registries = [\"http://x/\"]\n").unwrap();
        let err = RegistrySettings::resolve(&RegistryFlags::default(), &bad).unwrap_err();
        assert!(
            format!("{err:#}").contains("insecure_registries"),
            "{err:#}"
        );
    }

    #[test]
    fn the_template_parses_lists_every_setting_and_each_line_uncommented_parses() {
        let template = host_toml_template();
        let config = file(&template).unwrap();
        assert!(config.policies.is_empty());
        run(Flags::default(), &template).unwrap();
        for s in SETTINGS {
            let key = s.key.rsplit('.').next().unwrap();
            let line = template
                .lines()
                .find(|l| l.starts_with(&format!("#{key} = ")))
                .unwrap_or_else(|| panic!("{} is not in the template", s.key));
            // Uncommented, the line is a valid setting in its place.
            let uncommented = template.replacen(line, &line[1..], 1);
            let config = file(&uncommented).unwrap_or_else(|e| panic!("{line}: {e:#}"));
            assert!(config.values.contains_key(s.key), "{line}");
            RunSettings::resolve(&RunFlags::default(), &config)
                .unwrap_or_else(|e| panic!("{line}: {e:#}"));
            RegistrySettings::resolve(&RegistryFlags::default(), &config)
                .unwrap_or_else(|e| panic!("{line}: {e:#}"));
        }
    }

    #[test]
    fn allowlists_add_up() {
        let settings = run(
            Flags::default().with("allow-unit", "db"),
            "allow_units = [\"web-*\"]\n",
        )
        .unwrap();
        assert_eq!(settings.allow.unwrap().patterns(), ["web-*", "db"]);
    }

    #[test]
    fn errors_name_where_the_value_came_from() {
        assert_eq!(
            error(Flags::default().with("memory-limit", "17592186044416"), ""),
            "--memory-limit: expected a whole number of MiB from 1 to 1048576, got \"17592186044416\""
        );
        assert_eq!(
            error(Flags::default(), "[limits]\nmemory_mib = 0\n"),
            "/etc/policy-host/host.toml: limits.memory_mib: expected a whole number of MiB from 1 to 1048576, got 0"
        );
        assert_eq!(
            error(Flags::default(), "[limits]\ncpu_time_secs = \"ten\"\n"),
            "/etc/policy-host/host.toml: limits.cpu_time_secs: expected more than 0 and at most 86400 seconds, got \"ten\""
        );
        assert!(error(Flags::default().with("wall-clock", "nan"), "").starts_with("--wall-clock:"));
        assert!(error(Flags::default().with("call-budget", "-1"), "").starts_with("--call-budget:"));
        assert!(error(Flags::default(), "allow_units = \"web\"\n")
            .contains("allow_units: expected a list of strings"));
        assert_eq!(
            error(Flags::default(), "allow_units = [\"web-[\"]\n")
                .split(": pattern")
                .next(),
            Some("/etc/policy-host/host.toml: allow_units")
        );
        assert!(error(Flags::default().with("allow-unit", "web-["), "")
            .starts_with("--allow-unit: pattern \"web-[\""));
    }

    #[test]
    fn unknown_keys_are_named_with_their_line() {
        let e = format!(
            "{:#}",
            file("allow_units = []\n[limits]\ncpu_secs = 3\n").unwrap_err()
        );
        assert!(
            e.contains("unknown setting `limits.cpu_secs` (line 3)"),
            "{e}"
        );
    }

    #[test]
    fn absent_default_file_is_empty_but_absent_explicit_file_is_an_error() {
        assert!(ConfigFile::load(Some(Path::new("/nonexistent/host.toml"))).is_err());
    }

    #[test]
    fn trust_settings_read_the_files_directory() {
        let file = file("trusted_keys_dir = \"/srv/keys\"\n").unwrap();
        let trust = resolve_trust(&[], &TrustFlags::default(), &file).unwrap();
        assert_eq!(trust.keys_dir, Path::new("/srv/keys"));
        let flags = TrustFlags(Flags::default().with("trusted-keys-dir", "/opt/keys"));
        let trust = resolve_trust(&[], &flags, &file).unwrap();
        assert_eq!(trust.keys_dir, Path::new("/opt/keys"));
    }
}
