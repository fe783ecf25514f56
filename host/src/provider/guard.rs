//! The guard layer, the same over every backend. Each operation a guest
//! asks for passes, in order:
//!
//! 1. the name check (a unit name systemd would take, never an option);
//! 2. the allowlist (`allow_units`);
//! 3. availability (systemctl found);
//! 4. the run's one daemon-reload, before its first operation;
//! 5. noop (a change is refused in a dry run);
//! 6. the deadline (the per-command timeout, cut at the run's wall clock);
//! 7. the backend, which talks to systemd;
//! 8. the record: one [`CallRecord`] per operation, whatever happened.
//!
//! It also ends the run: one daemon-reload after enablement changes.

use std::time::{Duration, Instant};

use super::backend::{Backend, Budget, Change};
use super::{Call, CallRecord, Outcome, Provider, UnitAllowlist, UnitState};
use crate::contract::{Operation, ProviderError, ServiceStatus};
use crate::service_name::{quote, CheckedName};

/// The guard's settings for one run.
#[derive(Debug, Clone)]
pub struct Guard {
    /// When set, operations on units it does not allow are refused.
    pub allow: Option<UnitAllowlist>,
    /// A dry run: changes are refused and no daemon-reload is made.
    pub noop: bool,
    /// The longest a single exchange with systemd may take.
    pub timeout: Duration,
}

/// Whether the run's first daemon-reload has happened.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reload {
    Pending,
    Done,
    /// It failed; every later operation fails with this message, because the
    /// unit files systemd sees may be out of date.
    Failed(String),
}

/// A backend behind the guard: what the runtime calls a provider.
pub struct Guarded<B> {
    backend: B,
    guard: Guard,
    /// No exchange may run past this (the run's wall-clock limit).
    deadline: Option<Instant>,
    reload: Reload,
    /// An enable or disable succeeded (without a reload): the run ends
    /// with one daemon-reload, so systemd sees the new links.
    enablement_changed: bool,
    calls: Vec<CallRecord>,
}

impl<B: Backend> Guarded<B> {
    pub fn over(backend: B, guard: Guard) -> Self {
        Self {
            backend,
            guard,
            deadline: None,
            reload: Reload::Pending,
            enablement_changed: false,
            calls: Vec::new(),
        }
    }

    /// Every operation recorded and not yet taken, in order.
    pub fn calls(&self) -> &[CallRecord] {
        &self.calls
    }

    fn budget(&self) -> Budget {
        Budget {
            timeout: self.guard.timeout,
            deadline: self.deadline,
        }
    }

    /// Steps 1 to 4: the name, the allowlist, availability, the reload.
    fn admit(&mut self, name: &str) -> Result<CheckedName, ProviderError> {
        let unit = CheckedName::check(name).map_err(ProviderError::InvalidName)?;
        if let Some(allow) = &self.guard.allow {
            if !allow.allows(unit.as_str()) {
                return Err(ProviderError::Denied(format!(
                    "unit {unit} is not allowed on this machine (--allow-unit {})",
                    allow.patterns().join(", ")
                )));
            }
        }
        if let Some(reason) = self.backend.unavailable_reason() {
            return Err(ProviderError::Unavailable(reason.to_owned()));
        }
        self.reload_once()?;
        Ok(unit)
    }

    fn reload_once(&mut self) -> Result<(), ProviderError> {
        if self.guard.noop {
            return Ok(());
        }
        match &self.reload {
            Reload::Done => return Ok(()),
            Reload::Failed(message) => return Err(ProviderError::CommandFailed(message.clone())),
            Reload::Pending => {}
        }
        let result = self.daemon_reload();
        self.reload = match &result {
            Ok(()) => Reload::Done,
            Err(e) => Reload::Failed(e.message().to_owned()),
        };
        result
    }

    /// A daemon-reload, recorded as a call of the run.
    fn daemon_reload(&mut self) -> Result<(), ProviderError> {
        let started = Instant::now();
        let result = self.backend.daemon_reload(&self.budget());
        self.record(Call::DaemonReload, None, started, result.as_ref().err());
        result
    }

    /// Records one call; returns the record, for a status to add what it found.
    fn record(
        &mut self,
        operation: Call,
        service: Option<&str>,
        started: Instant,
        error: Option<&ProviderError>,
    ) -> &mut CallRecord {
        tracing::debug!(
            operation = operation.verb(),
            service = service.unwrap_or(""),
            ms = crate::text::millis(started.elapsed()),
            error = error.map(ProviderError::message),
            "provider call"
        );
        self.calls.push(CallRecord {
            operation,
            service: service.map(|s| {
                if CheckedName::check(s).is_ok() {
                    s.to_owned()
                } else {
                    quote(s)
                }
            }),
            outcome: error.map_or(Outcome::Ok, Outcome::of),
            error: error.map(|e| e.message().to_owned()),
            state: None,
            duration: started.elapsed(),
        });
        self.calls.last_mut().expect("just recorded")
    }
}

impl<B: Backend> Provider for Guarded<B> {
    fn name(&self) -> &'static str {
        self.backend.name()
    }

    fn unavailable_reason(&self) -> Option<&str> {
        self.backend.unavailable_reason()
    }

    fn status(&mut self, name: &str) -> Result<ServiceStatus, ProviderError> {
        // The clock starts after `admit`, which may make the run's one
        // daemon-reload: that is recorded as its own call.
        let admitted = self.admit(name);
        let started = Instant::now();
        let budget = self.budget();
        let result = admitted.and_then(|unit| self.backend.status(&unit, &budget));
        let call = self.record(
            Call::Guest(Operation::Status),
            Some(name),
            started,
            result.as_ref().err(),
        );
        if let Ok(status) = &result {
            call.state = Some(UnitState {
                running: status.running,
                enabled: status.enabled,
            });
        }
        result
    }

    fn mutate(&mut self, operation: Operation, name: &str) -> Result<(), ProviderError> {
        let change = Change::of(operation).expect("mutate is never asked for status");
        let admitted = self.admit(name);
        let started = Instant::now();
        let budget = self.budget();
        let result = admitted.and_then(|unit| {
            if self.guard.noop {
                return Err(ProviderError::Denied(format!(
                    "{operation} {unit} refused: this is a noop run"
                )));
            }
            self.backend.change(change, &unit, &budget)?;
            self.enablement_changed |= change.is_enablement();
            Ok(())
        });
        self.record(
            Call::Guest(operation),
            Some(name),
            started,
            result.as_ref().err(),
        );
        result
    }

    fn set_deadline(&mut self, deadline: Instant) {
        self.deadline = Some(deadline);
    }

    fn take_calls(&mut self) -> Vec<CallRecord> {
        std::mem::take(&mut self.calls)
    }

    fn status_reader(&self) -> (&'static str, Option<&str>) {
        self.backend.status_reader()
    }

    /// The run's last step: one daemon-reload when enable or disable ran,
    /// so that systemd's view of the links (`list-dependencies`, `show`)
    /// catches up. None in a noop run, none when nothing changed.
    fn finish(&mut self) -> Result<(), ProviderError> {
        if !self.enablement_changed || self.guard.noop {
            return Ok(());
        }
        self.enablement_changed = false;
        self.daemon_reload()
    }
}
