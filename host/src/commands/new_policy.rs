//! `host new-policy DIR`: scaffold a policy crate that tests, builds, signs
//! and runs as generated.
//!
//! Everything is checked before anything is written: the directory (absent,
//! or an empty directory), the crate name, and the guest-sdk path. The crate
//! has its own `[workspace]` table, so it builds where it is even inside
//! another workspace's directory tree.
//!
//! By default the crate gets its SDK from this binary: `host/build.rs`
//! embeds `host/vendor/` in it (guest-sdk, with the WIT contract inside, and
//! contract-words, as `cargo package` makes them), and they are written to
//! the crate's `vendor/` with guest-sdk's `Cargo.lock`: the dependency
//! versions this workspace tests. So a `host` installed on any machine scaffolds a crate
//! that builds there, and no path of the machine that built the host is
//! written anywhere. `--sdk-path` points the crate at a guest-sdk checkout
//! instead, for developing the SDK.

use std::ffi::OsStr;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context as _};

use crate::cli::NewPolicyArgs;

/// The vendored crates, as `host/build.rs` embedded them: `SDK_VERSION`
/// and `SDK_FILES`.
mod embedded {
    include!(concat!(env!("OUT_DIR"), "/embedded_sdk.rs"));
}

/// The new crate's directory for the embedded SDK: `vendor/guest-sdk` and
/// `vendor/contract-words`.
const VENDOR: &str = "vendor";

/// guest-sdk's `Cargo.lock`, as `cargo package` wrote it from the
/// workspace's: the new crate's lock starts from it.
fn sdk_lock() -> &'static [u8] {
    embedded::SDK_FILES
        .iter()
        .find(|(path, _, _)| *path == "guest-sdk/Cargo.lock")
        .map(|(_, contents, _)| *contents)
        .expect("the vendored guest-sdk has a Cargo.lock")
}

const CARGO_TOML: &str = include_str!("../../templates/new-policy/Cargo.toml.tmpl");
const LIB_RS: &str = include_str!("../../templates/new-policy/lib.rs.tmpl");
const README_MD: &str = include_str!("../../templates/new-policy/README.md.tmpl");
const GITIGNORE: &str = include_str!("../../templates/new-policy/gitignore.tmpl");
const BUILD_SH: &str = include_str!("../../templates/new-policy/build.sh.tmpl");

/// One file of the new crate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    /// Relative to the crate's directory, `/`-separated.
    pub path: String,
    pub contents: Vec<u8>,
    pub executable: bool,
}

/// The guest-sdk a new crate depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sdk {
    /// The one embedded in this host, written to the crate's `vendor/`.
    Vendored {
        /// Its version.
        version: &'static str,
    },
    /// A guest-sdk directory (`--sdk-path`), canonical.
    Path(PathBuf),
}

impl Sdk {
    /// The guest-sdk embedded in this host.
    pub fn embedded() -> Self {
        Sdk::Vendored {
            version: embedded::SDK_VERSION,
        }
    }

    /// The dependency's `path` in the new crate's `Cargo.toml`.
    fn dependency_path(&self) -> anyhow::Result<String> {
        match self {
            Sdk::Vendored { .. } => Ok(format!("{VENDOR}/guest-sdk")),
            Sdk::Path(dir) => dir
                .to_str()
                .map(str::to_string)
                .ok_or_else(|| anyhow!("the guest-sdk path {} is not UTF-8", dir.display())),
        }
    }
}

/// What [`create`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Created {
    /// The crate's directory, absolute.
    pub dir: PathBuf,
    /// The package name.
    pub name: String,
    /// The library name: the package name with `_` for `-`, which is also
    /// the `.wasm` file's stem.
    pub lib_name: String,
    /// The guest-sdk the crate depends on.
    pub sdk: Sdk,
    /// The files, relative to `dir`, in the order they were written.
    pub files: Vec<String>,
}

impl Created {
    /// Where `cargo build --release --target wasm32-wasip2` puts the component,
    /// relative to the crate's directory.
    pub fn wasm_path(&self) -> String {
        format!("target/wasm32-wasip2/release/{}.wasm", self.lib_name)
    }
}

