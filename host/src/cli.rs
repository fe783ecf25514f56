//! The command line: `host run ...`. The settings that host.toml can also
//! give are declared in [`crate::settings`], once for both.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::settings::{
    CacheFlags, OutputFlags, ProviderFlags, RegistryFlags, RunFlags, StateFlags, TrustFlags,
    WatchFlags,
};

#[derive(Debug, Parser)]
#[command(
    name = "host",
    version,
    about = "Run WebAssembly policies that keep systemd services in their desired state"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,

    /// How diagnostics on stderr are written.
    #[arg(long, global = true, value_enum, default_value = "human")]
    pub log_format: crate::logging::LogFormat,

    /// The least severe diagnostics shown (error, warn, info, debug, trace); RUST_LOG overrides it.
    #[arg(long, global = true, default_value = "warn")]
    pub log_level: String,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Apply a policy to this machine (or show what would change, with --noop).
    Run(Box<RunCommandArgs>),
    /// Keep applying policies: one full run, then a run of the policies concerned whenever
    /// a unit, file or document they depend on changes (until SIGTERM). Takes the policies
    /// and settings `run` takes; it prints no report (a line per resource changed or failed)
    /// and --refresh counts for its first run only. Root only; only systemd wakes it.
    Watch(Box<WatchArgs>),
    /// Leave units alone (all of them, when none is named): timer and watch runs refuse
    /// their changes and say "paused" until `host resume` or the time given. Root only.
    Pause(PauseArgs),
    /// End pauses (all of them, when no unit is named): the next run repairs the units.
    Resume(ResumeArgs),
    /// Generate a minisign key pair for signing policies.
    Keygen(KeygenArgs),
    /// Sign a policy: writes POLICY.wasm.minisig beside it.
    Sign(SignArgs),
    /// Show units as the host reads them (is-active and is-enabled words), over D-Bus or systemctl.
    Status(Box<StatusArgs>),
    /// Show what policies are told about this machine: the facts the host gathers (host
    /// name, OS, architecture, CPUs, memory, versions), then the labels host.toml gives it.
    Facts(FactsArgs),
    /// Push a signed policy or settings document to an OCI registry, with its signature.
    Push(PushArgs),
    /// Check a policy's signature against trusted keys (exit 0 valid; 1 invalid, or valid but
    /// refused by this machine's rollback record: older than what it accepted, or undated).
    Verify(VerifyArgs),
    /// Compile signed policies into the compile cache now (each signature checked first), so
    /// that no run pays a cold compile: worth it for large policies (Python, JavaScript).
    Compile(Box<CompileArgs>),
    /// Make one policy of a declaration (a Python or JavaScript policy's component) and the
    /// engine that applies it: the component model's composition. Sign the result.
    Compose(ComposeArgs),
    /// Create a new policy crate: a policy with one service, a native test, a build command.
    NewPolicy(NewPolicyArgs),
    /// Show a policy's size, SHA-256, world, imports and exports, and signature.
    Inspect(InspectArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), generated from this command line; with --out-dir, write one page per subcommand too.
    Man {
        /// Write NAME.8 and NAME-SUBCOMMAND.8 into DIR instead.
        #[arg(long, value_name = "DIR")]
        out_dir: Option<PathBuf>,
    },
    /// Print a host.toml with every setting, commented and explained (the packaged default).
    ConfigTemplate,
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The policy (*.wasm) or settings document (*.yaml, *.yml, *.json) to inspect: a
    /// file, or an oci://REGISTRY/REPOSITORY:TAG reference (pulled from the registry
    /// now, kept nowhere).
    #[arg(value_name = "FILE|REFERENCE")]
    pub policy: String,

    #[command(flatten)]
    pub trust: TrustArgs,

    #[command(flatten)]
    pub registry: RegistryFlags,

    /// Print one JSON document.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct NewPolicyArgs {
    /// The directory to create (it must not exist, or be empty).
    pub dir: PathBuf,

    /// The crate name [default: the directory's name].
    #[arg(long)]
    pub name: Option<String>,

    /// A guest-sdk checkout for the new policy to depend on, for SDK development
    /// [default: a copy of the guest-sdk this host ships, written to DIR/vendor]. Rust only.
    #[arg(long, value_name = "PATH")]
    pub sdk_path: Option<PathBuf>,

    /// The language the policy is written in: rust (a crate on guest-sdk), or python or js
    /// (a declaration, made one policy with the engine by `host compose`).
    #[arg(long, value_enum, default_value_t = Language::Rust)]
    pub lang: Language,
}

/// The language a new policy is written in (`host new-policy --lang`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Language {
    /// A crate on guest-sdk.
    Rust,
    /// A declaration built by componentize-py.
    Python,
    /// A declaration built by componentize-qjs.
    Js,
}

