//! Key generation and signing, with the `minisign` crate.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::text::hex;
use anyhow::{bail, Context as _};
use sha2::{Digest, Sha256};

use super::keys::KeyId;

/// How the secret key is stored.
#[derive(Debug, Clone)]
pub enum KeyProtection {
    /// Encrypted with this password (scrypt, as minisign does).
    Password(String),
    /// Not encrypted: for automation, where no one can type a password.
    Unencrypted,
}

/// The files `host keygen` wrote.
#[derive(Debug, Clone)]
pub struct GeneratedKeys {
    pub public_key: PathBuf,
    pub secret_key: PathBuf,
    pub key_id: String,
}

/// `POLICY.wasm` -> `POLICY.wasm.minisig`.
pub fn signature_path_for(policy: &Path) -> PathBuf {
    let mut name = policy.as_os_str().to_owned();
    name.push(".minisig");
    PathBuf::from(name)
}

/// Writes `policy-host.pub` and `policy-host.key` (mode 0600) into `dir`.
/// Refuses to overwrite existing keys: losing a secret key is not undoable.
pub fn generate_key_pair(dir: &Path, protection: KeyProtection) -> anyhow::Result<GeneratedKeys> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let public_key = dir.join("policy-host.pub");
    let secret_key = dir.join("policy-host.key");
    for path in [&public_key, &secret_key] {
        if path.exists() {
            bail!(
                "{} already exists; refusing to overwrite a key",
                path.display()
            );
        }
    }
    let pair = match protection {
        KeyProtection::Password(password) => {
            minisign::KeyPair::generate_encrypted_keypair(Some(password))
        }
        KeyProtection::Unencrypted => minisign::KeyPair::generate_unencrypted_keypair(),
    }
    .context("generating the key pair")?;
    let key_id = KeyId(
        pair.pk
            .keynum()
            .try_into()
            .context("key id is not 8 bytes")?,
    )
    .to_string();
    let pk_text = pair
        .pk
        .to_box()
        .context("encoding the public key")?
        .to_string();
    let sk_text = pair
        .sk
        .to_box(Some(&format!("policy host secret key {key_id}")))
        .context("encoding the secret key")?
        .to_string();
    write_new_file(&secret_key, sk_text.as_bytes(), 0o600)?;
    write_new_file(&public_key, pk_text.as_bytes(), 0o644)?;
    Ok(GeneratedKeys {
        public_key,
        secret_key,
        key_id,
    })
}

fn write_new_file(path: &Path, contents: &[u8], mode: u32) -> anyhow::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.write_all(contents)
        .and_then(|()| file.sync_all())
        .with_context(|| format!("writing {}", path.display()))
}

/// Signs `policy` with the secret key file `key`; writes `POLICY.minisig`.
/// The trusted comment records the file name, its SHA-256 and the time.
/// `password` is asked for only when the key is encrypted; `None` from it
/// lets minisign prompt on the terminal.
pub fn sign_policy(
    policy: &Path,
    key: &Path,
    password: impl FnOnce() -> anyhow::Result<Option<String>>,
) -> anyhow::Result<(PathBuf, String)> {
    let bytes = std::fs::read(policy).with_context(|| format!("reading {}", policy.display()))?;
    let key_text = std::fs::read_to_string(key)
        .with_context(|| format!("reading secret key {}", key.display()))?;
    let key_box = || {
        minisign::SecretKeyBox::from_string(&key_text)
            .with_context(|| format!("secret key {} is malformed", key.display()))
    };
    // An unencrypted key opens without a password; only then is one asked for.
    let secret = match minisign::SecretKey::from_unencrypted_box(key_box()?) {
        Ok(secret) => secret,
        Err(_) => minisign::SecretKey::from_box(key_box()?, password()?)
            .map_err(|e| anyhow::anyhow!("{e}"))
            .with_context(|| format!("opening secret key {}", key.display()))?,
    };
    let name = policy
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let digest = hex(&Sha256::digest(&bytes));
    let signed = humantime::format_rfc3339_seconds(SystemTime::now());
    let trusted_comment = format!("file:{name} sha256:{digest} signed:{signed}");
    let signature = minisign::sign(
        None,
        &secret,
        bytes.as_slice(),
        Some(&trusted_comment),
        None,
    )
    .context("signing")?;
    let path = signature_path_for(policy);
    // A reader never sees half a signature.
    crate::atomic_file::write(&path, signature.to_string().as_bytes(), 0o644)?;
    Ok((path, trusted_comment))
}

