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
use std::path::Path;

use anyhow::Context as _;

/// Replaces `path` with `contents`, created with `mode` (before umask is
/// irrelevant: the mode is set explicitly). Parent directories are created.
pub fn write(path: &Path, contents: &[u8], mode: u32) -> anyhow::Result<()> {
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
    let mut file = tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(".tmp")
        .permissions(Permissions::from_mode(mode))
        .tempfile_in(dir)
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
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("syncing {}", dir.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
