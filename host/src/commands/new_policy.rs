//! `host new-policy DIR`: scaffold a policy crate that tests, builds, signs
//! and runs as generated.
//!
//! Everything is checked before anything is written: the directory (absent,
//! or an empty directory), the crate name, and the guest-sdk path. The crate
//! has its own `[workspace]` table, so it builds where it is even inside
//! another workspace's directory tree.

use std::ffi::OsStr;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context as _};

use crate::cli::NewPolicyArgs;

/// The guest-sdk this host was built from: the default `--sdk-path`.
const DEFAULT_SDK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../guest-sdk");

const CARGO_TOML: &str = include_str!("../../templates/new-policy/Cargo.toml.tmpl");
const LIB_RS: &str = include_str!("../../templates/new-policy/lib.rs.tmpl");
const README_MD: &str = include_str!("../../templates/new-policy/README.md.tmpl");
const GITIGNORE: &str = include_str!("../../templates/new-policy/gitignore.tmpl");
const BUILD_SH: &str = include_str!("../../templates/new-policy/build.sh.tmpl");

/// One file of the new crate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    /// Relative to the crate's directory, `/`-separated.
    pub path: &'static str,
    pub contents: String,
    pub executable: bool,
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
    /// The guest-sdk directory the crate depends on, canonical.
    pub sdk: PathBuf,
    /// The files, relative to `dir`, in the order they were written.
    pub files: Vec<&'static str>,
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
    for file in &created.files {
        println!("  {file}");
    }
    println!("depending on guest-sdk at {}", created.sdk.display());
    println!();
    println!("next:");
    println!("  cd {}", shell_quote(&args.dir.display().to_string()));
    println!("  cargo test");
    println!("  cargo build --release --target wasm32-wasip2");
    println!(
        "  host sign {} --key ~/keys/policy-host.key      # host keygen --out ~/keys, once",
        created.wasm_path()
    );
    println!("  host run {} --noop", created.wasm_path());
    Ok(0)
}

