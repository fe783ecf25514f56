//! The policy host: runs WebAssembly policies that keep systemd services in
//! their desired state.
//!
//! The host is the trusted side. It gives a policy exactly six operations
//! (status, start, stop, restart, enable, disable), re-checks every service
//! name it receives, and asks systemd itself (over D-Bus, or with
//! `systemctl`). All desired-state logic
//! lives in the policy (see the `guest-sdk` crate).

pub mod admission;
pub mod atomic_file;
pub mod cli;
pub mod commands;
pub mod compose;
pub mod contract;
pub mod facts;
pub mod fs_safety;
pub mod guest;
pub mod interrupt;
pub mod io_runtime;
pub mod left_alone;
pub mod limits;
pub mod lock;
pub mod logging;
pub mod oci;
pub mod program;
pub mod provider;
pub mod report;
pub mod resource;
pub mod runtime;
pub mod service_name;
pub mod settings;
pub mod signature;
pub mod state_file;
pub mod subscriptions;
pub mod text;
pub mod versions;
