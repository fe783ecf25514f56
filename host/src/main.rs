use std::process::ExitCode;

use clap::FromArgMatches as _;
use policy_host::cli::{Cli, Command};
use policy_host::commands;

/// The name the program was called by (`host`, or `policy-host` as the
/// Debian package installs it): help, man pages and completions use it.
fn invoked_name() -> String {
    std::env::args_os()
        .next()
        .as_deref()
        .map(std::path::Path::new)
        .and_then(std::path::Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "host".to_owned())
}

fn main() -> ExitCode {
    let name = invoked_name();
    policy_host::program::set_name(&name);
    let matches = commands::docs::command(&name).get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    policy_host::logging::init(cli.log_format, &cli.log_level);
    let result = match &cli.command {
        Command::Run(args) => commands::run::execute(args),
        Command::Watch(args) => commands::watch::execute(args),
        Command::Pause(args) => commands::pause::pause(args),
        Command::Resume(args) => commands::pause::resume(args),
        Command::Keygen(args) => commands::keygen::execute(args),
        Command::Sign(args) => commands::sign::execute(args),
        Command::Push(args) => commands::push::execute(args),
        Command::Status(args) => commands::status::execute(args),
        Command::Facts(args) => commands::facts::execute(args),
        Command::Verify(args) => commands::verify::execute(args),
        Command::Compile(args) => commands::compile::execute(args),
        Command::Compose(args) => commands::compose::execute(args),
        Command::NewPolicy(args) => commands::new_policy::execute(args),
        Command::Inspect(args) => commands::inspect::execute(args),
        Command::Completions { shell } => commands::docs::completions(*shell, &name),
        Command::Man { out_dir } => commands::docs::man(&name, out_dir.as_deref()),
        Command::ConfigTemplate => {
            print!("{}", policy_host::settings::host_toml_template());
            Ok(0)
        }
    };
    match result {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(e) => {
            tracing::error!("{e:#}");
            ExitCode::from(1)
        }
    }
}
