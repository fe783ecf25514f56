//! Embeds the guest SDK in the `host` binary, for `host new-policy`.
//!
//! A policy crate needs guest-sdk and the WIT contract it is generated from;
//! a `host` installed on a machine without this repository must still be able
//! to give it both. So this script lists every file of `guest-sdk/` and
//! `wit/` (found by walking them: their module lists change) and writes
//! `$OUT_DIR/embedded_sdk.rs`, which `include_bytes!`s each one: the binary
//! holds their contents, never the path they were read from.
//!
//! Two files are generated rather than copied:
//! - guest-sdk's `Cargo.toml`, whose `x.workspace = true` entries only mean
//!   something inside this workspace: they are replaced by the values of the
//!   root manifest's `[workspace.package]`, `[workspace.dependencies]` and
//!   `[workspace.lints]`, so the copy builds on its own;
//! - a `Cargo.lock` holding the entries of the workspace's lock that
//!   guest-sdk's dependencies reach, so a new policy crate builds with the
//!   dependency versions this workspace tests.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

/// With the `deb` feature, which cargo-deb turns on (`[package.metadata.deb]
/// features`): the built-in policy the package ships must already be staged
/// as `<target>/<profile>/manifest-policy.wasm`, a regular file, where
/// cargo-deb takes it from. `dist/debian/build-package` builds and stages it
/// first; a bare `cargo deb` stops here with that advice, instead of
/// shipping a package without its policy.
fn require_staged_policy() {
    let out_dir = PathBuf::from(env("OUT_DIR"));
    // OUT_DIR is <target>/<profile>/build/<package>-<hash>/out.
    let profile_dir = out_dir
        .ancestors()
        .nth(3)
        .expect("OUT_DIR lies three levels below the profile directory");
    let staged = profile_dir.join("manifest-policy.wasm");
    println!("cargo:rerun-if-changed={}", staged.display());
    match fs::symlink_metadata(&staged) {
        Ok(meta) if meta.file_type().is_file() => {}
        found => {
            let what = match found {
                Ok(_) => "is not a regular file",
                Err(_) => "is missing",
            };
            eprintln!(
                "error: the Debian package's built-in policy {} {what}.\n\
                 Build the package with dist/debian/build-package (it builds the policy for \
                 wasm32-wasip2, stages it there, then runs cargo deb with your arguments).",
                staged.display()
            );
            std::process::exit(1);
        }
    }
}

/// The directories copied, relative to the workspace root. A new policy
/// crate gets them under `vendor/` with the same layout, so relative paths
/// between them (guest-sdk's `wit_bindgen::generate!({ path: "../wit" })`)
/// still hold.
const EMBEDDED_DIRS: [&str; 2] = ["guest-sdk", "wit"];

/// The crate the new policy depends on: its manifest is the one rewritten.
const SDK_DIR: &str = "guest-sdk";

