//! The first phase of a run: what to run and with which settings, decided
//! from the command line and host.toml before anything is read or changed.
//!
//! This is the one module of `run` that reads the command line's fields
//! (as ripgrep's `HiArgs::from_low_args` turns its low-level arguments into
//! typed values once): everything after it takes the [`Request`], the
//! [`Outputs`] and the resolved settings.

use crate::left_alone::LeftAlone;
use crate::provider::ReloadBeforeChange;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context as _};

use crate::admission::{self, Gate, Location, Remote};
use crate::atomic_file;
use crate::cli::{ReportArgs, RunArgs};
use crate::lock::Wait;
use crate::oci::{Registry, Store};
use crate::report::Verbosity;
use crate::settings::{
    resolve_trust, ConfigFile, RegistrySettings, RunSettings, DEFAULT_CONFIG_FILE,
};
use crate::signature::{signature_path_for, Trust};
use crate::subscriptions::paths::WatchPaths;
use crate::versions::Versions;

use super::outputs::{Outputs, Printed};
use super::{PlannedPolicy, Selection};

/// One policy to run and the settings document it runs with.
pub(super) struct Job {
    pub(super) policy: Location,
    pub(super) settings: Option<Location>,
    /// Its own guest memory limit (host.toml's `[[policy]] memory_mib`).
    pub(super) memory_bytes: Option<usize>,
}

impl Job {
    /// Its key: in the machine's state, and in a watch's events (the
    /// manifest policy listed twice, with two manifests, is two policies).
    pub(super) fn state_key(&self) -> String {
        let settings = self.settings.as_ref().map(ToString::to_string);
        crate::report::machine::state_key(&self.policy.to_string(), settings.as_deref())
    }
}

/// Whether the run may change the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// Converge: changes are made, versions and subscriptions recorded.
    Apply,
    /// `--noop`: nothing is changed or recorded; the policies say what
    /// they would do.
    Noop,
}

/// What the command line asked of this run, besides the settings, as
/// typed values.
#[derive(Debug, Clone)]
pub(super) struct Request {
    pub(super) mode: Mode,
    /// Whether to wait for the machine's run lock (`--no-wait`: no).
    pub(super) wait_for_lock: bool,
    /// `--refresh TYPE#NAME`: references that count as changed.
    pub(super) refresh: Vec<String>,
    /// `--allow-unsigned`, for local test runs.
    pub(super) allow_unsigned: bool,
    /// `--allow-rollback`, the one-machine emergency.
    pub(super) allow_rollback: bool,
    /// `--no-cache`: compile every policy afresh.
    pub(super) use_cache: bool,
    pub(super) printed: Printed,
    /// `--detailed-exitcodes`: 0/2/4/6.
    pub(super) detailed_exitcodes: bool,
    /// Units a watch holds back after a crash loop (none for `host run`).
    pub(super) held: LeftAlone,
    /// Whether a change makes the run's daemon-reload first: always, but
    /// in a watch's run for an event (see [`ReloadBeforeChange`]).
    pub(super) reload_before_change: ReloadBeforeChange,
    /// A watch's: its settle windows, which outlive its runs (judged later,
    /// the report waiting for them); `None` judges them within the run.
    pub(super) windows: Option<crate::provider::Windows>,
}

/// What a watch's run is, besides the command line: built into its
/// [`Request`] at once, never changed after.
pub(super) struct Cycle {
    /// The watch's first run: `--refresh` counts for it only.
    pub(super) first: bool,
    /// A run for an event (some policies), not the first run or a resync:
    /// a unit read unchanged is changed without the daemon-reload first.
    pub(super) for_event: bool,
    /// Units the watch holds back after a crash loop.
    pub(super) held: LeftAlone,
    /// The watch's settle windows, which its runs leave open.
    pub(super) windows: crate::provider::Windows,
}

impl Request {
    /// `host run`'s choices, read once from its command line: the run's
    /// flags and the report's.
    pub(super) fn of_run(args: &RunArgs, report: &ReportArgs) -> Self {
        Self {
            printed: match (report.json, report.quiet, report.verbose) {
                (true, _, _) => Printed::Json,
                (false, true, _) => Printed::Human(Verbosity::Quiet),
                (false, false, true) => Printed::Human(Verbosity::Verbose),
                (false, false, false) => Printed::Human(Verbosity::Normal),
            },
            detailed_exitcodes: report.detailed_exitcodes,
            ..Self::base(args)
        }
    }

