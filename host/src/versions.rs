//! Rollback protection: for each signed name and key, the newest signing time
//! the host has accepted. An older signature of the same name by the same key
//! is refused, so a captured old version cannot be replayed; `--allow-rollback`
//! goes back on purpose.
//!
//! The record is one JSON file, `versions.json`, in the root-only state
//! directory (`--state-dir`, `/var/lib/policy-host`), written atomically and
//! synced. A record that cannot be read or parsed is refused loudly, never
//! treated as empty: an empty record would accept every old version again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::bail;
use serde::{Deserialize, Serialize};

use crate::state_file;

/// The file's format version, so a later host can migrate it.
const FORMAT: u32 = 1;
/// The record is small; anything bigger is not ours.
const MAX_RECORD_BYTES: u64 = 16 << 20;

/// One accepted version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seen {
    /// Signing time, Unix seconds.
    pub signed_at: u64,
    /// SHA-256 of the accepted bytes.
    pub sha256: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Record {
    format: u32,
    /// `KEYID NAME` → the newest version accepted.
    versions: BTreeMap<String, Seen>,
}

impl state_file::Versioned for Record {
    const FORMAT: u32 = FORMAT;

    fn format(&self) -> u32 {
        self.format
    }

    fn empty() -> Self {
        Record {
            format: FORMAT,
            versions: BTreeMap::new(),
        }
    }
}

/// The accepted versions, read once per run.
#[derive(Debug)]
pub struct Versions {
    path: PathBuf,
    record: Record,
}

/// A signed file's identity and version, as rollback protection sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    pub key_id: String,
    pub name: String,
    pub signed_at: u64,
    pub sha256: String,
}

impl Version {
    fn key(&self) -> String {
        format!("{} {}", self.key_id, self.name)
    }
}

fn when(secs: u64) -> String {
    humantime::format_rfc3339_seconds(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
        .to_string()
}

impl Versions {
    /// Reads the record in `dir` (created 0700 when missing, refused when
    /// anyone but root or the running user could write it); a missing
    /// file is an empty record, a damaged one an error.
    pub fn open(dir: &Path) -> anyhow::Result<Self> {
        let (path, record) = state_file::open::<Record>(
            dir,
            "versions.json",
            MAX_RECORD_BYTES,
            "a version record",
            "refusing to treat it as empty, which would accept old versions again (restore it, or move it away to start afresh)",
        )?;
        Ok(Self { path, record })
    }

    /// Whether `version` may run: not older than the newest accepted for its
    /// name and key, unless `allow_rollback`.
    pub fn check(&self, version: &Version, allow_rollback: bool) -> anyhow::Result<()> {
        let Some(seen) = self.record.versions.get(&version.key()) else {
            return Ok(());
        };
        if version.signed_at < seen.signed_at && !allow_rollback {
            bail!(
                "rollback refused: this {} was signed {}, but the version of {} by key {} already accepted here was signed {}; --allow-rollback runs an older version on purpose",
                version.name,
                when(version.signed_at),
                version.name,
                version.key_id,
                when(seen.signed_at)
            );
        }
        Ok(())
    }

    /// The version of `version`'s name and key accepted here, if any: its
    /// signing time.
    pub fn accepted(&self, version: &Version) -> Option<u64> {
        self.record
            .versions
            .get(&version.key())
            .map(|seen| seen.signed_at)
    }

    /// When `signed_at` is written as a date (RFC 3339, UTC).
    pub fn when(signed_at: u64) -> String {
        when(signed_at)
    }

    /// Records `version` as accepted (a rollback run on purpose also becomes
    /// the accepted one: the operator chose it). Returns whether the record
    /// changed, so an unchanged record is not written again on every run.
    pub fn accept(&mut self, version: &Version) -> bool {
        let seen = Seen {
            signed_at: version.signed_at,
            sha256: version.sha256.clone(),
        };
        self.record.versions.insert(version.key(), seen.clone()) != Some(seen)
    }

    /// Writes the record atomically (0600), synced with its directory.
    pub fn save(&self) -> anyhow::Result<()> {
        state_file::write(&self.path, &self.record)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(signed_at: u64) -> Version {
        Version {
            key_id: "ABCD".into(),
            name: "web.wasm".into(),
            signed_at,
            sha256: format!("{signed_at:064}"),
        }
    }

    #[test]
    fn an_older_version_is_refused_after_a_newer_was_accepted() {
        let dir = tempfile::tempdir().unwrap();
        let mut versions = Versions::open(dir.path()).unwrap();
        versions.check(&version(200), false).unwrap();
        assert!(versions.accept(&version(200)));
        assert!(
            !versions.accept(&version(200)),
            "the same version again changes nothing"
        );
        versions.save().unwrap();

        let versions = Versions::open(dir.path()).unwrap();
        versions
            .check(&version(200), false)
            .expect("the same version again");
        versions.check(&version(300), false).expect("a newer one");
        let err = versions
            .check(&version(100), false)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("rollback refused: this web.wasm was signed 1970-01-01T00:01:40Z"),
            "{err}"
        );
        assert!(
            err.contains("already accepted here was signed 1970-01-01T00:03:20Z"),
            "{err}"
        );
        versions
            .check(&version(100), true)
            .expect("--allow-rollback");
        let other_key = Version {
            key_id: "EEEE".into(),
            ..version(100)
        };
        versions
            .check(&other_key, false)
            .expect("versions are per key");
    }

    #[test]
    fn a_damaged_record_is_refused_not_treated_as_empty() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("versions.json"), "{\"format\": 1, \"vers").unwrap();
        let err = format!("{:#}", Versions::open(dir.path()).unwrap_err());
        assert!(
            err.contains("is damaged; refusing to treat it as empty"),
            "{err}"
        );
    }

    #[test]
    fn the_record_is_root_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let mut versions = Versions::open(&state).unwrap();
        versions.accept(&version(1));
        versions.save().unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&state), 0o700);
        assert_eq!(mode(versions.path()), 0o600);
    }
}
