//! `host run`, as the phases of a run, each its own type:
//!
//! 1. [`Plan`]: the settings, trust and jobs, from flags and host.toml;
//!    every output checked writable. Nothing is read yet.
//! 2. [`AdmittedRun`]: every policy and settings document read, verified
//!    and compiled. A bad one stops the run with nothing applied.
//! 3. [`Session`]: the machine's run lock taken, versions recorded, each
//!    policy run against the one provider, the report built.
//! 4. The outputs: the report printed, then written with the metrics.

mod admit;
mod outputs;
mod plan;
mod session;

use std::time::Instant;

use crate::cli::RunArgs;
use crate::interrupt;
use crate::lock::RunLock;
use crate::report::Report;

use admit::AdmittedRun;
use plan::{Plan, Request};
use session::Session;

/// Runs the policies; returns the process exit code. An `Err` means the run
/// could not happen (exit 1) and nothing was applied, or that an output
/// could not be written (exit 1, after everything the run did was printed).
pub fn execute(args: &RunArgs) -> anyhow::Result<i32> {
    let started = Instant::now();
    if let Err(e) = interrupt::install() {
        tracing::warn!("SIGTERM, SIGINT and SIGHUP are not handled in order: {e}");
    }
    let request = Request::of(args);
    let outputs = outputs::Outputs::resolve(args);
    let result = converge(args, &request, &outputs, started);
    // What the run did is printed first, whatever then happens to the
    // files: a full disk must not hide that a service was started.
    let printed = match &result {
        Ok((report, _)) => outputs::print(request.printed, report),
        Err(_) => Ok(()),
    };
    let report = result.as_ref().map(|(report, _)| report);
    let failures = outputs::write(&outputs, report, started);
    // The lock is held until the outputs are written: the next run's
    // clean-up of temporary files never meets this run's.
    let (report, _lock) = match result {
        Ok(done) => done,
        Err(e) => {
            for failure in &failures {
                tracing::error!("{failure}");
            }
            return Err(e);
        }
    };
    printed?;
    if !failures.is_empty() {
        anyhow::bail!(
            "the run happened (see above), but its outputs failed: {}",
            failures.join("; ")
        );
    }
    Ok(report.exit_code(request.detailed_exitcodes))
}

/// The run's phases, in order.
fn converge(
    args: &RunArgs,
    request: &Request,
    outputs: &outputs::Outputs,
    started: Instant,
) -> anyhow::Result<(Report, RunLock)> {
    let plan = Plan::resolve(args, request, outputs, started)?;
    let admitted = AdmittedRun::admit(&plan)?;
    Session::begin(&plan, admitted)?.converge()
}