    /// One run of a watch: its command line (a watch has no report flags:
    /// it prints no report) and what the watch knows of this run.
    /// `--refresh` counts for the first run only: a watch that took it at
    /// every run would restart its subscribers at every run, and its own
    /// restarts would wake it again.
    pub(super) fn of_cycle(args: &RunArgs, cycle: Cycle) -> Self {
        let base = Self::base(args);
        Self {
            refresh: if cycle.first {
                base.refresh
            } else {
                Vec::new()
            },
            held: cycle.held,
            // The first run is whole before the watch says it is ready.
            windows: (!cycle.first).then_some(cycle.windows),
            reload_before_change: if cycle.for_event && !cycle.first {
                ReloadBeforeChange::UnlessReadUnchanged
            } else {
                ReloadBeforeChange::Always
            },
            ..base
        }
    }

    /// The choices every run's command line makes.
    fn base(args: &RunArgs) -> Self {
        Self {
            mode: if args.noop { Mode::Noop } else { Mode::Apply },
            wait_for_lock: !args.no_wait,
            refresh: args.refresh.clone(),
            allow_unsigned: args.allow_unsigned,
            allow_rollback: args.allow_rollback,
            use_cache: !args.no_cache,
            printed: Printed::Human(Verbosity::Normal),
            detailed_exitcodes: false,
            held: LeftAlone::default(),
            windows: None,
            reload_before_change: ReloadBeforeChange::Always,
        }
    }

    /// Whether this is a dry run.
    pub(super) fn noop(&self) -> bool {
        self.mode == Mode::Noop
    }

    /// How long to wait for the run lock.
    pub(super) fn lock_wait(&self, timeout: std::time::Duration) -> Wait {
        if self.wait_for_lock {
            Wait::Up(timeout)
        } else {
            Wait::No
        }
    }
}

/// What a run read besides its policies, for `host watch` to follow: a
/// change to one of these is a change to every policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Inputs {
    /// host.toml: the one given, else the default path (watched even
    /// while missing: creating it is a change).
    pub(crate) config: PathBuf,
    /// `--trusted-key` files and the trusted keys directory.
    pub(crate) trusted_keys: Vec<PathBuf>,
    pub(crate) trusted_keys_dir: PathBuf,
    /// Where `file#` subscriptions may be read: nothing else is watched.
    pub(crate) watch_paths: WatchPaths,
    /// Policy directories: a policy added to one is a new policy.
    pub(crate) policy_dirs: Vec<PathBuf>,
    /// The operator's pauses (`paused.json`): a resume is a repair to make.
    pub(crate) pauses: PathBuf,
}

/// A run decided: its settings, its trust, its jobs, and how references are
/// pulled, from one reading of host.toml. Every output has been checked
/// writable; nothing is read yet.
pub(super) struct Plan<'a> {
    pub(super) request: &'a Request,
    pub(super) started: Instant,
    pub(super) settings: RunSettings,
    pub(super) trust: Trust,
    pub(super) versions: Versions,
    pub(super) jobs: Vec<Job>,
    pub(super) remote: Option<Remote>,
    pub(super) outputs: &'a Outputs,
    /// Every policy the configuration lists runs: what the host remembers
    /// of policies no longer listed may be forgotten.
    pub(super) whole: bool,
    /// What the run reads besides its policies.
    inputs: Inputs,
}

impl<'a> Plan<'a> {
    /// Resolves the settings (flags over `file`, host.toml as this cycle
    /// read it, over defaults), the trust and the jobs; fails, with nothing
    /// changed, on any mistake in them.
    pub(super) fn resolve(
        args: &RunArgs,
        file: &ConfigFile,
        request: &'a Request,
        outputs: &'a Outputs,
        started: Instant,
    ) -> anyhow::Result<Self> {
        let settings = RunSettings::resolve(
            &args.run_flags,
            &args.cache_flags,
            &args.provider_flags,
            &args.state_flags,
            file,
        )?;
        // The same values the outputs were resolved to, but a mistake in
        // them is said here, in full.
        args.output_flags.resolve(file)?;
        let versions = Versions::open(&settings.state_dir)?;
        outputs.check()?;
        check_state_and_cache(request, &settings)?;
        let trust = resolve_trust(&args.trust.trusted_key, &args.trust.flags, file)?;
        let jobs = jobs(args, file)?;
        let remote = remote(&jobs, args, file, &settings, started)?;
        let inputs = Inputs {
            config: args
                .trust
                .config
                .path()
                .map_or_else(|| PathBuf::from(DEFAULT_CONFIG_FILE), Path::to_path_buf),
            trusted_keys: trust.keys.clone(),
            trusted_keys_dir: trust.keys_dir.clone(),
            watch_paths: settings.watch_paths.clone(),
            policy_dirs: policy_dirs(args, file),
            pauses: settings.state_dir.join(crate::left_alone::pause::FILE_NAME),
        };
        Ok(Self {
            request,
            started,
            settings,
            trust,
            versions,
            jobs,
            remote,
            outputs,
            whole: true,
            inputs,
        })
    }

