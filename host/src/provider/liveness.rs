//! Whether a unit is still up as its start left it, and how it went down,
//! in systemd's words: what the settle window judges and what a failed
//! start, restart or crash loop is explained with.
//!
//! systemd says it in a unit's properties: `ActiveState` and `SubState`,
//! `InvocationID` (new at every start of the unit, automatic restarts
//! included), `NRestarts` (automatic restarts since the unit was last
//! started by hand; a start by hand sets it to 0), `Result` (why it last
//! failed: `exit-code`, `signal`, `core-dump`, `oom-kill`, `timeout`,
//! `start-limit-hit`, ...) and `ExecMainCode`/`ExecMainStatus` (how its
//! main process last ended, as `waitid()` says it). Backends read them
//! (over D-Bus, or `systemctl show`); this module only reads what they mean.

use std::time::Duration;

use super::systemd::words::{property, ActiveState, ServiceResult, SubState};

/// The properties of a unit that say whether it stayed up.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Liveness {
    /// `ActiveState`.
    pub active: String,
    /// `SubState`.
    pub sub: String,
    /// `InvocationID`, as hex; `None` when the unit has none or it was not
    /// read.
    pub invocation: Option<String>,
    /// `NRestarts`; `None` for a unit that is not a service.
    pub restarts: Option<u32>,
    /// `Result`; `None` when the unit type has none.
    pub result: Option<String>,
    /// How the main process last ended; `None` when it has not (or the
    /// unit is not a service).
    pub main_exit: Option<MainExit>,
    /// The unit has a job pending (`Job`), whoever queued it.
    pub job_pending: bool,
}

/// How a service's main process last ended: `ExecMainCode` (the
/// `si_code` of `waitid()`) and `ExecMainStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MainExit {
    pub code: i32,
    pub status: i32,
}

/// `CLD_EXITED`, `CLD_KILLED`, `CLD_DUMPED` (`<signal.h>`).
const CLD_EXITED: i32 = 1;
const CLD_KILLED: i32 = 2;
const CLD_DUMPED: i32 = 3;

impl MainExit {
    /// "main process exited with status 3", "main process was killed by
    /// signal SEGV", "main process dumped core (signal ABRT)"; `None`
    /// when systemd has not seen it end.
    pub fn describe(self) -> Option<String> {
        match self.code {
            CLD_EXITED => Some(format!("main process exited with status {}", self.status)),
            CLD_KILLED => Some(format!(
                "main process was killed by signal {}",
                signal_name(self.status)
            )),
            CLD_DUMPED => Some(format!(
                "main process dumped core (signal {})",
                signal_name(self.status)
            )),
            _ => None,
        }
    }
}

/// The name systemd prints for a signal number (the common ones).
fn signal_name(signal: i32) -> String {
    let name = match signal {
        1 => "HUP",
        2 => "INT",
        3 => "QUIT",
        4 => "ILL",
        5 => "TRAP",
        6 => "ABRT",
        7 => "BUS",
        8 => "FPE",
        9 => "KILL",
        10 => "USR1",
        11 => "SEGV",
        12 => "USR2",
        13 => "PIPE",
        14 => "ALRM",
        15 => "TERM",
        _ => return signal.to_string(),
    };
    name.to_owned()
}

impl Liveness {
    /// Running as far as a start is concerned: `active` (or reloading).
    pub fn is_up(&self) -> bool {
        ActiveState::parse(&self.active).is_some_and(ActiveState::counts_as_running)
    }

    /// systemd is restarting the unit by itself: between two runs.
    pub fn is_auto_restarting(&self) -> bool {
        SubState::parse(&self.sub) == Some(SubState::AutoRestart)
    }

    /// How the unit's last run ended, in systemd's words: "Result:
    /// exit-code; main process exited with status 3". Empty when systemd
    /// says nothing of it.
    pub fn last_exit(&self) -> String {
        let mut parts = Vec::new();
        if let Some(result) = self
            .result
            .as_deref()
            .filter(|r| ServiceResult::parse(r) != Some(ServiceResult::Success))
        {
            parts.push(format!("Result: {result}"));
        }
        if let Some(exit) = self.main_exit.and_then(MainExit::describe) {
            parts.push(exit);
        }
        parts.join("; ")
    }

    /// Why a start or restart did not count, judged at the end of its
    /// settle window (or earlier, as soon as it went wrong) against
    /// `baseline`, what the unit looked like when its job ended (`None`
    /// when it was not read: the restart count then starts from 0, as a
    /// start by hand sets it). `None` when the unit stayed up.
    pub fn did_not_stay_up(
        &self,
        baseline: Option<&Liveness>,
        unit: &str,
        after: Duration,
    ) -> Option<String> {
        let before = baseline.and_then(|b| b.restarts).unwrap_or(0);
        let restarted = self.restarts.map_or(0, |now| now.saturating_sub(before));
        let when = format!(
            "{} after its job ended",
            humantime::format_duration(Duration::from_millis(after.as_millis() as u64))
        );
        let last = self.last_exit();
        let last = if last.is_empty() {
            String::new()
        } else {
            format!("; last exit: {last}")
        };
        if restarted > 0 {
            let times = if restarted == 1 {
                "once".to_owned()
            } else {
                format!("{restarted} times")
            };
            return Some(format!(
                "{unit} did not stay up: restarted {times} by systemd since start, \
                 {when} it is {} ({}){last}",
                self.active, self.sub
            ));
        }
        if self.is_auto_restarting() {
            return Some(format!(
                "{unit} did not stay up: {when} its main process had ended and systemd is \
                 restarting it (Restart=; {} ({})){last}",
                self.active, self.sub
            ));
        }
        if !self.is_up() {
            return Some(format!(
                "{unit} did not stay up: {when} it is {} ({}){last}",
                self.active, self.sub
            ));
        }
        let changed = match (
            baseline.and_then(|b| b.invocation.as_ref()),
            &self.invocation,
        ) {
            (Some(then), Some(now)) => then != now,
            _ => false,
        };
        if changed {
            return Some(format!(
                "{unit} did not stay up: it was started again (a new invocation) {when}, \
                 not by this run"
            ));
        }
        None
    }
}

