//! `host completions SHELL` and `host man`: generated from the clap
//! definition, so they never drift from the real options, and named after
//! the program as it was called (`host` when built with cargo,
//! `policy-host` as the Debian package installs it).

use std::io::Write as _;
use std::path::Path;

use anyhow::Context as _;

use crate::cli::Cli;

/// The command line definition under `name`, its help texts included:
/// a command they quote (`` `host resume` ``) is quoted under `name`.
pub fn command(name: &str) -> clap::Command {
    use clap::CommandFactory;
    named(Cli::command(), name)
        .name(name.to_owned())
        .bin_name(name.to_owned())
}

/// `command`'s help texts (its own, its arguments', its subcommands'), with
/// each quoted command (`` `host SUBCOMMAND` ``) under `name`.
fn named(command: clap::Command, name: &str) -> clap::Command {
    if name == crate::program::DEFAULT {
        return command;
    }
    let text = |styled: Option<&clap::builder::StyledStr>| {
        styled.map(|help| quoted_under(&help.to_string(), name))
    };
    let about = text(command.get_about());
    let long_about = text(command.get_long_about());
    let after_help = text(command.get_after_help());
    let after_long_help = text(command.get_after_long_help());
    let mut command = command
        .mut_args(|arg| {
            let help = text(arg.get_help());
            let long_help = text(arg.get_long_help());
            let arg = match help {
                Some(help) => arg.help(help),
                None => arg,
            };
            match long_help {
                Some(help) => arg.long_help(help),
                None => arg,
            }
        })
        .mut_subcommands(|sub| named(sub, name));
    if let Some(about) = about {
        command = command.about(about);
    }
    if let Some(about) = long_about {
        command = command.long_about(about);
    }
    if let Some(help) = after_help {
        command = command.after_help(help);
    }
    if let Some(help) = after_long_help {
        command = command.after_long_help(help);
    }
    command
}

/// `text` with every `` `host `` (a command quoted in the help's words)
/// as `` `NAME ``.
fn quoted_under(text: &str, name: &str) -> String {
    text.replace(
        &format!("`{} ", crate::program::DEFAULT),
        &format!("`{name} "),
    )
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
    // `help` is no page of its own: the SUBCOMMANDS section lists only
    // pages that exist.
    let command = command(name).disable_help_subcommand(true);
    let mut pages = Vec::new();
    let mut page = Vec::new();
    let main = clap_mangen::Man::new(command.clone()).section("8");
    render_head(&main, &command, &mut page)?;
    main.render_subcommands_section(&mut page)?;
    // One section per subcommand with its options, so `man NAME` documents `NAME run` too.
    for sub in command.get_subcommands() {
        let title = format!("{} {}", name.to_uppercase(), sub.get_name().to_uppercase());
        let man = clap_mangen::Man::new(sub.clone());
        writeln!(page, ".SH \"{title}\"")?;
        man.render_description_section(&mut page)?;
        man.render_options_section(&mut page)?;
    }
    render_tail(&main, &command, name, None, &mut page)?;
    pages.push((format!("{name}.8"), page));
    for sub in command.get_subcommands() {
        if sub.get_name() == "help" {
            continue;
        }
        let page_name = format!("{name}-{}", sub.get_name());
        let command_name = sub.get_name().to_owned();
        let mut page = Vec::new();
        let sub = sub
            .clone()
            .name(page_name.clone())
            .bin_name(format!("{name} {command_name}"));
        let man = clap_mangen::Man::new(sub.clone()).section("8");
        render_head(&man, &sub, &mut page)?;
        render_tail(&man, &sub, name, Some(&command_name), &mut page)?;
        pages.push((format!("{page_name}.8"), page));
    }
    Ok(pages)
}

