//! The WebAssembly side of the host: one engine and linker, a fresh store per
//! run, WASI linked with nothing granted, and the six provider operations.

pub mod cache;
pub mod capture;
pub mod load;

mod meter;
mod world;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use wasmtime::component::{Linker, ResourceTable};
use wasmtime::{Config, Engine, Store, UpdateDeadline};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::contract::{self, service_provider, types, Operation, Progress, ProviderError};
use crate::limits::{LimitExceeded, Limits};
use crate::provider::Provider;
pub use cache::{CacheOutcome, CompileCache};
pub use capture::GuestLog;
pub use load::LoadError;
use meter::{MemoryLimiter, Meter};

/// The per-run state a store holds.
pub struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    memory: MemoryLimiter,
    meter: Meter,
    provider: Box<dyn Provider>,
    clock: RunClock,
    /// The guest is declaring its subscriptions: no provider call is made.
    declaring: bool,
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

/// A host function's result: the outer error traps the guest (a limit was
/// hit), the inner one is the provider's answer to the guest.
type HostResult<T> = wasmtime::Result<Result<T, ProviderError>>;

impl HostState {
    /// Admits one provider call (or traps, when a limit is reached), runs it
    /// and books its time as host time, which the CPU limit does not count.
    fn call<T>(
        &mut self,
        f: impl FnOnce(&mut dyn Provider) -> Result<T, ProviderError>,
    ) -> HostResult<T> {
        // Interrupted: no new call starts; the policy hears why and goes on
        // to report (or is stopped once its grace is over).
        if let Some(signal) = crate::interrupt::received() {
            return Ok(Err(ProviderError::Unavailable(format!(
                "not run: the run was interrupted by {}",
                crate::interrupt::name(signal)
            ))));
        }
        if self.declaring {
            return Ok(Err(ProviderError::Denied(
                "no provider call is made while a policy declares its subscriptions".to_owned(),
            )));
        }
        self.meter.admit_call()?;
        let started = Instant::now();
        let result = f(self.provider.as_mut());
        self.meter.add_host_time(started.elapsed());
        Ok(result)
    }

    fn mutate(&mut self, operation: Operation, name: String) -> HostResult<Progress> {
        self.call(|p| p.mutate(operation, &name))
    }
}

impl service_provider::Host for HostState {
    fn status(&mut self, name: String) -> HostResult<types::ServiceStatus> {
        self.call(|p| p.status(&name))
    }

    fn start(&mut self, name: String) -> HostResult<Progress> {
        self.mutate(Operation::Start, name)
    }

    fn stop(&mut self, name: String) -> HostResult<Progress> {
        self.mutate(Operation::Stop, name)
    }

    fn restart(&mut self, name: String) -> HostResult<Progress> {
        self.mutate(Operation::Restart, name)
    }

    fn enable(&mut self, name: String) -> HostResult<()> {
        Ok(self.mutate(Operation::Enable, name)?.map(|_| ()))
    }

    fn disable(&mut self, name: String) -> HostResult<()> {
        Ok(self.mutate(Operation::Disable, name)?.map(|_| ()))
    }
}

/// Why a guest did not return a report.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RunFailure {
    /// `cpu-time-limit`, `memory-limit`, `call-budget`, `wall-clock-limit`,
    /// `stack-overflow`, `trap`, `instantiation`, or `subscriptions` (a
    /// declaration the host refused: the policy was not run).
    pub class: &'static str,
    /// Why, as wasmtime or the limit says it; a trap's message may carry
    /// the guest's own words, so it is shown escaped.
    pub message: crate::text::Untrusted,
    /// For a trap: the end of what the guest printed (at most 20 lines,
    /// 2 KiB), where a Rust panic's message, a Python exception's traceback
    /// or a JavaScript error's stack is. The guest's words: in the report,
    /// escaped wherever shown, never on the host's own diagnostics.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<crate::text::Untrusted>,
}

impl RunFailure {
    fn classify(error: &wasmtime::Error, stage: &'static str) -> Self {
        let limit = error
            .downcast_ref::<LimitExceeded>()
            .cloned()
            .or_else(|| MemoryLimiter::count_exceeded(error));
        if let Some(limit) = limit {
            return Self {
                class: limit.class(),
                message: crate::text::Untrusted::new(limit.to_string()),
                output: None,
            };
        }
        let class = match error.downcast_ref::<wasmtime::Trap>() {
            Some(wasmtime::Trap::StackOverflow) => "stack-overflow",
            Some(_) => "trap",
            None => stage,
        };
        Self {
            class,
            message: crate::text::Untrusted::new(format!("{error:#}")),
            output: None,
        }
    }

