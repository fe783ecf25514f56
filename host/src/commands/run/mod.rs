//! `host run`, as the phases of a run, each its own type:
//!
//! 1. [`Plan`]: the settings, trust and jobs, from flags and host.toml;
//!    every output checked writable. Nothing is read yet.
//! 2. [`AdmittedRun`]: every policy and settings document read, verified
//!    and compiled. A bad one stops the run with nothing applied.
//! 3. [`Session`]: the machine's run lock taken, versions recorded, each
//!    policy run against the one provider.
//! 4. [`Acted`]: the report, built once the settle windows of the run's
//!    starts are judged (a watch's run may leave them open: [`Settling`]).
//! 5. The outputs: the report printed, then written with the metrics.
//!
//! `host watch` runs the same phases at each wake ([`cycle`]), for the
//! policies an event concerns, with a refused document refusing only its
//! own policy.

mod acted;
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
use crate::report::machine::{Drive, How, Refusal, RunCause, WatchState};
use crate::report::result::PolicyResult;
use crate::report::Report;

use crate::provider::{Provider, Windows};
use crate::settings::ConfigFile;
use acted::Acted;
use admit::{AdmittedRun, RefusedDocument};
use plan::{Cycle, Plan, Request};
use session::Session;
use std::sync::Arc;

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
    let ended = match file {
        Ok(file) => converge(args, &file, &request, &outputs, started),
        Err(e) => Ended::failed(e),
    };
    // What the run did is printed first, whatever then happens to the
    // files: a full disk must not hide that a service was started.
    let printed = match &ended.result {
        Ok(report) => outputs::print(request.printed, report),
        Err(_) => Ok(()),
    };
    let drive = Drive::of_run();
    let failures = outputs::write(
        &outputs,
        outputs::Recorded {
            result: ended.result.as_ref(),
            refused: &ended.refused,
            how: How {
                drive,
                cause: match drive {
                    Drive::Timer => RunCause::Timer,
                    _ => RunCause::Manual,
                },
            },
            said: None,
            noop: request.noop(),
            configured: ended.configured,
            held: LeftAlone::default(),
            duration: started.elapsed(),
            locked: ended.lock.is_some(),
        },
    );
    // The lock is held until the outputs are written: the next run's
    // clean-up of temporary files never meets this run's.
    drop(ended.lock);
    let report = match ended.result {
        Ok(report) => report,
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

/// How a run ended, for its outputs: its report or why it could not
/// happen, the documents refused, the lock when it was taken, and every
/// configured policy's key when it took them all.
struct Ended {
    result: anyhow::Result<Report>,
    refused: Vec<Refusal>,
    lock: Option<Arc<RunLock>>,
    configured: Option<Vec<String>>,
}

impl Ended {
    fn failed(error: anyhow::Error) -> Self {
        Self {
            result: Err(error),
            refused: Vec::new(),
            lock: None,
            configured: None,
        }
    }
}

/// The run's phases, in order. A refused document stops the run with
/// nothing applied; its refusal is recorded under the lock, taken then.
fn converge(
    args: &RunArgs,
    file: &ConfigFile,
    request: &Request,
    outputs: &outputs::Outputs,
    started: Instant,
) -> Ended {
    let plan = match Plan::resolve(args, file, request, outputs, started) {
        Ok(plan) => plan,
        Err(e) => return Ended::failed(e),
    };
    let configured = plan
        .whole
        .then(|| plan.jobs.iter().map(|j| j.state_key()).collect());
    let admitted = match AdmittedRun::admit(&plan) {
        Ok(admitted) => admitted,
        Err(e) => {
            let refused = e
                .downcast_ref::<RefusedDocument>()
                .map(|r| vec![r.refusal.clone()])
                .unwrap_or_default();
            let lock = RunLock::acquire_quietly(
                &plan.settings.lock_file,
                request.lock_wait(plan.settings.lock_timeout),
            )
            .ok()
            .map(Arc::new);
            return Ended {
                result: Err(e),
                refused,
                lock,
                configured: None,
            };
        }
    };
    match Session::begin(&plan, admitted, None).and_then(|s| s.converge(&mut NoSink)) {
        Ok(converged) => Ended {
            result: Ok(converged.acted.report(&mut NoSink)),
            refused: Vec::new(),
            lock: Some(converged.lock),
            configured,
        },
        Err(e) => Ended::failed(e),
    }
}

/// What takes each policy's result as the policy finishes (kube-rs
/// `applier`'s stream of results): a watch's lines and its backoff. A new
/// consumer of results is one more sink.
pub(crate) trait Sink {
    /// A policy acted: its result as its records say when it returned
    /// (a watch's backoff counts its starts here, before the next run).
    fn acted(&mut self, _result: &PolicyResult<'_>) {}

    /// A policy's result, its settle windows judged.
    fn finished(&mut self, result: &PolicyResult<'_>);

    /// The units held back as the run ends, as the machine's state
    /// records them (a watch's backoff; none for `host run`).
    fn held(&self) -> LeftAlone {
        LeftAlone::default()
    }
}

/// `host run`'s: its results go to the report and the state only.
struct NoSink;

impl Sink for NoSink {
    fn finished(&mut self, _: &PolicyResult<'_>) {}
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
    /// The policies whose documents were refused; they did not run.
    pub(crate) refused: Vec<Refusal>,
    pub(crate) concerns: Vec<Concern>,
    /// Every policy the configuration lists, whether it ran or not.
    pub(crate) planned: Vec<PlannedPolicy>,
    /// What the run read its settings from, for the watch to follow.
    pub(crate) inputs: plan::Inputs,
    /// host.toml as this cycle read it: the watch takes its own settings
    /// (`[watch]`) from the same reading.
    pub(crate) config: ConfigFile,
    /// The run, when its report waits for settle windows still open (its
    /// own, or an earlier run's).
    pub(crate) settling: Option<Settling>,
}

/// A watch's run whose policies acted with settle windows still open: its
/// report, and the outputs written from it, wait for their verdicts (the
/// watch judges them as they come, with [`Settling::provider`]). It holds
/// the run lock until then, so that no `host run` moves a unit inside a
/// window; the watch's next runs are handed the same lock.
pub(crate) struct Settling {
    acted: Acted,
    lock: Arc<RunLock>,
    record: WatchRecord,
}

impl Settling {
    /// Whether a window of the run is still open.
    pub(crate) fn open(&self) -> bool {
        self.acted.settling()
    }

    /// The run's provider, which can judge any of the watch's windows
    /// (none once let go of).
    pub(crate) fn provider(&mut self) -> Option<&mut (dyn Provider + 'static)> {
        self.acted.provider()
    }

    /// Lets go of its provider (its connection to systemd): a newer run's
    /// judges the windows.
    pub(crate) fn let_go_of_provider(&mut self) {
        self.acted.let_go();
    }

    /// The watch's words for what woke the run.
    pub(crate) fn said(&self) -> &str {
        &self.record.said
    }

    /// The run lock it holds.
    pub(crate) fn lock(&self) -> Arc<RunLock> {
        self.lock.clone()
    }

    /// The run's report, its windows judged, given to `sink` and merged into
    /// the machine's state, written as the report and metrics files.
    pub(crate) fn finish(self, sink: &mut dyn Sink) {
        let report = self.acted.report(sink);
        self.record.write(Ok(&report), sink, true);
        drop(self.lock);
    }
}

/// What a watch's run writes with its report, whenever that comes: where,
/// and what the machine's state says of the run.
struct WatchRecord {
    outputs: outputs::Outputs,
    refused: Vec<Refusal>,
    cause: RunCause,
    said: String,
    noop: bool,
    configured: Option<Vec<String>>,
    started: Instant,
}

impl WatchRecord {
    /// Merges the run into the machine's state and writes it; what could
    /// not be written is said.
    fn write(self, result: Result<&Report, &anyhow::Error>, sink: &dyn Sink, locked: bool) {
        let failures = outputs::write(
            &self.outputs,
            outputs::Recorded {
                result,
                refused: &self.refused,
                how: How {
                    drive: Drive::Watch,
                    cause: self.cause,
                },
                said: Some(self.said),
                noop: self.noop,
                configured: self.configured,
                held: sink.held(),
                duration: self.started.elapsed(),
                locked,
            },
        );
        for failure in &failures {
            tracing::error!("{failure}");
        }
    }
}

pub(crate) use admit::Kept;
pub(crate) use plan::Inputs;

/// What a watch tells a run of itself.
pub(crate) struct WatchRun<'a> {
    /// The watch's settle windows, shared by its runs.
    pub(crate) windows: &'a Windows,
    /// The run lock, when the watch holds it (an earlier run's windows
    /// are still open): handed over, not taken again. The run's report then
    /// waits too ([`Cycled::settling`]): reports are written in the order
    /// the runs began.
    pub(crate) lock: Option<Arc<RunLock>>,
    pub(crate) selection: &'a Selection,
    pub(crate) first: bool,
    /// The units held back as the run starts.
    pub(crate) held: LeftAlone,
    pub(crate) cause: RunCause,
    /// The watch's words for the cause.
    pub(crate) said: String,
    /// The watch's account of itself, written with the state.
    pub(crate) watch: WatchState,
}

/// One run for `host watch`: the phases of `host run`, for its selection,
/// with each policy admitted on its own (a refused document stops only its
/// policy). Each policy's result goes to `sink` as it finishes; the run
/// is merged into the machine's state, written as the report and metrics
/// files; nothing is printed. An `Err` means no run could happen (host.toml
/// or a flag is wrong, the lock is not free). host.toml is read once, at
/// the cycle's start: the plan, the outputs and the watch's own settings
/// (returned in [`Cycled`]) all take that one reading.
pub(crate) fn cycle(
    args: &RunArgs,
    run: WatchRun<'_>,
    kept: &mut Kept,
    sink: &mut dyn Sink,
) -> anyhow::Result<Cycled> {
    let started = Instant::now();
    let request = Request::of_cycle(
        args,
        Cycle {
            first: run.first,
            for_event: matches!(run.selection, Selection::Only(_)),
            held: run.held,
            windows: run.windows.clone(),
        },
    );
    let file = ConfigFile::load(args.trust.config.path());
    let outputs = outputs::Outputs {
        watch: Some(run.watch),
        ..outputs::Outputs::resolve(args, file.as_ref().ok())
    };
    let file = file?;
    let mut plan = Plan::resolve(args, &file, &request, &outputs, started)?;
    let planned = plan.planned();
    let inputs = plan.inputs();
    let all: Vec<String> = plan.jobs.iter().map(|j| j.state_key()).collect();
    kept.retain(&all);
    plan.select(run.selection);
    let configured = plan.whole.then_some(all);
    let (admitted, refused) = AdmittedRun::admit_each(&plan, kept)?;
    let record = WatchRecord {
        outputs: outputs.clone(),
        refused: refused.clone(),
        cause: run.cause,
        said: run.said,
        noop: request.noop(),
        configured,
        started,
    };
    let behind = run.lock.is_some();
    let (result, lock) = if admitted.policies.is_empty() {
        (None, run.lock)
    } else {
        match Session::begin(&plan, admitted, run.lock).and_then(|s| s.converge(sink)) {
            Ok(converged) => {
                if converged.acted.settling() || behind {
                    return Ok(Cycled {
                        refused,
                        concerns: converged.concerns,
                        planned,
                        inputs,
                        config: file,
                        settling: Some(Settling {
                            acted: converged.acted,
                            lock: converged.lock,
                            record,
                        }),
                    });
                }
                let report = converged.acted.report(sink);
                (Some(Ok((report, converged.concerns))), Some(converged.lock))
            }
            Err(e) => (Some(Err(e)), None),
        }
    };
    // The report of a run in which no policy ran (every one refused).
    let nothing_ran = Report::new(Vec::new());
    let written = match &result {
        Some(Ok((report, _))) => Ok(report),
        Some(Err(e)) => Err(e),
        None => Ok(&nothing_ran),
    };
    record.write(written, sink, lock.is_some());
    let concerns = match result {
        Some(Err(e)) => return Err(e),
        Some(Ok((_, concerns))) => concerns,
        None => Vec::new(),
    };
    Ok(Cycled {
        refused,
        concerns,
        planned,
        inputs,
        config: file,
        settling: None,
    })
}

/// Records the watch's account of itself in the machine's state, without
/// a run (the watch's end: `up` false), and writes the report and metrics.
pub(crate) fn note_watch(args: &RunArgs, watch: WatchState) -> anyhow::Result<()> {
    let file = ConfigFile::load(args.trust.config.path())?;
    let outputs = outputs::Outputs::resolve(args, Some(&file));
    outputs::note_watch(&outputs, watch)
}
