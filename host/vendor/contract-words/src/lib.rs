//! The tables both sides of the policy contract (`wit/policy.wit`) share,
//! declared once: the words `systemctl is-active` and `is-enabled` print
//! and what each counts as, the unit types systemd knows, the words of the
//! contract's operations, actions and states as reports write them, and the
//! cases of `provider-error` with the methods both sides give them.
//!
//! The two sides check names independently on purpose (the host trusts no
//! guest); what they must agree on word for word lives here.

pub mod facts;

/// Declares [`ActiveState`] and [`IS_ACTIVE_WORDS`] from one list, so that
/// a word and what it counts as are written once (systemd's own
/// `unit_active_state` string table, `src/basic/unit-def.c`).
macro_rules! unit_active_states {
    ($($(#[$doc:meta])* $variant:ident = $word:literal, $running:literal;)*) => {
        /// A unit's `ActiveState` (what `systemctl is-active` prints), one
        /// case per word.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ActiveState {
            $($(#[$doc])* $variant,)*
        }

        impl ActiveState {
            /// Every state, in the table's order.
            pub const ALL: [ActiveState; [$($word),*].len()] = [$(ActiveState::$variant),*];

            /// The state `word` names; `None` for a word the table does not know.
            pub fn parse(word: &str) -> Option<Self> {
                match word {
                    $($word => Some(ActiveState::$variant),)*
                    _ => None,
                }
            }

            /// The word, as systemd says it.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(ActiveState::$variant => $word,)*
                }
            }

            /// Whether it counts as running: exactly the words for which
            /// `systemctl is-active` exits 0.
            pub const fn counts_as_running(self) -> bool {
                match self {
                    $(ActiveState::$variant => $running,)*
                }
            }
        }

        /// `is-active`'s words and whether each counts as running.
        pub const IS_ACTIVE_WORDS: [(&str, bool); [$($word),*].len()] = [$(($word, $running)),*];
    };
}

unit_active_states! {
    /// Started, and up.
    Active = "active", true;
    /// Up, and reloading its configuration: running.
    Reloading = "reloading", true;
    /// Up, and refreshing its extensions: running.
    Refreshing = "refreshing", true;
    /// Not started.
    Inactive = "inactive", false;
    /// Went down in failure.
    Failed = "failed", false;
    /// On its way up (or, for a service, between two runs systemd makes by
    /// itself: `auto-restart`).
    Activating = "activating", false;
    /// On its way to stopped.
    Deactivating = "deactivating", false;
}

/// Declares [`UnitFileState`] and [`IS_ENABLED_WORDS`] from one list, so
/// that a word and its meaning are written once.
macro_rules! unit_file_states {
    ($($(#[$doc:meta])* $variant:ident = $word:literal, $enabled:literal;)*) => {
        /// What `systemctl is-enabled` says of a unit that exists (its
        /// `UnitFileState` over D-Bus), one case per word.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum UnitFileState {
            $($(#[$doc])* $variant,)*
        }

        impl UnitFileState {
            /// Every state, in the table's order.
            pub const ALL: [UnitFileState; [$($word),*].len()] = [$(UnitFileState::$variant),*];

            /// The state `word` names; `None` for a word systemd 252 does not print.
            pub fn parse(word: &str) -> Option<Self> {
                match word {
                    $($word => Some(UnitFileState::$variant),)*
                    _ => None,
                }
            }

            /// The word, as systemctl prints it.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(UnitFileState::$variant => $word,)*
                }
            }

            /// Whether it counts as enabled: exactly the words for which
            /// `systemctl is-enabled` 252 exits 0.
            pub const fn counts_as_enabled(self) -> bool {
                match self {
                    $(UnitFileState::$variant => $enabled,)*
                }
            }
        }

        /// `is-enabled`'s words (for a unit that exists) and whether each
        /// counts as enabled: exactly the words for which systemctl 252 exits 0.
        pub const IS_ENABLED_WORDS: [(&str, bool); [$($word),*].len()] = [$(($word, $enabled)),*];
    };
}

unit_file_states! {
    /// Links in `/etc` made by `systemctl enable`.
    Enabled = "enabled", true;
    /// Links under `/run` only: a complete `disable` removes those too.
    EnabledRuntime = "enabled-runtime", true;
    /// Another name of a unit (a link to it); disabling it disables that unit.
    Alias = "alias", true;
    /// No `[Install]` section: started when another unit needs it.
    Static = "static", true;
    /// Its `[Install]` section only names other units (`Also=`), or another
    /// instance or name of it is enabled.
    Indirect = "indirect", true;
    /// Written by a generator at boot and on every daemon-reload (among
    /// others, a unit a SysV init script makes).
    Generated = "generated", true;
    /// Made at runtime (systemd-run); gone once it stops.
    Transient = "transient", true;
    /// A unit file linked in from outside the search path.
    Linked = "linked", false;
    /// Linked under `/run` only.
    LinkedRuntime = "linked-runtime", false;
    /// Linked to `/dev/null`: cannot be started at all.
    Masked = "masked", false;
    /// Masked under `/run` only.
    MaskedRuntime = "masked-runtime", false;
    /// Not enabled.
    Disabled = "disabled", false;
}

impl UnitFileState {
    /// Masked, in `/etc` or under `/run`.
    pub fn is_masked(self) -> bool {
        matches!(self, UnitFileState::Masked | UnitFileState::MaskedRuntime)
    }
}

/// `is-enabled`'s word for a unit enabled at runtime only (links under
/// `/run`): a complete `disable` removes those too.
pub const ENABLED_RUNTIME: &str = UnitFileState::EnabledRuntime.as_str();

/// `is-enabled`'s word for a generated unit (among others, one a SysV init
/// script makes, whose enablement systemctl asks `systemd-sysv-install`).
pub const GENERATED: &str = UnitFileState::Generated.as_str();

/// `word` as `is-active` prints it, and whether it counts as running;
/// `None` for a word the table does not know.
pub fn is_active_word(word: &str) -> Option<(&'static str, bool)> {
    find(&IS_ACTIVE_WORDS, word)
}

/// `word` as `is-enabled` prints it, and whether it counts as enabled;
/// `None` for a word the table does not know.
pub fn is_enabled_word(word: &str) -> Option<(&'static str, bool)> {
    find(&IS_ENABLED_WORDS, word)
}

fn find(table: &[(&'static str, bool)], word: &str) -> Option<(&'static str, bool)> {
    table.iter().copied().find(|(known, _)| *known == word)
}

/// The unit types of systemd 252 (`systemctl -t help`).
pub const UNIT_TYPES: [&str; 11] = [
    "service",
    "socket",
    "target",
    "device",
    "mount",
    "automount",
    "swap",
    "timer",
    "path",
    "slice",
    "scope",
];

/// The type of a unit name: what follows its last `.`, when that is one of
/// the [`UNIT_TYPES`] (`web.socket` is a socket; `web` and `web.d` have
/// none, and systemctl reads them as services).
pub fn unit_type(name: &str) -> Option<&'static str> {
    let (_, suffix) = name.rsplit_once('.')?;
    UNIT_TYPES.iter().copied().find(|t| *t == suffix)
}

/// The six operations of `service-provider`, by the verb systemctl and
/// reports use for each (`start`). Each side's generated `operation` gets
/// `word()` from [`contract_word_methods!`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verb {
    /// `status`
    Status,
    /// `start`
    Start,
    /// `stop`
    Stop,
    /// `restart`
    Restart,
    /// `enable`
    Enable,
    /// `disable`
    Disable,
}

impl Verb {
    /// The verb (`start`).
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Status => "status",
            Verb::Start => "start",
            Verb::Stop => "stop",
            Verb::Restart => "restart",
            Verb::Enable => "enable",
            Verb::Disable => "disable",
        }
    }

    /// True for every operation except `status`.
    pub fn is_mutating(self) -> bool {
        self != Verb::Status
    }

    /// What a resource did when this operation was carried out
    /// (`started`); `None` for `status`, which does nothing.
    pub fn done(self) -> Option<Done> {
        Some(match self {
            Verb::Status => return None,
            Verb::Start => Done::Started,
            Verb::Stop => Done::Stopped,
            Verb::Restart => Done::Restarted,
            Verb::Enable => Done::Enabled,
            Verb::Disable => Done::Disabled,
        })
    }
}

