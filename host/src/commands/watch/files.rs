//! Following files with inotify. A file is followed through its directory,
//! filtered by its name: editors that replace a file by rename, `sed -i`,
//! `ln -sfn` and `cp` + `mv` all end with an entry of that name appearing
//! in the directory, which a watch on the file's own inode would miss. A
//! directory is followed with everything below it.
//!
//! One thread reads the events and sends a [`Wake`] per change; a queue
//! overflow is a wake for everything. A directory that cannot be watched
//! (no watch descriptors left: `fs.inotify.max_user_watches`) is said once
//! and left to the resyncs, never a crash.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, PoisonError};

use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask, Watches};

use super::targets::Followed;
use super::wake::Wake;

/// The most directories followed below one followed directory: a
/// subscription to `/` must not take every watch descriptor of the machine.
const MAX_TREE_DIRS: usize = 4096;

/// Everything that can make a directory entry new, changed or gone.
fn mask() -> WatchMask {
    WatchMask::CREATE
        | WatchMask::DELETE
        | WatchMask::MODIFY
        | WatchMask::CLOSE_WRITE
        | WatchMask::MOVED_FROM
        | WatchMask::MOVED_TO
        | WatchMask::ATTRIB
        | WatchMask::DELETE_SELF
        | WatchMask::MOVE_SELF
        | WatchMask::ONLYDIR
}

/// Which entries of a watched directory count: some names, or all.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Names {
    Some(BTreeSet<OsString>),
    All,
}

/// The directories watched, by descriptor (shared with the reading thread).
type Table = HashMap<WatchDescriptor, (PathBuf, Names)>;

pub(crate) struct FileWatch {
    watches: Watches,
    table: Arc<Mutex<Table>>,
    /// What is watched now, by directory.
    current: BTreeMap<PathBuf, (WatchDescriptor, Names)>,
    /// Directories already said to be unwatchable (said once each).
    said: BTreeSet<PathBuf>,
}

impl FileWatch {
    /// Starts the reading thread; wakes go to `wakes`.
    pub(crate) fn start(wakes: Sender<Wake>) -> std::io::Result<Self> {
        let mut inotify = Inotify::init()?;
        let watches = inotify.watches();
        let table: Arc<Mutex<Table>> = Arc::default();
        let read_table = Arc::clone(&table);
        std::thread::Builder::new()
            .name("inotify".into())
            .spawn(move || read(&mut inotify, &read_table, &wakes))?;
        Ok(Self {
            watches,
            table,
            current: BTreeMap::new(),
            said: BTreeSet::new(),
        })
    }

    /// Follows exactly `followed` from now on.
    pub(crate) fn follow(&mut self, followed: &[Followed]) {
        let wanted = directories(followed);
        let gone: Vec<PathBuf> = self
            .current
            .keys()
            .filter(|dir| !wanted.contains_key(*dir))
            .cloned()
            .collect();
        for dir in gone {
            if let Some((wd, _)) = self.current.remove(&dir) {
                self.lock().remove(&wd);
                // Already gone with its directory: nothing to undo.
                let _ = self.watches.remove(wd);
            }
        }
        for (dir, names) in wanted {
            if self.current.get(&dir).is_some_and(|(_, n)| *n == names) {
                continue;
            }
            match self.watches.add(&dir, mask()) {
                Ok(wd) => {
                    self.lock().insert(wd.clone(), (dir.clone(), names.clone()));
                    self.current.insert(dir, (wd, names));
                }
                Err(e) => {
                    if let Some((wd, _)) = self.current.remove(&dir) {
                        self.lock().remove(&wd);
                    }
                    self.cannot_watch(&dir, &e);
                }
            }
        }
    }

