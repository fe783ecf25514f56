//! The systemd provider: the design's commands (docs/service-type.md), plus `--` before every
//! unit name, one process-wide lock around every `systemctl` execution, and a
//! single `daemon-reload` before the first operation of a run.
//!
//! It reports what systemd said (`status` carries the `is-active` and
//! `is-enabled` words) and runs what it is asked to; what a word means for
//! the desired state is the guest's to decide.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::dbus::{DbusError, DbusStatus};
use super::parse::{command_failed, read_is_active, read_is_enabled, Word};
use super::runner::{CommandOutput, CommandRunner, RunError};
use super::unit_name::mangle;
use super::{Call, CallRecord, Provider, UnitState};
use crate::contract::{Operation, ProviderError, ServiceStatus};
use crate::service_name::{quote, CheckedName};

/// Held around every systemctl execution in this process, so that two
/// providers (or threads) never interleave their commands.
static SYSTEMCTL_LOCK: Mutex<()> = Mutex::new(());

/// The provider's settings for one run.
#[derive(Debug, Clone)]
pub struct SystemdConfig {
    /// Where systemctl is, or why it is unavailable.
    pub systemctl: Result<PathBuf, String>,
    /// The longest a single systemctl command may take.
    pub timeout: Duration,
    /// A dry run: mutating operations are refused and no daemon-reload is made.
    pub noop: bool,
    /// When set, operations on units it does not allow are refused.
    pub allow: Option<super::UnitAllowlist>,
    /// How status is read.
    pub status_via: StatusVia,
}

/// How `status` reads a unit's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusVia {
    /// Over D-Bus when the system bus and systemd on it answer; otherwise
    /// with `systemctl is-active` and `is-enabled`.
    Auto,
    /// Always with `systemctl` (`provider = "systemctl"`).
    Systemctl,
}

/// Whether the run's single daemon-reload has happened.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reload {
    Pending,
    Done,
    /// It failed; every later operation fails with this message, because the
    /// unit files systemd sees may be out of date.
    Failed(String),
}

/// The systemd provider for one run.
pub struct SystemdProvider {
    config: SystemdConfig,
    runner: Box<dyn CommandRunner>,
    reload: Reload,
    calls: Vec<CallRecord>,
    /// No command may run past this (the run's wall-clock limit).
    deadline: Option<Instant>,
    /// The `is-enabled` word of each unit's latest successful `status` in
    /// this run, by the name it was asked with: `disable` of a unit last
    /// found `enabled-runtime` also removes the runtime enablement.
    enabled_words: HashMap<String, &'static str>,
    /// Status over D-Bus, while it works.
    dbus: Option<DbusStatus>,
    /// Why status is read with systemctl, when it is.
    status_note: Option<String>,
    /// An enable or disable ran (with `--no-reload`): the run ends with one
    /// daemon-reload, so systemd sees the new links.
    enablement_changed: bool,
}

/// Where a SysV init script for a service would be (systemctl's
/// `SYSTEM_SYSVINIT_PATH`).
const SYSV_INIT_DIR: &str = "/etc/init.d";

impl SystemdProvider {
    pub fn new(config: SystemdConfig, runner: Box<dyn CommandRunner>) -> Self {
        let (dbus, status_note) = match (config.status_via, &config.systemctl) {
            (StatusVia::Systemctl, _) => (None, Some("provider = \"systemctl\"".to_owned())),
            (StatusVia::Auto, Err(_)) => (None, None),
            (StatusVia::Auto, Ok(_)) => match DbusStatus::connect(config.timeout) {
                Ok(dbus) => (Some(dbus), None),
                Err(why) => (None, Some(why)),
            },
        };
        if let Some(why) = &status_note {
            tracing::info!("status is read with systemctl: {why}");
        }
        Self {
            config,
            runner,
            reload: Reload::Pending,
            calls: Vec::new(),
            deadline: None,
            enabled_words: HashMap::new(),
            dbus,
            status_note,
            enablement_changed: false,
        }
    }

    /// Commands from now on are cut off at `deadline` as well as at the
    /// per-command timeout.
    pub fn set_deadline(&mut self, deadline: Instant) {
        self.deadline = Some(deadline);
    }

    /// Every operation of this run, in order.
    pub fn calls(&self) -> &[CallRecord] {
        &self.calls
    }

