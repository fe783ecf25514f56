//! What an option is, as host.toml's reader, its template and the
//! command line's help see it: its flag, key, help, default, the kind of
//! value it takes and the commands that take it. Below both the kinds'
//! parsers (`value`) and the declarations (`declare`), which use it.

/// Which commands take a setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// `run`, `verify` and `inspect`: whom to trust.
    Trust,
    /// `run` and `status`: how systemd is asked.
    Provider,
    /// `run` and `verify`: what the host remembers between runs.
    State,
    /// `run` only: where its report and metrics are written.
    Outputs,
    /// `run` and `compile`: where compiled policies are kept.
    Cache,
    /// `run` only.
    Run,
    /// `run` and `push`: how registries are reached.
    Registry,
    /// `watch` only: when it runs.
    Watch,
}

/// One option of the host, as its flag, host.toml key, help and default.
#[derive(Debug)]
pub struct Setting {
    /// The command-line flag, without its dashes.
    pub flag: &'static str,
    /// The key in host.toml (`limits.memory_mib`).
    pub key: &'static str,
    pub value_name: &'static str,
    pub help: &'static str,
    /// The default, as it would be written on the command line; `None` for a
    /// list that is empty unless given, or a path that is absent unless given.
    pub default: Option<&'static str>,
    pub kind: Kind,
    pub scope: Scope,
}

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
