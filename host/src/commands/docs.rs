//! `host completions SHELL` and `host man`: generated from the clap
//! definition, so they never drift from the real options.

use std::io::Write as _;

use clap::CommandFactory;

use crate::cli::Cli;

pub fn completions(shell: clap_complete::Shell) -> anyhow::Result<i32> {
    let mut command = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "host", &mut script);
    std::io::stdout().write_all(&script)?;
    Ok(0)
}

pub fn man() -> anyhow::Result<i32> {
    let mut page = Vec::new();
    clap_mangen::Man::new(Cli::command()).render(&mut page)?;
    // One section per subcommand with its options, so `man host` documents `host run` too.
    for sub in Cli::command().get_subcommands() {
        let title = format!("HOST {}", sub.get_name().to_uppercase());
        let man = clap_mangen::Man::new(sub.clone());
        writeln!(page, ".SH \"{title}\"")?;
        man.render_description_section(&mut page)?;
        man.render_options_section(&mut page)?;
    }
    std::io::stdout().write_all(&page)?;
    Ok(0)
}
