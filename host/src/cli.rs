//! The command line: `host run ...`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

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
    Run(Box<RunArgs>),
    /// Generate a minisign key pair for signing policies.
    Keygen(KeygenArgs),
    /// Sign a policy: writes POLICY.wasm.minisig beside it.
    Sign(SignArgs),
    /// Check a policy's signature against trusted keys (exit 0 valid, 1 invalid).
    Verify(VerifyArgs),
    /// Create a new policy crate: a policy with one service, a native test, a build command.
    NewPolicy(NewPolicyArgs),
    /// Show a policy's size, SHA-256, world, imports and exports, and signature.
    Inspect(InspectArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), generated from this command line.
    Man,
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The policy to inspect.
    pub policy: PathBuf,

    #[command(flatten)]
    pub trust: TrustArgs,

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

    /// Path to the guest-sdk crate the new policy depends on
    /// [default: the guest-sdk this host was built with].
    #[arg(long, value_name = "PATH")]
    pub sdk_path: Option<PathBuf>,
}

/// Where trusted public keys come from.
#[derive(Debug, Args)]
pub struct TrustArgs {
    /// A trusted public key file (minisign format). Repeatable. When none is given,
    /// every *.pub file in --trusted-keys-dir is trusted.
    #[arg(long, value_name = "FILE")]
    pub trusted_key: Vec<PathBuf>,

    /// The system directory of trusted *.pub keys [default: the configuration
    /// file's trusted_keys_dir, else /etc/policy-host/trusted-keys].
    #[arg(long, value_name = "DIR")]
    pub trusted_keys_dir: Option<PathBuf>,
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
pub struct VerifyArgs {
    /// The policy whose POLICY.minisig to check.
    pub policy: PathBuf,

    #[command(flatten)]
    pub trust: TrustArgs,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Policies: WebAssembly components built for wasm32-wasip2, or directories
    /// of them (their *.wasm files in name order). Applied in the order given,
    /// each seeing the services changed by the ones before as refreshed.
    #[arg(required = true, value_name = "POLICY")]
    pub policies: Vec<PathBuf>,

    /// A settings document passed to the policy as text (for the manifest policy: the manifest).
    #[arg(long, value_name = "FILE")]
    pub settings: Option<PathBuf>,

    /// Query only: show what would change, change nothing.
    #[arg(long)]
    pub noop: bool,

    /// A resource that changed outside the policy (TYPE#NAME, e.g. file#/etc/httpd/conf/httpd.conf);
    /// services subscribed to it are restarted. Repeatable.
    #[arg(long, value_name = "TYPE#NAME")]
    pub refresh: Vec<String>,

    /// Print the report as one JSON document.
    #[arg(long)]
    pub json: bool,

    /// Also write the JSON report to FILE, atomically (the last run's report).
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,

    /// Write Prometheus metrics to FILE, atomically (for node_exporter's textfile collector).
    #[arg(long, value_name = "FILE")]
    pub metrics: Option<PathBuf>,

    /// List every provider call with its duration.
    #[arg(short, long, conflicts_with = "quiet")]
    pub verbose: bool,

    /// Print only failures.
    #[arg(short, long)]
    pub quiet: bool,

    /// Exit 0 when nothing changed, 2 on changes, 4 on failures, 6 on both (1: the run could not happen).
    #[arg(long)]
    pub detailed_exitcodes: bool,

    #[command(flatten)]
    pub trust: TrustArgs,

    /// Run a policy without a valid signature (development only): prints a
    /// warning and records `signature.verified: false` in the report.
    #[arg(long)]
    pub allow_unsigned: bool,

    #[command(flatten)]
    pub limits: LimitArgs,

    /// Only let policies touch units matching this glob (e.g. 'web-*', 'nginx.service').
    /// Repeatable; adds to the configuration file's allow_units. Other units are denied.
    #[arg(long, value_name = "PATTERN")]
    pub allow_unit: Vec<String>,

    /// The host configuration file (limits, allow_units, trusted_keys_dir).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// The lock file that keeps two runs on this machine from interleaving.
    #[arg(long, value_name = "FILE", default_value = crate::lock::DEFAULT_LOCK_FILE)]
    pub lock_file: PathBuf,

    /// How long to wait for another run to release the lock, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 600.0)]
    pub lock_timeout: f64,

    /// Fail at once when another run holds the lock.
    #[arg(long)]
    pub no_wait: bool,

    /// Where compiled policies are cached (root-only; unsafe entries are ignored and rebuilt).
    #[arg(long, value_name = "DIR", default_value = crate::runtime::cache::DEFAULT_CACHE_DIR)]
    pub cache_dir: PathBuf,

    /// Compile the policy every time; neither read nor write the cache.
    #[arg(long)]
    pub no_cache: bool,
}

/// Limits of one run; each overrides the configuration file, which overrides the default.
#[derive(Debug, Args)]
pub struct LimitArgs {
    /// The longest one systemctl command may take, in seconds [default: 90].
    #[arg(long, value_name = "SECS")]
    pub systemctl_timeout: Option<f64>,

    /// Guest CPU time per run, in seconds (host calls excluded) [default: 10].
    #[arg(long, value_name = "SECS")]
    pub cpu_time: Option<f64>,

    /// Guest memory, in MiB [default: 64].
    #[arg(long, value_name = "MIB")]
    pub memory_limit: Option<u64>,

    /// Provider calls per run [default: 10000].
    #[arg(long, value_name = "N")]
    pub call_budget: Option<u64>,

    /// Captured policy stdout and stderr, in bytes [default: 1048576].
    #[arg(long, value_name = "BYTES")]
    pub log_limit: Option<u64>,

    /// Text in the policy's report, in bytes [default: 1048576].
    #[arg(long, value_name = "BYTES")]
    pub report_limit: Option<u64>,

    /// The whole run, host calls included, in seconds [default: 900].
    #[arg(long, value_name = "SECS")]
    pub wall_clock: Option<f64>,
}