/// Reads `systemctl show` output (`KEY=VALUE` lines) of the properties
/// [`show_properties`] names.
pub(crate) fn from_show(stdout: &str) -> Liveness {
    let mut liveness = Liveness::default();
    let mut code = None;
    let mut status = None;
    for line in stdout.lines() {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let value = value.trim();
        match key {
            property::ACTIVE_STATE => liveness.active = value.to_owned(),
            property::SUB_STATE => liveness.sub = value.to_owned(),
            property::INVOCATION_ID if !value.is_empty() => {
                liveness.invocation = Some(value.to_owned())
            }
            property::N_RESTARTS => liveness.restarts = value.parse().ok(),
            property::RESULT if !value.is_empty() => liveness.result = Some(value.to_owned()),
            property::EXEC_MAIN_CODE => code = value.parse().ok(),
            property::EXEC_MAIN_STATUS => status = value.parse().ok(),
            // `Job=` is printed only while a job is pending (its number).
            property::JOB => liveness.job_pending = !value.is_empty() && value != "0",
            _ => {}
        }
    }
    if let (Some(code), Some(status)) = (code, status) {
        liveness.main_exit = Some(MainExit { code, status }).filter(|e| e.code != 0);
    }
    liveness
}

/// The properties `systemctl show` is asked for, comma-separated.
pub(crate) fn show_properties() -> String {
    [
        property::ACTIVE_STATE,
        property::SUB_STATE,
        property::INVOCATION_ID,
        property::N_RESTARTS,
        property::RESULT,
        property::EXEC_MAIN_CODE,
        property::EXEC_MAIN_STATUS,
        property::JOB,
    ]
    .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(invocation: &str, restarts: u32) -> Liveness {
        Liveness {
            active: "active".into(),
            sub: "running".into(),
            invocation: Some(invocation.into()),
            restarts: Some(restarts),
            result: Some("success".into()),
            ..Liveness::default()
        }
    }

    const HALF: Duration = Duration::from_millis(500);

    #[test]
    fn a_unit_still_up_with_the_same_invocation_counts() {
        let then = up("aa", 0);
        assert_eq!(
            up("aa", 0).did_not_stay_up(Some(&then), "web.service", HALF),
            None
        );
        assert_eq!(up("aa", 0).did_not_stay_up(None, "web.service", HALF), None);
    }

    #[test]
    fn a_dead_unit_is_described_in_systemds_words() {
        let dead = Liveness {
            active: "failed".into(),
            sub: "failed".into(),
            result: Some("exit-code".into()),
            main_exit: Some(MainExit { code: 1, status: 3 }),
            ..up("aa", 0)
        };
        assert_eq!(
            dead.did_not_stay_up(Some(&up("aa", 0)), "web.service", HALF)
                .unwrap(),
            "web.service did not stay up: 500ms after its job ended it is failed (failed); \
             last exit: Result: exit-code; main process exited with status 3"
        );
    }

    #[test]
    fn automatic_restarts_during_the_window_are_a_crash_loop() {
        let looping = Liveness {
            result: Some("exit-code".into()),
            main_exit: Some(MainExit { code: 1, status: 3 }),
            ..up("bb", 3)
        };
        let message = looping
            .did_not_stay_up(Some(&up("aa", 0)), "web.service", HALF)
            .unwrap();
        assert!(
            message.contains("restarted 3 times by systemd since start")
                && message.ends_with("main process exited with status 3"),
            "{message}"
        );
        // Without a baseline, a start by hand has set the count to 0.
        assert!(looping.did_not_stay_up(None, "web.service", HALF).is_some());
    }

    #[test]
    fn a_new_invocation_is_not_the_start_this_run_made() {
        let message = up("bb", 0)
            .did_not_stay_up(Some(&up("aa", 0)), "web.service", HALF)
            .unwrap();
        assert!(
            message.contains("started again (a new invocation)"),
            "{message}"
        );
    }

    #[test]
    fn signals_and_core_dumps_are_named() {
        let signal = MainExit { code: 2, status: 9 };
        assert_eq!(
            signal.describe().unwrap(),
            "main process was killed by signal KILL"
        );
        let dumped = MainExit {
            code: 3,
            status: 11,
        };
        assert_eq!(
            dumped.describe().unwrap(),
            "main process dumped core (signal SEGV)"
        );
        assert_eq!(MainExit { code: 0, status: 0 }.describe(), None);
    }

    #[test]
    fn show_output_is_read() {
        let l = from_show(
            "ActiveState=activating\nSubState=auto-restart\nInvocationID=\nNRestarts=4\n\
             Result=exit-code\nExecMainCode=1\nExecMainStatus=3\nJob=\n",
        );
        assert!(l.is_auto_restarting() && !l.is_up() && !l.job_pending);
        assert_eq!(l.restarts, Some(4));
        assert_eq!(l.invocation, None);
        assert_eq!(
            l.last_exit(),
            "Result: exit-code; main process exited with status 3"
        );
        assert!(from_show("Job=42\n").job_pending);
    }
}
