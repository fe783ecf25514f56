//! What a policy or settings document must pass before anything is
//! compiled, parsed or run: found (directories expanded, references pulled),
//! read once, its signature verified over the exact bytes that will be used
//! and bound to its file name, and its version not older than the one
//! already accepted here. A file and a registry reference pass the same
//! checks; only where the bytes and the signature come from differs.

use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use sha2::{Digest, Sha256};

use crate::oci::{self, Kind, OciRef, Pulled, Registry, Store};
use crate::report::{SignatureReport, SourceReport};
use crate::signature::{SignatureError, Trust, Verified};
use crate::text::hex;
use crate::versions::{Version, Versions};

/// Where a policy or settings document comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    File(PathBuf),
    Oci(OciRef),
}

impl Location {
    /// `oci://...` is a reference; anything else a path.
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        if OciRef::is_reference(text) {
            Ok(Location::Oci(OciRef::parse(text)?))
        } else if text.is_empty() {
            bail!("an empty path")
        } else {
            Ok(Location::File(PathBuf::from(text)))
        }
    }

    pub fn is_remote(&self) -> bool {
        matches!(self, Location::Oci(_))
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::File(path) => write!(f, "{}", path.display()),
            Location::Oci(reference) => write!(f, "{reference}"),
        }
    }
}

/// The policies to run: files as given, directories expanded to their
/// `*.wasm` files in name order, references as they are.
pub fn policy_locations(locations: &[Location]) -> anyhow::Result<Vec<Location>> {
    let mut found = Vec::new();
    for location in locations {
        match location {
            Location::File(path) if path.is_dir() => {
                let mut files: Vec<PathBuf> = std::fs::read_dir(path)
                    .with_context(|| format!("reading policy directory {}", path.display()))?
                    .filter_map(Result::ok)
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "wasm") && p.is_file())
                    .collect();
                if files.is_empty() {
                    bail!("policy directory {} holds no *.wasm policy", path.display());
                }
                files.sort();
                found.extend(files.into_iter().map(Location::File));
            }
            other => found.push(other.clone()),
        }
    }
    Ok(found)
}

/// Registries, for runs that name references.
pub struct Remote {
    pub registry: Registry,
    /// Where verified artifacts are kept; `None` when the cache directory
    /// cannot be used (then every pull downloads, and an outage fails).
    pub store: Option<Store>,
}

/// How files are admitted in one run.
pub struct Gate<'a> {
    pub trust: &'a Trust,
    pub versions: &'a Versions,
    /// `--allow-unsigned`: nothing is verified, and the report says so.
    pub allow_unsigned: bool,
    /// `--allow-rollback`: an older version runs on purpose.
    pub allow_rollback: bool,
    /// How references are pulled; `None` when the run names none.
    pub remote: Option<&'a Remote>,
}

/// A document read and admitted: its bytes, and what was checked of them.
pub struct Admitted {
    /// Where it came from, as given (a path or a reference).
    pub origin: String,
    /// Its name in reports: the file name, or the name its signature binds.
    pub name: String,
    pub bytes: Vec<u8>,
    pub signature: SignatureReport,
    /// The signed version to record as accepted; `None` when unsigned.
    pub version: Option<Version>,
    pub source: SourceReport,
}

