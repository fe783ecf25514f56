//! What a registry's failure means: an outage (no connection, no answer in
//! time, a 5xx, a certificate refused, plain HTTP where TLS was expected),
//! after which the last verified copy may run; a refusal (401, 403), which
//! names where the credentials were read; or any other answer. Each says
//! what to change.

use anyhow::{anyhow, bail};
use oci_client::errors::OciDistributionError;
use reqwest::StatusCode;

/// The registry could not be reached, or did not answer in time, or failed
/// on its side (5xx), or its certificate was refused: an outage, after which
/// the last verified copy may run (it was verified by its signature, which a
/// registry cannot forge). Any other refusal is an answer, and is not this.
#[derive(Debug, thiserror::Error)]
pub enum Unreachable {
    /// No connection, no answer in time, a 5xx, a body cut short.
    #[error("registry {registry} cannot be reached: {reason}")]
    Down { registry: String, reason: String },
    /// The TLS handshake failed on the registry's certificate: the network
    /// is fine, and the sentence says what to change.
    #[error("registry {registry}: {problem}")]
    Certificate { registry: String, problem: String },
    /// The registry answered plain HTTP where TLS was expected.
    #[error("registry {registry} answered plain HTTP, not TLS: list it in insecure_registries (host.toml) or pass --insecure-registry {registry}")]
    PlainHttp { registry: String },
}

/// A 401 or 403, before [`Registry::within`] adds where this machine's
/// credentials were looked for.
#[derive(Debug, thiserror::Error)]
#[error("registry {registry} refused access ({answer})")]
pub(super) struct Refused {
    registry: String,
    answer: String,
}

impl Unreachable {
    pub(super) fn down(registry: &str, reason: impl Into<String>) -> Self {
        Unreachable::Down {
            registry: registry.to_owned(),
            reason: reason.into(),
        }
    }
}

/// Whether `error` (or its cause) is an outage rather than an answer.
pub fn is_unreachable(error: &anyhow::Error) -> bool {
    error.chain().any(|e| e.is::<Unreachable>())
}

/// A 5xx is the registry failing (an outage); 401/403 a refusal.
pub(super) fn check_status(registry: &str, status: StatusCode) -> anyhow::Result<()> {
    if status.is_success() {
        return Ok(());
    }
    if status.is_server_error() {
        return Err(Unreachable::down(registry, format!("it answered {status}")).into());
    }
    if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
        return Err(refused_access(registry, &status.to_string()));
    }
    bail!("registry {registry} answered {status}")
}

/// A request that got no answer: the certificate problem when the TLS
/// handshake refused the registry's certificate, otherwise an outage with
/// the transport's own words.
pub(super) fn unreachable(registry: &str, error: &reqwest::Error) -> anyhow::Error {
    if let Some(tls) = tls_problem(registry, error) {
        return tls.into();
    }
    if let Some(status) = error
        .status()
        .filter(|s| *s == StatusCode::UNAUTHORIZED || *s == StatusCode::FORBIDDEN)
    {
        return refused_access(registry, &status.to_string());
    }
    let mut reason = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        reason = format!("{reason}: {cause}");
        source = cause.source();
    }
    if error.is_connect() || error.is_timeout() || error.is_request() || error.is_body() {
        Unreachable::down(registry, reason).into()
    } else {
        anyhow!("registry {registry}: {reason}")
    }
}

/// A handshake that failed on the registry's certificate, or on an answer
/// that was not TLS at all (plain HTTP): each says what to change.
fn tls_problem(registry: &str, error: &(dyn std::error::Error + 'static)) -> Option<Unreachable> {
    if let Some(problem) = certificate_problem(error) {
        return Some(Unreachable::Certificate {
            registry: registry.to_owned(),
            problem,
        });
    }
    rustls_error(error)
        .is_some_and(|e| {
            matches!(
                e,
                rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType)
            )
        })
        .then(|| Unreachable::PlainHttp {
            registry: registry.to_owned(),
        })
}

/// The rustls error somewhere in `error`'s causes. An `io::Error` hides the
/// error it wraps from `source()`, so it is opened with `get_ref`.
fn rustls_error<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut next = Some(error);
    while let Some(cause) = next {
        if let Some(found) = cause.downcast_ref::<rustls::Error>() {
            return Some(found);
        }
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            if let Some(inner) = io.get_ref() {
                if let Some(found) = rustls_error(inner) {
                    return Some(found);
                }
            }
        }
        next = cause.source();
    }
    None
}

