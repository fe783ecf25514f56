//! `host run`: check the inputs, verify the signature, take the machine's
//! run lock, run the policy under its limits, then report.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context as _};

use crate::cli::RunArgs;
use crate::config::{HostConfig, DEFAULT_CONFIG_FILE};
use crate::contract::RunOptions;
use crate::guest::GuestOutcome;
use crate::limits::Limits;
use crate::lock::{RunLock, Wait};
use crate::provider::runner::{find_in_path, ProcessRunner};
use crate::provider::Provider;
use crate::provider::{SystemdConfig, SystemdProvider, UnitAllowlist};
use crate::report::{
    render_human, render_metrics, CompileInfo, ProviderInfo, Report, RunRecord, RunReport,
    SignatureReport, Style, Verbosity,
};
use crate::runtime::{CompileCache, PolicyRuntime};
use crate::signature::{
    load_trusted_keys, read_signature, signature_path_for, verify_bytes, DEFAULT_TRUSTED_KEYS_DIR,
};
use crate::text::millis;

/// The default per-command systemctl timeout.
const DEFAULT_SYSTEMCTL_TIMEOUT: f64 = 90.0;

/// Runs the policies; returns the process exit code. An `Err` means the run
/// could not happen (exit 1) and nothing was applied.
pub fn execute(args: &RunArgs) -> anyhow::Result<i32> {
    let started = Instant::now();
    let result = run_all(args, started);
    // The report and the output come first: the policies have been applied,
    // and a problem with the metrics file must not hide what they did.
    let shown = result
        .as_ref()
        .map_err(|e| format!("{e:#}"))
        .and_then(|report| publish(args, report).map_err(|e| format!("{e:#}")));
    if let (Some(path), Err(e)) = (&args.report, &result) {
        let failed = serde_json::json!({
            "error": format!("{e:#}"),
            "summary": {"resources": 0, "changed": 0, "failed": 0, "unchanged": 0, "success": false},
        });
        write_atomically(path, format!("{failed:#}\n").as_bytes())
            .with_context(|| format!("writing report {}", path.display()))?;
    }
    if let Some(path) = &args.metrics {
        let metrics = render_metrics(
            result.as_ref().ok(),
            started.elapsed().as_secs_f64(),
            SystemTime::now(),
        );
        write_atomically(path, metrics.as_bytes())
            .with_context(|| format!("writing metrics {}", path.display()))?;
    }
    let report = result?;
    shown.map_err(anyhow::Error::msg)?;
    Ok(report.exit_code(args.detailed_exitcodes))
}

