//! Which paths a `file#` reference may name: absolute, without `..`, below
//! one of the `watch_paths`, and never below `/proc`, `/sys`, `/dev` or
//! `/run`, whatever `watch_paths` says.

use std::path::{Component, Path, PathBuf};

use super::WatchError;

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
            .map(|p| normalise(p).map_err(|why| format!("watch path {p:?}: {why}")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { prefixes })
    }

    /// Whether `path` (absolute and normalised) may be read.
    pub fn allows(&self, path: &Path) -> bool {
        !NEVER_READ.iter().any(|never| path.starts_with(never))
            && self.prefixes.iter().any(|prefix| path.starts_with(prefix))
    }

    /// The path of reference `file#PATH`, normalised, when it may be read.
    pub fn check(&self, path: &str) -> Result<PathBuf, WatchError> {
        let normal = normalise(path).map_err(|why| WatchError(format!("file#{path}: {why}")))?;
        if let Some(never) = NEVER_READ.iter().find(|n| normal.starts_with(n)) {
            return Err(WatchError(format!(
                "file#{path}: {never} is never read by the host"
            )));
        }
        if !self.allows(&normal) {
            return Err(WatchError(format!(
                "file#{path}: outside watch_paths ({}); add its directory to watch_paths in host.toml or give --watch-path",
                self.describe()
            )));
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
/// `..` and relative paths are refused.
fn normalise(path: &str) -> Result<PathBuf, &'static str> {
    if !path.starts_with('/') {
        return Err("not an absolute path");
    }
    let mut normal = PathBuf::from("/");
    for component in Path::new(path).components() {
        match component {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(part) => normal.push(part),
            Component::ParentDir => return Err("`..` is not allowed"),
            Component::Prefix(_) => return Err("not an absolute path"),
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
    fn relative_parent_and_outside_paths_are_refused_naming_why() {
        let watch = default();
        let error = |p: &str| watch.check(p).unwrap_err().0;
        assert!(error("etc/x").contains("not an absolute path"));
        assert!(error("/etc/../root/.ssh/id_rsa").contains("`..` is not allowed"));
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
                watch.check(never).unwrap_err().0.contains("is never read"),
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
