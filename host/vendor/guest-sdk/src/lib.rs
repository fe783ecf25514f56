//! Write desired-state policies for systemd services in Rust, unit-test them
//! natively, and run them as signed WebAssembly components under `host run`.
//!
//! A policy is a function from a [`Context`] (the run's settings, this
//! machine's facts and labels, whether it is a noop run) to a [`Policy`]: an
//! ordered list of [`Service`] declarations. The host also tells each run
//! which references changed (`--refresh`, and the files and packages it
//! watches), which the SDK compares with the subscriptions. The SDK holds all
//! of the service type's logic (two-phase apply, idempotency, subscriptions,
//! noop mode, verification of the final state, name validation); the host only
//! carries out the six provider operations it is asked for.
//!
//! ```
//! use guest_sdk::prelude::*;
//!
//! fn web(_ctx: &Context) -> Result<Policy, PolicyError> {
//!     Ok(Policy::new().service(
//!         Service::new("httpd")
//!             .running()
//!             .enable(true)
//!             .subscribe("file#/etc/httpd/conf/httpd.conf"),
//!     ))
//! }
//! guest_sdk::export_policy!(web);
//!
//! // Natively, test it against a simulated system:
//! let mut system = SimulatedSystem::new().with_unit("httpd", UnitState::stopped());
//! let report = guest_sdk::run(web, &mut system, &RunOptions::default());
//! assert!(report.succeeded());
//! assert_eq!(system.mutating_calls(), ["start httpd", "enable httpd"]);
//!
//! // A second run finds everything converged and changes nothing.
//! system.clear_calls();
//! guest_sdk::run(web, &mut system, &RunOptions::default());
//! assert!(system.mutating_calls().is_empty());
//! ```
//!
//! Build the component with `cargo build --release --target wasm32-wasip2`
//! (the crate must have `crate-type = ["cdylib", "rlib"]`), then
//! `host run target/wasm32-wasip2/release/NAME.wasm`.
//!
//! New to it? [`_tutorial`] goes from an empty directory to a policy
//! running on a fleet.

pub mod _tutorial;
mod apply;
mod context;
pub mod contract;
pub mod facts;
pub mod manifest;
pub mod name;
mod policy;
pub mod provider;
pub mod report;
pub mod resource_ref;
mod service;
pub mod settings;
pub mod sim;

#[cfg(target_arch = "wasm32")]
#[doc(hidden)]
pub mod wasm;

use std::fmt::Display;

pub use apply::{apply, RunOptions, Watched};
pub use context::Context;
pub use contract::{Fact, LeftOut, Subscription};
pub use facts::Facts;
pub use manifest::{parse_manifest, ManifestError};
pub use name::{NameError, ServiceName};
pub use policy::Policy;
pub use provider::{JobOutcome, Operation, Progress, Provider, ProviderError, ServiceStatus};
pub use report::{Action, Event, FinalState, Report, RequestedState};
pub use resource_ref::ResourceRef;
pub use service::{Ensure, Service};
pub use settings::SettingsError;

/// The error type a policy function may return: anything that displays.
pub type PolicyError = Box<dyn std::error::Error + Send + Sync>;

/// Builds the policy with `policy_fn` and applies it through `provider`.
///
/// This is what the exported entry point does inside the component; native
/// tests call it with a [`sim::SimulatedSystem`]. An error from the policy
/// function becomes a policy-level error in the report, and nothing is applied.
///
/// The policy function sees the facts of `options` (the host's), over those
/// the provider's machine has (a [`sim::SimulatedSystem`]'s).
pub fn run<F, E>(policy_fn: F, provider: &mut dyn Provider, options: &RunOptions) -> Report
where
    F: FnOnce(&Context<'_>) -> Result<Policy, E>,
    E: Display,
{
    let mut facts = provider.machine_facts();
    for fact in &options.facts {
        facts::set(&mut facts, fact.name.clone(), fact.value.clone());
    }
    let context = Context::new(options.settings.as_deref(), options.noop).with_facts(&facts);
    match policy_fn(&context) {
        Ok(policy) => apply(&policy, provider, options),
        Err(e) => Report::rejected(vec![format!("policy: {e}")]),
    }
}

/// What each service of the policy `policy_fn` builds from `settings` and
/// `facts` subscribes to, with no provider call: the exported
/// `subscriptions`, which the host asks before `run` to watch `file#` and
/// `package#` references. Services without subscriptions, and those left
/// out on this machine, are left out. An error (the policy function's, or
/// an invalid declaration's) is what `run` would report.
pub fn subscriptions<F, E>(
    policy_fn: F,
    settings: Option<&str>,
    facts: &[Fact],
) -> Result<Vec<Subscription>, String>
where
    F: FnOnce(&Context<'_>) -> Result<Policy, E>,
    E: Display,
{
    let context = Context::new(settings, false).with_facts(facts);
    let policy = policy_fn(&context).map_err(|e| format!("policy: {e}"))?;
    Ok(policy
        .validate()
        .map_err(|errors| errors.join("; "))?
        .iter()
        .filter(|service| !service.subscribe.is_empty())
        .map(|service| Subscription {
            resource: service.resource_ref().to_string(),
            references: service.subscribe.iter().map(ToString::to_string).collect(),
        })
        .collect())
}

/// Everything a policy crate usually needs.
pub mod prelude {
    pub use crate::sim::{SimulatedSystem, UnitState};
    pub use crate::{
        Action, Context, Ensure, Facts, Operation, Policy, PolicyError, ProviderError, Report,
        RunOptions, Service,
    };
}

/// Exports a policy function as the component's `run` entry point.
///
/// The function has the shape `fn(&Context) -> Result<Policy, E>` with
/// `E: Display`. On targets other than `wasm32` the macro only checks the
/// signature, so the same crate builds and tests natively.
#[macro_export]
macro_rules! export_policy {
    ($policy_fn:path) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct ExportedPolicy;
            impl $crate::contract::bindings::Guest for ExportedPolicy {
                fn run(options: $crate::RunOptions) -> $crate::Report {
                    $crate::wasm::run_exported($policy_fn, options)
                }
                fn subscriptions(
                    settings: Option<String>,
                    facts: Vec<$crate::Fact>,
                ) -> Result<Vec<$crate::Subscription>, String> {
                    $crate::subscriptions($policy_fn, settings.as_deref(), &facts)
                }
            }
            $crate::contract::bindings::__export_policy_world!(ExportedPolicy with_types_in $crate::contract::bindings);
        };
        #[cfg(not(target_arch = "wasm32"))]
        const _: () = {
            fn _signature_check(context: &$crate::Context<'_>) -> $crate::Report {
                let _ = context;
                let _ = $crate::subscriptions($policy_fn, None, &[]);
                let mut system = $crate::sim::SimulatedSystem::new();
                $crate::run($policy_fn, &mut system, &$crate::RunOptions::default())
            }
        };
    };
}