/// What was wrong with the registry's certificate, and what fixes it, when
/// that is why the request failed.
fn certificate_problem(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    use rustls::CertificateError as C;
    let rustls::Error::InvalidCertificate(certificate) = rustls_error(error)? else {
        return None;
    };
    Some(match certificate {
        C::UnknownIssuer => "certificate not trusted: UnknownIssuer (signed by an authority this machine does not trust); trust the registry's CA with registry_ca in host.toml or --registry-ca FILE".to_owned(),
        C::NotValidForName | C::NotValidForNameContext { .. } => {
            let names = match certificate {
                C::NotValidForNameContext { presented, .. } if !presented.is_empty() => {
                    format!(" (it names {})", presented.join(", "))
                }
                _ => String::new(),
            };
            format!("certificate not valid for this name: NotValidForName{names}; reach the registry by a name its certificate holds, or have the certificate reissued")
        }
        C::Expired | C::ExpiredContext { .. } => "certificate expired: Expired; the registry's certificate must be renewed (or this machine's clock is wrong)".to_owned(),
        C::NotValidYet | C::NotValidYetContext { .. } => "certificate not valid yet: NotValidYet; this machine's clock may be wrong".to_owned(),
        C::Revoked => "certificate revoked: Revoked".to_owned(),
        other => format!("certificate refused: {other:?}"),
    })
}

/// A 401 or 403: the registry and what it answered ([`Registry::within`]
/// adds where this machine's credentials for it were looked for).
fn refused_access(registry: &str, answer: &str) -> anyhow::Error {
    Refused {
        registry: registry.to_owned(),
        answer: answer.to_owned(),
    }
    .into()
}

