//! The component glue: the host's imports as a [`Provider`], and the
//! conversion of the SDK's report to the WIT types. Only built for `wasm32`.

use std::fmt::Display;

use crate::name::ServiceName;
use crate::provider::{Provider, ProviderError, ServiceStatus};
use crate::{report, service, Context, Policy, RunOptions};

/// Bindings generated from `wit/policy.wit`.
pub mod bindings {
    wit_bindgen::generate!({
        path: "../wit",
        world: "policy",
        pub_export_macro: true,
        export_macro_name: "__export_policy_world",
        default_bindings_module: "guest_sdk::wasm::bindings",
    });
}

use bindings::policy_host::policy::service_provider as host;
use bindings::policy_host::policy::types as wit;

/// The host's six operations.
pub struct HostProvider;

impl From<wit::ProviderError> for ProviderError {
    fn from(e: wit::ProviderError) -> Self {
        match e {
            wit::ProviderError::InvalidName(m) => ProviderError::InvalidName(m),
            wit::ProviderError::NotFound(m) => ProviderError::NotFound(m),
            wit::ProviderError::CommandFailed(m) => ProviderError::CommandFailed(m),
            wit::ProviderError::TimedOut(m) => ProviderError::TimedOut(m),
            wit::ProviderError::Unavailable(m) => ProviderError::Unavailable(m),
            wit::ProviderError::Denied(m) => ProviderError::Denied(m),
            wit::ProviderError::LimitExceeded(m) => ProviderError::LimitExceeded(m),
        }
    }
}

impl Provider for HostProvider {
    fn status(&mut self, service: &ServiceName) -> Result<ServiceStatus, ProviderError> {
        let s = host::status(service.as_str())?;
        Ok(ServiceStatus {
            name: s.name,
            provider: s.provider,
            enabled: s.enabled,
            running: s.running,
        })
    }

    fn start(&mut self, service: &ServiceName) -> Result<(), ProviderError> {
        Ok(host::start(service.as_str())?)
    }

    fn stop(&mut self, service: &ServiceName) -> Result<(), ProviderError> {
        Ok(host::stop(service.as_str())?)
    }

    fn restart(&mut self, service: &ServiceName) -> Result<(), ProviderError> {
        Ok(host::restart(service.as_str())?)
    }

    fn enable(&mut self, service: &ServiceName) -> Result<(), ProviderError> {
        Ok(host::enable(service.as_str())?)
    }

    fn disable(&mut self, service: &ServiceName) -> Result<(), ProviderError> {
        Ok(host::disable(service.as_str())?)
    }
}

/// The body of the exported `run`: build, apply, convert.
pub fn run_exported<F, E>(policy_fn: F, options: wit::RunOptions) -> wit::Report
where
    F: FnOnce(&Context<'_>) -> Result<Policy, E>,
    E: Display,
{
    let options = RunOptions {
        noop: options.noop,
        refreshed: options.refreshed,
        settings: options.settings,
    };
    let report = crate::run(policy_fn, &mut HostProvider, &options);
    to_wit_report(report)
}

fn to_wit_ensure(e: service::Ensure) -> wit::Ensure {
    match e {
        service::Ensure::Running => wit::Ensure::Running,
        service::Ensure::Stopped => wit::Ensure::Stopped,
    }
}

fn to_wit_action(a: report::Action) -> wit::Action {
    match a {
        report::Action::Started => wit::Action::Started,
        report::Action::Stopped => wit::Action::Stopped,
        report::Action::Restarted => wit::Action::Restarted,
        report::Action::Enabled => wit::Action::Enabled,
        report::Action::Disabled => wit::Action::Disabled,
    }
}

fn to_wit_report(report: report::Report) -> wit::Report {
    wit::Report {
        events: report
            .events
            .into_iter()
            .map(|e| wit::Event {
                resource: e.resource,
                changed: e.changed,
                refreshed: e.refreshed,
                noop: e.noop,
                noop_message: e.noop_message,
                actions: e.actions.into_iter().map(to_wit_action).collect(),
                failed: e.failed,
                errors: e.errors,
                requested: wit::RequestedState {
                    ensure: to_wit_ensure(e.requested.ensure),
                    enable: e.requested.enable,
                },
                final_: e.final_state.map(|f| wit::FinalState {
                    ensure: to_wit_ensure(f.ensure),
                    enabled: f.enabled,
                }),
            })
            .collect(),
        errors: report.errors,
    }
}