fn main() {
    // Only a release build packages anything: `--all-features` in a debug
    // build (clippy, tests) must not ask for the package's policy.
    if std::env::var_os("CARGO_FEATURE_DEB").is_some()
        && std::env::var("PROFILE").as_deref() == Ok("release")
    {
        require_staged_policy();
    }
    let manifest_dir = PathBuf::from(env("CARGO_MANIFEST_DIR"));
    let root = manifest_dir
        .parent()
        .expect("host/ lives one level below the workspace root")
        .to_path_buf();
    let out_dir = PathBuf::from(env("OUT_DIR"));

    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=../Cargo.toml");
    println!("cargo:rerun-if-changed=../Cargo.lock");
    for dir in EMBEDDED_DIRS {
        // A directory: cargo looks at every file below it, new ones included.
        println!("cargo:rerun-if-changed=../{dir}");
    }

    let workspace: toml::Table = parse(&root.join("Cargo.toml"));
    let sdk_manifest_path = root.join(SDK_DIR).join("Cargo.toml");
    let sdk_manifest_text = read(&sdk_manifest_path);
    let sdk_manifest = resolve_manifest(&sdk_manifest_text, &workspace)
        .unwrap_or_else(|e| panic!("{}: {e}", sdk_manifest_path.display()));
    let resolved: toml::Table = sdk_manifest.parse().unwrap_or_else(|e| {
        panic!("the rewritten guest-sdk manifest is not valid TOML: {e}\n{sdk_manifest}")
    });
    if let Some(at) = find_workspace_key(&toml::Value::Table(resolved.clone()), "") {
        panic!(
            "{}: `{at}` inherits from the workspace in a form host/build.rs does not rewrite; \
             write it as `key.workspace = true` or `key = {{ workspace = true, ... }}`",
            sdk_manifest_path.display()
        );
    }
    let version = resolved
        .get("package")
        .and_then(|p| p.get("version"))
        .and_then(toml::Value::as_str)
        .expect("guest-sdk's manifest has a package version")
        .to_string();
    let generated_manifest = out_dir.join("guest-sdk.Cargo.toml");
    write(&generated_manifest, sdk_manifest.as_bytes());

    let lock = prune_lock(&read(&root.join("Cargo.lock")), &resolved);
    let generated_lock = out_dir.join("Cargo.lock");
    write(&generated_lock, lock.as_bytes());

    // (path in the new crate's vendor/, file to include, executable)
    let mut files: Vec<(String, PathBuf, bool)> = Vec::new();
    for dir in EMBEDDED_DIRS {
        let mut found = Vec::new();
        walk(&root.join(dir), dir, &mut found);
        for (rel, path, executable) in found {
            if rel == format!("{SDK_DIR}/Cargo.toml") {
                files.push((rel, generated_manifest.clone(), false));
            } else {
                files.push((rel, path, executable));
            }
        }
    }
    files.sort();

    let mut code = String::new();
    code.push_str(
        "// @generated by host/build.rs: the guest SDK embedded for `host new-policy`.\n\n",
    );
    writeln!(
        code,
        "/// The embedded guest-sdk's version.\npub(crate) const SDK_VERSION: &str = {version:?};\n"
    )
    .unwrap();
    code.push_str(
        "/// guest-sdk and the WIT contract: (path relative to the workspace root, contents, executable).\n",
    );
    code.push_str("pub(crate) const SDK_FILES: &[(&str, &[u8], bool)] = &[\n");
    for (rel, path, executable) in &files {
        writeln!(
            code,
            "    ({rel:?}, include_bytes!({:?}), {executable}),",
            utf8(path)
        )
        .unwrap();
    }
    code.push_str("];\n\n");
    writeln!(
        code,
        "/// The workspace's `Cargo.lock`, cut to what guest-sdk's dependencies reach.\n\
         pub(crate) const CARGO_LOCK: &str = include_str!({:?});",
        utf8(&generated_lock)
    )
    .unwrap();
    write(&out_dir.join("embedded_sdk.rs"), code.as_bytes());
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("cargo sets {name} for build scripts"))
}

