//! A record the host keeps between runs in its root-only state directory
//! (`versions.json`, `subscriptions.json`): found in a directory checked to
//! be root's alone, read whole, and refused loudly when it is too large or
//! damaged, never taken as empty; written atomically, root's alone.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::{atomic_file, fs_safety};

/// A record that says which format it is in, so that a later host can
/// migrate it and this one refuses a format it does not read.
pub trait Versioned: DeserializeOwned {
    /// The format this host reads and writes.
    const FORMAT: u32;
    /// The format the record says it is in.
    fn format(&self) -> u32;
    /// The record of a machine where nothing was recorded yet.
    fn empty() -> Self;
}

/// Reads `dir/name` as a `T` of this host's format: the empty record when
/// the file does not exist yet, an error when it is damaged, too large or
/// of another format ([`read`] says how).
pub fn open<T: Versioned>(
    dir: &Path,
    name: &str,
    max_bytes: u64,
    what: &str,
    instead: &str,
) -> anyhow::Result<(PathBuf, T)> {
    let (path, record) = read::<T>(dir, name, max_bytes, what, instead)?;
    let record = record.unwrap_or_else(T::empty);
    if record.format() > T::FORMAT {
        // A newer host wrote it, and this one was installed over it (a
        // package downgrade): say so, and what to do, rather than guess.
        bail!(
            "{} has format {}, which a newer policy-host wrote; this host reads format {} and \
             will not guess at it, so nothing ran: install the newer policy-host again ({instead})",
            path.display(),
            record.format(),
            T::FORMAT
        );
    }
    if record.format() != T::FORMAT {
        bail!(
            "{} has format {}, this host reads format {}; {instead}",
            path.display(),
            record.format(),
            T::FORMAT
        );
    }
    Ok((path, record))
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize, PartialEq)]
    struct Notes {
        format: u32,
        notes: Vec<String>,
    }

    impl Versioned for Notes {
        const FORMAT: u32 = 2;
        fn format(&self) -> u32 {
            self.format
        }
        fn empty() -> Self {
            Notes {
                format: 2,
                notes: Vec::new(),
            }
        }
    }

    fn state_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        dir
    }

    fn open_notes(dir: &Path) -> anyhow::Result<Notes> {
        open::<Notes>(dir, "notes.json", 1 << 10, "a note record", "restore it").map(|(_, n)| n)
    }

    #[test]
    fn a_missing_record_is_empty_and_another_format_is_refused() {
        let dir = state_dir();
        assert_eq!(open_notes(dir.path()).unwrap(), Notes::empty());
        let path = dir.path().join("notes.json");
        std::fs::write(&path, r#"{"format": 2, "notes": ["a"]}"#).unwrap();
        assert_eq!(open_notes(dir.path()).unwrap().notes, ["a"]);
        std::fs::write(&path, r#"{"format": 3, "notes": []}"#).unwrap();
        let error = format!("{:#}", open_notes(dir.path()).unwrap_err());
        assert_eq!(
            error,
            format!(
                "{} has format 3, which a newer policy-host wrote; this host reads format 2 and \
                 will not guess at it, so nothing ran: install the newer policy-host again \
                 (restore it)",
                path.display()
            )
        );
        std::fs::write(&path, r#"{"format": 1, "notes": []}"#).unwrap();
        let error = format!("{:#}", open_notes(dir.path()).unwrap_err());
        assert_eq!(
            error,
            format!(
                "{} has format 1, this host reads format 2; restore it",
                path.display()
            )
        );
        std::fs::write(&path, "{").unwrap();
        let error = format!("{:#}", open_notes(dir.path()).unwrap_err());
        assert!(error.contains("is damaged; restore it"), "{error}");
    }
}
