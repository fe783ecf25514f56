//! Verified artifacts, kept by digest in the root-only cache directory
//! (`<cache-dir>/oci`), so that an unchanged tag costs one manifest request
//! and a registry outage does not stop a fleet from converging.
//!
//! - `blobs/sha256/<hex>`: an artifact's bytes or its `.minisig`, checked
//!   against its digest whenever read;
//! - `manifests/<hex>.json`: what a verified manifest held;
//! - `refs/<hex of the reference>.json`: the manifest a reference last
//!   resolved to and was verified as.
//!
//! Everything is written through [`crate::atomic_file`] (a temporary file,
//! synced, renamed), so a killed run leaves no partial entry. The store is
//! only a cache: what is read from it is verified again before it runs, and
//! a damaged entry is ignored with a warning.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::layout::{sha256_digest, Kind};
use super::reference::OciRef;
use crate::text::hex;
use crate::{atomic_file, fs_safety};

/// The most bytes a kept blob may have (a policy is far smaller).
const MAX_KEPT_BYTES: u64 = 1 << 30;

/// An artifact as verified: its bytes, the signature that verified them,
/// and the name that signature binds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Kept {
    pub signed_name: String,
    #[serde(skip)]
    pub bytes: Vec<u8>,
    #[serde(skip)]
    pub signature: Vec<u8>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestEntry {
    kind: String,
    signed_name: String,
    content: String,
    signature: String,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RefEntry {
    reference: String,
    manifest: String,
}

/// The store of verified artifacts.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

fn warn(message: String) {
    tracing::warn!("artifact store: {message}");
}

impl Store {
    /// Opens `<cache_dir>/oci`, created root-only when missing; refused
    /// (with the reason) when it or a parent is not safe.
    pub fn open(cache_dir: &Path) -> anyhow::Result<Self> {
        let dir = cache_dir.join("oci");
        for dir in [
            cache_dir.to_owned(),
            dir.clone(),
            dir.join("blobs"),
            dir.join("blobs/sha256"),
            dir.join("manifests"),
            dir.join("refs"),
        ] {
            fs_safety::private_dir(&dir)
                .with_context(|| format!("refusing the artifact store {}", dir.display()))?;
        }
        Ok(Self { dir })
    }

    fn blob_path(&self, digest: &str) -> Option<PathBuf> {
        sha256_hex(digest).map(|hex| self.dir.join("blobs/sha256").join(hex))
    }

    fn manifest_path(&self, digest: &str) -> Option<PathBuf> {
        sha256_hex(digest).map(|hex| self.dir.join("manifests").join(format!("{hex}.json")))
    }

    fn ref_path(&self, reference: &OciRef) -> PathBuf {
        let key = hex(&Sha256::digest(reference.to_string().as_bytes()));
        self.dir.join("refs").join(format!("{key}.json"))
    }

    /// A kept blob, if whole.
    fn blob(&self, digest: &str) -> Option<Vec<u8>> {
        let path = self.blob_path(digest)?;
        let bytes = read_private(&path, MAX_KEPT_BYTES)?;
        if sha256_digest(&bytes) != digest {
            warn(format!(
                "{} does not match its digest; ignored",
                path.display()
            ));
            return None;
        }
        Some(bytes)
    }

    fn put_blob(&self, bytes: &[u8]) -> anyhow::Result<String> {
        let digest = sha256_digest(bytes);
        let path = self.blob_path(&digest).expect("a sha256 digest");
        if self.blob(&digest).is_none() {
            atomic_file::write(&path, bytes, 0o600)
                .with_context(|| format!("keeping {}", path.display()))?;
        }
        Ok(digest)
    }

    /// The verified copy of the manifest `digest`, of `kind`, when kept whole.
    pub fn verified(&self, digest: &str, kind: Kind) -> Option<Kept> {
        let path = self.manifest_path(digest)?;
        let text = read_private(&path, 64 << 10)?;
        let entry: ManifestEntry = match serde_json::from_slice(&text) {
            Ok(entry) => entry,
            Err(e) => {
                warn(format!("{} is damaged ({e}); ignored", path.display()));
                return None;
            }
        };
        if entry.kind != kind.what() {
            return None;
        }
        Some(Kept {
            signed_name: entry.signed_name,
            bytes: self.blob(&entry.content)?,
            signature: self.blob(&entry.signature)?,
        })
    }

    /// The manifest digest `reference` last resolved to and was verified as.
    pub fn last_verified(&self, reference: &OciRef) -> Option<String> {
        let path = self.ref_path(reference);
        let text = read_private(&path, 64 << 10)?;
        match serde_json::from_slice::<RefEntry>(&text) {
            Ok(entry) if entry.reference == reference.to_string() => Some(entry.manifest),
            Ok(_) => None,
            Err(e) => {
                warn(format!("{} is damaged ({e}); ignored", path.display()));
                None
            }
        }
    }

    /// Keeps `kept`, verified as the manifest `digest` that `reference`
    /// resolved to. The blobs first, the reference last: a reader never
    /// finds a record whose parts are missing.
    pub fn keep(
        &self,
        reference: &OciRef,
        digest: &str,
        kind: Kind,
        kept: &Kept,
    ) -> anyhow::Result<()> {
        let entry = ManifestEntry {
            kind: kind.what().to_owned(),
            signed_name: kept.signed_name.clone(),
            content: self.put_blob(&kept.bytes)?,
            signature: self.put_blob(&kept.signature)?,
        };
        let path = self
            .manifest_path(digest)
            .with_context(|| format!("{digest} is not a sha256 digest"))?;
        atomic_file::write(&path, &serde_json::to_vec_pretty(&entry)?, 0o600)
            .with_context(|| format!("keeping {}", path.display()))?;
        if self.last_verified(reference).as_deref() != Some(digest) {
            let record = RefEntry {
                reference: reference.to_string(),
                manifest: digest.to_owned(),
            };
            let path = self.ref_path(reference);
            atomic_file::write(&path, &serde_json::to_vec_pretty(&record)?, 0o600)
                .with_context(|| format!("keeping {}", path.display()))?;
        }
        Ok(())
    }
}

/// Reads a store file: absent is `None`; one that is not a regular file
/// owned by root (or this user) and writable by no one else is ignored with
/// a warning.
fn read_private(path: &Path, max: u64) -> Option<Vec<u8>> {
    match fs_safety::check_object(path, fs_safety::Kind::File) {
        Ok(()) => {}
        Err(problem) if problem.is_missing() => return None,
        Err(problem) => {
            warn(format!("{problem}; ignored"));
            return None;
        }
    }
    use std::io::Read as _;
    let mut bytes = Vec::new();
    match std::fs::File::open(path).and_then(|f| f.take(max + 1).read_to_end(&mut bytes)) {
        Ok(n) if n as u64 <= max => Some(bytes),
        Ok(_) => {
            warn(format!("{} is too big; ignored", path.display()));
            None
        }
        Err(e) => {
            warn(format!("reading {}: {e}; ignored", path.display()));
            None
        }
    }
}

/// The 64 hex digits of a `sha256:` digest, or `None`: only such digests
/// become file names, so no digest can name a path outside the store.
fn sha256_hex(digest: &str) -> Option<&str> {
    let hex = digest.strip_prefix("sha256:")?;
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then_some(hex)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("cache")).unwrap();
        (dir, store)
    }

    #[test]
    fn keeps_and_finds_verified_artifacts() {
        let (_dir, store) = store();
        let reference = OciRef::parse("oci://r.example/policies/web:1").unwrap();
        assert_eq!(store.last_verified(&reference), None);
        let digest = sha256_digest(b"manifest");
        let kept = Kept {
            signed_name: "web.wasm".into(),
            bytes: b"component".to_vec(),
            signature: b"minisig".to_vec(),
        };
        store
            .keep(&reference, &digest, Kind::Policy, &kept)
            .unwrap();
        assert_eq!(store.last_verified(&reference), Some(digest.clone()));
        let found = store.verified(&digest, Kind::Policy).unwrap();
        assert_eq!(found.bytes, b"component");
        assert_eq!(found.signature, b"minisig");
        assert_eq!(found.signed_name, "web.wasm");
        assert!(store.verified(&digest, Kind::Settings).is_none());
        let other = OciRef::parse("oci://r.example/policies/web:2").unwrap();
        assert_eq!(store.last_verified(&other), None);
    }

    #[test]
    fn a_damaged_blob_is_not_used() {
        let (_dir, store) = store();
        let reference = OciRef::parse("oci://r.example/policies/web:1").unwrap();
        let digest = sha256_digest(b"manifest");
        let kept = Kept {
            signed_name: "web.wasm".into(),
            bytes: b"component".to_vec(),
            signature: b"minisig".to_vec(),
        };
        store
            .keep(&reference, &digest, Kind::Policy, &kept)
            .unwrap();
        let blob = store.blob_path(&sha256_digest(b"component")).unwrap();
        std::fs::write(&blob, b"tampered").unwrap();
        assert!(store.verified(&digest, Kind::Policy).is_none());
    }
}
