//! The `systemctl` backend's one job: run a systemctl command under the
//! global lock, within its time budget, and say what it printed.

use std::path::PathBuf;
use std::sync::OnceLock;

use super::parse::command_failed;
use super::runner::{CommandOutput, CommandRunner, RunError};
use crate::contract::ProviderError;
use crate::provider::backend::{locked, Budget};

/// What systemctl prints when there is no systemd to ask: PID 1 is not
/// systemd (`sd_booted()` is false), or its bus cannot be reached at all.
const NO_SYSTEMD: [&str; 3] = [
    "System has not been booted with systemd as init system",
    "Failed to connect to bus",
    "Failed to connect to system scope bus",
];

/// The longest part of systemctl's own words kept as the reason.
const MAX_REASON: usize = 300;

/// systemctl, where it is (or why it is unavailable), and how it is run.
pub(crate) struct Systemctl {
    program: Result<PathBuf, String>,
    runner: Box<dyn CommandRunner>,
    /// systemctl's words, once it said that there is no systemd to ask:
    /// every later call is refused with them, without running it again.
    no_systemd: OnceLock<String>,
}

impl Systemctl {
    pub(crate) fn new(program: Result<PathBuf, String>, runner: Box<dyn CommandRunner>) -> Self {
        Self {
            program,
            runner,
            no_systemd: OnceLock::new(),
        }
    }

    /// Why systemd cannot be asked, when it cannot: no systemctl, or
    /// systemctl said there is no systemd.
    pub(crate) fn unavailable_reason(&self) -> Option<&str> {
        match &self.program {
            Err(reason) => Some(reason),
            Ok(_) => self.no_systemd.get().map(String::as_str),
        }
    }

    /// Runs `systemctl ARGS` under the global lock.
    pub(crate) fn output(
        &self,
        args: &[&str],
        time: &Budget,
    ) -> Result<CommandOutput, ProviderError> {
        if let Some(reason) = self.unavailable_reason() {
            return Err(ProviderError::Unavailable(reason.to_owned()));
        }
        let program = self.program.as_ref().expect("checked above");
        let output = locked(|| {
            let timeout = time.now(&format!("systemctl {}", args.join(" ")))?;
            self.runner
                .run(program, args, timeout)
                .map_err(|e| match e {
                    RunError::TimedOut(_) | RunError::Interrupted(_) => {
                        ProviderError::TimedOut(format!("systemctl {}: {e}", args.join(" ")))
                    }
                    RunError::Spawn { .. } => ProviderError::Unavailable(e.to_string()),
                })
        })?;
        if let Some(words) = no_systemd(&output) {
            let reason = self
                .no_systemd
                .get_or_init(|| format!("systemd cannot be asked here: systemctl says {words:?}"));
            tracing::warn!("{reason}");
            return Err(ProviderError::Unavailable(reason.clone()));
        }
        Ok(output)
    }

    /// Runs `journalctl ARGS`, from systemctl's own directory (the two
    /// ship together), with the same runner and time budget; `None` when
    /// there is no journalctl beside systemctl.
    pub(crate) fn journalctl(&self, args: &[&str], time: &Budget) -> Option<CommandOutput> {
        let program = self.program.as_ref().ok()?.with_file_name("journalctl");
        if !program.is_file() {
            return None;
        }
        let timeout = time.now("journalctl").ok()?;
        self.runner.run(&program, args, timeout).ok()
    }

    /// Runs a command that changes something; it succeeds when it exits 0.
    pub(crate) fn change(&self, args: &[&str], time: &Budget) -> Result<(), ProviderError> {
        let output = self.output(args, time)?;
        if output.success() {
            Ok(())
        } else {
            Err(command_failed(&args.join(" "), &output))
        }
    }
}

/// systemctl's own words, when a command failed because there is no
/// systemd to ask (rather than because of the unit): its first lines,
/// joined, bounded.
fn no_systemd(output: &CommandOutput) -> Option<String> {
    if output.success() || !NO_SYSTEMD.iter().any(|w| output.stderr.contains(w)) {
        return None;
    }
    let words = output
        .stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");
    let words = crate::text::truncate(words, MAX_REASON, crate::text::TRUNCATED);
    Some(crate::text::one_line(&words).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(stderr: &str) -> CommandOutput {
        CommandOutput {
            code: Some(1),
            stdout: String::new(),
            stderr: stderr.to_owned(),
        }
    }

    #[test]
    fn systemctl_saying_there_is_no_systemd_is_told_from_a_unit_problem() {
        // What systemctl 252 prints where PID 1 is not systemd.
        let words = no_systemd(&failed(
            "System has not been booted with systemd as init system (PID 1). Can't operate.\n\
             Failed to connect to bus: Host is down\n",
        ))
        .expect("no systemd");
        assert_eq!(
            words,
            "System has not been booted with systemd as init system (PID 1). Can't operate. \
             Failed to connect to bus: Host is down"
        );
        assert_eq!(no_systemd(&failed("Unit web.service not found.\n")), None);
        let mut ok = failed("Failed to connect to bus");
        ok.code = Some(0);
        assert_eq!(no_systemd(&ok), None, "a command that succeeded");
        let long = format!("Failed to connect to bus: {}\x1b[2J", "x".repeat(1000));
        let words = no_systemd(&failed(&long)).unwrap();
        assert!(words.len() < MAX_REASON + 40, "{}", words.len());
        assert!(!words.contains('\x1b'), "{words:?}");
    }
}
