//! Reading `systemctl is-active` and `is-enabled` (docs/service-type.md,
//! "Reading status").

use super::runner::CommandOutput;
use crate::contract::ProviderError;
use crate::service_name::quote;
use crate::text::truncate;

/// The most of a command's stderr kept in an error message.
const MAX_STDERR_IN_MESSAGE: usize = 2000;

/// Whether `is-active` says the unit runs. `reloading` and `refreshing` are
/// running; `deactivating` is on its way to stopped. The exit code is not
/// used: is-active exits 3 for every stopped state.
pub fn parse_is_active(output: &CommandOutput) -> Result<bool, ProviderError> {
    match first_line(&output.stdout) {
        "active" | "reloading" | "refreshing" => Ok(true),
        "inactive" | "failed" | "activating" | "deactivating" => Ok(false),
        "" if !output.success() => Err(command_failed("is-active", output)),
        other => Err(ProviderError::CommandFailed(format!(
            "invalid systemctl is-active output {}",
            quote(other)
        ))),
    }
}

/// Whether `is-enabled` says the unit starts at boot. A missing unit is
/// "service not found" both as systemd 252 says it (nothing on stdout, "No
/// such file or directory" on stderr, exit 1) and as systemd >= 253 does
/// (`not-found`, exit 4).
pub fn parse_is_enabled(service: &str, output: &CommandOutput) -> Result<bool, ProviderError> {
    match first_line(&output.stdout) {
        "enabled" | "enabled-runtime" | "alias" | "static" | "indirect" | "generated"
        | "transient" => Ok(true),
        "linked" | "linked-runtime" | "masked" | "masked-runtime" | "disabled" => Ok(false),
        "not-found" => Err(ProviderError::not_found(service)),
        "" if output.stderr.contains("No such file or directory") => {
            Err(ProviderError::not_found(service))
        }
        "" if !output.success() => Err(command_failed("is-enabled", output)),
        other => Err(ProviderError::CommandFailed(format!(
            "invalid systemctl is-enabled output {}",
            quote(other)
        ))),
    }
}

/// The error of a command that exited non-zero: its exit code and stderr.
pub fn command_failed(command: &str, output: &CommandOutput) -> ProviderError {
    let code = match output.code {
        Some(code) => format!("exit status {code}"),
        None => "killed by a signal".to_owned(),
    };
    // One line per message keeps reports readable; systemctl's stderr lines are sentences.
    let stderr = truncate(
        output
            .stderr
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" "),
        MAX_STDERR_IN_MESSAGE,
        "...",
    );
    ProviderError::CommandFailed(if stderr.is_empty() {
        format!("systemctl {command} failed ({code})")
    } else {
        format!("systemctl {command} failed ({code}): {stderr}")
    })
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("").trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(stdout: &str, stderr: &str, code: i32) -> CommandOutput {
        CommandOutput {
            code: Some(code),
            stdout: stdout.into(),
            stderr: stderr.into(),
        }
    }

    #[test]
    fn is_active_table() {
        for (stdout, code, running) in [
            ("active\n", 0, true),
            ("reloading\n", 0, true),
            ("refreshing\n", 0, true),
            ("inactive\n", 3, false),
            ("failed\n", 3, false),
            ("activating\n", 3, false),
            ("deactivating\n", 3, false),
        ] {
            assert_eq!(
                parse_is_active(&out(stdout, "", code)),
                Ok(running),
                "{stdout:?}"
            );
        }
    }

    #[test]
    fn unknown_is_active_output_is_an_error_quoting_it() {
        let err = parse_is_active(&out("maintenance\n", "", 3)).unwrap_err();
        assert_eq!(
            err,
            ProviderError::CommandFailed(
                "invalid systemctl is-active output \"maintenance\"".into()
            )
        );
    }

    #[test]
    fn is_active_with_no_output_and_an_error_reports_stderr() {
        let err = parse_is_active(&out(
            "",
            "System has not been booted with systemd as init system (PID 1). Can't operate.\n",
            1,
        ))
        .unwrap_err();
        let ProviderError::CommandFailed(message) = err else {
            panic!("{err:?}")
        };
        assert!(message.contains("exit status 1"), "{message}");
        assert!(
            message.contains("has not been booted with systemd"),
            "{message}"
        );
    }

    #[test]
    fn is_enabled_table() {
        for (stdout, code, enabled) in [
            ("enabled", 0, true),
            ("enabled-runtime", 0, true),
            ("alias", 0, true),
            ("static", 0, true),
            ("indirect", 0, true),
            ("generated", 0, true),
            ("transient", 0, true),
            ("linked", 1, false),
            ("linked-runtime", 1, false),
            ("masked", 1, false),
            ("masked-runtime", 1, false),
            ("disabled", 1, false),
        ] {
            assert_eq!(
                parse_is_enabled("x", &out(&format!("{stdout}\n"), "", code)),
                Ok(enabled),
                "{stdout}"
            );
        }
    }

    #[test]
    fn missing_unit_is_not_found_in_systemd_252_and_253_styles() {
        let v252 = out(
            "",
            "Failed to get unit file state for nosuch.service: No such file or directory\n",
            1,
        );
        assert_eq!(
            parse_is_enabled("nosuch", &v252),
            Err(ProviderError::NotFound("service not found: nosuch".into()))
        );
        let v253 = out("not-found\n", "", 4);
        assert_eq!(
            parse_is_enabled("nosuch", &v253),
            Err(ProviderError::NotFound("service not found: nosuch".into()))
        );
    }

    #[test]
    fn unknown_is_enabled_output_is_an_error_quoting_it() {
        assert_eq!(
            parse_is_enabled("x", &out("bad\n", "", 1)),
            Err(ProviderError::CommandFailed(
                "invalid systemctl is-enabled output \"bad\"".into()
            ))
        );
    }

    #[test]
    fn huge_stderr_is_cut_in_the_message() {
        let err = command_failed("start --system -- x", &out("", &"e".repeat(100_000), 1));
        assert!(
            err.message().len() < MAX_STDERR_IN_MESSAGE + 100,
            "{}",
            err.message().len()
        );
        assert!(err.message().ends_with("..."));
    }

    #[test]
    fn command_failure_carries_exit_code_and_stderr() {
        let err = command_failed(
            "start --system -- x",
            &out(
                "",
                "Failed to start x.service: Unit x.service is masked.\n",
                1,
            ),
        );
        assert_eq!(
            err,
            ProviderError::CommandFailed(
                "systemctl start --system -- x failed (exit status 1): Failed to start x.service: Unit x.service is masked."
                    .into()
            )
        );
    }
}
