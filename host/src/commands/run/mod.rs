//! `host run`, as the phases of a run, each its own type:
//!
//! 1. [`Plan`]: the settings, trust and jobs, from flags and host.toml;
//!    every output checked writable. Nothing is read yet.
//! 2. [`AdmittedRun`]: every policy and settings document read, verified
//!    and compiled. A bad one stops the run with nothing applied.
//! 3. [`Session`]: the machine's run lock taken, versions recorded, each
//!    policy run against the one provider, the report built.
//! 4. The outputs: the report printed, then written with the metrics.
//!
//! `host watch` runs the same phases at each wake ([`cycle`]), for the
//! policies an event concerns, with a refused document refusing only its
//! own policy.

mod admit;
mod outputs;
mod plan;
mod session;

use crate::left_alone::LeftAlone;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Instant;

use crate::cli::{RunArgs, RunCommandArgs};
use crate::interrupt;
use crate::lock::RunLock;
use crate::report::{Report, WatchCounts};

use crate::settings::ConfigFile;
use admit::AdmittedRun;
use plan::{Cycle, Plan, Request};
use session::Session;

/// Runs the policies; returns the process exit code. An `Err` means the run
/// could not happen (exit 1) and nothing was applied, or that an output
/// could not be written (exit 1, after everything the run did was printed).
pub fn execute(command: &RunCommandArgs) -> anyhow::Result<i32> {
    let started = Instant::now();
    if let Err(e) = interrupt::install() {
        tracing::warn!("SIGTERM, SIGINT and SIGHUP are not handled in order: {e}");
    }
    let args = &command.run;
    let request = Request::of_run(args, &command.report);
    // host.toml is read once, here: every phase takes this reading.
    let file = ConfigFile::load(args.trust.config.path());
    let outputs = outputs::Outputs::resolve(args, file.as_ref().ok());
    let result = file.and_then(|file| converge(args, &file, &request, &outputs, started));
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
    file: &ConfigFile,
    request: &Request,
    outputs: &outputs::Outputs,
    started: Instant,
) -> anyhow::Result<(Report, RunLock)> {
    let plan = Plan::resolve(args, file, request, outputs, started)?;
    let admitted = AdmittedRun::admit(&plan)?;
    let converged = Session::begin(&plan, admitted)?.converge()?;
    Ok((converged.report, converged.lock))
}

/// Which of the configured policies a run takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Selection {
    /// Every one (`host run`; a watch's first run, resyncs).
    All,
    /// Those whose keys ([`PlannedPolicy::key`]) an event concerns.
    Only(BTreeSet<String>),
}

/// A policy the configuration lists, and the files it is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PlannedPolicy {
    /// Where the policy comes from, as given: a path or an `oci://`
    /// reference. Events name policies by it.
    pub(crate) key: String,
    /// The local files it is read from: the policy, its settings
    /// document, and their signatures (none for `oci://`).
    pub(crate) documents: Vec<PathBuf>,
}

/// What one policy that ran concerns on the machine.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Concern {
    pub(crate) key: String,
    /// Its name in reports.
    pub(crate) policy: String,
    /// The units it read or changed, as systemd names them.
    pub(crate) units: BTreeSet<String>,
    /// The `TYPE#NAME` references its services subscribe to.
    pub(crate) references: BTreeSet<String>,
}

/// What a run of `host watch` gives back.
pub(crate) struct Cycled {
    /// `None` when no policy could run (all of them refused).
    pub(crate) report: Option<Report>,
    /// The policies whose documents were refused, with why; they did not run.
    pub(crate) refused: Vec<(String, String)>,
    pub(crate) concerns: Vec<Concern>,
    /// Every policy the configuration lists, whether it ran or not.
    pub(crate) planned: Vec<PlannedPolicy>,
    /// What the run read its settings from, for the watch to follow.
    pub(crate) inputs: plan::Inputs,
    /// host.toml as this cycle read it: the watch takes its own settings
    /// (`[watch]`) from the same reading.
    pub(crate) config: ConfigFile,
}

pub(crate) use plan::Inputs;

/// One run for `host watch`: the phases of `host run`, for `selection`,
/// with each policy admitted on its own (a refused document stops only its
/// policy). The report and metrics files are written as a timer run writes
/// them, when a policy ran; nothing is printed. An `Err` means no run could
/// happen (host.toml or a flag is wrong, the lock is not free).
/// `held`: the units the watch holds back after a crash loop; `first`:
/// the watch's first run; `counts`: the watch's own, written with the
/// metrics. host.toml is read once, at the cycle's start: the plan, the
/// outputs and the watch's own settings (returned in [`Cycled`]) all take
/// that one reading.
pub(crate) fn cycle(
    args: &RunArgs,
    selection: &Selection,
    first: bool,
    held: LeftAlone,
    counts: WatchCounts,
) -> anyhow::Result<Cycled> {
    let started = Instant::now();
    let request = Request::of_cycle(
        args,
        Cycle {
            first,
            for_event: matches!(selection, Selection::Only(_)),
            held,
        },
    );
    let file = ConfigFile::load(args.trust.config.path());
    let outputs = outputs::Outputs {
        watch: Some(counts),
        ..outputs::Outputs::resolve(args, file.as_ref().ok())
    };
    let file = file?;
    let mut plan = Plan::resolve(args, &file, &request, &outputs, started)?;
    let planned = plan.planned();
    let inputs = plan.inputs();
    plan.select(selection);
    let (admitted, refused) = AdmittedRun::admit_each(&plan)?;
    if admitted.policies.is_empty() {
        return Ok(Cycled {
            report: None,
            refused,
            concerns: Vec::new(),
            planned,
            inputs,
            config: file,
        });
    }
    let result = Session::begin(&plan, admitted).and_then(Session::converge);
    let failures = outputs::write(&outputs, result.as_ref().map(|c| &c.report), started);
    for failure in &failures {
        tracing::error!("{failure}");
    }
    let converged = result?;
    Ok(Cycled {
        report: Some(converged.report),
        refused,
        concerns: converged.concerns,
        planned,
        inputs,
        config: file,
    })
}
