//! `host run`: admit the policies, take the machine's run lock, run each
//! policy under its limits, then report. Orchestration only: each step is
//! another module's job.

use std::io::Write as _;
use std::time::{Instant, SystemTime};

use anyhow::{bail, Context as _};

use crate::admission::{self, Admitted, Gate, Location, Remote};
use crate::atomic_file;
use crate::cli::RunArgs;
use crate::contract::RunOptions;
use crate::guest::GuestOutcome;
use crate::interrupt;
use crate::lock::{RunLock, Wait};
use crate::oci::{Kind, Registry, Store};
use crate::provider::runner::{find_in_path, ProcessRunner};
use crate::provider::{Provider, SystemdConfig, SystemdProvider};
use crate::report::{
    render_human, render_metrics, CompileInfo, ProviderInfo, Report, RunRecord, RunReport, Style,
    Verbosity,
};
use crate::runtime::{CompileCache, PolicyRuntime};
use crate::settings::{
    resolve_trust, ConfigFile, RegistrySettings, RunSettings, DEFAULT_CONFIG_FILE,
};
use crate::text::millis;
use crate::versions::Versions;

/// Reports and metrics are read by monitoring (node_exporter runs as its own user).
const OUTPUT_MODE: u32 = 0o644;

/// Runs the policies; returns the process exit code. An `Err` means the run
/// could not happen (exit 1) and nothing was applied, or that an output
/// could not be written (exit 1, after everything the run did was printed).
pub fn execute(args: &RunArgs) -> anyhow::Result<i32> {
    let started = Instant::now();
    if let Err(e) = interrupt::install() {
        tracing::warn!("SIGTERM, SIGINT and SIGHUP are not handled in order: {e}");
    }
    let result = run_all(args, started);
    // What the run did is printed first, whatever then happens to the
    // files: a full disk must not hide that a service was started.
    let printed = match &result {
        Ok((report, _)) => print(args, report),
        Err(_) => Ok(()),
    };
    let mut failures = Vec::new();
    if let Some(path) = &args.report {
        let json = match &result {
            Ok((report, _)) => serde_json::to_string_pretty(report)? + "\n",
            Err(e) => {
                let failed = serde_json::json!({
                    "error": format!("{e:#}"),
                    "summary": {"resources": 0, "changed": 0, "failed": 0, "unchanged": 0, "success": false},
                });
                format!("{failed:#}\n")
            }
        };
        if let Err(e) = atomic_file::write(path, json.as_bytes(), OUTPUT_MODE) {
            failures.push(format!("writing the report {}: {e:#}", path.display()));
        }
    }
    if let Some(path) = &args.metrics {
        let metrics = render_metrics(
            result.as_ref().ok().map(|(report, _)| report),
            started.elapsed().as_secs_f64(),
            SystemTime::now(),
        );
        if let Err(e) = atomic_file::write(path, metrics.as_bytes(), OUTPUT_MODE) {
            failures.push(format!("writing the metrics {}: {e:#}", path.display()));
        }
    }
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
    Ok(report.exit_code(args.detailed_exitcodes))
}

/// Prints the report (human or JSON) on stdout.
fn print(args: &RunArgs, report: &Report) -> anyhow::Result<()> {
    let text = if args.json {
        serde_json::to_string_pretty(report)? + "\n"
    } else {
        let verbosity = match (args.quiet, args.verbose) {
            (true, _) => Verbosity::Quiet,
            (_, true) => Verbosity::Verbose,
            _ => Verbosity::Normal,
        };
        render_human(report, verbosity, Style::detect())
    };
    // A closed pipe (`host run ... | head`) is an error to report, not a panic.
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .context("writing the report to stdout")
}

