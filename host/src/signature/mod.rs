//! Signed policies: minisign (Ed25519) detached signatures beside the policy.
//!
//! The format is the standard one, so operators can sign with the `minisign`
//! command-line tool or with `host sign`. Verification uses the
//! `minisign-verify` crate; key generation and signing use `minisign`. Nothing
//! here is hand-rolled cryptography or a hand-rolled file format.

pub mod comment;
mod keys;
mod sign;
mod verify;

use std::path::{Path, PathBuf};

use crate::text::Untrusted;
use serde::Serialize;
use thiserror::Error;

pub use comment::Claims;
pub use keys::{load_trusted_keys, KeyId, TrustedKey};
pub use sign::{generate_key_pair, sign_policy, signature_path_for, GeneratedKeys, KeyProtection};
pub use verify::{parse_signature, read_signature, verify_bytes};

/// The largest signature or key file read; real ones are a few hundred bytes.
pub const MAX_SIGNATURE_FILE: u64 = 64 * 1024;

/// A signature that checked out against a trusted key, for the name it binds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verified {
    pub key_id: String,
    /// The signature file's trusted comment: text from a file, shown escaped.
    pub trusted_comment: Untrusted,
    /// The trusted key file that matched.
    pub key_file: PathBuf,
    /// The file name the signature binds (the comment's `file:`).
    pub name: String,
    /// When it was signed (the comment's `signed:` or `timestamp:`), in Unix
    /// seconds: the version rollback protection compares.
    pub signed_at: Option<u64>,
}

/// Why a policy's signature was refused. Each names its cause in one line.
#[derive(Debug, Error)]
pub enum SignatureError {
    #[error("the {what} is not signed: {} not found (sign it with {} or `minisign -S`; --allow-unsigned skips the check for development)", path.display(), crate::program::command("sign"))]
    MissingSignature { what: &'static str, path: PathBuf },
    #[error("the {what} is not signed: the registry lists no signature for {reference} (sign the file with {} and push it again: {} sends FILE.minisig with it; --allow-unsigned skips the check for development)", crate::program::command("sign"), crate::program::command("push"))]
    NoSignatureReferrer {
        what: &'static str,
        reference: String,
    },
    #[error("the signature names no file: its trusted comment {comment:?} has no `file:` field, so it cannot be bound to a name (sign with {} or `minisign -S`)", crate::program::command("sign"))]
    UnnamedSignature { comment: String },
    #[error("signed as {signed:?}, not as {name:?}: a signature is valid only for the file name it was made for")]
    WrongName { signed: String, name: String },
    #[error("signature {origin} is malformed: {reason}")]
    MalformedSignature { origin: String, reason: String },
    #[error("signature by untrusted key {key_id} (trusted keys: {trusted})")]
    UntrustedKey { key_id: String, trusted: String },
    #[error("bad signature by key {key_id}: {name} was changed after it was signed")]
    BadSignature { key_id: String, name: String },
    #[error("legacy (non-prehashed) minisign signature refused; sign again with {} or minisign 0.8 or later", crate::program::command("sign"))]
    LegacySignature,
    #[error("trusted key file {} is malformed: {reason}", path.display())]
    MalformedKey { path: PathBuf, reason: String },
    #[error("no trusted keys configured: pass --trusted-key FILE, or put *.pub files in {}", .0.display())]
    NoTrustedKeys(PathBuf),
    #[error("reading {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Whom to trust: the keys given one by one, else every `*.pub` file of the
/// trusted-keys directory. The keys are read (and their paths checked) once,
/// at the first verification, however many files a run verifies.
#[derive(Debug)]
pub struct Trust {
    pub keys: Vec<PathBuf>,
    pub keys_dir: PathBuf,
    loaded: std::cell::OnceCell<Vec<TrustedKey>>,
}

impl Trust {
    pub fn new(keys: Vec<PathBuf>, keys_dir: PathBuf) -> Self {
        Self {
            keys,
            keys_dir,
            loaded: std::cell::OnceCell::new(),
        }
    }

    /// The trusted keys, read on first use; an error is not kept, so a
    /// later call reports it again.
    fn trusted(&self) -> Result<&[TrustedKey], SignatureError> {
        if let Some(keys) = self.loaded.get() {
            return Ok(keys);
        }
        let keys = load_trusted_keys(&self.keys, &self.keys_dir)?;
        Ok(self.loaded.get_or_init(|| keys))
    }

    /// The one verification every command makes: `bytes` (read once from
    /// `file`, and the bytes that will be used) against `file`'s `.minisig`
    /// and the trusted keys, and the signature bound to `file`'s name.
    /// `what` ("policy", "settings file", "file") names the file in errors.
    pub fn verify(
        &self,
        what: &'static str,
        file: &Path,
        bytes: &[u8],
    ) -> Result<Verified, SignatureError> {
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        self.verify_named(what, &signature_path_for(file), bytes, &name)
    }

    /// Like [`verify`](Self::verify), with the signature read from
    /// `signature` and bound to `name` (for files that arrive by other ways
    /// than a path beside their signature).
    pub fn verify_named(
        &self,
        what: &'static str,
        signature: &Path,
        bytes: &[u8],
        name: &str,
    ) -> Result<Verified, SignatureError> {
        // The signature first: a file without one is "unsigned", whatever
        // the state of the keys.
        let signature = read_signature(what, signature)?;
        self.verify_parsed(&signature, bytes, name)
    }

    /// Like [`verify_named`](Self::verify_named), with the signature's text
    /// given (a registry referrer's); `origin` names it in errors.
    pub fn verify_text(
        &self,
        origin: &str,
        signature: &[u8],
        bytes: &[u8],
        name: &str,
    ) -> Result<Verified, SignatureError> {
        let text =
            std::str::from_utf8(signature).map_err(|_| SignatureError::MalformedSignature {
                origin: origin.to_owned(),
                reason: "not UTF-8 text".into(),
            })?;
        self.verify_parsed(&parse_signature(origin, text)?, bytes, name)
    }

    fn verify_parsed(
        &self,
        signature: &verify::SignatureFile,
        bytes: &[u8],
        name: &str,
    ) -> Result<Verified, SignatureError> {
        let mut verified =
            verify_bytes(bytes, signature, self.trusted()?).map_err(|e| match e {
                SignatureError::BadSignature { key_id, .. } => SignatureError::BadSignature {
                    key_id,
                    name: name.to_owned(),
                },
                e => e,
            })?;
        let claims = Claims::parse(verified.trusted_comment.as_raw());
        let signed = claims
            .file
            .ok_or_else(|| SignatureError::UnnamedSignature {
                comment: verified.trusted_comment.as_raw().to_owned(),
            })?;
        if signed != name {
            return Err(SignatureError::WrongName {
                signed,
                name: name.to_owned(),
            });
        }
        verified.name = signed;
        verified.signed_at = claims.signed_at;
        Ok(verified)
    }
}

/// Reads a small text file (a key or signature), refusing anything huge.
fn read_small_text(path: &Path) -> Result<String, SignatureError> {
    use std::io::Read;
    let io = |source| SignatureError::Io {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut text = String::new();
    file.take(MAX_SIGNATURE_FILE)
        .read_to_string(&mut text)
        .map_err(io)?;
    Ok(text)
}
