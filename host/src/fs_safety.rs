//! Checking, before a directory or file is trusted, that nobody but root or
//! the running user can change what its path names (as OpenSSH's
//! `StrictModes` does for `authorized_keys`).
//!
//! [`check`] walks the path from `/` with `lstat`, one component at a time,
//! as the kernel resolves it, and never changes anything. Every directory on
//! the way must be owned by root or the running user and writable by no one
//! else, unless it has the sticky bit (like `/tmp`: others may add entries
//! there, but not replace ours, and the next component is checked to be
//! ours). A symbolic link on the way is followed only if root or the running
//! user owns it; the last component may be refused when it is one. The object
//! itself must be of the expected kind, owned by root or the running user,
//! and writable by neither group nor others.
//!
//! After a successful check only root or the running user can change the
//! path, so using it by name afterwards is not a race anyone else can win.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fmt;
use std::fs::Metadata;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

/// Symbolic links followed in one path, as the kernel's limit (`ELOOP`).
const MAX_LINKS: u32 = 40;

/// The permission bits that let group or others write.
const GROUP_OTHER_WRITE: u32 = 0o022;
const STICKY: u32 = 0o1000;

/// The effective user id of this process.
pub fn euid() -> u32 {
    // SAFETY: geteuid takes no arguments, touches no memory and cannot fail.
    unsafe { libc::geteuid() }
}

/// What the path must name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File,
}

/// What to do when the last component is a symbolic link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LastLink {
    /// Refuse it: the path must name the object itself (a directory the host
    /// creates and writes into).
    Refuse,
    /// Follow it, checking the link and everything it leads to (a file the
    /// operator may have linked into place).
    Follow,
}

/// What is wrong, about one component of the path.
#[derive(Debug)]
pub enum Problem {
    Missing,
    Symlink,
    NotDirectory,
    NotFile,
    Owner {
        uid: u32,
        euid: u32,
    },
    Writable {
        mode: u32,
    },
    TooManyLinks,
    Io(io::Error),
    /// [`private_dir`] could not create it.
    Create(io::Error),
}

/// A path that is not safe to trust: `path` is the component at fault (the
/// checked path itself, or one of its parents or links).
#[derive(Debug)]
pub struct Unsafe {
    pub path: PathBuf,
    pub problem: Problem,
}

impl Unsafe {
    /// A component does not exist (every one before it passed).
    pub fn is_missing(&self) -> bool {
        matches!(self.problem, Problem::Missing)
    }
}

impl fmt::Display for Unsafe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path.display();
        match &self.problem {
            Problem::Missing => write!(f, "{path} does not exist"),
            Problem::Symlink => write!(f, "{path} is a symbolic link"),
            Problem::NotDirectory => write!(f, "{path} is not a directory"),
            Problem::NotFile => write!(f, "{path} is not a regular file"),
            Problem::Owner { uid, euid } if *euid == 0 => {
                write!(f, "{path} is owned by uid {uid}, not by root")
            }
            Problem::Owner { uid, euid } => write!(
                f,
                "{path} is owned by uid {uid}, neither by root nor by the running user (uid {euid})"
            ),
            Problem::Writable { mode } => {
                write!(f, "{path} is writable by group or others (mode {mode:o})")
            }
            Problem::TooManyLinks => write!(f, "{path}: too many levels of symbolic links"),
            Problem::Io(e) => write!(f, "{path} cannot be checked: {e}"),
            Problem::Create(e) => write!(f, "{path} cannot be created: {e}"),
        }
    }
}

impl std::error::Error for Unsafe {}

fn fail<T>(path: &Path, problem: Problem) -> Result<T, Unsafe> {
    Err(Unsafe {
        path: path.to_owned(),
        problem,
    })
}

fn lstat(path: &Path) -> Result<Metadata, Unsafe> {
    std::fs::symlink_metadata(path).or_else(|e| {
        let problem = if e.kind() == io::ErrorKind::NotFound {
            Problem::Missing
        } else {
            Problem::Io(e)
        };
        fail(path, problem)
    })
}

fn owned(path: &Path, meta: &Metadata, euid: u32) -> Result<(), Unsafe> {
    let uid = meta.uid();
    if uid == 0 || uid == euid {
        Ok(())
    } else {
        fail(path, Problem::Owner { uid, euid })
    }
}

/// A directory on the way to the object.
fn passable(path: &Path, meta: &Metadata, euid: u32) -> Result<(), Unsafe> {
    if !meta.is_dir() {
        return fail(path, Problem::NotDirectory);
    }
    owned(path, meta, euid)?;
    let mode = meta.mode();
    if mode & GROUP_OTHER_WRITE != 0 && mode & STICKY == 0 {
        return fail(
            path,
            Problem::Writable {
                mode: mode & 0o7777,
            },
        );
    }
    Ok(())
}

