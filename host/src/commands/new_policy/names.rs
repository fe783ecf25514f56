//! The new crate's name: taken from the directory or given, and checked as
//! cargo and crates.io would check it.

use std::ffi::OsStr;
use std::fs;
use std::path::Path;

use anyhow::{anyhow, bail, Context as _};

/// The crate name taken from the directory's last component.
pub(super) fn name_from_dir(dir: &Path) -> anyhow::Result<String> {
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
pub(super) fn validate_crate_name(name: &str) -> Result<(), String> {
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
