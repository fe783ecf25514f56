//! SIGTERM, SIGINT and SIGHUP during a run: what systemd sends at shutdown,
//! on `systemctl stop` and when the unit's timeout runs out; what Ctrl-C
//! sends. The first one asks the run to end in order: no new provider call
//! starts, the one under way gets [`GRACE`] to finish (then its process
//! group is killed), the policy is stopped if it does not end by itself,
//! and the report and metrics say the run was interrupted, by which signal,
//! and what was done and not reached. A second signal ends the process at
//! once (the command under way killed with it).
//!
//! The signals are taken by a thread of their own (`signal-hook`), so
//! nothing here runs in a signal handler; the rest of the host asks
//! [`received`].

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long the provider call under way may still take after the signal.
pub const GRACE: Duration = Duration::from_secs(5);
/// How long a policy may keep running after the signal before it is stopped.
pub const POLICY_GRACE: Duration = Duration::from_secs(2);

static SIGNAL: AtomicI32 = AtomicI32::new(0);
static SINCE: OnceLock<Instant> = OnceLock::new();
/// The process group of the systemctl command under way, 0 when none.
static CHILD_GROUP: AtomicI32 = AtomicI32::new(0);

const HANDLED: [i32; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP];

/// Takes SIGTERM, SIGINT and SIGHUP from now on (for `host run`).
pub fn install() -> std::io::Result<()> {
    let mut signals = signal_hook::iterator::Signals::new(HANDLED)?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                if SIGNAL
                    .compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
                {
                    let _ = SINCE.set(Instant::now());
                    tracing::warn!(
                        "{} received: no new change is started; the one under way gets {}s, then the run reports and ends (a second signal ends it at once)",
                        name(signal),
                        GRACE.as_secs()
                    );
                } else {
                    let group = CHILD_GROUP.load(Ordering::SeqCst);
                    if group > 1 {
                        // SAFETY: kill(2) with a negative id signals a process
                        // group; no memory is involved.
                        unsafe { libc::kill(-group, libc::SIGKILL) };
                    }
                    tracing::error!("{} received again: stopping at once", name(signal));
                    std::process::exit(128 + signal);
                }
            }
        })?;
    Ok(())
}

/// The signal that interrupted the run, if one did.
pub fn received() -> Option<i32> {
    match SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        signal => Some(signal),
    }
}

/// How long since the signal, if one came.
pub fn since() -> Option<Duration> {
    received().and(SINCE.get().map(Instant::elapsed))
}

/// `SIGTERM`, `SIGINT`, `SIGHUP`.
pub fn name(signal: i32) -> &'static str {
    match signal {
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

/// Remembers the process group of the command under way (0: none), for a
/// second signal to kill.
pub fn set_child_group(group: u32) {
    CHILD_GROUP.store(i32::try_from(group).unwrap_or(0), Ordering::SeqCst);
}
