//! Accounting for one run: guest time, host time, provider calls, memory.

use std::time::{Duration, Instant};

use wasmtime::ResourceLimiter;

use crate::limits::{LimitExceeded, Limits};

/// The clock and call counter of one run.
#[derive(Debug)]
pub(super) struct Meter {
    limits: Limits,
    started: Instant,
    host_time: Duration,
    calls: u64,
}

impl Meter {
    pub(super) fn new(limits: Limits) -> Self {
        Self {
            limits,
            started: Instant::now(),
            host_time: Duration::ZERO,
            calls: 0,
        }
    }

    /// Epoch ticks that cover `time` (at least one, so time always advances).
    pub(super) fn ticks(time: Duration, tick: Duration) -> u64 {
        (time.as_nanos() / tick.as_nanos()).clamp(1, u64::MAX as u128) as u64
    }

    /// When the whole run must be over.
    pub(super) fn wall_deadline(&self) -> Instant {
        self.started + self.limits.wall_clock
    }

    pub(super) fn add_host_time(&mut self, time: Duration) {
        self.host_time += time;
    }

    /// Counts one provider call; the call past the budget, or one made after
    /// the wall-clock limit, stops the guest.
    pub(super) fn admit_call(&mut self) -> Result<(), LimitExceeded> {
        if self.started.elapsed() >= self.limits.wall_clock {
            return Err(LimitExceeded::WallClock(self.limits.wall_clock));
        }
        self.calls += 1;
        if self.calls > self.limits.call_budget {
            return Err(LimitExceeded::CallBudget(self.limits.call_budget));
        }
        Ok(())
    }

    /// Called when the epoch deadline passes: the time the guest may still
    /// run before the next check, or the limit it has hit. Guest time is the
    /// run's time less the time spent in host calls (systemctl can be slow,
    /// and that is not the policy's doing).
    pub(super) fn check_time(&self) -> Result<Duration, LimitExceeded> {
        let elapsed = self.started.elapsed();
        let wall_left = self
            .limits
            .wall_clock
            .checked_sub(elapsed)
            .filter(|d| !d.is_zero())
            .ok_or(LimitExceeded::WallClock(self.limits.wall_clock))?;
        let guest = elapsed.saturating_sub(self.host_time);
        let cpu_left = self
            .limits
            .cpu_time
            .checked_sub(guest)
            .filter(|d| !d.is_zero())
            .ok_or(LimitExceeded::CpuTime(self.limits.cpu_time))?;
        Ok(cpu_left.min(wall_left))
    }
}

/// One memory budget per run: every linear memory and every table of the
/// store, counted together in bytes, stays within the limit, and the number of
/// core instances, memories and tables is capped. Growth past the budget
/// fails with an error that names it (a plain refusal would surface in the
/// guest as an anonymous abort).
///
/// A store lives for one run and wasm can neither shrink nor free a memory or
/// a table, so the total only grows. It counts what was granted: a growth
/// wasmtime then fails to carry out (`memory_grow_failed`, for example when
/// the system is out of memory) stays counted, which can only stop a guest
/// early, never let it past the limit. Growth beyond a memory's or table's
/// own declared maximum is refused here, uncounted, as wasm says it must.
#[derive(Debug)]
pub(super) struct MemoryLimiter {
    limit: usize,
    /// Bytes granted so far: the size of every memory, plus
    /// [`Self::TABLE_ELEMENT_BYTES`] per table element.
    used: usize,
}

impl MemoryLimiter {
    /// The most table elements one table may have; a policy needs a few hundred.
    const MAX_TABLE_ELEMENTS: usize = 100_000;

    /// What one table element is counted as. wasmtime 48 keeps a funcref
    /// table's elements as one pointer each (8 bytes), written as the table
    /// grows, in a `Vec` whose capacity may reach twice its length when it
    /// is grown piece by piece; so an element counts as 16 bytes. (Tables of
    /// other element types need wasmtime features the host does not enable.)
    const TABLE_ELEMENT_BYTES: usize = 16;

    /// Core module instances in one run. A Rust policy built for
    /// `wasm32-wasip2` has 3 (its own module, and the shim and fixup modules
    /// `wit-component` adds); the cap leaves room for components composed of
    /// several.
    pub(super) const MAX_INSTANCES: usize = 32;

    /// Linear memories in one run, over all instances. A Rust policy has 1;
    /// an empty memory costs no budget but still reserves gigabytes of
    /// address space and a few kernel mappings.
    pub(super) const MAX_MEMORIES: usize = 16;

    /// Tables in one run, over all instances. A Rust policy has 2.
    pub(super) const MAX_TABLES: usize = 32;

    pub(super) fn new(limit: usize) -> Self {
        Self { limit, used: 0 }
    }

