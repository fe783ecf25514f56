//! The machine-wide run lock: two `host run` processes never interleave
//! their systemctl calls.
//!
//! The lock file lives in a directory only root (or the running user) can
//! change: by default `/run/policy-host/`, created 0700 (the shipped unit's
//! `RuntimeDirectory=`). Anyone who can open the file can take the `flock`,
//! even through a read-only descriptor, and hold it forever; anyone who can
//! write its directory can plant a symbolic link there. So the directory is
//! checked with [`crate::fs_safety`] (never a symbolic link, owned by root or
//! the running user, writable by no one else, nor are its parents), the file
//! is opened without following a symbolic link, must be a regular file owned
//! by the running user with one link, and is kept at mode 0600.

use std::fs::{File, OpenOptions, Permissions, TryLockError};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

use crate::fs_safety;

/// How to behave when another run holds the lock.
#[derive(Debug, Clone, Copy)]
pub enum Wait {
    /// Fail at once (`--no-wait`).
    No,
    /// Wait up to this long.
    Up(Duration),
}

/// The held lock: an exclusive `flock` on the lock file, released when dropped
/// (or when the process dies, so a crash never leaves the machine locked).
#[derive(Debug)]
pub struct RunLock {
    _file: File,
    path: PathBuf,
}

impl RunLock {
    /// Takes the lock, waiting per `wait`. Says on stderr who holds it while waiting.
    pub fn acquire(path: &Path, wait: Wait) -> anyhow::Result<Self> {
        Self::take(path, wait, true)
    }

    /// [`Self::acquire`] without a word while waiting: for recording what
    /// a run that could not happen came to, after its error, whose message
    /// is the one the operator reads.
    pub fn acquire_quietly(path: &Path, wait: Wait) -> anyhow::Result<Self> {
        Self::take(path, wait, false)
    }

