//! What a subscription watches outside the run: `file#PATH` (what a reader
//! of PATH sees) and `package#NAME` (the package's version and status in
//! dpkg's database). Each is reduced to a [`Fingerprint`]; two fingerprints
//! that differ are a [`Change`], which triggers the subscribers.
//!
//! A guest names these paths and root reads them, so every read is bounded:
//! only paths below `watch_paths` (never `/proc`, `/sys`, `/dev`, `/run`),
//! only regular files, directories and symbolic links (a FIFO, a socket or a
//! device is an error naming it, never opened), sizes and entry counts
//! capped per reference and per run, and the run's deadline kept. The guest
//! learns only whether its references changed, never what they hold.
//!
//! A reference the host does not watch (a path outside `watch_paths`, a
//! type other than `file#` and `package#`) is never read and is no error: a
//! warning on its service's event, and it fires only on `--refresh`
//! ([`mod@reference`]).

pub mod dpkg;
pub mod files;
pub mod links;
pub mod paths;
pub mod record;
pub mod reference;
pub mod survey;

use std::fmt;
use std::time::Instant;

use serde::{Deserialize, Serialize};

pub use paths::WatchPaths;

/// What one reference looked like when it was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Fingerprint {
    /// Nothing there (a dangling link counts as nothing).
    Absent,
    /// A regular file (links followed): the SHA-256 of its content.
    File { sha256: String },
    /// A directory: the SHA-256 of the names, types and contents of
    /// everything below it.
    Directory { sha256: String },
    /// A package dpkg knows: its version and its status line.
    Package { version: String, status: String },
    /// A package dpkg does not list.
    NotInstalled,
}

/// How a reference changed between two runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "change", rename_all = "kebab-case")]
pub enum Change {
    /// A file or directory that was not there is.
    Appeared,
    /// A file or directory that was there is not.
    Removed,
    /// Its content (or, for a directory, anything below it) changed.
    Content,
    /// A file became a directory or the other way round.
    Type,
    /// A package was installed.
    Installed { version: String },
    /// A package was removed.
    Uninstalled { version: String },
    /// A package's version changed (an upgrade or a downgrade).
    Version { from: String, to: String },
    /// A package's status changed at the same version (half-configured, ...).
    Status { from: String, to: String },
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::Appeared => f.write_str("appeared"),
            Change::Removed => f.write_str("removed"),
            Change::Content => f.write_str("changed"),
            Change::Type => f.write_str("changed type"),
            Change::Installed { version } => write!(f, "installed {version}"),
            Change::Uninstalled { version } => write!(f, "removed {version}"),
            Change::Version { from, to } => write!(f, "version {from} -> {to}"),
            Change::Status { from, to } => write!(f, "status {from} -> {to}"),
        }
    }
}

impl Fingerprint {
    /// How `self` (the newer) differs from `old`; `None` when it does not.
    pub fn change_from(&self, old: &Fingerprint) -> Option<Change> {
        use Fingerprint::*;
        if self == old {
            return None;
        }
        Some(match (old, self) {
            (Absent, _) => Change::Appeared,
            (_, Absent) => Change::Removed,
            (File { .. }, File { .. }) | (Directory { .. }, Directory { .. }) => Change::Content,
            (File { .. } | Directory { .. }, File { .. } | Directory { .. }) => Change::Type,
            (NotInstalled, Package { version, .. }) => Change::Installed {
                version: version.clone(),
            },
            (Package { version, .. }, NotInstalled) => Change::Uninstalled {
                version: version.clone(),
            },
            (
                Package {
                    version: from,
                    status: old_status,
                },
                Package {
                    version: to,
                    status,
                },
            ) => {
                if from != to {
                    Change::Version {
                        from: from.clone(),
                        to: to.clone(),
                    }
                } else {
                    Change::Status {
                        from: old_status.clone(),
                        to: status.clone(),
                    }
                }
            }
            // A reference's kind never changes (file# stays a file);
            // anything else is a change of content.
            _ => Change::Content,
        })
    }
}

/// What one run may read, in all its references together.
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    /// Bytes of file content read for one reference.
    pub bytes_per_reference: u64,
    /// Files, directories and links visited for one reference.
    pub entries_per_reference: u64,
    /// Bytes read in the whole run.
    pub bytes_per_run: u64,
    /// Entries visited in the whole run.
    pub entries_per_run: u64,
}

impl Caps {
    /// 64 MiB and 10,000 entries per reference; 256 MiB and 100,000 per run.
    pub const DEFAULT: Caps = Caps {
        bytes_per_reference: 64 << 20,
        entries_per_reference: 10_000,
        bytes_per_run: 256 << 20,
        entries_per_run: 100_000,
    };
}

/// Why a reference could not be read. The message names the reference's
/// path (or package) and, for a limit, the limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct WatchError(pub String);

