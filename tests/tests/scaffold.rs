//! End-to-end: `host new-policy` scaffolds a policy crate that tests, builds,
//! signs and runs as generated, and refuses what it must refuse.
//!
//! The main test installs a copy of the `host` binary in an empty directory
//! tree outside this repository and scaffolds the crate there, with no
//! cargo variable in the environment: as on a machine where the host was
//! installed and the repository never was. The crate must build from what
//! the binary embeds (guest-sdk and the WIT contract, written to its
//! `vendor/`), and no file of it may name the repository.
//!
//! Its cargo commands share the workspace's target directory (the crate is
//! elsewhere; only build outputs are shared): the crate's `Cargo.lock`, which
//! `host new-policy` writes with the versions this workspace tests, makes the
//! registry dependencies the ones already built for both the test and the
//! `wasm32-wasip2` release profile, so only guest-sdk and the new crate are
//! compiled: a few seconds, where a target directory of its own takes about
//! two minutes on two cores.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Instant;

use policy_host_e2e::build::{
    host_binary, host_command, target_dir, test_key, trust_args, workspace_root,
};
use policy_host_e2e::fake_systemctl::FakeSystemctl;
use policy_host_e2e::outcome::text;
use policy_host_e2e::scratch::Scratch;
use serde_json::Value;

/// Where this file's scratch directories lie: `target/e2e-scaffold/`.
fn scratch_root() -> PathBuf {
    target_dir().join("e2e-scaffold")
}

/// A fresh directory for one test, `target/e2e-scaffold/<tag>-<pid>`.
fn scratch(tag: &str) -> Scratch {
    Scratch::under(&scratch_root(), tag)
}

/// A fresh, empty directory tree outside the repository, under the system
/// temp dir: where the test installs the host and scaffolds the crate. Kept
/// when the test fails (to inspect it), removed by [`Outside::done`].
///
/// Its path is the same in every run (one per checkout), held under an
/// exclusive lock, and emptied first: the crate's builds share the
/// workspace's target directory, where cargo finds the crate's last build
/// by the crate's path; at the same path its newly written sources are newer
/// than that build and are compiled again, where at a new path a
/// predecessor still on disk could be taken as up to date.
struct Outside {
    dir: PathBuf,
    _lock: fs::File,
}

