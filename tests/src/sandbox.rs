//! A real systemd, booted in a throwaway sandbox, for tests that must see
//! what systemd itself does.
//!
//! The work is done by `tests/sandbox/sdbox.sh`: systemd runs as PID 1 of new
//! PID, mount, cgroup (and other) namespaces, on an overlay of the real `/`
//! whose upper layer is a tmpfs. Nothing it writes reaches the machine. This
//! module wraps the script: it names sandboxes, limits how many run at once,
//! stops them on drop (also when a test panics) and sweeps away the ones a
//! crashed earlier run left behind.
//!
//! ```no_run
//! use policy_host_e2e::sandbox::Sandbox;
//! # let target = std::path::Path::new("/tmp");
//! // `target` (e.g. the cargo target dir) is visible read-only inside, at the same path.
//! let sandbox = Sandbox::boot_for_test(target);
//! sandbox.install_unit("demo", &policy_host_e2e::sandbox::sleep_service("demo"));
//! assert_eq!(sandbox.systemctl(&["start", "demo"]).status.code(), Some(0));
//! assert_eq!(sandbox.is_active("demo"), "active");
//! // Dropping `sandbox` powers systemd off and waits until its last process is gone.
//! ```

use std::fmt;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Condvar, Mutex, Once};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// At most this many sandboxes are alive at once in one process: the tests
/// run in parallel threads on a small machine.
const MAX_LIVE: usize = 2;

/// The directory in the share that holds the sandboxes' scratch directories.
const SCRATCH: &str = "e2e-sandbox";

/// The script's exit status when sandboxes are impossible on this machine.
const EXIT_UNAVAILABLE: i32 = 3;

/// Sandboxes cannot run here at all (not root, no namespaces, no cgroup2, no
/// systemd), as opposed to a sandbox that failed to boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable(pub String);

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a systemd sandbox is not available here: {}", self.0)
    }
}

impl std::error::Error for Unavailable {}

/// A booted systemd. Dropping it stops it.
#[derive(Debug)]
pub struct Sandbox {
    dir: PathBuf,
    scratch: PathBuf,
    pid: u32,
    boot_time: Duration,
    stopped: bool,
    _slot: Slot,
}

impl Sandbox {
    /// Boots systemd to `basic.target` with `share` bind-mounted read-only at
    /// the same path inside. Blocks while two sandboxes of this process are
    /// alive (`MAX_LIVE`).
    /// Fails with an [`Unavailable`] error (find it with
    /// `err.downcast_ref::<Unavailable>()`) when sandboxes are impossible here.
    pub fn boot(share: &Path) -> anyhow::Result<Sandbox> {
        Self::boot_with(share, None, "basic.target")
    }

    /// [`boot`](Self::boot) on `disk`, to `target` (`multi-user.target` to
    /// start what is enabled there, as a machine's boot does): what the
    /// sandbox writes stays on the disk after [`stop`](Self::stop), and the
    /// next boot on it is a reboot of the same machine.
    pub fn boot_on(share: &Path, disk: &Disk, target: &str) -> anyhow::Result<Sandbox> {
        Self::boot_with(share, Some(disk), target)
    }

    fn boot_with(share: &Path, disk: Option<&Disk>, target: &str) -> anyhow::Result<Sandbox> {
        sweep_stale(share);
        let slot = Slot::acquire();
        let name = unique_name();
        let dir = sandboxes_dir().join(&name);
        let scratch = share.join(SCRATCH).join(&name);
        let started = Instant::now();
        let mut start = script();
        start
            .arg("start")
            .arg(&dir)
            .arg(share)
            .env("SDBOX_ARGS", format!("systemd.unit={target}"))
            .env("SDBOX_OWNER", std::process::id().to_string())
            .stdin(Stdio::null());
        if let Some(disk) = disk {
            start.env("SDBOX_DISK", &disk.path);
        }
        let output = start.output().context("running sdbox.sh start");
        let output = match output {
            Ok(output) if output.status.success() => output,
            failed => {
                let output = failed?;
                let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
                if output.status.code() == Some(EXIT_UNAVAILABLE) {
                    let why = stderr.trim_start_matches("sdbox: unavailable: ");
                    return Err(Unavailable(why.to_string()).into());
                }
                bail!(
                    "booting a systemd sandbox in {} failed ({}):\n{stderr}",
                    dir.display(),
                    output.status
                );
            }
        };
        let stdout = String::from_utf8_lossy(&output.stdout);
        let pid = stdout
            .split_whitespace()
            .next()
            .and_then(|p| p.parse().ok());
        let sandbox = Sandbox {
            dir,
            scratch,
            pid: pid.unwrap_or(0),
            boot_time: started.elapsed(),
            stopped: false,
            _slot: slot,
        };
        // An error from here on drops the sandbox, which stops it.
        if pid.is_none() {
            bail!("sdbox.sh start printed {stdout:?}, not \"PID STATE\"");
        }
        // Created only now, so a scratch directory whose sandbox is gone is stale.
        fs::create_dir_all(&sandbox.scratch)
            .with_context(|| format!("creating {}", sandbox.scratch.display()))?;
        Ok(sandbox)
    }

