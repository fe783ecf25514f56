//! Running a command with a clean environment, a timeout and bounded output.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

use thiserror::Error;
use wait_timeout::ChildExt;

/// The only environment a provider command sees: a fixed PATH and the C
/// locale, so output is parseable and nothing of the caller's leaks.
pub const CLEAN_PATH: &str = "/usr/sbin:/usr/bin:/sbin:/bin";

/// Output kept per stream; systemctl's answers are a line or two.
const MAX_CAPTURE: usize = 64 * 1024;

/// What a finished command produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandOutput {
    /// The exit code; `None` when the command was killed by a signal.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl CommandOutput {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

/// Why a command produced no output.
#[derive(Debug, Error)]
pub enum RunError {
    #[error("could not run {program}: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("timed out after {}s; the command was killed", .0.as_secs_f64())]
    TimedOut(Duration),
}

/// Runs external commands. The systemd provider uses [`ProcessRunner`]; unit
/// tests substitute a scripted runner.
pub trait CommandRunner: Send {
    fn run(
        &self,
        program: &Path,
        args: &[&str],
        timeout: Duration,
    ) -> Result<CommandOutput, RunError>;
}

/// Runs real processes.
#[derive(Debug, Default, Clone, Copy)]
pub struct ProcessRunner;

impl CommandRunner for ProcessRunner {
    fn run(
        &self,
        program: &Path,
        args: &[&str],
        timeout: Duration,
    ) -> Result<CommandOutput, RunError> {
        let mut child = Command::new(program)
            .args(args)
            .env_clear()
            .env("PATH", CLEAN_PATH)
            .env("LANG", "C")
            .env("LC_ALL", "C")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| RunError::Spawn {
                program: program.display().to_string(),
                source,
            })?;
        let stdout = child.stdout.take().map(capture);
        let stderr = child.stderr.take().map(capture);
        let status = match child.wait_timeout(timeout) {
            Ok(Some(status)) => status,
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(RunError::TimedOut(timeout));
            }
            Err(source) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(RunError::Spawn {
                    program: program.display().to_string(),
                    source,
                });
            }
        };
        let join = |h: Option<thread::JoinHandle<String>>| {
            h.and_then(|h| h.join().ok()).unwrap_or_default()
        };
        Ok(CommandOutput {
            code: status.code(),
            stdout: join(stdout),
            stderr: join(stderr),
        })
    }
}

/// Reads a pipe to its end on a thread (so a full pipe cannot stall the
/// child), keeping at most [`MAX_CAPTURE`] bytes.
fn capture(mut pipe: impl Read + Send + 'static) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut kept = Vec::new();
        let mut chunk = [0u8; 8192];
        loop {
            match pipe.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let room = MAX_CAPTURE.saturating_sub(kept.len());
                    kept.extend_from_slice(&chunk[..n.min(room)]);
                }
            }
        }
        String::from_utf8_lossy(&kept).into_owned()
    })
}

/// Finds `program` in the directories of `path` (a `PATH` value), as the
/// design's provider selection does (docs/service-type.md); returns the first
/// executable file.
pub fn find_in_path(program: &str, path: &std::ffi::OsStr) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|candidate| {
            candidate
                .metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_is_cleared_except_path_and_locale() {
        std::env::set_var("POLICY_HOST_TEST_SECRET", "leak");
        let out = ProcessRunner
            .run(Path::new("/usr/bin/env"), &[], Duration::from_secs(10))
            .unwrap();
        let mut keys: Vec<&str> = out
            .stdout
            .lines()
            .filter_map(|l| l.split('=').next())
            .collect();
        keys.sort();
        assert_eq!(keys, ["LANG", "LC_ALL", "PATH"], "{}", out.stdout);
        assert!(out.stdout.contains(&format!("PATH={CLEAN_PATH}")));
    }

    #[test]
    fn slow_command_is_killed_at_the_timeout() {
        let err = ProcessRunner
            .run(Path::new("/bin/sleep"), &["5"], Duration::from_millis(200))
            .unwrap_err();
        assert!(matches!(err, RunError::TimedOut(_)), "{err}");
    }

    #[test]
    fn exit_code_and_both_streams_are_captured() {
        let out = ProcessRunner
            .run(
                Path::new("/bin/sh"),
                &["-c", "echo out; echo err >&2; exit 3"],
                Duration::from_secs(10),
            )
            .unwrap();
        assert_eq!(
            out,
            CommandOutput {
                code: Some(3),
                stdout: "out\n".into(),
                stderr: "err\n".into()
            }
        );
    }

    #[test]
    fn find_in_path_skips_relative_and_missing_directories() {
        let found = find_in_path("sh", std::ffi::OsStr::new("relative:/nonexistent:/bin")).unwrap();
        assert_eq!(found, Path::new("/bin/sh"));
        assert_eq!(find_in_path("sh", std::ffi::OsStr::new("")), None);
    }
}
