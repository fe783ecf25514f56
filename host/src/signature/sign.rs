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
/// `password` is asked for only when the key's KDF field says it is
/// encrypted; `None` from it lets minisign prompt on the terminal.
pub fn sign_policy(
    policy: &Path,
    key: &Path,
    password: impl FnOnce() -> anyhow::Result<Option<String>>,
) -> anyhow::Result<(PathBuf, String)> {
    let bytes = std::fs::read(policy).with_context(|| format!("reading {}", policy.display()))?;
    let key_text = std::fs::read_to_string(key)
        .with_context(|| format!("reading secret key {}", key.display()))?;
    let secret = open_secret_key(&key_text, password)
        .with_context(|| format!("secret key {}", key.display()))?;
    // Signing checks the signature against the key's own public half, so a
    // damaged key (one without a checksum included) fails here, not later on
    // every machine that verifies.
    let public = minisign::PublicKey::from_secret_key(&secret)
        .map_err(|e| anyhow::anyhow!("secret key {}: {e}", key.display()))?;
    let name = policy
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let digest = hex(&Sha256::digest(&bytes));
    let signed = humantime::format_rfc3339_seconds(SystemTime::now());
    let trusted_comment = format!("file:{name} sha256:{digest} signed:{signed}");
    let signature = minisign::sign(
        Some(&public),
        &secret,
        bytes.as_slice(),
        Some(&trusted_comment),
        None,
    )
    .map_err(|e| anyhow::anyhow!("signing with secret key {}: {e}", key.display()))?;
    let path = signature_path_for(policy);
    // A reader never sees half a signature.
    crate::atomic_file::write(&path, signature.to_string().as_bytes(), 0o644)?;
    Ok((path, trusted_comment))
}

/// A minisign secret key as stored: the line after the untrusted comment is
/// the base64 of minisign's `SeckeyStruct`, 158 bytes. Only the fields that
/// decide how to open it are read here; opening is the `minisign` crate's.
mod layout {
    pub(super) const LEN: usize = 158;
    pub(super) const SIG_ALG: std::ops::Range<usize> = 0..2;
    pub(super) const KDF_ALG: std::ops::Range<usize> = 2..4;
    pub(super) const CHK_ALG: std::ops::Range<usize> = 4..6;
    pub(super) const CHECKSUM: std::ops::Range<usize> = 126..158;
    /// Ed25519.
    pub(super) const ED25519: &[u8] = b"Ed";
    /// BLAKE2b checksum.
    pub(super) const BLAKE2B: &[u8] = b"B2";
    /// Encrypted with a key derived from the password by scrypt.
    pub(super) const KDF_SCRYPT: &[u8] = b"Sc";
    /// Not encrypted (`minisign -G -W`, `host keygen --unencrypted`).
    pub(super) const KDF_NONE: &[u8] = b"\0\0";
}

