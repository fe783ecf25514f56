//! Checking a policy's bytes against its detached signature.

use std::path::Path;

use minisign_verify::{Error as VerifyError, Signature};

use super::keys::{KeyId, TrustedKey};
use super::{read_small_text, SignatureError, Verified};
use crate::text::Untrusted;

/// A parsed signature file and the key id that made it.
pub struct SignatureFile {
    signature: Signature,
    key_id: KeyId,
}

impl SignatureFile {
    /// The signed comment (`file:`, `signed:`), before any key checked it.
    pub fn trusted_comment(&self) -> &str {
        self.signature.trusted_comment()
    }
}

/// Reads and parses `path` (the `.minisig` beside the file); `what` names
/// the signed file in the error when there is no signature.
pub fn read_signature(what: &'static str, path: &Path) -> Result<SignatureFile, SignatureError> {
    let text = match read_small_text(path) {
        Err(SignatureError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Err(SignatureError::MissingSignature {
                what,
                path: path.to_owned(),
            })
        }
        other => other?,
    };
    parse_signature(&path.display().to_string(), &text)
}

/// Parses the text of a `.minisig`; `origin` names where it came from (a
/// file, a registry reference) in the error.
pub fn parse_signature(origin: &str, text: &str) -> Result<SignatureFile, SignatureError> {
    let malformed = |reason: String| SignatureError::MalformedSignature {
        origin: origin.to_owned(),
        reason,
    };
    let signature = Signature::decode(text).map_err(|e| malformed(e.to_string()))?;
    let boxed = minisign::SignatureBox::from_string(text).map_err(|e| malformed(e.to_string()))?;
    let key_id = KeyId(
        boxed
            .keynum()
            .try_into()
            .map_err(|_| malformed("key id is not 8 bytes".into()))?,
    );
    Ok(SignatureFile { signature, key_id })
}

/// Verifies `bytes` against `signature` with whichever trusted key made it.
///
/// The bytes are the very buffer that will be compiled, so what was verified
/// is what runs.
pub fn verify_bytes(
    bytes: &[u8],
    signature: &SignatureFile,
    trusted: &[TrustedKey],
) -> Result<Verified, SignatureError> {
    let key_id = signature.key_id.to_string();
    let Some(key) = trusted.iter().find(|k| k.id == signature.key_id) else {
        let trusted = trusted
            .iter()
            .map(|k| k.id.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        return Err(SignatureError::UntrustedKey { key_id, trusted });
    };
    match key.key.verify(bytes, &signature.signature, false) {
        Ok(()) => Ok(Verified {
            key_id,
            trusted_comment: Untrusted::new(signature.signature.trusted_comment()),
            key_file: key.file.clone(),
            // Filled in from the comment by `Trust::verify_named`.
            name: String::new(),
            signed_at: None,
        }),
        Err(VerifyError::UnexpectedAlgorithm) => Err(SignatureError::LegacySignature),
        Err(VerifyError::UnexpectedKeyId) => {
            let trusted = key.id.to_string();
            Err(SignatureError::UntrustedKey { key_id, trusted })
        }
        // Named by `Trust::verify_named`, which knows the file.
        Err(_) => Err(SignatureError::BadSignature {
            key_id,
            name: "the file".to_owned(),
        }),
    }
}
