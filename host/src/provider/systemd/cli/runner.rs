//! Running a command with a clean environment, a timeout and bounded output.
//!
//! The command runs in a process group of its own. At its timeout the whole
//! group is killed, not only the command: a process it forked cannot keep
//! running. Its output is read by threads that report over a channel; the
//! call waits for them only until the timeout, and never joins a reader
//! that may be blocked on a pipe some escaped process still holds open.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

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
    /// The command, or a process holding its output open, was still running
    /// at the timeout.
    #[error("stopped {grace}s after {0}; the command and its process group were killed", grace = crate::interrupt::GRACE.as_secs())]
    Interrupted(&'static str),
    #[error("timed out after {}s; the command and its process group were killed", .0.as_secs_f64())]
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

/// Which pipe a reader read.
#[derive(Debug, Clone, Copy)]
enum Stream {
    Out,
    Err,
}

impl CommandRunner for ProcessRunner {
    fn run(
        &self,
        program: &Path,
        args: &[&str],
        timeout: Duration,
    ) -> Result<CommandOutput, RunError> {
        let deadline = Instant::now() + timeout;
        let mut child = spawn(program, args)?;
        let group = child.id();
        let (sender, output) = mpsc::channel();
        if let Some(pipe) = child.stdout.take() {
            capture(pipe, Stream::Out, sender.clone());
        }
        if let Some(pipe) = child.stderr.take() {
            capture(pipe, Stream::Err, sender.clone());
        }
        drop(sender);
        crate::interrupt::set_child_group(group);
        let waited = wait_within(&mut child, deadline);
        crate::interrupt::set_child_group(0);
        let status = match waited {
            Ok(Waited::Exited(status)) => status,
            Ok(Waited::TimedOut) => {
                // Not reaped yet, so the group id cannot have been reused.
                kill_group(group);
                let _ = child.wait();
                return Err(RunError::TimedOut(timeout));
            }
            Ok(Waited::Interrupted(signal)) => {
                kill_group(group);
                let _ = child.wait();
                return Err(RunError::Interrupted(signal));
            }
            Err(source) => {
                kill_group(group);
                let _ = child.wait();
                return Err(RunError::Spawn {
                    program: program.display().to_string(),
                    source,
                });
            }
        };
        let (stdout, stderr) = collect(&output, deadline, group, timeout)?;
        Ok(CommandOutput {
            code: status.code(),
            stdout,
            stderr,
        })
    }
}

/// Starts `program` with a clean environment (a fixed `PATH`, the C
/// locale), no input, its outputs piped, in its own process group (id = its
/// pid), so that a timeout kills whatever it started too.
fn spawn(program: &Path, args: &[&str]) -> Result<std::process::Child, RunError> {
    Command::new(program)
        .args(args)
        .env_clear()
        .env("PATH", CLEAN_PATH)
        .env("LANG", "C")
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|source| RunError::Spawn {
            program: program.display().to_string(),
            source,
        })
}

