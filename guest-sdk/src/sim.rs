//! A simulated system to unit-test policies natively, without WebAssembly or systemd.
//!
//! It holds unit states, records every provider call in order, and lets a
//! test inject failures: an operation that returns an error, or one that
//! "succeeds" without taking effect (like a `Type=simple` unit whose program
//! exits at once), to exercise the desired-state check.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use crate::name::ServiceName;
use crate::provider::{Operation, Provider, ProviderError, ServiceStatus};

/// The state of one simulated unit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UnitState {
    pub running: bool,
    pub enabled: bool,
}

impl UnitState {
    pub fn running() -> Self {
        Self {
            running: true,
            enabled: false,
        }
    }

    pub fn stopped() -> Self {
        Self::default()
    }

    pub fn enabled(mut self) -> Self {
        self.enabled = true;
        self
    }

    pub fn disabled(mut self) -> Self {
        self.enabled = false;
        self
    }
}

/// One recorded provider call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub operation: Operation,
    pub service: String,
}

impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.operation, self.service)
    }
}

/// What an injected fault does.
#[derive(Debug, Clone)]
enum Fault {
    Fail(ProviderError),
    NoEffect,
}

/// A system of simulated units that implements [`Provider`].
#[derive(Debug, Clone, Default)]
pub struct SimulatedSystem {
    units: BTreeMap<String, UnitState>,
    faults: HashMap<(Operation, String), Fault>,
    calls: Vec<Call>,
}

impl SimulatedSystem {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a unit in the given state.
    pub fn with_unit(mut self, name: &str, state: UnitState) -> Self {
        self.units.insert(name.to_owned(), state);
        self
    }

    /// Makes `operation` on `service` fail with `error` (the unit is left as it was).
    pub fn with_failure(
        mut self,
        operation: Operation,
        service: &str,
        error: ProviderError,
    ) -> Self {
        self.faults
            .insert((operation, service.to_owned()), Fault::Fail(error));
        self
    }

    /// Makes `operation` on `service` report success without changing the unit.
    pub fn with_no_effect(mut self, operation: Operation, service: &str) -> Self {
        self.faults
            .insert((operation, service.to_owned()), Fault::NoEffect);
        self
    }

    /// The current state of a unit, if it exists.
    pub fn unit(&self, name: &str) -> Option<UnitState> {
        self.units.get(name).copied()
    }

    /// Every call made, in order.
    pub fn calls(&self) -> &[Call] {
        &self.calls
    }

    /// Every call as `"operation service"` text, for readable assertions.
    pub fn call_log(&self) -> Vec<String> {
        self.calls.iter().map(Call::to_string).collect()
    }

    /// The calls that would change the system (everything but `status`), as text.
    pub fn mutating_calls(&self) -> Vec<String> {
        self.calls
            .iter()
            .filter(|c| c.operation.is_mutating())
            .map(Call::to_string)
            .collect()
    }

    /// Forgets the recorded calls, keeping the unit states (for a second run).
    pub fn clear_calls(&mut self) {
        self.calls.clear();
    }

    fn perform(
        &mut self,
        operation: Operation,
        service: &ServiceName,
        effect: impl FnOnce(&mut UnitState),
    ) -> Result<(), ProviderError> {
        self.calls.push(Call {
            operation,
            service: service.to_string(),
        });
        let fault = self.faults.get(&(operation, service.to_string())).cloned();
        let unit = self
            .units
            .get_mut(service.as_str())
            .ok_or_else(|| ProviderError::NotFound(service.to_string()))?;
        match fault {
            Some(Fault::Fail(error)) => Err(error),
            Some(Fault::NoEffect) => Ok(()),
            None => {
                effect(unit);
                Ok(())
            }
        }
    }
}

impl Provider for SimulatedSystem {
    fn status(&mut self, service: &ServiceName) -> Result<ServiceStatus, ProviderError> {
        self.perform(Operation::Status, service, |_| {})?;
        let unit = self.units[service.as_str()];
        Ok(ServiceStatus {
            name: service.to_string(),
            provider: "simulated".to_owned(),
            enabled: unit.enabled,
            running: unit.running,
        })
    }

    fn start(&mut self, service: &ServiceName) -> Result<(), ProviderError> {
        self.perform(Operation::Start, service, |u| u.running = true)
    }

    fn stop(&mut self, service: &ServiceName) -> Result<(), ProviderError> {
        self.perform(Operation::Stop, service, |u| u.running = false)
    }

    fn restart(&mut self, service: &ServiceName) -> Result<(), ProviderError> {
        self.perform(Operation::Restart, service, |u| u.running = true)
    }

    fn enable(&mut self, service: &ServiceName) -> Result<(), ProviderError> {
        self.perform(Operation::Enable, service, |u| u.enabled = true)
    }

    fn disable(&mut self, service: &ServiceName) -> Result<(), ProviderError> {
        self.perform(Operation::Disable, service, |u| u.enabled = false)
    }
}