    /// The policies listed, each with its local files.
    pub(super) fn planned(&self) -> Vec<PlannedPolicy> {
        self.jobs
            .iter()
            .map(|job| {
                let documents = [Some(&job.policy), job.settings.as_ref()]
                    .into_iter()
                    .flatten()
                    .filter_map(|location| match location {
                        Location::File(path) => Some(path),
                        Location::Oci(_) => None,
                    })
                    .flat_map(|path| [path.clone(), signature_path_for(path)])
                    .collect();
                PlannedPolicy {
                    key: job.state_key(),
                    documents,
                }
            })
            .collect()
    }

    /// What this run reads besides its policies.
    pub(super) fn inputs(&self) -> Inputs {
        self.inputs.clone()
    }

    /// Keeps only the policies `selection` takes.
    pub(super) fn select(&mut self, selection: &Selection) {
        if let Selection::Only(keys) = selection {
            self.jobs.retain(|job| keys.contains(&job.state_key()));
            self.whole = false;
        }
    }

    /// The gate every document of this run passes through.
    pub(super) fn gate(&self) -> Gate<'_> {
        Gate {
            trust: &self.trust,
            versions: &self.versions,
            allow_unsigned: self.request.allow_unsigned,
            allow_rollback: self.request.allow_rollback,
            remote: self.remote.as_ref(),
        }
    }
}

impl Outputs {
    /// Resolved first and on their own: a run that cannot happen (a bad
    /// setting elsewhere, a refused policy) still writes them. `file` is
    /// host.toml as this cycle read it; when it could not be read or names
    /// a bad value, the flags alone (the plan then stops the run on the
    /// same mistake, said in full).
    pub(super) fn resolve(args: &RunArgs, file: Option<&ConfigFile>) -> Self {
        let from = |file: &ConfigFile| {
            let run = args.run_flags.resolve(file);
            // The report limit of the flags alone when host.toml's is bad:
            // the state is bounded whatever went wrong.
            let report_limit = match &run {
                Ok(values) => Ok(values.report_limit),
                Err(_) => args
                    .run_flags
                    .resolve(&ConfigFile::default())
                    .map(|v| v.report_limit),
            };
            args.output_flags.resolve(file).map(|v| Self {
                report: v.report_file,
                metrics: v.metrics_file,
                labels: file.labels().metric_pairs(),
                machine_labels: file
                    .labels()
                    .iter()
                    .map(|(name, value)| (name.to_owned(), value.to_owned()))
                    .collect(),
                state_dir: args.state_flags.resolve(file).ok().map(|s| s.state_dir),
                lock_file: run.as_ref().ok().map(|v| v.lock_file.clone()),
                report_limit: report_limit.as_ref().map_or(1 << 20, |limit| *limit),
                watch: None,
            })
        };
        file.map_or_else(|| Err(anyhow::anyhow!("no host.toml")), from)
            .or_else(|_| from(&ConfigFile::default()))
            .unwrap_or_default()
    }
}

/// The directories among the policies named (on the command line, else in
/// host.toml's `[[policy]]` sources).
fn policy_dirs(args: &RunArgs, file: &ConfigFile) -> Vec<PathBuf> {
    let named: Vec<String> = if args.policies.is_empty() {
        file.policies.iter().map(|p| p.source.clone()).collect()
    } else {
        args.policies.clone()
    };
    named
        .into_iter()
        .map(PathBuf::from)
        .filter(|path| path.is_dir())
        .collect()
}

/// Checks, before anything is changed, that the state directory can be
/// written, and a cache directory that is safe to use too.
fn check_state_and_cache(request: &Request, settings: &RunSettings) -> anyhow::Result<()> {
    atomic_file::probe(&settings.state_dir.join("versions.json")).with_context(|| {
        format!(
            "--state-dir {}: cannot be written",
            settings.state_dir.display()
        )
    })?;
    // A cache directory that is not safe is not used at all (a warning, a
    // compile); one that is safe must also be writable.
    if request.use_cache && settings.cache_dir.is_dir() {
        atomic_file::probe(&settings.cache_dir.join("probe")).with_context(|| {
            format!(
                "--cache-dir {}: cannot be written",
                settings.cache_dir.display()
            )
        })?;
    }
    Ok(())
}

