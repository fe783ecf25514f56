//! The shapes of what travels through a registry, and the checks a pulled
//! one must pass.
//!
//! - A **policy** is a CNCF Wasm OCI Artifact: an image manifest whose config
//!   is `application/vnd.wasm.config.v0+json` (the component's imports and
//!   exports) and whose one layer is the component, `application/wasm`, so
//!   `wkg oci pull` and other tools of the ecosystem can fetch it.
//! - A **settings** document is an OCI 1.1 artifact of its own type
//!   ([`SETTINGS_ARTIFACT`]): the empty config, one layer holding the YAML or
//!   JSON text.
//! - A **signature** (the `.minisig` text) is an artifact of type
//!   [`SIGNATURE_ARTIFACT`] whose `subject` is the signed manifest, found
//!   through the referrers API or its tag fallback.
//!
//! Every layer carries its file name (`org.opencontainers.image.title`),
//! which is only a hint: the name a signature must bind is derived from the
//! repository, never taken from the registry.

use std::collections::BTreeMap;

use anyhow::{bail, Context as _};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::text::hex;

pub const IMAGE_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const IMAGE_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const WASM_CONFIG: &str = "application/vnd.wasm.config.v0+json";
pub const WASM_LAYER: &str = "application/wasm";
/// The OCI 1.1 empty descriptor's media type, and its content `{}`.
pub const EMPTY_CONFIG: &str = "application/vnd.oci.empty.v1+json";
pub const EMPTY_CONFIG_BYTES: &[u8] = b"{}";
pub const SETTINGS_ARTIFACT: &str = "application/vnd.policy-host.settings.v1";
pub const SETTINGS_YAML_LAYER: &str = "application/vnd.policy-host.settings.v1+yaml";
pub const SETTINGS_JSON_LAYER: &str = "application/vnd.policy-host.settings.v1+json";
pub const SIGNATURE_ARTIFACT: &str = "application/vnd.policy-host.signature.v1+minisign";
pub const SIGNATURE_LAYER: &str = "application/vnd.policy-host.signature.v1+minisign";
/// The annotation naming a layer's file.
pub const TITLE: &str = "org.opencontainers.image.title";

/// The most bytes of a manifest or referrers index read (the distribution
/// spec asks registries to accept at least 4 MiB, and ours are under 2 KiB).
pub const MAX_MANIFEST_BYTES: u64 = 4 << 20;
/// The most bytes of a `.minisig` read (real ones are a few hundred).
pub const MAX_SIGNATURE_BYTES: u64 = crate::signature::MAX_SIGNATURE_FILE;

/// What an artifact holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Policy,
    Settings,
}

impl Kind {
    /// How errors and reports name it.
    pub fn what(self) -> &'static str {
        match self {
            Kind::Policy => "policy",
            Kind::Settings => "settings",
        }
    }

    /// How messages name a file of this kind ("the settings file is not
    /// signed"); [`Kind::what`] is also a stored word and never changes.
    pub fn noun(self) -> &'static str {
        match self {
            Kind::Policy => "policy",
            Kind::Settings => "settings file",
        }
    }

    /// The kind a file is pushed as, from its extension.
    pub fn of_file(name: &str) -> anyhow::Result<Self> {
        match name.rsplit_once('.').map(|(_, ext)| ext) {
            Some("wasm") => Ok(Kind::Policy),
            Some("yaml" | "yml" | "json") => Ok(Kind::Settings),
            _ => bail!(
                "{name:?}: push a policy (*.wasm) or a settings document (*.yaml, *.yml, *.json)"
            ),
        }
    }

    /// The kind of artifact a manifest describes, from its config's media
    /// type (a Wasm component) or its artifact type (a settings document);
    /// [`check_artifact`] then checks the rest.
    pub fn of_manifest(manifest: &[u8]) -> anyhow::Result<Self> {
        let manifest: Manifest = serde_json::from_slice(manifest)
            .context("the manifest is not an OCI image manifest")?;
        if manifest.config.media_type == WASM_CONFIG {
            Ok(Kind::Policy)
        } else if manifest.artifact_type.as_deref() == Some(SETTINGS_ARTIFACT) {
            Ok(Kind::Settings)
        } else {
            bail!(
                "neither a policy (config {WASM_CONFIG}) nor a settings document (artifact type {SETTINGS_ARTIFACT}): its config is {} and its artifact type {}",
                manifest.config.media_type,
                manifest.artifact_type.as_deref().unwrap_or("(none)")
            )
        }
    }

    /// The file names a signature may bind for an artifact of this kind in a
    /// repository whose last component is `name`, and whose layer has
    /// `layer_media_type`.
    fn signed_names(self, name: &str, layer_media_type: &str) -> Vec<String> {
        match (self, layer_media_type) {
            (Kind::Settings, SETTINGS_JSON_LAYER) => vec![format!("{name}.json")],
            (Kind::Settings, _) => vec![format!("{name}.yaml"), format!("{name}.yml")],
            (Kind::Policy, _) => vec![format!("{name}.wasm")],
        }
    }
}

