//! The kinds of value a setting takes, and how each is read and checked,
//! from the command line's text or host.toml's TOML alike.

use std::fmt;
use std::marker::PhantomData;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context as _};
use clap::{ArgAction, ValueHint};

use super::declare::Setting;
use super::file::ConfigFile;
use crate::provider::UnitAllowlist;

/// The longest duration any setting accepts: one day.
const MAX_SECONDS: f64 = 86_400.0;
/// The most memory a policy may be given: 1 TiB, in MiB.
const MAX_MEMORY_MIB: u64 = 1 << 20;
/// The most bytes of log or report text a policy may be given: 1 GiB.
const MAX_TEXT_BYTES: u64 = 1 << 30;
/// The most provider calls one run may be given.
const MAX_CALLS: u64 = 1_000_000_000;
/// The most jobs a run may keep pending at once.
const MAX_JOBS: u64 = 4096;

/// What kind of value a setting takes, as host.toml's template shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Seconds, more than 0 and at most a day; fractions allowed.
    Seconds,
    /// Mebibytes, a whole number from 1 to 1 TiB.
    Mebibytes,
    /// Bytes, a whole number from 1 to 1 GiB.
    Bytes,
    /// A whole number from 1 to the setting's maximum.
    Count,
    /// A path.
    Path,
    /// Glob patterns; the command line's add to the file's.
    Patterns,
    /// A path that is absent unless given.
    OptionalPath,
    /// Registry hosts (`host[:port]`); the command line's add to the file's.
    Hosts,
    /// Directories (absolute paths); the command line's add to the file's,
    /// and the default applies when neither gives any.
    Prefixes,
    /// One of a few words.
    Choice(&'static [&'static str]),
}

/// A kind of value: how it is given on the command line, and how it is
/// read into its typed form (`Out`).
pub trait Value {
    type Out;
    const KIND: Kind;
    /// `Set` for one value (given twice is an error), `Append` for a list.
    const ACTION: ArgAction;
    const HINT: ValueHint = ValueHint::Unknown;
    /// The value from `given` (the command line's), else from `file`, else
    /// the setting's default.
    fn resolve(setting: &Setting, given: &[String], file: &ConfigFile)
        -> anyhow::Result<Self::Out>;
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

/// The file's value of `setting`, and where it came from.
fn in_file<'a>(setting: &Setting, file: &'a ConfigFile) -> Option<(&'a toml::Value, Source)> {
    let (value, path) = (file.value(setting.key)?, file.path()?);
    let source = Source::File {
        path: path.to_owned(),
        key: setting.key,
    };
    Some((value, source))
}

/// The one value of a single-valued setting and where it came from: the
/// command line's last, else the file's, else the default.
fn raw<'a>(setting: &Setting, given: &'a [String], file: &'a ConfigFile) -> (Raw<'a>, Source) {
    if let Some(value) = given.last() {
        return (Raw::Text(value), Source::Flag(setting.flag));
    }
    if let Some((value, source)) = in_file(setting, file) {
        return (Raw::Toml(value), source);
    }
    let default = setting
        .default
        .unwrap_or_else(|| panic!("--{} has no default", setting.flag));
    (Raw::Text(default), Source::Default)
}

/// A whole number from 1 to `max`, of `unit`s.
fn whole(
    setting: &Setting,
    given: &[String],
    file: &ConfigFile,
    max: u64,
    unit: &str,
) -> anyhow::Result<u64> {
    let (raw, source) = raw(setting, given, file);
    match raw.whole() {
        Some(n) if (1..=max).contains(&n) => Ok(n),
        _ => bail!(
            "{source}: expected a whole number of {unit} from 1 to {max}, got {}",
            raw.describe()
        ),
    }
}

/// The strings of a list setting in host.toml, checked to be strings.
fn file_list(
    setting: &Setting,
    file: &ConfigFile,
    what: &str,
) -> anyhow::Result<Vec<(String, Source)>> {
    let Some((value, source)) = in_file(setting, file) else {
        return Ok(Vec::new());
    };
    let items = value
        .as_array()
        .with_context(|| format!("{source}: expected a list of {what}, got {value}"))?;
    items
        .iter()
        .map(|item| {
            let text = item
                .as_str()
                .with_context(|| format!("{source}: expected a string, got {item}"))?;
            Ok((text.to_owned(), source.clone()))
        })
        .collect()
}

/// A list setting as given: the file's items, then the command line's, each
/// with where it came from.
fn file_then_flags(
    setting: &Setting,
    given: &[String],
    file: &ConfigFile,
    what: &str,
) -> anyhow::Result<Vec<(String, Source)>> {
    let mut all = file_list(setting, file, what)?;
    all.extend(
        given
            .iter()
            .map(|text| (text.clone(), Source::Flag(setting.flag))),
    );
    Ok(all)
}

