//! Accounting for one run: guest time, host time, provider calls, memory.

use std::time::{Duration, Instant};

use wasmtime::ResourceLimiter;

use crate::limits::{LimitExceeded, Limits};

/// The clock and call counter of one run.
#[derive(Debug)]
pub struct Meter {
    limits: Limits,
    started: Instant,
    host_time: Duration,
    calls: u64,
}

impl Meter {
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            started: Instant::now(),
            host_time: Duration::ZERO,
            calls: 0,
        }
    }

    /// Epoch ticks that cover `time` (at least one, so time always advances).
    pub fn ticks(time: Duration, tick: Duration) -> u64 {
        (time.as_nanos() / tick.as_nanos()).clamp(1, u64::MAX as u128) as u64
    }

    /// When the whole run must be over.
    pub fn wall_deadline(&self) -> Instant {
        self.started + self.limits.wall_clock
    }

    pub fn add_host_time(&mut self, time: Duration) {
        self.host_time += time;
    }

    /// Counts one provider call; the call past the budget, or one made after
    /// the wall-clock limit, stops the guest.
    pub fn admit_call(&mut self) -> Result<(), LimitExceeded> {
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
    pub fn check_time(&self) -> Result<Duration, LimitExceeded> {
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

/// Refuses memory growth past the limit with an error that names it (a
/// plain refusal would surface in the guest as an anonymous abort).
#[derive(Debug)]
pub struct MemoryLimiter {
    limit: usize,
}

impl MemoryLimiter {
    /// The most table elements a guest may have; a policy needs a few hundred.
    const MAX_TABLE_ELEMENTS: usize = 100_000;

    pub fn new(limit: usize) -> Self {
        Self { limit }
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.limit {
            return Err(LimitExceeded::Memory {
                limit: self.limit,
                requested: desired,
            }
            .into());
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= Self::MAX_TABLE_ELEMENTS)
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

    #[test]
    fn memory_growth_past_the_limit_is_a_named_error() {
        let mut limiter = MemoryLimiter::new(1 << 20);
        assert!(limiter.memory_growing(0, 1 << 20, None).unwrap());
        let err = limiter.memory_growing(1 << 20, 2 << 20, None).unwrap_err();
        assert!(matches!(
            err.downcast_ref::<LimitExceeded>(),
            Some(LimitExceeded::Memory { .. })
        ));
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
