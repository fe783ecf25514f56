//! The six operations a policy may ask of the machine.
//!
//! In a WebAssembly component the [`Provider`] is the host (see the `wasm`
//! module); in native tests it is a [`crate::sim::SimulatedSystem`].

use std::fmt;

use crate::name::ServiceName;

pub use crate::contract::{Operation, ProviderError, ServiceStatus};

contract_words::provider_error_methods!(ProviderError);

/// The cases of [`ProviderError`], without their messages.
pub use contract_words::ErrorKind;

impl Operation {
    /// True for every operation except `status`.
    pub fn is_mutating(self) -> bool {
        !matches!(self, Operation::Status)
    }

    /// The operation's name, as reports and the host write it (`start`).
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
    /// Whether the unit runs and starts at boot, with systemd's own words.
    fn status(&mut self, service: &ServiceName) -> Result<ServiceStatus, ProviderError>;
    /// Starts the unit (`systemctl start`).
    fn start(&mut self, service: &ServiceName) -> Result<(), ProviderError>;
    /// Stops the unit (`systemctl stop`).
    fn stop(&mut self, service: &ServiceName) -> Result<(), ProviderError>;
    /// Restarts the unit (`systemctl restart`).
    fn restart(&mut self, service: &ServiceName) -> Result<(), ProviderError>;
    /// Makes the unit start at boot (`systemctl enable`).
    fn enable(&mut self, service: &ServiceName) -> Result<(), ProviderError>;
    /// Makes the unit not start at boot (`systemctl disable`).
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