impl Outside {
    fn new() -> Self {
        use std::hash::{DefaultHasher, Hash as _, Hasher as _};
        let mut hasher = DefaultHasher::new();
        workspace_root().hash(&mut hasher);
        fs::create_dir_all(scratch_root()).expect("create the scratch root");
        let lock = fs::File::create(scratch_root().join("outside.lock"))
            .expect("create the lock of the outside directory");
        lock.lock().expect("lock the outside directory");
        let dir =
            std::env::temp_dir().join(format!("policy-host-scaffold-{:016x}", hasher.finish()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("create the outside directory");
        let dir = fs::canonicalize(&dir).expect("resolve the outside directory");
        for repo in repository_paths() {
            assert!(
                !dir.starts_with(&repo),
                "the temp dir {} is inside the repository {repo}: set TMPDIR elsewhere",
                dir.display()
            );
        }
        Self { dir, _lock: lock }
    }

    fn done(self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// The repository's path as the host was built from it, and its canonical
/// form when that differs.
fn repository_paths() -> Vec<String> {
    let mut paths = vec![workspace_root().display().to_string()];
    if let Ok(canonical) = fs::canonicalize(workspace_root()) {
        let canonical = canonical.display().to_string();
        if !paths.contains(&canonical) {
            paths.push(canonical);
        }
    }
    paths
}

/// `command` with cargo's variables (all `CARGO*` but `CARGO_HOME`, which
/// only says where this machine's toolchain and registry cache are),
/// `RUSTFLAGS`, `RUSTDOCFLAGS` and any variable whose value names the
/// repository (`PWD`, ...) removed: nothing of the environment this test
/// runs in may lead to the repository.
fn scrubbed(mut command: Command) -> Command {
    let repos = repository_paths();
    for (key, value) in std::env::vars_os() {
        let name = key.to_string_lossy();
        let cargo =
            (name.starts_with("CARGO") || name.starts_with("__CARGO")) && name != "CARGO_HOME";
        let flags = name == "RUSTFLAGS" || name == "RUSTDOCFLAGS";
        let value = value.to_string_lossy();
        if cargo || flags || repos.iter().any(|r| value.contains(r.as_str())) {
            command.env_remove(&key);
        }
    }
    command
}

#[track_caller]
fn assert_success(what: &str, output: &Output) {
    assert!(
        output.status.success(),
        "{what} failed ({})\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        text(&output.stdout),
        text(&output.stderr)
    );
}

/// `host new-policy DIR [EXTRA...]`.
fn new_policy(dir: &Path, extra: &[&str]) -> Output {
    host_command()
        .arg("new-policy")
        .arg(dir)
        .args(extra)
        .output()
        .expect("run host new-policy")
}

fn cargo_program() -> PathBuf {
    std::env::var_os("CARGO")
        .filter(|c| !c.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("cargo"))
}

/// `cargo ARGS...` in the `my-app-policy` crate at `dir`, in a scrubbed
/// environment but sharing the workspace's target directory; panics with
/// cargo's output on failure or when cargo did not compile the crate and its
/// vendored guest-sdk, returns stdout.
fn cargo(dir: &Path, args: &[&str]) -> String {
    let start = Instant::now();
    let output = scrubbed(Command::new(cargo_program()))
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target_dir())
        .output()
        .expect("run cargo");
    assert_success(&format!("cargo {}", args.join(" ")), &output);
    eprintln!("cargo {}: {:.1?}", args.join(" "), start.elapsed());
    let stderr = text(&output.stderr);
    for compiling in [
        format!("Compiling my-app-policy v0.1.0 ({})", dir.display()),
        format!("({})", dir.join("vendor/guest-sdk").display()),
    ] {
        assert!(
            stderr.contains(&compiling),
            "cargo {} did not compile {compiling}:\n{stderr}",
            args.join(" "),
        );
    }
    text(&output.stdout)
}

/// Installs the `wasm32-wasip2` standard library with rustup when missing
/// (as the other end-to-end tests' builds do).
fn ensure_wasm_target() {
    static CHECKED: OnceLock<()> = OnceLock::new();
    CHECKED.get_or_init(|| {
        let Ok(installed) = Command::new("rustup")
            .args(["target", "list", "--installed"])
            .output()
        else {
            return;
        };
        if !text(&installed.stdout)
            .lines()
            .any(|t| t.trim() == "wasm32-wasip2")
        {
            let status = Command::new("rustup")
                .args(["target", "add", "wasm32-wasip2"])
                .status();
            assert!(
                status.is_ok_and(|s| s.success()),
                "rustup target add wasm32-wasip2 failed"
            );
        }
    });
}

/// Every file under `dir`, relative, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        if entry.file_type().unwrap().is_dir() {
            out.extend(
                listing(&entry.path())
                    .into_iter()
                    .map(|f| format!("{name}/{f}")),
            );
        } else {
            out.push(name);
        }
    }
    out.sort();
    out
}

/// Where `bytes` name a file or directory of the repository other than its
/// build output: each occurrence of a repository path followed by `/` and
/// not by the rest of the target directory's path, with what follows it.
///
/// Build outputs are allowed: the panic messages of code that dependencies
/// generate at build time (cranelift's) name the file they generated in the
/// target directory. A repository path followed by anything but `/` names
/// no file in it (a debug build's compilation directory does that).
fn repository_files_named(bytes: &[u8]) -> BTreeSet<String> {
    let target = format!("{}/", target_dir().display());
    let repos = repository_paths();
    let mut found = BTreeSet::new();
    // In overlapping chunks, as text (std's optimized search, even in a
    // debug build of this test: a debug `host` is hundreds of megabytes).
    const CHUNK: usize = 1 << 22;
    const OVERLAP: usize = 1 << 10;
    let mut start = 0;
    while start < bytes.len() {
        let end = (start + CHUNK + OVERLAP).min(bytes.len());
        let chunk = String::from_utf8_lossy(&bytes[start..end]);
        for repo in &repos {
            for (at, _) in chunk.match_indices(repo.as_str()) {
                let rest = &chunk[at..];
                if rest[repo.len()..].starts_with('/') && !rest.starts_with(&target) {
                    let named: String = rest
                        .chars()
                        .take_while(|c| c.is_ascii_graphic())
                        .take(160)
                        .collect();
                    found.insert(named);
                }
            }
        }
        start += CHUNK;
    }
    found
}