    /// [`boot_on`](Self::boot_on), for tests (see
    /// [`boot_for_test`](Self::boot_for_test)).
    pub fn boot_on_for_test(share: &Path, disk: &Disk, target: &str) -> Sandbox {
        expect_booted(Sandbox::boot_on(share, disk, target))
    }

    /// [`boot`](Self::boot), for tests, which say `requires = "root,
    /// systemd"` (ignored with the reason on a machine without, failed
    /// under CI): a test that needs a sandbox either runs or fails, and is
    /// never reported as passed
    /// without having run. Panics, naming what is missing, when sandboxes
    /// are impossible here, and when a possible boot fails.
    pub fn boot_for_test(share: &Path) -> Sandbox {
        expect_booted(Sandbox::boot(share))
    }

    /// The PID of the sandbox's systemd, as this side sees it.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// How long [`boot`](Self::boot) took, from starting the script until
    /// `systemctl is-system-running --wait` answered.
    pub fn boot_time(&self) -> Duration {
        self.boot_time
    }

    /// Runs a command inside (all the sandbox's namespaces, clean
    /// environment with a standard `PATH`) and returns what it did. Panics
    /// only when the command cannot be run at all.
    pub fn exec(&self, args: &[&str]) -> Output {
        self.exec_with_stdin(args, &[])
    }

    /// [`exec`](Self::exec) with `stdin` fed to the command.
    pub fn exec_with_stdin(&self, args: &[&str], stdin: &[u8]) -> Output {
        let mut child = script()
            .arg("exec")
            .arg(&self.dir)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run sdbox.sh exec {args:?}: {e}"));
        let mut pipe = child.stdin.take().expect("stdin is piped");
        let input = stdin.to_vec();
        // A writer thread: a command that does not read its input must not
        // block us while it fills its output pipes.
        let writer = std::thread::spawn(move || pipe.write_all(&input));
        let output = child
            .wait_with_output()
            .unwrap_or_else(|e| panic!("waiting for {args:?} in the sandbox: {e}"));
        let _ = writer.join();
        output
    }

