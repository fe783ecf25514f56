//! From the resolved values of each scope to what the commands use: the
//! limits, the allowlist, the trust, the registry client's settings.

use std::path::PathBuf;
use std::time::Duration;

use super::file::ConfigFile;
use super::options::{CacheFlags, ProviderFlags, RegistryFlags, RunFlags, StateFlags, TrustFlags};
use crate::facts::Labels;
use crate::limits::Limits;
use crate::provider::{StatusVia, UnitAllowlist};
use crate::signature::Trust;
use crate::subscriptions::WatchPaths;

/// Whom to trust, as `run`, `verify` and `inspect` all resolve it: the keys
/// given one by one, else the trusted-keys directory (flag, file, default).
pub fn resolve_trust(
    keys: &[PathBuf],
    flags: &TrustFlags,
    file: &ConfigFile,
) -> anyhow::Result<Trust> {
    Ok(Trust::new(
        keys.to_vec(),
        flags.resolve(file)?.trusted_keys_dir,
    ))
}

/// Everything `host run` needs to know beyond its policies.
#[derive(Debug)]
pub struct RunSettings {
    pub limits: Limits,
    pub systemctl_timeout: Duration,
    /// `provider`: `auto` or `systemctl`.
    pub status_via: StatusVia,
    /// How many jobs may be pending at once.
    pub jobs: usize,
    /// How long a started unit must stay up for its start to count.
    pub settle: Duration,
    pub allow: Option<UnitAllowlist>,
    pub lock_file: PathBuf,
    pub lock_timeout: Duration,
    pub cache_dir: PathBuf,
    pub state_dir: PathBuf,
    /// Where `file#` subscriptions may be read.
    pub watch_paths: WatchPaths,
    /// host.toml's `[labels]`: told to every policy with the gathered
    /// facts, carried by reports and metrics.
    pub labels: Labels,
}

impl RunSettings {
    pub fn resolve(
        flags: &RunFlags,
        cache: &CacheFlags,
        provider: &ProviderFlags,
        state: &StateFlags,
        file: &ConfigFile,
    ) -> anyhow::Result<Self> {
        let state_dir = state.resolve(file)?.state_dir;
        let ProviderSettings {
            systemctl_timeout,
            status_via,
            allow,
        } = ProviderSettings::resolve(provider, file)?;
        let values = flags.resolve(file)?;
        Ok(Self {
            limits: Limits {
                cpu_time: values.cpu_time,
                memory_bytes: values.memory_limit,
                call_budget: values.call_budget,
                log_bytes: values.log_limit,
                report_bytes: values.report_limit,
                wall_clock: values.wall_clock,
            },
            systemctl_timeout,
            status_via,
            jobs: values.jobs,
            settle: values.settle,
            allow,
            lock_file: values.lock_file,
            lock_timeout: values.lock_timeout,
            cache_dir: cache.resolve(file)?.cache_dir,
            state_dir,
            watch_paths: values.watch_paths,
            labels: file.labels().clone(),
        })
    }

    /// The settings with nothing given and no configuration file.
    pub fn defaults() -> Self {
        Self::resolve(
            &RunFlags::default(),
            &CacheFlags::default(),
            &ProviderFlags::default(),
            &StateFlags::default(),
            &ConfigFile::default(),
        )
        .expect("the declared defaults are valid")
    }
}

/// How systemd is asked, as `run` and `status` both resolve it.
#[derive(Debug)]
pub struct ProviderSettings {
    pub systemctl_timeout: Duration,
    /// `provider`: `auto` or `systemctl`.
    pub status_via: StatusVia,
    pub allow: Option<UnitAllowlist>,
}

impl ProviderSettings {
    pub fn resolve(flags: &ProviderFlags, file: &ConfigFile) -> anyhow::Result<Self> {
        let values = flags.resolve(file)?;
        let allow = if values.allow_units.is_empty() {
            None
        } else {
            Some(UnitAllowlist::new(&values.allow_units)?)
        };
        Ok(Self {
            systemctl_timeout: values.systemctl_timeout,
            status_via: values.provider,
            allow,
        })
    }
}

/// How `run` and `push` reach registries.
#[derive(Debug, Clone)]
pub struct RegistrySettings {
    pub ca: Option<PathBuf>,
    /// `registry_auth`: the registry logins file, when one is named.
    pub auth: Option<PathBuf>,
    pub insecure: Vec<String>,
    pub timeout: Duration,
}

impl RegistrySettings {
    pub fn resolve(flags: &RegistryFlags, file: &ConfigFile) -> anyhow::Result<Self> {
        let values = flags.resolve(file)?;
        Ok(Self {
            ca: values.registry_ca,
            auth: values.registry_auth,
            insecure: values.insecure_registries,
            timeout: values.registry_timeout,
        })
    }

    /// How to reach registries with these settings; `deadline` is when the
    /// command must be over (a run's wall clock), if it has one.
    pub fn client_config(self, deadline: Option<std::time::Instant>) -> crate::oci::RegistryConfig {
        crate::oci::RegistryConfig {
            ca: self.ca,
            insecure: self.insecure,
            auth: self.auth,
            timeout: self.timeout,
            deadline,
        }
    }
}