/// `--config`, declared once for every command that reads host.toml.
#[derive(Debug, Clone, Args)]
pub struct ConfigArg {
    /// The host configuration file: every setting of the host by its key
    /// [default: /etc/policy-host/host.toml, when it exists].
    #[arg(long = "config", id = "config", value_name = "FILE")]
    file: Option<PathBuf>,
}

impl ConfigArg {
    /// The file named, if any (else the default, when it exists).
    pub fn path(&self) -> Option<&std::path::Path> {
        self.file.as_deref()
    }
}

/// Where trusted public keys come from, and the configuration file that may
/// say so: the same for `run`, `verify` and `inspect`.
#[derive(Debug, Args)]
pub struct TrustArgs {
    /// A trusted public key file (minisign format). Repeatable. When none is given,
    /// every *.pub file in --trusted-keys-dir is trusted.
    #[arg(long, value_name = "FILE")]
    pub trusted_key: Vec<PathBuf>,

    #[command(flatten)]
    pub flags: TrustFlags,

    #[command(flatten)]
    pub config: ConfigArg,
}

#[derive(Debug, Args)]
pub struct KeygenArgs {
    /// Directory to write policy-host.pub and policy-host.key (mode 0600) into.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,

    /// Read the password protecting the secret key from the first line of FILE
    /// (otherwise it is asked for on the terminal).
    #[arg(long, value_name = "FILE", conflicts_with = "unencrypted")]
    pub password_file: Option<PathBuf>,

    /// Store the secret key without a password, for automation. Keep it safe by other means.
    #[arg(long)]
    pub unencrypted: bool,
}

#[derive(Debug, Args)]
pub struct ComposeArgs {
    /// The declaration component: built for the `declaration` world of
    /// wit/declaration/declaration.wit (componentize-py, componentize-qjs, jco).
    pub declaration: PathBuf,

    /// Where to write the policy (unsigned: sign it next).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub out: PathBuf,

    /// The engine component [default: /usr/lib/policy-host/declaration-engine.wasm, which
    /// the package installs; from a checkout:
    /// target/wasm32-wasip2/release/declaration_engine.wasm].
    #[arg(long, value_name = "FILE")]
    pub engine: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct SignArgs {
    /// The policy to sign.
    pub policy: PathBuf,

    /// The secret key file (from `host keygen` or `minisign -G`).
    #[arg(long, value_name = "SECRET")]
    pub key: PathBuf,

    /// Read the secret key's password from the first line of FILE.
    #[arg(long, value_name = "FILE")]
    pub password_file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Units, as a policy names them (web, web.service, db.socket). With none: the
    /// machine's state (from host.toml's report_file): whether it is well, what drives
    /// it (the watch or the timer), each policy's latest outcome and sources, the units
    /// held back, then the units the policies manage.
    #[arg(value_name = "NAME")]
    pub names: Vec<String>,

    /// Print one JSON document.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub provider_flags: ProviderFlags,

    #[command(flatten)]
    pub config: ConfigArg,
}

#[derive(Debug, Args)]
pub struct FactsArgs {
    /// Print one JSON document: {"facts": every fact policies see, "labels": the labels alone}.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub config: ConfigArg,
}

#[derive(Debug, Args)]
pub struct PushArgs {
    /// The file to push: a policy (*.wasm) or a settings document (*.yaml, *.yml,
    /// *.json). Its signature FILE.minisig, when present, is pushed as its referrer.
    pub file: PathBuf,

    /// Where to: oci://REGISTRY/REPOSITORY:TAG. Hosts bind the signature to the
    /// repository's last component: .../policies/web:1.4 takes web.wasm. A digest
    /// pin (:TAG@sha256:..., or @sha256:... for no tag) is pushed only if the file
    /// makes exactly that artifact.
    #[arg(value_name = "REFERENCE")]
    pub reference: String,

    /// Push a file with no FILE.minisig, or one signed under another name than
    /// the repository binds (hosts refuse it: for a test registry only).
    #[arg(long)]
    pub allow_unsigned: bool,

    #[command(flatten)]
    pub registry: RegistryFlags,

    #[command(flatten)]
    pub config: ConfigArg,
}

#[derive(Debug, Args)]
pub struct PauseArgs {
    /// Units, as a policy names them (web, web.service, db.socket). With none: every unit.
    #[arg(value_name = "UNIT")]
    pub units: Vec<String>,

    /// How long the pause lasts (30s, 10m, 2h, 1day) [default: until `host resume`].
    #[arg(long = "for", value_name = "DURATION", value_parser = parse_pause_length)]
    pub length: Option<std::time::Duration>,

    #[command(flatten)]
    pub state_flags: StateFlags,

