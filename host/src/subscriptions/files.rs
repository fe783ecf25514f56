//! `file#PATH`: what a reader of PATH sees, as one fingerprint. Links to
//! the path are followed (an alternatives-style switch is a change); inside
//! a directory, a link is an entry whose target is part of the fingerprint,
//! never followed (it could lead anywhere). Only regular files, directories
//! and links are read: a FIFO, a socket or a device is an error naming it,
//! and is never opened for reading.

use std::fs::{self, File, Metadata};
use std::io::{ErrorKind, Read};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
use std::path::Path;

use sha2::{Digest, Sha256};

use super::links::Resolved;
use super::{Budget, Fingerprint, WatchError, WatchPaths};
use crate::text::hex;

/// The fingerprint of `path` (checked by [`WatchPaths::check`]) as
/// `resolved` by [`links::resolve`](super::links::resolve): absent, a
/// regular file's content, or everything below a directory.
pub fn fingerprint(
    path: &Path,
    resolved: &Resolved,
    watch: &WatchPaths,
    budget: &mut Budget,
) -> Result<Fingerprint, WatchError> {
    let shown = path.display();
    // Missing, or a link to nothing: a reader sees nothing.
    if !resolved.exists {
        return Ok(Fingerprint::Absent);
    }
    let resolved = resolved.path.clone();
    if !watch.allows(&resolved) {
        return Err(WatchError(format!(
            "file#{shown}: resolves to {}, which is outside watch_paths or never read",
            resolved.display()
        )));
    }
    let meta =
        fs::symlink_metadata(&resolved).map_err(|e| WatchError(format!("file#{shown}: {e}")))?;
    let mut reference = Reference {
        name: format!("file#{shown}"),
        bytes: 0,
        entries: 0,
    };
    if meta.is_dir() {
        let mut hasher = Sha256::new();
        reference.directory(&resolved, Path::new(""), &mut hasher, budget)?;
        Ok(Fingerprint::Directory {
            sha256: hex(&hasher.finalize()),
        })
    } else if meta.is_file() {
        reference.visit(budget)?;
        let digest = reference.file(&resolved, budget)?;
        Ok(Fingerprint::File {
            sha256: hex(&digest),
        })
    } else {
        Err(WatchError(format!(
            "file#{shown}: {} is {}; only regular files, directories and symbolic links are read",
            resolved.display(),
            special_kind(&meta)
        )))
    }
}

/// One reference being read: what it has used of the budget so far.
struct Reference {
    name: String,
    bytes: u64,
    entries: u64,
}

impl Reference {
    fn visit(&mut self, budget: &mut Budget) -> Result<(), WatchError> {
        self.entries += 1;
        budget.visit(&self.name, self.entries)
    }