fn utf8(path: &Path) -> &str {
    path.to_str()
        .unwrap_or_else(|| panic!("{} is not UTF-8", path.display()))
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn parse(path: &Path) -> toml::Table {
    read(path)
        .parse()
        .unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
}

/// Writes `contents` unless the file already holds them (an unchanged file
/// keeps its timestamp, so nothing that includes it is rebuilt).
fn write(path: &Path, contents: &[u8]) {
    if fs::read(path).is_ok_and(|old| old == contents) {
        return;
    }
    fs::write(path, contents).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}

/// Every file below `dir` as (`prefix/relative/path`, path, executable),
/// skipping hidden entries, editor backups and a `target/` directory.
fn walk(dir: &Path, prefix: &str, out: &mut Vec<(String, PathBuf, bool)>) {
    let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
    for entry in entries {
        let entry = entry.unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
        let name = entry.file_name();
        let name = name
            .to_str()
            .unwrap_or_else(|| panic!("{}: a file name that is not UTF-8", dir.display()));
        if name.starts_with('.') || name.ends_with('~') || name == "target" {
            continue;
        }
        let path = entry.path();
        let rel = format!("{prefix}/{name}");
        // Follows symbolic links: the copy holds what they point at.
        let meta =
            fs::metadata(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        if meta.is_dir() {
            walk(&path, &rel, out);
        } else if meta.is_file() {
            out.push((rel, path, is_executable(&meta)));
        }
    }
}

#[cfg(unix)]
fn is_executable(meta: &fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn is_executable(_meta: &fs::Metadata) -> bool {
    false
}

/// Where in `value` a `workspace` key is left, as a dotted path.
fn find_workspace_key(value: &toml::Value, at: &str) -> Option<String> {
    let join = |key: &str| {
        if at.is_empty() {
            key.to_string()
        } else {
            format!("{at}.{key}")
        }
    };
    match value {
        toml::Value::Table(table) => table.iter().find_map(|(key, value)| {
            if key == "workspace" {
                Some(join(key))
            } else {
                find_workspace_key(value, &join(key))
            }
        }),
        toml::Value::Array(items) => items.iter().find_map(|v| find_workspace_key(v, at)),
        _ => None,
    }
}

/// `text` (a member's manifest) with its workspace inheritance resolved
/// against `workspace` (the root manifest), line by line: comments, order and
/// every other statement are kept as they are.
fn resolve_manifest(text: &str, workspace: &toml::Table) -> Result<String, String> {
    let ws = workspace
        .get("workspace")
        .and_then(toml::Value::as_table)
        .ok_or("the root manifest has no [workspace] table")?;
    let empty = toml::Table::new();
    let ws_table = |key: &str| {
        ws.get(key)
            .and_then(toml::Value::as_table)
            .unwrap_or(&empty)
    };

    let mut out = String::from(
        "# guest-sdk's manifest as `host new-policy` writes it: the values it\n\
         # inherited from its workspace are filled in, so it builds on its own.\n\n",
    );
    let mut section: Vec<String> = Vec::new();
    let mut statement = String::new();
    for line in text.lines() {
        if statement.is_empty() {
            let trimmed = line.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                out.push_str(line);
                out.push('\n');
                continue;
            }
            if trimmed.starts_with('[') {
                section = header_path(trimmed)?;
                out.push_str(line);
                out.push('\n');
                continue;
            }
        }
        statement.push_str(line);
        statement.push('\n');
        // A statement may span lines (a multi-line array or string): gather
        // lines until they parse.
        let Ok(parsed) = statement.parse::<toml::Table>() else {
            continue;
        };
        let statement = std::mem::take(&mut statement);
        let Some((key, value)) = parsed.iter().next().filter(|_| parsed.len() == 1) else {
            out.push_str(&statement);
            continue;
        };
        let inherits = value
            .as_table()
            .and_then(|t| t.get("workspace"))
            .and_then(toml::Value::as_bool)
            == Some(true);
        let in_deps = section.last().is_some_and(|s| {
            ["dependencies", "dev-dependencies", "build-dependencies"].contains(&s.as_str())
        });
        if section == ["lints"] && key == "workspace" && value.as_bool() == Some(true) {
            // `[lints] workspace = true`: the workspace's lint tables.
            for (tool, lints) in ws_table("lints") {
                writeln!(out, "{} = {lints}", toml_key(tool)).unwrap();
            }
        } else if !inherits {
            out.push_str(&statement);
        } else if section == ["package"] {
            if ["readme", "license-file"].contains(&key.as_str()) {
                // Paths from the workspace root, which the copy has not:
                // metadata for publishing, which the copy is not for.
                continue;
            }
            let inherited = ws_table("package")
                .get(key)
                .ok_or_else(|| format!("`{key}` is not in [workspace.package]"))?;
            writeln!(out, "{} = {inherited}", toml_key(key)).unwrap();
        } else if in_deps {
            let dep = resolve_dependency(key, value.as_table().unwrap(), ws_table("dependencies"))?;
            writeln!(out, "{} = {dep}", toml_key(key)).unwrap();
        } else {
            return Err(format!(
                "`{key}` in [{}] inherits from the workspace, which host/build.rs does not resolve",
                section.join(".")
            ));
        }
    }
    if !statement.is_empty() {
        return Err(format!("cannot parse `{}`", statement.trim()));
    }
    Ok(out)
}

/// The keys of a `[a.b."c"]` header line.
fn header_path(line: &str) -> Result<Vec<String>, String> {
    let parsed: toml::Table = format!("{line}\n")
        .parse()
        .map_err(|e| format!("cannot parse the header `{line}`: {e}"))?;
    let mut path = Vec::new();
    let mut table = &parsed;
    while let Some((key, value)) = table.iter().next() {
        path.push(key.clone());
        match value {
            toml::Value::Table(inner) => table = inner,
            // `[[bin]]`: an array of tables.
            _ => break,
        }
    }
    Ok(path)
}

/// A member's `name = { workspace = true, ... }` merged into the workspace's
/// `[workspace.dependencies]` entry as cargo does (`features` add to the
/// workspace's, `optional` is the member's), as an inline TOML value.
fn resolve_dependency(
    name: &str,
    member: &toml::Table,
    ws_deps: &toml::Table,
) -> Result<String, String> {
    let mut dep = match ws_deps.get(name) {
        Some(toml::Value::String(version)) => {
            let mut t = toml::Table::new();
            t.insert("version".into(), version.clone().into());
            t
        }
        Some(toml::Value::Table(t)) => t.clone(),
        Some(_) => {
            return Err(format!(
                "[workspace.dependencies] `{name}` is neither a version nor a table"
            ))
        }
        None => return Err(format!("`{name}` is not in [workspace.dependencies]")),
    };
    if dep.contains_key("path") {
        return Err(format!(
            "`{name}` is a path dependency of the workspace: a copy of guest-sdk cannot reach it"
        ));
    }
    for (key, value) in member {
        match key.as_str() {
            "workspace" => {}
            "features" => {
                let mut features: Vec<toml::Value> = dep
                    .get("features")
                    .and_then(toml::Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                for feature in value.as_array().into_iter().flatten() {
                    if !features.contains(feature) {
                        features.push(feature.clone());
                    }
                }
                dep.insert("features".into(), toml::Value::Array(features));
            }
            _ => {
                dep.insert(key.clone(), value.clone());
            }
        }
    }
    let version = dep.remove("version");
    match version {
        Some(version) if dep.is_empty() => Ok(version.to_string()),
        // `version` first, as people write it.
        Some(version) => {
            let rest = toml::Value::Table(dep).to_string();
            let rest = rest.trim_start_matches('{').trim_start();
            Ok(format!("{{ version = {version}, {rest}"))
        }
        None => Ok(toml::Value::Table(dep).to_string()),
    }
}

/// `key` as a TOML key: bare when it can be.
fn toml_key(key: &str) -> String {
    if !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        key.to_string()
    } else {
        toml::Value::String(key.to_string()).to_string()
    }
}

/// The entries of `lock` (the workspace's `Cargo.lock`) that guest-sdk's
/// dependencies reach (its dev-dependencies excepted), verbatim and in
/// order. Cargo adds the new policy crate's own entry on its first build.
fn prune_lock(lock: &str, sdk_manifest: &toml::Table) -> String {
    const SEPARATOR: &str = "\n[[package]]\n";
    let mut chunks = lock.split(SEPARATOR);
    let header = chunks.next().unwrap_or_default();
    let blocks: Vec<&str> = chunks.collect();
    let packages: Vec<toml::Table> = blocks
        .iter()
        .map(|block| {
            let entry: toml::Table = block
                .parse()
                .unwrap_or_else(|e| panic!("Cargo.lock: cannot parse an entry: {e}\n{block}"));
            entry
        })
        .collect();
    let field = |i: usize, key: &str| packages[i].get(key).and_then(toml::Value::as_str);
    let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
    for i in 0..packages.len() {
        let name = field(i, "name").expect("Cargo.lock: an entry without a name");
        by_name.entry(name).or_default().push(i);
    }
    // "name", "name version" or "name version (source)".
    let find = |dep: &str| -> usize {
        let mut parts = dep.splitn(3, ' ');
        let name = parts.next().unwrap_or_default();
        let version = parts.next();
        let source = parts
            .next()
            .map(|s| s.trim_start_matches('(').trim_end_matches(')'));
        let candidates = by_name.get(name).map(Vec::as_slice).unwrap_or_default();
        let found: Vec<usize> = candidates
            .iter()
            .copied()
            .filter(|&i| version.is_none_or(|v| field(i, "version") == Some(v)))
            .filter(|&i| source.is_none_or(|s| field(i, "source") == Some(s)))
            .collect();
        match found.as_slice() {
            [i] => *i,
            _ => panic!(
                "Cargo.lock: the dependency `{dep}` names {} entries",
                found.len()
            ),
        }
    };

    // guest-sdk's names for its dev-only dependencies: their entries are
    // needed only to test guest-sdk itself.
    let deps_of = |table: &toml::Table, section: &str| -> BTreeSet<String> {
        table
            .get(section)
            .and_then(toml::Value::as_table)
            .into_iter()
            .flatten()
            .map(|(key, value)| {
                value
                    .get("package")
                    .and_then(toml::Value::as_str)
                    .unwrap_or(key)
                    .to_string()
            })
            .collect()
    };
    let mut needed = deps_of(sdk_manifest, "dependencies");
    needed.extend(deps_of(sdk_manifest, "build-dependencies"));
    for platform in sdk_manifest
        .get("target")
        .and_then(toml::Value::as_table)
        .into_iter()
        .flatten()
        .filter_map(|(_, t)| t.as_table())
    {
        needed.extend(deps_of(platform, "dependencies"));
        needed.extend(deps_of(platform, "build-dependencies"));
    }
    let dev_only: BTreeSet<String> = deps_of(sdk_manifest, "dev-dependencies")
        .difference(&needed)
        .cloned()
        .collect();

    let sdk = (0..packages.len())
        .find(|&i| field(i, "name") == Some("guest-sdk") && field(i, "source").is_none())
        .expect("Cargo.lock has no entry for guest-sdk");
    let mut keep = vec![false; packages.len()];
    keep[sdk] = true;
    let mut queue = VecDeque::from([sdk]);
    while let Some(i) = queue.pop_front() {
        let deps = packages[i]
            .get("dependencies")
            .and_then(toml::Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(toml::Value::as_str);
        for dep in deps {
            let j = find(dep);
            if i == sdk && dev_only.contains(field(j, "name").unwrap_or_default()) {
                continue;
            }
            if !keep[j] {
                keep[j] = true;
                queue.push_back(j);
            }
        }
    }

    let mut out = header.to_string();
    for (block, _) in blocks.iter().zip(&keep).filter(|(_, k)| **k) {
        out.push_str(SEPARATOR);
        out.push_str(block.trim_end_matches('\n'));
        out.push('\n');
    }
    out
}
