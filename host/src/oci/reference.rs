//! `oci://REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST]`: where a policy or a
//! settings document lives in a registry.
//!
//! The registry is always written out: nothing is assumed to live on Docker
//! Hub, so a reference means the same on every machine of a fleet.

use std::fmt;
use std::sync::LazyLock;

use anyhow::{bail, Context as _};
use regex::Regex;

/// How a reference is told apart from a file path.
pub const SCHEME: &str = "oci://";

/// The distribution spec's grammar for repository names, tags and digests.
static REPOSITORY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*)*$",
    )
    .expect("repository grammar")
});
static TAG: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$").expect("tag grammar"));
static DIGEST: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^sha256:[a-f0-9]{64}$").expect("digest grammar"));
/// A host name or address, with an optional port.
static REGISTRY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$")
        .expect("registry grammar")
});

/// A parsed `oci://` reference.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OciRef {
    /// `host[:port]`.
    pub registry: String,
    pub repository: String,
    /// `None` only when the reference is pinned by digest alone.
    pub tag: Option<String>,
    /// `sha256:...` when the reference is pinned.
    pub digest: Option<String>,
}

impl OciRef {
    /// Whether `text` is meant as a reference rather than a file path.
    pub fn is_reference(text: &str) -> bool {
        text.starts_with(SCHEME)
    }

    /// Parses `oci://REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST]`; a reference
    /// with neither tag nor digest means the tag `latest`.
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let form = "expected oci://REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST]";
        let rest = text
            .strip_prefix(SCHEME)
            .with_context(|| format!("{text:?}: {form}"))?;
        let (registry, path) = rest
            .split_once('/')
            .with_context(|| format!("{text:?}: no repository; {form}"))?;
        if !REGISTRY.is_match(registry) {
            bail!("{text:?}: {registry:?} is not a registry host[:port]; {form}");
        }
        let (path, digest) = match path.split_once('@') {
            Some((path, digest)) => {
                if !DIGEST.is_match(digest) {
                    bail!("{text:?}: {digest:?} is not a sha256:<64 hex digits> digest");
                }
                (path, Some(digest.to_owned()))
            }
            None => (path, None),
        };
        let (repository, tag) = match path.rsplit_once(':') {
            Some((repository, tag)) => {
                if !TAG.is_match(tag) {
                    bail!("{text:?}: {tag:?} is not a tag (letters, digits, `_`, `.`, `-`; at most 128)");
                }
                (repository, Some(tag.to_owned()))
            }
            None => (path, None),
        };
        if !REPOSITORY.is_match(repository) {
            bail!("{text:?}: {repository:?} is not a repository name (lower-case letters, digits and separators, in `/`-separated parts)");
        }
        let tag = match (&tag, &digest) {
            (None, None) => Some("latest".to_owned()),
            _ => tag,
        };
        Ok(Self {
            registry: registry.to_owned(),
            repository: repository.to_owned(),
            tag,
            digest,
        })
    }

    /// The repository's last path component: what the signed file must be
    /// named after (`.../policies/web:1.4` → `web`).
    pub fn name(&self) -> &str {
        self.repository
            .rsplit('/')
            .next()
            .unwrap_or(&self.repository)
    }

    /// The same repository, pinned to `digest` (the tag dropped).
    pub fn pinned(&self, digest: &str) -> Self {
        Self {
            tag: None,
            digest: Some(digest.to_owned()),
            ..self.clone()
        }
    }

    /// The same repository under another tag.
    pub fn tagged(&self, tag: &str) -> Self {
        Self {
            tag: Some(tag.to_owned()),
            digest: None,
            ..self.clone()
        }
    }

    /// The tag or digest a manifest request names: the digest when pinned.
    pub fn manifest_reference(&self) -> &str {
        self.digest
            .as_deref()
            .or(self.tag.as_deref())
            .unwrap_or("latest")
    }

    /// The form `oci-client` takes.
    pub fn client_reference(&self) -> oci_client::Reference {
        match (&self.tag, &self.digest) {
            (Some(tag), Some(digest)) => oci_client::Reference::with_tag_and_digest(
                self.registry.clone(),
                self.repository.clone(),
                tag.clone(),
                digest.clone(),
            ),
            (_, Some(digest)) => oci_client::Reference::with_digest(
                self.registry.clone(),
                self.repository.clone(),
                digest.clone(),
            ),
            (tag, None) => oci_client::Reference::with_tag(
                self.registry.clone(),
                self.repository.clone(),
                tag.clone().unwrap_or_else(|| "latest".to_owned()),
            ),
        }
    }
}

impl fmt::Display for OciRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SCHEME}{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST_HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn parses_tags_digests_and_ports() {
        let r = OciRef::parse("oci://registry.example.com/policies/web:1.4").unwrap();
        assert_eq!(r.registry, "registry.example.com");
        assert_eq!(r.repository, "policies/web");
        assert_eq!(r.tag.as_deref(), Some("1.4"));
        assert_eq!(r.name(), "web");
        assert_eq!(r.to_string(), "oci://registry.example.com/policies/web:1.4");

        let pinned = format!("oci://127.0.0.1:5000/settings/web@sha256:{DIGEST_HEX}");
        let r = OciRef::parse(&pinned).unwrap();
        assert_eq!(r.registry, "127.0.0.1:5000");
        assert_eq!(r.tag, None);
        assert_eq!(r.manifest_reference(), format!("sha256:{DIGEST_HEX}"));
        assert_eq!(r.to_string(), pinned);

        let both = format!("oci://r.example/a/b:prod@sha256:{DIGEST_HEX}");
        let r = OciRef::parse(&both).unwrap();
        assert_eq!(r.tag.as_deref(), Some("prod"));
        assert_eq!(r.manifest_reference(), format!("sha256:{DIGEST_HEX}"));

        let r = OciRef::parse("oci://localhost:5000/web").unwrap();
        assert_eq!(r.tag.as_deref(), Some("latest"));
        assert_eq!(r.name(), "web");
    }

    #[test]
    fn refuses_what_is_not_a_reference() {
        for bad in [
            "registry.example.com/policies/web:1",
            "oci://registry.example.com",
            "oci:///policies/web",
            "oci://registry.example.com/Policies/web:1",
            "oci://registry.example.com/policies/web:",
            "oci://registry.example.com/policies/web@sha256:abc",
            "oci://registry.example.com/policies/web@md5:0123",
            "oci://registry.example.com/../web:1",
            "oci://reg istry/web:1",
        ] {
            assert!(OciRef::parse(bad).is_err(), "{bad} was accepted");
        }
    }
}