    /// `systemctl is-active` and `is-enabled` of `name`.
    pub fn status(&mut self, name: &str) -> Result<ServiceStatus, ProviderError> {
        // The clock starts after `checked`, which may make the run's one
        // daemon-reload: that is recorded as its own call.
        let checked = self.checked(name);
        let started = Instant::now();
        let result = checked.and_then(|service| {
            let active = self.is_active_output(&service)?;
            let active = read_is_active(&active)?;
            let enabled = self.is_enabled(&service)?;
            self.enabled_words.insert(service.to_string(), enabled.word);
            Ok(ServiceStatus {
                name: service.to_string(),
                provider: self.name().to_owned(),
                enabled: enabled.counts,
                running: active.counts,
                active_word: active.word.to_owned(),
                enabled_word: enabled.word.to_owned(),
            })
        });
        if result.is_err() {
            self.enabled_words.remove(name);
        }
        let call = self.record(
            Call::Guest(Operation::Status),
            Some(name),
            started,
            result.as_ref().err(),
        );
        if let Ok(status) = &result {
            call.state = Some(UnitState {
                running: status.running,
                enabled: status.enabled,
            });
        }
        result
    }

    /// `systemctl start|stop|restart|enable|disable --system -- NAME`.
    ///
    /// `disable` of a unit whose latest status this run was `enabled-runtime`
    /// is carried out completely: a plain `disable` leaves the runtime
    /// enablement (the links in `/run/systemd/system`), so when `is-enabled`
    /// still says `enabled-runtime` afterwards, `systemctl disable --runtime
    /// --system -- NAME` follows. One operation, one call record.
    pub fn mutate(&mut self, operation: Operation, name: &str) -> Result<(), ProviderError> {
        debug_assert!(operation.is_mutating());
        let checked = self.checked(name);
        let started = Instant::now();
        let result = checked.and_then(|service| {
            if self.config.noop {
                return Err(ProviderError::Denied(format!(
                    "{operation} {service} refused: this is a noop run"
                )));
            }
            let enablement = matches!(operation, Operation::Enable | Operation::Disable);
            if enablement {
                // The links change now; systemd reloads once, at the end of
                // the run, instead of once per enable or disable.
                self.run_mutation(&[
                    operation.verb(),
                    "--no-reload",
                    "--system",
                    "--",
                    service.as_str(),
                ])?;
                self.enablement_changed = true;
            } else {
                self.run_mutation(&[operation.verb(), "--system", "--", service.as_str()])?;
            }
            let runtime = self.enabled_words.get(service.as_str()) == Some(&"enabled-runtime");
            if operation == Operation::Disable && runtime {
                // Only a word the table knows counts; anything else (the
                // unit gone, an error) leaves the verification to the guest.
                let still = self.is_enabled(&service).map(|w| w.word);
                if still == Ok("enabled-runtime") {
                    self.run_mutation(&[
                        "disable",
                        "--runtime",
                        "--no-reload",
                        "--system",
                        "--",
                        service.as_str(),
                    ])?;
                }
            }
            Ok(())
        });
        self.record(
            Call::Guest(operation),
            Some(name),
            started,
            result.as_ref().err(),
        );
        result
    }

    /// Runs a command that changes something; it succeeds when it exits 0.
    fn run_mutation(&self, args: &[&str]) -> Result<(), ProviderError> {
        let output = self.systemctl(args)?;
        if output.success() {
            Ok(())
        } else {
            Err(command_failed(&args.join(" "), &output))
        }
    }

    /// `systemctl is-enabled --system -- NAME`, or its answer over D-Bus, read.
    fn is_enabled(&mut self, service: &CheckedName) -> Result<Word, ProviderError> {
        let output = self.is_enabled_output(service)?;
        read_is_enabled(service.as_str(), &output)
    }

    /// What `systemctl is-active --system -- NAME` prints, asked over D-Bus
    /// when it can be.
    fn is_active_output(&mut self, service: &CheckedName) -> Result<CommandOutput, ProviderError> {
        if let Some(unit) = self.dbus.as_ref().and_then(|_| mangle(service.as_str())) {
            // `None`: the bus failed, and systemctl answers instead.
            if let Some(output) = self.over_dbus(|dbus, timeout| dbus.is_active(&unit, timeout))? {
                return Ok(output);
            }
        }
        self.systemctl(&["is-active", "--system", "--", service.as_str()])
    }