pub fn execute(args: &NewPolicyArgs) -> anyhow::Result<i32> {
    let created = create(&args.dir, args.name.as_deref(), args.sdk_path.as_deref())?;
    println!(
        "created policy crate `{}` in {}",
        created.name,
        created.dir.display()
    );
    for line in listing_lines(&created.files) {
        println!("  {line}");
    }
    match &created.sdk {
        Sdk::Vendored { version } => println!(
            "depending on guest-sdk {version} in {VENDOR}/guest-sdk (the SDK this host ships)"
        ),
        Sdk::Path(dir) => println!("depending on guest-sdk at {}", dir.display()),
    }
    println!();
    println!("next:");
    println!("  cd {}", shell_quote(&args.dir.display().to_string()));
    println!("  cargo test");
    println!("  cargo build --release --target wasm32-wasip2");
    let host = crate::program::name();
    println!(
        "  {host} sign {} --key ~/keys/policy-host.key      # {host} keygen --out ~/keys, once",
        created.wasm_path()
    );
    println!("  {host} run {} --noop", created.wasm_path());
    Ok(0)
}

/// The files as listed to the user: each one, except that the vendored
/// directories are listed once each (`vendor/guest-sdk/`) and not file by file.
fn listing_lines(files: &[String]) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for file in files {
        let line = match file.strip_prefix(&format!("{VENDOR}/")) {
            Some(rest) => match rest.split_once('/') {
                Some((top, _)) => format!("{VENDOR}/{top}/"),
                None => file.clone(),
            },
            None => file.clone(),
        };
        if !lines.contains(&line) {
            lines.push(line);
        }
    }
    lines
}

/// Scaffolds the crate in `dir` (created with its parents if missing; an
/// existing directory must be empty). `name` defaults to the directory's
/// name; without `sdk_path`, the crate gets the guest-sdk embedded in this
/// host in its `vendor/`.
pub fn create(dir: &Path, name: Option<&str>, sdk_path: Option<&Path>) -> anyhow::Result<Created> {
    let existed = check_dir(dir)?;
    let name = match name {
        Some(name) => {
            validate_crate_name(name).map_err(|e| anyhow!("invalid crate name `{name}`: {e}"))?;
            name.to_string()
        }
        None => name_from_dir(dir)?,
    };
    let sdk = match sdk_path {
        Some(path) => Sdk::Path(resolve_sdk_path(path)?),
        None => Sdk::embedded(),
    };
    let files = render(&name, &sdk)?;

    if !existed {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    if let Err(e) = write_files(dir, &files) {
        // Leave nothing half-made behind: remove what this run created (an
        // existing directory was empty).
        if existed {
            remove_contents(dir);
        } else {
            let _ = fs::remove_dir_all(dir);
        }
        return Err(e);
    }
    let dir = fs::canonicalize(dir).with_context(|| format!("resolving {}", dir.display()))?;
    Ok(Created {
        dir,
        lib_name: name.replace('-', "_"),
        name,
        sdk,
        files: files.into_iter().map(|f| f.path).collect(),
    })
}

/// Removes everything in `dir`, as far as it can.
fn remove_contents(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let _ = if entry.file_type().is_ok_and(|t| t.is_dir()) {
            fs::remove_dir_all(&path)
        } else {
            fs::remove_file(&path)
        };
    }
}

/// The directory must not exist, or be an empty directory; returns whether it exists.
fn check_dir(dir: &Path) -> anyhow::Result<bool> {
    match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(anyhow!("{}: {e}", dir.display())),
        Ok(meta) if meta.is_dir() => {
            let mut entries =
                fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))?;
            if entries.next().is_some() {
                bail!(
                    "{} already exists and is not empty; nothing was written (choose a new or empty directory)",
                    dir.display()
                );
            }
            Ok(true)
        }
        Ok(_) => bail!(
            "{} already exists and is not a directory; nothing was written",
            dir.display()
        ),
    }
}

