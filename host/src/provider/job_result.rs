//! What a job's result means, in the words systemctl 252 prints for it
//! (`check_wait_response` and `log_job_error_with_service_result` in
//! `src/shared/bus-wait-for-jobs.c`), so that a job followed over D-Bus
//! fails with the reason `systemctl start` would have given.

use super::backend::{self, Change};
use super::systemd::words::dbus::member;
use super::systemd::words::{JobResult, ServiceResult};
use crate::contract::ProviderError;

/// The D-Bus method that queues `change`'s job.
pub(crate) fn method(change: Change) -> &'static str {
    match change {
        Change::Start => member::START_UNIT,
        Change::Stop => member::STOP_UNIT,
        Change::Restart => member::RESTART_UNIT,
        Change::Enable => member::ENABLE_UNIT_FILES,
        Change::Disable => member::DISABLE_UNIT_FILES,
    }
}

/// Whether explaining `result` needs the unit's `Result` property: a job
/// of a service that failed (or ended with a word systemd 252 does not
/// say), as systemctl asks only then.
pub(crate) fn needs_unit_result(result: &str, unit: &str) -> bool {
    let explained = JobResult::parse(result).is_some_and(|r| r != JobResult::Failed);
    !explained && unit.ends_with(".service")
}

/// systemd's `Result` of a service, as systemctl explains it.
fn explain_service_result(result: &str) -> Option<&'static str> {
    Some(match ServiceResult::parse(result)? {
        ServiceResult::Protocol => {
            "the service did not take the steps required by its unit configuration"
        }
        ServiceResult::Timeout => "a timeout was exceeded",
        ServiceResult::ExitCode => "the control process exited with error code",
        ServiceResult::Signal => "a fatal signal was delivered to the control process",
        ServiceResult::CoreDump => {
            "a fatal signal was delivered causing the control process to dump core"
        }
        ServiceResult::Watchdog => "the service failed to send watchdog ping",
        ServiceResult::Resources => "of unavailable resources or another system error",
        // systemd 252 explains no other word (`start-limit-hit`,
        // `oom-kill`, ... get the plain sentence).
        ServiceResult::Success
        | ServiceResult::StartLimitHit
        | ServiceResult::OomKill
        | ServiceResult::ExecCondition => return None,
    })
}

/// How a `change` job of `unit` that ended with `result` went: `Ok` for
/// `done` and `skipped` (systemctl exits 0 for them), otherwise a
/// `command-failed` error with systemctl's sentence; `unit_result` is the
/// service's `Result` when it was read.
pub(crate) fn outcome(
    change: Change,
    result: &str,
    unit: &str,
    unit_result: Option<&str>,
) -> backend::JobResult {
    let sentence = match JobResult::parse(result) {
        Some(JobResult::Done | JobResult::Skipped) => return Ok(()),
        Some(JobResult::Canceled) => format!("Job for {unit} canceled."),
        Some(JobResult::Timeout) => format!("Job for {unit} timed out."),
        Some(JobResult::Dependency) => {
            format!("A dependency job for {unit} failed. See 'journalctl -xe' for details.")
        }
        Some(JobResult::Invalid) => format!("{unit} is not active, cannot reload."),
        Some(JobResult::Assert) => format!("Assertion failed on job for {unit}."),
        Some(JobResult::Unsupported) => {
            format!("Operation on or unit type of {unit} not supported on this system.")
        }
        Some(JobResult::Collected) => format!("Queued job for {unit} was garbage collected."),
        Some(JobResult::Once) => {
            format!("Unit {unit} was started already once and can't be started again.")
        }
        Some(JobResult::Failed) | None if unit.ends_with(".service") => {
            let see = format!(
                "See \"systemctl status {unit}\" and \"journalctl -xeu {unit}\" for details."
            );
            match unit_result.and_then(explain_service_result) {
                Some(why) => format!("Job for {unit} failed because {why}. {see}"),
                None => format!("Job for {unit} failed. {see}"),
            }
        }
        Some(JobResult::Failed) | None => {
            "Job failed. See \"journalctl -xe\" for details.".to_owned()
        }
    };
    Err(ProviderError::CommandFailed(format!(
        "{} {unit} failed (job result: {result}): {sentence}",
        method(change)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(result: backend::JobResult) -> String {
        match result {
            Err(ProviderError::CommandFailed(m)) => m,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn done_and_skipped_are_success_as_for_systemctl() {
        assert_eq!(outcome(Change::Start, "done", "web.service", None), Ok(()));
        assert_eq!(
            outcome(Change::Start, "skipped", "web.service", None),
            Ok(())
        );
    }

    #[test]
    fn a_failed_service_job_says_why_with_the_units_result() {
        assert!(needs_unit_result("failed", "web.service"));
        assert_eq!(
            message(outcome(
                Change::Start,
                "failed",
                "web.service",
                Some("exit-code")
            )),
            "StartUnit web.service failed (job result: failed): Job for web.service failed \
             because the control process exited with error code. See \"systemctl status web.service\" and \
             \"journalctl -xeu web.service\" for details."
        );
        assert_eq!(
            message(outcome(
                Change::Restart,
                "failed",
                "web.service",
                Some("new-word")
            )),
            "RestartUnit web.service failed (job result: failed): Job for web.service failed. \
             See \"systemctl status web.service\" and \"journalctl -xeu web.service\" for details."
        );
        // Not a service: no Result to ask for.
        assert!(!needs_unit_result("failed", "web.socket"));
        assert_eq!(
            message(outcome(Change::Start, "failed", "web.socket", None)),
            "StartUnit web.socket failed (job result: failed): Job failed. See \"journalctl -xe\" \
             for details."
        );
    }

    #[test]
    fn the_other_results_have_systemctls_sentences() {
        for (result, sentence) in [
            ("canceled", "Job for a.service canceled."),
            ("timeout", "Job for a.service timed out."),
            (
                "dependency",
                "A dependency job for a.service failed. See 'journalctl -xe' for details.",
            ),
            ("assert", "Assertion failed on job for a.service."),
            (
                "once",
                "Unit a.service was started already once and can't be started again.",
            ),
        ] {
            assert!(!needs_unit_result(result, "a.service"), "{result}");
            assert_eq!(
                message(outcome(Change::Start, result, "a.service", None)),
                format!("StartUnit a.service failed (job result: {result}): {sentence}")
            );
        }
    }
}