/// An OCI content descriptor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    pub media_type: String,
    pub digest: String,
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

impl Descriptor {
    fn of(media_type: &str, bytes: &[u8]) -> Self {
        Self {
            media_type: media_type.to_owned(),
            digest: sha256_digest(bytes),
            size: bytes.len() as u64,
            artifact_type: None,
            annotations: None,
        }
    }

    fn titled(mut self, title: &str) -> Self {
        self.annotations = Some(BTreeMap::from([(TITLE.to_owned(), title.to_owned())]));
        self
    }

    fn title(&self) -> Option<&str> {
        self.annotations.as_ref()?.get(TITLE).map(String::as_str)
    }
}

/// An OCI image manifest (the fields this host writes or reads).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub schema_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    pub config: Descriptor,
    pub layers: Vec<Descriptor>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Descriptor>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// An OCI image index: here, the referrers list.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Index {
    pub schema_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    #[serde(default)]
    pub manifests: Vec<Descriptor>,
}

/// `sha256:<hex>` of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(bytes)))
}

/// A blob to upload.
#[derive(Debug, Clone)]
pub struct Blob {
    pub descriptor: Descriptor,
    pub bytes: Vec<u8>,
}

impl Blob {
    fn new(media_type: &str, bytes: Vec<u8>) -> Self {
        Self {
            descriptor: Descriptor::of(media_type, &bytes),
            bytes,
        }
    }
}

/// An artifact ready to push: its blobs, then its manifest.
#[derive(Debug, Clone)]
pub struct Artifact {
    pub blobs: Vec<Blob>,
    pub manifest: Vec<u8>,
}

impl Artifact {
    fn new(manifest: &Manifest, blobs: Vec<Blob>) -> Self {
        Self {
            blobs,
            manifest: serde_json::to_vec_pretty(manifest).expect("a manifest serializes"),
        }
    }

    /// The manifest's digest: what a pinned reference names.
    pub fn digest(&self) -> String {
        sha256_digest(&self.manifest)
    }

    /// The manifest's descriptor, as a signature's subject names it.
    pub fn descriptor(&self) -> Descriptor {
        Descriptor::of(IMAGE_MANIFEST, &self.manifest)
    }
}

/// The CNCF Wasm OCI config of a component.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct WasmConfig {
    created: String,
    architecture: &'static str,
    os: &'static str,
    layer_digests: Vec<String>,
    component: ComponentWorld,
}

#[derive(Debug, Serialize)]
struct ComponentWorld {
    exports: Vec<String>,
    imports: Vec<String>,
    target: Option<String>,
}

/// The top-level import and export names of a component (its world), read
/// without compiling it. A core module or anything else is refused: only
/// components run here.
fn component_world(bytes: &[u8]) -> anyhow::Result<ComponentWorld> {
    use wasmparser::{Encoding, Parser, Payload};
    let mut world = ComponentWorld {
        exports: Vec::new(),
        imports: Vec::new(),
        target: None,
    };
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        match payload.context("not a WebAssembly component")? {
            Payload::Version { encoding, .. } => {
                if depth == 0 && encoding != Encoding::Component {
                    bail!("a core WebAssembly module, not a component: build it for wasm32-wasip2");
                }
                depth += 1;
            }
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(reader) if depth == 1 => {
                for import in reader {
                    world.imports.push(import?.name.name.to_owned());
                }
            }
            Payload::ComponentExportSection(reader) if depth == 1 => {
                for export in reader {
                    world.exports.push(export?.name.name.to_owned());
                }
            }
            _ => {}
        }
    }
    if depth != 0 {
        bail!("not a WebAssembly component: it ends early");
    }
    Ok(world)
}

