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

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context as _};

use crate::cli::{Language, NewPolicyArgs};

mod languages;
mod names;
mod render;
#[cfg(test)]
mod tests;

use self::names::{name_from_dir, validate_crate_name};
use self::render::{embedded, program_name, render, shell_quote, VENDOR};

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
    if args.lang != Language::Rust {
        if args.sdk_path.is_some() {
            bail!("--sdk-path names a guest-sdk crate: it is for --lang rust only; nothing was written");
        }
        return execute_declaration(args);
    }
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
    let host = shell_quote(crate::program::name());
    println!(
        "  {host} sign {} --key ~/keys/policy-host.key      # {host} keygen --out ~/keys, once",
        created.wasm_path()
    );
    println!(
        "  {host} run {} --noop --trusted-key ~/keys/policy-host.pub",
        created.wasm_path()
    );
    Ok(0)
}

/// `host new-policy --lang python|js`: the project, then its five steps.
fn execute_declaration(args: &NewPolicyArgs) -> anyhow::Result<i32> {
    let (dir, name, files) = create_declaration(&args.dir, args.name.as_deref(), args.lang)?;
    let stem = name.replace('-', "_");
    let language = match args.lang {
        Language::Python => "Python",
        Language::Js => "JavaScript",
        Language::Rust => unreachable!("a Rust policy is a crate: execute"),
    };
    println!("created {language} policy `{name}` in {}", dir.display());
    for file in &files {
        println!("  {file}");
    }
    let host = shell_quote(crate::program::name());
    println!();
    println!("next:");
    println!("  cd {}", shell_quote(&args.dir.display().to_string()));
    match args.lang {
        Language::Python => {
            println!("  pip install pytest componentize-py==0.25.1      # once");
            println!("  python3 -m pytest");
        }
        _ => {
            println!("  npm install                                      # once: componentize-qjs");
            println!("  node --test");
        }
    }
    println!("  ./build.sh                                       # the declaration, composed with the engine: {stem}.wasm");
    println!(
        "  {host} sign {stem}.wasm --key ~/keys/policy-host.key      # {host} keygen --out ~/keys, once"
    );
    println!("  {host} run {stem}.wasm --noop --trusted-key ~/keys/policy-host.pub");
    Ok(0)
}

/// Scaffolds a declaration project in `language` (Python or JavaScript) in
/// `dir`, under the same rules as [`create`]: its directory, name and the
/// files written, relative to it.
pub fn create_declaration(
    dir: &Path,
    name: Option<&str>,
    language: Language,
) -> anyhow::Result<(PathBuf, String, Vec<String>)> {
    let existed = check_dir(dir)?;
    let name = project_name(dir, name, "policy")?;
    let files = languages::render(language, &name, &program_name());
    let dir = write_project(dir, existed, &files)?;
    Ok((dir, name, files.into_iter().map(|f| f.path).collect()))
}

/// The name given (checked as cargo checks a crate's: `what` says which
/// kind of name in the error), or the directory's.
fn project_name(dir: &Path, name: Option<&str>, what: &str) -> anyhow::Result<String> {
    match name {
        Some(name) => {
            validate_crate_name(name).map_err(|e| anyhow!("invalid {what} name `{name}`: {e}"))?;
            Ok(name.to_string())
        }
        None => name_from_dir(dir),
    }
}

/// Writes `files` into `dir` (made first unless it `existed`, empty), and
/// returns it canonical; on an error, leaves nothing half-made behind:
/// removes what this call created.
fn write_project(dir: &Path, existed: bool, files: &[File]) -> anyhow::Result<PathBuf> {
    if !existed {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    if let Err(e) = write_files(dir, files) {
        if existed {
            remove_contents(dir);
        } else {
            let _ = fs::remove_dir_all(dir);
        }
        return Err(e);
    }
    fs::canonicalize(dir).with_context(|| format!("resolving {}", dir.display()))
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
    let name = project_name(dir, name, "crate")?;
    let sdk = match sdk_path {
        Some(path) => Sdk::Path(resolve_sdk_path(path)?),
        None => Sdk::embedded(),
    };
    let files = render(&name, &sdk, &program_name())?;
    let dir = write_project(dir, existed, &files)?;
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
