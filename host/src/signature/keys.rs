//! Trusted public keys: the `--trusted-key` files, or the system directory.

use std::fmt;
use std::path::{Path, PathBuf};

use super::{read_small_text, SignatureError};
use crate::fs_safety::{self, Kind, LastLink};

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
/// shrink the trusted set), and so is ending up with no key at all. So is a
/// key file, or the directory, that anyone but root or the running user
/// could change (see [`check_safe`]).
pub fn load_trusted_keys(
    explicit: &[PathBuf],
    system_dir: &Path,
) -> Result<Vec<TrustedKey>, SignatureError> {
    let files = if explicit.is_empty() {
        check_safe(system_dir, Kind::Dir)?;
        system_key_files(system_dir)?
    } else {
        explicit.to_vec()
    };
    let keys = files
        .iter()
        .map(|f| check_safe(f, Kind::File).and_then(|()| TrustedKey::from_file(f)))
        .collect::<Result<Vec<_>, _>>()?;
    if keys.is_empty() {
        return Err(SignatureError::NoTrustedKeys(system_dir.to_owned()));
    }
    Ok(keys)
}

/// Whoever can change a trusted key decides what runs as root, so a key
/// file, the trusted-keys directory, and every directory and symbolic link
/// on their way from `/` must be changeable by root (or the running user)
/// only: checked with [`fs_safety::check`] before anything is read. A
/// missing path passes here and fails where it is read, as before.
fn check_safe(path: &Path, kind: Kind) -> Result<(), SignatureError> {
    match fs_safety::check(path, kind, LastLink::Follow) {
        Err(problem) if !problem.is_missing() => {
            let what = match kind {
                Kind::Dir => "trusted-keys directory",
                Kind::File => "trusted key file",
            };
            Err(SignatureError::Io {
                path: path.to_owned(),
                source: std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    format!(
                        "refusing the {what}: {problem}; only root (or the user running the \
                         host) may be able to change trusted keys"
                    ),
                ),
            })
        }
        _ => Ok(()),
    }
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

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::PermissionsExt;

    use super::super::{generate_key_pair, KeyProtection};
    use super::*;

    fn mode(path: &Path, mode: u32) {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    /// A trusted-keys directory holding one good key, in a private scratch
    /// directory.
    fn key_dir() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let scratch = tempfile::Builder::new()
            .prefix("policy-host-keys-")
            .tempdir()
            .unwrap();
        let generated = generate_key_pair(
            &scratch.path().join("generated"),
            KeyProtection::Unencrypted,
        )
        .unwrap();
        let dir = scratch.path().join("trusted-keys");
        fs::create_dir(&dir).unwrap();
        mode(&dir, 0o755);
        let key = dir.join("ops.pub");
        fs::copy(&generated.public_key, &key).unwrap();
        mode(&key, 0o644);
        (scratch, dir, key)
    }

    fn refused(result: Result<Vec<TrustedKey>, SignatureError>) -> String {
        let err = result.expect_err("refused").to_string();
        assert!(err.contains("may be able to change trusted keys"), "{err}");
        err
    }

    #[test]
    fn a_private_directory_and_key_are_used() {
        let (_scratch, dir, key) = key_dir();
        assert_eq!(load_trusted_keys(&[], &dir).unwrap().len(), 1);
        assert_eq!(
            load_trusted_keys(&[key], Path::new("/none")).unwrap().len(),
            1
        );
    }

    #[test]
    fn a_group_writable_directory_is_refused() {
        let (_scratch, dir, _) = key_dir();
        mode(&dir, 0o775);
        let err = refused(load_trusted_keys(&[], &dir));
        assert!(err.contains("refusing the trusted-keys directory"), "{err}");
        assert!(
            err.contains("writable by group or others (mode 775)"),
            "{err}"
        );
    }

    #[test]
    fn a_group_writable_key_file_is_refused_explicit_or_listed() {
        let (_scratch, dir, key) = key_dir();
        mode(&key, 0o664);
        let err = refused(load_trusted_keys(&[], &dir));
        assert!(err.contains("refusing the trusted key file"), "{err}");
        assert!(
            err.contains("ops.pub is writable by group or others"),
            "{err}"
        );
        refused(load_trusted_keys(&[key], Path::new("/none")));
    }

    #[test]
    fn a_parent_others_can_write_is_refused() {
        let (scratch, dir, key) = key_dir();
        mode(scratch.path(), 0o777);
        let err = refused(load_trusted_keys(&[], &dir));
        assert!(err.contains("mode 777"), "{err}");
        refused(load_trusted_keys(&[key], Path::new("/none")));
        // A sticky one (like /tmp) is fine: others cannot replace our entries.
        mode(scratch.path(), 0o1777);
        assert_eq!(load_trusted_keys(&[], &dir).unwrap().len(), 1);
    }

    #[test]
    fn a_linked_key_is_followed_and_what_it_leads_to_checked() {
        let (scratch, dir, key) = key_dir();
        let link = scratch.path().join("current.pub");
        std::os::unix::fs::symlink(&key, &link).unwrap();
        assert_eq!(
            load_trusted_keys(std::slice::from_ref(&link), Path::new("/none"))
                .unwrap()
                .len(),
            1
        );
        mode(&dir, 0o777);
        refused(load_trusted_keys(&[link], Path::new("/none")));
    }
}