    fn cannot_watch(&mut self, dir: &Path, error: &std::io::Error) {
        if !self.said.insert(dir.to_path_buf()) {
            return;
        }
        if error.raw_os_error() == Some(libc::ENOSPC) {
            tracing::warn!(
                "cannot watch {}: no inotify watches left (fs.inotify.max_user_watches); \
                 it is checked at every resync instead",
                dir.display()
            );
        } else if error.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!(
                "cannot watch {}: {error}; it is checked at every resync instead",
                dir.display()
            );
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many directories are watched.
    #[cfg(test)]
    pub(crate) fn watched(&self) -> usize {
        self.current.len()
    }
}

/// The directories to watch for `followed`, each with the names that
/// count: a file's directory (its name; the nearest existing ancestor when
/// the directory is missing, for the name of the missing one), a followed
/// directory and the directories below it (all names).
fn directories(followed: &[Followed]) -> BTreeMap<PathBuf, Names> {
    let mut dirs: BTreeMap<PathBuf, Names> = BTreeMap::new();
    let mut want = |dir: &Path, name: Option<&std::ffi::OsStr>| {
        let entry = dirs
            .entry(dir.to_path_buf())
            .or_insert_with(|| Names::Some(BTreeSet::new()));
        match (entry, name) {
            (Names::Some(names), Some(name)) => {
                names.insert(name.to_owned());
            }
            (entry, None) => *entry = Names::All,
            (Names::All, Some(_)) => {}
        }
    };
    for followed in followed {
        // Through a link the host would not follow (another user's, to what
        // they do not own) nothing is watched: its changes would tell that
        // user when a file of root's changed (the run says why). The entry
        // itself stays watched when its directory is reached without such a
        // link: replacing the link is the planter's own act, and a good one
        // put back is seen at once.
        let follows = |path: &Path| crate::subscriptions::links::resolve(path).is_ok();
        if !followed.path.parent().is_none_or(follows) {
            continue;
        }
        // The entry itself, seen from its parent: created, replaced, removed.
        let mut path = followed.path.as_path();
        while let (Some(parent), Some(name)) = (path.parent(), path.file_name()) {
            if parent.is_dir() {
                want(parent, Some(name));
                break;
            }
            path = parent;
        }
        if followed.tree && follows(&followed.path) && followed.path.is_dir() {
            for dir in tree(&followed.path) {
                want(&dir, None);
            }
        }
    }
    dirs
}

/// `root` and the directories below it (not through symbolic links), at
/// most [`MAX_TREE_DIRS`].
fn tree(root: &Path) -> Vec<PathBuf> {
    let mut found = vec![root.to_path_buf()];
    let mut next = 0;
    while next < found.len() && found.len() < MAX_TREE_DIRS {
        let dir = found[next].clone();
        next += 1;
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) && found.len() < MAX_TREE_DIRS {
                found.push(entry.path());
            }
        }
    }
    found
}

/// The reading thread: each event of a name that counts is a wake.
fn read(inotify: &mut Inotify, table: &Mutex<Table>, wakes: &Sender<Wake>) {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let events = match inotify.read_events_blocking(&mut buffer) {
            Ok(events) => events,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                tracing::error!(
                    "reading inotify events failed: {e}; files are checked at every resync only"
                );
                return;
            }
        };
        let mut woken = Vec::new();
        {
            let table = table.lock().unwrap_or_else(PoisonError::into_inner);
            for event in events {
                if event.mask.contains(EventMask::Q_OVERFLOW) {
                    woken.push(Wake::Missed("inotify's queue overflowed"));
                    continue;
                }
                let Some((dir, names)) = table.get(&event.wd) else {
                    continue;
                };
                let path = match event.name {
                    Some(name) => {
                        if let Names::Some(names) = names {
                            if !names.contains(name) {
                                continue;
                            }
                        }
                        dir.join(name)
                    }
                    None if event.mask.contains(EventMask::IGNORED) => continue,
                    None => dir.clone(),
                };
                let wake = Wake::Path(path);
                if !woken.contains(&wake) {
                    woken.push(wake);
                }
            }
        }
        for wake in woken {
            if wakes.send(wake).is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_followed_through_their_directory_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("web.conf");
        std::fs::write(&conf, "a").unwrap();
        let sub = dir.path().join("sites");
        std::fs::create_dir_all(sub.join("enabled")).unwrap();
        let dirs = directories(&[
            Followed {
                path: conf.clone(),
                tree: false,
            },
            // Missing: its nearest existing ancestor, by the missing name.
            Followed {
                path: dir.path().join("later/x.conf"),
                tree: false,
            },
            Followed {
                path: sub.clone(),
                tree: true,
            },
        ]);
        let names = |list: &[&str]| Names::Some(list.iter().map(OsString::from).collect());
        assert_eq!(dirs[dir.path()], names(&["later", "sites", "web.conf"]));
        assert_eq!(dirs[&sub], Names::All);
        assert_eq!(dirs[&sub.join("enabled")], Names::All);
        assert_eq!(dirs.len(), 3);
    }

    /// The real kernel: a replacement by rename, as `sed -i` makes it, is
    /// seen; another file in the same directory is not.
    #[test]
    fn a_replacement_by_rename_wakes_and_a_neighbour_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("web.conf");
        std::fs::write(&conf, "a").unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let mut watch = FileWatch::start(tx).unwrap();
        watch.follow(&[Followed {
            path: conf.clone(),
            tree: false,
        }]);
        assert_eq!(watch.watched(), 1);
        std::fs::write(dir.path().join("other"), "x").unwrap();
        let temp = dir.path().join("sedAbC123");
        std::fs::write(&temp, "b").unwrap();
        std::fs::rename(&temp, &conf).unwrap();
        let wake = rx
            .recv_timeout(std::time::Duration::from_secs(5))
            .expect("a wake");
        assert_eq!(wake, Wake::Path(conf.clone()));
        // Nothing but that file's events.
        while let Ok(wake) = rx.recv_timeout(std::time::Duration::from_millis(200)) {
            assert_eq!(wake, Wake::Path(conf.clone()));
        }
        // Unfollowed: no more wakes.
        watch.follow(&[]);
        assert_eq!(watch.watched(), 0);
        std::fs::write(&conf, "c").unwrap();
        assert!(rx
            .recv_timeout(std::time::Duration::from_millis(300))
            .is_err());
    }
}
