//! The six operations a policy may ask of the machine.
//!
//! In a WebAssembly component the [`Provider`] is the host (see the `wasm`
//! module); in native tests it is a [`crate::sim::SimulatedSystem`].

use std::fmt;

use serde::Serialize;
use thiserror::Error;

use crate::name::ServiceName;

/// What `status` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServiceStatus {
    pub name: String,
    pub provider: String,
    pub enabled: bool,
    pub running: bool,
}

/// Why a provider operation failed, as the host reports it.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ProviderError {
    #[error("{0}")]
    InvalidName(String),
    #[error("service not found: {0}")]
    NotFound(String),
    #[error("{0}")]
    CommandFailed(String),
    #[error("{0}")]
    TimedOut(String),
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    Denied(String),
    #[error("{0}")]
    LimitExceeded(String),
}

/// A provider operation, as recorded by the simulator and named in errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Operation {
    Status,
    Start,
    Stop,
    Restart,
    Enable,
    Disable,
}

impl Operation {
    /// True for every operation except `status`.
    pub fn is_mutating(self) -> bool {
        !matches!(self, Operation::Status)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Status => "status",
            Operation::Start => "start",
            Operation::Stop => "stop",
            Operation::Restart => "restart",
            Operation::Enable => "enable",
            Operation::Disable => "disable",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The service provider: the host's six operations.
pub trait Provider {
    fn status(&mut self, service: &ServiceName) -> Result<ServiceStatus, ProviderError>;
    fn start(&mut self, service: &ServiceName) -> Result<(), ProviderError>;
    fn stop(&mut self, service: &ServiceName) -> Result<(), ProviderError>;
    fn restart(&mut self, service: &ServiceName) -> Result<(), ProviderError>;
    fn enable(&mut self, service: &ServiceName) -> Result<(), ProviderError>;
    fn disable(&mut self, service: &ServiceName) -> Result<(), ProviderError>;

    /// Runs one mutating operation by its name.
    fn mutate(&mut self, operation: Operation, service: &ServiceName) -> Result<(), ProviderError> {
        match operation {
            Operation::Status => self.status(service).map(|_| ()),
            Operation::Start => self.start(service),
            Operation::Stop => self.stop(service),
            Operation::Restart => self.restart(service),
            Operation::Enable => self.enable(service),
            Operation::Disable => self.disable(service),
        }
    }
}