    /// What `systemctl is-enabled --system -- NAME` prints, asked over D-Bus
    /// when it can be. A unit generated from a SysV init script is asked of
    /// systemctl, which asks `systemd-sysv-install` as systemd 252 does.
    fn is_enabled_output(&mut self, service: &CheckedName) -> Result<CommandOutput, ProviderError> {
        if let Some(unit) = self.dbus.as_ref().and_then(|_| mangle(service.as_str())) {
            if let Some(output) = self.over_dbus(|dbus, timeout| dbus.is_enabled(&unit, timeout))? {
                let sysv = output.stdout.trim() == "generated"
                    && unit.strip_suffix(".service").is_some_and(|base| {
                        std::path::Path::new(SYSV_INIT_DIR).join(base).exists()
                    });
                if !sysv {
                    return Ok(output);
                }
            }
        }
        self.systemctl(&["is-enabled", "--system", "--", service.as_str()])
    }

    /// Asks over D-Bus under the process-wide lock, within the command
    /// timeout and the run's deadline. `None` when the bus failed: it is
    /// then dropped for the rest of the run (with a warning), and the caller
    /// asks systemctl, so a bus restart costs no wrong answer.
    fn over_dbus(
        &mut self,
        ask: impl FnOnce(&DbusStatus, Duration) -> Result<CommandOutput, DbusError>,
    ) -> Result<Option<CommandOutput>, ProviderError> {
        let timeout = self.timeout_now("status over D-Bus")?;
        let Some(dbus) = &self.dbus else {
            return Ok(None);
        };
        let answer = {
            let _guard = SYSTEMCTL_LOCK
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            ask(dbus, timeout)
        };
        match answer {
            Ok(output) => Ok(Some(output)),
            Err(DbusError::Reply { name, message }) => Err(ProviderError::CommandFailed(format!(
                "systemd answered over D-Bus: {name}: {message}"
            ))),
            Err(DbusError::Transport(why)) => {
                tracing::warn!("status over D-Bus failed ({why}); reading status with systemctl for the rest of this run");
                self.dbus = None;
                self.status_note = Some(format!("D-Bus failed during the run: {why}"));
                Ok(None)
            }
        }
    }