    /// Grants `more` bytes, or fails when the run's total would pass the limit.
    fn charge(&mut self, more: usize) -> Result<(), LimitExceeded> {
        let total = self.used.saturating_add(more);
        if total > self.limit {
            return Err(LimitExceeded::Memory {
                limit: self.limit,
                requested: total,
            });
        }
        self.used = total;
        Ok(())
    }

    /// The count cap a wasmtime error reports as exceeded, if it is one.
    /// wasmtime enforces [`ResourceLimiter::instances`], `memories` and
    /// `tables` itself when it instantiates a module, with an error that says
    /// so only in its text: "resource limit exceeded: memory count too high
    /// at 17". (A unit test pins that text.)
    pub(super) fn count_exceeded(error: &wasmtime::Error) -> Option<LimitExceeded> {
        error.chain().find_map(|cause| {
            let text = cause.to_string();
            let rest = text.strip_prefix("resource limit exceeded: ")?;
            let (kind, count) = rest.split_once(" count too high at ")?;
            let (what, limit) = match kind {
                "instance" => ("core instances", Self::MAX_INSTANCES),
                "memory" => ("linear memories", Self::MAX_MEMORIES),
                "table" => ("tables", Self::MAX_TABLES),
                _ => return None,
            };
            Some(LimitExceeded::MemoryCount {
                what,
                limit,
                requested: count.trim().parse().ok()?,
            })
        })
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if maximum.is_some_and(|max| desired > max) {
            // wasmtime would fail it anyway; memory.grow returns -1.
            return Ok(false);
        }
        self.charge(desired.saturating_sub(current))?;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > Self::MAX_TABLE_ELEMENTS || maximum.is_some_and(|max| desired > max) {
            return Ok(false);
        }
        let more = desired.saturating_sub(current);
        self.charge(more.saturating_mul(Self::TABLE_ELEMENT_BYTES))?;
        Ok(true)
    }

    fn instances(&self) -> usize {
        Self::MAX_INSTANCES
    }

    fn memories(&self) -> usize {
        Self::MAX_MEMORIES
    }

