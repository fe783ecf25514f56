//! The systemd backend through systemctl, with a scripted runner: the
//! design's commands, in order, and how their answers are read.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{StatusVia, SystemdConfig};
use crate::contract::{ErrorKind, Operation, ProviderError, ServiceStatus};
use crate::provider::runner::{CommandOutput, CommandRunner, RunError};
use crate::provider::{Call, Outcome, Provider, SystemdProvider, UnitAllowlist, UnitState};

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
    fn run(&self, program: &Path, args: &[&str], _: Duration) -> Result<CommandOutput, RunError> {
        let line = if program == Path::new("/usr/bin/journalctl") {
            format!("journalctl {}", args.join(" "))
        } else {
            assert_eq!(program, Path::new("/usr/bin/systemctl"));
            args.join(" ")
        };
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
    allowing(runner, noop, None)
}

fn allowing(runner: &ScriptedRunner, noop: bool, allow: Option<UnitAllowlist>) -> SystemdProvider {
    crate::provider::systemd_with(
        SystemdConfig {
            systemctl: Ok(PathBuf::from("/usr/bin/systemctl")),
            timeout: Duration::from_secs(5),
            noop,
            allow,
            status_via: StatusVia::Systemctl,
            jobs: 1,
            settle: Duration::ZERO,
            await_unit_jobs: true,
            left_alone: Default::default(),
            reload_before_change: Default::default(),
            windows: None,
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
            job: None,
            restarting: None,
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
            "is-enabled --system -- web",
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
            "is-enabled --system -- db",
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
                enabled: counts_enabled,
                failed: active == "failed",
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
    assert_eq!(p.calls()[2].outcome, Outcome::Ok);
}

#[test]
fn disable_adds_nothing_when_no_runtime_enablement_is_left() {
    // is-enabled says disabled after the disable: nothing follows.
    let runner = ScriptedRunner::default().answer("is-enabled", "disabled\n", "", 1);
    let mut p = provider(&runner, false);
    p.mutate(Operation::Disable, "web").unwrap();
    assert_eq!(
        runner.log(),
        [
            "daemon-reload",
            "disable --no-reload --system -- web",
            "is-enabled --system -- web"
        ]
    );
}

#[test]
fn a_unit_enabled_in_etc_and_at_runtime_is_disabled_at_both_in_one_operation() {
    // `enabled` before (links in /etc and in /run); the plain disable
    // removes /etc's, after which it reads enabled-runtime. The host
    // remembers nothing of earlier calls: it looks.
    let runner = ScriptedRunner::default()
        .answer("is-enabled", "enabled-runtime\n", "", 0)
        .answer("is-enabled", "disabled\n", "", 1);
    let mut p = provider(&runner, false);
    p.mutate(Operation::Disable, "web").unwrap();
    assert_eq!(
        runner.log()[1..],
        [
            "disable --no-reload --system -- web",
            "is-enabled --system -- web",
            "disable --runtime --no-reload --system -- web",
        ]
    );
    assert_eq!(p.calls().len(), 2, "a reload and one disable");
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
    assert_eq!(
        p.calls().last().unwrap().outcome,
        Outcome::Failed(ErrorKind::CommandFailed)
    );
}

#[test]
fn a_disable_whose_check_fails_leaves_the_verification_to_the_guest() {
    let runner = ScriptedRunner::default().answer(
        "is-enabled",
        "",
        "Failed to get unit file state for web.service: No such file or directory\n",
        1,
    );
    let mut p = provider(&runner, false);
    p.mutate(Operation::Disable, "web").unwrap();
    assert_eq!(runner.log().last().unwrap(), "is-enabled --system -- web");
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
    assert!(p
        .calls()
        .iter()
        .all(|c| c.outcome == Outcome::Failed(ErrorKind::InvalidName)));
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

/// A failed start says why in systemd's words (its `Result` and how
/// the main process ended) and carries the unit's last journal lines
/// in its record, escaped when shown.
#[test]
fn a_failed_start_is_explained_in_systemds_words_and_the_units() {
    let runner = ScriptedRunner::default()
        .answer(
            "start",
            "",
            "Job for web.service failed because the control process exited with error code.\n",
            1,
        )
        .answer(
            "show --property=",
            "ActiveState=failed\nSubState=failed\nInvocationID=00ff\nNRestarts=0\n\
             Result=exit-code\nExecMainCode=1\nExecMainStatus=3\nJob=\n",
            "",
            0,
        )
        .answer("journalctl", "starting\nboom: \x1b[31mbad config\n", "", 0);
    let mut p = provider(&runner, false);
    let err = p.mutate(Operation::Start, "web").unwrap_err();
    assert!(
        err.message().ends_with(
            "control process exited with error code. (Result: exit-code; main process \
             exited with status 3)"
        ),
        "{}",
        err.message()
    );
    let calls = p.take_calls();
    let start = calls.last().unwrap();
    let journal: Vec<&str> = start.journal.iter().map(|l| l.as_raw()).collect();
    assert_eq!(journal, ["starting", "boom: \x1b[31mbad config"]);
    assert!(!start.journal[1].to_string().contains('\x1b'));
    let asked = runner.log();
    assert!(
        asked.iter().any(|l| l.starts_with("journalctl ")
            && l.contains("_SYSTEMD_UNIT=web.service")
            && l.contains("--since=@")),
        "{asked:?}"
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
    let allow = UnitAllowlist::new(&["web-*".into()]).unwrap();
    let mut p = allowing(&runner, false, Some(allow));
    assert!(matches!(p.status("sshd"), Err(ProviderError::Denied(m)) if m.contains("sshd")));
    assert!(matches!(
        p.mutate(Operation::Stop, "sshd"),
        Err(ProviderError::Denied(_))
    ));
    assert!(runner.log().is_empty(), "{:?}", runner.log());
    p.status("web-api").unwrap();
    assert_eq!(
        p.calls()
            .iter()
            .filter(|c| c.outcome == Outcome::Failed(ErrorKind::Denied))
            .count(),
        2
    );
}

#[test]
fn missing_systemctl_makes_every_call_unavailable() {
    let runner = ScriptedRunner::default();
    let mut p = crate::provider::systemd_with(
        SystemdConfig {
            systemctl: Err("systemctl not found on PATH".into()),
            timeout: Duration::from_secs(5),
            noop: false,
            allow: None,
            status_via: StatusVia::Systemctl,
            jobs: 1,
            settle: Duration::ZERO,
            await_unit_jobs: true,
            left_alone: Default::default(),
            reload_before_change: Default::default(),
            windows: None,
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

#[test]
fn systemctl_saying_there_is_no_systemd_is_asked_once_and_no_unit_is_missing() {
    let words = "System has not been booted with systemd as init system (PID 1). Can't operate.\n\
                 Failed to connect to bus: Host is down\n";
    let runner = ScriptedRunner::default()
        .answer("is-active", "", words, 1)
        .answer("is-enabled", "", words, 1)
        .answer("show", "", words, 1);
    let mut p = provider(&runner, true);
    let first = p.status("web").unwrap_err();
    assert_eq!(first.kind(), ErrorKind::Unavailable, "{first:?}");
    assert!(
        first
            .message()
            .contains("System has not been booted with systemd"),
        "{first:?}"
    );
    assert!(!first.message().contains("not found"), "{first:?}");
    let asked = runner.log().len();
    assert_eq!(
        p.status("db").unwrap_err(),
        first,
        "the same words for every unit"
    );
    assert_eq!(
        runner.log().len(),
        asked,
        "systemctl is not asked again: {:?}",
        runner.log()
    );
    assert_eq!(p.unavailable_reason(), Some(first.message()));
}