    fn take(path: &Path, wait: Wait, say: bool) -> anyhow::Result<Self> {
        let mut file = open(path)?;
        let started = Instant::now();
        let mut announced = false;
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(TryLockError::WouldBlock) => {}
                Err(TryLockError::Error(e)) => {
                    return Err(e).with_context(|| format!("locking {}", path.display()))
                }
            }
            if let Some(signal) = crate::interrupt::received() {
                bail!(
                    "interrupted by {} while waiting for {}; nothing was changed",
                    crate::interrupt::name(signal),
                    path.display()
                );
            }
            let holder = holder(&mut file);
            match wait {
                Wait::No => bail!(
                    "another policy run holds {} ({holder}); not waiting (--no-wait)",
                    path.display()
                ),
                Wait::Up(limit) if started.elapsed() >= limit => bail!(
                    "another policy run still holds {} ({holder}) after {}s; giving up",
                    path.display(),
                    limit.as_secs_f64()
                ),
                Wait::Up(_) => {
                    if !announced && say {
                        tracing::warn!("waiting for {} held by {holder}", path.display());
                        announced = true;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
        // Record who holds it, for the message of the next one to wait.
        file.set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| writeln!(file, "pid {}", std::process::id()))
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(Self {
            _file: file,
            path: path.to_owned(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Opens (creating) the lock file in its checked directory; see the module
/// documentation.
fn open(path: &Path) -> anyhow::Result<File> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs_safety::private_dir(dir)
        .with_context(|| format!("refusing the lock directory {}", dir.display()))?;
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NOCTTY | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| {
            // O_NOFOLLOW says ELOOP for a symbolic link.
            if e.raw_os_error() == Some(libc::ELOOP) {
                anyhow::anyhow!("it is a symbolic link")
            } else {
                e.into()
            }
        })
        .with_context(|| format!("refusing the lock file {}", path.display()))?;
    let meta = file
        .metadata()
        .with_context(|| format!("checking the lock file {}", path.display()))?;
    let problem = if !meta.is_file() {
        Some("it is not a regular file".to_owned())
    } else if meta.uid() != fs_safety::euid() {
        Some(format!(
            "it is owned by uid {}, not by the running user (uid {})",
            meta.uid(),
            fs_safety::euid()
        ))
    } else if meta.nlink() != 1 {
        Some(format!("it has {} hard links", meta.nlink()))
    } else {
        None
    };
    if let Some(problem) = problem {
        bail!("refusing the lock file {}: {problem}", path.display());
    }
    // Nobody else may open it (a read-only descriptor is enough to hold a
    // flock): tighten a file left by an older version. On the descriptor,
    // which is the checked file.
    if meta.mode() & 0o077 != 0 {
        file.set_permissions(Permissions::from_mode(0o600))
            .with_context(|| format!("making {} private", path.display()))?;
    }
    Ok(file)
}

fn holder(file: &mut File) -> String {
    let mut text = String::new();
    let _ = file
        .rewind()
        .and_then(|()| file.take(64).read_to_string(&mut text));
    // Anyone who can write the file wrote this: shown escaped, on one line.
    match text.trim() {
        "" => "an unknown process".to_owned(),
        who => crate::text::one_line(who).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_holder_fails_without_waiting_and_names_the_first() {
        let scratch = tempfile::tempdir().unwrap();
        let path = scratch.path().join("policy-host.lock");
        let first = RunLock::acquire(&path, Wait::No).unwrap();
        // flock locks belong to the open file description, so a second open
        // in the same process contends like another process would.
        let err = RunLock::acquire(&path, Wait::No).unwrap_err().to_string();
        assert!(
            err.contains(&format!("pid {}", std::process::id())),
            "{err}"
        );
        let err = RunLock::acquire(&path, Wait::Up(Duration::from_millis(200)))
            .unwrap_err()
            .to_string();
        assert!(err.contains("giving up"), "{err}");
        drop(first);
        RunLock::acquire(&path, Wait::No).expect("free again once dropped");
    }

    fn scratch() -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix("policy-host-lock-")
            .tempdir()
            .unwrap()
    }

    fn mode_of(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().mode() & 0o7777
    }

    #[test]
    fn a_missing_lock_directory_is_created_private_and_the_file_0600() {
        let scratch = scratch();
        let dir = scratch.path().join("policy-host");
        let path = dir.join("lock");
        let lock = RunLock::acquire(&path, Wait::No).unwrap();
        assert_eq!(mode_of(&dir), 0o700);
        assert_eq!(mode_of(&path), 0o600);
        drop(lock);
        // A lock file an older version left readable is made private.
        std::fs::set_permissions(&path, Permissions::from_mode(0o644)).unwrap();
        RunLock::acquire(&path, Wait::No).unwrap();
        assert_eq!(mode_of(&path), 0o600);
    }

    #[test]
    fn a_symlink_at_the_lock_path_is_refused_and_its_target_untouched() {
        let scratch = scratch();
        let victim = scratch.path().join("victim");
        std::fs::write(&victim, "precious\n").unwrap();
        let path = scratch.path().join("lock");
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        let err = format!("{:#}", RunLock::acquire(&path, Wait::No).unwrap_err());
        assert!(err.contains("symbolic link"), "{err}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
        // A hard link to it (planted where the link was) is refused too.
        std::fs::remove_file(&path).unwrap();
        std::fs::hard_link(&victim, &path).unwrap();
        let err = format!("{:#}", RunLock::acquire(&path, Wait::No).unwrap_err());
        assert!(err.contains("2 hard links"), "{err}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    }

    #[test]
    fn a_lock_directory_others_can_write_or_a_symlinked_one_is_refused() {
        let scratch = scratch();
        let open = scratch.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, Permissions::from_mode(0o1777)).unwrap();
        let err = format!(
            "{:#}",
            RunLock::acquire(&open.join("lock"), Wait::No).unwrap_err()
        );
        assert!(err.contains("refusing the lock directory"), "{err}");
        assert!(
            err.contains("writable by group or others (mode 1777)"),
            "{err}"
        );
        assert!(!open.join("lock").exists());

        let real = scratch.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::fs::set_permissions(&real, Permissions::from_mode(0o755)).unwrap();
        let link = scratch.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let err = format!(
            "{:#}",
            RunLock::acquire(&link.join("lock"), Wait::No).unwrap_err()
        );
        assert!(err.contains("is a symbolic link"), "{err}");
        assert_eq!(mode_of(&real), 0o755, "never chmodded");
    }
}