    fn tables(&self) -> usize {
        Self::MAX_TABLES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(calls: u64) -> Limits {
        Limits {
            call_budget: calls,
            ..Limits::generous()
        }
    }

    #[test]
    fn call_budget_admits_exactly_the_budget() {
        let mut meter = Meter::new(limits(3));
        for _ in 0..3 {
            meter.admit_call().unwrap();
        }
        assert_eq!(meter.admit_call(), Err(LimitExceeded::CallBudget(3)));
    }

    #[test]
    fn host_time_does_not_count_against_the_cpu_limit() {
        let mut meter = Meter::new(Limits {
            cpu_time: Duration::from_millis(50),
            ..Limits::generous()
        });
        std::thread::sleep(Duration::from_millis(80));
        assert_eq!(
            meter.check_time(),
            Err(LimitExceeded::CpuTime(Duration::from_millis(50)))
        );
        meter.add_host_time(Duration::from_millis(80));
        assert!(
            meter.check_time().is_ok(),
            "time spent in host calls is not guest time"
        );
    }

    const MIB: usize = 1 << 20;

    #[track_caller]
    fn assert_over(result: wasmtime::Result<bool>, limit: usize, requested: usize) {
        let err = result.unwrap_err();
        assert_eq!(
            err.downcast_ref::<LimitExceeded>(),
            Some(&LimitExceeded::Memory { limit, requested })
        );
    }

    #[test]
    fn memory_growth_past_the_limit_is_a_named_error() {
        let mut limiter = MemoryLimiter::new(MIB);
        assert!(limiter.memory_growing(0, MIB, None).unwrap());
        assert_over(limiter.memory_growing(MIB, 2 * MIB, None), MIB, 2 * MIB);
        let err = limiter.memory_growing(MIB, 2 * MIB, None).unwrap_err();
        assert_eq!(
            err.downcast_ref::<LimitExceeded>().unwrap().class(),
            "memory-limit"
        );
        assert_contains(
            &err.to_string(),
            "grow its memory and tables to 2097152 bytes in total, over its limit of 1048576 bytes",
        );
    }

    #[test]
    fn memories_share_one_budget() {
        // Each memory stays well under the limit; together they do not.
        let mut limiter = MemoryLimiter::new(32 * MIB);
        for _ in 0..3 {
            assert!(limiter.memory_growing(0, 10 * MIB, None).unwrap());
        }
        assert_over(
            limiter.memory_growing(0, 10 * MIB, None),
            32 * MIB,
            40 * MIB,
        );
        // A refused growth is not counted: what is left can still be used.
        assert!(limiter.memory_growing(10 * MIB, 12 * MIB, None).unwrap());
        assert_over(
            limiter.memory_growing(0, 64 << 10, None),
            32 * MIB,
            (32 * MIB) + (64 << 10),
        );
    }

    #[test]
    fn growth_is_counted_from_the_current_size() {
        let mut limiter = MemoryLimiter::new(4 * MIB);
        let mut size = 0;
        // Page by page up to the limit, as an allocator does.
        while size < 4 * MIB {
            assert!(limiter
                .memory_growing(size, size + (64 << 10), None)
                .unwrap());
            size += 64 << 10;
        }
        assert_over(
            limiter.memory_growing(size, size + (64 << 10), None),
            4 * MIB,
            4 * MIB + (64 << 10),
        );
    }

    #[test]
    fn growth_past_a_declared_maximum_fails_uncounted() {
        let mut limiter = MemoryLimiter::new(MIB);
        assert!(!limiter.memory_growing(0, 2 * MIB, Some(MIB / 2)).unwrap());
        assert!(!limiter.table_growing(0, 20, Some(10)).unwrap());
        assert!(
            limiter.memory_growing(0, MIB, Some(MIB)).unwrap(),
            "nothing was counted"
        );
    }

    #[test]
    fn tables_count_against_the_same_budget() {
        let element = MemoryLimiter::TABLE_ELEMENT_BYTES;
        let mut limiter = MemoryLimiter::new(MIB);
        assert!(limiter.memory_growing(0, MIB / 2, None).unwrap());
        let half = MIB / 2 / element;
        assert!(limiter.table_growing(0, half / 2, None).unwrap());
        assert!(limiter.table_growing(half / 2, half, None).unwrap());
        assert_over(limiter.table_growing(0, 1, None), MIB, MIB + element);
        assert_over(
            limiter.memory_growing(MIB / 2, MIB / 2 + (64 << 10), None),
            MIB,
            MIB + (64 << 10),
        );
    }

    #[test]
    fn one_table_is_capped_in_elements_whatever_the_budget() {
        let mut limiter = MemoryLimiter::new(usize::MAX);
        let cap = MemoryLimiter::MAX_TABLE_ELEMENTS;
        assert!(limiter.table_growing(0, cap, None).unwrap());
        assert!(!limiter.table_growing(cap, cap + 1, None).unwrap());
    }

    #[test]
    fn the_counts_are_capped() {
        let limiter = MemoryLimiter::new(MIB);
        assert_eq!(limiter.instances(), MemoryLimiter::MAX_INSTANCES);
        assert_eq!(limiter.memories(), MemoryLimiter::MAX_MEMORIES);
        assert_eq!(limiter.tables(), MemoryLimiter::MAX_TABLES);
    }

    // ---- against wasmtime itself: what it really calls, and what it says

    fn engine() -> wasmtime::Engine {
        wasmtime::Engine::default()
    }

    fn new_store(engine: &wasmtime::Engine, limit: usize) -> wasmtime::Store<MemoryLimiter> {
        let mut store = wasmtime::Store::new(engine, MemoryLimiter::new(limit));
        store.limiter(|s| s);
        store
    }

    fn module(engine: &wasmtime::Engine, wat: &str) -> wasmtime::Module {
        wasmtime::Module::new(engine, wat::parse_str(wat).unwrap()).unwrap()
    }

    /// A module that defines `item` (a memory or a table) `n` times.
    fn many(n: usize, item: &str) -> String {
        format!("(module {})", format!("({item})").repeat(n))
    }

    #[test]
    fn memories_of_one_instance_add_up_in_wasmtime() {
        let engine = engine();
        // Four memories of 1 MiB fit in 4 MiB; a fifth does not.
        let mut store = new_store(&engine, 4 * MIB);
        let err = wasmtime::Instance::new(&mut store, &module(&engine, &many(5, "memory 16")), &[])
            .unwrap_err();
        assert_eq!(
            err.downcast_ref::<LimitExceeded>(),
            Some(&LimitExceeded::Memory {
                limit: 4 * MIB,
                requested: 5 * MIB
            })
        );
        let mut store = new_store(&engine, 4 * MIB);
        wasmtime::Instance::new(&mut store, &module(&engine, &many(4, "memory 16")), &[]).unwrap();
    }

    #[test]
    fn memory_grow_is_stopped_at_the_run_total() {
        let engine = engine();
        let wat = r#"(module
            (memory $a 16) (memory $b 0)
            (func (export "grow") (param i32) (result i32)
                (memory.grow $b (local.get 0))))"#;
        let mut store = new_store(&engine, 4 * MIB);
        let instance = wasmtime::Instance::new(&mut store, &module(&engine, wat), &[]).unwrap();
        let grow = instance
            .get_typed_func::<i32, i32>(&mut store, "grow")
            .unwrap();
        // 1 MiB in $a, 3 MiB more in $b: exactly the limit.
        assert_eq!(grow.call(&mut store, 48).unwrap(), 0);
        let trap = grow.call(&mut store, 1).unwrap_err();
        assert_eq!(
            trap.downcast_ref::<LimitExceeded>(),
            Some(&LimitExceeded::Memory {
                limit: 4 * MIB,
                requested: 4 * MIB + (64 << 10)
            })
        );
    }

