//! `cargo run --release -p policy-host-e2e --features bench --bin bench -- [--quick]`:
//! how fast `host run` is against a real systemd, compared with the same
//! systemctl calls made by a shell script, and with Ansible and Puppet
//! managing the same units. See BENCHMARKS.md for what is measured and the
//! last results.
//!
//! Not part of the test suite: it takes minutes, and its numbers depend on
//! the machine. It is built only with the `bench` feature (see
//! `tests/Cargo.toml`), so `cargo test --workspace` does not compile it. The
//! work is in `tests/src/bench/`.

use std::process::ExitCode;

#[path = "../bench/mod.rs"]
mod bench;

fn main() -> ExitCode {
    bench::main()
}
