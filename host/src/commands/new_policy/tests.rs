//! Scaffolding: names, rendering, the embedded SDK, and writing (or not).

use super::names::*;
use super::render::*;
use super::*;

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        use std::sync::atomic::{AtomicU32, Ordering};
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("new-policy-{tag}-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn listing(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        if entry.file_type().unwrap().is_dir() {
            for inner in listing(&entry.path()) {
                out.push(format!("{name}/{inner}"));
            }
        } else {
            out.push(name);
        }
    }
    out.sort();
    out
}

#[test]
fn crate_names_are_checked_like_cargo_does() {
    for good in ["web", "web-policy", "web_policy", "_private", "a1", "Web"] {
        assert_eq!(validate_crate_name(good), Ok(()), "{good}");
    }
    for (bad, why) in [
        ("", "empty"),
        ("1st", "start with a digit"),
        ("-web", "start with `-`"),
        ("web policy", "invalid character ' '"),
        ("web.policy", "invalid character '.'"),
        ("wéb", "invalid character 'é'"),
        ("fn", "keyword"),
        ("async", "keyword"),
        ("self", "keyword"),
        ("test", "built-in Rust library"),
        ("proc-macro", "built-in Rust library"),
        ("guest-sdk", "cannot have its name"),
        ("build", "build directory"),
        ("nul", "reserved file name"),
        ("COM1", "reserved file name"),
    ] {
        let error = validate_crate_name(bad).expect_err(bad);
        assert!(error.contains(why), "{bad}: {error}");
    }
    assert!(validate_crate_name(&"a".repeat(64)).is_ok());
    assert!(validate_crate_name(&"a".repeat(65))
        .unwrap_err()
        .contains("at most 64"));
    assert!(validate_crate_name("compute").is_ok());
}

#[test]
fn toml_strings_are_escaped() {
    let path = "C:\\policies\\\"odd\"\tdir";
    let doc = format!("path = {}", toml_string(path));
    let table: toml::Table = doc.parse().unwrap();
    assert_eq!(table["path"].as_str(), Some(path));
}

/// `dir`'s files, `prefix/`-prefixed, with their contents.
fn tree(dir: &Path, prefix: &str) -> Vec<(String, Vec<u8>)> {
    listing(dir)
        .into_iter()
        .filter(|f| !f.split('/').any(|c| c.starts_with('.') || c.ends_with('~')))
        .map(|f| {
            let contents = fs::read(dir.join(&f)).unwrap();
            (format!("{prefix}/{f}"), contents)
        })
        .collect()
}

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn text(file: &File) -> &str {
    std::str::from_utf8(&file.contents).unwrap()
}

fn vendored_manifest() -> toml::Table {
    let (_, contents, _) = embedded::SDK_FILES
        .iter()
        .find(|(path, _, _)| *path == "guest-sdk/Cargo.toml")
        .expect("the embedded SDK has a manifest");
    std::str::from_utf8(contents).unwrap().parse().unwrap()
}

#[test]
fn rendered_files_fill_every_placeholder() {
    let sdk = Sdk::Path(PathBuf::from("/opt/policy host/guest-sdk"));
    let files = render("web-policy", &sdk, "host").unwrap();
    let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "Cargo.toml",
            "Cargo.lock",
            "src/lib.rs",
            "README.md",
            ".gitignore",
            "build.sh"
        ]
    );
    for file in &files {
        assert!(!text(file).contains("{{"), "{}", file.path);
        assert!(!text(file).contains("}}"), "{}", file.path);
    }
    let manifest: toml::Table = text(&files[0]).parse().unwrap();
    assert_eq!(manifest["package"]["name"].as_str(), Some("web-policy"));
    assert_eq!(
        manifest["lib"]["crate-type"],
        toml::Value::Array(vec!["cdylib".into(), "rlib".into()])
    );
    assert_eq!(
        manifest["dependencies"]["guest-sdk"]["path"].as_str(),
        Some("/opt/policy host/guest-sdk")
    );
    assert!(manifest["workspace"].is_table(), "a workspace of its own");
    assert_eq!(files[1].contents, sdk_lock());
    assert!(
        manifest.get("patch").is_none(),
        "a checkout finds its tables itself"
    );
    assert!(text(&files[2]).contains("guest_sdk::export_policy!(policy);"));
    assert!(text(&files[3]).contains("target/wasm32-wasip2/release/web_policy.wasm"));
    assert!(text(&files[3]).contains("/opt/policy host/guest-sdk"));
    assert!(files[5].executable);
    assert!(text(&files[5]).starts_with("#!/bin/sh\n"));
    assert!(text(&files[5]).contains("release/web_policy.wasm"));
}

