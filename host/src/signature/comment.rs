//! What a signature's trusted comment says about the signed file: its name
//! and when it was signed. The comment is covered by the signature, so these
//! are the signer's claims, bound to the bytes.
//!
//! Two formats are read, the ones the two signing tools write:
//!
//! - `host sign`: `file:NAME sha256:HEX signed:2026-12-03T07:56:57Z`
//! - `minisign -S` (0.8 and later): `timestamp:1796284862<TAB>file:NAME<TAB>hashed`
//!
//! An operator's own pipeline may write either, or any comment made of
//! `key:value` fields separated by tabs (or, without tabs, by spaces): the
//! host needs `file:` (the file name it must run under) and `signed:`
//! (RFC 3339) or `timestamp:` (Unix seconds), the version for rollback
//! protection.

use std::time::{Duration, SystemTime};

/// The claims of one trusted comment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claims {
    /// The file name the signer gave.
    pub file: Option<String>,
    /// When it was signed, in Unix seconds.
    pub signed_at: Option<u64>,
}

impl Claims {
    pub fn parse(comment: &str) -> Self {
        let mut claims = Claims {
            file: None,
            signed_at: None,
        };
        for (key, value) in fields(comment) {
            match key {
                "file" if claims.file.is_none() => claims.file = Some(value.to_owned()),
                "signed" if claims.signed_at.is_none() => {
                    claims.signed_at = humantime::parse_rfc3339_weak(value)
                        .ok()
                        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
                        .as_ref()
                        .map(Duration::as_secs);
                }
                "timestamp" if claims.signed_at.is_none() => {
                    claims.signed_at = value.parse().ok();
                }
                _ => {}
            }
        }
        claims
    }
}

/// `key:value` fields: tab-separated when there is a tab (minisign's
/// format, where a name may hold spaces), otherwise space-separated, with a
/// `file:` value running up to the next ` key:` field (so `host sign`'s names
/// may hold spaces too).
fn fields(comment: &str) -> Vec<(&str, &str)> {
    let mut out = Vec::new();
    if comment.contains('\t') {
        for field in comment.split('\t') {
            if let Some((key, value)) = field.split_once(':') {
                out.push((key.trim(), value));
            }
        }
        return out;
    }
    let mut rest = comment.trim();
    while let Some((key, after)) = rest.split_once(':') {
        let key = key.trim();
        // The value ends where the next ` word:` field starts.
        let end = after
            .match_indices(' ')
            .map(|(i, _)| i)
            .find(|&i| {
                let next = &after[i + 1..];
                next.split_once(':').is_some_and(|(k, _)| {
                    !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                })
            })
            .unwrap_or(after.len());
        out.push((key, &after[..end]));
        rest = after[end..].trim_start();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_host_signs_comment() {
        let claims = Claims::parse("file:web policy.wasm sha256:00ff signed:2026-12-03T07:56:57Z");
        assert_eq!(claims.file.as_deref(), Some("web policy.wasm"));
        assert_eq!(claims.signed_at, Some(1_796_284_617));
    }

    #[test]
    fn reads_minisigns_comment() {
        let claims = Claims::parse("timestamp:1796284862\tfile:web.yaml\thashed");
        assert_eq!(claims.file.as_deref(), Some("web.yaml"));
        assert_eq!(claims.signed_at, Some(1_796_284_862));
    }

    #[test]
    fn a_comment_without_claims_has_none() {
        assert_eq!(
            Claims::parse("my comment"),
            Claims {
                file: None,
                signed_at: None
            }
        );
        assert_eq!(Claims::parse("file:x signed:yesterday").signed_at, None);
    }
}
