//! Writing a file so that readers see the old contents or the new, never
//! half of either, and nobody can redirect the write.
//!
//! The contents go to a temporary file with an unpredictable name, created
//! with `O_CREAT|O_EXCL` in the target's own directory (so a planted symlink
//! is never followed and the rename stays on one filesystem), are synced,
//! and the file is renamed over the target. On any error the temporary file
//! is removed. The one implementation for reports, metrics, signatures and
//! the compile cache.

use std::fs::Permissions;
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// Replaces `path` with `contents`, created with `mode` (before umask is
/// irrelevant: the mode is set explicitly). Parent directories are created.
pub fn write(path: &Path, contents: &[u8], mode: u32) -> anyhow::Result<()> {
    let (dir, prefix) = prepare(path)?;
    let mut file = tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(".tmp")
        .permissions(Permissions::from_mode(mode))
        .tempfile_in(&dir)
        .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
    // The permissions asked for are filtered by the umask; set them exactly.
    file.as_file()
        .set_permissions(Permissions::from_mode(mode))
        .and_then(|()| file.write_all(contents))
        .and_then(|()| file.as_file().sync_all())
        .with_context(|| format!("writing {}", file.path().display()))?;
    // Dropping the NamedTempFile on error removes it.
    file.persist(path)
        .map_err(|e| e.error)
        .with_context(|| format!("renaming into {}", path.display()))?;
    // The rename is durable only once the directory is: a crash right after
    // must not bring back the old file.
    std::fs::File::open(&dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("syncing {}", dir.display()))?;
    Ok(())
}

/// Checks that `path` can be written as [`write`] writes it: its directory
/// is created if missing, and a temporary file is created there and removed.
/// A directory at `path` is refused (the rename could not replace it).
pub fn probe(path: &Path) -> anyhow::Result<()> {
    if path.is_dir() {
        anyhow::bail!("{} is a directory", path.display());
    }
    let (dir, prefix) = prepare(path)?;
    // Removed when dropped.
    tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(".tmp")
        .tempfile_in(&dir)
        .with_context(|| format!("creating a file in {}", dir.display()))?;
    Ok(())
}

/// Creates the directory of `path` and returns it with the prefix of the
/// temporary files beside `path` (`.NAME.`), which [`remove_stale`] knows.
fn prepare(path: &Path) -> anyhow::Result<(PathBuf, std::ffi::OsString)> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let name = path
        .file_name()
        .with_context(|| format!("{} names no file", path.display()))?;
    let mut prefix = std::ffi::OsString::from(".");
    prefix.push(name);
    prefix.push(".");
    Ok((dir.to_path_buf(), prefix))
}

/// Removes the temporary files [`write`] leaves beside `path` when the
/// process is killed in the middle (`.NAME.XXXXXX.tmp`). Only regular files
/// are removed; a problem is a warning, never an error.
pub fn remove_stale(path: &Path) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return;
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let prefix = format!(".{}.", name.to_string_lossy());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let file_name = file_name.to_string_lossy();
        let stale = file_name.starts_with(&prefix)
            && file_name.ends_with(".tmp")
            && file_name.len() > prefix.len() + ".tmp".len();
        let regular = entry.file_type().is_ok_and(|t| t.is_file());
        if stale && regular {
            match std::fs::remove_file(entry.path()) {
                Ok(()) => tracing::info!(
                    "removed {}, left by an earlier run that was stopped",
                    entry.path().display()
                ),
                Err(e) => tracing::warn!("cannot remove {}: {e}", entry.path().display()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_temporary_files_are_removed_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let report = dir.path().join("report.json");
        for name in [
            ".report.json.a1B2c3.tmp",
            ".report.json.zz.tmp",
            ".other.json.x.tmp",
            "report.json",
            ".report.json.tmp",
        ] {
            std::fs::write(dir.path().join(name), "x").unwrap();
        }
        remove_stale(&report);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [".other.json.x.tmp", ".report.json.tmp", "report.json"]
        );
    }

    #[test]
    fn probing_finds_what_cannot_be_written_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        probe(&dir.path().join("sub/report.json")).unwrap();
        assert_eq!(
            std::fs::read_dir(dir.path().join("sub")).unwrap().count(),
            0
        );
        std::fs::write(dir.path().join("file"), "x").unwrap();
        assert!(probe(&dir.path().join("file/report.json")).is_err());
        assert!(probe(&dir.path().join("sub")).is_err(), "a directory");
    }

    #[test]
    fn replaces_the_file_with_the_mode_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("report.json");
        std::fs::write(&target, "old").unwrap();
        write(&target, b"new", 0o640).unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        let mode = std::fs::metadata(&target).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o640);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [std::ffi::OsString::from("report.json")]);
    }

    #[test]
    fn a_symlink_planted_where_temporary_files_go_is_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        // A guessable name of the old scheme, pointing at the victim.
        let planted = dir
            .path()
            .join(format!(".m.prom.{}.tmp", std::process::id()));
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        write(&dir.path().join("m.prom"), b"metrics", 0o644).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    }

    #[test]
    fn a_failed_write_keeps_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out");
        // A directory in the way of the rename.
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("keep"), "x").unwrap();
        assert!(write(&target, b"new", 0o644).is_err());
        assert!(target.join("keep").exists());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
