//! Every option of the host, declared once. A new option is one entry here
//! and one use of its typed value; its flag, host.toml key, help, default
//! and template line follow.
//!
//! Options are named in code as fields, so a misspelt name does not compile:
//!
//! ```compile_fail,E0609
//! let flags = policy_host::settings::RunFlags::default();
//! let _ = flags.cpu_tme; // no such option
//! ```

use super::declare::settings;
use super::setting::Setting;
use super::value::{
    AnyPath, Bytes, Choice, Count, Hosts, Jobs, Mebibytes, OptionalPath, Patterns, Prefixes,
    Seconds, SettleSeconds, Words,
};
use crate::provider::StatusVia;

settings! {
    /// The command-line flags of the settings `run`, `verify` and `inspect`
    /// share: whom to trust.
    Trust: TrustFlags => TrustValues {
        trusted_keys_dir: AnyPath {
            flag: "trusted-keys-dir",
            key: "trusted_keys_dir",
            value_name: "DIR",
            default: Some("/etc/policy-host/trusted-keys"),
            help: "The system directory of trusted *.pub keys, used when no --trusted-key is given",
        }
    }

    /// The command-line flags of the settings `run` and `status` share:
    /// how systemd is asked.
    Provider: ProviderFlags => ProviderValues {
        systemctl_timeout: Seconds {
            flag: "systemctl-timeout",
            key: "limits.systemctl_timeout_secs",
            value_name: "SECS",
            default: Some("90"),
            help: "The longest one exchange with systemd (a systemctl command, a D-Bus call) may \
                   take, and a start, stop or restart job from its submission to its end, in seconds",
        }
        allow_units: Patterns {
            flag: "allow-unit",
            key: "allow_units",
            value_name: "PATTERN",
            default: None,
            help: "Only let policies touch units matching this glob (e.g. 'web-*', 'nginx.service'); \
                   repeatable, adds to the configuration file's; other units are denied",
        }
        provider: Choice<StatusVia> {
            flag: "provider",
            key: "provider",
            value_name: "auto|systemctl",
            default: Some("auto"),
            help: "How systemd is asked: auto (over D-Bus when the system bus and systemd on it \
                   answer: status, jobs on systemd's job engine, unit files; else with systemctl) \
                   or systemctl (always the design's systemctl commands, one job at a time)",
        }
    }

    /// The command-line flags of the settings `run` and `verify` share:
    /// what the host remembers between runs.
    State: StateFlags => StateValues {
        state_dir: AnyPath {
            flag: "state-dir",
            key: "state_dir",
            value_name: "DIR",
            default: Some("/var/lib/policy-host"),
            help: "Where the host keeps what it must remember between runs (root-only): the newest \
                   signed version of each policy and settings file accepted, for rollback protection \
                   (versions.json), and what each service's file# and package# subscriptions last \
                   saw (subscriptions.json)",
        }
    }

    /// The command-line flags of where `run` writes its report and metrics
    /// (resolved on their own: a run that could not happen writes them too).
    Outputs: OutputFlags => OutputValues {
        report_file: OptionalPath {
            flag: "report",
            key: "report_file",
            value_name: "FILE",
            default: None,
            help: "Also write the JSON report to FILE, atomically (the last run's report); in \
                   host.toml, manual runs write it too, so monitoring sees them",
        }
        metrics_file: OptionalPath {
            flag: "metrics",
            key: "metrics_file",
            value_name: "FILE",
            default: None,
            help: "Write Prometheus metrics to FILE, atomically (for node_exporter's textfile \
                   collector; a missing directory is created, 0755)",
        }
    }

    /// The command-line flags of the settings `run` and `compile` share:
    /// where compiled policies are kept.
    Cache: CacheFlags => CacheValues {
        cache_dir: AnyPath {
            flag: "cache-dir",
            key: "cache_dir",
            value_name: "DIR",
            default: Some("/var/cache/policy-host"),
            help: "Where compiled policies are cached (root-only; unsafe entries are ignored and rebuilt)",
        }
    }

    /// The command-line flags of the settings of `run` alone.
    Run: RunFlags => RunValues {
        cpu_time: Seconds {
            flag: "cpu-time",
            key: "limits.cpu_time_secs",
            value_name: "SECS",
            default: Some("10"),
            help: "Guest CPU time per run, in seconds (host calls excluded)",
        }
        memory_limit: Mebibytes {
            flag: "memory-limit",
            key: "limits.memory_mib",
            value_name: "MIB",
            default: Some("64"),
            help: "Guest memory, in MiB",
        }
        call_budget: Count {
            flag: "call-budget",
            key: "limits.call_budget",
            value_name: "N",
            default: Some("10000"),
            help: "Provider calls per run",
        }
        log_limit: Bytes {
            flag: "log-limit",
            key: "limits.log_bytes",
            value_name: "BYTES",
            default: Some("1048576"),
            help: "Captured policy stdout and stderr, in bytes",
        }
        report_limit: Bytes {
            flag: "report-limit",
            key: "limits.report_bytes",
            value_name: "BYTES",
            default: Some("1048576"),
            help: "Text in the policy's report, in bytes",
        }
        wall_clock: Seconds {
            flag: "wall-clock",
            key: "limits.wall_clock_secs",
            value_name: "SECS",
            default: Some("900"),
            help: "The whole run, host calls included, in seconds",
        }
        lock_file: AnyPath {
            flag: "lock-file",
            key: "lock_file",
            value_name: "FILE",
            default: Some("/run/policy-host/lock"),
            help: "The lock file that keeps two runs on this machine from interleaving; its directory \
                   must be root's alone (created 0700 when missing)",
        }
        lock_timeout: Seconds {
            flag: "lock-timeout",
            key: "lock_timeout_secs",
            value_name: "SECS",
            default: Some("600"),
            help: "How long to wait for another run to release the lock, in seconds",
        }
        watch_paths: Prefixes {
            flag: "watch-path",
            key: "watch_paths",
            value_name: "DIR",
            default: Some("/etc,/opt,/srv,/usr"),
            help: "A directory below which file# subscriptions are read (never /proc, /sys, /dev \
                   or /run); repeatable, adds to the configuration file's; without any, /etc, \
                   /opt, /srv and /usr. The packaged units hide /home, /root and /tmp from the \
                   host (ProtectHome=, PrivateTmp=): a file there is never read or watched by them",
        }
        jobs: Jobs {
            flag: "jobs",
            key: "jobs",
            value_name: "N",
            default: Some("64"),
            help: "How many start, stop and restart jobs of a run may be pending at once on \
                   systemd's job engine (over D-Bus); 1 waits for each job before the next call, \
                   as systemctl does",
        }
        settle: SettleSeconds {
            flag: "settle",
            key: "settle_secs",
            value_name: "SECS",
            default: Some("1"),
            help: "How long a unit must stay up after its start or restart job ended for the \
                   start to count (same invocation, no automatic restart), in seconds; units \
                   started side by side settle side by side; 0 turns it off",
        }
    }

    /// The command-line flags of the settings of `watch` alone: when it runs.
    Watch: WatchFlags => WatchValues {
        resync: Seconds {
            flag: "resync",
            key: "watch.resync_secs",
            value_name: "SECS",
            default: Some("900"),
            help: "How often a watch makes a full run whatever happened, give or take a tenth \
                   (it also pulls oci:// sources and checks what could not be watched), in seconds",
        }
        debounce: Seconds {
            flag: "debounce",
            key: "watch.debounce_secs",
            value_name: "SECS",
            default: Some("0.1"),
            help: "How long a watch gathers file events after the first one before it runs (the \
                   events within it make one run; a unit's signal runs at once), in seconds",
        }
    }

    /// The command-line flags of the settings `run` and `push` share: how
    /// registries are reached.
    Registry: RegistryFlags => RegistryValues {
        registry_ca: OptionalPath {
            flag: "registry-ca",
            key: "registry_ca",
            value_name: "FILE",
            default: None,
            help: "A PEM file of certificate authorities trusted for registries, besides the system's",
        }
        insecure_registries: Hosts {
            flag: "insecure-registry",
            key: "insecure_registries",
            value_name: "HOST[:PORT]",
            default: None,
            help: "A registry spoken to over plain HTTP, without TLS (a test or an isolated network \
                   only); repeatable, adds to the configuration file's",
        }
        registry_auth: OptionalPath {
            flag: "registry-auth",
            key: "registry_auth",
            value_name: "FILE",
            default: None,
            help: "The Docker config.json holding registry logins (its \"auths\" entries, as `docker \
                   login` writes them); without it, $DOCKER_CONFIG/config.json, else \
                   /etc/policy-host/docker/config.json when it exists, else ~/.docker/config.json",
        }
        registry_timeout: Seconds {
            flag: "registry-timeout",
            key: "registry_timeout_secs",
            value_name: "SECS",
            default: Some("30"),
            help: "The longest one registry request may take, in seconds (never past the run's wall clock)",
        }
    }
}

/// Every setting of the host, scope by scope, in declaration order.
pub fn all_settings() -> impl Iterator<Item = &'static Setting> {
    TrustFlags::SETTINGS
        .iter()
        .chain(ProviderFlags::SETTINGS)
        .chain(StateFlags::SETTINGS)
        .chain(OutputFlags::SETTINGS)
        .chain(RunFlags::SETTINGS)
        .chain(CacheFlags::SETTINGS)
        .chain(RegistryFlags::SETTINGS)
        .chain(WatchFlags::SETTINGS)
}

impl Words for StatusVia {
    const WORDS: &'static [&'static str] = &["auto", "systemctl"];
    fn from_word(word: &str) -> Option<Self> {
        match word {
            "auto" => Some(StatusVia::Auto),
            "systemctl" => Some(StatusVia::Systemctl),
            _ => None,
        }
    }
}
