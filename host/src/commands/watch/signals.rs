//! Signals in a watch: SIGTERM and SIGINT end it after the run under way
//! (a second one ends it at once, as in `host run`); SIGHUP reads host.toml
//! again and runs everything. Taken by a thread of their own
//! (`signal-hook`): nothing runs in a signal handler.

use std::sync::mpsc::Sender;

use super::wake::Wake;

/// Starts taking the signals; wakes go to `wakes`.
pub(crate) fn start(wakes: Sender<Wake>) -> std::io::Result<()> {
    let mut signals =
        signal_hook::iterator::Signals::new([libc::SIGTERM, libc::SIGINT, libc::SIGHUP])?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut stopping = false;
            for signal in signals.forever() {
                let name = crate::interrupt::name(signal);
                let wake = match signal {
                    libc::SIGHUP => Wake::Hangup,
                    _ if stopping => {
                        tracing::error!("{name} received again: stopping at once");
                        std::process::exit(128 + signal);
                    }
                    _ => {
                        stopping = true;
                        Wake::Stop(name)
                    }
                };
                if wakes.send(wake).is_err() {
                    return;
                }
            }
        })?;
    Ok(())
}