    #[command(flatten)]
    pub config: ConfigArg,
}

#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// Units whose pause ends. With none: every pause ends.
    #[arg(value_name = "UNIT")]
    pub units: Vec<String>,

    #[command(flatten)]
    pub state_flags: StateFlags,

    #[command(flatten)]
    pub config: ConfigArg,
}

/// `--for`: a humantime duration, more than a second and at most a year.
fn parse_pause_length(given: &str) -> Result<std::time::Duration, String> {
    let length = humantime::parse_duration(given)
        .map_err(|e| format!("{e} (durations look like 30s, 10m, 2h or 1day)"))?;
    if length < std::time::Duration::from_secs(1) {
        return Err("a pause lasts at least 1s".to_owned());
    }
    if length > std::time::Duration::from_secs(366 * 24 * 3600) {
        return Err(format!(
            "a pause lasts at most a year; without --for it lasts until {}",
            crate::program::command("resume")
        ));
    }
    Ok(length)
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The policy or settings file whose FILE.minisig to check, or an
    /// oci://REGISTRY/REPOSITORY:TAG reference (pulled from the registry now,
    /// with its signature referrers, and kept nowhere).
    #[arg(value_name = "FILE|REFERENCE")]
    pub policy: String,

    #[command(flatten)]
    pub trust: TrustArgs,

    #[command(flatten)]
    pub state_flags: StateFlags,

    #[command(flatten)]
    pub registry: RegistryFlags,
}

#[derive(Debug, Args)]
pub struct CompileArgs {
    /// The policies to compile: files (with FILE.minisig beside them), directories of
    /// them (their *.wasm files), or oci://REGISTRY/REPOSITORY:TAG references (pulled
    /// now, with their signatures). None: the [[policy]] list of host.toml, as run takes it.
    #[arg(value_name = "POLICY")]
    pub policies: Vec<String>,

    #[command(flatten)]
    pub trust: TrustArgs,

    #[command(flatten)]
    pub cache_flags: CacheFlags,

    #[command(flatten)]
    pub registry: RegistryFlags,
}

/// `host watch`: the runs' policies and settings, and when to run. Not
/// `run`'s report flags ([`ReportArgs`]): a watch prints no report (a line
/// per resource changed or failed) and exits 0 when told to stop.
#[derive(Debug, Args)]
#[command(mut_arg("refresh", |refresh| refresh.help(WATCH_REFRESH_HELP)))]
pub struct WatchArgs {
    #[command(flatten)]
    pub run: RunArgs,

    #[command(flatten)]
    pub watch_flags: WatchFlags,
}

/// `--refresh` in a watch: a watch that took it at every run would restart
/// the subscribers at every run, and its own restarts would wake it again.
const WATCH_REFRESH_HELP: &str = "A resource that changed outside the policy (TYPE#NAME, e.g. \
     file#/etc/httpd/conf/httpd.conf): services subscribed to it are restarted by the watch's \
     first run only; later runs restart subscribers when the host sees their references change. \
     Repeatable";

/// `host run`: a run, and how its report is printed.
#[derive(Debug, Args)]
pub struct RunCommandArgs {
    #[command(flatten)]
    pub run: RunArgs,

    #[command(flatten)]
    pub report: ReportArgs,
}

/// How `run` prints its report and what its exit status says (a watch
/// prints no report).
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Print the report as one JSON document.
    #[arg(long)]
    pub json: bool,

    /// List every provider call with its duration.
    #[arg(short, long, conflicts_with = "quiet")]
    pub verbose: bool,

    /// Print only failures.
    #[arg(short, long)]
    pub quiet: bool,

    /// Exit 0 when nothing changed, 2 on changes, 4 on failures, 6 on both (1: the run could not happen).
    #[arg(long)]
    pub detailed_exitcodes: bool,
}

