//! The end-to-end suite: one test binary, one module per area, each running
//! the real `host` binary (against the fake `systemctl`, a sandboxed systemd
//! 252, a real registry, the Debian package).
//!
//! One binary, not one per area: libtest then runs every area's tests side
//! by side, so the slow ones (the package's release build, systemd boots)
//! overlap with the rest instead of each binary waiting for the one before
//! it, and the harness is linked once. Run one area with
//! `cargo test -p policy-host --test e2e -- AREA::` (for example
//! `honest_outcomes::`). A test that needs root or a tool says so with
//! `#[e2e_test(requires = "root, systemd")]` (`policy_host_e2e::requires`):
//! on a machine that lacks it, it is reported as ignored with the reason,
//! and under `CI=true` it fails instead.

mod contracts;
mod debian_package;
mod facts;
mod fake_systemctl;
mod faults;
mod fleet;
mod honest_outcomes;
mod host_record;
mod hostile;
mod key_interop;
mod languages;
mod local_attacker;
mod memory_budget;
mod monitoring;
mod no_systemd;
mod operator;
mod parallel_jobs;
mod real_systemd;
mod scaffold;
mod signatures;
mod status_agreement;
mod subscriptions;
mod supply_chain;
mod timer;
mod watch;
mod watch_attacker;
mod whole_truth;