/// The contract's `action` cases: what a resource did, by the word reports
/// use (`started`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Done {
    /// `started`
    Started,
    /// `stopped`
    Stopped,
    /// `restarted`
    Restarted,
    /// `enabled`
    Enabled,
    /// `disabled`
    Disabled,
}

impl Done {
    /// The word (`started`).
    pub fn as_str(self) -> &'static str {
        match self {
            Done::Started => "started",
            Done::Stopped => "stopped",
            Done::Restarted => "restarted",
            Done::Enabled => "enabled",
            Done::Disabled => "disabled",
        }
    }

    /// The operation that does it (`start`).
    pub fn verb(self) -> Verb {
        match self {
            Done::Started => Verb::Start,
            Done::Stopped => Verb::Stop,
            Done::Restarted => Verb::Restart,
            Done::Enabled => Verb::Enable,
            Done::Disabled => Verb::Disable,
        }
    }
}

/// The contract's `ensure` cases, by the word manifests and reports use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// `running`
    Running,
    /// `stopped`
    Stopped,
}

impl State {
    /// The word (`running`).
    pub fn as_str(self) -> &'static str {
        match self {
            State::Running => "running",
            State::Stopped => "stopped",
        }
    }

    /// `running` when `running`, else `stopped`.
    pub fn of(running: bool) -> Self {
        if running {
            State::Running
        } else {
            State::Stopped
        }
    }
}