/// A `Cargo.lock`'s packages as (name, version, source, checksum).
fn locked_packages(lock: &str) -> Vec<[String; 4]> {
    lock.split("[[package]]")
        .skip(1)
        .map(|block| {
            let field = |key: &str| {
                block
                    .lines()
                    .find_map(|line| line.strip_prefix(&format!("{key} = \"")))
                    .map(|v| v.trim_end_matches('"').to_string())
                    .unwrap_or_default()
            };
            [
                field("name"),
                field("version"),
                field("source"),
                field("checksum"),
            ]
        })
        .collect()
}

#[test]
fn an_installed_host_scaffolds_a_policy_that_tests_builds_signs_and_runs() {
    let started = Instant::now();
    let outside = Outside::new();

    // The host, installed as the Debian package installs it (`host` is
    // bind9's DNS tool there), with no checkout of this repository beside
    // it: it must not name the repository's sources (it did: the guest-sdk
    // it was built from was its default SDK), and what it writes names it
    // `policy-host`, never `host`.
    let bin = outside.dir.join("usr/sbin");
    fs::create_dir_all(&bin).unwrap();
    let installed = bin.join("policy-host");
    fs::copy(host_binary(), &installed).expect("install the host binary");
    let named = repository_files_named(&fs::read(&installed).unwrap());
    assert!(
        named.is_empty(),
        "the host binary names files of the repository: {named:#?}"
    );

    let home = outside.dir.join("home");
    fs::create_dir_all(&home).unwrap();
    let out = scrubbed(Command::new(&installed))
        .args(["new-policy", "my-app-policy"])
        .current_dir(&home)
        .output()
        .expect("run the installed policy-host new-policy");
    assert_success("policy-host new-policy", &out);
    let dir = home.join("my-app-policy");
    let stdout = text(&out.stdout);
    for line in [
        &format!(
            "created policy crate `my-app-policy` in {}\n",
            dir.display()
        ),
        "  Cargo.toml\n",
        "  Cargo.lock\n",
        "  src/lib.rs\n",
        "  README.md\n",
        "  .gitignore\n",
        "  build.sh\n",
        "  vendor/contract-words/\n",
        "  vendor/guest-sdk/\n",
        "depending on guest-sdk 0.1.0 in vendor/guest-sdk (the SDK this host ships)\n",
        "  cd my-app-policy\n",
        "  cargo test\n",
        "  cargo build --release --target wasm32-wasip2\n",
        "  policy-host sign target/wasm32-wasip2/release/my_app_policy.wasm --key ~/keys/policy-host.key      # policy-host keygen --out ~/keys, once\n",
        "  policy-host run target/wasm32-wasip2/release/my_app_policy.wasm --noop --trusted-key ~/keys/policy-host.pub\n",
    ] {
        assert!(stdout.contains(line), "{line:?} not in:\n{stdout}");
    }
    let leaked = host_commands(&stdout);
    assert!(leaked.is_empty(), "new-policy says `host`: {leaked:#?}");
    let files = listing(&dir);
    let own: Vec<&str> = files
        .iter()
        .map(String::as_str)
        .filter(|f| !f.starts_with("vendor/"))
        .collect();
    assert_eq!(
        own,
        [
            ".gitignore",
            "Cargo.lock",
            "Cargo.toml",
            "README.md",
            "build.sh",
            "src/lib.rs"
        ]
    );
    for vendored in [
        "vendor/guest-sdk/Cargo.toml",
        "vendor/guest-sdk/src/lib.rs",
        "vendor/guest-sdk/wit/policy.wit",
        "vendor/contract-words/Cargo.toml",
        "vendor/contract-words/src/lib.rs",
    ] {
        assert!(files.iter().any(|f| f == vendored), "{vendored}: {files:?}");
    }
    let manifest = fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains("guest-sdk = { path = \"vendor/guest-sdk\" }"),
        "{manifest}"
    );
    // The crate's own files name the commands as it was called.
    for file in &own {
        let leaked = host_commands(&fs::read_to_string(dir.join(file)).unwrap());
        assert!(leaked.is_empty(), "{file} says `host`: {leaked:#?}");
    }
    let readme = fs::read_to_string(dir.join("README.md")).unwrap();
    assert!(
        readme.contains("policy-host sign target/wasm32-wasip2/release/my_app_policy.wasm"),
        "{readme}"
    );

    // The generated native tests pass.
    let tests = cargo(&dir, &["test"]);
    for test in [
        "tests::converges_a_fresh_machine ... ok",
        "tests::second_run_changes_nothing ... ok",
        "tests::config_change_restarts_the_service ... ok",
        "tests::noop_explains_and_changes_nothing ... ok",
    ] {
        assert!(tests.contains(test), "{test:?} not in:\n{tests}");
    }

    // The component builds.
    ensure_wasm_target();
    cargo(&dir, &["build", "--release", "--target", "wasm32-wasip2"]);
    let built = target_dir().join("wasm32-wasip2/release/my_app_policy.wasm");
    assert!(built.is_file(), "cargo built no {}", built.display());

    // The tutorial renders as the README says (`cargo doc -p guest-sdk`,
    // from the policy: the vendored copy), with no broken link.
    let doc = scrubbed(Command::new(cargo_program()))
        .args(["doc", "-p", "guest-sdk", "--no-deps"])
        .current_dir(&dir)
        .env("CARGO_TARGET_DIR", target_dir())
        .env("RUSTDOCFLAGS", "-D warnings")
        .output()
        .expect("run cargo doc");
    assert_success("cargo doc -p guest-sdk (RUSTDOCFLAGS=-D warnings)", &doc);
    let tutorial = target_dir().join("doc/guest_sdk/_tutorial/index.html");
    assert!(tutorial.is_file(), "no {}", tutorial.display());

    // With the dependency versions this workspace tests: cargo kept every
    // version of the lock `host new-policy` wrote (it only dropped entries
    // and added the crate's own).
    let workspace_lock =
        locked_packages(&fs::read_to_string(workspace_root().join("Cargo.lock")).unwrap());
    let crate_lock = locked_packages(&fs::read_to_string(dir.join("Cargo.lock")).unwrap());
    let registry: Vec<&[String; 4]> = crate_lock.iter().filter(|p| !p[2].is_empty()).collect();
    assert!(registry.iter().any(|p| p[0] == "serde"), "{crate_lock:?}");
    for package in registry {
        assert!(
            workspace_lock.contains(package),
            "{package:?} is not in the workspace's Cargo.lock"
        );
    }

    // Nothing in the crate, nor anything `host new-policy` said, names the
    // repository.
    let repos = repository_paths();
    for said in [text(&out.stdout), text(&out.stderr)] {
        for repo in &repos {
            assert!(!said.contains(repo.as_str()), "{said}");
        }
    }
    for file in listing(&dir) {
        let contents = fs::read(dir.join(&file)).unwrap();
        for repo in &repos {
            assert!(
                !contents.windows(repo.len()).any(|w| w == repo.as_bytes()),
                "{file} names the repository {repo}"
            );
        }
    }

    // Built and signed by `./build.sh SECRET_KEY`, as the README says: it
    // signs with the installed policy-host (first on PATH; `host`, were
    // it called that, is bind9's DNS tool or missing).
    let key = test_key();
    let path = std::env::join_paths(std::iter::once(bin.clone()).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();
    let out = scrubbed(Command::new("sh"))
        .arg(dir.join("build.sh"))
        .arg(&key.secret_key)
        .env("PATH", path)
        .env("CARGO_TARGET_DIR", target_dir())
        .output()
        .expect("run ./build.sh");
    assert_success("./build.sh SECRET_KEY", &out);
    let said = text(&out.stdout);
    assert_eq!(
        said.lines().last(),
        Some(built.display().to_string().as_str()),
        "{said}"
    );
    assert!(
        said.contains("trusted comment: file:my_app_policy.wasm "),
        "{said}"
    );
    let signature = target_dir().join("wasm32-wasip2/release/my_app_policy.wasm.minisig");
    assert!(signature.is_file(), "build.sh signed nothing");
    let policy = outside.dir.join("my_app_policy.wasm");
    fs::copy(&built, &policy).unwrap();
    fs::rename(&signature, outside.dir.join("my_app_policy.wasm.minisig")).unwrap();

    // It converges a machine where my-app is stopped and disabled.
    let fake = FakeSystemctl::new();
    fake.unit("my-app", "inactive", "disabled");
    let run = |args: &[&str]| {
        scrubbed(fake.command(&installed))
            .arg("run")
            .arg(&policy)
            .args(trust_args())
            .arg("--lock-file")
            .arg(fake.root().join("policy-host.lock"))
            .arg("--cache-dir")
            .arg(fake.root().join("cache"))
            .args(args)
            .output()
            .expect("run host")
    };
    let out = run(&["--json"]);
    assert_success("host run", &out);
    assert_eq!(
        fake.mutating_calls(),
        [
            "start --system -- my-app",
            "enable --no-reload --system -- my-app"
        ]
    );
    assert_eq!(
        fake.state("my-app").unwrap(),
        ("active".into(), "enabled".into())
    );
    assert!(fake.rejected_calls().is_empty(), "{:?}", fake.calls());
    let report: Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    assert_eq!(report["resources"][0]["resource"], "service#my-app");
    assert_eq!(
        report["resources"][0]["actions"],
        serde_json::json!(["started", "enabled"])
    );

    // A second run changes nothing; a configuration change restarts it.
    fake.clear_calls();
    let out = run(&["--detailed-exitcodes"]);
    assert_success("second host run", &out);
    assert!(fake.mutating_calls().is_empty(), "{:?}", fake.calls());
    let out = run(&["--refresh", "file#/etc/my-app/config.toml"]);
    assert_success("host run --refresh", &out);
    assert_eq!(fake.mutating_calls(), ["restart --system -- my-app"]);

    eprintln!(
        "install, scaffold, test, build, sign, run: {:.1?}",
        started.elapsed()
    );
    outside.done();
}