/// Where `text` quotes a command of the host under another name than
/// `name`: `host run`, `` `host sign ``, ... (on Debian `host` is bind9's
/// DNS tool, and `build.sh` would run it).
fn commands_not_named(text: &str, name: &str) -> Vec<String> {
    const COMMANDS: [&str; 11] = [
        "run",
        "sign",
        "keygen",
        "verify",
        "new-policy",
        "watch",
        "status",
        "push",
        "inspect",
        "facts",
        "pause",
    ];
    let mut found = Vec::new();
    for (at, _) in text.match_indices("host ") {
        let before = text[..at].chars().next_back();
        let word_start = !before.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_');
        let rest = &text[at + "host ".len()..];
        let command = rest
            .split(|c: char| !(c.is_alphanumeric() || c == '-'))
            .next()
            .unwrap_or_default();
        if word_start && name != "host" && COMMANDS.contains(&command) {
            found.push(text[at..].lines().next().unwrap_or_default().to_owned());
        }
    }
    found
}

#[test]
fn the_crate_names_the_host_it_was_created_with() {
    for sdk in [Sdk::embedded(), Sdk::Path(PathBuf::from("/opt/guest-sdk"))] {
        let files = render("web-policy", &sdk, "policy-host").unwrap();
        for file in &files[..6] {
            let leaked = commands_not_named(text(file), "policy-host");
            assert!(leaked.is_empty(), "{}: {leaked:#?}", file.path);
        }
        let readme = text(&files[3]);
        for said in [
            "`policy-host run` runs only policies",
            "policy-host keygen --out ~/keys",
            "policy-host sign target/wasm32-wasip2/release/web_policy.wasm",
            "policy-host verify web_policy.wasm",
            "policy-host run web_policy.wasm --noop",
        ] {
            assert!(readme.contains(said), "{said:?} not in:\n{readme}");
        }
        let build = text(&files[5]);
        assert!(
            build.contains("    policy-host sign \"$wasm\" --key \"$1\"\n"),
            "{build}"
        );
    }
    // The check finds what it must.
    let leaked = commands_not_named("run `host run` and host sign; a host run\n", "policy-host");
    assert_eq!(leaked.len(), 3, "{leaked:?}");
    assert!(commands_not_named(
        "the host's run, ghost run, policy-host run, the host watches it",
        "policy-host"
    )
    .is_empty());
    // A name the shell must not split is quoted where build.sh runs it.
    let files = render("web-policy", &Sdk::embedded(), "my host").unwrap();
    assert!(
        text(&files[5]).contains("    'my host' sign \"$wasm\""),
        "{}",
        text(&files[5])
    );
    assert!(text(&files[3]).contains("my host keygen --out ~/keys"));
}

#[test]
fn the_embedded_sdk_is_rendered_into_vendor() {
    let files = render("web-policy", &Sdk::embedded(), "host").unwrap();
    let manifest: toml::Table = text(&files[0]).parse().unwrap();
    assert_eq!(
        manifest["dependencies"]["guest-sdk"]["path"].as_str(),
        Some("vendor/guest-sdk")
    );
    assert_eq!(
        manifest["workspace"]["exclude"],
        toml::Value::Array(vec!["vendor".into()]),
        "the vendored SDK is a dependency, not a member"
    );
    assert_eq!(
        manifest["patch"]["crates-io"]["contract-words"]["path"].as_str(),
        Some("vendor/contract-words")
    );
    for file in &files[..6] {
        let contents = text(file);
        assert!(!contents.contains("{{"), "{}", file.path);
        assert!(
            !contents.contains(&repository().display().to_string()),
            "{}",
            file.path
        );
    }
    let readme = text(&files[3]);
    assert!(
        readme.contains(&format!("guest-sdk {}", embedded::SDK_VERSION)),
        "{readme}"
    );
    let vendored: Vec<(&str, &[u8])> = files[6..]
        .iter()
        .map(|f| (f.path.as_str(), f.contents.as_slice()))
        .collect();
    let expected: Vec<(String, &[u8])> = embedded::SDK_FILES
        .iter()
        .map(|(path, contents, _)| (format!("vendor/{path}"), *contents))
        .collect();
    assert_eq!(
        vendored,
        expected
            .iter()
            .map(|(p, c)| (p.as_str(), *c))
            .collect::<Vec<_>>()
    );
}