/// Writes the report file (if asked) and prints the report.
fn publish(args: &RunArgs, report: &Report) -> anyhow::Result<()> {
    let json = serde_json::to_string_pretty(report)? + "\n";
    if let Some(path) = &args.report {
        write_atomically(path, json.as_bytes())
            .with_context(|| format!("writing report {}", path.display()))?;
    }
    let text = if args.json {
        json
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

/// Every policy is read, verified and compiled before any is run: a bad one
/// stops the whole run with nothing applied.
fn run_all(args: &RunArgs, started: Instant) -> anyhow::Result<Report> {
    let config = match &args.config {
        Some(path) => HostConfig::load(path, true)?,
        None => HostConfig::load(Path::new(DEFAULT_CONFIG_FILE), false)?,
    };
    let settings = Settings::resolve(args, &config)?;
    for reference in &args.refresh {
        check_reference(reference)?;
    }
    let policy_settings = args.settings.as_deref().map(read_settings).transpose()?;

    let runtime = PolicyRuntime::new(settings.limits)?;
    let cache = if args.no_cache {
        None
    } else {
        CompileCache::open(&args.cache_dir)
    };
    let mut loaded = Vec::new();
    for path in policy_files(&args.policies)? {
        // Read once: these exact bytes are verified, then compiled.
        let bytes =
            std::fs::read(&path).with_context(|| format!("reading policy {}", path.display()))?;
        let signature = check_signature(args, &path, &settings.trusted_keys_dir, &bytes)
            .with_context(|| format!("refusing policy {}", path.display()))?;
        if let Some(warning) = &signature.warning {
            tracing::warn!("{warning}");
        }
        if let Some(key_id) = &signature.key_id {
            tracing::info!(policy = %path.display(), key_id = %key_id, "signature verified");
        }
        let policy = runtime
            .load(&bytes, cache.as_ref())
            .with_context(|| format!("loading policy {}", path.display()))?;
        tracing::info!(
            policy = %path.display(),
            cache = ?policy.cache,
            ms = millis(policy.load_time),
            "policy compiled and linked"
        );
        loaded.push((path, signature, policy));
    }

    let wait = if args.no_wait {
        Wait::No
    } else {
        Wait::Up(seconds("--lock-timeout", args.lock_timeout)?)
    };
    let _lock = RunLock::acquire(&args.lock_file, wait)?;

    let systemctl = std::env::var_os("PATH")
        .and_then(|path| find_in_path("systemctl", &path))
        .ok_or_else(|| "systemctl not found on PATH".to_owned());
    let mut provider: Box<dyn Provider> = Box::new(SystemdProvider::new(
        SystemdConfig {
            systemctl,
            timeout: settings.systemctl_timeout,
            noop: args.noop,
            allow: settings.allow,
        },
        Box::new(ProcessRunner),
    ));
    let provider_info = ProviderInfo {
        name: provider.name(),
        available: provider.unavailable_reason().is_none(),
        detail: provider.unavailable_reason().map(str::to_owned),
    };

    let mut refreshed = args.refresh.clone();
    let mut reports = Vec::with_capacity(loaded.len());
    for (index, (path, signature, policy)) in loaded.into_iter().enumerate() {
        let policy_started = if index == 0 { started } else { Instant::now() };
        let options = RunOptions {
            noop: args.noop,
            refreshed: refreshed.clone(),
            settings: policy_settings.clone(),
        };
        let run = runtime.run(&policy, options, provider)?;
        provider = run.provider;
        if let Err(failure) = &run.outcome {
            tracing::error!(policy = %path.display(), class = failure.class, "policy failed: {}", failure.message);
        }
        let record = RunRecord {
            policy: display_name(&path),
            noop: args.noop,
            signature,
            compile: CompileInfo {
                cache: policy.cache,
                duration_ms: millis(policy.load_time),
            },
            provider: provider_info.clone(),
            outcome: GuestOutcome::new(run.outcome, settings.limits.report_bytes),
            calls: provider.take_calls(),
            log: run.log,
            duration: policy_started.elapsed(),
        };
        let report = RunReport::new(record);
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
    Ok(Report::new(reports))
}

/// The policy files to run: files as given, directories expanded to their
/// `*.wasm` files in name order.
fn policy_files(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(path)
                .with_context(|| format!("reading policy directory {}", path.display()))?
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "wasm") && p.is_file())
                .collect();
            if found.is_empty() {
                bail!("policy directory {} holds no *.wasm policy", path.display());
            }
            found.sort();
            files.extend(found);
        } else {
            files.push(path.clone());
        }
    }
    Ok(files)
}

/// Writes `contents` to a temporary file beside `path`, then renames it over
/// `path`: readers see the old file or the new one, never half of one.
fn write_atomically(path: &Path, contents: &[u8]) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path.file_name().context("no file name")?.to_string_lossy();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(contents)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

/// The run's settings: command line over configuration file over defaults.
struct Settings {
    limits: Limits,
    systemctl_timeout: Duration,
    allow: Option<UnitAllowlist>,
    trusted_keys_dir: PathBuf,
}