    /// The SHA-256 of a regular file's content. Opened without following a
    /// link and without blocking, then checked again: a file swapped for a
    /// FIFO after it was looked at is refused, never waited on.
    fn file(&mut self, path: &Path, budget: &mut Budget) -> Result<[u8; 32], WatchError> {
        let name = self.name.clone();
        let fail = |e: std::io::Error| WatchError(format!("{name}: {}: {e}", path.display()));
        let mut file = File::options()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(path)
            .map_err(fail)?;
        let meta = file.metadata().map_err(fail)?;
        if !meta.is_file() {
            return Err(WatchError(format!(
                "{}: {} is {}; only regular files, directories and symbolic links are read",
                self.name,
                path.display(),
                special_kind(&meta)
            )));
        }
        let mut hasher = Sha256::new();
        let mut buffer = vec![0; 64 << 10];
        loop {
            let n = match file.read(&mut buffer) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(fail(e)),
            };
            self.bytes += n as u64;
            budget.read(&self.name, n as u64, self.bytes)?;
            hasher.update(&buffer[..n]);
        }
        Ok(hasher.finalize().into())
    }

    /// Feeds `hasher` with every entry below `dir` (`relative` to the
    /// reference's directory), in name order: its name, its type, and its
    /// content (a file's digest, a link's target).
    fn directory(
        &mut self,
        dir: &Path,
        relative: &Path,
        hasher: &mut Sha256,
        budget: &mut Budget,
    ) -> Result<(), WatchError> {
        self.visit(budget)?;
        let name = self.name.clone();
        let fail = |e: std::io::Error| WatchError(format!("{name}: {}: {e}", dir.display()));
        let mut names: Vec<_> = fs::read_dir(dir)
            .map_err(fail)?
            .map(|entry| entry.map(|e| e.file_name()))
            .collect::<Result<_, _>>()
            .map_err(fail)?;
        names.sort();
        for name in names {
            let path = dir.join(&name);
            let relative = relative.join(&name);
            let meta = fs::symlink_metadata(&path).map_err(fail)?;
            // Length-prefixed, so no two trees feed the same bytes.
            let entry = relative.as_os_str().as_bytes();
            hasher.update((entry.len() as u64).to_le_bytes());
            hasher.update(entry);
            if meta.is_dir() {
                hasher.update(b"d");
                self.directory(&path, &relative, hasher, budget)?;
            } else if meta.is_file() {
                self.visit(budget)?;
                hasher.update(b"f");
                hasher.update(self.file(&path, budget)?);
            } else if meta.file_type().is_symlink() {
                self.visit(budget)?;
                let target = fs::read_link(&path).map_err(fail)?;
                let target = target.as_os_str().as_bytes();
                hasher.update(b"l");
                hasher.update((target.len() as u64).to_le_bytes());
                hasher.update(target);
            } else {
                return Err(WatchError(format!(
                    "{}: {} is {}; only regular files, directories and symbolic links are read",
                    self.name,
                    path.display(),
                    special_kind(&meta)
                )));
            }
        }
        Ok(())
    }
}