/// Opens a secret key file's text, as minisign does: the key's KDF field
/// says whether it is encrypted, and only an encrypted key asks `password`
/// for its password.
///
/// An unencrypted key made by `minisign -G -W` carries no checksum (its
/// checksum field is zeros; minisign never checks one for an unencrypted
/// key), which the `minisign` crate's `from_unencrypted_box` refuses as
/// corrupted; such a key is read as it is, and the signature made with it is
/// checked against the key's public half instead. An unencrypted key with a
/// checksum (`host keygen --unencrypted`, `minisign -C -W`) must match it.
fn open_secret_key(
    text: &str,
    password: impl FnOnce() -> anyhow::Result<Option<String>>,
) -> anyhow::Result<minisign::SecretKey> {
    let mut lines = text.lines();
    let (Some(_comment), Some(encoded)) = (lines.next(), lines.next()) else {
        bail!("is malformed: expected an untrusted comment line, then the key in base64");
    };
    let raw = decode_base64(encoded.trim())
        .filter(|raw| raw.len() == layout::LEN)
        .context("is malformed: the key line is not a minisign secret key in base64")?;
    if &raw[layout::SIG_ALG] != layout::ED25519 {
        bail!("uses an unsupported signature algorithm (minisign keys are Ed25519)");
    }
    if &raw[layout::CHK_ALG] != layout::BLAKE2B {
        bail!("uses an unsupported checksum algorithm");
    }
    let key_box = || minisign::SecretKeyBox::from_string(text);
    let opened = match &raw[layout::KDF_ALG] {
        kdf if kdf == layout::KDF_NONE => {
            if raw[layout::CHECKSUM].iter().all(|&b| b == 0) {
                minisign::SecretKey::from_bytes(&raw)
            } else {
                minisign::SecretKey::from_unencrypted_box(key_box()?)
            }
        }
        kdf if kdf == layout::KDF_SCRYPT => minisign::SecretKey::from_box(key_box()?, password()?),
        kdf => bail!(
            "uses an unsupported key derivation algorithm {:?} (minisign's are \"Sc\" and none)",
            String::from_utf8_lossy(kdf)
        ),
    };
    opened.map_err(|e| anyhow::anyhow!("cannot be opened: {e}"))
}