impl Settings {
    fn resolve(args: &RunArgs, config: &HostConfig) -> anyhow::Result<Self> {
        let (cli, file, default) = (&args.limits, &config.limits, Limits::default());
        let bytes = |name: &str, value: Option<u64>, default: usize| -> anyhow::Result<usize> {
            match value {
                None => Ok(default),
                Some(0) => bail!("{name} must be more than 0"),
                Some(v) => usize::try_from(v).with_context(|| format!("{name} {v} is too large")),
            }
        };
        let limits = Limits {
            cpu_time: match cli.cpu_time.or(file.cpu_time_secs) {
                Some(s) => seconds("--cpu-time", s)?,
                None => default.cpu_time,
            },
            memory_bytes: match cli.memory_limit.or(file.memory_mib) {
                Some(mib) => bytes("--memory-limit", mib.checked_mul(1 << 20), 0)?,
                None => default.memory_bytes,
            },
            call_budget: match cli.call_budget.or(file.call_budget) {
                Some(0) => bail!("--call-budget must be more than 0"),
                Some(n) => n,
                None => default.call_budget,
            },
            log_bytes: bytes(
                "--log-limit",
                cli.log_limit.or(file.log_bytes),
                default.log_bytes,
            )?,
            report_bytes: bytes(
                "--report-limit",
                cli.report_limit.or(file.report_bytes),
                default.report_bytes,
            )?,
            wall_clock: match cli.wall_clock.or(file.wall_clock_secs) {
                Some(s) => seconds("--wall-clock", s)?,
                None => default.wall_clock,
            },
        };
        let systemctl_timeout = seconds(
            "--systemctl-timeout",
            cli.systemctl_timeout
                .or(file.systemctl_timeout_secs)
                .unwrap_or(DEFAULT_SYSTEMCTL_TIMEOUT),
        )?;
        let patterns: Vec<String> = config
            .allow_units
            .iter()
            .chain(&args.allow_unit)
            .cloned()
            .collect();
        let allow = if patterns.is_empty() {
            None
        } else {
            Some(UnitAllowlist::new(&patterns)?)
        };
        let trusted_keys_dir = args
            .trust
            .trusted_keys_dir
            .clone()
            .or_else(|| config.trusted_keys_dir.clone())
            .unwrap_or_else(|| DEFAULT_TRUSTED_KEYS_DIR.into());
        Ok(Self {
            limits,
            systemctl_timeout,
            allow,
            trusted_keys_dir,
        })
    }
}

/// Verifies `bytes` against the policy's `.minisig` and the trusted keys, or,
/// with `--allow-unsigned`, records that nothing was verified.
fn check_signature(
    args: &RunArgs,
    policy: &Path,
    trusted_keys_dir: &Path,
    bytes: &[u8],
) -> anyhow::Result<SignatureReport> {
    if args.allow_unsigned {
        return Ok(SignatureReport::unverified(&format!(
            "policy signature NOT verified (--allow-unsigned) for {}; do not use this in production",
            display_name(policy)
        )));
    }
    let keys = load_trusted_keys(&args.trust.trusted_key, trusted_keys_dir)?;
    let signature = read_signature(&signature_path_for(policy))?;
    Ok(SignatureReport::verified(verify_bytes(
        bytes, &signature, &keys,
    )?))
}

fn seconds(option: &str, seconds: f64) -> anyhow::Result<Duration> {
    if !(seconds.is_finite() && seconds > 0.0 && seconds <= 86_400.0) {
        bail!("{option} must be more than 0 and at most 86400 seconds, got {seconds}");
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// `--refresh` takes `TYPE#NAME`; catching a typo here beats a silent no-op.
fn check_reference(reference: &str) -> anyhow::Result<()> {
    let valid = reference.split_once('#').is_some_and(|(kind, name)| {
        !name.is_empty()
            && kind.chars().next().is_some_and(|c| c.is_ascii_lowercase())
            && kind
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            && !name.chars().any(char::is_control)
    });
    if !valid {
        bail!("--refresh {reference:?}: expected TYPE#NAME, for example file#/etc/httpd/conf/httpd.conf");
    }
    Ok(())
}

fn read_settings(path: &Path) -> anyhow::Result<String> {
    let bytes =
        std::fs::read(path).with_context(|| format!("reading settings {}", path.display()))?;
    String::from_utf8(bytes)
        .with_context(|| format!("reading settings {}: not UTF-8 text", path.display()))
}

fn display_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}
