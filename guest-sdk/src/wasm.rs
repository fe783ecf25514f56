//! The component glue: the host's imports as a [`Provider`], and the exported
//! entry point. Only built for `wasm32`; the types need no conversion, both
//! sides use the contract's ([`crate::contract`]).

use std::fmt::Display;

use crate::contract::bindings::policy_host::policy::service_provider as host;
use crate::name::ServiceName;
use crate::provider::{Progress, Provider, ProviderError, ServiceStatus};
use crate::{Context, Policy, Report, RunOptions};

/// The host's six operations.
pub struct HostProvider;

impl Provider for HostProvider {
    fn status(&mut self, service: &ServiceName) -> Result<ServiceStatus, ProviderError> {
        host::status(service.as_str())
    }

    fn start(&mut self, service: &ServiceName) -> Result<Progress, ProviderError> {
        host::start(service.as_str())
    }

    fn stop(&mut self, service: &ServiceName) -> Result<Progress, ProviderError> {
        host::stop(service.as_str())
    }

    fn restart(&mut self, service: &ServiceName) -> Result<Progress, ProviderError> {
        host::restart(service.as_str())
    }

    fn enable(&mut self, service: &ServiceName) -> Result<(), ProviderError> {
        host::enable(service.as_str())
    }

    fn disable(&mut self, service: &ServiceName) -> Result<(), ProviderError> {
        host::disable(service.as_str())
    }
}

/// The body of the exported `run`: build the policy, apply it through the host.
pub fn run_exported<F, E>(policy_fn: F, options: RunOptions) -> Report
where
    F: FnOnce(&Context<'_>) -> Result<Policy, E>,
    E: Display,
{
    crate::run(policy_fn, &mut HostProvider, &options)
}
