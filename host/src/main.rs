use std::process::ExitCode;

use clap::Parser;
use policy_host::cli::{Cli, Command};
use policy_host::commands;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Run(args) => commands::run::execute(args),
    };
    match result {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(e) => {
            eprintln!("host: {e:#}");
            ExitCode::from(1)
        }
    }
}