/// Where `text` quotes one of the host's commands as `host COMMAND`, a line
/// each: what `policy-host` writes names it `policy-host`.
fn host_commands(text: &str) -> Vec<String> {
    const COMMANDS: [&str; 8] = [
        "run",
        "sign",
        "keygen",
        "verify",
        "new-policy",
        "watch",
        "push",
        "inspect",
    ];
    text.match_indices("host ")
        .filter(|(at, _)| {
            let before = text[..*at].chars().next_back();
            let command = text[at + "host ".len()..]
                .split(|c: char| !(c.is_alphanumeric() || c == '-'))
                .next()
                .unwrap_or_default();
            !before.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_')
                && COMMANDS.contains(&command)
        })
        .map(|(at, _)| text[at..].lines().next().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn the_check_of_host_commands_finds_them() {
    assert_eq!(
        host_commands("`host run` here\n  host sign x\nthe host watches\npolicy-host run\n"),
        ["host run` here", "host sign x"]
    );
}

/// The check of the host binary finds a source path wherever it is (across
/// the chunks it searches in), and lets build outputs pass.
#[test]
fn the_binary_check_finds_repository_sources() {
    let repo = workspace_root().display().to_string();
    let target = target_dir().display().to_string();
    let mut bytes = vec![0xffu8; (1 << 22) - 7];
    bytes.extend_from_slice(format!("{repo}/host/../guest-sdk\0").as_bytes());
    bytes.extend_from_slice(format!("{target}/debug/build/x/out/gen.rs\0").as_bytes());
    bytes.extend_from_slice(format!("{repo}\0{repo}/wit\x01").as_bytes());
    let named: Vec<String> = repository_files_named(&bytes).into_iter().collect();
    assert_eq!(
        named,
        [format!("{repo}/host/../guest-sdk"), format!("{repo}/wit")]
    );
}

/// For SDK developers: `--sdk-path` makes the crate depend on a checkout,
/// by its canonical path, and vendors nothing.
#[test]
fn sdk_path_depends_on_a_checkout_instead() {
    let scratch = scratch("sdk-path");
    let dir = scratch.path().join("dev-policy");
    let sdk = workspace_root().join("host/../guest-sdk");
    let out = new_policy(&dir, &["--sdk-path", sdk.to_str().unwrap()]);
    assert_success("host new-policy --sdk-path", &out);
    let canonical = fs::canonicalize(&sdk).unwrap();
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(&format!(
            "depending on guest-sdk at {}\n",
            canonical.display()
        )),
        "{stdout}"
    );
    assert!(!stdout.contains("vendor/"), "{stdout}");
    assert!(!dir.join("vendor").exists());
    let manifest = fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains(&format!(
            "guest-sdk = {{ path = \"{}\" }}",
            canonical.display()
        )),
        "{manifest}"
    );
}

