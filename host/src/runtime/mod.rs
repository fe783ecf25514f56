//! The WebAssembly side of the host: one engine and linker, a fresh store per
//! run, WASI linked with nothing granted, and the six provider operations.

pub mod bindings;
pub mod capture;
pub mod load;

use anyhow::Context as _;
use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Config, Engine, Store, StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::provider::{Operation, ProviderError, SystemdProvider};
use bindings::{service_provider, types};
pub use capture::GuestLog;
pub use load::LoadError;

/// Resource limits of one run.
#[derive(Debug, Clone, Copy)]
pub struct RunLimits {
    /// Linear memory and tables a guest may grow to, in bytes.
    pub memory_bytes: usize,
    /// Captured guest stdout and stderr together, in bytes.
    pub log_bytes: usize,
}

impl Default for RunLimits {
    fn default() -> Self {
        Self {
            memory_bytes: 64 << 20,
            log_bytes: 1 << 20,
        }
    }
}

/// What the host asks of the policy.
#[derive(Debug, Clone, Default)]
pub struct PolicyInput {
    pub noop: bool,
    pub refreshed: Vec<String>,
    pub settings: Option<String>,
}

/// The per-run state a store holds.
pub struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    limits: StoreLimits,
    provider: SystemdProvider,
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl types::Host for HostState {}

fn to_wit_error(e: ProviderError) -> types::ProviderError {
    match e {
        ProviderError::InvalidName(m) => types::ProviderError::InvalidName(m),
        ProviderError::NotFound(m) => types::ProviderError::NotFound(m),
        ProviderError::CommandFailed(m) => types::ProviderError::CommandFailed(m),
        ProviderError::TimedOut(m) => types::ProviderError::TimedOut(m),
        ProviderError::Unavailable(m) => types::ProviderError::Unavailable(m),
        ProviderError::Denied(m) => types::ProviderError::Denied(m),
        ProviderError::LimitExceeded(m) => types::ProviderError::LimitExceeded(m),
    }
}

impl HostState {
    fn mutate(&mut self, operation: Operation, name: String) -> Result<(), types::ProviderError> {
        self.provider.mutate(operation, &name).map_err(to_wit_error)
    }
}

impl service_provider::Host for HostState {
    fn status(&mut self, name: String) -> Result<types::ServiceStatus, types::ProviderError> {
        let provider_name = self.provider.name().to_owned();
        self.provider
            .status(&name)
            .map(|s| types::ServiceStatus {
                name: s.name,
                provider: provider_name,
                enabled: s.enabled,
                running: s.running,
            })
            .map_err(to_wit_error)
    }

    fn start(&mut self, name: String) -> Result<(), types::ProviderError> {
        self.mutate(Operation::Start, name)
    }

    fn stop(&mut self, name: String) -> Result<(), types::ProviderError> {
        self.mutate(Operation::Stop, name)
    }

    fn restart(&mut self, name: String) -> Result<(), types::ProviderError> {
        self.mutate(Operation::Restart, name)
    }

    fn enable(&mut self, name: String) -> Result<(), types::ProviderError> {
        self.mutate(Operation::Enable, name)
    }

    fn disable(&mut self, name: String) -> Result<(), types::ProviderError> {
        self.mutate(Operation::Disable, name)
    }
}

/// What one run of a policy produced.
pub struct GuestRun {
    /// The guest's report, or why the guest did not finish (a trap).
    pub outcome: Result<types::Report, String>,
    /// The guest's stdout and stderr.
    pub log: String,
    /// The provider, with the record of every operation it carried out.
    pub provider: SystemdProvider,
}

/// Compiles and runs policies. Build it once per process: the engine and the
/// linker are shared by every policy run.
pub struct PolicyRuntime {
    engine: Engine,
    linker: Linker<HostState>,
    limits: RunLimits,
}

impl PolicyRuntime {
    pub fn new(limits: RunLimits) -> anyhow::Result<Self> {
        let mut config = Config::new();
        config.wasm_component_model(true);
        let engine =
            anyhow_result(Engine::new(&config)).context("creating the WebAssembly engine")?;
        let mut linker = Linker::new(&engine);
        anyhow_result(wasmtime_wasi::p2::add_to_linker_sync(&mut linker))
            .context("linking WASI")?;
        anyhow_result(bindings::Policy::add_to_linker::<
            HostState,
            HasSelf<HostState>,
        >(&mut linker, |s| s))
        .context("linking the service provider")?;
        Ok(Self {
            engine,
            linker,
            limits,
        })
    }

    /// Checks and compiles a policy component.
    pub fn load(&self, bytes: &[u8]) -> Result<Component, LoadError> {
        load::load_component(&self.engine, bytes)
    }

    /// Runs `component` once, in a fresh store, against `provider`.
    pub fn run(
        &self,
        component: &Component,
        input: PolicyInput,
        provider: SystemdProvider,
    ) -> anyhow::Result<GuestRun> {
        let log = GuestLog::new(self.limits.log_bytes);
        let wasi = sandboxed_wasi(&log);
        let state = HostState {
            wasi,
            table: ResourceTable::new(),
            limits: StoreLimitsBuilder::new()
                .memory_size(self.limits.memory_bytes)
                .instances(16)
                .build(),
            provider,
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limits);

        let options = types::RunOptions {
            noop: input.noop,
            refreshed: input.refreshed,
            settings: input.settings,
        };
        let outcome = anyhow_result(bindings::Policy::instantiate(
            &mut store,
            component,
            &self.linker,
        ))
        .context("instantiating the policy")
        .and_then(|policy| {
            anyhow_result(policy.call_run(&mut store, &options)).context("running the policy")
        })
        .map_err(|e| format!("{e:#}"));
        let state = store.into_data();
        Ok(GuestRun {
            outcome,
            log: log.contents(),
            provider: state.provider,
        })
    }
}

/// WASI with nothing granted: no arguments, no environment, no preopened
/// directories, no network or name lookup, empty stdin; stdout and stderr go
/// to the bounded log.
fn sandboxed_wasi(log: &GuestLog) -> WasiCtx {
    WasiCtxBuilder::new()
        .stdout(log.clone())
        .stderr(log.clone())
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .socket_addr_check(|_, _| Box::pin(async { false }))
        .build()
}

/// wasmtime 48 has its own error type; the host reports with anyhow chains.
fn anyhow_result<T>(result: Result<T, wasmtime::Error>) -> anyhow::Result<T> {
    result.map_err(anyhow::Error::from)
}