/// What a run takes: its policies and what they run with. `run` and
/// `watch` share it.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Policies: WebAssembly components built for wasm32-wasip2, directories of
    /// them (their *.wasm files in name order), or oci://REGISTRY/REPOSITORY:TAG
    /// references. Applied in the order given, each seeing the services changed by
    /// the ones before as refreshed. None: the [[policy]] list of host.toml.
    #[arg(value_name = "POLICY")]
    pub policies: Vec<String>,

    /// A settings document passed to the policies named (for the manifest policy: the
    /// manifest), a file or an oci:// reference. It is the desired state as much as the
    /// policy is: it must be signed like a policy, under its own file name.
    #[arg(long, value_name = "FILE|REFERENCE")]
    pub settings: Option<String>,

    /// Query only: show what would change, change nothing.
    #[arg(long)]
    pub noop: bool,

    /// A resource that changed outside the policy (TYPE#NAME, e.g. file#/etc/httpd/conf/httpd.conf);
    /// services subscribed to it are restarted. Repeatable.
    #[arg(long, value_name = "TYPE#NAME")]
    pub refresh: Vec<String>,

    #[command(flatten)]
    pub trust: TrustArgs,

    /// Run a policy and settings without a valid signature (development only):
    /// prints a warning and records `signature.verified: false` in the report.
    #[arg(long)]
    pub allow_unsigned: bool,

    /// Run a policy or settings signed earlier than the version already accepted
    /// on this machine (rollback protection; see --state-dir).
    #[arg(long)]
    pub allow_rollback: bool,

    #[command(flatten)]
    pub provider_flags: ProviderFlags,

    #[command(flatten)]
    pub state_flags: StateFlags,

    #[command(flatten)]
    pub output_flags: OutputFlags,

    #[command(flatten)]
    pub run_flags: RunFlags,

    #[command(flatten)]
    pub cache_flags: CacheFlags,

    #[command(flatten)]
    pub registry: RegistryFlags,

    /// Fail at once when another run holds the lock.
    #[arg(long)]
    pub no_wait: bool,

    /// Compile the policy every time; neither read nor write the cache.
    #[arg(long)]
    pub no_cache: bool,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn settings_flags_reach_the_settings_model() {
        let cli = Cli::try_parse_from([
            "host",
            "run",
            "p.wasm",
            "--memory-limit",
            "32",
            "--allow-unit",
            "a",
            "--allow-unit",
            "b",
            "--trusted-keys-dir",
            "/k",
        ])
        .unwrap();
        let Command::Run(args) = cli.command else {
            panic!("not run")
        };
        let args = args.run;
        let file = crate::settings::ConfigFile::default();
        let settings = crate::settings::RunSettings::resolve(
            &args.run_flags,
            &args.cache_flags,
            &args.provider_flags,
            &args.state_flags,
            &file,
        )
        .unwrap();
        assert_eq!(settings.limits.memory_bytes, 32 << 20);
        assert_eq!(settings.allow.unwrap().patterns(), ["a", "b"]);
        let trust =
            crate::settings::resolve_trust(&args.trust.trusted_key, &args.trust.flags, &file)
                .unwrap();
        assert_eq!(trust.keys_dir, std::path::Path::new("/k"));
    }

    #[test]
    fn watch_help_shows_only_what_a_watch_uses() {
        let mut command = Cli::command();
        let watch = command.find_subcommand_mut("watch").expect("watch");
        let help = watch.render_long_help().to_string();
        for used in [
            "--settings",
            "--noop",
            "--refresh",
            "--trusted-key",
            "--report",
            "--metrics",
            "--settle",
            "--resync",
            "--debounce",
        ] {
            assert!(help.contains(used), "{used} missing from:\n{help}");
        }
        for unused in [
            "--json",
            "--quiet",
            "-q,",
            "--verbose",
            "--detailed-exitcodes",
        ] {
            assert!(
                !help.contains(unused),
                "a watch does not use {unused}:\n{help}"
            );
        }
        assert!(help.contains("first run only"), "{help}");
        for unused in ["--json", "-q", "--detailed-exitcodes"] {
            assert!(
                Cli::try_parse_from(["host", "watch", unused]).is_err(),
                "watch took {unused}"
            );
        }
        // run keeps them, and its own help of --refresh.
        let run = command.find_subcommand_mut("run").expect("run");
        let help = run.render_long_help().to_string();
        for flag in ["--json", "--quiet", "--verbose", "--detailed-exitcodes"] {
            assert!(help.contains(flag), "{flag} missing from run:\n{help}");
        }
        assert!(!help.contains("first run only"), "{help}");
    }

    #[test]
    fn status_help_shows_only_the_settings_status_reads() {
        use clap::CommandFactory as _;
        let mut command = Cli::command();
        let status = command.find_subcommand_mut("status").expect("status");
        let help = status.render_long_help().to_string();
        for read in [
            "--systemctl-timeout",
            "--allow-unit",
            "--provider",
            "--config",
        ] {
            assert!(help.contains(read), "{read} missing from:\n{help}");
        }
        for unread in [
            "--memory-limit",
            "--cpu-time",
            "--call-budget",
            "--lock-file",
            "--lock-timeout",
            "--state-dir",
            "--cache-dir",
            "--watch-path",
            "--jobs",
            "--settle",
            "--wall-clock",
        ] {
            assert!(
                !help.contains(unread),
                "status does not read {unread}:\n{help}"
            );
        }
        // run still takes every one of them.
        let run = command.find_subcommand_mut("run").expect("run");
        let help = run.render_long_help().to_string();
        for flag in [
            "--allow-unit",
            "--provider",
            "--memory-limit",
            "--settle",
            "--jobs",
        ] {
            assert!(help.contains(flag), "{flag} missing from run:\n{help}");
        }
    }
}
