//! Host-side bindings generated from `wit/policy.wit`.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "policy",
    // Host functions may trap the guest: that is how limits stop it.
    imports: { default: trappable },
});

pub use self::policy_host::policy::service_provider;
pub use self::policy_host::policy::types;