#[test]
fn refuses_a_non_empty_directory_and_writes_nothing() {
    let scratch = scratch("non-empty");
    let dir = scratch.path().join("existing");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("notes.txt"), "mine\n").unwrap();

    let out = new_policy(&dir, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("already exists and is not empty; nothing was written"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    assert_eq!(listing(&dir), ["notes.txt"]);
    assert_eq!(fs::read_to_string(dir.join("notes.txt")).unwrap(), "mine\n");
}

#[test]
fn refuses_an_invalid_crate_name_and_writes_nothing() {
    let scratch = scratch("bad-name");

    let from_dir = scratch.path().join("2fast");
    let out = new_policy(&from_dir, &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(
            "invalid crate name `2fast` (the directory's name): the name must not start with a digit; pass --name NAME"
        ),
        "{stderr}"
    );
    assert!(!from_dir.exists());

    for (name, why) in [
        ("my policy", "invalid character ' '"),
        ("fn", "`fn` is a Rust keyword"),
        ("", "the name is empty"),
    ] {
        let dir = scratch.path().join("named");
        let out = new_policy(&dir, &["--name", name]);
        assert_eq!(out.status.code(), Some(1), "{name:?}");
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains(&format!("invalid crate name `{name}`: {why}")),
            "{name:?}: {stderr}"
        );
        assert!(!dir.exists(), "{name:?}");
    }

    // --name rescues a directory whose name is not a crate name.
    let out = new_policy(&from_dir, &["--name", "fast-policy"]);
    assert_success("host new-policy --name", &out);
    let manifest = fs::read_to_string(from_dir.join("Cargo.toml")).unwrap();
    assert!(manifest.contains("name = \"fast-policy\""), "{manifest}");
}