/// What to run: the policies named (each with `--settings`), else the
/// `[[policy]]` list of host.toml.
fn jobs(args: &RunArgs, file: &ConfigFile) -> anyhow::Result<Vec<Job>> {
    let parse =
        |text: &str, what: &str| Location::parse(text).with_context(|| format!("{what} {text:?}"));
    if !args.policies.is_empty() {
        let settings = args
            .settings
            .as_deref()
            .map(|s| parse(s, "--settings"))
            .transpose()?;
        let named = args
            .policies
            .iter()
            .map(|p| parse(p, "policy"))
            .collect::<anyhow::Result<Vec<_>>>()?;
        return Ok(admission::policy_locations(&named)?
            .into_iter()
            .map(|policy| Job {
                policy,
                settings: settings.clone(),
                memory_bytes: None,
            })
            .collect());
    }
    if args.settings.is_some() {
        bail!("--settings is for the policies named with it: name them ({} run POLICY --settings FILE), or give each policy its settings in host.toml's [[policy]]", crate::program::name());
    }
    let Some(path) = file.path() else {
        bail!("no policy to run: name one ({} run POLICY), or list them in {DEFAULT_CONFIG_FILE} as [[policy]] tables with a `source`", crate::program::name());
    };
    let mut jobs = Vec::new();
    for entry in &file.policies {
        let what = format!("{}: [[policy]]", path.display());
        let settings = entry
            .settings
            .as_deref()
            .map(|s| parse(s, &format!("{what} settings")))
            .transpose()?;
        let policy = parse(&entry.source, &format!("{what} source"))?;
        jobs.extend(
            admission::policy_locations(&[policy])?
                .into_iter()
                .map(|policy| Job {
                    policy,
                    settings: settings.clone(),
                    memory_bytes: entry.memory_bytes(),
                }),
        );
    }
    if jobs.is_empty() {
        tracing::info!("{} lists no [[policy]]: nothing to run", path.display());
    }
    Ok(jobs)
}

/// The registry session, when any job names a reference.
fn remote(
    jobs: &[Job],
    args: &RunArgs,
    file: &ConfigFile,
    settings: &RunSettings,
    started: Instant,
) -> anyhow::Result<Option<Remote>> {
    let remote_jobs = jobs
        .iter()
        .any(|j| j.policy.is_remote() || j.settings.as_ref().is_some_and(Location::is_remote));
    if !remote_jobs {
        return Ok(None);
    }
    let registry = RegistrySettings::resolve(&args.registry, file)?
        .client_config(Some(started + settings.limits.wall_clock));
    let registry = Registry::new(registry)?;
    let store = match Store::open(&settings.cache_dir) {
        Ok(store) => Some(store),
        Err(e) => {
            tracing::warn!("{e:#}; pulling without keeping verified copies (a registry outage will fail the run)");
            None
        }
    };
    Ok(Some(Remote { registry, store }))
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;
    use crate::cli::{Cli, Command};

    fn run_args(argv: &[&str]) -> RunArgs {
        let cli = Cli::try_parse_from(["host", "run"].iter().chain(argv)).unwrap();
        let Command::Run(args) = cli.command else {
            panic!("not run")
        };
        args.run
    }

    #[test]
    fn named_policies_share_the_settings_named_with_them() {
        let args = run_args(&["a.wasm", "b.wasm", "--settings", "s.yaml"]);
        let jobs = jobs(&args, &ConfigFile::default()).unwrap();
        assert_eq!(jobs.len(), 2);
        assert!(jobs.iter().all(|j| j.settings.is_some()));
        assert_ne!(jobs[0].policy, jobs[1].policy);
    }

    #[test]
    fn settings_without_a_policy_is_refused_naming_the_fix() {
        let args = run_args(&["--settings", "s.yaml"]);
        let error = jobs(&args, &ConfigFile::default())
            .err()
            .expect("refused")
            .to_string();
        assert!(error.contains("host run POLICY --settings FILE"), "{error}");
    }

    #[test]
    fn no_policy_and_no_config_file_is_refused() {
        let args = run_args(&[]);
        let error = jobs(&args, &ConfigFile::default())
            .err()
            .expect("refused")
            .to_string();
        assert!(error.contains("no policy to run"), "{error}");
    }

    #[test]
    fn a_run_of_local_files_opens_no_registry_session() {
        let args = run_args(&["a.wasm"]);
        let file = ConfigFile::default();
        let settings = RunSettings::resolve(
            &args.run_flags,
            &args.cache_flags,
            &args.provider_flags,
            &args.state_flags,
            &file,
        )
        .unwrap();
        let jobs = jobs(&args, &file).unwrap();
        let remote = remote(&jobs, &args, &file, &settings, Instant::now()).unwrap();
        assert!(remote.is_none());
    }
}