/// The command's stdout and stderr once it exited. Its output ends when
/// every process that holds its pipes has closed them: waited for until the
/// deadline only.
fn collect(
    output: &mpsc::Receiver<(Stream, String)>,
    deadline: Instant,
    group: u32,
    timeout: Duration,
) -> Result<(String, String), RunError> {
    let (mut stdout, mut stderr) = (None, None);
    while stdout.is_none() || stderr.is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        match output.recv_timeout(left) {
            Ok((Stream::Out, text)) => stdout = Some(text),
            Ok((Stream::Err, text)) => stderr = Some(text),
            Err(RecvTimeoutError::Timeout) => {
                // A process left behind holds a pipe: it is still in the
                // group (which keeps the group id from being reused).
                kill_group(group);
                return Err(RunError::TimedOut(timeout));
            }
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    Ok((stdout.unwrap_or_default(), stderr.unwrap_or_default()))
}

/// How waiting for a command ended.
enum Waited {
    Exited(std::process::ExitStatus),
    TimedOut,
    /// The run was interrupted and the command's grace ran out.
    Interrupted(&'static str),
}

/// Waits for `child` until `deadline`, in short steps, so that a signal to
/// the host (see [`crate::interrupt`]) cuts the wait to its grace period.
fn wait_within(child: &mut std::process::Child, deadline: Instant) -> std::io::Result<Waited> {
    const STEP: Duration = Duration::from_millis(50);
    loop {
        let now = Instant::now();
        if now >= deadline {
            return Ok(Waited::TimedOut);
        }
        if let (Some(signal), Some(since)) =
            (crate::interrupt::received(), crate::interrupt::since())
        {
            if since >= crate::interrupt::GRACE {
                return Ok(Waited::Interrupted(crate::interrupt::name(signal)));
            }
        }
        if let Some(status) = child.wait_timeout(STEP.min(deadline - now))? {
            return Ok(Waited::Exited(status));
        }
    }
}

/// SIGKILL to every process of group `group`.
fn kill_group(group: u32) {
    // Never 0 (our own group) or 1 (every process we may signal).
    let Ok(group) = libc::pid_t::try_from(group) else {
        return;
    };
    if group > 1 {
        // SAFETY: kill takes plain integers and touches no memory.
        unsafe {
            libc::kill(-group, libc::SIGKILL);
        }
    }
}

/// Reads a pipe to its end on a thread of its own (so a full pipe cannot
/// stall the child), keeping at most [`MAX_CAPTURE`] bytes, and sends what
/// it read. Never joined: the caller stops listening at its deadline.
fn capture(
    mut pipe: impl Read + Send + 'static,
    stream: Stream,
    to: mpsc::Sender<(Stream, String)>,
) {
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
        // The receiver may have given up already.
        let _ = to.send((stream, String::from_utf8_lossy(&kept).into_owned()));
    });
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

    /// Whether process `pid` is gone (or a zombie nobody has reaped yet: it
    /// runs no more), waiting up to 2 s for it to die.
    fn gone(pid: u32) -> bool {
        let started = std::time::Instant::now();
        loop {
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    let after = s.rsplit_once(") ")?.1.to_owned();
                    after.split(' ').next().map(str::to_owned)
                });
            match state.as_deref() {
                None | Some("Z") | Some("X") => return true,
                Some(_) if started.elapsed() > Duration::from_secs(2) => return false,
                Some(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    /// Runs `sh -c SCRIPT` with `$1` a file the script writes the pid of
    /// the grandchild it forks into, holding stdout and stderr open.
    fn grandchild(script: &str) -> (Result<CommandOutput, RunError>, Duration, u32) {
        let scratch = tempfile::tempdir().unwrap();
        let pid_file = scratch.path().join("pid");
        let started = std::time::Instant::now();
        let result = ProcessRunner.run(
            Path::new("/bin/sh"),
            &["-c", script, "sh", pid_file.to_str().unwrap()],
            Duration::from_millis(300),
        );
        let elapsed = started.elapsed();
        let pid = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        (result, elapsed, pid)
    }

    #[test]
    fn a_hung_command_and_its_grandchild_are_killed_at_the_timeout() {
        let (result, elapsed, pid) = grandchild("sleep 30 & echo $! > \"$1\"; sleep 31");
        assert!(matches!(result, Err(RunError::TimedOut(_))), "{result:?}");
        assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
        assert!(gone(pid), "the grandchild {pid} is still running");
    }

    #[test]
    fn a_grandchild_holding_the_output_open_does_not_hold_the_call() {
        // The command exits at once; what it forked keeps its pipes open.
        let (result, elapsed, pid) = grandchild("sleep 30 & echo $! > \"$1\"; echo active");
        assert!(matches!(result, Err(RunError::TimedOut(_))), "{result:?}");
        assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
        assert!(gone(pid), "the grandchild {pid} is still running");
        // One that lets go of the pipes in time does not matter.
        let out = ProcessRunner
            .run(
                Path::new("/bin/sh"),
                &["-c", "sleep 30 >/dev/null 2>&1 & kill $!; echo done"],
                Duration::from_secs(10),
            )
            .unwrap();
        assert_eq!(out.stdout, "done\n");
    }

    #[test]
    fn find_in_path_skips_relative_and_missing_directories() {
        let found = find_in_path("sh", std::ffi::OsStr::new("relative:/nonexistent:/bin")).unwrap();
        assert_eq!(found, Path::new("/bin/sh"));
        assert_eq!(find_in_path("sh", std::ffi::OsStr::new("")), None);
    }
}
