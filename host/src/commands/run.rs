//! `host run`: load, check and run a policy, then report.

use std::io::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

use crate::cli::RunArgs;
use crate::provider::runner::{find_in_path, ProcessRunner};
use crate::provider::{SystemdConfig, SystemdProvider};
use crate::report::{ProviderInfo, RunReport, SignatureReport};
use crate::runtime::{PolicyInput, PolicyRuntime, RunLimits};
use crate::signature::{load_trusted_keys, read_signature, signature_path_for, verify_bytes};

/// Runs the policy; returns the process exit code. An `Err` means the run
/// could not happen (exit 1) and nothing was applied.
pub fn execute(args: &RunArgs) -> anyhow::Result<i32> {
    let started = Instant::now();
    let timeout = systemctl_timeout(args.systemctl_timeout)?;
    for reference in &args.refresh {
        check_reference(reference)?;
    }
    let settings = args.settings.as_deref().map(read_settings).transpose()?;
    // Read once: these exact bytes are verified, then compiled.
    let bytes = std::fs::read(&args.policy)
        .with_context(|| format!("reading policy {}", args.policy.display()))?;
    let signature = check_signature(args, &bytes)
        .with_context(|| format!("refusing policy {}", args.policy.display()))?;
    if let Some(warning) = &signature.warning {
        eprintln!("host: warning: {warning}");
    }

    let runtime = PolicyRuntime::new(RunLimits::default())?;
    let component = runtime
        .load(&bytes)
        .with_context(|| format!("loading policy {}", args.policy.display()))?;

    let systemctl = std::env::var_os("PATH")
        .and_then(|path| find_in_path("systemctl", &path))
        .ok_or_else(|| "systemctl not found on PATH".to_owned());
    let provider = SystemdProvider::new(
        SystemdConfig {
            systemctl,
            timeout,
            noop: args.noop,
        },
        Box::new(ProcessRunner),
    );
    let provider_info = ProviderInfo {
        name: provider.name(),
        available: provider.unavailable_reason().is_none(),
        detail: provider.unavailable_reason().map(str::to_owned),
    };
    let input = PolicyInput {
        noop: args.noop,
        refreshed: args.refresh.clone(),
        settings,
    };
    let run = runtime.run(&component, input, provider)?;
    let report = RunReport::new(
        display_name(&args.policy),
        args.noop,
        signature,
        provider_info,
        run.outcome,
        run.provider.calls().to_vec(),
        run.log,
        started.elapsed(),
    );
    let text = if args.json {
        serde_json::to_string_pretty(&report)? + "\n"
    } else {
        report.render_human()
    };
    // A closed pipe (`host run ... | head`) is an error to report, not a panic.
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .context("writing the report to stdout")?;
    Ok(report.exit_code(args.detailed_exitcodes))
}

/// Verifies `bytes` against the policy's `.minisig` and the trusted keys, or,
/// with `--allow-unsigned`, records that nothing was verified.
fn check_signature(args: &RunArgs, bytes: &[u8]) -> anyhow::Result<SignatureReport> {
    if args.allow_unsigned {
        return Ok(SignatureReport::unverified(
            "policy signature NOT verified (--allow-unsigned); do not use this in production",
        ));
    }
    let keys = load_trusted_keys(&args.trust.trusted_key, &args.trust.trusted_keys_dir)?;
    let signature = read_signature(&signature_path_for(&args.policy))?;
    Ok(SignatureReport::verified(verify_bytes(
        bytes, &signature, &keys,
    )?))
}

fn systemctl_timeout(seconds: f64) -> anyhow::Result<Duration> {
    if !(seconds.is_finite() && seconds > 0.0 && seconds <= 86_400.0) {
        bail!("--systemctl-timeout must be between 0 and 86400 seconds, got {seconds}");
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