    /// A trap with the end of what the guest printed ([`Self::output`]).
    fn with_output(mut self, log: &str) -> Self {
        let said = tail_lines(log.trim_end(), OUTPUT_TAIL_LINES, OUTPUT_TAIL_BYTES);
        if matches!(self.class, "trap" | "stack-overflow") && !said.is_empty() {
            self.output = Some(crate::text::Untrusted::new(said));
        }
        self
    }
}

/// How much of the guest's output a trap's failure carries at most.
const OUTPUT_TAIL_LINES: usize = 20;
const OUTPUT_TAIL_BYTES: usize = 2048;

/// The last `lines` lines of `text`, at most `bytes` of them (cut at a
/// character boundary, from the start, marked).
fn tail_lines(text: &str, lines: usize, bytes: usize) -> String {
    let start = text
        .rmatch_indices('\n')
        .nth(lines.saturating_sub(1))
        .map_or(0, |(at, _)| at + 1);
    let tail = &text[start..];
    if tail.len() <= bytes {
        return tail.to_owned();
    }
    let mut cut = tail.len() - bytes;
    while !tail.is_char_boundary(cut) {
        cut += 1;
    }
    format!("[...] {}", &tail[cut..])
}

/// What one run of a policy produced.
pub struct GuestRun {
    /// The guest's report, as it gave it (the `guest` module decides what
    /// to believe of it), or why the guest did not finish.
    pub outcome: Result<contract::Report, RunFailure>,
    /// The guest's stdout and stderr.
    pub log: String,
    /// The provider, with the record of every operation it carried out.
    pub provider: Box<dyn Provider>,
    /// What the policy was told of its subscriptions (`watch`'s answer),
    /// handed back: whoever lent its references to the guest takes them
    /// back rather than holding a copy.
    pub watched: Vec<contract::Watched>,
}

/// A policy compiled and linked, ready to be instantiated for each run.
/// A clone shares the compiled code (a watch keeps one for its next runs).
#[derive(Clone)]
pub struct LoadedPolicy {
    pre: world::Pre,
    /// Whether the compiled code came from the cache.
    pub cache: CacheOutcome,
    /// Time to compile (or load) and link it.
    pub load_time: Duration,
    /// Its own guest memory limit (host.toml's `[[policy]] memory_mib`),
    /// over the run's.
    memory_bytes: Option<usize>,
}

impl LoadedPolicy {
    /// Runs it with its own guest memory limit instead of the run's.
    pub fn with_memory_limit(mut self, bytes: Option<usize>) -> Self {
        self.memory_bytes = bytes;
        self
    }

    /// The same compiled and linked policy, for another run of the process
    /// that loaded it (`host watch`): said as [`CacheOutcome::Kept`], with
    /// the time it took to find it.
    pub fn kept(&self, found_in: Duration) -> Self {
        Self {
            cache: CacheOutcome::Kept,
            load_time: found_in,
            ..self.clone()
        }
    }
}

/// Compiles and runs policies. Build it once per process: the engine and the
/// linker are shared by every policy run (and a watch's runs share them
/// through [`PolicyRuntime::with_limits`]).
pub struct PolicyRuntime {
    linked: Arc<Linked>,
    limits: Limits,
}

/// The engine, and the linker holding WASI and the service provider: what
/// takes a run about a millisecond to build, and what every component the
/// engine compiled must be instantiated with.
struct Linked {
    engine: Engine,
    linker: Linker<HostState>,
}

/// How often the epoch advances: fine enough that a deadline of a second is
/// met within about 1%, coarse enough to cost nothing measurable.
const EPOCH_TICK: Duration = Duration::from_millis(10);

impl PolicyRuntime {
    pub fn new(limits: Limits) -> anyhow::Result<Self> {
        let mut config = Config::new();
        config.wasm_component_model(true);
        config.epoch_interruption(true);
        let engine =
            anyhow_result(Engine::new(&config)).context("creating the WebAssembly engine")?;
        let mut linker = Linker::new(&engine);
        anyhow_result(wasmtime_wasi::p2::add_to_linker_sync(&mut linker))
            .context("linking WASI")?;
        anyhow_result(world::add_to_linker(&mut linker)).context("linking the service provider")?;
        anyhow_result(cap_sleeps(&mut linker)).context("linking the capped clock")?;
        Ok(Self {
            linked: Arc::new(Linked { engine, linker }),
            limits,
        })
    }

