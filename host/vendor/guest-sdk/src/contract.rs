//! The contract with the host, generated from `wit/policy.wit`: the one
//! declaration of every type that crosses the boundary.
//!
//! The types are generated on every target, so a native test sees exactly
//! what a component exchanges with the host. What the SDK adds to them
//! (names, phrases, constructors) lives beside the code that needs it, as
//! inherent impls: [`Ensure`] in `service`, [`Action`] and [`Report`] in
//! `report`, [`Operation`], [`ProviderError`] and [`ServiceStatus`] in
//! `provider`, [`RunOptions`] in `apply`, [`Fact`] in `facts`. Outside `wasm32` the imported host
//! functions are never called: the SDK's [`Provider`](crate::Provider) trait
//! stands between the apply logic and the host.

#[doc(hidden)]
// The generated lowering of `run-options` takes one argument per field.
#[allow(clippy::too_many_arguments)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "policy",
        pub_export_macro: true,
        export_macro_name: "__export_policy_world",
        default_bindings_module: "guest_sdk::contract::bindings",
        additional_derives: [PartialEq, Eq, Hash],
    });
}

pub use bindings::policy_host::policy::types::{
    Action, Ensure, Event, Fact, FinalState, JobOutcome, LeftOut, Operation, Progress,
    ProviderError, Report, RequestedState, Restarting, RunOptions, ServiceStatus, Subscription,
    Watched,
};