/// One object, not followed if it is a link: of `kind`, owned by root or
/// the running user, writable by neither group nor others (the sticky bit
/// excuses nothing here). Its parents are not looked at: for entries of a
/// directory that already passed [`check`].
pub fn check_object(path: &Path, kind: Kind) -> Result<(), Unsafe> {
    let meta = lstat(path)?;
    object(path, &meta, kind, euid())
}

fn object(path: &Path, meta: &Metadata, kind: Kind, euid: u32) -> Result<(), Unsafe> {
    if meta.file_type().is_symlink() {
        return fail(path, Problem::Symlink);
    }
    match kind {
        Kind::Dir if !meta.is_dir() => return fail(path, Problem::NotDirectory),
        Kind::File if !meta.is_file() => return fail(path, Problem::NotFile),
        _ => {}
    }
    owned(path, meta, euid)?;
    if meta.permissions().mode() & GROUP_OTHER_WRITE != 0 {
        return fail(
            path,
            Problem::Writable {
                mode: meta.mode() & 0o7777,
            },
        );
    }
    Ok(())
}

/// Checks `path` and everything it depends on, from `/` (a relative path is
/// taken from the current directory). See the module documentation.
pub fn check(path: &Path, kind: Kind, last: LastLink) -> Result<(), Unsafe> {
    let absolute = if path.is_absolute() {
        path.to_owned()
    } else {
        std::env::current_dir()
            .map_err(|e| Unsafe {
                path: path.to_owned(),
                problem: Problem::Io(e),
            })?
            .join(path)
    };
    let euid = euid();
    let mut pending: VecDeque<OsString> = names(&absolute).collect();
    // `at` never holds a symbolic link, so its parent is its real parent.
    let mut at = PathBuf::from("/");
    passable(&at, &lstat(&at)?, euid)?;
    let mut links = 0;
    while let Some(name) = pending.pop_front() {
        if name == ".." {
            at.pop();
            continue;
        }
        let next = at.join(&name);
        let meta = lstat(&next)?;
        let is_last = pending.is_empty();
        if meta.file_type().is_symlink() {
            if is_last && last == LastLink::Refuse {
                return fail(&next, Problem::Symlink);
            }
            // Only its owner (or root) can replace a link in a directory
            // that passed: the directory is ours, or sticky.
            owned(&next, &meta, euid)?;
            links += 1;
            if links > MAX_LINKS {
                return fail(&next, Problem::TooManyLinks);
            }
            let target = std::fs::read_link(&next).or_else(|e| fail(&next, Problem::Io(e)))?;
            if target.is_absolute() {
                at = PathBuf::from("/");
            }
            for name in names(&target).collect::<Vec<_>>().into_iter().rev() {
                pending.push_front(name);
            }
            continue;
        }
        if is_last {
            return object(&next, &meta, kind, euid);
        }
        passable(&next, &meta, euid)?;
        at = next;
    }
    // The path ended at `/` or with `..`: `at` is the object.
    object(&at, &lstat(&at)?, kind, euid)
}

/// The names of `path`, `..` kept (resolved against real directories as
/// the walk goes), `.` and the root dropped.
fn names(path: &Path) -> impl Iterator<Item = OsString> + '_ {
    path.components().filter_map(|c| match c {
        Component::Normal(name) => Some(name.to_owned()),
        Component::ParentDir => Some("..".into()),
        Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
    })
}

