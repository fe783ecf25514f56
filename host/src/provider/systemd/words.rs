//! systemd's words, in one room: the states the host reads of a unit, each
//! an enum with one string table (as systemd's `src/basic/unit-def.c`
//! declares them: `DEFINE_STRING_TABLE_LOOKUP`), the names of the
//! properties it asks for, and the names of systemd's D-Bus API. Every
//! other file uses these; none spells a state, property or bus name again.
//!
//! `ActiveState` is shared with the guest SDK (what counts as running is
//! part of the contract), so its table is contract-words'.
//!
//! A word systemd says that a table does not know stays a word (shown as
//! systemd said it), never an error: a newer systemd may add states.

pub(crate) use contract_words::ActiveState;

/// Declares an enum of systemd's words and its one string table:
/// `parse`, `as_str` and `ALL`.
macro_rules! string_table {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $word:literal,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub(crate) enum $name {
            $($(#[$vdoc])* $variant,)*
        }

        impl $name {
            /// Every case, in the table's order.
            #[allow(dead_code)]
            pub(crate) const ALL: [$name; [$($word),*].len()] = [$($name::$variant),*];

            /// The case `word` names; `None` for a word the table does not know.
            pub(crate) fn parse(word: &str) -> Option<Self> {
                match word {
                    $($word => Some($name::$variant),)*
                    _ => None,
                }
            }

            /// The word, as systemd says it.
            #[allow(dead_code)]
            pub(crate) const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $word,)*
                }
            }
        }
    };
}

string_table! {
    /// A service's `SubState`, as far as the host reads it (systemd has
    /// more: a service's `start-pre`, a socket's `listening`, ...; those
    /// stay words).
    SubState {
        /// Not running.
        Dead = "dead",
        /// Its main process runs.
        Running = "running",
        /// Up without a process (`RemainAfterExit=`).
        Exited = "exited",
        /// Went down in failure.
        Failed = "failed",
        /// Between two runs systemd makes by itself (`Restart=`).
        AutoRestart = "auto-restart",
    }
}

string_table! {
    /// A service's `Result`: why it last went down (systemd 252's
    /// `service_result_table`).
    ServiceResult {
        /// It did not fail.
        Success = "success",
        Resources = "resources",
        Protocol = "protocol",
        Timeout = "timeout",
        ExitCode = "exit-code",
        Signal = "signal",
        CoreDump = "core-dump",
        Watchdog = "watchdog",
        StartLimitHit = "start-limit-hit",
        OomKill = "oom-kill",
        ExecCondition = "exec-condition",
    }
}

string_table! {
    /// How a job ended (systemd 252's `job_result_table`): what
    /// `JobRemoved` says, and what systemctl explains.
    JobResult {
        /// It ran to its end.
        Done = "done",
        /// Cancelled before it ended.
        Canceled = "canceled",
        /// It did not end within `JobTimeoutSec=`.
        Timeout = "timeout",
        /// The unit failed (a service: its `Result` says why).
        Failed = "failed",
        /// A job it depends on failed.
        Dependency = "dependency",
        /// Nothing to do (a stop of a stopped unit).
        Skipped = "skipped",
        /// Not valid for the unit's state (a reload of an inactive unit).
        Invalid = "invalid",
        /// An `Assert*=` of the unit failed.
        Assert = "assert",
        /// The unit's type cannot do it here.
        Unsupported = "unsupported",
        /// Garbage collected while queued.
        Collected = "collected",
        /// A unit that starts only once was started already.
        Once = "once",
    }
}

/// The kinds of change `EnableUnitFiles` and `DisableUnitFiles` answer in
/// their `changes` array (systemd 252's `install_change_type_to_string`),
/// those the host reads.
pub(crate) mod install_change {
    /// A link was made.
    pub(crate) const SYMLINK: &str = "symlink";
    /// A link was removed.
    pub(crate) const UNLINK: &str = "unlink";
}