#[test]
fn the_embedded_sdk_is_host_vendor() {
    let vendor = Path::new(env!("CARGO_MANIFEST_DIR")).join("vendor");
    let mut expected = tree(&vendor.join("guest-sdk"), "guest-sdk");
    expected.extend(tree(&vendor.join("contract-words"), "contract-words"));
    expected.sort();
    let embedded: Vec<(String, Vec<u8>)> = embedded::SDK_FILES
        .iter()
        .map(|(path, contents, _)| (path.to_string(), contents.to_vec()))
        .collect();
    assert_eq!(embedded, expected);
    for needed in [
        "guest-sdk/src/lib.rs",
        "guest-sdk/wit/policy.wit",
        "contract-words/src/lib.rs",
    ] {
        assert!(embedded.iter().any(|(p, _)| p == needed), "{needed}");
    }
}

#[test]
fn the_vendored_manifest_names_its_version_and_the_shared_tables() {
    let vendored = vendored_manifest();
    assert!(!toml::to_string(&vendored).unwrap().contains("workspace"));
    assert_eq!(vendored["package"]["name"].as_str(), Some("guest-sdk"));
    assert_eq!(
        vendored["package"]["version"].as_str(),
        Some(embedded::SDK_VERSION)
    );
    assert_eq!(
        vendored["dependencies"]["contract-words"]["version"].as_str(),
        Some(embedded::SDK_VERSION)
    );
}

/// The lock is guest-sdk's, from the workspace's: every registry
/// package at the workspace's version and checksum, none of the host's.
#[test]
fn the_embedded_lock_keeps_the_workspaces_versions() {
    // (name, version, source, checksum): how an entry lists its own
    // dependencies depends on what else the lock holds.
    let packages = |text: &str| -> Vec<[String; 4]> {
        let lock: toml::Table = text.parse().unwrap();
        lock["package"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                ["name", "version", "source", "checksum"]
                    .map(|key| p.get(key).and_then(|v| v.as_str()).unwrap_or("").to_owned())
            })
            .collect()
    };
    let workspace = packages(&fs::read_to_string(repository().join("Cargo.lock")).unwrap());
    let embedded = packages(std::str::from_utf8(sdk_lock()).unwrap());
    let names: Vec<&str> = embedded.iter().map(|p| p[0].as_str()).collect();
    for package in embedded.iter().filter(|p| !p[2].is_empty()) {
        if package[0] == "contract-words" {
            continue; // packaged beside it, patched in from vendor/
        }
        assert!(
            workspace.contains(package),
            "{package:?} is not the workspace's"
        );
    }
    for needed in [
        "guest-sdk",
        "contract-words",
        "serde",
        "serde_json",
        "thiserror",
    ] {
        assert!(names.contains(&needed), "{needed} missing: {names:?}");
    }
    for host_only in ["policy-host", "wasmtime", "clap", "minisign"] {
        assert!(!names.contains(&host_only), "{host_only} kept");
    }
}

#[test]
fn the_listing_shows_vendored_directories_once() {
    let files: Vec<String> = [
        "Cargo.toml",
        "src/lib.rs",
        "vendor/contract-words/Cargo.toml",
        "vendor/guest-sdk/Cargo.toml",
        "vendor/guest-sdk/src/lib.rs",
    ]
    .map(String::from)
    .to_vec();
    assert_eq!(
        listing_lines(&files),
        [
            "Cargo.toml",
            "src/lib.rs",
            "vendor/contract-words/",
            "vendor/guest-sdk/"
        ]
    );
}