/// What clap_mangen's `render` writes before its version section: title,
/// name, synopsis, description, options and the `after_help` text.
fn render_head(
    man: &clap_mangen::Man,
    cmd: &clap::Command,
    page: &mut Vec<u8>,
) -> std::io::Result<()> {
    man.render_title(page)?;
    man.render_name_section(page)?;
    man.render_synopsis_section(page)?;
    man.render_description_section(page)?;
    man.render_options_section(page)?;
    if cmd
        .get_after_help()
        .or_else(|| cmd.get_after_long_help())
        .is_some()
    {
        man.render_extra_section(page)?;
    }
    Ok(())
}

/// EXIT STATUS, FILES, ENVIRONMENT and EXAMPLES (of `command`, or of the
/// whole program), then the version.
fn render_tail(
    man: &clap_mangen::Man,
    cmd: &clap::Command,
    name: &str,
    command: Option<&str>,
    page: &mut Vec<u8>,
) -> std::io::Result<()> {
    let under_name = |entries: &[(&str, &str)]| -> Vec<(String, String)> {
        entries
            .iter()
            .map(|(tag, meaning)| (tag.replace("{name}", name), meaning.replace("{name}", name)))
            .collect()
    };
    tagged_section(page, "EXIT STATUS", under_name(exit_status(command)))?;
    tagged_section(page, "FILES", under_name(files(command)))?;
    tagged_section(page, "ENVIRONMENT", under_name(environment(command)))?;
    tagged_section(page, "EXAMPLES", under_name(&examples(command)))?;
    // As clap_mangen's `render`: only what the command has.
    if cmd
        .get_version()
        .or_else(|| cmd.get_long_version())
        .is_some()
    {
        man.render_version_section(page)?;
    }
    if cmd.get_author().is_some() {
        man.render_authors_section(page)?;
    }
    Ok(())
}

/// A section of tagged paragraphs; nothing when there are none.
fn tagged_section<T: AsRef<str>, M: AsRef<str>>(
    page: &mut Vec<u8>,
    title: &str,
    entries: impl IntoIterator<Item = (T, M)>,
) -> std::io::Result<()> {
    let mut entries = entries.into_iter().peekable();
    if entries.peek().is_none() {
        return Ok(());
    }
    section(page, title)?;
    for (tag, meaning) in entries {
        tagged(page, tag.as_ref(), meaning.as_ref())?;
    }
    Ok(())
}

/// What each exit status of `command` means.
fn exit_status(command: Option<&str>) -> &'static [(&'static str, &'static str)] {
    match command {
        None | Some("run") => &[
            ("0", "every resource converged (with --detailed-exitcodes: and nothing changed)"),
            ("1", "a resource or a policy failed, or the run could not happen (a refused signature, a bad setting, the lock not taken)"),
            ("2", "with --detailed-exitcodes: changes were made and nothing failed; also a mistake on the command line"),
            ("4", "with --detailed-exitcodes: something failed and nothing changed"),
            ("6", "with --detailed-exitcodes: changes were made and something failed"),
            ("129, 130, 143", "a second SIGHUP, SIGINT or SIGTERM ended the run at once (after the first, the run finishes the call under way, reports, and exits as failed)"),
        ],
        Some("watch") => &[
            ("0", "SIGTERM or SIGINT ended the watch, after the run under way"),
            ("1", "the watch could not start: not run as root (refused before anything else), host.toml could not be read, or --resync, --debounce or its [watch] settings are refused; no inotify, no thread (a run that could not happen later is said and tried again, never an exit)"),
            ("2", "a mistake on the command line"),
            ("130, 143", "a second SIGINT or SIGTERM ended the watch at once"),
        ],
        Some("status") => &[
            ("0", "every unit was read (and, with no unit named, the machine is well: every policy converged, none refused, no unit held back)"),
            ("1", "a unit could not be read (it is said on its line), the machine is not well, or the command could not run"),
            ("2", "a mistake on the command line"),
        ],
        Some("pause" | "resume") => &[
            ("0", "the pauses were written (and are listed)"),
            ("1", "not root, a unit name systemd would refuse, a damaged paused.json, or resuming one unit while every unit is paused"),
            ("2", "a mistake on the command line (a --for that is not a duration)"),
        ],
        Some("facts") => &[
            ("0", "the facts were printed (a fact the host cannot tell is empty, never an error)"),
            ("1", "host.toml could not be read, or a setting or label in it is refused (named on standard error)"),
            ("2", "a mistake on the command line"),
        ],
        Some("verify") => &[
            ("0", "valid: signed by a trusted key for this file name, and not older than what this machine accepted"),
            ("1", "invalid, or valid but refused by this machine's rollback record (the reason is printed), or the file or reference could not be read"),
            ("2", "a mistake on the command line"),
        ],
        Some("compile") => &[
            ("0", "every policy is in the compile cache (compiled now, or already)"),
            ("1", "a policy could not be read or pulled, its signature is not valid, or it is not a policy this host runs (each said on standard error; the others are still compiled), or the cache directory cannot be used"),
            ("2", "a mistake on the command line"),
        ],
        Some(_) => &[
            ("0", "done"),
            ("1", "an error, printed on standard error"),
            ("2", "a mistake on the command line"),
        ],
    }
}

