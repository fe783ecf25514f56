//! The six operations a policy may ask of the machine.
//!
//! In a WebAssembly component the [`Provider`] is the host (see the `wasm`
//! module); in native tests it is a [`crate::sim::SimulatedSystem`].

use std::fmt;

use crate::contract::{Action, Ensure};
use crate::name::ServiceName;

pub use crate::contract::{
    JobOutcome, Operation, Progress, ProviderError, Restarting, ServiceStatus,
};

contract_words::provider_error_methods!(ProviderError);
contract_words::contract_word_methods!(
    operation: Operation,
    action: Action,
    ensure: Ensure
);

/// The cases of [`ProviderError`], without their messages.
pub use contract_words::ErrorKind;

impl Operation {
    /// True for every operation except `status`.
    pub fn is_mutating(self) -> bool {
        self.word().is_mutating()
    }

    /// The operation's name, as reports and the host write it (`start`).
    pub fn as_str(self) -> &'static str {
        self.word().as_str()
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The service provider: the host's six operations.
///
/// `start`, `stop` and `restart` hand systemd a job: they return
/// [`Progress::Finished`] when it has ended well (a failed job is their
/// error), or [`Progress::Queued`] when it runs beside others, and then the
/// unit's next `status` waits for it and carries how it ended
/// ([`ServiceStatus::job`]).
pub trait Provider {
    /// Whether the unit runs and starts at boot, with systemd's own words;
    /// it waits for a queued job of the unit first.
    fn status(&mut self, service: &ServiceName) -> Result<ServiceStatus, ProviderError>;
    /// Starts the unit (`systemctl start`).
    fn start(&mut self, service: &ServiceName) -> Result<Progress, ProviderError>;
    /// Stops the unit (`systemctl stop`).
    fn stop(&mut self, service: &ServiceName) -> Result<Progress, ProviderError>;
    /// Restarts the unit (`systemctl restart`).
    fn restart(&mut self, service: &ServiceName) -> Result<Progress, ProviderError>;
    /// Makes the unit start at boot (`systemctl enable`).
    fn enable(&mut self, service: &ServiceName) -> Result<(), ProviderError>;
    /// Makes the unit not start at boot (`systemctl disable`).
    fn disable(&mut self, service: &ServiceName) -> Result<(), ProviderError>;

    /// The facts of the machine this provider stands for, when it knows
    /// them itself: the simulated system does; the host gives its facts in
    /// the run options instead (none here).
    fn machine_facts(&self) -> Vec<crate::contract::Fact> {
        Vec::new()
    }

    /// Runs one mutating operation by its name; `enable` and `disable`
    /// are always [`Progress::Finished`] when they succeed.
    fn mutate(
        &mut self,
        operation: Operation,
        service: &ServiceName,
    ) -> Result<Progress, ProviderError> {
        let done = |result: Result<(), ProviderError>| result.map(|()| Progress::Finished);
        match operation {
            Operation::Status => done(self.status(service).map(|_| ())),
            Operation::Start => self.start(service),
            Operation::Stop => self.stop(service),
            Operation::Restart => self.restart(service),
            Operation::Enable => done(self.enable(service)),
            Operation::Disable => done(self.disable(service)),
        }
    }
}