/// The properties the host reads of a unit, by systemd's names (the same
/// over D-Bus and in `systemctl show`).
pub(crate) mod property {
    /// `Unit.ActiveState`: [`super::ActiveState`].
    pub(crate) const ACTIVE_STATE: &str = "ActiveState";
    /// `Unit.SubState`: [`super::SubState`].
    pub(crate) const SUB_STATE: &str = "SubState";
    /// `Unit.InvocationID`: new at every start of the unit.
    pub(crate) const INVOCATION_ID: &str = "InvocationID";
    /// `Unit.Job`: its pending job, whoever queued it.
    pub(crate) const JOB: &str = "Job";
    /// `Unit.NeedDaemonReload`: its files changed since systemd loaded it.
    pub(crate) const NEED_DAEMON_RELOAD: &str = "NeedDaemonReload";
    /// `Unit.DropInPaths`: the drop-ins systemd loaded for it.
    pub(crate) const DROP_IN_PATHS: &str = "DropInPaths";
    /// `Service.NRestarts`: automatic restarts since a start by hand.
    pub(crate) const N_RESTARTS: &str = "NRestarts";
    /// `Service.Result`: [`super::ServiceResult`].
    pub(crate) const RESULT: &str = "Result";
    /// `Service.ExecMainCode`: how its main process last ended (`si_code`).
    pub(crate) const EXEC_MAIN_CODE: &str = "ExecMainCode";
    /// `Service.ExecMainStatus`: its exit status or signal.
    pub(crate) const EXEC_MAIN_STATUS: &str = "ExecMainStatus";
    /// `Unit.UnitFileState`: the `is-enabled` word.
    pub(crate) const UNIT_FILE_STATE: &str = "UnitFileState";
    /// `Timer.NextElapseUSecRealtime`: a timer's next run.
    pub(crate) const NEXT_ELAPSE_REALTIME: &str = "NextElapseUSecRealtime";
    /// `Timer.LastTriggerUSec`: a timer's last run.
    pub(crate) const LAST_TRIGGER: &str = "LastTriggerUSec";
    /// `Manager.Version`: systemd's version.
    pub(crate) const VERSION: &str = "Version";
}

/// The names of systemd's D-Bus API and of the bus's own, that the host
/// uses.
pub(crate) mod dbus {
    /// systemd's well-known name on the system bus.
    pub(crate) const SYSTEMD: &str = "org.freedesktop.systemd1";
    /// The manager's object path.
    pub(crate) const MANAGER_PATH: &str = "/org/freedesktop/systemd1";
    /// Below it, one object path per unit (`unit_name::object_path`).
    pub(crate) const UNIT_PATHS: &str = "/org/freedesktop/systemd1/unit";
    /// The manager's interface.
    pub(crate) const MANAGER: &str = "org.freedesktop.systemd1.Manager";
    /// Every unit's interface.
    pub(crate) const UNIT: &str = "org.freedesktop.systemd1.Unit";
    /// A service unit's interface.
    pub(crate) const SERVICE: &str = "org.freedesktop.systemd1.Service";
    /// A job's interface.
    pub(crate) const JOB: &str = "org.freedesktop.systemd1.Job";

    /// The bus itself: its name, interface, and the sender of
    /// `NameOwnerChanged`.
    pub(crate) const BUS: &str = "org.freedesktop.DBus";
    /// The bus's object path.
    pub(crate) const BUS_PATH: &str = "/org/freedesktop/DBus";
    /// The properties interface every object has.
    pub(crate) const PROPERTIES: &str = "org.freedesktop.DBus.Properties";

