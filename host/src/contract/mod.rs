//! The contract with a policy, generated from `wit/policy.wit`: the one
//! declaration of every type that crosses the boundary.
//!
//! The provider answers in these types and the runtime hands them to the
//! guest unchanged; the `guest` module is the one place that turns what a
//! guest returns into the host's own types. What the host adds to the
//! generated types (the names reports use) is below. The earlier versions
//! this host still runs are in [`earlier`], the window in [`version`].

use std::fmt;

pub mod earlier;
pub mod version;

pub use earlier::{v0_4, v0_5};
pub use version::ContractVersion;

wasmtime::component::bindgen!({
    path: "../wit",
    world: "policy",
    // Host functions may trap the guest: that is how limits stop it.
    imports: { default: trappable },
    additional_derives: [PartialEq, Eq],
});

pub use self::policy_host::policy::service_provider;
// `Report` and `RunOptions` are at the root already: the world uses them.
pub use self::policy_host::policy::types::{
    self, Action, Ensure, Event, FinalState, JobOutcome, LeftOut, Operation, Progress,
    ProviderError, RequestedState, Restarting, ServiceStatus, Watched,
};

contract_words::provider_error_methods!(ProviderError);

pub use contract_words::ErrorKind;

contract_words::contract_word_methods!(operation: Operation, action: Action, ensure: Ensure);

pub use contract_words::{Done, State, Verb};

impl Operation {
    /// The systemctl verb, and the operation's name in reports.
    pub fn verb(self) -> &'static str {
        self.word().as_str()
    }

    /// True for every operation except `status`.
    pub fn is_mutating(self) -> bool {
        self.word().is_mutating()
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.verb())
    }
}
