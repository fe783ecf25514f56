//! The bench's side inside the sandbox. The bench copies its own executable
//! into the shared directory and runs it there, through `Sandbox::exec`, in
//! two roles:
//!
//! - `bench __inner SPEC`: runs one command (after an untimed reset script)
//!   and times it with a monotonic clock from just before `spawn` to the
//!   moment `wait` returns, so the sandbox's `nsenter`/`setpriv`/`timeout`
//!   wrapper and this process's own start are outside the measurement. It
//!   prints an [`Outcome`] as JSON.
//! - `systemctl ...` (a symlink named `systemctl`, first on the measured
//!   host's `PATH`): records the wall-clock time it was started at in
//!   [`MARKER`] (first call only), then execs the real systemctl. That is how
//!   the bench measures "process start to first provider call" from outside
//!   the host.

use std::fs;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// Where the `systemctl` shim records when it was first started.
pub(super) const MARKER: &str = "/run/bench-first-call";

/// The directory, inside the sandbox, holding the `systemctl` shim.
pub(super) const SHIM_DIR: &str = "/run/bench-shim";

/// What to run and how.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct Spec {
    /// The command; `argv[0]` is looked up on `PATH`.
    pub argv: Vec<String>,
    /// A `sh -c` script run first, outside the timing (to reset state).
    pub reset: Option<String>,
    /// The `PATH` the command gets (else the sandbox's standard one).
    pub path: Option<String>,
    /// Remove [`MARKER`] before the run and report when the shim wrote it.
    pub first_call: bool,
    /// Sample the command's `VmHWM` from `/proc` while it runs.
    pub poll_hwm: bool,
}

/// What one timed run did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Outcome {
    /// Wall time from spawn to exit, in nanoseconds.
    pub ns: u64,
    /// The exit code (`None`: killed by a signal).
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// From spawn to the first start of the `systemctl` shim, in nanoseconds.
    pub first_call_ns: Option<u64>,
    /// The highest `VmHWM` (peak resident set) sampled, in KiB.
    pub vmhwm_kb: Option<u64>,
    /// Why the reset script failed, if it did.
    pub reset_error: Option<String>,
    /// CLOCK_MONOTONIC (µs, systemd's clock for `*TimestampMonotonic`)
    /// just before `spawn`: what the profile lines systemd's own unit
    /// timestamps up with.
    #[serde(default)]
    pub spawned_mono_us: u64,
}

