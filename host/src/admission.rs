//! What a policy file must pass before anything is compiled or run: found
//! (directories expanded), read once, and its signature verified over the
//! exact bytes that will be used; the settings document likewise read once.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};

use crate::report::SignatureReport;
use crate::signature::Trust;

/// The policy files to run: files as given, directories expanded to their
/// `*.wasm` files in name order.
pub fn policy_files(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(path)
                .with_context(|| format!("reading policy directory {}", path.display()))?
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "wasm") && p.is_file())
                .collect();
            if found.is_empty() {
                bail!("policy directory {} holds no *.wasm policy", path.display());
            }
            found.sort();
            files.extend(found);
        } else {
            files.push(path.clone());
        }
    }
    Ok(files)
}

/// A policy read and admitted: its bytes, and what was checked of them.
pub struct Admitted {
    pub path: PathBuf,
    pub bytes: Vec<u8>,
    pub signature: SignatureReport,
}

/// Reads `path` once and verifies those bytes, or, with `allow_unsigned`,
/// records that nothing was verified.
pub fn admit(path: &Path, trust: &Trust, allow_unsigned: bool) -> anyhow::Result<Admitted> {
    let bytes =
        std::fs::read(path).with_context(|| format!("reading policy {}", path.display()))?;
    let signature = if allow_unsigned {
        SignatureReport::unverified(&format!(
            "policy signature NOT verified (--allow-unsigned) for {}; do not use this in production",
            display_name(path)
        ))
    } else {
        SignatureReport::verified(
            trust
                .verify(path, &bytes)
                .with_context(|| format!("refusing policy {}", path.display()))?,
        )
    };
    Ok(Admitted {
        path: path.to_owned(),
        bytes,
        signature,
    })
}

/// The settings document, as text.
pub fn read_settings(path: &Path) -> anyhow::Result<String> {
    let bytes =
        std::fs::read(path).with_context(|| format!("reading settings {}", path.display()))?;
    String::from_utf8(bytes)
        .with_context(|| format!("reading settings {}: not UTF-8 text", path.display()))
}

/// A policy's name in reports: its file name.
pub fn display_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}
