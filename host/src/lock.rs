//! The machine-wide run lock: two `host run` processes never interleave
//! their systemctl calls.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

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
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .with_context(|| format!("opening the lock file {}", path.display()))?;
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
                    if !announced {
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
}