    /// systemd's own rating of `unit`'s sandboxing, from `systemd-analyze
    /// security` (0 is best, 10 worst; below 2 is "SAFE"), with the whole
    /// table for failure messages. Panics when the table has no rating.
    pub fn exposure(&self, unit: &str) -> (f64, String) {
        let output = self.exec(&["systemd-analyze", "security", "--no-pager", unit]);
        let table = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let marker = format!("Overall exposure level for {unit}: ");
        let level = table
            .lines()
            .find_map(|l| l.split(marker.as_str()).nth(1))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|level| level.parse().ok())
            .unwrap_or_else(|| panic!("no exposure level for {unit} in:\n{table}"));
        (level, table)
    }

    /// `systemctl ARGS` inside.
    pub fn systemctl(&self, args: &[&str]) -> Output {
        let mut full = vec!["systemctl"];
        full.extend_from_slice(args);
        self.exec(&full)
    }

    /// `systemctl ARGS` inside, panicking with its output unless it exits 0.
    pub fn systemctl_ok(&self, args: &[&str]) {
        let output = self.systemctl(args);
        assert!(
            output.status.success(),
            "systemctl {} in the sandbox failed ({}): {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }

    /// Writes `contents` to `path` inside the sandbox (creating its parent).
    pub fn write_file(&self, path: &str, contents: &str) {
        let output = self.exec_with_stdin(
            &[
                "sh",
                "-c",
                r#"mkdir -p "$(dirname "$1")" && cat > "$1""#,
                "sh",
                path,
            ],
            contents.as_bytes(),
        );
        assert!(
            output.status.success(),
            "cannot write {path} in the sandbox: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }

    /// Installs `/etc/systemd/system/UNIT` (`UNIT` is `name`, plus
    /// `.service` when it has no suffix) and runs `systemctl daemon-reload`.
    pub fn install_unit(&self, name: &str, unit_file: &str) {
        self.write_file(
            &format!(
                "/etc/systemd/system/{}",
                crate::fake_systemctl::unit_name(name)
            ),
            unit_file,
        );
        self.systemctl_ok(&["daemon-reload"]);
    }

    /// Starts the system bus (dbus-daemon, `dbus.service`) and waits until
    /// systemd is on it, so that the host reads status over D-Bus. At boot
    /// only its socket listens; the first client would start it anyway.
    pub fn start_system_bus(&self) {
        self.systemctl_ok(&["start", "dbus.socket", "dbus.service"]);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let probe = self.exec(&["busctl", "--system", "status", "org.freedesktop.systemd1"]);
            if probe.status.success() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "systemd is not on the sandbox's system bus after 20 s: {}",
                String::from_utf8_lossy(&probe.stderr).trim()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The unit's `systemctl is-active` word: `active`, `inactive`, `failed`...
    pub fn is_active(&self, unit: &str) -> String {
        self.word(&["is-active", "--", unit])
    }

    /// The unit's `systemctl is-enabled` word: `enabled`, `disabled`,
    /// `masked`, ... (empty for a missing unit, which systemd 252 reports on
    /// stderr only).
    pub fn is_enabled(&self, unit: &str) -> String {
        self.word(&["is-enabled", "--", unit])
    }

    /// The unit's main PID (0 when it is not running).
    pub fn main_pid(&self, unit: &str) -> u32 {
        let word = self.word(&["show", "--property=MainPID", "--value", "--", unit]);
        word.parse()
            .unwrap_or_else(|_| panic!("MainPID of {unit} is {word:?}, not a number"))
    }

    fn word(&self, args: &[&str]) -> String {
        let output = self.systemctl(args);
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    }

    /// Writes `contents` to a new file in a per-sandbox directory inside the
    /// share and returns its path, which is the same inside the sandbox (the
    /// share is read-only from inside, so files for it are written from here).
    /// The directory goes away with the sandbox.
    pub fn share_file(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.scratch.join(name);
        fs::write(&path, contents).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        path
    }

    /// Powers systemd off and waits until no process of the sandbox is left
    /// (killing them after 15 s); returns how long that took. Dropping the
    /// sandbox does the same, reporting failures on stderr only.
    pub fn stop(mut self) -> anyhow::Result<Duration> {
        self.stop_quietly()
    }

    fn stop_quietly(&mut self) -> anyhow::Result<Duration> {
        if self.stopped {
            return Ok(Duration::ZERO);
        }
        self.stopped = true;
        let _ = fs::remove_dir_all(&self.scratch);
        let started = Instant::now();
        let output = script()
            .arg("stop")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .output()
            .context("running sdbox.sh stop")?;
        if !output.status.success() {
            bail!(
                "stopping the sandbox in {} failed ({}): {}",
                self.dir.display(),
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        Ok(started.elapsed())
    }
}

/// The sandbox, or a panic naming what is missing or why the boot failed.
fn expect_booted(booted: anyhow::Result<Sandbox>) -> Sandbox {
    match booted {
        Ok(sandbox) => sandbox,
        Err(err) => match err.downcast_ref::<Unavailable>() {
            Some(why) => panic!(
                "this test needs a real systemd: {why} (run the suite as root on Linux with \
                 systemd installed, as the README's test command does)"
            ),
            None => panic!("{err:#}"),
        },
    }
}

/// A sandbox's disk: a tmpfs of its own on this side that holds the
/// overlay's upper layer, so that what one boot wrote is there at the next
/// ([`Sandbox::boot_on`]). Unmounted and removed on drop (after the sandboxes
/// booted on it: drop them first).
#[derive(Debug)]
pub struct Disk {
    path: PathBuf,
}

impl Disk {
    /// Mounts a fresh tmpfs under the machine's temporary directory.
    pub fn new() -> anyhow::Result<Disk> {
        sweep_stale_disks();
        let path = disks_dir().join(unique_name());
        fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "mode=0700,size=2g", "sdbox-disk"])
            .arg(&path)
            .output()
            .context("running mount")?;
        if !mounted.status.success() {
            let _ = fs::remove_dir(&path);
            bail!(
                "mounting a tmpfs at {} failed: {}",
                path.display(),
                String::from_utf8_lossy(&mounted.stderr).trim()
            );
        }
        Ok(Disk { path })
    }
}

impl Drop for Disk {
    fn drop(&mut self) {
        unmount_disk(&self.path);
    }
}

fn unmount_disk(path: &Path) {
    let unmounted = Command::new("umount").arg(path).output();
    match unmounted {
        Ok(out) if out.status.success() => {
            let _ = fs::remove_dir(path);
        }
        Ok(out) => eprintln!(
            "*** LEAKED SANDBOX DISK {}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => eprintln!("*** LEAKED SANDBOX DISK {}: {e}", path.display()),
    }
}

/// Where the disks are mounted on this side (apart from the sandboxes'
/// directories, which `sdbox.sh sweep` owns).
fn disks_dir() -> PathBuf {
    std::env::temp_dir().join("policy-host-sandbox-disks")
}

/// Once per process: unmount the disks of processes that are gone (their
/// names are `ph-PID-N`, as [`unique_name`] makes them).
fn sweep_stale_disks() {
    static SWEPT: Once = Once::new();
    SWEPT.call_once(|| {
        for entry in fs::read_dir(disks_dir()).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let owner = name.split('-').nth(1).and_then(|p| p.parse::<u32>().ok());
            let alive = owner.is_some_and(|pid| Path::new(&format!("/proc/{pid}")).exists());
            if !alive {
                unmount_disk(&entry.path());
            }
        }
    });
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        if let Err(err) = self.stop_quietly() {
            eprintln!("*** LEAKED SANDBOX (systemd PID {}): {err:#}", self.pid);
        }
    }
}

/// A unit file for a service that just runs (`sleep infinity`) and can be
/// enabled (`WantedBy=multi-user.target`).
pub fn sleep_service(description: &str) -> String {
    format!(
        "[Unit]\nDescription={description}\n\n\
         [Service]\nExecStart=/bin/sleep infinity\n\n\
         [Install]\nWantedBy=multi-user.target\n"
    )
}

/// `bash tests/sandbox/sdbox.sh`.
fn script() -> Command {
    let mut cmd = Command::new("bash");
    cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("sandbox/sdbox.sh"));
    cmd
}

/// Where the sandboxes' directories live (on this side they hold only the
/// systemd PID, its console log and empty mount points).
fn sandboxes_dir() -> PathBuf {
    std::env::temp_dir().join("policy-host-sandboxes")
}

/// A base name no live sandbox has: it names the sandbox's cgroup. A stale
/// sandbox of a dead process with our PID was swept before the first boot.
fn unique_name() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "ph-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Once per process: stop the sandboxes whose owning process died without
/// stopping them (a crash, a SIGKILL, a Ctrl-C), then remove the scratch
/// directories in `share` of sandboxes that no longer exist.
fn sweep_stale(share: &Path) {
    static SWEPT: Once = Once::new();
    SWEPT.call_once(|| {
        match script().arg("sweep").arg(sandboxes_dir()).output() {
            Ok(output) if output.status.success() => {
                let stderr = String::from_utf8_lossy(&output.stderr);
                if !stderr.trim().is_empty() {
                    eprintln!("{}", stderr.trim());
                }
            }
            Ok(output) => eprintln!(
                "sweeping stale sandboxes failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            ),
            Err(e) => eprintln!("sweeping stale sandboxes failed: {e}"),
        }
        for entry in fs::read_dir(share.join(SCRATCH))
            .into_iter()
            .flatten()
            .flatten()
        {
            if !sandboxes_dir().join(entry.file_name()).exists() {
                let _ = fs::remove_dir_all(entry.path());
            }
        }
    });
}

/// One of the [`MAX_LIVE`] places for a live sandbox, given back on drop
/// (after the sandbox stopped: fields drop after `Drop::drop`).
#[derive(Debug)]
struct Slot;

static LIVE: Mutex<usize> = Mutex::new(0);
static FREED: Condvar = Condvar::new();

impl Slot {
    fn acquire() -> Slot {
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        while *live >= MAX_LIVE {
            live = FREED.wait(live).unwrap_or_else(|e| e.into_inner());
        }
        *live += 1;
        Slot
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        *LIVE.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
        FREED.notify_one();
    }
}
