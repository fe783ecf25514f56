//! The one scratch directory of the end-to-end tests: a directory of a
//! test's own, removed when the test is done with it, and kept (its path
//! printed) when the test failed, to inspect what it left.

use std::path::{Path, PathBuf};

use crate::fake_systemctl::temp_dir;

/// A directory of one test's own (see the module documentation).
pub struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    /// A fresh directory under the system temp dir (mode 0755, root's when
    /// the tests run as root), named after `name`.
    pub fn new(name: &str) -> Self {
        Self {
            dir: temp_dir(name),
        }
    }

    /// `root/<name>-<pid>`, emptied first: for tests whose files must lie
    /// at a place of their choosing.
    pub fn under(root: &Path, name: &str) -> Self {
        let dir = root.join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
        Self { dir }
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// `name` inside the directory.
    pub fn join(&self, name: impl AsRef<Path>) -> PathBuf {
        self.dir.join(name)
    }

    /// Writes `contents` to `name` inside the directory; returns its path.
    pub fn write(&self, name: impl AsRef<Path>, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.join(name);
        std::fs::write(&path, contents)
            .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept {} for inspection", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
