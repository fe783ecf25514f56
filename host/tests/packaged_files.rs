//! The files the Debian package ships that this binary generates (the man
//! pages, the shell completions, the commented host.toml) are kept in the
//! repository under dist/debian/generated, so that `cargo deb` needs no
//! build step of its own. This test fails when they drift from the code;
//! `POLICY_HOST_REGENERATE=1 cargo test -p policy-host --test packaged_files`
//! writes them again.

use std::path::{Path, PathBuf};

use policy_host::commands::docs;
use policy_host::settings::host_toml_template;

/// The name the package installs the command under.
const NAME: &str = "policy-host";

fn generated_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../dist/debian/generated")
}

fn expected() -> Vec<(PathBuf, Vec<u8>)> {
    let dir = generated_dir();
    let mut files = vec![(dir.join("host.toml"), host_toml_template().into_bytes())];
    for (name, page) in docs::man_pages(NAME).unwrap() {
        files.push((dir.join("man").join(name), page));
    }
    for (shell, file) in [
        (clap_complete::Shell::Bash, "policy-host"),
        (clap_complete::Shell::Zsh, "_policy-host"),
        (clap_complete::Shell::Fish, "policy-host.fish"),
    ] {
        files.push((
            dir.join("completions").join(file),
            docs::completion(shell, NAME),
        ));
    }
    files
}

#[test]
fn the_packaged_generated_files_are_current() {
    let regenerate = std::env::var_os("POLICY_HOST_REGENERATE").is_some();
    let mut stale = Vec::new();
    for (path, contents) in expected() {
        if std::fs::read(&path).ok().as_deref() != Some(&contents[..]) {
            if regenerate {
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, &contents).unwrap();
            } else {
                stale.push(path.display().to_string());
            }
        }
    }
    assert!(
        stale.is_empty(),
        "out of date (regenerate with POLICY_HOST_REGENERATE=1 cargo test -p policy-host --test packaged_files): {stale:#?}"
    );
    // Nothing else lies there: a page of a removed subcommand would ship on.
    let listed: Vec<PathBuf> = expected().into_iter().map(|(p, _)| p).collect();
    for dir in [
        generated_dir().join("man"),
        generated_dir().join("completions"),
    ] {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            assert!(
                listed.contains(&path),
                "{} is not generated any more",
                path.display()
            );
        }
    }
}

#[test]
fn every_page_and_script_uses_the_installed_name() {
    for (name, page) in docs::man_pages(NAME).unwrap() {
        let page = String::from_utf8(page).unwrap();
        assert!(name.starts_with("policy-host"), "{name}");
        assert!(
            page.contains(".TH policy\\-host") || page.contains(".TH policy-host"),
            "{name}: {}",
            &page[..page.len().min(300)]
        );
        assert!(!page.contains("\\fBhost\\fR "), "{name} still says host");
    }
    let bash = String::from_utf8(docs::completion(clap_complete::Shell::Bash, NAME)).unwrap();
    assert!(
        bash.contains("_policy__host()") && bash.contains("policy-host"),
        "bash completion for policy-host"
    );
}
