//! `host verify POLICY`: valid or invalid, the key id and the trusted comment.

use crate::cli::VerifyArgs;
use crate::signature::{
    load_trusted_keys, read_signature, signature_path_for, verify_bytes, SignatureError,
};

pub fn execute(args: &VerifyArgs) -> anyhow::Result<i32> {
    let bytes = std::fs::read(&args.policy).map_err(|source| SignatureError::Io {
        path: args.policy.clone(),
        source,
    });
    match bytes.and_then(|bytes| check(args, &bytes)) {
        Ok(verified) => {
            println!("valid: {}", args.policy.display());
            println!("key id: {}", verified.key_id);
            println!("trusted comment: {}", verified.trusted_comment);
            Ok(0)
        }
        Err(e) => {
            println!("invalid: {}: {e}", args.policy.display());
            Ok(1)
        }
    }
}

fn check(args: &VerifyArgs, bytes: &[u8]) -> Result<crate::signature::Verified, SignatureError> {
    let dir = args
        .trust
        .trusted_keys_dir
        .clone()
        .unwrap_or_else(|| crate::signature::DEFAULT_TRUSTED_KEYS_DIR.into());
    let keys = load_trusted_keys(&args.trust.trusted_key, &dir)?;
    let signature = read_signature(&signature_path_for(&args.policy))?;
    verify_bytes(bytes, &signature, &keys)
}
