//! Host-side bindings generated from `wit/policy.wit`.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "policy",
});

pub use self::policy_host::policy::service_provider;
pub use self::policy_host::policy::types;
