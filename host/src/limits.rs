//! The limits every policy run is held to, and the errors that say which one
//! was hit.
//!
//! A policy is untrusted code: without limits an endless loop, an allocation
//! bomb or a flood of provider calls would hurt the machine it is meant to
//! keep in shape. Each limit has a default suitable for real policies and a
//! `host run` option (both declared in `settings`), and an error class of its
//! own in the report.

use std::time::Duration;

use thiserror::Error;

/// The limits of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Time the guest itself may run, host calls excluded.
    pub cpu_time: Duration,
    /// What all of a guest's linear memories and tables may take together,
    /// in bytes (one budget per run, not one per memory; see
    /// `runtime::meter::MemoryLimiter` for how tables are counted).
    pub memory_bytes: usize,
    /// Provider calls (status included) a guest may make in one run.
    pub call_budget: u64,
    /// Captured guest stdout and stderr together, in bytes.
    pub log_bytes: usize,
    /// The text a guest's report may hold (resource names, messages), in bytes.
    pub report_bytes: usize,
    /// The whole run, host calls and systemctl included.
    pub wall_clock: Duration,
}

#[cfg(test)]
impl Limits {
    /// Limits no unit test reaches unless it lowers one of them.
    pub(crate) fn generous() -> Self {
        Self {
            cpu_time: Duration::from_secs(60),
            memory_bytes: 64 << 20,
            call_budget: 1_000_000,
            log_bytes: 1 << 20,
            report_bytes: 1 << 20,
            wall_clock: Duration::from_secs(600),
        }
    }
}

/// A limit a run hit. Raised inside the store as the cause of a trap, then
/// recovered by downcasting, so the report can name it.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LimitExceeded {
    #[error("the policy used more than its CPU time limit of {}s and was stopped", .0.as_secs_f64())]
    CpuTime(Duration),
    /// `requested` is the total the growth would have reached: every linear
    /// memory and every table of the run together.
    #[error(
        "the policy tried to grow its memory and tables to {requested} bytes in total, over its limit of {limit} bytes"
    )]
    Memory { limit: usize, requested: usize },
    /// Too many core instances, linear memories or tables (`what`) in one run.
    #[error("the policy tried to create {requested} {what}, over its limit of {limit}")]
    MemoryCount {
        what: &'static str,
        limit: usize,
        requested: usize,
    },
    #[error("the policy made more than its budget of {0} provider calls and was stopped")]
    CallBudget(u64),
    #[error("the run took longer than its wall-clock limit of {}s and was stopped", .0.as_secs_f64())]
    WallClock(Duration),
    /// Not a limit of the policy's: the host was told to stop (SIGTERM,
    /// SIGINT, SIGHUP), and the policy did not end within its grace.
    #[error("the run was interrupted by {0} and the policy was stopped")]
    Interrupted(&'static str),
}

impl LimitExceeded {
    /// The error class in reports.
    pub fn class(&self) -> &'static str {
        match self {
            LimitExceeded::CpuTime(_) => "cpu-time-limit",
            LimitExceeded::Memory { .. } | LimitExceeded::MemoryCount { .. } => "memory-limit",
            LimitExceeded::CallBudget(_) => "call-budget",
            LimitExceeded::WallClock(_) => "wall-clock-limit",
            LimitExceeded::Interrupted(_) => "interrupted",
        }
    }
}
