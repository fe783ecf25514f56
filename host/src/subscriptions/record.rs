//! What the host remembers of each subscription between runs: the
//! fingerprint of every reference, per (policy, service, reference), in
//! `subscriptions.json` beside `versions.json` in the root-only state
//! directory. Written atomically; a damaged record refuses the run, naming
//! the file and the way out, as `versions.json` does.
//!
//! The record has a bound of its own: a reference (guest text, up to 4,096
//! bytes) is kept under its own text up to [`MAX_KEY_LEN`] bytes, and a
//! longer one under the SHA-256 of its text ([`Key`]), so that a policy's
//! 10,000 references never make the file, or the host's copy of it, more
//! than a few MB.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::Fingerprint;
use crate::state_file;
use crate::text::hex;

/// The longest reference kept under its own text.
pub const MAX_KEY_LEN: usize = 256;

/// The file's name in the state directory.
pub const FILE_NAME: &str = "subscriptions.json";
/// The file's format version, so a later host can migrate it.
const FORMAT: u32 = 1;
/// The record is small; anything bigger is not ours.
const MAX_RECORD_BYTES: u64 = 64 << 20;

/// policy → service → reference → fingerprint.
type Table = BTreeMap<String, BTreeMap<String, BTreeMap<String, Fingerprint>>>;

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Record {
    format: u32,
    subscriptions: Table,
}

impl state_file::Versioned for Record {
    const FORMAT: u32 = FORMAT;

    fn format(&self) -> u32 {
        self.format
    }

    fn empty() -> Self {
        Record {
            format: FORMAT,
            subscriptions: Table::new(),
        }
    }
}

/// The fingerprints recorded, read once per run.
#[derive(Debug)]
pub struct Records {
    path: PathBuf,
    record: Record,
}

impl Records {
    /// Reads the record in `dir` (root-only, created 0700 when missing); a
    /// missing file is an empty record, a damaged one an error.
    pub fn open(dir: &Path) -> anyhow::Result<Self> {
        let (path, record) = state_file::open::<Record>(
            dir,
            FILE_NAME,
            MAX_RECORD_BYTES,
            "a subscription record",
            "refusing to guess which subscribed files and packages changed (restore it, or move it away to start afresh: every subscription is then recorded again, and nothing restarts)",
        )?;
        Ok(Self { path, record })
    }

    /// The fingerprint recorded for reference `key` of `service` in `policy`.
    pub fn get(&self, policy: &str, service: &str, key: &Key) -> Option<&Fingerprint> {
        self.record
            .subscriptions
            .get(policy)?
            .get(service)?
            .get(&key.0)
    }

    /// Records `fingerprint` for reference `key` of `service` in `policy`.
    pub fn set(&mut self, policy: &str, service: &str, key: &Key, fingerprint: Fingerprint) {
        self.record
            .subscriptions
            .entry(policy.to_owned())
            .or_default()
            .entry(service.to_owned())
            .or_default()
            .insert(key.0.clone(), fingerprint);
    }

    /// Forgets what `policy` no longer subscribes to: every (service,
    /// reference) not in `current`.
    pub fn keep_only(&mut self, policy: &str, current: &BTreeSet<(String, Key)>) {
        let Some(services) = self.record.subscriptions.get_mut(policy) else {
            return;
        };
        for (service, references) in services.iter_mut() {
            references.retain(|reference, _| {
                current.contains(&(service.clone(), Key(reference.clone())))
            });
        }
        services.retain(|_, references| !references.is_empty());
        if services.is_empty() {
            self.record.subscriptions.remove(policy);
        }
    }

    /// Forgets the policies not in `policies` (no longer run at all).
    pub fn keep_policies(&mut self, policies: &BTreeSet<String>) {
        self.record
            .subscriptions
            .retain(|policy, _| policies.contains(policy));
    }

    /// Writes the record atomically (0600), synced with its directory.
    pub fn save(&self) -> anyhow::Result<()> {
        state_file::write(&self.path, &self.record)
    }
}

/// What a reference is recorded under: its own text up to [`MAX_KEY_LEN`]
/// bytes, else `sha256:` and the SHA-256 of its text (no reference the host
/// watches starts so: they are `file#` and `package#`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key(String);