    #[test]
    fn table_grow_is_counted_in_wasmtime() {
        let engine = engine();
        let wat = r#"(module
            (table $t 0 funcref)
            (func (export "grow") (param i32) (result i32)
                (table.grow $t (ref.null func) (local.get 0))))"#;
        let element = MemoryLimiter::TABLE_ELEMENT_BYTES;
        let mut store = new_store(&engine, 1000 * element);
        let instance = wasmtime::Instance::new(&mut store, &module(&engine, wat), &[]).unwrap();
        let grow = instance
            .get_typed_func::<i32, i32>(&mut store, "grow")
            .unwrap();
        assert_eq!(grow.call(&mut store, 1000).unwrap(), 0);
        let trap = grow.call(&mut store, 1).unwrap_err();
        assert_eq!(
            trap.downcast_ref::<LimitExceeded>(),
            Some(&LimitExceeded::Memory {
                limit: 1000 * element,
                requested: 1001 * element
            })
        );
    }

    #[test]
    fn tables_hold_only_funcref() {
        // TABLE_ELEMENT_BYTES assumes funcref tables: with wasmtime's `gc`
        // feature (externref, GC references) it would need another look.
        let bytes = wat::parse_str("(module (table 1 externref))").unwrap();
        assert!(wasmtime::Module::new(&engine(), bytes).is_err());
    }

    /// wasmtime's error for each count cap, as `count_exceeded` reads it.
    #[track_caller]
    fn assert_count_exceeded(err: &wasmtime::Error, what: &str, limit: usize) {
        assert_eq!(
            MemoryLimiter::count_exceeded(err),
            Some(LimitExceeded::MemoryCount {
                what: match what {
                    "instances" => "core instances",
                    "memories" => "linear memories",
                    _ => "tables",
                },
                limit,
                requested: limit + 1
            }),
            "{err:#}"
        );
    }

    #[test]
    fn wasmtime_enforces_the_count_caps_in_words_we_recognise() {
        let engine = engine();
        let cap = MemoryLimiter::MAX_MEMORIES;
        let mut store = new_store(&engine, 64 * MIB);
        wasmtime::Instance::new(&mut store, &module(&engine, &many(cap, "memory 0")), &[]).unwrap();
        let err = wasmtime::Instance::new(&mut store, &module(&engine, &many(1, "memory 0")), &[])
            .unwrap_err();
        assert_count_exceeded(&err, "memories", cap);

        let cap = MemoryLimiter::MAX_TABLES;
        let mut store = new_store(&engine, 64 * MIB);
        let err = wasmtime::Instance::new(
            &mut store,
            &module(&engine, &many(cap + 1, "table 0 funcref")),
            &[],
        )
        .unwrap_err();
        assert_count_exceeded(&err, "tables", cap);

        let cap = MemoryLimiter::MAX_INSTANCES;
        let mut store = new_store(&engine, 64 * MIB);
        let empty = module(&engine, "(module)");
        for _ in 0..cap {
            wasmtime::Instance::new(&mut store, &empty, &[]).unwrap();
        }
        let err = wasmtime::Instance::new(&mut store, &empty, &[]).unwrap_err();
        assert_count_exceeded(&err, "instances", cap);
        assert_contains(
            &err_message(&err),
            &format!("create {} core instances, over its limit of {cap}", cap + 1),
        );
    }

    fn err_message(err: &wasmtime::Error) -> String {
        MemoryLimiter::count_exceeded(err).unwrap().to_string()
    }

    #[test]
    fn other_errors_are_not_count_caps() {
        let err = wasmtime::format_err!("resource limit exceeded: stack count too high at 3");
        assert_eq!(MemoryLimiter::count_exceeded(&err), None);
        let err = wasmtime::format_err!("something else");
        assert_eq!(MemoryLimiter::count_exceeded(&err), None);
    }

    #[track_caller]
    fn assert_contains(haystack: &str, needle: &str) {
        assert!(haystack.contains(needle), "{needle:?} not in {haystack:?}");
    }

    #[test]
    fn ticks_never_round_to_zero() {
        assert_eq!(Meter::ticks(Duration::ZERO, Duration::from_millis(10)), 1);
        assert_eq!(
            Meter::ticks(Duration::from_secs(10), Duration::from_millis(10)),
            1000
        );
    }
}
