//! `host verify POLICY`: valid or invalid, the key id and the trusted comment.

use crate::cli::VerifyArgs;
use crate::settings::{resolve_trust, ConfigFile};
use crate::signature::SignatureError;

pub fn execute(args: &VerifyArgs) -> anyhow::Result<i32> {
    // A configuration problem is an error (exit 1), not an "invalid" verdict.
    let file = ConfigFile::load(args.trust.config.as_deref())?;
    let trust = resolve_trust(&args.trust.trusted_key, &args.trust.flags, &file)?;
    let bytes = std::fs::read(&args.policy).map_err(|source| SignatureError::Io {
        path: args.policy.clone(),
        source,
    });
    match bytes.and_then(|bytes| trust.verify(&args.policy, &bytes)) {
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
