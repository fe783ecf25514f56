//! `host completions SHELL` and `host man`: generated from the clap
//! definition, so they never drift from the real options, and named after
//! the program as it was called (`host` when built with cargo,
//! `policy-host` as the Debian package installs it).

use std::io::Write as _;
use std::path::Path;

use anyhow::Context as _;

use crate::cli::Cli;

/// The command line definition under `name`.
pub fn command(name: &str) -> clap::Command {
    use clap::CommandFactory;
    Cli::command()
        .name(name.to_owned())
        .bin_name(name.to_owned())
}

/// The completion script for `shell`, for the program called `name`.
pub fn completion(shell: clap_complete::Shell, name: &str) -> Vec<u8> {
    let mut command = command(name);
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, name, &mut script);
    script
}

/// The man pages of the program called `name`, in section 8 (it is run by
/// root): `NAME.8`, whose sections cover every subcommand too, and one page
/// per subcommand (`NAME-run.8`, ...). File names and contents.
pub fn man_pages(name: &str) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let command = command(name);
    let mut pages = Vec::new();
    let mut page = Vec::new();
    clap_mangen::Man::new(command.clone())
        .section("8")
        .render(&mut page)?;
    // One section per subcommand with its options, so `man NAME` documents `NAME run` too.
    for sub in command.get_subcommands() {
        let title = format!("{} {}", name.to_uppercase(), sub.get_name().to_uppercase());
        let man = clap_mangen::Man::new(sub.clone());
        writeln!(page, ".SH \"{title}\"")?;
        man.render_description_section(&mut page)?;
        man.render_options_section(&mut page)?;
    }
    pages.push((format!("{name}.8"), page));
    for sub in command.get_subcommands() {
        if sub.get_name() == "help" {
            continue;
        }
        let page_name = format!("{name}-{}", sub.get_name());
        let sub = sub
            .clone()
            .name(page_name.clone())
            .bin_name(format!("{name} {}", sub.get_name()));
        let mut page = Vec::new();
        clap_mangen::Man::new(sub).section("8").render(&mut page)?;
        pages.push((format!("{page_name}.8"), page));
    }
    Ok(pages)
}

pub fn completions(shell: clap_complete::Shell, name: &str) -> anyhow::Result<i32> {
    std::io::stdout().write_all(&completion(shell, name))?;
    Ok(0)
}

/// Prints the main page, or writes every page into `out_dir`.
pub fn man(name: &str, out_dir: Option<&Path>) -> anyhow::Result<i32> {
    let pages = man_pages(name)?;
    match out_dir {
        None => std::io::stdout().write_all(&pages[0].1)?,
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            for (file, page) in &pages {
                let path = dir.join(file);
                std::fs::write(&path, page)
                    .with_context(|| format!("writing {}", path.display()))?;
                println!("{}", path.display());
            }
        }
    }
    Ok(0)
}