/// A policy component as a CNCF Wasm OCI Artifact.
///
/// `created` is the config's `created` time. It is the only input that is
/// not the file itself, so the caller passes a time the file fixes (its
/// signing time): the same file then makes the same artifact, and the same
/// digest, wherever and whenever it is pushed.
pub fn policy_artifact(
    file_name: &str,
    component: Vec<u8>,
    created: std::time::SystemTime,
) -> anyhow::Result<Artifact> {
    let world = component_world(&component).with_context(|| file_name.to_owned())?;
    let layer = Blob::new(WASM_LAYER, component);
    let config = WasmConfig {
        created: humantime::format_rfc3339_seconds(created).to_string(),
        architecture: "wasm",
        os: "wasip2",
        layer_digests: vec![layer.descriptor.digest.clone()],
        component: world,
    };
    let config = Blob::new(
        WASM_CONFIG,
        serde_json::to_vec(&config).expect("a config serializes"),
    );
    let manifest = Manifest {
        schema_version: 2,
        media_type: Some(IMAGE_MANIFEST.to_owned()),
        artifact_type: None,
        config: config.descriptor.clone(),
        layers: vec![layer.descriptor.clone().titled(file_name)],
        subject: None,
        annotations: None,
    };
    Ok(Artifact::new(&manifest, vec![config, layer]))
}

/// A settings document as an artifact of its own type.
pub fn settings_artifact(file_name: &str, text: Vec<u8>) -> anyhow::Result<Artifact> {
    let layer_type = if file_name.ends_with(".json") {
        SETTINGS_JSON_LAYER
    } else {
        SETTINGS_YAML_LAYER
    };
    std::str::from_utf8(&text).with_context(|| format!("{file_name}: not UTF-8 text"))?;
    let layer = Blob::new(layer_type, text);
    let config = Blob::new(EMPTY_CONFIG, EMPTY_CONFIG_BYTES.to_vec());
    let manifest = Manifest {
        schema_version: 2,
        media_type: Some(IMAGE_MANIFEST.to_owned()),
        artifact_type: Some(SETTINGS_ARTIFACT.to_owned()),
        config: config.descriptor.clone(),
        layers: vec![layer.descriptor.clone().titled(file_name)],
        subject: None,
        annotations: None,
    };
    Ok(Artifact::new(&manifest, vec![config, layer]))
}

/// A `.minisig` as a referrer of the manifest it signs.
pub fn signature_artifact(subject: Descriptor, file_name: &str, minisig: Vec<u8>) -> Artifact {
    let layer = Blob::new(SIGNATURE_LAYER, minisig);
    let config = Blob::new(EMPTY_CONFIG, EMPTY_CONFIG_BYTES.to_vec());
    let manifest = Manifest {
        schema_version: 2,
        media_type: Some(IMAGE_MANIFEST.to_owned()),
        artifact_type: Some(SIGNATURE_ARTIFACT.to_owned()),
        config: config.descriptor.clone(),
        layers: vec![layer
            .descriptor
            .clone()
            .titled(&format!("{file_name}.minisig"))],
        subject: Some(subject),
        annotations: None,
    };
    Artifact::new(&manifest, vec![config, layer])
}

/// The referrers-tag fallback index with `referrer` added (once).
pub fn with_referrer(existing: Option<Index>, referrer: Descriptor) -> Vec<u8> {
    let mut index = existing.unwrap_or(Index {
        schema_version: 2,
        media_type: Some(IMAGE_INDEX.to_owned()),
        manifests: Vec::new(),
    });
    index.media_type = Some(IMAGE_INDEX.to_owned());
    if !index.manifests.iter().any(|d| d.digest == referrer.digest) {
        index.manifests.push(referrer);
    }
    serde_json::to_vec_pretty(&index).expect("an index serializes")
}

/// The referrers tag for `digest` (`sha256:abc` → `sha256-abc`).
pub fn referrers_tag(digest: &str) -> String {
    digest.replace(':', "-")
}

/// A pulled artifact's manifest, checked: the one layer to fetch, and the
/// file name its signature must bind.
#[derive(Debug, Clone)]
pub struct Checked {
    pub layer: Descriptor,
    pub signed_name: String,
}