/// The crate name taken from the directory's last component.
fn name_from_dir(dir: &Path) -> anyhow::Result<String> {
    let absolute = if dir.exists() {
        fs::canonicalize(dir)
    } else {
        std::path::absolute(dir)
    }
    .with_context(|| format!("resolving {}", dir.display()))?;
    let Some(name) = absolute.file_name().and_then(OsStr::to_str) else {
        bail!(
            "cannot take a crate name from {}; pass --name NAME",
            dir.display()
        );
    };
    validate_crate_name(name).map_err(|e| {
        anyhow!("invalid crate name `{name}` (the directory's name): {e}; pass --name NAME")
    })?;
    Ok(name.to_string())
}

/// Rust keywords (strict and reserved, every edition): a library may not be
/// named after one.
const KEYWORDS: [&str; 52] = [
    "abstract", "as", "async", "await", "become", "box", "break", "const", "continue", "crate",
    "do", "dyn", "else", "enum", "extern", "false", "final", "fn", "for", "gen", "if", "impl",
    "in", "let", "loop", "macro", "match", "mod", "move", "mut", "override", "priv", "pub", "ref",
    "return", "self", "Self", "static", "struct", "super", "trait", "true", "try", "type",
    "typeof", "unsafe", "unsized", "use", "virtual", "where", "while", "yield",
];

/// Checks `name` as cargo and crates.io would: ASCII letters, digits, `-`
/// and `_`, starting with a letter or `_`, at most 64 characters, and not a
/// keyword or a name cargo or Rust reserves.
pub fn validate_crate_name(name: &str) -> Result<(), String> {
    let Some(first) = name.chars().next() else {
        return Err("the name is empty".into());
    };
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
    {
        return Err(format!(
            "invalid character {bad:?}: use ASCII letters, digits, `-` and `_`"
        ));
    }
    if first.is_ascii_digit() {
        return Err("the name must not start with a digit".into());
    }
    if first == '-' {
        return Err("the name must not start with `-`".into());
    }
    if name.len() > 64 {
        return Err(format!(
            "the name is {} characters long; at most 64 are allowed",
            name.len()
        ));
    }
    let lib_name = name.replace('-', "_");
    if KEYWORDS.contains(&lib_name.as_str()) {
        return Err(format!("`{lib_name}` is a Rust keyword"));
    }
    if ["test", "core", "std", "alloc", "proc_macro"].contains(&lib_name.as_str()) {
        return Err(format!("`{name}` is the name of a built-in Rust library"));
    }
    if lib_name == "guest_sdk" {
        return Err("the policy depends on guest-sdk and cannot have its name".into());
    }
    if ["deps", "examples", "build", "incremental"].contains(&name) {
        return Err(format!("`{name}` is one of cargo's build directory names"));
    }
    let lower = name.to_ascii_lowercase();
    let windows_reserved = ["con", "prn", "aux", "nul"].contains(&lower.as_str())
        || ((lower.starts_with("com") || lower.starts_with("lpt"))
            && lower.len() == 4
            && lower.as_bytes()[3].is_ascii_digit());
    if windows_reserved {
        return Err(format!("`{name}` is a reserved file name on Windows"));
    }
    Ok(())
}

/// The canonical guest-sdk directory given with `--sdk-path`: it must hold
/// guest-sdk's `Cargo.toml`.
fn resolve_sdk_path(dir: &Path) -> anyhow::Result<PathBuf> {
    let hint = "give the directory of the guest-sdk crate, or leave --sdk-path out to use the SDK this host ships";
    let manifest = dir.join("Cargo.toml");
    let text = fs::read_to_string(&manifest).map_err(|e| {
        anyhow!(
            "--sdk-path: no guest-sdk crate at {}: cannot read {}: {e}; {hint}",
            dir.display(),
            manifest.display()
        )
    })?;
    let table: toml::Table = text.parse().map_err(|e| {
        anyhow!(
            "--sdk-path: {} is not a valid Cargo.toml: {e}; {hint}",
            manifest.display()
        )
    })?;
    let package = table
        .get("package")
        .and_then(|p| p.get("name"))
        .and_then(|n| n.as_str());
    if package != Some("guest-sdk") {
        bail!(
            "--sdk-path: {} is not guest-sdk's manifest (package {}); {hint}",
            manifest.display(),
            package.map_or_else(|| "unnamed".to_string(), |p| format!("`{p}`"))
        );
    }
    fs::canonicalize(dir).with_context(|| format!("resolving {}", dir.display()))
}

