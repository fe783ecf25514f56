//! Status over D-Bus: what `systemctl is-active` and `is-enabled` ask
//! systemd, asked directly on the system bus, without a process per
//! question.
//!
//! - `is-active NAME` reads the `ActiveState` property of the unit's object
//!   path (systemd loads the unit to answer, so a missing unit is
//!   `inactive`, as with systemctl; `GetUnit` would fail instead).
//! - `is-enabled NAME` is `Manager.GetUnitFileState`, which reads the unit
//!   files from disk on every call (unlike the `UnitFileState` property,
//!   cached until a reload); a missing unit is the error `FileNotFound`.
//!
//! Answers are handed to the same readers as systemctl's output
//! ([`crate::provider::parse`]), as systemctl 252 would print them, so both paths give
//! the same words and the same errors. What systemctl does beyond the bus
//! (names it cannot mangle, SysV init scripts) is left to systemctl itself:
//! the caller asks it instead.
//!
//! - whether systemd's copy of the unit is older than its files: the
//!   unit's `NeedDaemonReload` and `DropInPaths` (see [`super::dropins`]),
//!   asked with the other two while the run's reload is still to come, so
//!   that a status is one round trip.
//!
//! The same connection carries the changes (`jobs` and `unit_files`).
//!
//! zbus talks to the system bus (dbus-daemon), not to PID 1's private
//! socket, whose replies it does not accept.

use std::time::Duration;

use super::super::words::dbus::{
    error, member, BUS, BUS_PATH, MANAGER, MANAGER_PATH, PROPERTIES, SERVICE, SYSTEMD, UNIT,
};
use super::super::words::{property, ActiveState};
use crate::provider::liveness::{Liveness, MainExit};
use crate::provider::runner::CommandOutput;

/// A unit's `Job` property (`(uo)`): the object path of its pending job,
/// whoever queued it; `None` when it has none (id 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UnitJob(pub Option<String>);

impl TryFrom<zbus::OwnedVariant> for UnitJob {
    type Error = String;
    fn try_from(value: zbus::OwnedVariant) -> Result<Self, String> {
        let structure = zbus::Structure::try_from(value).map_err(|e| e.to_string())?;
        let (id, path): (u32, zbus::OwnedObjectPath) = structure
            .try_into()
            .map_err(|e: zbus::Error| e.to_string())?;
        Ok(Self((id != 0).then(|| path.as_str().to_owned())))
    }
}

/// A status's answers over the bus, for one unit.
#[derive(Debug)]
pub(crate) struct UnitAnswers {
    /// As `systemctl is-active` prints it.
    pub is_active: CommandOutput,
    /// As `systemctl is-enabled` prints it.
    pub is_enabled: CommandOutput,
    /// What tells whether systemd's copy of the unit is older than its
    /// files, when it was asked.
    pub loaded: Option<LoadedFiles>,
    /// The unit's pending job, whoever queued it (its `Job`).
    pub job: UnitJob,
}

/// What systemd says of the files it loaded for a unit.
#[derive(Debug)]
pub(crate) struct LoadedFiles {
    /// `NeedDaemonReload`: a unit file or drop-in of the unit changed on
    /// disk since systemd loaded it.
    pub need_daemon_reload: bool,
    /// `DropInPaths`: the drop-ins systemd loaded for the unit.
    pub dropin_paths: Vec<String>,
}

/// Why an answer did not come over the bus.
#[derive(Debug)]
pub(crate) enum DbusError {
    /// The bus itself failed (gone, restarted, no answer in time): the
    /// caller stops using it for the rest of the run.
    Transport(String),
    /// systemd answered with an error.
    Reply { name: String, message: String },
}

impl DbusError {
    /// The failure in one phrase, for a warning.
    pub(crate) fn describe(self) -> String {
        match self {
            DbusError::Transport(why) => why,
            DbusError::Reply { name, message } => format!("{name}: {message}"),
        }
    }
}

/// A connection to systemd on the system bus.
pub(crate) struct SystemdBus {
    /// The process's runtime ([`crate::io_runtime`]).
    pub(super) runtime: tokio::runtime::Handle,
    pub(super) connection: zbus::Connection,
}