/// Checks a pulled manifest holds one artifact of `kind` no bigger than
/// `max_layer_bytes`; `name` is the repository's last component.
pub fn check_artifact(
    manifest: &[u8],
    kind: Kind,
    name: &str,
    max_layer_bytes: u64,
) -> anyhow::Result<Checked> {
    let manifest: Manifest =
        serde_json::from_slice(manifest).context("the manifest is not an OCI image manifest")?;
    if manifest.schema_version != 2 {
        bail!(
            "the manifest has schemaVersion {}, not 2",
            manifest.schema_version
        );
    }
    if let Some(media_type) = &manifest.media_type {
        if media_type != IMAGE_MANIFEST {
            bail!("the manifest is {media_type}, not an OCI image manifest ({IMAGE_MANIFEST})");
        }
    }
    let (expected_layers, what): (&[&str], &str) = match kind {
        Kind::Policy => {
            if manifest.config.media_type != WASM_CONFIG {
                bail!(
                    "the artifact's config is {}, not a Wasm component's ({WASM_CONFIG})",
                    manifest.config.media_type
                );
            }
            (
                &[WASM_LAYER],
                "a policy artifact has exactly one application/wasm layer",
            )
        }
        Kind::Settings => {
            if manifest.artifact_type.as_deref() != Some(SETTINGS_ARTIFACT) {
                bail!(
                    "the artifact is of type {}, not a settings document ({SETTINGS_ARTIFACT})",
                    manifest.artifact_type.as_deref().unwrap_or("(none)")
                );
            }
            (
                &[SETTINGS_YAML_LAYER, SETTINGS_JSON_LAYER],
                "a settings artifact has exactly one layer",
            )
        }
    };
    let [layer] = manifest.layers.as_slice() else {
        bail!("the artifact has {} layers; {what}", manifest.layers.len());
    };
    if !expected_layers.contains(&layer.media_type.as_str()) {
        bail!(
            "the artifact's layer is {}; expected {}",
            layer.media_type,
            expected_layers.join(" or ")
        );
    }
    if layer.size > max_layer_bytes {
        bail!(
            "the {} is {} bytes, more than the {max_layer_bytes} allowed",
            kind.what(),
            layer.size
        );
    }
    let names = kind.signed_names(name, &layer.media_type);
    let signed_name = layer
        .title()
        .filter(|title| names.iter().any(|n| n == title))
        .unwrap_or(&names[0])
        .to_owned();
    Ok(Checked {
        layer: layer.clone(),
        signed_name,
    })
}

/// Checks a referrer's manifest is a signature of `subject`; returns its
/// one layer.
pub fn check_signature(manifest: &[u8], subject: &str) -> anyhow::Result<Descriptor> {
    let manifest: Manifest =
        serde_json::from_slice(manifest).context("the signature's manifest is malformed")?;
    if manifest.artifact_type.as_deref() != Some(SIGNATURE_ARTIFACT) {
        bail!("not a signature artifact");
    }
    if manifest.subject.as_ref().map(|s| s.digest.as_str()) != Some(subject) {
        bail!("the signature's subject is not {subject}");
    }
    let [layer] = manifest.layers.as_slice() else {
        bail!("a signature artifact has exactly one layer");
    };
    if layer.media_type != SIGNATURE_LAYER || layer.size > MAX_SIGNATURE_BYTES {
        bail!(
            "the signature layer is {} of {} bytes",
            layer.media_type,
            layer.size
        );
    }
    Ok(layer.clone())
}

