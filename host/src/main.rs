use std::process::ExitCode;

use clap::Parser;
use policy_host::cli::{Cli, Command};
use policy_host::commands;

fn main() -> ExitCode {
    let cli = Cli::parse();
    policy_host::logging::init(cli.log_format, &cli.log_level);
    let result = match &cli.command {
        Command::Run(args) => commands::run::execute(args),
        Command::Keygen(args) => commands::keygen::execute(args),
        Command::Sign(args) => commands::sign::execute(args),
        Command::Push(args) => commands::push::execute(args),
        Command::Status(args) => commands::status::execute(args),
        Command::Verify(args) => commands::verify::execute(args),
        Command::NewPolicy(args) => commands::new_policy::execute(args),
        Command::Inspect(args) => commands::inspect::execute(args),
        Command::Completions { shell } => commands::docs::completions(*shell),
        Command::Man => commands::docs::man(),
    };
    match result {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(e) => {
            tracing::error!("{e:#}");
            ExitCode::from(1)
        }
    }
}
