//! What the host makes of one reference a service subscribes to: a
//! `service#` reference fires within the run; a `file#` or `package#`
//! reference the host watches is read now; anything else is not watched,
//! which is no error: it fires only on `--refresh`, as the design says, and
//! the service's event carries a warning saying why it is not watched.

use std::path::Path;

use super::dpkg::Database;
use super::{files, links, Budget, Fingerprint, WatchError, WatchPaths};

/// What one reference is to the host.
#[derive(Debug)]
pub enum Look {
    /// `service#NAME`: changed or not within the run, nothing to read.
    InRun,
    /// Not watched: the warning for the service's event, which names the
    /// reference and says why (it fires only on `--refresh`).
    NotWatched(String),
    /// Watched: read now, as a fingerprint or why it could not be read.
    Read(Result<Fingerprint, WatchError>),
}

/// Where `file#` and `package#` references are read, and what was read of
/// dpkg's database (once per policy, at its first `package#` reference).
pub struct Reader<'a> {
    pub watch_paths: &'a WatchPaths,
    /// dpkg's status file ([`super::dpkg::STATUS_FILE`]).
    pub dpkg_status: &'a Path,
    dpkg: Option<Result<Option<Database>, WatchError>>,
}

impl<'a> Reader<'a> {
    pub fn new(watch_paths: &'a WatchPaths, dpkg_status: &'a Path) -> Self {
        Self {
            watch_paths,
            dpkg_status,
            dpkg: None,
        }
    }

    /// Looks at `reference`, reading it within `budget` when it is watched.
    pub fn look(&mut self, reference: &str, budget: &mut Budget) -> Look {
        let not_watched = |why: &str| Look::NotWatched(format!("{reference} {why}: {NOT_WATCHED}"));
        match reference.split_once('#') {
            Some(("service", _)) => Look::InRun,
            Some(("file", path)) => match self.watch_paths.check(path) {
                Ok(path) => match links::resolve(&path) {
                    Ok(resolved) => Look::Read(files::fingerprint(
                        &path,
                        &resolved,
                        self.watch_paths,
                        budget,
                    )),
                    Err(refused) => {
                        let warning = format!("{reference} is not followed: {}", refused.0);
                        // The reference is the policy's text: shown escaped.
                        tracing::warn!("{}", crate::text::Untrusted::new(warning.clone()));
                        Look::NotWatched(format!("{warning}; {NOT_WATCHED}"))
                    }
                },
                Err(why) => not_watched(&why),
            },
            Some(("package", package)) => {
                let dpkg_status = self.dpkg_status;
                let db = self
                    .dpkg
                    .get_or_insert_with(|| Database::read(dpkg_status, budget));
                match db {
                    Ok(Some(db)) => Look::Read(db.fingerprint(package)),
                    Ok(None) => not_watched(&format!(
                        "needs dpkg's database, and this machine has none ({} is missing)",
                        dpkg_status.display()
                    )),
                    Err(e) => Look::Read(Err(WatchError(
                        e.0.replace("package#:", &format!("package#{package}:")),
                    ))),
                }
            }
            _ => {
                not_watched("is not a file# or package# reference, the only kinds the host watches")
            }
        }
    }
}

/// What a reference the host does not watch still does.
const NOT_WATCHED: &str = "not watched; it fires only on --refresh";

#[cfg(test)]
mod tests {
    use super::super::Caps;
    use super::*;

    fn look(reference: &str, dpkg_status: &Path) -> Look {
        let watch = WatchPaths::new(&["/etc".into()]).unwrap();
        Reader::new(&watch, dpkg_status).look(reference, &mut Budget::new(Caps::DEFAULT, None))
    }

    fn warning(reference: &str) -> String {
        match look(reference, Path::new("/nonexistent/dpkg/status")) {
            Look::NotWatched(warning) => warning,
            other => panic!("{reference} is watched: {other:?}"),
        }
    }

    #[test]
    fn references_the_host_does_not_watch_are_warnings_saying_why() {
        assert_eq!(
            warning("file#/x"),
            "file#/x is outside watch_paths (/etc): not watched; it fires only on --refresh"
        );
        assert!(warning("file#/run/app.sock").contains("is below /run, which the host never reads"));
        assert!(warning("file#etc/app.conf").contains("is not an absolute path"));
        assert!(warning("file#/etc/../root/.ssh").contains("contains `..`"));
        assert_eq!(
            warning("foo#bar"),
            "foo#bar is not a file# or package# reference, the only kinds the host watches: not watched; it fires only on --refresh"
        );
        assert!(warning("no-type").contains("not a file# or package# reference"));
        assert!(warning("package#httpd")
            .contains("needs dpkg's database, and this machine has none (/nonexistent/dpkg/status is missing)"));
    }

    #[test]
    fn watched_references_are_read_and_service_references_fire_in_the_run() {
        let missing = Path::new("/nonexistent/dpkg/status");
        assert!(matches!(
            look("file#/etc/nonexistent.conf", missing),
            Look::Read(Ok(Fingerprint::Absent))
        ));
        assert!(matches!(look("service#db", missing), Look::InRun));
        let dir = tempfile::tempdir().unwrap();
        let status = dir.path().join("status");
        std::fs::create_dir(&status).unwrap();
        let Look::Read(Err(error)) = look("package#httpd", &status) else {
            panic!("a dpkg database that cannot be read is an error");
        };
        assert!(error.0.starts_with("package#httpd: "), "{error}");
    }
}