/// The signature referrers listed in an index, newest last as pushed.
pub fn signature_referrers(index: &[u8]) -> anyhow::Result<Vec<Descriptor>> {
    let index: Index =
        serde_json::from_slice(index).context("the referrers list is not an OCI image index")?;
    Ok(index
        .manifests
        .into_iter()
        .filter(|d| d.artifact_type.as_deref() == Some(SIGNATURE_ARTIFACT))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest component: the preamble of the component encoding.
    const EMPTY_COMPONENT: &[u8] = b"\0asm\x0d\0\x01\0";
    const CORE_MODULE: &[u8] = b"\0asm\x01\0\0\0";
    const SOME_TIME: std::time::SystemTime = std::time::SystemTime::UNIX_EPOCH;

    #[test]
    fn the_same_file_and_time_make_the_same_digest() {
        let a = policy_artifact("web.wasm", EMPTY_COMPONENT.to_vec(), SOME_TIME).unwrap();
        let b = policy_artifact("web.wasm", EMPTY_COMPONENT.to_vec(), SOME_TIME).unwrap();
        assert_eq!(a.digest(), b.digest());
        let later = SOME_TIME + std::time::Duration::from_secs(1);
        let c = policy_artifact("web.wasm", EMPTY_COMPONENT.to_vec(), later).unwrap();
        assert_ne!(a.digest(), c.digest());
        let config: serde_json::Value = serde_json::from_slice(&a.blobs[0].bytes).unwrap();
        assert_eq!(config["created"], "1970-01-01T00:00:00Z");
    }

    #[test]
    fn a_policy_is_a_cncf_wasm_artifact() {
        let artifact = policy_artifact("web.wasm", EMPTY_COMPONENT.to_vec(), SOME_TIME).unwrap();
        let manifest: serde_json::Value = serde_json::from_slice(&artifact.manifest).unwrap();
        assert_eq!(manifest["schemaVersion"], 2);
        assert_eq!(manifest["mediaType"], IMAGE_MANIFEST);
        assert_eq!(manifest["config"]["mediaType"], WASM_CONFIG);
        assert_eq!(manifest["layers"].as_array().unwrap().len(), 1);
        assert_eq!(manifest["layers"][0]["mediaType"], WASM_LAYER);
        assert_eq!(
            manifest["layers"][0]["digest"],
            sha256_digest(EMPTY_COMPONENT)
        );
        let config: serde_json::Value = serde_json::from_slice(&artifact.blobs[0].bytes).unwrap();
        assert_eq!(config["architecture"], "wasm");
        assert_eq!(config["os"], "wasip2");
        assert_eq!(config["layerDigests"][0], sha256_digest(EMPTY_COMPONENT));
        let checked = check_artifact(&artifact.manifest, Kind::Policy, "web", 1 << 20).unwrap();
        assert_eq!(checked.signed_name, "web.wasm");
        // The title is a hint only: another repository binds its own name.
        let checked = check_artifact(&artifact.manifest, Kind::Policy, "db", 1 << 20).unwrap();
        assert_eq!(checked.signed_name, "db.wasm");
    }

    #[test]
    fn a_core_module_is_not_pushed() {
        let err = policy_artifact("web.wasm", CORE_MODULE.to_vec(), SOME_TIME).unwrap_err();
        assert!(format!("{err:#}").contains("not a component"), "{err:#}");
    }

    #[test]
    fn pulled_manifests_are_checked() {
        let policy = policy_artifact("web.wasm", EMPTY_COMPONENT.to_vec(), SOME_TIME).unwrap();
        let err = check_artifact(&policy.manifest, Kind::Policy, "web", 4).unwrap_err();
        assert!(err.to_string().contains("more than the 4 allowed"), "{err}");
        let err = check_artifact(&policy.manifest, Kind::Settings, "web", 1 << 20).unwrap_err();
        assert!(err.to_string().contains("not a settings document"), "{err}");

        let mut two: Manifest = serde_json::from_slice(&policy.manifest).unwrap();
        two.layers.push(two.layers[0].clone());
        let two = serde_json::to_vec(&two).unwrap();
        let err = check_artifact(&two, Kind::Policy, "web", 1 << 20).unwrap_err();
        assert!(err.to_string().contains("has 2 layers"), "{err}");

        let settings = settings_artifact("web.json", b"{}".to_vec()).unwrap();
        let checked = check_artifact(&settings.manifest, Kind::Settings, "web", 1 << 20).unwrap();
        assert_eq!(checked.signed_name, "web.json");
        let settings = settings_artifact("web.yaml", b"a: 1".to_vec()).unwrap();
        let checked = check_artifact(&settings.manifest, Kind::Settings, "web", 1 << 20).unwrap();
        assert_eq!(checked.signed_name, "web.yaml");
    }

    #[test]
    fn a_signature_refers_to_its_subject() {
        let policy = policy_artifact("web.wasm", EMPTY_COMPONENT.to_vec(), SOME_TIME).unwrap();
        let signature = signature_artifact(policy.descriptor(), "web.wasm", b"sig".to_vec());
        let layer = check_signature(&signature.manifest, &policy.digest()).unwrap();
        assert_eq!(layer.digest, sha256_digest(b"sig"));
        assert!(check_signature(&signature.manifest, &sha256_digest(b"other")).is_err());

        let index = with_referrer(None, {
            let mut d = signature.descriptor();
            d.artifact_type = Some(SIGNATURE_ARTIFACT.to_owned());
            d
        });
        let listed = signature_referrers(&index).unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].digest, signature.digest());
        // Adding the same referrer again lists it once.
        let again: Index = serde_json::from_slice(&index).unwrap();
        let index = with_referrer(Some(again), listed[0].clone());
        assert_eq!(signature_referrers(&index).unwrap().len(), 1);
    }
}