    /// The time one command may take now: the per-command timeout, cut at
    /// the run's deadline; an error once the deadline has passed.
    fn timeout_now(&self, what: &str) -> Result<Duration, ProviderError> {
        match self.deadline {
            Some(deadline) => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(ProviderError::TimedOut(format!(
                        "{what}: not run, the run's wall-clock limit has passed"
                    )));
                }
                Ok(self.config.timeout.min(left))
            }
            None => Ok(self.config.timeout),
        }
    }

    /// The run's last step: one daemon-reload when enable or disable ran,
    /// so that systemd's view of the links (`list-dependencies`, `show`)
    /// catches up. None in a noop run, none when nothing changed.
    pub fn finish(&mut self) -> Result<(), ProviderError> {
        if !self.enablement_changed || self.config.noop {
            return Ok(());
        }
        self.enablement_changed = false;
        self.daemon_reload()
    }

    /// Checks availability and the name, and makes the run's one reload.
    fn checked(&mut self, name: &str) -> Result<CheckedName, ProviderError> {
        let service = CheckedName::check(name).map_err(ProviderError::InvalidName)?;
        if let Some(allow) = &self.config.allow {
            if !allow.allows(service.as_str()) {
                return Err(ProviderError::Denied(format!(
                    "unit {service} is not allowed on this machine (--allow-unit {})",
                    allow.patterns().join(", ")
                )));
            }
        }
        if let Err(reason) = &self.config.systemctl {
            return Err(ProviderError::Unavailable(reason.clone()));
        }
        self.reload_once()?;
        Ok(service)
    }

    fn reload_once(&mut self) -> Result<(), ProviderError> {
        if self.config.noop {
            return Ok(());
        }
        match &self.reload {
            Reload::Done => return Ok(()),
            Reload::Failed(message) => return Err(ProviderError::CommandFailed(message.clone())),
            Reload::Pending => {}
        }
        let result = self.daemon_reload();
        self.reload = match &result {
            Ok(()) => Reload::Done,
            Err(e) => Reload::Failed(e.message().to_owned()),
        };
        result
    }

    /// Runs `systemctl daemon-reload` and records it as a call of the run.
    fn daemon_reload(&mut self) -> Result<(), ProviderError> {
        let started = Instant::now();
        let result = self.systemctl(&["daemon-reload"]).and_then(|output| {
            if output.success() {
                Ok(())
            } else {
                Err(command_failed("daemon-reload", &output))
            }
        });
        self.record(Call::DaemonReload, None, started, result.as_ref().err());
        result
    }

    /// Runs systemctl under the process-wide lock.
    fn systemctl(&self, args: &[&str]) -> Result<super::runner::CommandOutput, ProviderError> {
        let program = self
            .config
            .systemctl
            .as_ref()
            .map_err(|reason| ProviderError::Unavailable(reason.clone()))?;
        let _guard = SYSTEMCTL_LOCK
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let timeout = self.timeout_now(&format!("systemctl {}", args.join(" ")))?;
        self.runner
            .run(program, args, timeout)
            .map_err(|e| match e {
                RunError::TimedOut(_) | RunError::Interrupted(_) => {
                    ProviderError::TimedOut(format!("systemctl {}: {e}", args.join(" ")))
                }
                RunError::Spawn { .. } => ProviderError::Unavailable(e.to_string()),
            })
    }

    /// Records one call; returns the record, for a status to add what it found.
    fn record(
        &mut self,
        operation: Call,
        service: Option<&str>,
        started: Instant,
        error: Option<&ProviderError>,
    ) -> &mut CallRecord {
        tracing::debug!(
            operation = operation.verb(),
            service = service.unwrap_or(""),
            ms = crate::text::millis(started.elapsed()),
            error = error.map(ProviderError::message),
            "provider call"
        );
        self.calls.push(CallRecord {
            operation,
            service: service.map(|s| {
                if CheckedName::check(s).is_ok() {
                    s.to_owned()
                } else {
                    quote(s)
                }
            }),
            outcome: error.map_or("ok", ProviderError::kind),
            error: error.map(|e| e.message().to_owned()),
            state: None,
            duration: started.elapsed(),
        });
        self.calls.last_mut().expect("just recorded")
    }
}

