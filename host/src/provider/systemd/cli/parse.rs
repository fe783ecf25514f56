//! Reading `systemctl is-active` and `is-enabled` (docs/service-type.md,
//! "Reading status").

use super::runner::CommandOutput;
use crate::contract::ProviderError;
use crate::service_name::quote;
use crate::text::truncate;

/// The most of a command's stderr kept in an error message.
const MAX_STDERR_IN_MESSAGE: usize = 2000;

/// A word `systemctl is-active` or `is-enabled` printed, as one of the
/// words the tables of docs/service-type.md know, and what it counts as
/// (running, or enabled). The provider passes both on to the guest, which
/// alone decides what a word means for the desired state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Word {
    pub word: &'static str,
    pub counts: bool,
}

pub use contract_words::{IS_ACTIVE_WORDS, IS_ENABLED_WORDS};

/// A known word, and what it counts as.
fn known(found: Option<(&'static str, bool)>) -> Option<Word> {
    found.map(|(word, counts)| Word { word, counts })
}

/// What `is-active` said, when it is a word the table knows. The exit code is
/// not used: is-active exits 3 for every stopped state.
pub fn read_is_active(output: &CommandOutput) -> Result<Word, ProviderError> {
    match first_line(&output.stdout) {
        "" if !output.success() => Err(command_failed("is-active", output)),
        word => known(contract_words::is_active_word(word)).ok_or_else(|| {
            ProviderError::CommandFailed(format!(
                "invalid systemctl is-active output {}",
                quote(word)
            ))
        }),
    }
}

/// Whether `is-active` says the unit runs ([`read_is_active`]'s count).
pub fn parse_is_active(output: &CommandOutput) -> Result<bool, ProviderError> {
    read_is_active(output).map(|w| w.counts)
}

/// What `is-enabled` said, when it is a word the table knows. A missing unit
/// is "service not found" both as systemd 252 says it (nothing on stdout,
/// "No such file or directory" on stderr, exit 1) and as systemd >= 253 does
/// (`not-found`, exit 4).
pub fn read_is_enabled(service: &str, output: &CommandOutput) -> Result<Word, ProviderError> {
    match first_line(&output.stdout) {
        "not-found" => Err(ProviderError::not_found(service)),
        "" if output.stderr.contains("No such file or directory") => {
            Err(ProviderError::not_found(service))
        }
        "" if !output.success() => Err(command_failed("is-enabled", output)),
        word => known(contract_words::is_enabled_word(word)).ok_or_else(|| {
            ProviderError::CommandFailed(format!(
                "invalid systemctl is-enabled output {}",
                quote(word)
            ))
        }),
    }
}

/// Whether `is-enabled` says the unit starts at boot ([`read_is_enabled`]'s count).
pub fn parse_is_enabled(service: &str, output: &CommandOutput) -> Result<bool, ProviderError> {
    read_is_enabled(service, output).map(|w| w.counts)
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

    /// Only the first line is read: help text (what `systemctl --help`
    /// prints, exit 0, were `--` ever missing) is no status.
    #[test]
    fn only_the_first_line_is_read_and_help_text_is_no_status() {
        let help = "systemctl [OPTIONS...] COMMAND ...\n\nQuery or send control commands to the system manager.";
        let err = parse_is_active(&out(help, "", 0)).unwrap_err();
        let ProviderError::CommandFailed(message) = err else {
            panic!("{err:?}")
        };
        assert!(
            message.starts_with(
                "invalid systemctl is-active output \"systemctl [OPTIONS...] COMMAND ...\""
            ),
            "{message}"
        );
        assert_eq!(parse_is_active(&out("active\nanything\n", "", 0)), Ok(true));
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
    fn the_words_are_passed_on_as_the_tables_spell_them() {
        for (word, running) in IS_ACTIVE_WORDS {
            assert_eq!(
                read_is_active(&out(&format!("  {word}  \nsecond line\n"), "", 3)),
                Ok(Word {
                    word,
                    counts: running
                })
            );
        }
        for (word, enabled) in IS_ENABLED_WORDS {
            assert_eq!(
                read_is_enabled("x", &out(&format!("{word}\n"), "", 1)),
                Ok(Word {
                    word,
                    counts: enabled
                })
            );
        }
        // A word outside the tables is never passed on, whatever its exit code.
        assert!(read_is_active(&out("Active\n", "", 0)).is_err());
        assert!(read_is_enabled("x", &out("static-ish\n", "", 0)).is_err());
        assert!(read_is_enabled("x", &out("not-found\n", "", 4)).is_err());
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