/// How many signals a stream of the run's may hold unread: far more than a
/// run's jobs and units send, so the connection never stalls on a full
/// queue.
const QUEUED_SIGNALS: usize = 1 << 16;

pub(super) fn transport(error: impl std::fmt::Display) -> DbusError {
    DbusError::Transport(error.to_string())
}

pub(super) fn classify(error: zbus::Error) -> DbusError {
    let (name, message) = match error {
        zbus::Error::MethodError(name, message, _) => {
            (name.to_string(), message.unwrap_or_default())
        }
        zbus::Error::FDO(fdo) => (
            zbus::DBusError::name(fdo.as_ref()).to_string(),
            zbus::DBusError::description(fdo.as_ref())
                .unwrap_or_default()
                .to_owned(),
        ),
        other => return transport(other),
    };
    if error::BUS_ERRORS.contains(&name.as_str()) {
        transport(format!("{name}: {message}"))
    } else {
        DbusError::Reply { name, message }
    }
}

impl SystemdBus {
    /// Connects to the system bus, and checks that systemd is on it; the
    /// error says why not (no bus, no systemd, no answer in `timeout`).
    pub(crate) fn connect(timeout: Duration) -> Result<Self, String> {
        let runtime = crate::io_runtime::handle().map_err(|e| e.to_string())?;
        let connection = runtime
            .block_on(async {
                tokio::time::timeout(timeout, async {
                    zbus::connection::Builder::system()
                        .method_timeout(timeout)
                        .build()
                        .await
                })
                .await
            })
            .map_err(|_| "the system bus did not answer in time".to_owned())?
            .map_err(|e| format!("the system bus cannot be reached: {e}"))?;
        let status = Self {
            runtime,
            connection,
        };
        let systemd_there: bool = status
            .call(
                BUS,
                BUS_PATH,
                BUS,
                member::NAME_HAS_OWNER,
                &(SYSTEMD,),
                timeout,
            )
            .map_err(|e| match e {
                DbusError::Transport(e) => format!("the system bus does not answer: {e}"),
                DbusError::Reply { name, message } => format!("the system bus: {name}: {message}"),
            })?;
        if !systemd_there {
            return Err(format!("systemd ({SYSTEMD}) is not on the system bus"));
        }
        Ok(status)
    }

    /// The signals `rule` matches from now on: its match added, and
    /// confirmed by the bus, within `timeout`.
    pub(super) fn signals(
        &self,
        rule: zbus::MatchRule<'static>,
        timeout: Duration,
    ) -> Result<zbus::MessageStream, DbusError> {
        let queued = std::num::NonZeroUsize::new(QUEUED_SIGNALS).expect("not zero");
        self.runtime.block_on(async {
            tokio::time::timeout(
                timeout,
                zbus::MessageStream::for_match_rule(rule, &self.connection, Some(queued)),
            )
            .await
            .map_err(|_| transport("no answer to AddMatch in time"))?
            .map_err(classify)
        })
    }

    /// Calls `method` and reads its reply, within `timeout`.
    pub(super) fn call<B, R>(
        &self,
        destination: &str,
        path: &str,
        interface: &str,
        method: &str,
        body: &B,
        timeout: Duration,
    ) -> Result<R, DbusError>
    where
        B: serde::Serialize + zbus::DynamicType,
        R: for<'d> serde::Deserialize<'d> + zbus::Type,
    {
        self.runtime
            .block_on(self.ask(destination, path, interface, method, body, timeout))
    }

    /// [`Self::call`], to be awaited beside other questions: systemd
    /// answers them in order, and they share one round trip.
    async fn ask<B, R>(
        &self,
        destination: &str,
        path: &str,
        interface: &str,
        method: &str,
        body: &B,
        timeout: Duration,
    ) -> Result<R, DbusError>
    where
        B: serde::Serialize + zbus::DynamicType,
        R: for<'d> serde::Deserialize<'d> + zbus::Type,
    {
        let reply = tokio::time::timeout(
            timeout,
            self.connection
                .call_method(Some(destination), path, Some(interface), method, body),
        )
        .await
        .map_err(|_| {
            transport(format!(
                "no answer to {method} within {}",
                humantime::format_duration(timeout)
            ))
        })?
        .map_err(classify)?;
        reply.body().deserialize::<R>().map_err(transport)
    }