/// Checks, before anything is changed, that every output can be written:
/// a temporary file is created beside each and removed. A path that cannot
/// be written is an error naming its option, and the run does not start.
fn check_outputs(args: &RunArgs, settings: &RunSettings) -> anyhow::Result<()> {
    let files = [
        ("--report", args.report.as_deref()),
        ("--metrics", args.metrics.as_deref()),
    ];
    for (option, path) in files {
        if let Some(path) = path {
            atomic_file::probe(path)
                .with_context(|| format!("{option} {}: cannot be written", path.display()))?;
        }
    }
    atomic_file::probe(&settings.state_dir.join("versions.json")).with_context(|| {
        format!(
            "--state-dir {}: cannot be written",
            settings.state_dir.display()
        )
    })?;
    // A cache directory that is not safe is not used at all (a warning, a
    // compile); one that is safe must also be writable.
    if !args.no_cache && settings.cache_dir.is_dir() {
        atomic_file::probe(&settings.cache_dir.join("probe")).with_context(|| {
            format!(
                "--cache-dir {}: cannot be written",
                settings.cache_dir.display()
            )
        })?;
    }
    Ok(())
}

/// One policy to run and the settings it runs with.
struct Job {
    policy: Location,
    settings: Option<Location>,
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
            })
            .collect());
    }
    if args.settings.is_some() {
        bail!("--settings is for the policies named with it: name them (host run POLICY --settings FILE), or give each policy its settings in host.toml's [[policy]]");
    }
    let Some(path) = file.path() else {
        bail!("no policy to run: name one (host run POLICY), or list them in {DEFAULT_CONFIG_FILE} as [[policy]] tables with a `source`");
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

/// Every policy is read, verified and compiled before any is run: a bad one
/// stops the whole run with nothing applied.
fn run_all(args: &RunArgs, started: Instant) -> anyhow::Result<(Report, RunLock)> {
    let file = ConfigFile::load(args.trust.config.as_deref())?;
    let settings = RunSettings::resolve(&args.run_flags, &file)?;
    let versions = Versions::open(&settings.state_dir)?;
    check_outputs(args, &settings)?;
    let trust = resolve_trust(&args.trust.trusted_key, &args.trust.flags, &file)?;
    let jobs = jobs(args, &file)?;
    let remote = remote(&jobs, args, &file, &settings, started)?;
    let gate = Gate {
        trust: &trust,
        versions: &versions,
        allow_unsigned: args.allow_unsigned,
        allow_rollback: args.allow_rollback,
        remote: remote.as_ref(),
    };

    let runtime = PolicyRuntime::new(settings.limits)?;
    let cache = if args.no_cache {
        None
    } else {
        CompileCache::open(&settings.cache_dir)
    };
    // The settings are the desired state as much as the code: admitted the
    // same way, before any policy starts, each once however many policies
    // share it.
    let mut admitted_settings: Vec<(Location, Admitted, String)> = Vec::new();
    let mut loaded = Vec::new();
    for job in &jobs {
        let settings_index = match &job.settings {
            None => None,
            Some(location) => Some(
                match admitted_settings.iter().position(|(l, _, _)| l == location) {
                    Some(index) => index,
                    None => {
                        let admitted = gate.admit(Kind::Settings, location)?;
                        let text = admission::settings_text(&admitted)?;
                        admitted_settings.push((location.clone(), admitted, text));
                        admitted_settings.len() - 1
                    }
                },
            ),
        };
        let mut admitted = gate.admit(Kind::Policy, &job.policy)?;
        if let Some(index) = settings_index {
            admitted.signature.settings =
                Some(Box::new(admitted_settings[index].1.signature.clone()));
        }
        if let Some(warning) = &admitted.signature.warning {
            tracing::warn!("{warning}");
        }
        if let Some(key_id) = &admitted.signature.key_id {
            tracing::info!(policy = %admitted.origin, key_id = %key_id, "signature verified");
        }
        let policy = runtime
            .load(&admitted.bytes, cache.as_ref())
            .with_context(|| format!("loading policy {}", admitted.origin))?;
        tracing::info!(
            policy = %admitted.origin,
            cache = ?policy.cache,
            ms = millis(policy.load_time),
            "policy compiled and linked"
        );
        loaded.push((admitted, policy, settings_index));
    }

    let wait = if args.no_wait {
        Wait::No
    } else {
        Wait::Up(settings.lock_timeout)
    };
    let lock = RunLock::acquire(&settings.lock_file, wait)?;
    if let Some(signal) = interrupt::received() {
        bail!(
            "interrupted by {} before the first change; nothing was changed",
            interrupt::name(signal)
        );
    }
    // What a run killed while writing left behind (only runs holding the
    // lock write these files, so none is in use).
    for path in [args.report.as_deref(), args.metrics.as_deref()]
        .into_iter()
        .flatten()
        .map(std::path::Path::to_path_buf)
        .chain([settings.state_dir.join("versions.json")])
    {
        atomic_file::remove_stale(&path);
    }
    // Under the lock: no other run can record a version between this check
    // and write. A noop run records nothing: trying a new version with
    // --noop must not make the one in service a refused rollback.
    if !args.noop {
        admission::record_versions(
            &settings.state_dir,
            loaded
                .iter()
                .map(|(admitted, _, _)| admitted)
                .chain(admitted_settings.iter().map(|(_, admitted, _)| admitted)),
            args.allow_rollback,
        )?;
    }

    let systemctl = std::env::var_os("PATH")
        .and_then(|path| find_in_path("systemctl", &path))
        .ok_or_else(|| "systemctl not found on PATH".to_owned());
    let mut provider: Box<dyn Provider> = Box::new(SystemdProvider::new(
        SystemdConfig {
            systemctl,
            timeout: settings.systemctl_timeout,
            noop: args.noop,
            allow: settings.allow,
            status_via: settings.status_via,
        },
        Box::new(ProcessRunner),
    ));

    let mut refreshed = args.refresh.clone();
    let mut reports = Vec::with_capacity(loaded.len());
    let last = loaded.len().saturating_sub(1);
    let mut not_started = Vec::new();
    for (index, (admitted, policy, settings_index)) in loaded.into_iter().enumerate() {
        if interrupt::received().is_some() {
            not_started.push(format!("policy {} (not started)", admitted.name));
            continue;
        }
        let policy_started = if index == 0 { started } else { Instant::now() };
        let settings_doc = settings_index.map(|i| &admitted_settings[i]);
        let options = RunOptions {
            noop: args.noop,
            refreshed: refreshed.clone(),
            settings: settings_doc.map(|(_, _, text)| text.clone()),
        };
        let run = runtime.run(&policy, options, provider)?;
        provider = run.provider;
        if let Err(failure) = &run.outcome {
            tracing::error!(policy = %admitted.origin, class = failure.class, "policy failed: {}", failure.message);
        }
        // The run's one reload after enablement changes follows the last
        // policy, and is reported with it.
        let finished = if index == last {
            provider.finish()
        } else {
            Ok(())
        };
        let calls = provider.take_calls();
        let (status_reader, status_note) = provider.status_reader();
        let provider_info = ProviderInfo {
            name: provider.name(),
            available: provider.unavailable_reason().is_none(),
            detail: provider.unavailable_reason().map(str::to_owned),
            status_reader,
            status_note: status_note.map(str::to_owned),
        };
        let outcome =
            GuestOutcome::new(run.outcome, &calls, args.noop, settings.limits.report_bytes);
        let record = RunRecord {
            policy: admitted.name,
            source: admitted.source,
            settings_source: settings_doc.map(|(_, admitted, _)| admitted.source.clone()),
            noop: args.noop,
            signature: admitted.signature,
            compile: CompileInfo {
                cache: policy.cache,
                duration_ms: millis(policy.load_time),
            },
            provider: provider_info,
            outcome,
            calls,
            log: run.log,
            duration: policy_started.elapsed(),
        };
        let mut report = RunReport::new(record);
        if let Err(e) = finished {
            report.errors.push(format!(
                "daemon-reload after the enablement changes failed: {}",
                e.message()
            ));
            report.summary.success = false;
        }
        // What this policy changed counts as changed for the policies after it.
        refreshed.extend(
            report
                .resources
                .iter()
                .filter(|r| r.changed)
                .map(|r| r.resource.clone()),
        );
        reports.push(report);
    }
    // A run with nothing left to run still ends with its reload.
    if interrupt::received().is_some() && !not_started.is_empty() {
        if let Err(e) = provider.finish() {
            tracing::error!(
                "daemon-reload after the enablement changes failed: {}",
                e.message()
            );
        }
    }
    let mut report = Report::new(reports);
    if let Some(signal) = interrupt::received() {
        report.interrupt(interrupt::name(signal), not_started);
    }
    Ok((report, lock))
}