    /// The same engine and linker, running with `limits` (host.toml as a
    /// later run read it): the policies this runtime loaded stay usable.
    pub fn with_limits(&self, limits: Limits) -> Self {
        Self {
            linked: Arc::clone(&self.linked),
            limits,
        }
    }

    /// The engine, for inspecting components.
    pub fn engine(&self) -> &Engine {
        &self.linked.engine
    }

    /// Checks and compiles a policy component (or loads it from `cache`),
    /// and links it once, so that every run of it only instantiates.
    pub fn load(
        &self,
        bytes: &[u8],
        cache: Option<&CompileCache>,
    ) -> Result<LoadedPolicy, LoadError> {
        let started = Instant::now();
        let checked = load::load_component(&self.linked.engine, bytes, cache)?;
        let pre = self
            .linked
            .linker
            .instantiate_pre(&checked.component)
            .and_then(|pre| match checked.contract {
                Some(version) => world::Pre::new(version, pre),
                None => world::Pre::any(pre),
            })
            .map_err(|e| LoadError::compile(&e.into()))?;
        Ok(LoadedPolicy {
            pre,
            cache: checked.cache,
            load_time: started.elapsed(),
            memory_bytes: None,
        })
    }

    /// Runs `component` once, in a fresh store, against `provider`: it
    /// declares its subscriptions (no provider call answers then), `watch`
    /// looks at them (before the run's deadline, which it is given) and says
    /// what changed, and the policy runs with that. A declaration `watch`
    /// refuses fails the run (class `subscriptions`): `run` is not called.
    pub fn run(
        &self,
        policy: &LoadedPolicy,
        mut options: contract::RunOptions,
        provider: Box<dyn Provider>,
        watch: impl FnOnce(
            Result<Vec<contract::Subscription>, String>,
            Instant,
        ) -> Result<Vec<contract::Watched>, crate::text::Untrusted>,
    ) -> anyhow::Result<GuestRun> {
        let limits = Limits {
            memory_bytes: policy.memory_bytes.unwrap_or(self.limits.memory_bytes),
            ..self.limits
        };
        let log = GuestLog::new(limits.log_bytes);
        let clock = RunClock(Instant::now());
        let wasi = sandboxed_wasi(&log, clock);
        let state = HostState {
            wasi,
            table: ResourceTable::new(),
            memory: MemoryLimiter::new(limits.memory_bytes),
            meter: Meter::new(limits),
            provider,
            clock,
            declaring: false,
        };
        let mut store = Store::new(&self.linked.engine, state);
        // No systemctl command may outlive the run's wall-clock limit.
        let deadline = store.data().meter.wall_deadline();
        store.data_mut().provider.set_deadline(deadline);
        store.limiter(|s| &mut s.memory);
        store.set_epoch_deadline(Meter::ticks(
            self.limits.cpu_time.min(self.limits.wall_clock),
            EPOCH_TICK,
        ));
        store.epoch_deadline_callback(|ctx| {
            if let (Some(signal), Some(since)) =
                (crate::interrupt::received(), crate::interrupt::since())
            {
                if since >= crate::interrupt::POLICY_GRACE {
                    return Err(LimitExceeded::Interrupted(crate::interrupt::name(signal)).into());
                }
            }
            let remaining = ctx.data().meter.check_time()?;
            Ok(UpdateDeadline::Continue(Meter::ticks(
                remaining, EPOCH_TICK,
            )))
        });

        let outcome = self.with_epoch_ticker(|| {
            let policy = policy
                .pre
                .instantiate(&mut store)
                .map_err(|e| RunFailure::classify(&e, "instantiation"))?;
            store.data_mut().declaring = true;
            let declared = policy
                .call_subscriptions(&mut store, options.settings.as_deref(), &options.facts)
                .map_err(|e| RunFailure::classify(&e, "trap"))?;
            store.data_mut().declaring = false;
            options.watched = watch(declared, deadline).map_err(|why| RunFailure {
                class: "subscriptions",
                message: crate::text::Untrusted::new(format!("subscriptions: {}", why.as_raw())),
                output: None,
            })?;
            policy
                .call_run(&mut store, &options)
                .map_err(|e| RunFailure::classify(&e, "trap"))
        });
        let state = store.into_data();
        let log = log.contents();
        Ok(GuestRun {
            outcome: outcome.map_err(|failure| failure.with_output(&log)),
            log,
            provider: state.provider,
            watched: options.watched,
        })
    }
}