    /// A property of the unit `unit` (already mangled).
    async fn unit_property<T>(
        &self,
        unit: &str,
        interface: &str,
        property: &str,
        timeout: Duration,
    ) -> Result<T, DbusError>
    where
        T: TryFrom<zbus::OwnedVariant>,
        T::Error: std::fmt::Display,
    {
        let value: zbus::OwnedVariant = self
            .ask(
                SYSTEMD,
                &crate::provider::unit_name::object_path(unit),
                PROPERTIES,
                member::GET,
                &(interface, property),
                timeout,
            )
            .await?;
        T::try_from(value).map_err(transport)
    }

    /// What a status of `unit` (already mangled) needs, asked at once:
    /// `is-active`, `is-enabled` (unless `enabled_known` is its answer
    /// already), and, with `loaded_too`, what tells whether systemd's copy
    /// of the unit is older than its files on disk.
    pub(crate) fn unit_status(
        &self,
        unit: &str,
        loaded_too: bool,
        enabled_known: Option<CommandOutput>,
        timeout: Duration,
    ) -> Result<UnitAnswers, DbusError> {
        let enabled = async {
            match enabled_known {
                Some(answer) => Ok(answer),
                None => self.is_enabled_async(unit, timeout).await,
            }
        };
        let loaded = async {
            if !loaded_too {
                return Ok(None);
            }
            let (need_reload, dropins) = tokio::join!(
                self.unit_property::<bool>(unit, UNIT, property::NEED_DAEMON_RELOAD, timeout),
                self.unit_property::<Vec<String>>(unit, UNIT, property::DROP_IN_PATHS, timeout),
            );
            Ok(Some(LoadedFiles {
                need_daemon_reload: need_reload?,
                dropin_paths: dropins?,
            }))
        };
        self.runtime.block_on(async {
            let (active, enabled, loaded, job) = tokio::join!(
                self.is_active_async(unit, timeout),
                enabled,
                loaded,
                self.unit_property::<UnitJob>(unit, UNIT, property::JOB, timeout),
            );
            Ok(UnitAnswers {
                is_active: active?,
                is_enabled: enabled?,
                loaded: loaded?,
                job: job?,
            })
        })
    }

    /// `ActiveState` of `unit` (already mangled), as `is-active` prints it.
    async fn is_active_async(
        &self,
        unit: &str,
        timeout: Duration,
    ) -> Result<CommandOutput, DbusError> {
        let word: String = self
            .unit_property(unit, UNIT, property::ACTIVE_STATE, timeout)
            .await?;
        // is-active exits 0 only for the running states; the readers do not
        // use the code for a word, but keep it true to systemctl's.
        let running = ActiveState::parse(&word).is_some_and(ActiveState::counts_as_running);
        Ok(CommandOutput {
            code: Some(if running { 0 } else { 3 }),
            stdout: format!("{word}\n"),
            stderr: String::new(),
        })
    }

    /// `GetUnitFileState` of `unit` (already mangled), as `is-enabled`
    /// prints it: the word, or systemctl 252's message for a missing unit.
    pub(crate) fn is_enabled(
        &self,
        unit: &str,
        timeout: Duration,
    ) -> Result<CommandOutput, DbusError> {
        self.runtime.block_on(self.is_enabled_async(unit, timeout))
    }

