//! `host run`: load, check and run a policy, then report.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

use crate::cli::RunArgs;
use crate::provider::runner::{find_in_path, ProcessRunner};
use crate::provider::{SystemdConfig, SystemdProvider};
use crate::report::{ProviderInfo, RunReport};
use crate::runtime::{PolicyInput, PolicyRuntime, RunLimits};

/// Runs the policy; returns the process exit code. An `Err` means the run
/// could not happen (exit 1) and nothing was applied.
pub fn execute(args: &RunArgs) -> anyhow::Result<i32> {
    let started = Instant::now();
    let timeout = systemctl_timeout(args.systemctl_timeout)?;
    for reference in &args.refresh {
        check_reference(reference)?;
    }
    let settings = args.settings.as_deref().map(read_settings).transpose()?;
    let bytes = std::fs::read(&args.policy)
        .with_context(|| format!("reading policy {}", args.policy.display()))?;

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
        provider_info,
        run.outcome,
        run.provider.calls().to_vec(),
        run.log,
        started.elapsed(),
    );
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.render_human());
    }
    Ok(report.exit_code(args.detailed_exitcodes))
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
