//! One registry session: pulls and pushes over HTTPS (or plain HTTP for the
//! registries the operator named insecure), each request bounded by the
//! per-request timeout and by what is left of the run's wall clock, every
//! read bounded in size before it is made.
//!
//! `oci-client` speaks the protocol: authentication (basic, and the bearer
//! token dance), blob downloads with their digest checked, uploads. The one
//! thing it cannot bound is a manifest or referrers read, which it buffers
//! whole; those few requests are made here, on the same TLS stack, and stop
//! at [`layout::MAX_MANIFEST_BYTES`].

use std::future::Future;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;
use oci_client::RegistryOperation;
use reqwest::header::{HeaderValue, ACCEPT, AUTHORIZATION};
use reqwest::StatusCode;

mod capped_sink;
mod errors;

use self::capped_sink::CappedSink;
use self::errors::{check_status, classify, unreachable, Refused};
pub use self::errors::{is_unreachable, Unreachable};
use crate::oci::credentials;
use crate::oci::layout::{self, Descriptor, IMAGE_INDEX, IMAGE_MANIFEST, MAX_MANIFEST_BYTES};
use crate::oci::reference::OciRef;

/// How to reach registries.
#[derive(Debug, Clone)]
pub struct RegistryConfig {
    /// A PEM file of extra certificate authorities (`--registry-ca`).
    pub ca: Option<PathBuf>,
    /// Registries (`host[:port]`) spoken to over plain HTTP.
    pub insecure: Vec<String>,
    /// The longest one request may take.
    pub timeout: Duration,
    /// When the run must be over: no request outlives it.
    pub deadline: Option<Instant>,
    /// The Docker `config.json` holding registry logins (`registry_auth`);
    /// `None`: the default places ([`credentials::config_path`]).
    pub auth: Option<PathBuf>,
}

/// One repository's authentication for one operation.
struct Authorized {
    repository: String,
    operation: RegistryOperation,
    /// The `Authorization` header to send, if any.
    header: Option<String>,
}

/// A connection to registries, for one command.
pub struct Registry {
    /// The process's runtime ([`crate::io_runtime`]).
    runtime: tokio::runtime::Handle,
    client: oci_client::Client,
    http: reqwest::Client,
    config: RegistryConfig,
    /// Repositories authenticated for, and how.
    authorized: Mutex<Vec<Authorized>>,
    /// Registries that did not answer in time during this command, and
    /// what was said: each costs its timeout once, later requests to it
    /// fail at once (the artifacts go to their kept copies).
    silent: Mutex<Vec<(String, String)>>,
}

