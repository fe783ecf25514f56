//! Telling systemd how the watch is doing (`Type=notify`): `READY=1` after
//! the first run, `STATUS=` with what is followed and the last repair,
//! `WATCHDOG=1` while the loop turns, `STOPPING=1` at the end. Outside a
//! unit (no `NOTIFY_SOCKET`) each is nothing.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sd_notify::NotifyState;

/// How often the watchdog wants a ping, when the unit sets `WatchdogSec=`:
/// half of it, as sd_watchdog_enabled(3) advises.
pub(crate) fn watchdog_interval() -> Option<Duration> {
    let mut usec = 0;
    sd_notify::watchdog_enabled(false, &mut usec).then(|| Duration::from_micros(usec / 2))
}

fn send(states: &[NotifyState<'_>]) {
    if let Err(e) = sd_notify::notify(false, states) {
        tracing::debug!("telling systemd failed: {e}");
    }
}

pub(crate) fn ready(status: &str) {
    send(&[NotifyState::Ready, NotifyState::Status(status)]);
}

pub(crate) fn status(status: &str) {
    send(&[NotifyState::Status(status)]);
}

/// The watchdog's pings, from a thread of their own, for as long as the
/// loop says it is alive: a run may take as long as the host's bounds
/// allow, and pings stop when the loop overstays what it promised.
pub(crate) struct Watchdog {
    start: Instant,
    /// Milliseconds since `start` until which the loop is alive.
    alive_until: Arc<AtomicU64>,
}

impl Watchdog {
    /// Starts pinging every half `WatchdogSec=`; `None` without a watchdog.
    pub(crate) fn start() -> Option<Self> {
        let every = watchdog_interval()?;
        let start = Instant::now();
        let alive_until = Arc::new(AtomicU64::new(0));
        let until = Arc::clone(&alive_until);
        let spawned = std::thread::Builder::new()
            .name("watchdog".into())
            .spawn(move || loop {
                let now = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
                if now <= until.load(Ordering::Relaxed) {
                    send(&[NotifyState::Watchdog]);
                }
                std::thread::sleep(every);
            });
        if let Err(e) = spawned {
            tracing::warn!("no watchdog thread: {e}");
            return None;
        }
        Some(Self { start, alive_until })
    }

    /// The loop is alive for `bound` from now.
    pub(crate) fn alive_for(&self, bound: Duration) {
        let until = (self.start.elapsed() + bound).as_millis();
        self.alive_until
            .store(u64::try_from(until).unwrap_or(u64::MAX), Ordering::Relaxed);
    }
}

pub(crate) fn stopping() {
    send(&[NotifyState::Stopping]);
}
