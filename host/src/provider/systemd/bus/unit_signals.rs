//! Watching units change, over D-Bus, without asking: systemd sends
//! `PropertiesChanged` for a unit's object path whenever its state moves
//! (to clients that called `Manager.Subscribe`, which [`super::jobs`]
//! does before the first job). The settle window waits on these signals
//! instead of sleeping and polling, as systemd's own `bus-wait-for-units.c`
//! does: a unit that dies within its window is judged at once.
//!
//! One match for every unit's path (`path_namespace`), open while a window
//! is: the signals of other units are read and dropped.

use std::pin::Pin;
use std::time::Instant;

use futures_core::Stream;

use super::dbus::{classify, transport, DbusError, SystemdBus};
use super::rules::{self, UnitPaths};

/// The `PropertiesChanged` signals of systemd's units.
pub(crate) struct UnitSignals {
    signals: zbus::MessageStream,
}

impl UnitSignals {
    /// Adds the match (systemd must already send signals to this client).
    pub(crate) fn open(bus: &SystemdBus, timeout: std::time::Duration) -> Result<Self, DbusError> {
        let rule = rules::unit_properties(UnitPaths::All).map_err(transport)?;
        let signals = bus.signals(rule, timeout)?;
        Ok(Self { signals })
    }

    /// Waits until one of `paths` (units' object paths) changed, or
    /// `until`; says whether one did.
    pub(crate) fn wait(
        &mut self,
        bus: &SystemdBus,
        paths: &[String],
        until: Instant,
    ) -> Result<bool, DbusError> {
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(false);
            }
            let signals = &mut self.signals;
            let next = bus.runtime.block_on(async {
                tokio::time::timeout(
                    left,
                    std::future::poll_fn(|cx| Pin::new(&mut *signals).poll_next(cx)),
                )
                .await
            });
            match next {
                Err(_) => return Ok(false),
                Ok(None) => return Err(transport("the system bus connection closed")),
                Ok(Some(message)) => {
                    let message = message.map_err(classify)?;
                    let header = message.header();
                    if header
                        .path()
                        .is_some_and(|p| paths.iter().any(|w| w == p.as_str()))
                    {
                        return Ok(true);
                    }
                }
            }
        }
    }
}