impl Key {
    pub fn of(reference: &str) -> Self {
        if reference.len() <= MAX_KEY_LEN {
            Self(reference.to_owned())
        } else {
            Self(format!(
                "sha256:{}",
                hex(&Sha256::digest(reference.as_bytes()))
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn print(n: u8) -> Fingerprint {
        Fingerprint::File {
            sha256: n.to_string(),
        }
    }

    #[test]
    fn fingerprints_are_kept_per_policy_service_and_reference() {
        let dir = tempfile::tempdir().unwrap();
        let mut records = Records::open(dir.path()).unwrap();
        records.set(
            "p.wasm",
            "httpd",
            &Key::of("file#/etc/httpd.conf"),
            print(1),
        );
        records.set(
            "p.wasm",
            "proxy",
            &Key::of("file#/etc/httpd.conf"),
            print(2),
        );
        records.save().unwrap();
        let mut records = Records::open(dir.path()).unwrap();
        assert_eq!(
            records.get("p.wasm", "httpd", &Key::of("file#/etc/httpd.conf")),
            Some(&print(1))
        );
        assert_eq!(
            records.get("p.wasm", "proxy", &Key::of("file#/etc/httpd.conf")),
            Some(&print(2))
        );
        assert_eq!(
            records.get("q.wasm", "httpd", &Key::of("file#/etc/httpd.conf")),
            None
        );

        let current = BTreeSet::from([("proxy".to_owned(), Key::of("file#/etc/httpd.conf"))]);
        records.keep_only("p.wasm", &current);
        assert_eq!(
            records.get("p.wasm", "httpd", &Key::of("file#/etc/httpd.conf")),
            None
        );
        assert!(records
            .get("p.wasm", "proxy", &Key::of("file#/etc/httpd.conf"))
            .is_some());
        records.keep_policies(&BTreeSet::new());
        assert!(records
            .get("p.wasm", "proxy", &Key::of("file#/etc/httpd.conf"))
            .is_none());
    }

    #[test]
    fn a_long_reference_is_kept_as_the_digest_of_its_text() {
        let dir = tempfile::tempdir().unwrap();
        let mut records = Records::open(dir.path()).unwrap();
        let short = format!("file#/etc/{}", "a".repeat(MAX_KEY_LEN - 10));
        let long = format!("file#/etc/{}", "a".repeat(4000));
        let other = format!("file#/etc/{}b", "a".repeat(3999));
        records.set("p.wasm", "web", &Key::of(&short), print(1));
        records.set("p.wasm", "web", &Key::of(&long), print(2));
        records.save().unwrap();
        let text = std::fs::read_to_string(dir.path().join(FILE_NAME)).unwrap();
        assert!(text.contains(&short), "{text}");
        assert!(!text.contains(&long[..MAX_KEY_LEN + 1]), "{text}");
        assert!(text.contains("\"sha256:"), "{text}");
        assert!(text.len() < 1024, "{text}");

        let mut records = Records::open(dir.path()).unwrap();
        assert_eq!(
            records.get("p.wasm", "web", &Key::of(&short)),
            Some(&print(1))
        );
        assert_eq!(
            records.get("p.wasm", "web", &Key::of(&long)),
            Some(&print(2))
        );
        assert_eq!(records.get("p.wasm", "web", &Key::of(&other)), None);
        let current = BTreeSet::from([("web".to_owned(), Key::of(&long))]);
        records.keep_only("p.wasm", &current);
        assert_eq!(records.get("p.wasm", "web", &Key::of(&short)), None);
        assert_eq!(
            records.get("p.wasm", "web", &Key::of(&long)),
            Some(&print(2))
        );
    }

    #[test]
    fn a_damaged_record_refuses_the_run_naming_the_file_and_the_way_out() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE_NAME), "{\"format\": 1, \"subs").unwrap();
        let err = format!("{:#}", Records::open(dir.path()).unwrap_err());
        assert!(err.contains("subscriptions.json is damaged"), "{err}");
        assert!(err.contains("move it away to start afresh"), "{err}");
    }
}