#[test]
fn creates_the_crate_with_the_directory_name() {
    let tmp = TempDir::new("create");
    let dir = tmp.0.join("parent").join("my-policy");
    let created = create(&dir, None, None).unwrap();
    assert_eq!(created.name, "my-policy");
    assert_eq!(created.lib_name, "my_policy");
    assert_eq!(
        created.wasm_path(),
        "target/wasm32-wasip2/release/my_policy.wasm"
    );
    assert_eq!(created.dir, fs::canonicalize(&dir).unwrap());
    assert_eq!(created.sdk, Sdk::embedded());
    let mut expected: Vec<String> = [
        ".gitignore",
        "Cargo.lock",
        "Cargo.toml",
        "README.md",
        "build.sh",
        "src/lib.rs",
    ]
    .map(String::from)
    .to_vec();
    expected.extend(
        embedded::SDK_FILES
            .iter()
            .map(|(p, _, _)| format!("vendor/{p}")),
    );
    expected.sort();
    assert_eq!(listing(&dir), expected);
    let mut written = created.files.clone();
    written.sort();
    assert_eq!(written, expected);
    let manifest: toml::Table = fs::read_to_string(dir.join("Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        manifest["dependencies"]["guest-sdk"]["path"].as_str(),
        Some("vendor/guest-sdk")
    );
    assert_eq!(
        fs::read(dir.join("vendor/guest-sdk/src/lib.rs")).unwrap(),
        fs::read(repository().join("guest-sdk/src/lib.rs")).unwrap()
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &str| fs::metadata(dir.join(p)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode("build.sh"), 0o755);
        assert_eq!(mode("Cargo.toml"), 0o644);
        assert_eq!(mode("vendor/guest-sdk/Cargo.toml"), 0o644);
    }
}

#[test]
fn an_empty_existing_directory_is_used_and_name_overrides() {
    let tmp = TempDir::new("empty");
    let created = create(&tmp.0, Some("web_host"), None).unwrap();
    assert_eq!(created.name, "web_host");
    assert!(tmp.0.join("src/lib.rs").is_file());
    assert!(tmp.0.join("vendor/guest-sdk/Cargo.toml").is_file());
}

#[test]
fn a_failed_write_leaves_an_existing_directory_empty() {
    let tmp = TempDir::new("rollback");
    let mut files = render("web", &Sdk::embedded(), "host").unwrap();
    // A file where the vendored SDK's directory must go fails the write
    // after the crate's own files are written.
    files.insert(
        6,
        File {
            path: "vendor".into(),
            contents: Vec::new(),
            executable: false,
        },
    );
    assert!(write_files(&tmp.0, &files).is_err());
    assert!(tmp.0.join("src/lib.rs").is_file(), "the write got that far");
    // What `create` does then in a directory that existed (empty).
    remove_contents(&tmp.0);
    assert!(tmp.0.is_dir());
    assert!(listing(&tmp.0).is_empty());
}

#[test]
fn a_non_empty_directory_is_refused_and_left_alone() {
    let tmp = TempDir::new("nonempty");
    fs::write(tmp.0.join("notes.txt"), "mine").unwrap();
    let error = create(&tmp.0, Some("web"), None).unwrap_err().to_string();
    assert!(error.contains("already exists and is not empty"), "{error}");
    assert_eq!(listing(&tmp.0), ["notes.txt"]);

    let file = tmp.0.join("notes.txt");
    let error = create(&file, Some("web"), None).unwrap_err().to_string();
    assert!(error.contains("is not a directory"), "{error}");
}

#[test]
fn invalid_names_write_nothing() {
    let tmp = TempDir::new("badname");
    let dir = tmp.0.join("1policy");
    let error = create(&dir, None, None).unwrap_err().to_string();
    assert_eq!(
        error,
        "invalid crate name `1policy` (the directory's name): the name must not start with a digit; pass --name NAME"
    );
    assert!(!dir.exists());
    let error = create(&tmp.0.join("ok"), Some("my policy"), None)
        .unwrap_err()
        .to_string();
    assert!(error.starts_with("invalid crate name `my policy`: invalid character ' '"));
    assert!(!tmp.0.join("ok").exists());
}

#[test]
fn the_sdk_path_must_hold_guest_sdk() {
    let tmp = TempDir::new("sdk");
    let error = create(&tmp.0.join("a"), None, Some(&tmp.0))
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with(&format!(
            "--sdk-path: no guest-sdk crate at {}",
            tmp.0.display()
        )),
        "{error}"
    );
    fs::write(
        tmp.0.join("Cargo.toml"),
        "[package]\nname = \"other\"\nversion = \"0.1.0\"\n",
    )
    .unwrap();
    let error = create(&tmp.0.join("a"), None, Some(&tmp.0))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("is not guest-sdk's manifest (package `other`)"),
        "{error}"
    );
    assert!(!tmp.0.join("a").exists());

    // The --sdk-path is canonicalized (no `..` left in the dependency),
    // and nothing is vendored.
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-sdk");
    let created = create(&tmp.0.join("b"), None, Some(&sdk)).unwrap();
    let Sdk::Path(path) = &created.sdk else {
        panic!("{:?}", created.sdk)
    };
    assert_eq!(*path, fs::canonicalize(&sdk).unwrap());
    assert!(!tmp.0.join("b/vendor").exists());
    let manifest: toml::Table = fs::read_to_string(tmp.0.join("b/Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        manifest["dependencies"]["guest-sdk"]["path"].as_str(),
        path.to_str()
    );
}

