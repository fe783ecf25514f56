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
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Apply a policy to this machine (or show what would change, with --noop).
    Run(RunArgs),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The policy: a WebAssembly component built for wasm32-wasip2.
    pub policy: PathBuf,

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

    /// Exit 0 when nothing changed, 2 on changes, 4 on failures, 6 on both (1: the run could not happen).
    #[arg(long)]
    pub detailed_exitcodes: bool,

    /// The longest one systemctl command may take, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 90.0)]
    pub systemctl_timeout: f64,
}
