//! The systemctl output parsers on arbitrary output: they never panic, an `Ok`
//! is only ever read from one of the words of docs/service-type.md's tables, and error messages stay short.
//!
//! Input: the first line is the exit code (anything that is not an integer
//! means "killed by a signal"), the rest is stdout, then a NUL byte, then stderr.

#![no_main]

use libfuzzer_sys::fuzz_target;
use policy_host::provider::parse::{command_failed, parse_is_active, parse_is_enabled};
use policy_host::provider::runner::CommandOutput;

const RUNNING: &[&str] = &["active", "reloading", "refreshing"];
const STOPPED: &[&str] = &["inactive", "failed", "activating", "deactivating"];
const ENABLED: &[&str] = &[
    "enabled",
    "enabled-runtime",
    "alias",
    "static",
    "indirect",
    "generated",
    "transient",
];
const DISABLED: &[&str] = &[
    "linked",
    "linked-runtime",
    "masked",
    "masked-runtime",
    "disabled",
];

/// Longest message allowed: a quoted first line (64 characters, each escaped
/// to at most 10 bytes) or 2000 bytes of stderr, plus the fixed text.
const MAX_MESSAGE: usize = 2200;

fn split(data: &[u8]) -> CommandOutput {
    let (code, rest) = match data.iter().position(|&b| b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let code = std::str::from_utf8(code)
        .ok()
        .and_then(|c| c.trim().parse().ok());
    let (stdout, stderr) = match rest.iter().position(|&b| b == 0) {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &[][..]),
    };
    // As the runner reads a command's output.
    CommandOutput {
        code,
        stdout: String::from_utf8_lossy(stdout).into_owned(),
        stderr: String::from_utf8_lossy(stderr).into_owned(),
    }
}

fn first_word(stdout: &str) -> &str {
    stdout.split('\n').next().unwrap_or("").trim()
}

fuzz_target!(|data: &[u8]| {
    let output = split(data);
    let word = first_word(&output.stdout);

    match parse_is_active(&output) {
        Ok(true) => assert!(RUNNING.contains(&word), "running from {word:?}"),
        Ok(false) => assert!(STOPPED.contains(&word), "stopped from {word:?}"),
        Err(e) => {
            assert!(
                !RUNNING.contains(&word) && !STOPPED.contains(&word),
                "{word:?}: {e}"
            );
            assert!(
                e.to_string().len() <= MAX_MESSAGE,
                "{} bytes",
                e.to_string().len()
            );
        }
    }

    match parse_is_enabled("unit", &output) {
        Ok(true) => assert!(ENABLED.contains(&word), "enabled from {word:?}"),
        Ok(false) => assert!(DISABLED.contains(&word), "disabled from {word:?}"),
        Err(e) => {
            assert!(
                !ENABLED.contains(&word) && !DISABLED.contains(&word),
                "{word:?}: {e}"
            );
            assert!(
                e.to_string().len() <= MAX_MESSAGE,
                "{} bytes",
                e.to_string().len()
            );
        }
    }

    let message = command_failed("start --system -- unit", &output).to_string();
    assert!(message.len() <= MAX_MESSAGE, "{} bytes", message.len());
    assert!(!message.contains('\n'), "one line: {message:?}");
});
