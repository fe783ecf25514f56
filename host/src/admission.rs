//! What a policy or settings file must pass before anything is compiled,
//! parsed or run: found (directories expanded), read once, its signature
//! verified over the exact bytes that will be used and bound to its file
//! name, and its version not older than the one already accepted here.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use sha2::{Digest, Sha256};

use crate::report::SignatureReport;
use crate::signature::Trust;
use crate::text::hex;
use crate::versions::{Version, Versions};

/// The policy files to run: files as given, directories expanded to their
/// `*.wasm` files in name order.
pub fn policy_files(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(path)
                .with_context(|| format!("reading policy directory {}", path.display()))?
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "wasm") && p.is_file())
                .collect();
            if found.is_empty() {
                bail!("policy directory {} holds no *.wasm policy", path.display());
            }
            found.sort();
            files.extend(found);
        } else {
            files.push(path.clone());
        }
    }
    Ok(files)
}

/// How files are admitted in one run.
pub struct Gate<'a> {
    pub trust: &'a Trust,
    pub versions: &'a Versions,
    /// `--allow-unsigned`: nothing is verified, and the report says so.
    pub allow_unsigned: bool,
    /// `--allow-rollback`: an older version runs on purpose.
    pub allow_rollback: bool,
}

/// A file read and admitted: its bytes, and what was checked of them.
pub struct Admitted {
    pub path: PathBuf,
    pub bytes: Vec<u8>,
    pub signature: SignatureReport,
    /// The signed version to record as accepted; `None` when unsigned.
    pub version: Option<Version>,
}

impl Gate<'_> {
    /// Reads `path` once and admits those bytes as a `what` ("policy",
    /// "settings").
    pub fn admit(&self, what: &'static str, path: &Path) -> anyhow::Result<Admitted> {
        let bytes =
            std::fs::read(path).with_context(|| format!("reading {what} {}", path.display()))?;
        self.check(what, path, bytes)
            .with_context(|| format!("refusing {what} {}", path.display()))
    }

    fn check(&self, what: &'static str, path: &Path, bytes: Vec<u8>) -> anyhow::Result<Admitted> {
        if self.allow_unsigned {
            let signature = SignatureReport::unverified(&format!(
                "{what} signature NOT verified (--allow-unsigned) for {}; do not use this in production",
                display_name(path)
            ));
            return Ok(Admitted {
                path: path.to_owned(),
                bytes,
                signature,
                version: None,
            });
        }
        let verified = self.trust.verify(what, path, &bytes)?;
        let version = match verified.signed_at {
            Some(signed_at) => Some(Version {
                key_id: verified.key_id.clone(),
                name: verified.name.clone(),
                signed_at,
                sha256: hex(&Sha256::digest(&bytes)),
            }),
            None if self.allow_rollback => None,
            None => bail!(
                "the signature carries no signing time (`signed:` in host sign's trusted comment, `timestamp:` in minisign's), so its version cannot be checked; sign it again, or run it with --allow-rollback"
            ),
        };
        if let Some(version) = &version {
            self.versions.check(version, self.allow_rollback)?;
        }
        Ok(Admitted {
            path: path.to_owned(),
            bytes,
            signature: SignatureReport::verified(verified),
            version,
        })
    }
}

/// Records the versions of `admitted` as accepted in the record under
/// `state_dir`, read afresh (another run may have accepted a newer version
/// since this one checked) and checked again. Called under the run lock.
pub fn record_versions<'a>(
    state_dir: &Path,
    admitted: impl IntoIterator<Item = &'a Admitted>,
    allow_rollback: bool,
) -> anyhow::Result<()> {
    let mut versions = Versions::open(state_dir)?;
    let mut changed = false;
    for file in admitted {
        if let Some(version) = &file.version {
            versions
                .check(version, allow_rollback)
                .with_context(|| format!("refusing {}", file.path.display()))?;
            changed |= versions.accept(version);
        }
    }
    if changed {
        versions.save()?;
    }
    Ok(())
}

/// The settings document as text.
pub fn settings_text(admitted: &Admitted) -> anyhow::Result<String> {
    String::from_utf8(admitted.bytes.clone()).with_context(|| {
        format!(
            "reading settings {}: not UTF-8 text",
            admitted.path.display()
        )
    })
}

/// A policy's name in reports: its file name.
pub fn display_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}