    /// Methods and signals, by interface.
    pub(crate) mod member {
        /// `Manager`: asks systemd to send unit and job signals to this client.
        pub(crate) const SUBSCRIBE: &str = "Subscribe";
        /// `Manager`: a unit file's state, read from disk.
        pub(crate) const GET_UNIT_FILE_STATE: &str = "GetUnitFileState";
        /// `Manager.ListUnitFilesByPatterns(as states, as patterns)`: the
        /// unit files matching the names, each with its state, in one
        /// question.
        pub(crate) const LIST_UNIT_FILES_BY_PATTERNS: &str = "ListUnitFilesByPatterns";
        /// `Manager`.
        pub(crate) const ENABLE_UNIT_FILES: &str = "EnableUnitFiles";
        /// `Manager`.
        pub(crate) const DISABLE_UNIT_FILES: &str = "DisableUnitFiles";
        /// `Manager`.
        pub(crate) const START_UNIT: &str = "StartUnit";
        /// `Manager`.
        pub(crate) const STOP_UNIT: &str = "StopUnit";
        /// `Manager`.
        pub(crate) const RESTART_UNIT: &str = "RestartUnit";
        /// `Job`.
        pub(crate) const CANCEL: &str = "Cancel";
        /// `Manager` signal: a job ended, with its result.
        pub(crate) const JOB_REMOVED: &str = "JobRemoved";
        /// `Manager` signal: a unit file was enabled or disabled.
        pub(crate) const UNIT_FILES_CHANGED: &str = "UnitFilesChanged";
        /// `Manager` signal: a daemon-reload begins (`true`) or ends.
        pub(crate) const RELOADING: &str = "Reloading";
        /// `Properties`.
        pub(crate) const GET: &str = "Get";
        /// `Properties` signal: an object's properties moved.
        pub(crate) const PROPERTIES_CHANGED: &str = "PropertiesChanged";
        /// The bus: whether a name has an owner.
        pub(crate) const NAME_HAS_OWNER: &str = "NameHasOwner";
        /// The bus: a name's unique owner.
        pub(crate) const GET_NAME_OWNER: &str = "GetNameOwner";
        /// The bus signal: a name changed owner.
        pub(crate) const NAME_OWNER_CHANGED: &str = "NameOwnerChanged";
        /// The bus: deliver what a match rule matches.
        pub(crate) const ADD_MATCH: &str = "AddMatch";
        /// The bus: stop delivering it.
        pub(crate) const REMOVE_MATCH: &str = "RemoveMatch";
    }

    /// Error names in replies.
    pub(crate) mod error {
        /// The bus: the name has no owner.
        pub(crate) const NAME_HAS_NO_OWNER: &str = "org.freedesktop.DBus.Error.NameHasNoOwner";
        /// systemd: no such unit file (ENOENT).
        pub(crate) const FILE_NOT_FOUND: &str = "org.freedesktop.DBus.Error.FileNotFound";
        /// systemd: this client already subscribed.
        pub(crate) const ALREADY_SUBSCRIBED: &str = "org.freedesktop.systemd1.AlreadySubscribed";
        /// Errors the bus itself gives when systemd is not there to answer
        /// (it is re-executing, or the bus lost it): not systemd's answer
        /// about a unit.
        pub(crate) const BUS_ERRORS: [&str; 8] = [
            "org.freedesktop.DBus.Error.ServiceUnknown",
            NAME_HAS_NO_OWNER,
            "org.freedesktop.DBus.Error.NoReply",
            "org.freedesktop.DBus.Error.Disconnected",
            "org.freedesktop.DBus.Error.NoServer",
            "org.freedesktop.DBus.Error.Timeout",
            "org.freedesktop.DBus.Error.TimedOut",
            "org.freedesktop.DBus.Error.LimitsExceeded",
        ];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_is_read_back_as_its_case() {
        for state in SubState::ALL {
            assert_eq!(SubState::parse(state.as_str()), Some(state));
        }
        for result in ServiceResult::ALL {
            assert_eq!(ServiceResult::parse(result.as_str()), Some(result));
        }
        assert_eq!(SubState::parse("listening"), None);
        assert_eq!(ServiceResult::parse("Success"), None);
    }

    #[test]
    fn running_is_active_reloading_and_refreshing() {
        let running: Vec<&str> = ActiveState::ALL
            .into_iter()
            .filter(|s| s.counts_as_running())
            .map(ActiveState::as_str)
            .collect();
        assert_eq!(running, ["active", "reloading", "refreshing"]);
    }

    #[test]
    fn unit_paths_are_below_the_managers() {
        assert!(dbus::UNIT_PATHS.starts_with(dbus::MANAGER_PATH));
        assert!(dbus::MANAGER.starts_with(dbus::SYSTEMD));
        assert!(dbus::UNIT.starts_with(dbus::SYSTEMD));
    }
}