impl PolicyRuntime {
    /// Runs `f` while a thread advances the engine's epoch every [`EPOCH_TICK`].
    /// The ticker waits on a channel rather than sleeping, so it ends the
    /// moment `f` returns (or panics) instead of up to a tick later.
    fn with_epoch_ticker<R>(&self, f: impl FnOnce() -> R) -> R {
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        std::thread::scope(|scope| {
            scope.spawn(move || {
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(EPOCH_TICK)
                {
                    self.linked.engine.increment_epoch();
                }
            });
            // Dropped when `f` returns or unwinds: the ticker's channel disconnects.
            let _stop = stop;
            f()
        })
    }
}

/// WASI with nothing granted: no arguments, no environment, no preopened
/// directories, no network or name lookup, empty stdin; stdout and stderr go
/// to the bounded log.
fn sandboxed_wasi(log: &GuestLog, clock: RunClock) -> WasiCtx {
    WasiCtxBuilder::new()
        .monotonic_clock(clock)
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

/// A sleep the guest asked for, cut short at the run's limits.
struct CappedSleep(tokio::time::Instant);

#[wasmtime_wasi::async_trait]
impl wasmtime_wasi::p2::Pollable for CappedSleep {
    async fn ready(&mut self) {
        tokio::time::sleep_until(self.0).await
    }
}

/// Replaces `monotonic-clock.subscribe-duration`/`subscribe-instant`: a guest
/// blocked in a host call is beyond epoch interruption, so its sleeps end
/// when its time is up and the next epoch check stops it.
fn cap_sleeps(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    use wasmtime::component::Resource;
    use wasmtime::StoreContextMut;
    use wasmtime_wasi::p2::DynPollable;
    fn subscribe(
        mut store: StoreContextMut<'_, HostState>,
        wanted: Duration,
    ) -> wasmtime::Result<(Resource<DynPollable>,)> {
        let left = store.data().meter.check_time().unwrap_or(Duration::ZERO);
        let sleep = if wanted > left {
            // Wake just past the limit, and have the first epoch check after
            // waking (not one some ticks later) see that it has passed.
            store.set_epoch_deadline(1);
            left + EPOCH_TICK
        } else {
            wanted
        };
        let state = store.data_mut();
        let pollable = state
            .table
            .push(CappedSleep(tokio::time::Instant::now() + sleep))?;
        Ok((wasmtime_wasi::p2::subscribe(&mut state.table, pollable)?,))
    }
    linker.allow_shadowing(true);
    let mut clock = linker.instance("wasi:clocks/monotonic-clock@0.2.12")?;
    clock.func_wrap("subscribe-duration", |store, (ns,): (u64,)| {
        subscribe(store, Duration::from_nanos(ns))
    })?;
    clock.func_wrap("subscribe-instant", |store, (when,): (u64,)| {
        let now = wasmtime_wasi::HostMonotonicClock::now(&store.data().clock);
        subscribe(store, Duration::from_nanos(when.saturating_sub(now)))
    })?;
    linker.allow_shadowing(false);
    Ok(())
}

/// The guest's monotonic clock: nanoseconds since the run began.
#[derive(Debug, Clone, Copy)]
struct RunClock(Instant);

impl wasmtime_wasi::HostMonotonicClock for RunClock {
    fn resolution(&self) -> u64 {
        1
    }

    fn now(&self) -> u64 {
        u64::try_from(self.0.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::contract::ServiceStatus;
    use crate::provider::CallRecord;

    /// A provider that takes `delay` per call and counts the calls it got.
    struct SlowProvider {
        delay: Duration,
        calls: Arc<Mutex<u32>>,
    }

    impl Provider for SlowProvider {
        fn name(&self) -> &'static str {
            "slow"
        }
        fn unavailable_reason(&self) -> Option<&str> {
            None
        }
        fn status(&mut self, name: &str) -> Result<ServiceStatus, ProviderError> {
            *self.calls.lock().unwrap() += 1;
            std::thread::sleep(self.delay);
            Ok(ServiceStatus {
                name: name.to_owned(),
                provider: "slow".to_owned(),
                enabled: false,
                running: true,
                active_word: "active".to_owned(),
                enabled_word: "disabled".to_owned(),
                job: None,
                restarting: None,
            })
        }
        fn mutate(&mut self, _: Operation, name: &str) -> Result<Progress, ProviderError> {
            *self.calls.lock().unwrap() += 1;
            std::thread::sleep(self.delay);
            Err(ProviderError::not_found(name))
        }
        fn set_deadline(&mut self, _: Instant) {}
        fn take_calls(&mut self) -> Vec<CallRecord> {
            Vec::new()
        }
    }

    fn state(limits: Limits, delay: Duration) -> (HostState, Arc<Mutex<u32>>) {
        let calls = Arc::new(Mutex::new(0));
        let log = GuestLog::new(limits.log_bytes);
        let clock = RunClock(Instant::now());
        let state = HostState {
            wasi: sandboxed_wasi(&log, clock),
            table: ResourceTable::new(),
            memory: MemoryLimiter::new(limits.memory_bytes),
            meter: Meter::new(limits),
            provider: Box::new(SlowProvider {
                delay,
                calls: calls.clone(),
            }),
            clock,
            declaring: false,
        };
        (state, calls)
    }

    #[test]
    fn no_provider_call_is_made_while_a_policy_declares_its_subscriptions() {
        use service_provider::Host as _;
        let (mut state, calls) = state(Limits::generous(), Duration::ZERO);
        state.declaring = true;
        let answer = state.start("web".into()).unwrap();
        assert!(
            matches!(answer, Err(ProviderError::Denied(m)) if m.contains("declares its subscriptions"))
        );
        assert_eq!(*calls.lock().unwrap(), 0, "the provider was never asked");
        state.declaring = false;
        let answer = state.start("web".into()).unwrap();
        assert!(
            !matches!(answer, Err(ProviderError::Denied(_))),
            "{answer:?}"
        );
        assert_eq!(*calls.lock().unwrap(), 1, "the provider was asked");
    }

    #[test]
    fn the_call_over_budget_traps_before_reaching_the_provider() {
        let limits = Limits {
            call_budget: 2,
            ..Limits::generous()
        };
        let (mut state, calls) = state(limits, Duration::ZERO);
        use service_provider::Host as _;
        assert!(state.status("a".into()).unwrap().is_ok());
        assert_eq!(
            state.start("a".into()).unwrap(),
            Err(ProviderError::NotFound("service not found: a".into())),
            "the provider's answer reaches the guest unchanged"
        );
        let trap = state.stop("a".into()).unwrap_err();
        assert_eq!(
            trap.downcast_ref::<LimitExceeded>(),
            Some(&LimitExceeded::CallBudget(2))
        );
        assert_eq!(*calls.lock().unwrap(), 2, "the third call never ran");
    }

    #[test]
    fn time_inside_provider_calls_is_not_guest_cpu_time() {
        let limits = Limits {
            cpu_time: Duration::from_millis(150),
            ..Limits::generous()
        };
        let (mut state, _) = state(limits, Duration::from_millis(100));
        use service_provider::Host as _;
        for _ in 0..3 {
            assert!(state.status("a".into()).unwrap().is_ok());
        }
        // 300 ms have passed, all of them inside the provider.
        assert!(state.meter.check_time().is_ok());
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(
            state.meter.check_time(),
            Err(LimitExceeded::CpuTime(Duration::from_millis(150))),
            "time outside the provider counts"
        );
    }
}

#[cfg(test)]
mod output_tests {
    use super::*;

    #[test]
    fn a_traps_output_is_its_last_lines_bounded_at_a_character() {
        let log = (1..=30)
            .map(|i| format!("line {i}"))
            .collect::<Vec<_>>()
            .join("\n");
        let tail = tail_lines(&log, 20, 2048);
        assert!(tail.starts_with("line 11\n"), "{tail}");
        assert!(tail.ends_with("line 30"), "{tail}");
        let wide = "é".repeat(3000);
        let tail = tail_lines(&wide, 20, 2048);
        assert!(tail.starts_with("[...] "), "{tail}");
        assert!(tail.len() <= 2048 + "[...] ".len());
        assert_eq!(tail_lines("", 20, 2048), "");
    }

    #[test]
    fn only_a_trap_carries_the_output() {
        let failure = |class| RunFailure {
            class,
            message: crate::text::Untrusted::new("x".to_owned()),
            output: None,
        };
        let said = "Traceback (most recent call last):\nValueError: eighty\n";
        let trap = failure("trap").with_output(said);
        assert_eq!(
            trap.output.map(|o| o.as_raw().to_owned()),
            Some("Traceback (most recent call last):\nValueError: eighty".to_owned())
        );
        assert_eq!(failure("cpu-time-limit").with_output(said).output, None);
        assert_eq!(failure("trap").with_output("  \n").output, None);
    }
}
