//! Trusted public keys: the `--trusted-key` files, or the system directory.

use std::fmt;
use std::path::{Path, PathBuf};

use super::{read_small_text, SignatureError};

/// A minisign key id, shown as minisign shows it (16 upper-case hex digits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyId(pub [u8; 8]);

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016X}", u64::from_le_bytes(self.0))
    }
}

/// A public key the machine trusts.
#[derive(Debug, Clone)]
pub struct TrustedKey {
    pub id: KeyId,
    pub key: minisign_verify::PublicKey,
    pub file: PathBuf,
}

impl TrustedKey {
    /// Reads a minisign public key file (`untrusted comment:` line, then the
    /// base64 key), or a file holding only the base64 key.
    pub fn from_file(path: &Path) -> Result<Self, SignatureError> {
        let text = read_small_text(path)?;
        let malformed = |reason: String| SignatureError::MalformedKey {
            path: path.to_owned(),
            reason,
        };
        let base64 = key_line(&text).ok_or_else(|| malformed("no base64 key line found".into()))?;
        let key = minisign_verify::PublicKey::from_base64(base64)
            .map_err(|e| malformed(e.to_string()))?;
        let keynum = minisign::PublicKey::from_base64(base64)
            .map_err(|e| malformed(e.to_string()))?
            .keynum()
            .try_into()
            .map_err(|_| malformed("key id is not 8 bytes".into()))?;
        Ok(Self {
            id: KeyId(keynum),
            key,
            file: path.to_owned(),
        })
    }
}

/// The key line: the first line that is neither empty nor a comment.
fn key_line(text: &str) -> Option<&str> {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with("untrusted comment:"))
}

/// Loads every `explicit` key file; when there are none, every `*.pub` file in
/// `system_dir`. Any malformed file is an error (a typo must not silently
/// shrink the trusted set), and so is ending up with no key at all.
pub fn load_trusted_keys(
    explicit: &[PathBuf],
    system_dir: &Path,
) -> Result<Vec<TrustedKey>, SignatureError> {
    let files = if explicit.is_empty() {
        system_key_files(system_dir)?
    } else {
        explicit.to_vec()
    };
    let keys = files
        .iter()
        .map(|f| TrustedKey::from_file(f))
        .collect::<Result<Vec<_>, _>>()?;
    if keys.is_empty() {
        return Err(SignatureError::NoTrustedKeys(system_dir.to_owned()));
    }
    Ok(keys)
}

fn system_key_files(dir: &Path) -> Result<Vec<PathBuf>, SignatureError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(SignatureError::Io {
                path: dir.to_owned(),
                source,
            })
        }
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "pub") && p.is_file())
        .collect();
    files.sort();
    Ok(files)
}
