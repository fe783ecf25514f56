//! The `systemctl` backend's one job: run a systemctl command under the
//! global lock, within its time budget, and say what it printed.

use std::path::PathBuf;

use super::backend::{locked, Budget};
use super::parse::command_failed;
use super::runner::{CommandOutput, CommandRunner, RunError};
use crate::contract::ProviderError;

/// systemctl, where it is (or why it is unavailable), and how it is run.
pub struct Systemctl {
    program: Result<PathBuf, String>,
    runner: Box<dyn CommandRunner>,
}

impl Systemctl {
    pub fn new(program: Result<PathBuf, String>, runner: Box<dyn CommandRunner>) -> Self {
        Self { program, runner }
    }

    /// Why systemctl cannot be run, when it cannot.
    pub fn unavailable_reason(&self) -> Option<&str> {
        self.program.as_ref().err().map(String::as_str)
    }

    /// Runs `systemctl ARGS` under the global lock.
    pub fn output(&self, args: &[&str], time: &Budget) -> Result<CommandOutput, ProviderError> {
        let program = self
            .program
            .as_ref()
            .map_err(|reason| ProviderError::Unavailable(reason.clone()))?;
        locked(|| {
            let timeout = time.now(&format!("systemctl {}", args.join(" ")))?;
            self.runner
                .run(program, args, timeout)
                .map_err(|e| match e {
                    RunError::TimedOut(_) | RunError::Interrupted(_) => {
                        ProviderError::TimedOut(format!("systemctl {}: {e}", args.join(" ")))
                    }
                    RunError::Spawn { .. } => ProviderError::Unavailable(e.to_string()),
                })
        })
    }

    /// Runs `journalctl ARGS`, from systemctl's own directory (the two
    /// ship together), with the same runner and time budget; `None` when
    /// there is no journalctl beside systemctl.
    pub fn journalctl(&self, args: &[&str], time: &Budget) -> Option<CommandOutput> {
        let program = self.program.as_ref().ok()?.with_file_name("journalctl");
        if !program.is_file() {
            return None;
        }
        let timeout = time.now("journalctl").ok()?;
        self.runner.run(&program, args, timeout).ok()
    }

    /// Runs a command that changes something; it succeeds when it exits 0.
    pub fn change(&self, args: &[&str], time: &Budget) -> Result<(), ProviderError> {
        let output = self.output(args, time)?;
        if output.success() {
            Ok(())
        } else {
            Err(command_failed(&args.join(" "), &output))
        }
    }
}
