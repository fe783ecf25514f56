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
        let said = host_commands(&page.replace("\\-", "-"));
        assert!(said.is_empty(), "{name} says `host`: {said:#?}");
    }
    for shell in [
        clap_complete::Shell::Bash,
        clap_complete::Shell::Zsh,
        clap_complete::Shell::Fish,
    ] {
        let script = String::from_utf8(docs::completion(shell, NAME)).unwrap();
        let said = host_commands(&script.replace("\\`", "`"));
        assert!(
            said.is_empty(),
            "the {shell} completion says `host`: {said:#?}"
        );
    }
    let bash = String::from_utf8(docs::completion(clap_complete::Shell::Bash, NAME)).unwrap();
    assert!(
        bash.contains("_policy__host()") && bash.contains("policy-host"),
        "bash completion for policy-host"
    );
}

/// Where `text` names one of the commands as `host COMMAND` (on Debian
/// `host` is bind9's DNS tool), a line each.
fn host_commands(text: &str) -> Vec<String> {
    let commands: Vec<String> = docs::command(NAME)
        .get_subcommands()
        .map(|c| c.get_name().to_owned())
        .collect();
    text.match_indices("host ")
        .filter(|(at, _)| {
            let before = text[..*at].chars().next_back();
            let word = text[at + "host ".len()..]
                .split(|c: char| !(c.is_alphanumeric() || c == '-'))
                .next()
                .unwrap_or_default();
            !before.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_')
                && commands.iter().any(|c| c == word)
        })
        .map(|(at, _)| text[at..].lines().next().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn the_check_of_host_commands_finds_them() {
    assert_eq!(
        host_commands("until `host resume` or\nthe host run\npolicy-host run\nthe host watches\n"),
        ["host resume` or", "host run"]
    );
}

/// Where each of the package's assets is installed (host/Cargo.toml's
/// `[package.metadata.deb] assets`, globs expanded), as absolute paths.
fn installed_paths() -> Vec<String> {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest: toml::Table = std::fs::read_to_string(manifest_dir.join("Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let assets = manifest["package"]["metadata"]["deb"]["assets"]
        .as_array()
        .expect("assets");
    let mut installed = Vec::new();
    for asset in assets {
        let asset = asset.as_array().unwrap();
        let (source, target) = (asset[0].as_str().unwrap(), asset[1].as_str().unwrap());
        let target = format!("/{}", target.trim_start_matches('/'));
        match source.rsplit_once("/*") {
            // A glob: the directory gets every file the pattern matches.
            Some((dir, suffix)) => {
                let pattern_dir = manifest_dir.join(dir);
                for entry in std::fs::read_dir(&pattern_dir).unwrap() {
                    let name = entry.unwrap().file_name().into_string().unwrap();
                    if name.ends_with(suffix) {
                        installed.push(format!("{}/{name}", target.trim_end_matches('/')));
                    }
                }
            }
            None => installed.push(target),
        }
    }
    installed
}

/// The absolute paths under /usr and /etc/policy-host that `text` names
/// (up to the first character that cannot be part of one).
fn named_paths(text: &str) -> Vec<String> {
    let mut paths = Vec::new();
    for prefix in ["/usr/", "/etc/policy-host/"] {
        for (at, _) in text.match_indices(prefix) {
            // Only a path's beginning: not `/x/usr/...`.
            if at > 0 && !text[..at].ends_with([' ', '`', '(', '"', '\'', '=', '\n', ':', '[']) {
                continue;
            }
            let path: String = text[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || "/._-+*".contains(*c))
                .collect();
            paths.push(path.trim_end_matches(['.', ',']).to_owned());
        }
    }
    paths
}

/// The files that describe the package itself (its units, README.Debian,
/// its host.toml) name only paths the package installs, or makes, or that
/// the operator creates by following them; and every shipped document
/// names only /usr/share/doc/policy-host and /usr/lib/policy-host files
/// that are there. A path that exists only on a machine installed from
/// source (`/usr/local/...`) fails, as a moved document does.
#[test]
fn the_shipped_files_name_only_paths_the_package_installs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let installed = installed_paths();
    let is_installed = |path: &str| {
        let path = path.trim_end_matches('/');
        installed
            .iter()
            .any(|i| i == path || i.starts_with(&format!("{path}/")))
    };
    // Made by the package's scripts or by the operator, as the files say.
    let made = [
        "/etc/policy-host/policies",
        "/etc/policy-host/docker",
        "/etc/policy-host/trusted-keys",
        "/etc/policy-host/manifest.yaml",
        "/etc/policy-host/site.yaml",
        "/etc/policy-host/registry-ca.pem",
        "/usr/share/man",
        // Another package's, named as such: Debian's bind9-host owns it.
        "/usr/bin/host",
    ];
    let describing = [
        "dist/debian/policy-host.service",
        "dist/debian/policy-host.timer",
        "dist/debian/README.Debian",
        "dist/debian/generated/host.toml",
        "dist/debian/trusted-keys-README",
    ];
    let mut wrong = Vec::new();
    for file in describing {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        for path in named_paths(&text) {
            let ok = is_installed(&path)
                || made
                    .iter()
                    .any(|m| path == *m || path.starts_with(&format!("{m}/")));
            if !ok {
                wrong.push(format!("{file}: {path}"));
            }
        }
    }
    let mut shipped_docs = vec![root.join("README.md"), root.join("dist/README.md")];
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        shipped_docs.push(entry.unwrap().path());
    }
    shipped_docs.extend(describing.iter().map(|f| root.join(f)));
    for file in shipped_docs {
        let text = std::fs::read_to_string(&file).unwrap();
        for path in named_paths(&text) {
            let ours = [
                "/usr/share/doc/policy-host/",
                "/usr/lib/policy-host/",
                "/usr/sbin/policy-host",
            ];
            if ours.iter().any(|o| path.starts_with(o))
                && !path.contains('*')
                && !is_installed(&path)
            {
                wrong.push(format!("{}: {path}", file.display()));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "paths the package does not install:\n{}\ninstalled:\n{}",
        wrong.join("\n"),
        installed.join("\n")
    );
}

/// The watch service does the job of the run service, all the time: it is
/// sandboxed the same, line for line, from its resources on, in the package
/// and in the source install; it can be enabled, and it replaces the timer.
#[test]
fn the_watch_service_is_sandboxed_as_the_run_service_is() {
    for (dir, exec) in [
        ("dist/debian", "ExecStart=/usr/sbin/policy-host watch"),
        ("dist/systemd", "ExecStart=/usr/local/bin/host watch "),
    ] {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(dir);
        let sandbox = |unit: &str| {
            let text = std::fs::read_to_string(dir.join(unit)).unwrap();
            let start = text
                .find("# --- Resources")
                .unwrap_or_else(|| panic!("{unit} has no resources section"));
            // The watch is started at boot; the run service by its timer.
            let end = text.find("\n[Install]").unwrap_or(text.len());
            text[start..end].trim_end().to_owned()
        };
        assert_eq!(
            sandbox("policy-host-watch.service"),
            sandbox("policy-host.service"),
            "{}",
            dir.display()
        );
        let watch = std::fs::read_to_string(dir.join("policy-host-watch.service")).unwrap();
        for line in [
            "Type=notify",
            exec,
            "WatchdogSec=",
            "ExecReload=/bin/kill -HUP $MAINPID",
            "Conflicts=policy-host.timer",
            "\n[Install]\n",
            "\nWantedBy=multi-user.target\n",
        ] {
            assert!(watch.contains(line), "{line} missing in {}", dir.display());
        }
    }
}