// ------------------------------------------------------- --lang python | js

/// `host new-policy --lang LANGUAGE my-app-policy` in a fresh directory
/// outside the repository, then the project's own steps as its README
/// gives them: its tests in the language's runner, `./build.sh KEY` (the
/// declaration built, composed with the engine, signed), and two runs
/// against the fake systemctl: converge, then nothing to do.
fn a_scaffolded_declaration_tests_builds_signs_and_runs(language: &str, test: &[&str]) {
    let home = policy_host_e2e::fake_systemctl::temp_dir(&format!("scaffold-{language}"));
    // The host on PATH under the name the package installs, as build.sh calls it.
    let bin = home.join("bin");
    fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(host_binary(), bin.join("policy-host")).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new(bin.join("policy-host"))
        .args(["new-policy", "--lang", language, "my-app-policy"])
        .current_dir(&home)
        .output()
        .unwrap();
    assert_success("policy-host new-policy --lang", &out);
    let stdout = text(&out.stdout);
    assert!(stdout.contains("  ./build.sh "), "{stdout}");
    let dir = home.join("my-app-policy");
    for file in ["README.md", "build.sh", "wit/declaration.wit"] {
        assert!(dir.join(file).is_file(), "{file}: {:?}", listing(&dir));
    }

    let out = Command::new(test[0])
        .args(&test[1..])
        .current_dir(&dir)
        .env("PATH", &path)
        .output()
        .unwrap();
    assert_success(&test.join(" "), &out);
    let said = text(&out.stdout);
    assert!(
        said.contains("2 passed") || said.contains("# pass 2"),
        "{said}"
    );

    let key = test_key();
    let out = Command::new("./build.sh")
        .arg(&key.secret_key)
        .current_dir(&dir)
        .env("PATH", &path)
        .env(
            "ENGINE",
            policy_host_e2e::build::policy_wasm("declaration-engine"),
        )
        .output()
        .unwrap();
    assert_success("./build.sh KEY", &out);
    assert!(
        text(&out.stdout).ends_with("my_app_policy.wasm\n"),
        "{}",
        text(&out.stdout)
    );
    let policy = dir.join("my_app_policy.wasm");
    assert!(dir.join("my_app_policy.wasm.minisig").is_file());

    let fake = FakeSystemctl::new();
    fake.unit("my-app", "inactive", "disabled");
    let run = fake.host_run().policy(&policy).args(["--json"]).run();
    run.assert_exit(0);
    assert_eq!(
        fake.mutating_calls(),
        [
            "start --system -- my-app",
            "enable --no-reload --system -- my-app"
        ]
    );
    fake.clear_calls();
    let again = fake.host_run().policy(&policy).args(["--json"]).run();
    again.assert_exit(0);
    assert_eq!(fake.mutating_calls(), Vec::<String>::new());
    let _ = fs::remove_dir_all(&home);
}

#[policy_host_e2e::requires::e2e_test(requires = "componentize-py, pytest")]
fn a_scaffolded_python_policy_tests_builds_signs_and_runs() {
    a_scaffolded_declaration_tests_builds_signs_and_runs(
        "python",
        &["python3", "-m", "pytest", "-p", "no:cacheprovider"],
    );
}

#[policy_host_e2e::requires::e2e_test(requires = "componentize-qjs, node")]
fn a_scaffolded_javascript_policy_tests_builds_signs_and_runs() {
    a_scaffolded_declaration_tests_builds_signs_and_runs("js", &["node", "--test"]);
}