/// The run's reading budget: what is left of [`Caps`], and the deadline.
#[derive(Debug)]
pub struct Budget {
    caps: Caps,
    deadline: Option<Instant>,
    bytes_used: u64,
    entries_used: u64,
}

impl Budget {
    pub fn new(caps: Caps, deadline: Option<Instant>) -> Self {
        Self {
            caps,
            deadline,
            bytes_used: 0,
            entries_used: 0,
        }
    }

    /// Reading stops at `deadline` from now on (each policy's run has its
    /// own wall clock; the caps hold for the whole `host run`).
    pub fn set_deadline(&mut self, deadline: Instant) {
        self.deadline = Some(deadline);
    }

    /// Counts `bytes` read for a reference that has read `so_far` in all.
    fn read(&mut self, what: &str, bytes: u64, so_far: u64) -> Result<(), WatchError> {
        self.bytes_used += bytes;
        if so_far > self.caps.bytes_per_reference {
            return Err(WatchError(format!(
                "{what}: more than {} bytes to read for one reference",
                self.caps.bytes_per_reference
            )));
        }
        if self.bytes_used > self.caps.bytes_per_run {
            return Err(WatchError(format!(
                "{what}: the run's references hold more than {} bytes to read",
                self.caps.bytes_per_run
            )));
        }
        self.check_time(what)
    }

    /// Counts one entry visited for a reference that has visited `so_far`.
    fn visit(&mut self, what: &str, so_far: u64) -> Result<(), WatchError> {
        self.entries_used += 1;
        if so_far > self.caps.entries_per_reference {
            return Err(WatchError(format!(
                "{what}: more than {} entries for one reference",
                self.caps.entries_per_reference
            )));
        }
        if self.entries_used > self.caps.entries_per_run {
            return Err(WatchError(format!(
                "{what}: the run's references hold more than {} entries",
                self.caps.entries_per_run
            )));
        }
        self.check_time(what)
    }

    fn check_time(&self, what: &str) -> Result<(), WatchError> {
        match self.deadline {
            Some(deadline) if Instant::now() >= deadline => Err(WatchError(format!(
                "{what}: not read, the run's wall-clock limit has passed"
            ))),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(n: u8) -> Fingerprint {
        Fingerprint::File {
            sha256: n.to_string(),
        }
    }

    fn package(version: &str, status: &str) -> Fingerprint {
        Fingerprint::Package {
            version: version.into(),
            status: status.into(),
        }
    }

    #[test]
    fn changes_are_named_as_an_operator_reads_them() {
        assert_eq!(file(1).change_from(&file(1)), None);
        assert_eq!(file(2).change_from(&file(1)), Some(Change::Content));
        assert_eq!(
            file(1).change_from(&Fingerprint::Absent),
            Some(Change::Appeared)
        );
        assert_eq!(
            Fingerprint::Absent.change_from(&file(1)),
            Some(Change::Removed)
        );
        let dir = Fingerprint::Directory { sha256: "1".into() };
        assert_eq!(dir.change_from(&file(1)), Some(Change::Type));
        let installed = "install ok installed";
        assert_eq!(
            package("2.0", installed)
                .change_from(&package("1.0", installed))
                .unwrap()
                .to_string(),
            "version 1.0 -> 2.0"
        );
        assert_eq!(
            package("1.0", installed)
                .change_from(&Fingerprint::NotInstalled)
                .unwrap()
                .to_string(),
            "installed 1.0"
        );
        assert_eq!(
            Fingerprint::NotInstalled
                .change_from(&package("1.0", installed))
                .unwrap()
                .to_string(),
            "removed 1.0"
        );
        assert_eq!(
            package("1.0", "install ok half-configured")
                .change_from(&package("1.0", installed))
                .unwrap()
                .to_string(),
            "status install ok installed -> install ok half-configured"
        );
    }

    #[test]
    fn the_budget_stops_at_each_cap_naming_it() {
        let caps = Caps {
            bytes_per_reference: 10,
            entries_per_reference: 2,
            bytes_per_run: 15,
            entries_per_run: 3,
        };
        let mut budget = Budget::new(caps, None);
        budget.read("/etc/a", 10, 10).unwrap();
        let e = budget.read("/etc/a", 1, 11).unwrap_err();
        assert!(e.0.contains("more than 10 bytes"), "{e}");
        let mut budget = Budget::new(caps, None);
        budget.read("/etc/a", 8, 8).unwrap();
        let e = budget.read("/etc/b", 8, 8).unwrap_err();
        assert!(
            e.0.contains("run's references hold more than 15 bytes"),
            "{e}"
        );
        let mut budget = Budget::new(caps, None);
        budget.visit("/etc/a", 1).unwrap();
        budget.visit("/etc/a", 2).unwrap();
        assert!(budget.visit("/etc/a", 3).is_err());
        let mut budget = Budget::new(caps, Some(Instant::now()));
        assert!(budget
            .visit("/etc/a", 1)
            .unwrap_err()
            .0
            .contains("wall-clock"));
    }
}
