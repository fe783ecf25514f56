//! `package#NAME`: the package's version and status in dpkg's database,
//! read as a file (`/var/lib/dpkg/status`), never by running dpkg.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::Path;

use super::{Budget, Fingerprint, WatchError};

/// Where dpkg keeps what is installed.
pub const STATUS_FILE: &str = "/var/lib/dpkg/status";

/// The most of the status file read (a machine with thousands of packages
/// has a few MiB).
const MAX_STATUS_BYTES: u64 = 64 << 20;

/// One package of one architecture, as the status file lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    architecture: String,
    version: String,
    /// The `Status:` line: want, error flag, state (`install ok installed`).
    status: String,
}

impl Entry {
    /// Removed, whether or not its configuration files are left.
    fn is_removed(&self) -> bool {
        matches!(
            self.status.split_whitespace().nth(2),
            Some("not-installed" | "config-files")
        )
    }
}

/// dpkg's database, read once per run.
#[derive(Debug)]
pub struct Database {
    /// By package name; one entry per architecture.
    packages: BTreeMap<String, Vec<Entry>>,
}

impl Database {
    /// Reads `path` (normally [`STATUS_FILE`]). `None` when it is missing:
    /// a machine without dpkg, where `package#` references are not watched
    /// (they fire only on `--refresh`); one that cannot be read is an error
    /// for each `package#` reference.
    pub fn read(path: &Path, budget: &mut Budget) -> Result<Option<Self>, WatchError> {
        let fail = |why: String| WatchError(format!("package#: {}: {why}", path.display()));
        let file = match std::fs::File::open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(fail(e.to_string())),
        };
        let mut text = String::new();
        file.take(MAX_STATUS_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(|e| fail(e.to_string()))?;
        if text.len() as u64 > MAX_STATUS_BYTES {
            return Err(fail(format!("larger than {MAX_STATUS_BYTES} bytes")));
        }
        budget.read("package#", text.len() as u64, 0)?;
        Ok(Some(Self {
            packages: parse(&text),
        }))
    }

    /// The fingerprint of `package#NAME` or `package#NAME:ARCH`.
    pub fn fingerprint(&self, reference: &str) -> Result<Fingerprint, WatchError> {
        let (name, arch) = match reference.split_once(':') {
            Some((name, arch)) => (name, Some(arch)),
            None => (reference, None),
        };
        if name.is_empty() || arch == Some("") {
            return Err(WatchError(format!(
                "package#{reference}: expected package#NAME or package#NAME:ARCH"
            )));
        }
        let entries: Vec<&Entry> = self
            .packages
            .get(name)
            .into_iter()
            .flatten()
            .filter(|e| arch.is_none_or(|a| e.architecture == a))
            .filter(|e| !e.is_removed())
            .collect();
        Ok(match entries.as_slice() {
            [] => Fingerprint::NotInstalled,
            [one] => Fingerprint::Package {
                version: one.version.clone(),
                status: one.status.clone(),
            },
            // Several architectures of one name (multi-arch): all of them.
            several => Fingerprint::Package {
                version: several
                    .iter()
                    .map(|e| format!("{} ({})", e.version, e.architecture))
                    .collect::<Vec<_>>()
                    .join(", "),
                status: several
                    .iter()
                    .map(|e| format!("{} ({})", e.status, e.architecture))
                    .collect::<Vec<_>>()
                    .join(", "),
            },
        })
    }
}

/// The status file's stanzas, by package.
fn parse(text: &str) -> BTreeMap<String, Vec<Entry>> {
    let mut packages: BTreeMap<String, Vec<Entry>> = BTreeMap::new();
    for stanza in text.split("\n\n") {
        let field = |key: &str| {
            stanza.lines().find_map(|line| {
                line.strip_prefix(key)
                    .and_then(|rest| rest.strip_prefix(':'))
                    .map(|value| value.trim().to_owned())
            })
        };
        let Some(package) = field("Package") else {
            continue;
        };
        packages.entry(package).or_default().push(Entry {
            architecture: field("Architecture").unwrap_or_default(),
            version: field("Version").unwrap_or_default(),
            status: field("Status").unwrap_or_default(),
        });
    }
    packages
}

#[cfg(test)]
mod tests {
    use super::super::Caps;
    use super::*;

    const STATUS: &str = "\
Package: demo
Status: install ok installed
Priority: optional
Architecture: amd64
Version: 1.0
Description: a demo
 with a continuation line: Version: 9.9

Package: libfoo
Status: install ok installed
Architecture: amd64
Multi-Arch: same
Version: 2.1

Package: libfoo
Status: install ok installed
Architecture: i386
Multi-Arch: same
Version: 2.1

Package: gone
Status: deinstall ok config-files
Architecture: all
Version: 3.0
";

    fn database(text: &str) -> Database {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("status");
        std::fs::write(&path, text).unwrap();
        Database::read(&path, &mut Budget::new(Caps::DEFAULT, None))
            .unwrap()
            .unwrap()
    }

    #[test]
    fn a_package_is_its_version_and_status() {
        let db = database(STATUS);
        assert_eq!(
            db.fingerprint("demo").unwrap(),
            Fingerprint::Package {
                version: "1.0".into(),
                status: "install ok installed".into()
            }
        );
        assert_eq!(db.fingerprint("nosuch").unwrap(), Fingerprint::NotInstalled);
        assert_eq!(
            db.fingerprint("gone").unwrap(),
            Fingerprint::NotInstalled,
            "config files left: removed"
        );
    }

    #[test]
    fn multi_arch_names_take_an_architecture() {
        let db = database(STATUS);
        let Fingerprint::Package { version, .. } = db.fingerprint("libfoo:i386").unwrap() else {
            panic!()
        };
        assert_eq!(version, "2.1");
        let Fingerprint::Package { version, .. } = db.fingerprint("libfoo").unwrap() else {
            panic!()
        };
        assert_eq!(version, "2.1 (amd64), 2.1 (i386)");
        assert_eq!(
            db.fingerprint("libfoo:arm64").unwrap(),
            Fingerprint::NotInstalled
        );
        assert!(db.fingerprint("libfoo:").is_err());
    }

    #[test]
    fn an_upgrade_is_a_version_change() {
        let before = database(STATUS).fingerprint("demo").unwrap();
        let after = database(&STATUS.replace("Version: 1.0", "Version: 2.0"))
            .fingerprint("demo")
            .unwrap();
        assert_eq!(
            after.change_from(&before).unwrap().to_string(),
            "version 1.0 -> 2.0"
        );
    }

    #[test]
    fn a_machine_without_dpkg_has_no_database() {
        let database = Database::read(
            Path::new("/nonexistent/dpkg/status"),
            &mut Budget::new(Caps::DEFAULT, None),
        )
        .unwrap();
        assert!(database.is_none());
    }
}