/// `bench __inner SPEC`.
pub(super) fn inner(spec: &str) -> ExitCode {
    let spec: Spec = match serde_json::from_str(spec) {
        Ok(spec) => spec,
        Err(e) => {
            eprintln!("bench agent: bad spec: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&spec) {
        Ok(outcome) => {
            let json = serde_json::to_string(&outcome).expect("an outcome serializes");
            let mut stdout = std::io::stdout().lock();
            let _ = writeln!(stdout, "{json}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bench agent: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(spec: &Spec) -> Result<Outcome, String> {
    let mut reset_error = None;
    if let Some(script) = &spec.reset {
        match Command::new("sh").arg("-c").arg(script).output() {
            Ok(out) if out.status.success() => {}
            Ok(out) => {
                reset_error = Some(format!(
                    "{}: {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ))
            }
            Err(e) => reset_error = Some(e.to_string()),
        }
    }
    if spec.first_call {
        let _ = fs::remove_file(MARKER);
    }
    let (program, args) = spec.argv.split_first().ok_or("empty argv")?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(path) = &spec.path {
        cmd.env("PATH", path);
    }

    let spawned_at = SystemTime::now();
    let spawned_mono_us = monotonic_us();
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    let stdout = child.stdout.take().map(read_to_end);
    let stderr = child.stderr.take().map(read_to_end);
    let sampler = spec.poll_hwm.then(|| HwmSampler::start(child.id()));
    let status = child
        .wait()
        .map_err(|e| format!("waiting for {program}: {e}"))?;
    let elapsed = started.elapsed();
    let vmhwm_kb = sampler.map(HwmSampler::finish);

    let first_call_ns = if spec.first_call {
        fs::read_to_string(MARKER)
            .ok()
            .and_then(|t| t.trim().parse::<u128>().ok())
            .map(|at| at.saturating_sub(epoch_ns(spawned_at)) as u64)
    } else {
        None
    };
    let text = |h: Option<thread::JoinHandle<Vec<u8>>>| {
        h.and_then(|h| h.join().ok())
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    };
    Ok(Outcome {
        ns: elapsed.as_nanos() as u64,
        code: status.code(),
        stdout: text(stdout),
        stderr: text(stderr),
        first_call_ns,
        vmhwm_kb,
        reset_error,
        spawned_mono_us,
    })
}

fn read_to_end(mut pipe: impl Read + Send + 'static) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        bytes
    })
}

/// CLOCK_MONOTONIC in microseconds: `Instant` reads that clock but does not
/// show its value, which systemd's `*TimestampMonotonic` properties are
/// compared with.
pub(super) fn monotonic_us() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec to the pointer it is given,
    // which points to `now`, alive and writable for the whole call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_MONOTONIC) failed");
    now.tv_sec as u64 * 1_000_000 + now.tv_nsec as u64 / 1_000
}

fn epoch_ns(t: SystemTime) -> u128 {
    t.duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos()
}

/// Reads `/proc/PID/status` every millisecond and keeps the highest `VmHWM`.
struct HwmSampler {
    stop: Arc<AtomicBool>,
    handle: thread::JoinHandle<u64>,
}

impl HwmSampler {
    fn start(pid: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let handle = thread::spawn(move || {
            let path = format!("/proc/{pid}/status");
            let mut peak = 0;
            while !flag.load(Ordering::Relaxed) {
                if let Some(kb) = fs::read_to_string(&path).ok().and_then(|s| vm_hwm(&s)) {
                    peak = peak.max(kb);
                }
                thread::sleep(Duration::from_millis(1));
            }
            peak
        });
        Self { stop, handle }
    }

    fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or(0)
    }
}

fn vm_hwm(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// Invoked as `systemctl`: note the time (first call only), then become the
/// real systemctl, found on `PATH` (the host gives its commands a clean
/// `PATH` without the shim's directory).
pub(super) fn shim() -> ExitCode {
    let now = epoch_ns(SystemTime::now());
    if let Ok(mut file) = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(MARKER)
    {
        let _ = writeln!(file, "{now}");
    }
    let me = std::env::current_exe().and_then(fs::canonicalize).ok();
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    let real = std::env::split_paths(&path)
        .map(|dir| dir.join("systemctl"))
        .find(|c| c.is_file() && fs::canonicalize(c).ok() != me);
    let Some(real) = real else {
        eprintln!("bench systemctl shim: no real systemctl on PATH");
        return ExitCode::from(127);
    };
    let err = Command::new(&real).args(std::env::args_os().skip(1)).exec();
    eprintln!("bench systemctl shim: exec {}: {err}", real.display());
    ExitCode::from(126)
}

/// Whether this process was started as the shim.
pub(super) fn invoked_as_shim() -> bool {
    std::env::args_os()
        .next()
        .map(PathBuf::from)
        .and_then(|p| p.file_name().map(|n| n == "systemctl"))
        .unwrap_or(false)
}

/// The shim's path inside the sandbox.
pub(super) fn shim_path() -> PathBuf {
    Path::new(SHIM_DIR).join("systemctl")
}

/// `bench __calls [--threads] noop|converge UNIT...`: the systemctl calls of
/// a no-op or converging run, spawned one after the other from native code
/// the way the host's provider spawns them (clean environment with `PATH`,
/// `LANG=C` and `LC_ALL=C`; stdin from /dev/null; stdout and stderr read
/// through pipes), without the WebAssembly runtime: a baseline that separates
/// the host's own overhead from the cost of spawning processes. Plain, both
/// pipes are read on this thread (`Command::output`); with `--threads`, each
/// pipe is read by a thread of its own, spawned per command, as the host does.
pub(super) fn calls(args: &[String]) -> ExitCode {
    let (threads, args) = match args.split_first() {
        Some((flag, rest)) if flag == "--threads" => (true, rest),
        _ => (false, args),
    };
    let Some((mode, units)) = args.split_first() else {
        eprintln!("usage: bench __calls [--threads] noop|converge UNIT...");
        return ExitCode::from(2);
    };
    let per_unit: &[&str] = match mode.as_str() {
        "noop" => &["is-active", "is-enabled"],
        "converge" => &[
            "is-active",
            "is-enabled",
            "start",
            "enable",
            "is-active",
            "is-enabled",
        ],
        other => {
            eprintln!("bench __calls: unknown mode {other:?}");
            return ExitCode::from(2);
        }
    };
    let path = "/usr/sbin:/usr/bin:/sbin:/bin";
    let Some(systemctl) = std::env::split_paths(path)
        .map(|d| d.join("systemctl"))
        .find(|c| c.is_file())
    else {
        eprintln!("bench __calls: no systemctl");
        return ExitCode::from(2);
    };
    let spawn = |args: &[&str]| -> std::io::Result<()> {
        let mut cmd = Command::new(&systemctl);
        cmd.args(args)
            .env_clear()
            .env("PATH", path)
            .env("LANG", "C")
            .env("LC_ALL", "C")
            .stdin(Stdio::null());
        if !threads {
            return cmd.output().map(drop);
        }
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
        let out = child.stdout.take().map(read_to_end);
        let err = child.stderr.take().map(read_to_end);
        child.wait()?;
        for reader in [out, err].into_iter().flatten() {
            let _ = reader.join();
        }
        Ok(())
    };
    if let Err(e) = spawn(&["daemon-reload"]) {
        eprintln!("bench __calls: {e}");
        return ExitCode::from(1);
    }
    for unit in units {
        for verb in per_unit {
            if let Err(e) = spawn(&[verb, "--system", "--", unit.as_str()]) {
                eprintln!("bench __calls: {e}");
                return ExitCode::from(1);
            }
        }
    }
    ExitCode::SUCCESS
}