#[cfg(test)]
mod tests {
    use super::super::{load_trusted_keys, read_signature, verify_bytes, SignatureError};
    use super::*;

    /// A scratch directory, removed when the returned guard drops.
    fn temp_dir(name: &str) -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix(&format!("policy-host-sign-{name}-"))
            .tempdir()
            .unwrap()
    }

    #[test]
    fn sign_then_verify_round_trip_and_tamper_detection() {
        let scratch = temp_dir("roundtrip");
        let dir = scratch.path();
        let keys = generate_key_pair(
            &dir.join("keys"),
            KeyProtection::Password("correct horse".into()),
        )
        .unwrap();
        let policy = dir.join("p.wasm");
        std::fs::write(&policy, b"\0asm policy bytes").unwrap();
        let (sig, comment) = sign_policy(&policy, &keys.secret_key, || {
            Ok(Some("correct horse".into()))
        })
        .unwrap();
        assert!(comment.starts_with("file:p.wasm sha256:"), "{comment}");

        let trusted = load_trusted_keys(
            std::slice::from_ref(&keys.public_key),
            Path::new("/nonexistent"),
        )
        .unwrap();
        let signature = read_signature(&sig).unwrap();
        let verified = verify_bytes(b"\0asm policy bytes", &signature, &trusted).unwrap();
        assert_eq!(verified.key_id, keys.key_id);
        assert_eq!(verified.trusted_comment, comment);

        let err = verify_bytes(b"\0asm policy bytez", &signature, &trusted).unwrap_err();
        assert!(matches!(err, SignatureError::BadSignature { .. }), "{err}");
    }

    #[test]
    fn wrong_password_is_refused_and_secret_key_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let scratch = temp_dir("password");
        let dir = scratch.path();
        let keys = generate_key_pair(dir, KeyProtection::Password("right".into())).unwrap();
        let mode = std::fs::metadata(&keys.secret_key)
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let policy = dir.join("p.wasm");
        std::fs::write(&policy, b"x").unwrap();
        let err = sign_policy(&policy, &keys.secret_key, || Ok(Some("wrong".into()))).unwrap_err();
        assert!(format!("{err:#}").contains("Wrong password"), "{err:#}");
        assert!(
            generate_key_pair(dir, KeyProtection::Unencrypted).is_err(),
            "no overwrite"
        );
    }

    #[test]
    fn signature_by_another_key_names_its_id() {
        let scratch = temp_dir("untrusted");
        let dir = scratch.path();
        let signer = generate_key_pair(&dir.join("a"), KeyProtection::Unencrypted).unwrap();
        let other = generate_key_pair(&dir.join("b"), KeyProtection::Unencrypted).unwrap();
        let policy = dir.join("p.wasm");
        std::fs::write(&policy, b"x").unwrap();
        let (sig, _) = sign_policy(&policy, &signer.secret_key, || {
            panic!("an unencrypted key needs no password")
        })
        .unwrap();
        let trusted = load_trusted_keys(
            std::slice::from_ref(&other.public_key),
            Path::new("/nonexistent"),
        )
        .unwrap();
        let err = verify_bytes(b"x", &read_signature(&sig).unwrap(), &trusted).unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains(&signer.key_id) && message.contains(&other.key_id),
            "{message}"
        );
    }

    #[test]
    fn no_keys_and_malformed_keys_are_errors() {
        let scratch = temp_dir("nokeys");
        let dir = scratch.path();
        let err = load_trusted_keys(&[], dir).unwrap_err();
        assert!(matches!(err, SignatureError::NoTrustedKeys(_)), "{err}");
        let garbage = dir.join("garbage.pub");
        std::fs::write(&garbage, "untrusted comment: x\nnot base64 at all\n").unwrap();
        let err = load_trusted_keys(&[], dir).unwrap_err();
        assert!(matches!(err, SignatureError::MalformedKey { .. }), "{err}");
    }
}