/// Seconds, more than 0 and at most a day.
pub struct Seconds;

impl Value for Seconds {
    type Out = Duration;
    const KIND: Kind = Kind::Seconds;
    const ACTION: ArgAction = ArgAction::Set;
    fn resolve(setting: &Setting, given: &[String], file: &ConfigFile) -> anyhow::Result<Duration> {
        let (raw, source) = raw(setting, given, file);
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
}

/// How long a started unit must stay up: 0 (judged when its job ends)
/// up to [`MAX_SETTLE_SECONDS`]; fractions allowed.
pub struct SettleSeconds;

/// The longest settle window: a minute (supervisord's `startsecs` is 1 s;
/// a start that needs longer to prove itself wants a readiness protocol,
/// `Type=notify`, rather than a longer window).
const MAX_SETTLE_SECONDS: f64 = 60.0;

impl Value for SettleSeconds {
    type Out = Duration;
    const KIND: Kind = Kind::Seconds;
    const ACTION: ArgAction = ArgAction::Set;
    fn resolve(setting: &Setting, given: &[String], file: &ConfigFile) -> anyhow::Result<Duration> {
        let (raw, source) = raw(setting, given, file);
        match raw.number() {
            Some(s) if s.is_finite() && (0.0..=MAX_SETTLE_SECONDS).contains(&s) => {
                Ok(Duration::from_secs_f64(s))
            }
            _ => bail!(
                "{source}: expected 0 (off) to {MAX_SETTLE_SECONDS} seconds, got {}",
                raw.describe()
            ),
        }
    }
}

/// Mebibytes, resolved to bytes.
pub struct Mebibytes;

impl Value for Mebibytes {
    type Out = usize;
    const KIND: Kind = Kind::Mebibytes;
    const ACTION: ArgAction = ArgAction::Set;
    fn resolve(setting: &Setting, given: &[String], file: &ConfigFile) -> anyhow::Result<usize> {
        let mib = whole(setting, given, file, MAX_MEMORY_MIB, "MiB")?;
        usize::try_from(mib << 20)
            .with_context(|| format!("--{}: {mib} MiB does not fit", setting.flag))
    }
}

/// Bytes of text.
pub struct Bytes;

impl Value for Bytes {
    type Out = usize;
    const KIND: Kind = Kind::Bytes;
    const ACTION: ArgAction = ArgAction::Set;
    fn resolve(setting: &Setting, given: &[String], file: &ConfigFile) -> anyhow::Result<usize> {
        let n = whole(setting, given, file, MAX_TEXT_BYTES, "bytes")?;
        usize::try_from(n).with_context(|| format!("--{}: {n} bytes does not fit", setting.flag))
    }
}

/// A count of calls.
pub struct Count;

impl Value for Count {
    type Out = u64;
    const KIND: Kind = Kind::Count;
    const ACTION: ArgAction = ArgAction::Set;
    fn resolve(setting: &Setting, given: &[String], file: &ConfigFile) -> anyhow::Result<u64> {
        whole(setting, given, file, MAX_CALLS, "calls")
    }
}

/// How many jobs may be pending at once: a whole number from 1 to 4096.
pub struct Jobs;

impl Value for Jobs {
    type Out = usize;
    const KIND: Kind = Kind::Count;
    const ACTION: ArgAction = ArgAction::Set;
    fn resolve(setting: &Setting, given: &[String], file: &ConfigFile) -> anyhow::Result<usize> {
        let jobs = whole(setting, given, file, MAX_JOBS, "jobs")?;
        Ok(usize::try_from(jobs).expect("at most 4096"))
    }
}

/// A path, never empty (any kind of file).
pub struct AnyPath;

impl Value for AnyPath {
    type Out = PathBuf;
    const KIND: Kind = Kind::Path;
    const ACTION: ArgAction = ArgAction::Set;
    const HINT: ValueHint = ValueHint::AnyPath;
    fn resolve(setting: &Setting, given: &[String], file: &ConfigFile) -> anyhow::Result<PathBuf> {
        let (raw, source) = raw(setting, given, file);
        match raw.text() {
            Some(text) if !text.is_empty() => Ok(PathBuf::from(text)),
            _ => bail!("{source}: expected a path, got {}", raw.describe()),
        }
    }
}

/// A path that is absent unless given.
pub struct OptionalPath;

impl Value for OptionalPath {
    type Out = Option<PathBuf>;
    const KIND: Kind = Kind::OptionalPath;
    const ACTION: ArgAction = ArgAction::Set;
    const HINT: ValueHint = ValueHint::AnyPath;
    fn resolve(
        setting: &Setting,
        given: &[String],
        file: &ConfigFile,
    ) -> anyhow::Result<Option<PathBuf>> {
        if let Some(value) = given.last() {
            return Ok(Some(PathBuf::from(value)));
        }
        match in_file(setting, file) {
            Some((value, source)) => match value.as_str() {
                Some(text) if !text.is_empty() => Ok(Some(PathBuf::from(text))),
                _ => bail!("{source}: expected a path, got {value}"),
            },
            None => Ok(None),
        }
    }
}

/// Unit glob patterns: the file's list, then the command line's, each
/// checked as an allowlist on its own so that a bad pattern is named with
/// where it came from.
pub struct Patterns;

impl Value for Patterns {
    type Out = Vec<String>;
    const KIND: Kind = Kind::Patterns;
    const ACTION: ArgAction = ArgAction::Append;
    fn resolve(
        setting: &Setting,
        given: &[String],
        file: &ConfigFile,
    ) -> anyhow::Result<Vec<String>> {
        let from_file: Vec<String> = file_list(setting, file, "strings")?
            .into_iter()
            .map(|(text, _)| text)
            .collect();
        if let Some((_, source)) = in_file(setting, file) {
            UnitAllowlist::new(&from_file).with_context(|| source.to_string())?;
        }
        if !given.is_empty() {
            UnitAllowlist::new(given).with_context(|| Source::Flag(setting.flag).to_string())?;
        }
        Ok(from_file.into_iter().chain(given.iter().cloned()).collect())
    }
}

/// Registry hosts (`host[:port]`): the file's, then the command line's,
/// each checked, without repeats.
pub struct Hosts;

impl Value for Hosts {
    type Out = Vec<String>;
    const KIND: Kind = Kind::Hosts;
    const ACTION: ArgAction = ArgAction::Append;
    fn resolve(
        setting: &Setting,
        given: &[String],
        file: &ConfigFile,
    ) -> anyhow::Result<Vec<String>> {
        let all = file_then_flags(setting, given, file, "host[:port]")?;
        let mut hosts = Vec::new();
        for (text, source) in all {
            crate::oci::OciRef::parse(&format!("oci://{text}/x"))
                .with_context(|| format!("{source}: {text:?} is not a registry host[:port]"))?;
            if !hosts.contains(&text) {
                hosts.push(text);
            }
        }
        Ok(hosts)
    }
}

/// Directories below which `file#` subscriptions are read: the file's and
/// the command line's, each an absolute path without `..`; the default
/// (comma-separated) when neither gives any.
pub struct Prefixes;

impl Value for Prefixes {
    type Out = crate::watch::WatchPaths;
    const KIND: Kind = Kind::Prefixes;
    const ACTION: ArgAction = ArgAction::Append;
    const HINT: ValueHint = ValueHint::DirPath;
    fn resolve(
        setting: &Setting,
        given: &[String],
        file: &ConfigFile,
    ) -> anyhow::Result<crate::watch::WatchPaths> {
        let mut all = file_then_flags(setting, given, file, "directories")?;
        if all.is_empty() {
            let default = setting
                .default
                .unwrap_or_else(|| panic!("--{} has no default", setting.flag));
            all = default
                .split(',')
                .map(|d| (d.to_owned(), Source::Default))
                .collect();
        }
        for (text, source) in &all {
            crate::watch::WatchPaths::new(std::slice::from_ref(text))
                .map_err(|why| anyhow::anyhow!("{source}: {why}"))?;
        }
        let dirs: Vec<String> = all.into_iter().map(|(text, _)| text).collect();
        crate::watch::WatchPaths::new(&dirs).map_err(|why| anyhow::anyhow!(why))
    }
}

/// A setting whose value is one of a few words, each meaning a `W`.
pub trait Words: Sized + 'static {
    /// Every word, as the help and errors list them.
    const WORDS: &'static [&'static str];
    /// The meaning of one of [`Self::WORDS`].
    fn from_word(word: &str) -> Option<Self>;
}

/// One of the words of `W`, resolved to its meaning.
pub struct Choice<W>(PhantomData<W>);

impl<W: Words> Value for Choice<W> {
    type Out = W;
    const KIND: Kind = Kind::Choice(W::WORDS);
    const ACTION: ArgAction = ArgAction::Set;
    fn resolve(setting: &Setting, given: &[String], file: &ConfigFile) -> anyhow::Result<W> {
        let (raw, source) = raw(setting, given, file);
        match raw.text().and_then(W::from_word) {
            Some(meaning) => Ok(meaning),
            None => bail!(
                "{source}: expected one of {}, got {}",
                W::WORDS.join(", "),
                raw.describe()
            ),
        }
    }
}