impl Registry {
    pub fn new(config: RegistryConfig) -> anyhow::Result<Self> {
        // rustls on ring: no C toolchain, and the same provider everywhere.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut extra = Vec::new();
        // Every request is bounded as a whole by [`Self::within`], which names
        // the cause ("no answer within 5s"). The clients' own timeouts are
        // only a backstop, one second later, so the two never race to
        // report the same silence in two different words.
        let backstop = config.timeout + Duration::from_secs(1);
        let mut http = reqwest::Client::builder()
            .connect_timeout(backstop)
            .read_timeout(backstop)
            .user_agent(concat!("policy-host/", env!("CARGO_PKG_VERSION")));
        if let Some(ca) = &config.ca {
            let pem = std::fs::read(ca)
                .with_context(|| format!("reading registry CA {}", ca.display()))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem)
                .with_context(|| format!("registry CA {}: not PEM certificates", ca.display()))?;
            if certs.is_empty() {
                bail!("registry CA {}: no certificate in it", ca.display());
            }
            http = http.tls_certs_merge(certs);
            extra.push(oci_client::client::Certificate {
                encoding: oci_client::client::CertificateEncoding::Pem,
                data: pem,
            });
        }
        let http = http.build().context("setting up the registry client")?;
        let client_config = ClientConfig {
            protocol: if config.insecure.is_empty() {
                ClientProtocol::Https
            } else {
                ClientProtocol::HttpsExcept(config.insecure.clone())
            },
            extra_root_certificates: extra,
            read_timeout: Some(backstop),
            connect_timeout: Some(backstop),
            ..ClientConfig::default()
        };
        let client = oci_client::Client::try_from(client_config)
            .context("setting up the registry client")?;
        let runtime =
            crate::io_runtime::handle().context("starting the registry client's runtime")?;
        Ok(Self {
            runtime,
            client,
            http,
            config,
            authorized: Mutex::new(Vec::new()),
            silent: Mutex::new(Vec::new()),
        })
    }

    /// Where this command reads registry logins from, for messages.
    fn credentials_location(&self) -> String {
        match credentials::config_path(self.config.auth.as_deref()) {
            Some(path) if path.exists() => path.display().to_string(),
            Some(path) => format!("{}, which does not exist", path.display()),
            None => "$DOCKER_CONFIG/config.json or ~/.docker/config.json (neither HOME nor DOCKER_CONFIG is set)".into(),
        }
    }

    fn scheme(&self, registry: &str) -> &'static str {
        if self.config.insecure.iter().any(|r| r == registry) {
            "http"
        } else {
            "https"
        }
    }

    /// The time one request may take now.
    fn request_timeout(&self) -> Duration {
        match self.config.deadline {
            Some(deadline) => self
                .config
                .timeout
                .min(deadline.saturating_duration_since(Instant::now())),
            None => self.config.timeout,
        }
    }

    /// Runs one request to `reference`'s registry within its timeout.
    fn within<T>(
        &self,
        reference: &OciRef,
        request: impl Future<Output = anyhow::Result<T>>,
    ) -> anyhow::Result<T> {
        let registry = &reference.registry;
        if let Some((_, said)) = self
            .silent
            .lock()
            .expect("silent registries")
            .iter()
            .find(|(r, _)| r == registry)
        {
            return Err(Unreachable::down(
                registry,
                format!("{said} earlier in this run; not asked again"),
            )
            .into());
        }
        let timeout = self.request_timeout();
        self.runtime
            .block_on(async { tokio::time::timeout(timeout, request).await })
            .unwrap_or_else(|_| {
                let said = format!("no answer within {}", humantime::format_duration(timeout));
                self.silent
                    .lock()
                    .expect("silent registries")
                    .push((registry.clone(), said.clone()));
                Err(Unreachable::down(registry, said).into())
            })
            .map_err(|e| match e.downcast_ref::<Refused>() {
                Some(refused) => anyhow!(
                    "{refused}; its credentials are read from {}",
                    self.credentials_location()
                ),
                None => e,
            })
    }

    /// Authenticates for `reference`'s repository (once per command): the
    /// credentials from the Docker configuration, exchanged for a token when
    /// the registry asks for one. Returns the `Authorization` header value.
    fn authorize(
        &self,
        reference: &OciRef,
        operation: RegistryOperation,
    ) -> anyhow::Result<Option<String>> {
        let key = format!("{}/{}", reference.registry, reference.repository);
        if let Some(known) = self
            .authorized
            .lock()
            .expect("authorization cache")
            .iter()
            .find(|a| a.repository == key && a.operation == operation)
        {
            return Ok(known.header.clone());
        }
        let auth = credentials::for_registry(self.config.auth.as_deref(), &reference.registry)?;
        let image = reference.client_reference();
        let token = self.within(reference, async {
            self.client
                .auth(&image, &auth, operation)
                .await
                .map_err(|e| classify(&reference.registry, e))
        })?;
        let header = match (token, &auth) {
            (Some(token), _) => Some(format!("Bearer {token}")),
            (None, RegistryAuth::Basic(user, password)) => {
                use ct_codecs::{Base64, Encoder as _};
                let pair = format!("{user}:{password}");
                Some(format!(
                    "Basic {}",
                    Base64::encode_to_string(pair.as_bytes()).expect("base64 of a short string")
                ))
            }
            _ => None,
        };
        self.authorized
            .lock()
            .expect("authorization cache")
            .push(Authorized {
                repository: key,
                operation,
                header: header.clone(),
            });
        Ok(header)
    }

    /// `GET /v2/<repository>/<path>` with `accept`, read to at most
    /// [`MAX_MANIFEST_BYTES`]; `None` on 404.
    fn get_small(
        &self,
        reference: &OciRef,
        path: &str,
        accept: &str,
    ) -> anyhow::Result<Option<(Vec<u8>, Option<String>)>> {
        let authorization = self.authorize(reference, RegistryOperation::Pull)?;
        let url = format!(
            "{}://{}/v2/{}/{path}",
            self.scheme(&reference.registry),
            reference.registry,
            reference.repository
        );
        let registry = &reference.registry;
        self.within(reference, async {
            let mut request = self.http.get(&url).header(ACCEPT, accept);
            if let Some(value) = &authorization {
                request = request.header(AUTHORIZATION, value);
            }
            let mut response = request
                .send()
                .await
                .map_err(|e| unreachable(registry, &e))?;
            let status = response.status();
            if status == StatusCode::NOT_FOUND {
                return Ok(None);
            }
            check_status(registry, status)?;
            if response
                .content_length()
                .is_some_and(|n| n > MAX_MANIFEST_BYTES)
            {
                bail!("{url}: the registry offers more than {MAX_MANIFEST_BYTES} bytes; refused");
            }
            let digest = response
                .headers()
                .get("docker-content-digest")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let mut body = Vec::new();
            while let Some(chunk) = response
                .chunk()
                .await
                .map_err(|e| unreachable(registry, &e))?
            {
                if (body.len() + chunk.len()) as u64 > MAX_MANIFEST_BYTES {
                    bail!("{url}: the registry sent more than {MAX_MANIFEST_BYTES} bytes; refused");
                }
                body.extend_from_slice(&chunk);
            }
            Ok(Some((body, digest)))
        })
    }

    /// The manifest `reference` names, and its digest (computed over the
    /// bytes; a pinned reference must match it).
    pub fn manifest(&self, reference: &OciRef) -> anyhow::Result<(Vec<u8>, String)> {
        let path = format!("manifests/{}", reference.manifest_reference());
        let (bytes, _) = self
            .get_small(reference, &path, IMAGE_MANIFEST)?
            .ok_or_else(|| anyhow!("{reference}: no such manifest in the registry"))?;
        let digest = layout::sha256_digest(&bytes);
        if let Some(pinned) = &reference.digest {
            if *pinned != digest {
                bail!("{reference}: the registry served a manifest whose digest is {digest}");
            }
        }
        Ok((bytes, digest))
    }

    /// The blob `layer` describes, checked against its digest; refused before
    /// any byte is read when it is bigger than `max_bytes`.
    pub fn blob(
        &self,
        reference: &OciRef,
        layer: &Descriptor,
        max_bytes: u64,
    ) -> anyhow::Result<Vec<u8>> {
        if layer.size > max_bytes {
            bail!(
                "{reference}: the blob is {} bytes, more than the {max_bytes} allowed",
                layer.size
            );
        }
        self.authorize(reference, RegistryOperation::Pull)?;
        let image = reference.client_reference();
        let descriptor = oci_client::manifest::OciDescriptor {
            media_type: layer.media_type.clone(),
            digest: layer.digest.clone(),
            size: i64::try_from(layer.size).unwrap_or(i64::MAX),
            ..Default::default()
        };
        let bytes = self.within(reference, async {
            let mut sink = CappedSink::new(layer.size);
            let pulled = self.client.pull_blob(&image, &descriptor, &mut sink).await;
            if sink.overflowed {
                bail!(
                    "{reference}: the registry sent more than the {} bytes of blob {}; refused",
                    layer.size,
                    layer.digest
                );
            }
            pulled.map_err(|e| classify(&reference.registry, e))?;
            Ok(sink.bytes)
        })?;
        if bytes.len() as u64 != layer.size {
            bail!(
                "{reference}: the blob {} is {} bytes, its manifest says {}",
                layer.digest,
                bytes.len(),
                layer.size
            );
        }
        Ok(bytes)
    }

    /// The signature referrers of the manifest `digest` in `reference`'s
    /// repository: the referrers API, or its tag fallback where the registry
    /// has no such API.
    pub fn signature_referrers(
        &self,
        reference: &OciRef,
        digest: &str,
    ) -> anyhow::Result<Vec<Descriptor>> {
        let query = format!(
            "referrers/{digest}?artifactType={}",
            layout::SIGNATURE_ARTIFACT.replace('+', "%2B")
        );
        if let Some((index, _)) = self.get_small(reference, &query, IMAGE_INDEX)? {
            if let Ok(found) = layout::signature_referrers(&index) {
                return Ok(found);
            }
        }
        let tag = format!("manifests/{}", layout::referrers_tag(digest));
        match self.get_small(reference, &tag, IMAGE_INDEX)? {
            Some((index, _)) => layout::signature_referrers(&index),
            None => Ok(Vec::new()),
        }
    }

    /// The `.minisig` texts among `referrers` that sign `digest`; one that
    /// is not a signature of it is skipped with a warning.
    pub fn signatures(
        &self,
        reference: &OciRef,
        digest: &str,
        referrers: &[Descriptor],
    ) -> anyhow::Result<Vec<Vec<u8>>> {
        let mut found = Vec::new();
        for referrer in referrers {
            let pinned = reference.pinned(&referrer.digest);
            let (manifest, _) = self.manifest(&pinned)?;
            match layout::check_signature(&manifest, digest) {
                Ok(layer) => {
                    found.push(self.blob(reference, &layer, layout::MAX_SIGNATURE_BYTES)?)
                }
                Err(e) => tracing::warn!("{pinned}: skipped: {e:#}"),
            }
        }
        Ok(found)
    }

    /// Uploads `blob` unless the repository has it.
    pub fn push_blob(&self, reference: &OciRef, blob: &layout::Blob) -> anyhow::Result<()> {
        self.authorize(reference, RegistryOperation::Push)?;
        let image = reference.client_reference();
        let digest = &blob.descriptor.digest;
        self.within(reference, async {
            let exists = self
                .client
                .blob_exists(&image, digest)
                .await
                .map_err(|e| classify(&reference.registry, e))?;
            if !exists {
                self.client
                    .push_blob(&image, blob.bytes.clone(), digest)
                    .await
                    .map_err(|e| classify(&reference.registry, e))
                    .with_context(|| format!("uploading {digest}"))?;
            }
            Ok(())
        })
    }

    /// Uploads a manifest (or index) under `reference`'s tag or digest.
    pub fn push_manifest(
        &self,
        reference: &OciRef,
        body: &[u8],
        media_type: &'static str,
    ) -> anyhow::Result<()> {
        self.authorize(reference, RegistryOperation::Push)?;
        let image = reference.client_reference();
        self.within(reference, async {
            self.client
                .push_manifest_raw(&image, body.to_vec(), HeaderValue::from_static(media_type))
                .await
                .map_err(|e| classify(&reference.registry, e))
                .with_context(|| format!("uploading the manifest of {reference}"))?;
            Ok(())
        })
    }

    /// The referrers-tag index of `digest`, when there is one.
    pub fn referrers_tag_index(
        &self,
        reference: &OciRef,
        digest: &str,
    ) -> anyhow::Result<Option<layout::Index>> {
        let tag = format!("manifests/{}", layout::referrers_tag(digest));
        self.get_small(reference, &tag, IMAGE_INDEX)?
            .map(|(bytes, _)| {
                serde_json::from_slice(&bytes)
                    .context("the referrers tag is not an OCI image index")
            })
            .transpose()
    }

    /// Whether the registry serves the referrers API for `digest` (it then
    /// lists pushed referrers itself).
    pub fn lists_referrer(&self, reference: &OciRef, digest: &str, referrer: &str) -> bool {
        let query = format!("referrers/{digest}");
        matches!(
            self.get_small(reference, &query, IMAGE_INDEX),
            Ok(Some((index, _))) if serde_json::from_slice::<layout::Index>(&index)
                .is_ok_and(|i| i.manifests.iter().any(|d| d.digest == referrer))
        )
    }
}