/// An `oci-client` error as an outage or a refusal.
pub(super) fn classify(registry: &str, error: OciDistributionError) -> anyhow::Error {
    match error {
        OciDistributionError::RequestError(e) => unreachable(registry, &e),
        OciDistributionError::ServerError { code, message, .. } if code >= 500 => {
            Unreachable::down(registry, format!("it answered {code}: {message}")).into()
        }
        OciDistributionError::IoError(e) => Unreachable::down(registry, e.to_string()).into(),
        OciDistributionError::ServerError { code, .. } if code == 401 || code == 403 => {
            let status = StatusCode::from_u16(code).map_or(code.to_string(), |s| s.to_string());
            refused_access(registry, &status)
        }
        OciDistributionError::UnauthorizedError { .. } => {
            refused_access(registry, &StatusCode::UNAUTHORIZED.to_string())
        }
        OciDistributionError::AuthenticationFailure(why) => {
            refused_access(registry, &format!("authentication failed: {why}"))
        }
        OciDistributionError::RegistryError { envelope, .. }
            if envelope.errors.iter().any(|e| {
                matches!(
                    e.code,
                    oci_client::errors::OciErrorCode::Unauthorized
                        | oci_client::errors::OciErrorCode::Denied
                )
            }) =>
        {
            refused_access(registry, &envelope.to_string())
        }
        other => anyhow!("registry {registry}: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REGISTRY: &str = "registry.example:5000";

    /// What Debian's docker-registry (distribution 2.8) answered a pull
    /// without a login, as the test registry recorded it.
    const UNAUTHORIZED_BODY: &str = r#"{"errors":[{"code":"UNAUTHORIZED","message":"authentication required","detail":[{"Type":"repository","Class":"","Name":"settings/web","Action":"pull"}]}]}"#;
    /// ... and a manifest that is not there.
    const UNKNOWN_MANIFEST_BODY: &str = r#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown","detail":{"Tag":"prod"}}]}"#;

    fn said(error: anyhow::Error) -> (bool, bool, String) {
        let refused = error.chain().any(|e| e.is::<Refused>());
        (is_unreachable(&error), refused, format!("{error:#}"))
    }

    #[test]
    fn a_server_error_is_an_outage_and_a_401_or_403_a_refusal() {
        let (down, refused, text) =
            said(check_status(REGISTRY, StatusCode::BAD_GATEWAY).unwrap_err());
        assert!(down && !refused, "{text}");
        assert_eq!(
            text,
            "registry registry.example:5000 cannot be reached: it answered 502 Bad Gateway"
        );
        for status in [StatusCode::UNAUTHORIZED, StatusCode::FORBIDDEN] {
            let (down, refused, text) = said(check_status(REGISTRY, status).unwrap_err());
            assert!(!down && refused, "{text}");
            assert!(
                text.starts_with("registry registry.example:5000 refused access ("),
                "{text}"
            );
        }
        let (down, refused, text) =
            said(check_status(REGISTRY, StatusCode::NOT_FOUND).unwrap_err());
        assert!(!down && !refused);
        assert_eq!(
            text,
            "registry registry.example:5000 answered 404 Not Found"
        );
        assert!(check_status(REGISTRY, StatusCode::OK).is_ok());
    }

    #[test]
    fn oci_client_answers_are_classified_from_recorded_bodies() {
        let envelope = |body: &str| serde_json::from_str(body).expect("a recorded envelope");
        let (down, refused, text) = said(classify(
            REGISTRY,
            OciDistributionError::RegistryError {
                envelope: envelope(UNAUTHORIZED_BODY),
                url: format!("http://{REGISTRY}/v2/settings/web/manifests/prod"),
            },
        ));
        assert!(!down && refused, "{text}");
        assert!(text.contains("authentication required"), "{text}");

        let (down, refused, text) = said(classify(
            REGISTRY,
            OciDistributionError::RegistryError {
                envelope: envelope(UNKNOWN_MANIFEST_BODY),
                url: format!("http://{REGISTRY}/v2/settings/web/manifests/prod"),
            },
        ));
        assert!(!down && !refused, "an answer, not an outage: {text}");
        assert!(text.contains("manifest unknown"), "{text}");

        let server = |code: u16| OciDistributionError::ServerError {
            code,
            url: format!("http://{REGISTRY}/v2/"),
            message: "upstream failed".into(),
        };
        let (down, _, text) = said(classify(REGISTRY, server(503)));
        assert!(down, "{text}");
        assert!(text.ends_with("it answered 503: upstream failed"), "{text}");
        let (down, refused, _) = said(classify(REGISTRY, server(403)));
        assert!(!down && refused);
        let (_, refused, _) = said(classify(
            REGISTRY,
            OciDistributionError::UnauthorizedError {
                url: format!("http://{REGISTRY}/v2/"),
            },
        ));
        assert!(refused);
        let (down, _, _) = said(classify(
            REGISTRY,
            OciDistributionError::IoError(std::io::Error::other("connection reset by peer")),
        ));
        assert!(down);
    }

    /// The handshake's errors as reqwest carries them: a rustls error inside
    /// an `io::Error`, whose `source()` hides it.
    fn handshake(error: rustls::Error) -> std::io::Error {
        std::io::Error::other(error)
    }

    #[test]
    fn a_refused_certificate_names_what_to_change() {
        let unknown = handshake(rustls::Error::InvalidCertificate(
            rustls::CertificateError::UnknownIssuer,
        ));
        let Some(Unreachable::Certificate { problem, .. }) = tls_problem(REGISTRY, &unknown) else {
            panic!("not a certificate problem");
        };
        assert!(
            problem.contains("registry_ca") && problem.contains("--registry-ca"),
            "{problem}"
        );
        let expired = handshake(rustls::Error::InvalidCertificate(
            rustls::CertificateError::Expired,
        ));
        let Some(Unreachable::Certificate { problem, .. }) = tls_problem(REGISTRY, &expired) else {
            panic!("not a certificate problem");
        };
        assert!(problem.starts_with("certificate expired"), "{problem}");
    }

    #[test]
    fn plain_http_where_tls_was_expected_names_insecure_registries() {
        let plain = handshake(rustls::Error::InvalidMessage(
            rustls::InvalidMessage::InvalidContentType,
        ));
        let error = tls_problem(REGISTRY, &plain).expect("plain HTTP is recognised");
        assert!(matches!(error, Unreachable::PlainHttp { .. }));
        assert_eq!(
            error.to_string(),
            "registry registry.example:5000 answered plain HTTP, not TLS: list it in \
             insecure_registries (host.toml) or pass --insecure-registry registry.example:5000"
        );
        // Any other failure is not a TLS problem.
        assert!(tls_problem(REGISTRY, &std::io::Error::other("connection refused")).is_none());
    }
}
