//! `host pause` and `host resume`: an operator's maintenance window. The
//! pauses are written to the state directory at once, without the run lock
//! (a run under way keeps what it read; the next run and a watch, which
//! follows the file, see the change).

use std::time::SystemTime;

use anyhow::{bail, Context as _};

use crate::cli::{PauseArgs, ResumeArgs};
use crate::left_alone::pause::Pauses;
use crate::left_alone::until_words;
use crate::service_name::CheckedName;
use crate::settings::{ConfigFile, StateFlags};

pub fn pause(args: &PauseArgs) -> anyhow::Result<i32> {
    let units = systemd_names(&args.units)?;
    let (path, mut pauses) = open(&args.state_flags, args.config.path())?;
    let now = SystemTime::now();
    pauses.pause(&units, args.length, now);
    pauses.save(&path)?;
    let until = until_words(args.length.map(|l| now + l));
    if units.is_empty() {
        println!("every unit is paused {until}: runs change none of them");
    } else {
        println!(
            "paused {} {until}: runs leave {} alone",
            units.join(", "),
            if units.len() == 1 { "it" } else { "them" }
        );
    }
    print_in_force(&pauses, now);
    Ok(0)
}

pub fn resume(args: &ResumeArgs) -> anyhow::Result<i32> {
    let units = systemd_names(&args.units)?;
    let (path, mut pauses) = open(&args.state_flags, args.config.path())?;
    let now = SystemTime::now();
    let ended = pauses.resume(&units, now)?;
    pauses.save(&path)?;
    match (ended, units.is_empty()) {
        (false, true) => println!("nothing was paused"),
        (false, false) => println!("{} was not paused", units.join(", ")),
        (true, true) => println!("every pause ended: the next run repairs what drifted"),
        (true, false) => println!(
            "resumed {}: the next run repairs what drifted",
            units.join(", ")
        ),
    }
    print_in_force(&pauses, now);
    Ok(0)
}

/// The names as systemd knows them (`web` is `web.service`), each checked
/// as a policy's name is.
fn systemd_names(given: &[String]) -> anyhow::Result<Vec<String>> {
    given
        .iter()
        .map(|name| {
            let checked = CheckedName::check(name)
                .map_err(|why| anyhow::anyhow!("cannot pause or resume {name:?}: {why}"))?;
            crate::resource::UnitName::of_checked(&checked)
                .map(crate::resource::UnitName::into_string)
                .with_context(|| format!("{name:?} is not a unit name systemd takes"))
        })
        .collect()
}

/// The pause record, for root only: the pauses change what every run,
/// which runs as root, does.
fn open(
    state: &StateFlags,
    config: Option<&std::path::Path>,
) -> anyhow::Result<(std::path::PathBuf, Pauses)> {
    let file = ConfigFile::load(config)?;
    let state_dir = state.resolve(&file)?.state_dir;
    if crate::fs_safety::euid() != 0 {
        bail!(
            "pauses are kept in the root-only state directory {}: run this as root",
            state_dir.display()
        );
    }
    Pauses::open(&state_dir)
}

fn print_in_force(pauses: &Pauses, now: SystemTime) {
    let listed = pauses.listed(now);
    if listed.is_empty() {
        return;
    }
    println!("paused now:");
    for (unit, pause) in listed {
        println!(
            "  {} {}",
            unit.unwrap_or("every unit"),
            until_words(pause.until())
        );
    }
}