/// The crate's files with the placeholders filled in, then (for the
/// embedded SDK) the SDK's files under `vendor/`.
pub fn render(name: &str, sdk: &Sdk) -> anyhow::Result<Vec<File>> {
    let sdk_path = sdk.dependency_path()?;
    let lib_name = name.replace('-', "_");
    let host = crate::program::name();
    let (sdk_note, sdk_readme, sdk_patch) = match sdk {
        Sdk::Vendored { version } => (
            format!(
                "# guest-sdk {version}, copied into {VENDOR}/ by `{host} new-policy` with the WIT\n\
                 # contract it is built from: the crate needs nothing else to build."
            ),
            format!(
                "`{VENDOR}/` holds guest-sdk {version} and the WIT contract it is built from,\n\
                 as the `{host}` that created this crate ships them: the crate builds\n\
                 anywhere, and `Cargo.lock` starts with the dependency versions that SDK\n\
                 was tested with. Keep `{VENDOR}/` with the policy's sources. To move to the\n\
                 SDK of a newer host, run its `{host} new-policy` into a scratch directory\n\
                 and replace this `{VENDOR}/` with that one."
            ),
            format!(
                "\n# The tables guest-sdk shares with the host, from {VENDOR}/ as well.\n\
                 [patch.crates-io]\n\
                 contract-words = {{ path = \"{VENDOR}/contract-words\" }}\n"
            ),
        ),
        Sdk::Path(_) => (
            format!("# guest-sdk from a checkout (`{host} new-policy --sdk-path`)."),
            format!(
                "guest-sdk is used from `{sdk_path}` (given to `{host} new-policy --sdk-path`)."
            ),
            String::new(),
        ),
    };
    let fill = |template: &str| {
        template
            .replace("{{name}}", name)
            .replace("{{crate}}", &lib_name)
            .replace("{{sdk_path}}", &toml_string(&sdk_path))
            .replace("{{sdk_display}}", &sdk_path)
            .replace("{{sdk_note}}", &sdk_note)
            .replace("{{sdk_readme}}", &sdk_readme)
            .replace("{{sdk_patch}}", &sdk_patch)
            .into_bytes()
    };
    let file = |path: &str, contents: Vec<u8>, executable| File {
        path: path.to_string(),
        contents,
        executable,
    };
    let mut files = vec![
        file("Cargo.toml", fill(CARGO_TOML), false),
        file("Cargo.lock", sdk_lock().to_vec(), false),
        file("src/lib.rs", fill(LIB_RS), false),
        file("README.md", fill(README_MD), false),
        file(".gitignore", fill(GITIGNORE), false),
        file("build.sh", fill(BUILD_SH), true),
    ];
    if let Sdk::Vendored { .. } = sdk {
        for (path, contents, executable) in embedded::SDK_FILES {
            files.push(file(
                &format!("{VENDOR}/{path}"),
                contents.to_vec(),
                *executable,
            ));
        }
    }
    Ok(files)
}

/// `text` as a TOML basic string, quotes included.
fn toml_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn write_files(dir: &Path, files: &[File]) -> anyhow::Result<()> {
    for file in files {
        let path = dir.join(&file.path);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        let mut options = fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(if file.executable { 0o755 } else { 0o644 });
        }
        options
            .open(&path)
            .and_then(|mut f| f.write_all(&file.contents))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// `text` quoted for a POSIX shell when it needs quoting.
fn shell_quote(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:,=@%".contains(c));
    if plain {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> Self {
            use std::sync::atomic::{AtomicU32, Ordering};
            static COUNTER: AtomicU32 = AtomicU32::new(0);
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let dir =
                std::env::temp_dir().join(format!("new-policy-{tag}-{}-{n}", std::process::id()));
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
        let files = render("web-policy", &sdk).unwrap();
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

    #[test]
    fn the_embedded_sdk_is_rendered_into_vendor() {
        let files = render("web-policy", &Sdk::embedded()).unwrap();
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
        let mut files = render("web", &Sdk::embedded()).unwrap();
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
}
