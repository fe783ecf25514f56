//! Resolving a reference to verified-to-be bytes: fresh from the registry,
//! from the store when the manifest is unchanged, or, when the registry
//! cannot be reached, the last copy verified for that reference (stale).

use anyhow::Context as _;

use super::layout::{self, Kind};
use super::reference::OciRef;
use super::registry::{is_unreachable, Registry};
use super::store::{Kept, Store};

/// The most bytes of a policy component pulled.
pub const MAX_POLICY_BYTES: u64 = 256 << 20;
/// The most bytes of a settings document pulled.
pub const MAX_SETTINGS_BYTES: u64 = 16 << 20;

/// An artifact pulled, not yet verified.
#[derive(Debug, Clone)]
pub struct Pulled {
    pub reference: OciRef,
    pub kind: Kind,
    /// The manifest digest the reference resolved to.
    pub digest: String,
    /// The file name its signature must bind.
    pub signed_name: String,
    pub bytes: Vec<u8>,
    /// The `.minisig` texts found for it, in the order the registry lists
    /// them.
    pub signatures: Vec<Vec<u8>>,
    /// When this is the last verified copy because the registry could not
    /// be reached: why.
    pub stale: Option<String>,
    /// The signature kept with the copy these bytes came from, when they
    /// came from the store.
    pub kept_signature: Option<Vec<u8>>,
}

impl Pulled {
    fn from_kept(reference: &OciRef, kind: Kind, digest: String, kept: Kept) -> Self {
        Self {
            reference: reference.clone(),
            kind,
            digest,
            signed_name: kept.signed_name,
            bytes: kept.bytes,
            signatures: vec![kept.signature.clone()],
            stale: None,
            kept_signature: Some(kept.signature),
        }
    }

    /// Whether `signature` is new to the store: not the one kept with the
    /// copy these bytes came from.
    pub fn signature_is_new(&self, signature: &[u8]) -> bool {
        self.kept_signature.as_deref() != Some(signature)
    }

    /// Keeps this artifact, now verified with `signature`, in `store`.
    pub fn keep(&self, store: &Store, signature: &[u8]) -> anyhow::Result<()> {
        let kept = Kept {
            signed_name: self.signed_name.clone(),
            bytes: self.bytes.clone(),
            signature: signature.to_vec(),
        };
        store.keep(&self.reference, &self.digest, self.kind, &kept)
    }
}

fn max_bytes(kind: Kind) -> u64 {
    match kind {
        Kind::Policy => MAX_POLICY_BYTES,
        Kind::Settings => MAX_SETTINGS_BYTES,
    }
}

/// Pulls `reference` as a `kind`.
pub fn pull(
    registry: &Registry,
    store: Option<&Store>,
    reference: &OciRef,
    kind: Kind,
) -> anyhow::Result<Pulled> {
    match fresh(registry, store, reference, kind) {
        Ok(pulled) => Ok(pulled),
        Err(error) if is_unreachable(&error) => {
            let kept = store.and_then(|store| {
                let digest = store.last_verified(reference)?;
                let kept = store.verified(&digest, kind)?;
                Some((digest, kept))
            });
            let Some((digest, kept)) = kept else {
                return Err(error.context(format!(
                    "pulling {reference} (no verified copy of it is kept on this machine)"
                )));
            };
            let mut pulled = Pulled::from_kept(reference, kind, digest, kept);
            pulled.stale = Some(format!("{error:#}"));
            Ok(pulled)
        }
        Err(error) => Err(error.context(format!("pulling {reference}"))),
    }
}

/// Pulls `reference` from the registry itself, whatever kind of artifact it
/// is (the manifest says), for a command that shows what a reference points
/// to now: no kept copy stands in for it, and nothing is kept.
pub fn pull_fresh(registry: &Registry, reference: &OciRef) -> anyhow::Result<Pulled> {
    let (manifest, digest) = registry
        .manifest(reference)
        .with_context(|| format!("pulling {reference}"))?;
    let kind = Kind::of_manifest(&manifest)
        .with_context(|| format!("{reference} ({digest}) is not a policy-host artifact"))?;
    from_manifest(registry, None, reference, kind, manifest, digest)
        .with_context(|| format!("pulling {reference}"))
}

fn fresh(
    registry: &Registry,
    store: Option<&Store>,
    reference: &OciRef,
    kind: Kind,
) -> anyhow::Result<Pulled> {
    let (manifest, digest) = registry.manifest(reference)?;
    from_manifest(registry, store, reference, kind, manifest, digest)
}

/// The rest of a pull, once the manifest is read: its checks, the layer
/// (from the store when it was verified here before), the signatures.
fn from_manifest(
    registry: &Registry,
    store: Option<&Store>,
    reference: &OciRef,
    kind: Kind,
    manifest: Vec<u8>,
    digest: String,
) -> anyhow::Result<Pulled> {
    let checked = layout::check_artifact(&manifest, kind, reference.name(), max_bytes(kind))
        .with_context(|| format!("{reference} ({digest}) is not a {} artifact", kind.what()))?;
    // The signatures are always the registry's: a signature pushed since
    // (the same bytes signed again, to roll the fleet back or under a new
    // key) counts as soon as it is there. The kept signature stands in only
    // when the registry cannot be reached (`pull`).
    let referrers = registry.signature_referrers(reference, &digest)?;
    let signatures = registry.signatures(reference, &digest, &referrers)?;
    // Unchanged since it was verified here: the content is not downloaded again.
    let kept = store
        .and_then(|store| store.verified(&digest, kind))
        .filter(|kept| kept.signed_name == checked.signed_name);
    let (bytes, kept_signature) = match kept {
        Some(kept) => (kept.bytes, Some(kept.signature)),
        None => (
            registry.blob(reference, &checked.layer, max_bytes(kind))?,
            None,
        ),
    };
    Ok(Pulled {
        reference: reference.clone(),
        kind,
        digest,
        signed_name: checked.signed_name,
        bytes,
        signatures,
        stale: None,
        kept_signature,
    })
}