const CONFIG: (&str, &str) = (
    "/etc/policy-host/host.toml",
    "the host configuration: every setting's key, and the [[policy]] list that run runs when no policy is named (--config)",
);
const KEYS: (&str, &str) = (
    "/etc/policy-host/trusted-keys/",
    "the trusted public keys (*.pub), when no --trusted-key is given (trusted_keys_dir)",
);
const LOGINS: (&str, &str) = (
    "/etc/policy-host/docker/config.json",
    "registry logins (the auths entries docker login writes), read by every command when it exists and neither registry_auth nor DOCKER_CONFIG says otherwise (ENVIRONMENT)",
);

/// The files `command` reads or writes.
fn files(command: Option<&str>) -> &'static [(&'static str, &'static str)] {
    match command {
        None | Some("run" | "watch") => &[
            CONFIG,
            KEYS,
            ("/var/lib/policy-host/", "what is remembered between runs, root-only (state_dir): versions.json (the newest signature accepted per key and file name: rollback protection), subscriptions.json (what each subscribed reference looked like) and paused.json (the units {name} pause leaves alone)"),
            ("/var/cache/policy-host/", "compiled policies and verified registry artifacts, root-only (cache_dir)"),
            ("/run/policy-host/lock", "the lock that keeps two runs from interleaving (lock_file)"),
            LOGINS,
        ],
        Some("status") => &[
            CONFIG,
            ("/var/lib/policy-host/last-run.json", "the machine's state (every policy's latest outcome), where the package's host.toml has report_file write it"),
        ],
        Some("config-template") => &[CONFIG],
        Some("verify") => &[
            CONFIG,
            KEYS,
            ("/var/lib/policy-host/versions.json", "the newest version of each file name and key this machine accepted (state_dir): a valid but older signature is refused here"),
            LOGINS,
        ],
        Some("inspect") => &[CONFIG, KEYS, LOGINS],
        Some("compose") => &[(
            "/usr/lib/policy-host/declaration-engine.wasm",
            "the engine a declaration is composed with, unless --engine names another",
        )],
        Some("compile") => &[
            CONFIG,
            KEYS,
            ("/var/cache/policy-host/", "where the compiled policies go, root-only (cache_dir): the same entries run loads"),
            LOGINS,
        ],
        Some("pause" | "resume") => &[
            CONFIG,
            ("/var/lib/policy-host/paused.json", "the pauses in force (state_dir): every run and a watch read them"),
        ],
        Some("push") => &[CONFIG, LOGINS],
        Some("facts") => &[
            ("/etc/policy-host/host.toml", "its [labels], shown after the gathered facts (--config)"),
            ("/etc/os-release, /usr/lib/os-release", "os.id, os.version_id, os.version_codename (the first that exists)"),
            ("/etc/hosts", "fqdn: the canonical name of the first line listing the host name (never DNS)"),
            ("/proc/sys/kernel/hostname, /proc/sys/kernel/osrelease, /proc/meminfo, /sys/devices/system/cpu/online", "hostname, kernel.release, memory_mib, cpus"),
        ],
        Some(_) => &[],
    }
}