/// Standard base64 with `=` padding, as minisign writes keys (with the
/// codec minisign itself uses). `None` for anything else.
fn decode_base64(text: &str) -> Option<Vec<u8>> {
    use ct_codecs::{Base64, Decoder};
    if text.is_empty() {
        return None;
    }
    Base64::decode_to_vec(text, None).ok()
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
        let signature = read_signature("policy", &sig).unwrap();
        let verified = verify_bytes(b"\0asm policy bytes", &signature, &trusted).unwrap();
        assert_eq!(verified.key_id, keys.key_id);
        assert_eq!(verified.trusted_comment.as_raw(), comment);

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
        let err =
            verify_bytes(b"x", &read_signature("policy", &sig).unwrap(), &trusted).unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains(&signer.key_id) && message.contains(&other.key_id),
            "{message}"
        );
    }

    /// The key line of a secret key file, decoded.
    fn raw_key(text: &str) -> Vec<u8> {
        decode_base64(text.lines().nth(1).unwrap()).unwrap()
    }

    /// A secret key file with `raw` as its key, in minisign's encoding.
    fn key_text(raw: &[u8]) -> String {
        minisign::SecretKey::from_bytes(raw)
            .unwrap()
            .to_box(Some("minisign encrypted secret key"))
            .unwrap()
            .to_string()
    }

    /// An unencrypted key as `minisign -G -W` writes it: no checksum.
    fn minisign_w_key() -> (minisign::PublicKey, String) {
        let pair = minisign::KeyPair::generate_unencrypted_keypair().unwrap();
        let mut raw = raw_key(&pair.sk.to_box(None).unwrap().to_string());
        raw[layout::CHECKSUM].fill(0);
        (pair.pk, key_text(&raw))
    }

    fn no_password() -> anyhow::Result<Option<String>> {
        panic!("an unencrypted key needs no password")
    }

    #[test]
    fn base64_decoding_is_standard_and_strict() {
        assert_eq!(decode_base64("Zm9v").unwrap(), b"foo");
        assert_eq!(decode_base64("Zm8=").unwrap(), b"fo");
        assert_eq!(decode_base64("Zg==").unwrap(), b"f");
        assert_eq!(decode_base64("+/+/").unwrap(), [0xfb, 0xff, 0xbf]);
        for bad in ["", "Zm9", "Zg=", "Z===", "Zg==Zm9v", "Zm9v!A==", "Zm-_"] {
            assert_eq!(decode_base64(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn key_without_checksum_from_minisign_w_signs_without_a_password() {
        let scratch = temp_dir("minisign-w");
        let dir = scratch.path();
        let (pk, text) = minisign_w_key();
        assert_eq!(&raw_key(&text)[layout::KDF_ALG], b"\0\0");
        assert!(
            minisign::SecretKey::from_unencrypted_box(text.clone().into()).is_err(),
            "the crate alone refuses it, which is why open_secret_key exists"
        );
        let key = dir.join("minisign.key");
        std::fs::write(&key, &text).unwrap();
        let public = dir.join("minisign.pub");
        std::fs::write(&public, pk.to_box().unwrap().to_string()).unwrap();
        let policy = dir.join("p.wasm");
        std::fs::write(&policy, b"policy").unwrap();
        let (sig, _) = sign_policy(&policy, &key, no_password).unwrap();
        let trusted = load_trusted_keys(&[public], Path::new("/nonexistent")).unwrap();
        verify_bytes(
            b"policy",
            &read_signature("policy", &sig).unwrap(),
            &trusted,
        )
        .unwrap();
    }

    #[test]
    fn damaged_unencrypted_keys_are_refused_without_asking_a_password() {
        // With a checksum (host keygen --unencrypted): the checksum catches it.
        let pair = minisign::KeyPair::generate_unencrypted_keypair().unwrap();
        let mut raw = raw_key(&pair.sk.to_box(None).unwrap().to_string());
        raw[70] ^= 1;
        let err = open_secret_key(&key_text(&raw), no_password).unwrap_err();
        assert!(format!("{err:#}").contains("Corrupted key"), "{err:#}");

        // Without one (minisign -G -W): signing checks the key's public half.
        let scratch = temp_dir("damaged");
        let dir = scratch.path();
        let (_, text) = minisign_w_key();
        let mut raw = raw_key(&text);
        raw[70] ^= 1; // in the Ed25519 seed
        let key = dir.join("damaged.key");
        std::fs::write(&key, key_text(&raw)).unwrap();
        let policy = dir.join("p.wasm");
        std::fs::write(&policy, b"x").unwrap();
        let err = sign_policy(&policy, &key, no_password).unwrap_err();
        assert!(format!("{err:#}").contains("Could not verify"), "{err:#}");
        assert!(!signature_path_for(&policy).exists());
    }

    #[test]
    fn the_kdf_field_decides_whether_a_password_is_asked_for() {
        let pair = minisign::KeyPair::generate_encrypted_keypair(Some("pw".into())).unwrap();
        let text = pair.sk.to_box(None).unwrap().to_string();
        assert_eq!(&raw_key(&text)[layout::KDF_ALG], b"Sc");
        let mut asked = false;
        open_secret_key(&text, || {
            asked = true;
            Ok(Some("pw".into()))
        })
        .unwrap();
        assert!(asked);
        // A password source that fails (no terminal) fails only encrypted keys.
        let err = open_secret_key(&text, || anyhow::bail!("no terminal")).unwrap_err();
        assert!(err.to_string().contains("no terminal"), "{err}");

        let mut raw = raw_key(&text);
        raw[layout::KDF_ALG].copy_from_slice(b"Ar");
        let err = open_secret_key(&key_text(&raw), no_password).unwrap_err();
        assert!(err.to_string().contains("key derivation"), "{err}");
    }

    #[test]
    fn malformed_secret_keys_are_named() {
        for text in [
            "",
            "untrusted comment: only a comment\n",
            "untrusted comment: x\nnot base64\n",
            "untrusted comment: x\nZm9v\n",
        ] {
            let err = open_secret_key(text, no_password).unwrap_err();
            assert!(err.to_string().contains("malformed"), "{text:?}: {err}");
        }
        let pair = minisign::KeyPair::generate_unencrypted_keypair().unwrap();
        let mut raw = raw_key(&pair.sk.to_box(None).unwrap().to_string());
        raw[layout::SIG_ALG].copy_from_slice(b"Xx");
        let err = open_secret_key(&key_text(&raw), no_password).unwrap_err();
        assert!(err.to_string().contains("signature algorithm"), "{err}");
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
