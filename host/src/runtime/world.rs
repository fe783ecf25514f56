//! One policy world per contract version the host runs: the linker holds the
//! service provider of each, and a loaded policy is bound to the one it was
//! built against. Past this module everything speaks the current contract:
//! the provider's answers are converted down to the policy's version (in the
//! earlier versions' `Host` impls below), and its report and subscriptions
//! are converted up (in [`Instance`]).

use wasmtime::component::{HasSelf, InstancePre, Linker};
use wasmtime::Store;

use super::{HostResult, HostState};
use crate::contract::{self, service_provider, v0_4, v0_5, ContractVersion};

/// Links the service provider of every version the host runs.
pub(super) fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    contract::Policy::add_to_linker::<HostState, HasSelf<HostState>>(linker, |s| s)?;
    v0_5::Policy::add_to_linker::<HostState, HasSelf<HostState>>(linker, |s| s)?;
    v0_4::Policy::add_to_linker::<HostState, HasSelf<HostState>>(linker, |s| s)?;
    Ok(())
}

/// A policy linked against the world of its contract version (a clone
/// shares the compiled code).
#[derive(Clone)]
pub(super) enum Pre {
    V0_6(contract::PolicyPre<HostState>),
    V0_5(v0_5::PolicyPre<HostState>),
    V0_4(v0_4::PolicyPre<HostState>),
}

impl Pre {
    /// Checks the component's exports against `version`'s world.
    pub(super) fn new(
        version: ContractVersion,
        pre: InstancePre<HostState>,
    ) -> wasmtime::Result<Self> {
        Ok(match version {
            ContractVersion::V0_6 => Self::V0_6(contract::PolicyPre::new(pre)?),
            ContractVersion::V0_5 => Self::V0_5(v0_5::PolicyPre::new(pre)?),
            ContractVersion::V0_4 => Self::V0_4(v0_4::PolicyPre::new(pre)?),
        })
    }

    /// For a component that names no version (it imports nothing of the
    /// contract): the newest version whose world its exports fit, or the
    /// current world's complaint.
    pub(super) fn any(pre: InstancePre<HostState>) -> wasmtime::Result<Self> {
        let mut first_error = None;
        for version in ContractVersion::ALL {
            match Self::new(version, pre.clone()) {
                Ok(bound) => return Ok(bound),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        Err(first_error.expect("at least one version"))
    }

    pub(super) fn instantiate(&self, store: &mut Store<HostState>) -> wasmtime::Result<Instance> {
        Ok(match self {
            Self::V0_6(pre) => Instance::V0_6(pre.instantiate(store)?),
            Self::V0_5(pre) => Instance::V0_5(pre.instantiate(store)?),
            Self::V0_4(pre) => Instance::V0_4(pre.instantiate(store)?),
        })
    }
}

/// A running policy of some version, called in the current contract's types.
pub(super) enum Instance {
    V0_6(contract::Policy),
    V0_5(v0_5::Policy),
    V0_4(v0_4::Policy),
}

/// What `subscriptions` returns, in the current contract's types.
type Declared = Result<Vec<contract::types::Subscription>, String>;

fn declared<S: Into<contract::types::Subscription>>(declared: Result<Vec<S>, String>) -> Declared {
    declared.map(|list| list.into_iter().map(Into::into).collect())
}

impl Instance {
    /// The policy's subscriptions; an earlier version is not told the facts.
    pub(super) fn call_subscriptions(
        &self,
        store: &mut Store<HostState>,
        settings: Option<&str>,
        facts: &[contract::types::Fact],
    ) -> wasmtime::Result<Declared> {
        Ok(match self {
            Self::V0_6(policy) => policy.call_subscriptions(store, settings, facts)?,
            Self::V0_5(policy) => declared(policy.call_subscriptions(store, settings)?),
            Self::V0_4(policy) => declared(policy.call_subscriptions(store, settings)?),
        })
    }

    /// The policy's run, with the options its version has fields for.
    pub(super) fn call_run(
        &self,
        store: &mut Store<HostState>,
        options: &contract::RunOptions,
    ) -> wasmtime::Result<contract::Report> {
        Ok(match self {
            Self::V0_6(policy) => policy.call_run(store, options)?,
            Self::V0_5(policy) => policy.call_run(store, &options.into())?.into(),
            Self::V0_4(policy) => policy.call_run(store, &options.into())?.into(),
        })
    }
}

/// A current-contract answer, converted to an earlier version's types.
fn down<T: Into<U>, U, E: From<contract::ProviderError>>(
    answer: HostResult<T>,
) -> wasmtime::Result<Result<U, E>> {
    Ok(answer?.map(Into::into).map_err(E::from))
}

/// The six operations of an earlier version: the current ones, whose
/// answers are converted down.
macro_rules! earlier_provider {
    ($version:ident) => {
        impl $version::types::Host for HostState {}

        impl $version::service_provider::Host for HostState {
            fn status(
                &mut self,
                name: String,
            ) -> wasmtime::Result<
                Result<$version::types::ServiceStatus, $version::types::ProviderError>,
            > {
                down(service_provider::Host::status(self, name))
            }

            fn start(
                &mut self,
                name: String,
            ) -> wasmtime::Result<Result<$version::types::Progress, $version::types::ProviderError>>
            {
                down(service_provider::Host::start(self, name))
            }

            fn stop(
                &mut self,
                name: String,
            ) -> wasmtime::Result<Result<$version::types::Progress, $version::types::ProviderError>>
            {
                down(service_provider::Host::stop(self, name))
            }

            fn restart(
                &mut self,
                name: String,
            ) -> wasmtime::Result<Result<$version::types::Progress, $version::types::ProviderError>>
            {
                down(service_provider::Host::restart(self, name))
            }

            fn enable(
                &mut self,
                name: String,
            ) -> wasmtime::Result<Result<(), $version::types::ProviderError>> {
                down(service_provider::Host::enable(self, name))
            }

            fn disable(
                &mut self,
                name: String,
            ) -> wasmtime::Result<Result<(), $version::types::ProviderError>> {
                down(service_provider::Host::disable(self, name))
            }
        }
    };
}

earlier_provider!(v0_5);
earlier_provider!(v0_4);