/// A private directory for the host's own files: checked with [`check`]
/// (a symbolic link refused), and when missing created (with any missing
/// parents) with mode 0700, then checked again. Never changes the mode of
/// something that exists.
pub fn private_dir(dir: &Path) -> Result<(), Unsafe> {
    match check(dir, Kind::Dir, LastLink::Refuse) {
        Err(e) if e.is_missing() => {
            use std::os::unix::fs::DirBuilderExt;
            // Every component that exists passed, so only root or we can
            // interfere; the check below sees what was really made.
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .or_else(|e| fail(dir, Problem::Create(e)))?;
            check(dir, Kind::Dir, LastLink::Refuse)
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::symlink;

    use super::*;

    fn scratch() -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix("policy-host-fs-safety-")
            .tempdir()
            .unwrap()
    }

    fn mode(path: &Path, mode: u32) {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_private_tree_passes() {
        let s = scratch();
        let dir = s.path().join("a/b");
        private_dir(&dir).unwrap();
        assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        assert_eq!(
            fs::metadata(s.path().join("a")).unwrap().mode() & 0o777,
            0o700
        );
        fs::write(dir.join("k.pub"), "x").unwrap();
        mode(&dir.join("k.pub"), 0o644);
        check(&dir.join("k.pub"), Kind::File, LastLink::Refuse).unwrap();
        // Relative paths and `..` are resolved against real directories.
        check(&dir.join("../b/./k.pub"), Kind::File, LastLink::Refuse).unwrap();
        check(Path::new("/"), Kind::Dir, LastLink::Refuse).unwrap();
    }

    #[test]
    fn writable_object_or_parent_is_refused_and_sticky_parents_are_not() {
        let s = scratch();
        let dir = s.path().join("d");
        fs::create_dir(&dir).unwrap();
        let file = dir.join("f");
        fs::write(&file, "x").unwrap();
        mode(&dir, 0o755);
        mode(&file, 0o664);
        let err = check(&file, Kind::File, LastLink::Follow).unwrap_err();
        assert_eq!(err.path, file);
        assert!(
            err.to_string()
                .contains("writable by group or others (mode 664)"),
            "{err}"
        );
        mode(&file, 0o644);
        mode(&dir, 0o777);
        let err = check(&file, Kind::File, LastLink::Follow).unwrap_err();
        assert_eq!(err.path, dir, "{err}");
        assert!(err.to_string().contains("mode 777"), "{err}");
        // Sticky (like /tmp): others can add entries, not replace ours.
        mode(&dir, 0o1777);
        check(&file, Kind::File, LastLink::Follow).unwrap();
        // ...but a sticky directory is still not private.
        let err = check(&dir, Kind::Dir, LastLink::Refuse).unwrap_err();
        assert!(err.to_string().contains("mode 1777"), "{err}");
    }

    #[test]
    fn symlinks_are_refused_last_or_followed_and_checked() {
        let s = scratch();
        let real = s.path().join("real");
        fs::create_dir(&real).unwrap();
        mode(&real, 0o700);
        let link = s.path().join("link");
        symlink(&real, &link).unwrap();
        let err = check(&link, Kind::Dir, LastLink::Refuse).unwrap_err();
        assert!(matches!(err.problem, Problem::Symlink), "{err}");
        assert!(
            err.to_string().ends_with("link is a symbolic link"),
            "{err}"
        );
        check(&link, Kind::Dir, LastLink::Follow).unwrap();
        // A link on the way is followed, and what it leads to is checked.
        fs::write(real.join("f"), "x").unwrap();
        mode(&real.join("f"), 0o644);
        check(&link.join("f"), Kind::File, LastLink::Refuse).unwrap();
        let open = s.path().join("open");
        fs::create_dir(&open).unwrap();
        mode(&open, 0o777);
        let relative = s.path().join("to-open");
        symlink("open", &relative).unwrap();
        let err = check(&relative, Kind::Dir, LastLink::Follow).unwrap_err();
        assert_eq!(err.path, open, "{err}");
        // A loop ends.
        let a = s.path().join("loop-a");
        symlink("loop-b", &a).unwrap();
        symlink("loop-a", s.path().join("loop-b")).unwrap();
        let err = check(&a, Kind::File, LastLink::Follow).unwrap_err();
        assert!(matches!(err.problem, Problem::TooManyLinks), "{err}");
    }

    #[test]
    fn missing_wrong_kind_and_foreign_owner() {
        let s = scratch();
        let err = check(&s.path().join("no/such"), Kind::Dir, LastLink::Refuse).unwrap_err();
        assert!(err.is_missing());
        assert_eq!(err.path, s.path().join("no"));
        let file = s.path().join("f");
        fs::write(&file, "x").unwrap();
        mode(&file, 0o600);
        let err = check(&file, Kind::Dir, LastLink::Refuse).unwrap_err();
        assert!(matches!(err.problem, Problem::NotDirectory), "{err}");
        let err = check(&file.join("x"), Kind::File, LastLink::Refuse).unwrap_err();
        assert!(matches!(err.problem, Problem::NotDirectory), "{err}");
        if std::os::unix::fs::chown(&file, Some(65534), None).is_err() {
            eprintln!("not root: cannot test foreign ownership");
            return;
        }
        let err = check(&file, Kind::File, LastLink::Refuse).unwrap_err();
        assert!(err.to_string().contains("owned by uid 65534"), "{err}");
        // A link owned by someone else is not followed, whatever it leads to.
        let link = s.path().join("theirs");
        symlink(s.path(), &link).unwrap();
        std::os::unix::fs::lchown(&link, Some(65534), None).unwrap();
        let err = check(&link, Kind::Dir, LastLink::Follow).unwrap_err();
        assert_eq!(err.path, link, "{err}");
    }

    #[test]
    fn private_dir_never_touches_what_exists() {
        let s = scratch();
        let target = s.path().join("target");
        fs::create_dir(&target).unwrap();
        mode(&target, 0o755);
        let link = s.path().join("cache");
        symlink(&target, &link).unwrap();
        assert!(matches!(
            private_dir(&link).unwrap_err().problem,
            Problem::Symlink
        ));
        assert_eq!(fs::metadata(&target).unwrap().mode() & 0o7777, 0o755);
        let open = s.path().join("open");
        fs::create_dir(&open).unwrap();
        mode(&open, 0o777);
        assert!(private_dir(&open).is_err());
        assert_eq!(fs::metadata(&open).unwrap().mode() & 0o7777, 0o777);
    }
}
