//! The kinds of value a setting takes, and how each is read and checked,
//! from the command line's text or host.toml's TOML alike.

use std::fmt;
use std::marker::PhantomData;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context as _};
use clap::{ArgAction, ValueHint};

use super::setting::{Kind, Setting};
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

/// A kind of value: how it is given on the command line, and how it is
/// read into its typed form (`Out`). It only parses: which of the command
/// line, host.toml and the default counts is the declaration's
/// (`settings!`), which hands it a [`Given`].
pub trait Value {
    type Out;
    const KIND: Kind;
    /// `Set` for one value (given twice is an error), `Append` for a list.
    const ACTION: ArgAction;
    const HINT: ValueHint = ValueHint::Unknown;
    /// Whether a declaration of this kind must have a default (a single
    /// value does; a list or an optional path does not). Checked when the
    /// declaration compiles.
    const NEEDS_DEFAULT: bool = true;
    /// The value from what was given.
    fn parse(given: Given<'_>) -> anyhow::Result<Self::Out>;
}

/// Where host.toml's values are looked up: the declaration asks it for a
/// setting's key, and it answers with the value and where it came from.
pub trait Lookup {
    fn lookup(&self, key: &'static str) -> Option<(&toml::Value, Source)>;
}

/// What was given for one setting: the command line's values, host.toml's
/// value, and the declaration (with its default).
pub struct Given<'a> {
    pub setting: &'a Setting,
    /// The command line's values, in order.
    pub flags: &'a [String],
    /// host.toml's value, and where it came from.
    pub file: Option<(&'a toml::Value, Source)>,
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

impl<'a> Given<'a> {
    /// The one value of a single-valued setting and where it came from:
    /// the command line's last, else the file's, else the default (which
    /// every single-valued declaration has: `NEEDS_DEFAULT`).
    fn raw(&self) -> (Raw<'a>, Source) {
        if let Some(value) = self.flags.last() {
            return (Raw::Text(value), Source::Flag(self.setting.flag));
        }
        if let Some((value, source)) = &self.file {
            return (Raw::Toml(value), source.clone());
        }
        (
            Raw::Text(self.setting.default.unwrap_or_default()),
            Source::Default,
        )
    }

    /// A whole number from 1 to `max`, of `unit`s.
    fn whole(&self, max: u64, unit: &str) -> anyhow::Result<u64> {
        let (raw, source) = self.raw();
        match raw.whole() {
            Some(n) if (1..=max).contains(&n) => Ok(n),
            _ => bail!(
                "{source}: expected a whole number of {unit} from 1 to {max}, got {}",
                raw.describe()
            ),
        }
    }

    /// The strings of a list setting in host.toml, checked to be strings.
    fn file_list(&self, what: &str) -> anyhow::Result<Vec<(String, Source)>> {
        let Some((value, source)) = &self.file else {
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

    /// A list setting as given: the file's items, then the command line's,
    /// each with where it came from.
    fn file_then_flags(&self, what: &str) -> anyhow::Result<Vec<(String, Source)>> {
        let mut all = self.file_list(what)?;
        all.extend(
            self.flags
                .iter()
                .map(|text| (text.clone(), Source::Flag(self.setting.flag))),
        );
        Ok(all)
    }
}

/// Seconds, more than 0 and at most a day.
pub struct Seconds;

impl Value for Seconds {
    type Out = Duration;
    const KIND: Kind = Kind::Seconds;
    const ACTION: ArgAction = ArgAction::Set;
    fn parse(given: Given<'_>) -> anyhow::Result<Duration> {
        let (raw, source) = given.raw();
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
    fn parse(given: Given<'_>) -> anyhow::Result<Duration> {
        let (raw, source) = given.raw();
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
    fn parse(given: Given<'_>) -> anyhow::Result<usize> {
        let mib = given.whole(MAX_MEMORY_MIB, "MiB")?;
        usize::try_from(mib << 20)
            .with_context(|| format!("--{}: {mib} MiB does not fit", given.setting.flag))
    }
}

/// Bytes of text.
pub struct Bytes;

impl Value for Bytes {
    type Out = usize;
    const KIND: Kind = Kind::Bytes;
    const ACTION: ArgAction = ArgAction::Set;
    fn parse(given: Given<'_>) -> anyhow::Result<usize> {
        let n = given.whole(MAX_TEXT_BYTES, "bytes")?;
        usize::try_from(n)
            .with_context(|| format!("--{}: {n} bytes does not fit", given.setting.flag))
    }
}

/// A count of calls.
pub struct Count;

impl Value for Count {
    type Out = u64;
    const KIND: Kind = Kind::Count;
    const ACTION: ArgAction = ArgAction::Set;
    fn parse(given: Given<'_>) -> anyhow::Result<u64> {
        given.whole(MAX_CALLS, "calls")
    }
}

/// How many jobs may be pending at once: a whole number from 1 to 4096.
pub struct Jobs;

impl Value for Jobs {
    type Out = usize;
    const KIND: Kind = Kind::Count;
    const ACTION: ArgAction = ArgAction::Set;
    fn parse(given: Given<'_>) -> anyhow::Result<usize> {
        let jobs = given.whole(MAX_JOBS, "jobs")?;
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
    fn parse(given: Given<'_>) -> anyhow::Result<PathBuf> {
        let (raw, source) = given.raw();
        match raw.text() {
            Some(text) if !text.is_empty() => Ok(PathBuf::from(text)),
            _ => bail!("{source}: expected a path, got {}", raw.describe()),
        }
    }
}

/// A path that is absent unless given.
pub struct OptionalPath;

impl Value for OptionalPath {
    const NEEDS_DEFAULT: bool = false;
    type Out = Option<PathBuf>;
    const KIND: Kind = Kind::OptionalPath;
    const ACTION: ArgAction = ArgAction::Set;
    const HINT: ValueHint = ValueHint::AnyPath;
    fn parse(given: Given<'_>) -> anyhow::Result<Option<PathBuf>> {
        if let Some(value) = given.flags.last() {
            return Ok(Some(PathBuf::from(value)));
        }
        match given.file {
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
    const NEEDS_DEFAULT: bool = false;
    type Out = Vec<String>;
    const KIND: Kind = Kind::Patterns;
    const ACTION: ArgAction = ArgAction::Append;
    fn parse(given: Given<'_>) -> anyhow::Result<Vec<String>> {
        let from_file: Vec<String> = given
            .file_list("strings")?
            .into_iter()
            .map(|(text, _)| text)
            .collect();
        if let Some((_, source)) = &given.file {
            UnitAllowlist::new(&from_file).with_context(|| source.to_string())?;
        }
        if !given.flags.is_empty() {
            UnitAllowlist::new(given.flags)
                .with_context(|| Source::Flag(given.setting.flag).to_string())?;
        }
        Ok(from_file
            .into_iter()
            .chain(given.flags.iter().cloned())
            .collect())
    }
}

/// Registry hosts (`host[:port]`): the file's, then the command line's,
/// each checked, without repeats.
pub struct Hosts;

impl Value for Hosts {
    const NEEDS_DEFAULT: bool = false;
    type Out = Vec<String>;
    const KIND: Kind = Kind::Hosts;
    const ACTION: ArgAction = ArgAction::Append;
    fn parse(given: Given<'_>) -> anyhow::Result<Vec<String>> {
        let all = given.file_then_flags("host[:port]")?;
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
    type Out = crate::subscriptions::WatchPaths;
    const KIND: Kind = Kind::Prefixes;
    const ACTION: ArgAction = ArgAction::Append;
    const HINT: ValueHint = ValueHint::DirPath;
    fn parse(given: Given<'_>) -> anyhow::Result<crate::subscriptions::WatchPaths> {
        let mut all = given.file_then_flags("directories")?;
        if all.is_empty() {
            all = given
                .setting
                .default
                .unwrap_or_default()
                .split(',')
                .map(|d| (d.to_owned(), Source::Default))
                .collect();
        }
        for (text, source) in &all {
            crate::subscriptions::WatchPaths::new(std::slice::from_ref(text))
                .map_err(|why| anyhow::anyhow!("{source}: {why}"))?;
        }
        let dirs: Vec<String> = all.into_iter().map(|(text, _)| text).collect();
        crate::subscriptions::WatchPaths::new(&dirs).map_err(|why| anyhow::anyhow!(why))
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
    fn parse(given: Given<'_>) -> anyhow::Result<W> {
        let (raw, source) = given.raw();
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
