//! A record the host keeps between runs in its root-only state directory
//! (`versions.json`, `subscriptions.json`): found in a directory checked to
//! be root's alone, read whole, and refused loudly when it is too large or
//! damaged, never taken as empty; written atomically, root's alone.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::{atomic_file, fs_safety};

/// Reads `dir/name` as a `T`: `None` when the file does not exist yet.
/// `what` names the record in errors ("a version record"), and `instead`
/// says what refusing spares the operator and how to start afresh.
pub fn read<T: DeserializeOwned>(
    dir: &Path,
    name: &str,
    max_bytes: u64,
    what: &str,
    instead: &str,
) -> anyhow::Result<(PathBuf, Option<T>)> {
    // Root-only, checked from `/` down without following anyone else's
    // links: whoever can write here could rewrite what the host remembers.
    fs_safety::private_dir(dir)
        .with_context(|| format!("refusing the state directory {}", dir.display()))?;
    let path = dir.join(name);
    let record = match std::fs::metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        Ok(meta) if meta.len() > max_bytes => bail!(
            "{} is {} bytes, not {what}; refusing to run without it ({instead})",
            path.display(),
            meta.len()
        ),
        Ok(_) => {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            Some(
                serde_json::from_str(&text)
                    .with_context(|| format!("{} is damaged; {instead}", path.display()))?,
            )
        }
    };
    Ok((path, record))
}

/// Writes `record` to `path` as JSON, atomically (0600), synced with its
/// directory.
pub fn write<T: Serialize>(path: &Path, record: &T) -> anyhow::Result<()> {
    let json = serde_json::to_string_pretty(record)? + "\n";
    atomic_file::write(path, json.as_bytes(), 0o600)
        .with_context(|| format!("writing {}", path.display()))
}