/// Gives each side's generated `operation`, `action` and `ensure` types a
/// `word()`: the [`Verb`], [`Done`] or [`State`] it stands for. Expanded
/// once by each side, so the words never differ.
#[macro_export]
macro_rules! contract_word_methods {
    (operation: $operation:ident, action: $action:ident, ensure: $ensure:ident) => {
        impl $operation {
            /// The operation's verb.
            pub fn word(self) -> $crate::Verb {
                match self {
                    $operation::Status => $crate::Verb::Status,
                    $operation::Start => $crate::Verb::Start,
                    $operation::Stop => $crate::Verb::Stop,
                    $operation::Restart => $crate::Verb::Restart,
                    $operation::Enable => $crate::Verb::Enable,
                    $operation::Disable => $crate::Verb::Disable,
                }
            }
        }

        impl $action {
            /// What the action is called in reports.
            pub fn word(self) -> $crate::Done {
                match self {
                    $action::Started => $crate::Done::Started,
                    $action::Stopped => $crate::Done::Stopped,
                    $action::Restarted => $crate::Done::Restarted,
                    $action::Enabled => $crate::Done::Enabled,
                    $action::Disabled => $crate::Done::Disabled,
                }
            }
        }

        impl $ensure {
            /// The state's word.
            pub fn word(self) -> $crate::State {
                match self {
                    $ensure::Running => $crate::State::Running,
                    $ensure::Stopped => $crate::State::Stopped,
                }
            }
        }
    };
}

/// The cases of `provider-error`, without their messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// `invalid-name`
    InvalidName,
    /// `not-found`
    NotFound,
    /// `command-failed`
    CommandFailed,
    /// `timed-out`
    TimedOut,
    /// `unavailable`
    Unavailable,
    /// `denied`
    Denied,
    /// `limit-exceeded`
    LimitExceeded,
}

impl ErrorKind {
    /// The case's name in the contract, which reports use as an outcome.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidName => "invalid-name",
            ErrorKind::NotFound => "not-found",
            ErrorKind::CommandFailed => "command-failed",
            ErrorKind::TimedOut => "timed-out",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Denied => "denied",
            ErrorKind::LimitExceeded => "limit-exceeded",
        }
    }
}