impl Provider for SystemdProvider {
    fn name(&self) -> &'static str {
        "systemd"
    }

    fn unavailable_reason(&self) -> Option<&str> {
        self.config.systemctl.as_ref().err().map(String::as_str)
    }

    fn status(&mut self, name: &str) -> Result<ServiceStatus, ProviderError> {
        SystemdProvider::status(self, name)
    }

    fn mutate(&mut self, operation: Operation, name: &str) -> Result<(), ProviderError> {
        SystemdProvider::mutate(self, operation, name)
    }

    fn set_deadline(&mut self, deadline: Instant) {
        SystemdProvider::set_deadline(self, deadline)
    }

    fn take_calls(&mut self) -> Vec<CallRecord> {
        std::mem::take(&mut self.calls)
    }

    fn status_reader(&self) -> (&'static str, Option<&str>) {
        if self.dbus.is_some() {
            ("dbus", None)
        } else {
            ("systemctl", self.status_note.as_deref())
        }
    }

    fn finish(&mut self) -> Result<(), ProviderError> {
        SystemdProvider::finish(self)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::provider::runner::CommandOutput;

    /// A runner that answers from a script and records every argv.
    #[derive(Clone, Default)]
    struct ScriptedRunner {
        log: Arc<Mutex<Vec<String>>>,
        answers: Arc<Mutex<Vec<(String, CommandOutput)>>>,
    }

    impl ScriptedRunner {
        fn answer(self, args_prefix: &str, stdout: &str, stderr: &str, code: i32) -> Self {
            self.answers.lock().unwrap().push((
                args_prefix.to_owned(),
                CommandOutput {
                    code: Some(code),
                    stdout: stdout.into(),
                    stderr: stderr.into(),
                },
            ));
            self
        }

        fn log(&self) -> Vec<String> {
            self.log.lock().unwrap().clone()
        }
    }

    impl CommandRunner for ScriptedRunner {
        fn run(
            &self,
            program: &Path,
            args: &[&str],
            _: Duration,
        ) -> Result<CommandOutput, RunError> {
            assert_eq!(program, Path::new("/usr/bin/systemctl"));
            let line = args.join(" ");
            self.log.lock().unwrap().push(line.clone());
            let mut answers = self.answers.lock().unwrap();
            let matching: Vec<usize> = (0..answers.len())
                .filter(|&i| line.starts_with(answers[i].0.as_str()))
                .collect();
            Ok(match matching[..] {
                [] => CommandOutput {
                    code: Some(0),
                    stdout: String::new(),
                    stderr: String::new(),
                },
                // The last answer for a prefix stays; earlier ones are used up in order.
                [only] => answers[only].1.clone(),
                [first, ..] => answers.remove(first).1,
            })
        }
    }

    fn provider(runner: &ScriptedRunner, noop: bool) -> SystemdProvider {
        SystemdProvider::new(
            SystemdConfig {
                systemctl: Ok(PathBuf::from("/usr/bin/systemctl")),
                timeout: Duration::from_secs(5),
                noop,
                allow: None,
                status_via: StatusVia::Systemctl,
            },
            Box::new(runner.clone()),
        )
    }

    #[test]
    fn commands_are_the_designs_with_double_dash_and_one_reload() {
        let runner = ScriptedRunner::default()
            .answer("is-active", "inactive\n", "", 3)
            .answer("is-enabled", "disabled\n", "", 1);
        let mut p = provider(&runner, false);
        let status = p.status("web").unwrap();
        assert_eq!(
            status,
            ServiceStatus {
                name: "web".into(),
                provider: "systemd".into(),
                enabled: false,
                running: false,
                active_word: "inactive".into(),
                enabled_word: "disabled".into(),
            }
        );
        p.mutate(Operation::Start, "web").unwrap();
        p.mutate(Operation::Enable, "web").unwrap();
        p.mutate(Operation::Restart, "web").unwrap();
        p.mutate(Operation::Stop, "web").unwrap();
        p.mutate(Operation::Disable, "web").unwrap();
        p.finish().unwrap();
        assert_eq!(
            runner.log(),
            [
                "daemon-reload",
                "is-active --system -- web",
                "is-enabled --system -- web",
                "start --system -- web",
                "enable --no-reload --system -- web",
                "restart --system -- web",
                "stop --system -- web",
                "disable --no-reload --system -- web",
                "daemon-reload",
            ]
        );
        let ops: Vec<Call> = p.calls().iter().map(|c| c.operation).collect();
        assert_eq!(ops[0], Call::DaemonReload);
        assert_eq!(ops.last(), Some(&Call::DaemonReload));
        assert_eq!(ops.iter().filter(|o| **o == Call::DaemonReload).count(), 2);
    }

    #[test]
    fn enablement_changes_end_with_one_reload_and_nothing_else_does() {
        // Two enablement changes: one reload at the end for both.
        let runner = ScriptedRunner::default();
        let mut p = provider(&runner, false);
        p.mutate(Operation::Enable, "web").unwrap();
        p.mutate(Operation::Disable, "db").unwrap();
        p.finish().unwrap();
        p.finish().unwrap();
        assert_eq!(
            runner.log(),
            [
                "daemon-reload",
                "enable --no-reload --system -- web",
                "disable --no-reload --system -- db",
                "daemon-reload",
            ]
        );
        // Starts and stops only: no reload at the end.
        let runner = ScriptedRunner::default();
        let mut p = provider(&runner, false);
        p.mutate(Operation::Start, "web").unwrap();
        p.finish().unwrap();
        assert_eq!(runner.log(), ["daemon-reload", "start --system -- web"]);
        // A failed enable changed nothing: no reload either.
        let runner = ScriptedRunner::default().answer("enable", "", "Access denied\n", 1);
        let mut p = provider(&runner, false);
        p.mutate(Operation::Enable, "web").unwrap_err();
        p.finish().unwrap();
        assert_eq!(
            runner.log(),
            ["daemon-reload", "enable --no-reload --system -- web"]
        );
        // Noop: nothing at all.
        let runner = ScriptedRunner::default();
        let mut p = provider(&runner, true);
        p.mutate(Operation::Enable, "web").unwrap_err();
        p.finish().unwrap();
        assert!(runner.log().is_empty());
    }

    #[test]
    fn status_passes_on_the_words_systemctl_printed() {
        for (active, enabled, running, counts_enabled) in [
            ("active", "static", true, true),
            ("failed", "indirect", false, true),
            ("activating", "generated", false, true),
            ("reloading", "transient", true, true),
            ("inactive", "alias", false, true),
            ("deactivating", "enabled-runtime", false, true),
            ("inactive", "linked", false, false),
            ("inactive", "masked", false, false),
        ] {
            let runner = ScriptedRunner::default()
                .answer("is-active", &format!("{active}\n"), "", 3)
                .answer("is-enabled", &format!("{enabled}\n"), "", 0);
            let mut p = provider(&runner, false);
            let status = p.status("web").unwrap();
            assert_eq!(
                (status.active_word.as_str(), status.enabled_word.as_str()),
                (active, enabled)
            );
            assert_eq!((status.running, status.enabled), (running, counts_enabled));
            // The host's own record keeps the two states the reports use.
            assert_eq!(
                p.calls().last().unwrap().state,
                Some(UnitState {
                    running,
                    enabled: counts_enabled
                })
            );
        }
    }

    #[test]
    fn disable_of_a_runtime_enabled_unit_removes_the_runtime_enablement_too() {
        let runner = ScriptedRunner::default()
            .answer("is-active", "active\n", "", 0)
            .answer("is-enabled", "enabled-runtime\n", "", 0);
        let mut p = provider(&runner, false);
        assert_eq!(p.status("web").unwrap().enabled_word, "enabled-runtime");
        p.mutate(Operation::Disable, "web").unwrap();
        assert_eq!(
            runner.log(),
            [
                "daemon-reload",
                "is-active --system -- web",
                "is-enabled --system -- web",
                "disable --no-reload --system -- web",
                "is-enabled --system -- web",
                "disable --runtime --no-reload --system -- web",
            ]
        );
        // One operation, one record.
        let ops: Vec<Call> = p.calls().iter().map(|c| c.operation).collect();
        assert_eq!(
            ops,
            [
                Call::DaemonReload,
                Call::Guest(Operation::Status),
                Call::Guest(Operation::Disable)
            ]
        );
        assert_eq!(p.calls()[2].outcome, "ok");
    }

    #[test]
    fn disable_adds_nothing_once_the_runtime_enablement_is_gone_or_was_never_seen() {
        // is-enabled: enabled-runtime for the status, disabled after the disable.
        let runner = ScriptedRunner::default()
            .answer("is-active", "active\n", "", 0)
            .answer("is-enabled", "enabled-runtime\n", "", 0)
            .answer("is-enabled", "disabled\n", "", 1);
        let mut p = provider(&runner, false);
        p.status("web").unwrap();
        p.mutate(Operation::Disable, "web").unwrap();
        assert_eq!(
            runner.log()[3..],
            [
                "disable --no-reload --system -- web",
                "is-enabled --system -- web"
            ]
        );

        // Last found enabled (or never queried): the design's one command.
        let runner = ScriptedRunner::default()
            .answer("is-active", "active\n", "", 0)
            .answer("is-enabled", "enabled\n", "", 0);
        let mut p = provider(&runner, false);
        p.status("web").unwrap();
        p.mutate(Operation::Disable, "web").unwrap();
        p.mutate(Operation::Disable, "db").unwrap();
        assert_eq!(
            runner.log()[3..],
            [
                "disable --no-reload --system -- web",
                "disable --no-reload --system -- db"
            ]
        );
    }

    #[test]
    fn a_failing_runtime_disable_fails_the_disable_with_its_command_line() {
        let runner = ScriptedRunner::default()
            .answer("is-active", "inactive\n", "", 3)
            .answer("is-enabled", "enabled-runtime\n", "", 0)
            .answer("disable --runtime", "", "Access denied\n", 1);
        let mut p = provider(&runner, false);
        p.status("web").unwrap();
        let err = p.mutate(Operation::Disable, "web").unwrap_err();
        assert_eq!(
            err,
            ProviderError::CommandFailed(
                "systemctl disable --runtime --no-reload --system -- web failed (exit status 1): Access denied"
                    .into()
            )
        );
        assert_eq!(p.calls().last().unwrap().outcome, "command-failed");
    }

    #[test]
    fn a_failed_status_forgets_the_runtime_enablement() {
        let runner = ScriptedRunner::default()
            .answer("is-active", "active\n", "", 0)
            .answer("is-enabled", "enabled-runtime\n", "", 0)
            .answer(
                "is-enabled",
                "",
                "Failed to get unit file state for web.service: No such file or directory\n",
                1,
            );
        let mut p = provider(&runner, false);
        p.status("web").unwrap();
        assert_eq!(
            p.status("web"),
            Err(ProviderError::not_found("web")),
            "the second is-enabled says the unit is gone"
        );
        p.mutate(Operation::Disable, "web").unwrap();
        assert_eq!(
            runner.log().last().unwrap(),
            "disable --no-reload --system -- web"
        );
    }

    #[test]
    fn invalid_names_never_reach_systemctl() {
        let runner = ScriptedRunner::default();
        let mut p = provider(&runner, false);
        for name in ["-H evil", "a;b", "", "--help"] {
            assert!(
                matches!(p.status(name), Err(ProviderError::InvalidName(_))),
                "{name}"
            );
            assert!(matches!(
                p.mutate(Operation::Start, name),
                Err(ProviderError::InvalidName(_))
            ));
        }
        assert!(runner.log().is_empty(), "{:?}", runner.log());
        assert!(p.calls().iter().all(|c| c.outcome == "invalid-name"));
    }

    #[test]
    fn noop_refuses_mutations_and_does_not_reload() {
        let runner = ScriptedRunner::default()
            .answer("is-active", "active\n", "", 0)
            .answer("is-enabled", "enabled\n", "", 0);
        let mut p = provider(&runner, true);
        p.status("web").unwrap();
        assert!(matches!(
            p.mutate(Operation::Stop, "web"),
            Err(ProviderError::Denied(_))
        ));
        assert_eq!(
            runner.log(),
            ["is-active --system -- web", "is-enabled --system -- web"]
        );
    }

    #[test]
    fn failed_mutation_reports_exit_code_and_stderr() {
        let runner = ScriptedRunner::default().answer(
            "start",
            "",
            "Failed to start nosuch.service: Unit nosuch.service not found.\n",
            5,
        );
        let mut p = provider(&runner, false);
        let err = p.mutate(Operation::Start, "nosuch").unwrap_err();
        assert_eq!(
            err.message(),
            "systemctl start --system -- nosuch failed (exit status 5): Failed to start nosuch.service: Unit nosuch.service not found."
        );
    }

    #[test]
    fn failed_reload_fails_every_operation_without_retrying() {
        let runner = ScriptedRunner::default().answer("daemon-reload", "", "Access denied\n", 1);
        let mut p = provider(&runner, false);
        assert!(
            matches!(p.status("a"), Err(ProviderError::CommandFailed(m)) if m.contains("Access denied"))
        );
        assert!(matches!(
            p.mutate(Operation::Start, "a"),
            Err(ProviderError::CommandFailed(_))
        ));
        assert_eq!(runner.log(), ["daemon-reload"]);
    }

    #[test]
    fn units_outside_the_allowlist_are_denied_without_running_anything() {
        let runner = ScriptedRunner::default()
            .answer("is-active", "active\n", "", 0)
            .answer("is-enabled", "enabled\n", "", 0);
        let mut p = provider(&runner, false);
        p.config.allow = Some(super::super::UnitAllowlist::new(&["web-*".into()]).unwrap());
        assert!(matches!(p.status("sshd"), Err(ProviderError::Denied(m)) if m.contains("sshd")));
        assert!(matches!(
            p.mutate(Operation::Stop, "sshd"),
            Err(ProviderError::Denied(_))
        ));
        assert!(runner.log().is_empty(), "{:?}", runner.log());
        p.status("web-api").unwrap();
        assert_eq!(
            p.calls().iter().filter(|c| c.outcome == "denied").count(),
            2
        );
    }

    #[test]
    fn missing_systemctl_makes_every_call_unavailable() {
        let runner = ScriptedRunner::default();
        let mut p = SystemdProvider::new(
            SystemdConfig {
                systemctl: Err("systemctl not found on PATH".into()),
                timeout: Duration::from_secs(5),
                noop: false,
                allow: None,
                status_via: StatusVia::Systemctl,
            },
            Box::new(runner.clone()),
        );
        assert_eq!(
            p.status("web"),
            Err(ProviderError::Unavailable(
                "systemctl not found on PATH".into()
            ))
        );
        assert!(runner.log().is_empty());
    }
}