/// Scaffolds the crate in `dir` (created with its parents if missing; an
/// existing directory must be empty). `name` defaults to the directory's
/// name; `sdk` to the guest-sdk this host was built from.
pub fn create(dir: &Path, name: Option<&str>, sdk: Option<&Path>) -> anyhow::Result<Created> {
    let existed = check_dir(dir)?;
    let name = match name {
        Some(name) => {
            validate_crate_name(name).map_err(|e| anyhow!("invalid crate name `{name}`: {e}"))?;
            name.to_string()
        }
        None => name_from_dir(dir)?,
    };
    let sdk = resolve_sdk(sdk)?;
    let files = render(&name, &sdk)?;

    if !existed {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    if let Err(e) = write_files(dir, &files) {
        // Leave nothing half-made behind: remove what this run created.
        if existed {
            for file in &files {
                let _ = fs::remove_file(dir.join(file.path));
            }
            let _ = fs::remove_dir(dir.join("src"));
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
        files: files.iter().map(|f| f.path).collect(),
    })
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

/// The canonical guest-sdk directory: `sdk`, or the one this host was built
/// from; it must hold guest-sdk's `Cargo.toml`.
fn resolve_sdk(sdk: Option<&Path>) -> anyhow::Result<PathBuf> {
    let (dir, what, hint) = match sdk {
        Some(dir) => (
            dir.to_path_buf(),
            "--sdk-path",
            "give the directory of the guest-sdk crate",
        ),
        None => (
            PathBuf::from(DEFAULT_SDK),
            "the guest-sdk this host was built with",
            "pass --sdk-path PATH with the directory of the guest-sdk crate",
        ),
    };
    let manifest = dir.join("Cargo.toml");
    let text = fs::read_to_string(&manifest).map_err(|e| {
        anyhow!(
            "{what}: no guest-sdk crate at {}: cannot read {}: {e}; {hint}",
            dir.display(),
            manifest.display()
        )
    })?;
    let table: toml::Table = text.parse().map_err(|e| {
        anyhow!(
            "{what}: {} is not a valid Cargo.toml: {e}; {hint}",
            manifest.display()
        )
    })?;
    let package = table
        .get("package")
        .and_then(|p| p.get("name"))
        .and_then(|n| n.as_str());
    if package != Some("guest-sdk") {
        bail!(
            "{what}: {} is not guest-sdk's manifest (package {}); {hint}",
            manifest.display(),
            package.map_or_else(|| "unnamed".to_string(), |p| format!("`{p}`"))
        );
    }
    fs::canonicalize(&dir).with_context(|| format!("resolving {}", dir.display()))
}

/// The crate's files with the placeholders filled in.
pub fn render(name: &str, sdk: &Path) -> anyhow::Result<Vec<File>> {
    let sdk = sdk
        .to_str()
        .ok_or_else(|| anyhow!("the guest-sdk path {} is not UTF-8", sdk.display()))?;
    let lib_name = name.replace('-', "_");
    let fill = |template: &str| {
        template
            .replace("{{name}}", name)
            .replace("{{crate}}", &lib_name)
            .replace("{{sdk_path}}", &toml_string(sdk))
            .replace("{{sdk_display}}", sdk)
    };
    let file = |path, template, executable| File {
        path,
        contents: fill(template),
        executable,
    };
    Ok(vec![
        file("Cargo.toml", CARGO_TOML, false),
        file("src/lib.rs", LIB_RS, false),
        file("README.md", README_MD, false),
        file(".gitignore", GITIGNORE, false),
        file("build.sh", BUILD_SH, true),
    ])
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
        let path = dir.join(file.path);
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
            .and_then(|mut f| f.write_all(file.contents.as_bytes()))
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

    #[test]
    fn rendered_files_fill_every_placeholder() {
        let sdk = Path::new("/opt/policy host/guest-sdk");
        let files = render("web-policy", sdk).unwrap();
        let paths: Vec<&str> = files.iter().map(|f| f.path).collect();
        assert_eq!(
            paths,
            [
                "Cargo.toml",
                "src/lib.rs",
                "README.md",
                ".gitignore",
                "build.sh"
            ]
        );
        for file in &files {
            assert!(!file.contents.contains("{{"), "{}", file.path);
            assert!(!file.contents.contains("}}"), "{}", file.path);
        }
        let manifest: toml::Table = files[0].contents.parse().unwrap();
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
        assert!(files[1]
            .contents
            .contains("guest_sdk::export_policy!(policy);"));
        assert!(files[2]
            .contents
            .contains("target/wasm32-wasip2/release/web_policy.wasm"));
        assert!(files[2].contents.contains("/opt/policy host/guest-sdk"));
        assert!(files[4].executable);
        assert!(files[4].contents.starts_with("#!/bin/sh\n"));
        assert!(files[4].contents.contains("release/web_policy.wasm"));
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
        assert_eq!(
            created.sdk,
            fs::canonicalize(Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-sdk")).unwrap()
        );
        assert_eq!(
            listing(&dir),
            [
                ".gitignore",
                "Cargo.toml",
                "README.md",
                "build.sh",
                "src/lib.rs"
            ]
        );
        let manifest: toml::Table = fs::read_to_string(dir.join("Cargo.toml"))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(
            manifest["dependencies"]["guest-sdk"]["path"].as_str(),
            created.sdk.to_str()
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &str| fs::metadata(dir.join(p)).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode("build.sh"), 0o755);
            assert_eq!(mode("Cargo.toml"), 0o644);
        }
    }

    #[test]
    fn an_empty_existing_directory_is_used_and_name_overrides() {
        let tmp = TempDir::new("empty");
        let created = create(&tmp.0, Some("web_host"), None).unwrap();
        assert_eq!(created.name, "web_host");
        assert!(tmp.0.join("src/lib.rs").is_file());
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

        // The --sdk-path is canonicalized (no `..` left in the dependency).
        let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-sdk");
        let created = create(&tmp.0.join("b"), None, Some(&sdk)).unwrap();
        assert!(created.sdk.is_absolute());
        assert!(created.sdk.join("Cargo.toml").is_file());
    }

    #[test]
    fn shell_quoting_only_when_needed() {
        assert_eq!(shell_quote("my-policy"), "my-policy");
        assert_eq!(shell_quote("/tmp/a b"), "'/tmp/a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }
}
