//! The name the binary was called by: `host` when built with cargo,
//! `policy-host` as the Debian package installs it. Every message that
//! names a command (`sign it with `policy-host sign``) and every log line's
//! prefix uses it, as the help and man pages do.

use std::sync::OnceLock;

static NAME: OnceLock<String> = OnceLock::new();

/// The name messages use when none was set (library use, unit tests).
pub const DEFAULT: &str = "host";

/// Sets the name, once, at start-up; later calls change nothing.
pub fn set_name(name: &str) {
    let _ = NAME.set(name.to_owned());
}

/// The name the binary was called by.
pub fn name() -> &'static str {
    NAME.get().map_or(DEFAULT, String::as_str)
}

/// `` `NAME SUBCOMMAND` ``, as messages quote a command to run.
pub fn command(subcommand: &str) -> String {
    format!("`{} {subcommand}`", name())
}