impl Gate<'_> {
    /// Reads or pulls `location` once and admits those bytes as a `kind`.
    pub fn admit(&self, kind: Kind, location: &Location) -> anyhow::Result<Admitted> {
        match location {
            Location::File(path) => self.admit_file(kind, path),
            Location::Oci(reference) => self.admit_reference(kind, reference),
        }
    }

    fn admit_file(&self, kind: Kind, path: &Path) -> anyhow::Result<Admitted> {
        let what = kind.noun();
        let bytes =
            std::fs::read(path).with_context(|| format!("reading {what} {}", path.display()))?;
        let source = SourceReport {
            location: path.display().to_string(),
            digest: format!("sha256:{}", hex(&Sha256::digest(&bytes))),
            stale: false,
            stale_reason: None,
        };
        let name = display_name(path);
        self.check(what, &name, bytes, source, |bytes| {
            self.trust.verify(what, path, bytes)
        })
        .with_context(|| format!("refusing {what} {}", path.display()))
    }

    fn admit_reference(&self, kind: Kind, reference: &OciRef) -> anyhow::Result<Admitted> {
        let what = kind.noun();
        let remote = self
            .remote
            .with_context(|| format!("{reference}: no registry client in this run"))?;
        let pulled = oci::pull(&remote.registry, remote.store.as_ref(), reference, kind)?;
        if let Some(reason) = &pulled.stale {
            tracing::warn!(
                "{what} {reference}: the registry cannot be reached, running the last verified copy {} (stale): {reason}",
                pulled.digest
            );
        }
        let source = SourceReport {
            location: reference.to_string(),
            digest: pulled.digest.clone(),
            stale: pulled.stale.is_some(),
            stale_reason: pulled.stale.clone(),
        };
        let mut verified_with = None;
        let admitted = self
            .check(
                what,
                &pulled.signed_name.clone(),
                pulled.bytes.clone(),
                source,
                |bytes| {
                    let (index, verified) = verify_any(self.trust, what, &pulled, bytes)?;
                    verified_with = Some(index);
                    Ok(verified)
                },
            )
            .with_context(|| format!("refusing {what} {reference} ({})", pulled.digest))?;
        if let (Some(index), Some(store), None) = (verified_with, &remote.store, &pulled.stale) {
            let signature = &pulled.signatures[index];
            if pulled.signature_is_new(signature) {
                if let Err(e) = pulled.keep(store, signature) {
                    tracing::warn!("{reference}: not kept for later runs: {e:#}");
                }
            }
        }
        Ok(admitted)
    }

    fn check(
        &self,
        what: &'static str,
        name: &str,
        bytes: Vec<u8>,
        source: SourceReport,
        verify: impl FnOnce(&[u8]) -> Result<Verified, SignatureError>,
    ) -> anyhow::Result<Admitted> {
        let origin = source.location.clone();
        if self.allow_unsigned {
            let signature = SignatureReport::unverified(&format!(
                "{what} signature NOT verified (--allow-unsigned) for {name}; do not use this in production"
            ));
            return Ok(Admitted {
                origin,
                name: name.to_owned(),
                bytes,
                signature,
                version: None,
                source,
            });
        }
        let verified = verify(&bytes)?;
        let version = match verified.signed_at {
            Some(signed_at) => Some(Version {
                key_id: verified.key_id.clone(),
                name: verified.name.clone(),
                signed_at,
                sha256: hex(&Sha256::digest(&bytes)),
            }),
            None if self.allow_rollback => None,
            None => bail!(
                "the signature carries no signing time (`signed:` in {}'s trusted comment, `timestamp:` in minisign's), so its version cannot be checked; sign it again, or run it with --allow-rollback",
                crate::program::command("sign")
            ),
        };
        if let Some(version) = &version {
            self.versions.check(version, self.allow_rollback)?;
        }
        Ok(Admitted {
            origin,
            name: name.to_owned(),
            bytes,
            signature: SignatureReport::verified(verified),
            version,
            source,
        })
    }
}

/// Pulls `reference` from its registry now (no kept copy stands in) and
/// verifies it with the trust and the name binding `run` uses, recording
/// nothing: what `verify` and `inspect` show of a reference before a
/// rollout. Only a failed pull is an `Err`; a bad signature is the verdict.
pub fn examine_reference(
    registry: &Registry,
    trust: &Trust,
    reference: &OciRef,
) -> anyhow::Result<(Pulled, Result<Verified, SignatureError>)> {
    let pulled = oci::pull_fresh(registry, reference)?;
    let verdict =
        verify_any(trust, pulled.kind.noun(), &pulled, &pulled.bytes).map(|(_, verified)| verified);
    Ok((pulled, verdict))
}

/// Verifies `bytes` with every pulled signature and takes the valid one
/// signed last (its `signed:` time; among equal times, the one the registry
/// lists last): re-signing the same bytes makes the newer version, however
/// many older signatures the registry still lists. When none is valid, the
/// error of the one listed last.
fn verify_any(
    trust: &Trust,
    what: &'static str,
    pulled: &Pulled,
    bytes: &[u8],
) -> Result<(usize, Verified), SignatureError> {
    let origin = |i: usize| format!("#{} of {} ({})", i + 1, pulled.reference, pulled.digest);
    let mut refused: Option<SignatureError> = None;
    let mut newest: Option<(usize, Verified)> = None;
    for (i, signature) in pulled.signatures.iter().enumerate().rev() {
        match trust.verify_text(&origin(i), signature, bytes, &pulled.signed_name) {
            Ok(verified) => {
                let newer = newest
                    .as_ref()
                    .is_none_or(|(_, best)| verified.signed_at > best.signed_at);
                if newer {
                    newest = Some((i, verified));
                }
            }
            Err(e) => {
                refused.get_or_insert(e);
            }
        }
    }
    newest.ok_or_else(|| {
        refused.unwrap_or(SignatureError::NoSignatureReferrer {
            what,
            reference: format!("{} ({})", pulled.reference, pulled.digest),
        })
    })
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
                .with_context(|| format!("refusing {}", file.origin))?;
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
    String::from_utf8(admitted.bytes.clone())
        .with_context(|| format!("reading settings {}: not UTF-8 text", admitted.origin))
}

/// A policy's name in reports: its file name.
pub fn display_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}