/// What a file that is not read is, for the error.
fn special_kind(meta: &Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() || t.is_char_device() {
        "a device"
    } else {
        "not a regular file"
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;
    use std::time::{Duration, Instant};

    use super::super::links::resolve;
    use super::super::Caps;
    use super::*;

    fn tree() -> (tempfile::TempDir, WatchPaths) {
        let dir = tempfile::tempdir().unwrap();
        let watch = WatchPaths::new(&[dir.path().display().to_string()]).unwrap();
        (dir, watch)
    }

    fn print(path: &Path, watch: &WatchPaths) -> Result<Fingerprint, WatchError> {
        let resolved = resolve(path).map_err(|refused| WatchError(refused.0))?;
        fingerprint(
            path,
            &resolved,
            watch,
            &mut Budget::new(Caps::DEFAULT, None),
        )
    }

    #[test]
    fn a_file_is_its_content_and_a_missing_one_is_absent() {
        let (dir, watch) = tree();
        let conf = dir.path().join("app.conf");
        assert_eq!(print(&conf, &watch).unwrap(), Fingerprint::Absent);
        fs::write(&conf, "a = 1\n").unwrap();
        let first = print(&conf, &watch).unwrap();
        assert!(matches!(first, Fingerprint::File { .. }));
        assert_eq!(
            print(&conf, &watch).unwrap(),
            first,
            "the same content, the same print"
        );
        // Mode and owner are not content.
        fs::set_permissions(&conf, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
        assert_eq!(print(&conf, &watch).unwrap(), first);
        fs::write(&conf, "a = 2\n").unwrap();
        assert_ne!(print(&conf, &watch).unwrap(), first);
    }

    #[test]
    fn a_link_is_followed_so_switching_it_is_a_change() {
        let (dir, watch) = tree();
        fs::write(dir.path().join("one"), "1").unwrap();
        fs::write(dir.path().join("two"), "2").unwrap();
        let link = dir.path().join("current");
        symlink("one", &link).unwrap();
        let before = print(&link, &watch).unwrap();
        fs::remove_file(&link).unwrap();
        symlink("two", &link).unwrap();
        assert_ne!(print(&link, &watch).unwrap(), before);
        fs::remove_file(&link).unwrap();
        symlink("nowhere", &link).unwrap();
        assert_eq!(
            print(&link, &watch).unwrap(),
            Fingerprint::Absent,
            "a dangling link is nothing"
        );
    }

    #[test]
    fn a_link_out_of_watch_paths_is_refused() {
        let (dir, watch) = tree();
        let link = dir.path().join("escape");
        symlink("/proc/self/environ", &link).unwrap();
        let error = print(&link, &watch).unwrap_err().0;
        assert!(
            error.contains("outside watch_paths or never read"),
            "{error}"
        );
    }

    #[test]
    fn a_directory_covers_names_types_contents_and_link_targets_below_it() {
        let (dir, watch) = tree();
        let conf_d = dir.path().join("conf.d");
        fs::create_dir_all(conf_d.join("sub")).unwrap();
        fs::write(conf_d.join("a.conf"), "a").unwrap();
        let prints = |watch: &WatchPaths| print(&conf_d, watch).unwrap();
        let mut seen = vec![prints(&watch)];
        let mut step = |change: &dyn Fn()| {
            change();
            let now = prints(&watch);
            assert!(!seen.contains(&now), "{seen:?} already holds {now:?}");
            seen.push(now);
        };
        step(&|| fs::write(conf_d.join("b.conf"), "b").unwrap());
        step(&|| fs::write(conf_d.join("sub/deep.conf"), "deep").unwrap());
        step(&|| fs::write(conf_d.join("sub/deep.conf"), "deeper").unwrap());
        step(&|| fs::rename(conf_d.join("b.conf"), conf_d.join("c.conf")).unwrap());
        step(&|| symlink("a.conf", conf_d.join("link")).unwrap());
        step(&|| {
            fs::remove_file(conf_d.join("link")).unwrap();
            symlink("c.conf", conf_d.join("link")).unwrap();
        });
        step(&|| fs::remove_file(conf_d.join("c.conf")).unwrap());
        // An empty file and an empty directory of one name differ.
        step(&|| fs::write(conf_d.join("x"), "").unwrap());
        step(&|| {
            fs::remove_file(conf_d.join("x")).unwrap();
            fs::create_dir(conf_d.join("x")).unwrap();
        });
    }

    #[test]
    fn special_files_are_refused_by_name_and_never_opened() {
        let (dir, watch) = tree();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: `c` is a valid NUL-terminated path for the call's duration.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let started = Instant::now();
        let error = print(&fifo, &watch).unwrap_err().0;
        assert!(error.contains("is a FIFO"), "{error}");
        // Inside a directory too; and a FIFO with no writer never blocks.
        let error = print(dir.path(), &watch).unwrap_err().0;
        assert!(error.contains("fifo is a FIFO"), "{error}");
        assert!(started.elapsed() < Duration::from_secs(5));
        let socket = dir.path().join("sock");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        fs::remove_file(&fifo).unwrap();
        assert!(print(&socket, &watch)
            .unwrap_err()
            .0
            .contains("is a socket"));
    }

    #[test]
    fn caps_stop_a_reference_that_holds_too_much() {
        let (dir, watch) = tree();
        let big = dir.path().join("big");
        fs::write(&big, vec![0u8; 4096]).unwrap();
        let caps = Caps {
            bytes_per_reference: 1000,
            ..Caps::DEFAULT
        };
        let error = fingerprint(
            &big,
            &resolve(&big).unwrap(),
            &watch,
            &mut Budget::new(caps, None),
        )
        .unwrap_err()
        .0;
        assert!(error.contains("more than 1000 bytes"), "{error}");
        for i in 0..20 {
            fs::write(dir.path().join(format!("f{i}")), "x").unwrap();
        }
        let caps = Caps {
            entries_per_reference: 10,
            ..Caps::DEFAULT
        };
        let error = fingerprint(
            dir.path(),
            &resolve(dir.path()).unwrap(),
            &watch,
            &mut Budget::new(caps, None),
        )
        .unwrap_err()
        .0;
        assert!(error.contains("more than 10 entries"), "{error}");
    }
}