    async fn is_enabled_async(
        &self,
        unit: &str,
        timeout: Duration,
    ) -> Result<CommandOutput, DbusError> {
        let answer: Result<String, DbusError> = self
            .ask(
                SYSTEMD,
                MANAGER_PATH,
                MANAGER,
                member::GET_UNIT_FILE_STATE,
                &(unit,),
                timeout,
            )
            .await;
        match answer {
            Ok(word) => {
                // systemctl exits 0 for exactly the words that count.
                let enabled = contract_words::is_enabled_word(&word).is_some_and(|(_, c)| c);
                Ok(CommandOutput {
                    code: Some(if enabled { 0 } else { 1 }),
                    stdout: format!("{word}\n"),
                    stderr: String::new(),
                })
            }
            // systemd answers ENOENT; systemctl prints it as strerror.
            Err(DbusError::Reply { name, .. }) if name == error::FILE_NOT_FOUND => {
                Ok(CommandOutput {
                    code: Some(1),
                    stdout: String::new(),
                    stderr: format!(
                        "Failed to get unit file state for {unit}: No such file or directory\n"
                    ),
                })
            }
            Err(other) => Err(other),
        }
    }

    /// What tells whether `unit` (already mangled) stayed up as its start
    /// left it ([`Liveness`]), in one round trip: the `Unit` properties,
    /// and for a service its restart count, `Result` and main exit.
    pub(crate) fn liveness(&self, unit: &str, timeout: Duration) -> Result<Liveness, DbusError> {
        self.runtime.block_on(self.liveness_async(unit, timeout))
    }

    async fn liveness_async(&self, unit: &str, timeout: Duration) -> Result<Liveness, DbusError> {
        let service = async {
            if !unit.ends_with(".service") {
                return Ok((None, None, None, None));
            }
            let (restarts, result, code, status) = tokio::join!(
                self.unit_property::<u32>(unit, SERVICE, property::N_RESTARTS, timeout),
                self.unit_property::<String>(unit, SERVICE, property::RESULT, timeout),
                self.unit_property::<i32>(unit, SERVICE, property::EXEC_MAIN_CODE, timeout),
                self.unit_property::<i32>(unit, SERVICE, property::EXEC_MAIN_STATUS, timeout),
            );
            Ok::<_, DbusError>((Some(restarts?), Some(result?), Some(code?), Some(status?)))
        };
        let (active, sub, invocation, job, service) = tokio::join!(
            self.unit_property::<String>(unit, UNIT, property::ACTIVE_STATE, timeout),
            self.unit_property::<String>(unit, UNIT, property::SUB_STATE, timeout),
            self.unit_property::<Vec<u8>>(unit, UNIT, property::INVOCATION_ID, timeout),
            self.unit_property::<UnitJob>(unit, UNIT, property::JOB, timeout),
            service,
        );
        let (restarts, result, code, status) = service?;
        let invocation = invocation?;
        Ok(Liveness {
            active: active?,
            sub: sub?,
            invocation: (!invocation.is_empty()).then(|| crate::text::hex(&invocation)),
            restarts,
            result,
            main_exit: code
                .zip(status)
                .map(|(code, status)| MainExit { code, status })
                .filter(|e| e.code != 0),
            job_pending: job?.0.is_some(),
        })
    }

    /// The pending job of `unit` (already mangled), whoever queued it.
    pub(crate) fn unit_job(&self, unit: &str, timeout: Duration) -> Result<UnitJob, DbusError> {
        self.runtime
            .block_on(self.unit_property::<UnitJob>(unit, UNIT, property::JOB, timeout))
    }

    /// systemd's `Version`, as the manager says it (`252.22-1~deb12u1`).
    pub(crate) fn manager_version(&self, timeout: Duration) -> Result<String, DbusError> {
        let value: zbus::OwnedVariant = self.call(
            SYSTEMD,
            MANAGER_PATH,
            PROPERTIES,
            member::GET,
            &(MANAGER, property::VERSION),
            timeout,
        )?;
        String::try_from(value).map_err(transport)
    }

    /// The `Result` of the service `unit` (already mangled): why its last
    /// job failed, in systemd's word (`exit-code`, `timeout`, ...).
    pub(crate) fn service_result(
        &self,
        unit: &str,
        timeout: Duration,
    ) -> Result<String, DbusError> {
        self.runtime
            .block_on(self.unit_property(unit, SERVICE, property::RESULT, timeout))
    }
}
