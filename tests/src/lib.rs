//! The end-to-end test harness: builds policies and the `host` binary, and
//! provides the two systems they run against: a fake `systemctl` (fast,
//! deterministic, for fault injection) and a real systemd booted in a
//! throwaway sandbox.

pub mod build;
pub mod executable;
pub mod fake_systemctl;
pub mod host_run;
pub mod languages;
pub mod machine;
pub mod metrics;
pub mod outcome;
pub mod registry;
pub mod requires;
pub mod sandbox;
pub mod scratch;
pub mod watching;