/// The environment variables `command` reads.
fn environment(command: Option<&str>) -> &'static [(&'static str, &'static str)] {
    match command {
        None | Some("run" | "watch") => &[
            ("PATH", "where systemctl is looked for (absolute directories only); systemctl itself runs with PATH=/usr/sbin:/usr/bin:/sbin:/bin"),
            ("DOCKER_CONFIG", "the directory of the registry logins' config.json, when registry_auth (--registry-auth) does not name the file; without either, /etc/policy-host/docker/config.json when it exists, else ~/.docker/config.json"),
            ("HOME", "for ~/.docker/config.json (see DOCKER_CONFIG)"),
            ("NO_COLOR", "set and not empty: no colour in the human report"),
        ],
        Some("status") => &[("PATH", "where systemctl is looked for (absolute directories only)")],
        Some("push" | "verify" | "inspect" | "compile") => &[
            ("DOCKER_CONFIG", "the directory of the registry logins' config.json, when registry_auth (--registry-auth) does not name the file; without either, /etc/policy-host/docker/config.json when it exists, else ~/.docker/config.json"),
            ("HOME", "for ~/.docker/config.json (see DOCKER_CONFIG)"),
        ],
        Some(_) => &[],
    }
}

/// Examples of each command (`None`: the program's own page), with
/// `{name}` for the program's name (in the other sections' texts too).
const EXAMPLES: &[(Option<&str>, &str, &str)] = &[
    (None, "{name} keygen --out ~/keys", "a signing key pair"),
    (None, "{name} sign web.wasm --key ~/keys/policy-host.key", "sign a policy (web.wasm.minisig beside it)"),
    (None, "{name} run --noop web.wasm", "what would change, changing nothing"),
    (None, "{name} run", "run host.toml's [[policy]] list, as the timer does"),
    (None, "{name} status web nginx", "how systemd sees two units"),
    (Some("run"), "{name} run --noop web.wasm --settings site.yaml", "what would change, changing nothing"),
    (Some("run"), "{name} run web.wasm --detailed-exitcodes --json", "converge, with a JSON report and exit codes 0/2/4/6"),
    (Some("run"), "{name} run oci://registry.example.com/policies/web:1.4", "a policy from a registry"),
    (Some("run"), "{name} run web.wasm --refresh file#/etc/nginx/nginx.conf", "as if that file had changed: its subscribers restart"),
    (Some("run"), "{name} run", "host.toml's [[policy]] list"),
    (Some("watch"), "{name} watch", "host.toml's [[policy]] list, repaired within a second of any drift"),
    (Some("watch"), "{name} watch web.wasm --settings site.yaml", "one policy, as run takes it"),
    (Some("pause"), "{name} pause web --for 30m", "runs leave web.service alone for half an hour (a stop by hand stays)"),
    (Some("pause"), "{name} pause", "every unit, until {name} resume"),
    (Some("resume"), "{name} resume web", "web's pause ends: the next run repairs it"),
    (Some("resume"), "{name} resume", "every pause ends"),
    (Some("status"), "{name} status", "the machine's state (host.toml's report_file): well or not, what drives it, each policy's outcome, and the units they manage"),
    (Some("status"), "{name} status web nginx.service", "is-active and is-enabled, as systemd says them"),
    (Some("status"), "{name} status --json web", "the same, as JSON"),
    (Some("facts"), "{name} facts", "what policies are told about this machine: one name and value a line, the labels last"),
    (Some("facts"), "{name} facts --json", "the same as one JSON object: facts (everything policies see) and labels"),
    (Some("keygen"), "{name} keygen --out ~/keys", "policy-host.key (secret) and policy-host.pub"),
    (Some("sign"), "{name} sign web.wasm --key ~/keys/policy-host.key", "writes web.wasm.minisig"),
    (Some("sign"), "{name} sign site.yaml --key ~/keys/policy-host.key", "settings are signed the same way"),
    (Some("verify"), "{name} verify web.wasm", "checks web.wasm.minisig with the trusted keys"),
    (Some("verify"), "{name} verify oci://registry.example.com/policies/web:1.4", "pulls the reference now and checks it"),
    (Some("compile"), "{name} compile web.wasm", "web.wasm's signature checked, then compiled into the cache: its first run only loads it"),
    (Some("compile"), "{name} compile oci://registry.example.com/policies/web:1.4", "pulled with its signatures now, checked, compiled: ahead of the timer's or the watch's first run"),
    (Some("push"), "{name} push web.wasm oci://registry.example.com/policies/web:1.4", "the policy and its signature"),
    (Some("inspect"), "{name} inspect web.wasm", "what the policy imports and exports, and its signature"),
    (Some("compose"), "{name} compose build/declaration.wasm -o web.wasm", "a Python or JavaScript policy's declaration made one policy with the packaged engine; sign web.wasm next"),
    (Some("compose"), "{name} compose declaration.wasm -o web.wasm --engine target/wasm32-wasip2/release/declaration_engine.wasm", "with an engine built from a checkout"),
    (Some("new-policy"), "{name} new-policy my-policy", "a policy crate to edit, test natively and build"),
    (Some("new-policy"), "{name} new-policy --lang python my-policy", "a Python policy: app.py, its pytest tests, build.sh (componentize-py, then compose)"),
    (Some("new-policy"), "{name} new-policy --lang js my-policy", "a JavaScript policy: policy.js, its node --test tests, build.sh (componentize-qjs, then compose)"),
    (Some("completions"), "{name} completions bash > /etc/bash_completion.d/{name}", "bash completion"),
    (Some("man"), "{name} man --out-dir /usr/local/share/man/man8", "every page, in section 8"),
    (Some("config-template"), "{name} config-template > /etc/policy-host/host.toml", "every setting, commented, with its default"),
];

