//! Which paths of `file#` references the host watches: absolute, without
//! `..`, below one of the `watch_paths`, and never below `/proc`, `/sys`,
//! `/dev` or `/run`, whatever `watch_paths` says. Any other path is not
//! watched (its subscription fires only on `--refresh`), and never read.

use std::path::{Component, Path, PathBuf};

/// Never read, whatever `watch_paths` says: the kernel's and systemd's
/// runtime trees, where a read can block, has effects, or reveals secrets.
pub const NEVER_READ: [&str; 4] = ["/proc", "/sys", "/dev", "/run"];

/// The directories below which `file#` references may be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchPaths {
    prefixes: Vec<PathBuf>,
}

impl WatchPaths {
    /// Each prefix must be an absolute path without `..`; it is normalised
    /// (`//` and `.` dropped).
    pub fn new(prefixes: &[String]) -> Result<Self, String> {
        let prefixes = prefixes
            .iter()
            .map(|p| normalise(p).map_err(|why| format!("watch path {p:?} {why}")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { prefixes })
    }

    /// Whether `path` (absolute and normalised) may be read.
    pub fn allows(&self, path: &Path) -> bool {
        !NEVER_READ.iter().any(|never| path.starts_with(never))
            && self.prefixes.iter().any(|prefix| path.starts_with(prefix))
    }

    /// The path of reference `file#PATH`, normalised, when the host watches
    /// it; otherwise why not, as words that follow the reference
    /// (`is outside watch_paths (/etc)`). A path not watched is no error:
    /// its subscription fires only on `--refresh`.
    pub fn check(&self, path: &str) -> Result<PathBuf, String> {
        let normal = normalise(path)?;
        if let Some(never) = NEVER_READ.iter().find(|n| normal.starts_with(n)) {
            return Err(format!("is below {never}, which the host never reads"));
        }
        if !self.allows(&normal) {
            return Err(format!("is outside watch_paths ({})", self.describe()));
        }
        Ok(normal)
    }

    fn describe(&self) -> String {
        self.prefixes
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// `path` as an absolute path of normal components (`//` and `.` dropped);
/// `..` and relative paths are refused, saying why as words that follow the
/// path.
fn normalise(path: &str) -> Result<PathBuf, String> {
    if !path.starts_with('/') {
        return Err("is not an absolute path".to_owned());
    }
    let mut normal = PathBuf::from("/");
    for component in Path::new(path).components() {
        match component {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(part) => normal.push(part),
            Component::ParentDir => return Err("contains `..`, which is not allowed".to_owned()),
            Component::Prefix(_) => return Err("is not an absolute path".to_owned()),
        }
    }
    Ok(normal)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn default() -> WatchPaths {
        WatchPaths::new(&["/etc".into(), "/opt".into(), "/srv".into(), "/usr".into()]).unwrap()
    }

    #[test]
    fn paths_below_a_watch_path_are_read_normalised() {
        let watch = default();
        assert_eq!(
            watch.check("/etc/httpd/conf/httpd.conf").unwrap(),
            Path::new("/etc/httpd/conf/httpd.conf")
        );
        assert_eq!(
            watch.check("/etc//demo/./app.conf").unwrap(),
            Path::new("/etc/demo/app.conf")
        );
        assert_eq!(
            watch.check("/usr/share/x/").unwrap(),
            Path::new("/usr/share/x")
        );
    }

    #[test]
    fn relative_parent_and_outside_paths_are_not_watched_saying_why() {
        let watch = default();
        let error = |p: &str| watch.check(p).unwrap_err();
        assert!(error("etc/x").contains("not an absolute path"));
        assert!(error("/etc/../root/.ssh/id_rsa").contains("contains `..`"));
        assert!(error("/root/secret").contains("outside watch_paths (/etc, /opt, /srv, /usr)"));
        assert!(
            error("/etcetera/x").contains("outside watch_paths"),
            "a prefix is whole components"
        );
        assert!(error("/var/lib/dpkg/status").contains("outside watch_paths"));
    }

    #[test]
    fn the_runtime_trees_are_never_read_whatever_watch_paths_says() {
        let watch = WatchPaths::new(&["/".into()]).unwrap();
        for never in [
            "/proc/self/environ",
            "/sys/kernel",
            "/dev/zero",
            "/run/systemd/private",
            "/proc",
        ] {
            assert!(
                watch
                    .check(never)
                    .unwrap_err()
                    .contains("the host never reads"),
                "{never}"
            );
        }
        assert!(watch.check("/etc/hostname").is_ok());
    }

    #[test]
    fn a_bad_watch_path_is_refused() {
        assert!(WatchPaths::new(&["etc".into()]).is_err());
        assert!(WatchPaths::new(&["/etc/../root".into()]).is_err());
    }
}