#[test]
fn shell_quoting_only_when_needed() {
    assert_eq!(shell_quote("my-policy"), "my-policy");
    assert_eq!(shell_quote("/tmp/a b"), "'/tmp/a b'");
    assert_eq!(shell_quote("it's"), r"'it'\''s'");
}

// ------------------------------------------------------- --lang python | js

#[test]
fn the_embedded_python_sdk_is_every_module_of_sdk_python() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk/python/policy_host");
    let mut on_disk: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".py"))
        .map(|name| format!("policy_host/{name}"))
        .collect();
    on_disk.sort();
    let mut embedded: Vec<String> = languages::PYTHON_SDK
        .iter()
        .map(|(path, _)| (*path).to_owned())
        .collect();
    embedded.sort();
    assert_eq!(
        embedded, on_disk,
        "add the new module to languages::PYTHON_SDK"
    );
    for (path, contents) in languages::PYTHON_SDK.iter().chain(&languages::JS_SDK) {
        let file = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../sdk")
            .join(if path.ends_with(".js") {
                "js"
            } else {
                "python"
            })
            .join(path);
        assert_eq!(fs::read_to_string(&file).unwrap(), *contents, "{path}");
    }
}

#[test]
fn a_declaration_project_is_filled_in_and_holds_its_sdk_and_wit() {
    for (language, own, sdk) in [
        (Language::Python, "app.py", "policy_host/export.py"),
        (Language::Js, "policy.js", "policy-host.js"),
    ] {
        let files = languages::render(language, "web-policy", "policy-host");
        let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        for wanted in [
            own,
            sdk,
            "README.md",
            "build.sh",
            ".gitignore",
            "wit/declaration.wit",
        ] {
            assert!(paths.contains(&wanted), "{language:?}: {paths:?}");
        }
        for file in &files {
            let text = String::from_utf8_lossy(&file.contents);
            assert!(
                !text.contains("{{"),
                "{language:?} {}: a placeholder left",
                file.path
            );
            assert_eq!(file.executable, file.path == "build.sh", "{}", file.path);
        }
        let build = files.iter().find(|f| f.path == "build.sh").unwrap();
        let build = String::from_utf8_lossy(&build.contents);
        assert!(
            build.contains("policy-host compose build/declaration.wasm -o web_policy.wasm"),
            "{build}"
        );
        let readme = files.iter().find(|f| f.path == "README.md").unwrap();
        let readme = String::from_utf8_lossy(&readme.contents);
        for step in ["## Test", "## Build", "## Sign", "## Run"] {
            assert!(readme.contains(step), "{language:?}: {step}");
        }
    }
}

#[test]
fn a_declaration_project_is_made_whole_or_not_at_all() {
    let tmp = TempDir::new("declaration");
    let dir = tmp.0.join("web-py");
    let (made, name, files) = create_declaration(&dir, None, Language::Python).unwrap();
    assert_eq!(name, "web-py");
    assert_eq!(made, fs::canonicalize(&dir).unwrap());
    assert!(files.contains(&"policy_host/__init__.py".to_owned()));
    assert!(dir.join("policy_host/__init__.py").is_file());
    use std::os::unix::fs::PermissionsExt;
    let mode = fs::metadata(dir.join("build.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0o111);
    // Not over an existing project, and not under a bad name.
    let again = create_declaration(&dir, None, Language::Js)
        .unwrap_err()
        .to_string();
    assert!(again.contains("already exists and is not empty"), "{again}");
    let bad = create_declaration(&tmp.0.join("x"), Some("Bad Name"), Language::Js)
        .unwrap_err()
        .to_string();
    assert!(bad.contains("invalid policy name `Bad Name`"), "{bad}");
    assert!(!tmp.0.join("x").exists());
}