/// The examples of `command`.
fn examples(command: Option<&str>) -> Vec<(&'static str, &'static str)> {
    EXAMPLES
        .iter()
        .filter(|(of, _, _)| *of == command)
        .map(|(_, example, meaning)| (*example, *meaning))
        .collect()
}

fn section(page: &mut Vec<u8>, title: &str) -> std::io::Result<()> {
    writeln!(page, ".SH \"{title}\"")
}

/// A tagged paragraph (`.TP`): the tag in bold, then its meaning.
fn tagged(page: &mut Vec<u8>, tag: &str, meaning: &str) -> std::io::Result<()> {
    writeln!(
        page,
        ".TP\n\\fB{}\\fR\n{}",
        roff_escape(tag),
        roff_escape(meaning)
    )
}

/// Text safe in a roff line: backslashes doubled, and a leading `.` or `'`
/// (which roff would read as a request) guarded.
fn roff_escape(text: &str) -> String {
    let text = text.replace('\\', "\\e").replace('-', "\\-");
    if text.starts_with('.') || text.starts_with('\'') {
        format!("\\&{text}")
    } else {
        text
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_page_says_its_exit_status_and_examples_and_run_its_files() {
        let pages = man_pages("policy-host").unwrap();
        assert!(pages.len() > 5);
        for (file, page) in &pages {
            let page = String::from_utf8_lossy(page);
            assert!(page.contains(".SH \"EXIT STATUS\""), "{file}");
            assert!(page.contains(".SH \"EXAMPLES\""), "{file}");
            assert!(!page.contains(".SH EXTRA"), "{file}: an empty section");
            assert!(
                !page.contains("policy\\-host\\-help(8)"),
                "{file}: no such page"
            );
        }
        let run = &pages
            .iter()
            .find(|(file, _)| file == "policy-host-run.8")
            .unwrap()
            .1;
        let run = String::from_utf8_lossy(run);
        for file in [
            "/etc/policy\\-host/host.toml",
            "versions.json",
            "subscriptions.json",
            "/run/policy\\-host/lock",
        ] {
            assert!(run.contains(file), "{file} missing from the run page");
        }
        assert!(run.contains("\\fB6\\fR"), "--detailed-exitcodes' 6");
    }
}