impl core::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Gives the `provider-error` type that a side's bindings generated (one
/// type per side, the same cases) its methods: `message`, `kind` and
/// `not_found`. Expanded once by each side, so they never differ.
#[macro_export]
macro_rules! provider_error_methods {
    ($error:ident) => {
        impl $error {
            /// The whole message, ready to show: whoever raises the error
            /// writes it in full (`service not found: web`) and nobody adds
            /// to it. The generated `Display` is the `Debug` form; use this.
            pub fn message(&self) -> &str {
                match self {
                    $error::InvalidName(m)
                    | $error::NotFound(m)
                    | $error::CommandFailed(m)
                    | $error::TimedOut(m)
                    | $error::Unavailable(m)
                    | $error::Denied(m)
                    | $error::LimitExceeded(m) => m,
                }
            }

            /// The error's case (its name in the contract: `kind().as_str()`).
            pub fn kind(&self) -> $crate::ErrorKind {
                match self {
                    $error::InvalidName(_) => $crate::ErrorKind::InvalidName,
                    $error::NotFound(_) => $crate::ErrorKind::NotFound,
                    $error::CommandFailed(_) => $crate::ErrorKind::CommandFailed,
                    $error::TimedOut(_) => $crate::ErrorKind::TimedOut,
                    $error::Unavailable(_) => $crate::ErrorKind::Unavailable,
                    $error::Denied(_) => $crate::ErrorKind::Denied,
                    $error::LimitExceeded(_) => $crate::ErrorKind::LimitExceeded,
                }
            }

            /// The error for a unit that does not exist, worded as the host
            /// words it.
            pub fn not_found(service: &str) -> Self {
                $error::NotFound(format!("service not found: {service}"))
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_is_found_as_itself() {
        for (word, counts) in IS_ACTIVE_WORDS {
            assert_eq!(is_active_word(word), Some((word, counts)));
        }
        for (word, counts) in IS_ENABLED_WORDS {
            assert_eq!(is_enabled_word(word), Some((word, counts)));
        }
        assert_eq!(is_active_word("Active"), None);
        for state in ActiveState::ALL {
            assert_eq!(ActiveState::parse(state.as_str()), Some(state));
            assert_eq!(
                is_active_word(state.as_str()),
                Some((state.as_str(), state.counts_as_running()))
            );
        }
        assert_eq!(is_enabled_word("enabled\n"), None);
    }

    #[test]
    fn a_unit_type_is_what_follows_the_last_dot() {
        assert_eq!(unit_type("web.socket"), Some("socket"));
        assert_eq!(unit_type("a.b.service"), Some("service"));
        assert_eq!(unit_type("web"), None);
        assert_eq!(unit_type("web.d"), None);
        assert_eq!(unit_type("web.service.d"), None);
        for t in UNIT_TYPES {
            assert_eq!(unit_type(&["x.", t].concat()), Some(t));
        }
    }

    #[test]
    fn verbs_actions_and_states_are_the_contracts_cases() {
        let wit = include_str!("../../policy.wit");
        let cases = |head: &str| -> Vec<String> {
            wit.split(head)
                .nth(1)
                .and_then(|rest| rest.split('}').next())
                .unwrap_or_else(|| panic!("{head} in policy.wit"))
                .lines()
                .map(|l| {
                    l.split("//")
                        .next()
                        .unwrap()
                        .trim()
                        .trim_end_matches(',')
                        .to_owned()
                })
                .filter(|l| !l.is_empty())
                .collect()
        };
        let verbs = [
            Verb::Status,
            Verb::Start,
            Verb::Stop,
            Verb::Restart,
            Verb::Enable,
            Verb::Disable,
        ];
        assert_eq!(
            cases("enum operation {"),
            verbs.map(|v| v.as_str().to_owned())
        );
        let done = [
            Done::Started,
            Done::Stopped,
            Done::Restarted,
            Done::Enabled,
            Done::Disabled,
        ];
        assert_eq!(cases("enum action {"), done.map(|d| d.as_str().to_owned()));
        assert_eq!(cases("enum ensure {"), ["running", "stopped"]);
        for d in done {
            assert_eq!(d.verb().done(), Some(d), "{d:?}");
        }
        assert_eq!(Verb::Status.done(), None);
    }

    #[test]
    fn error_kinds_are_named_as_the_contract_names_them() {
        let wit = include_str!("../../policy.wit");
        let cases = wit
            .split("variant provider-error {")
            .nth(1)
            .and_then(|rest| rest.split('}').next())
            .expect("provider-error in policy.wit");
        for kind in [
            ErrorKind::InvalidName,
            ErrorKind::NotFound,
            ErrorKind::CommandFailed,
            ErrorKind::TimedOut,
            ErrorKind::Unavailable,
            ErrorKind::Denied,
            ErrorKind::LimitExceeded,
        ] {
            assert!(
                cases.contains(&["        ", kind.as_str(), "(string)"].concat()),
                "{kind} is not a case of provider-error"
            );
        }
    }
}
