//! `host verify POLICY`: valid or invalid, the key id and the trusted comment.

use crate::cli::VerifyArgs;
use crate::settings::{resolve_trust, ConfigFile};
use crate::signature::SignatureError;
use crate::text::one_line;

pub fn execute(args: &VerifyArgs) -> anyhow::Result<i32> {
    // A configuration problem is an error (exit 1), not an "invalid" verdict.
    let file = ConfigFile::load(args.trust.config.as_deref())?;
    let trust = resolve_trust(&args.trust.trusted_key, &args.trust.flags, &file)?;
    let bytes = std::fs::read(&args.policy).map_err(|source| SignatureError::Io {
        path: args.policy.clone(),
        source,
    });
    match bytes.and_then(|bytes| trust.verify("file", &args.policy, &bytes)) {
        Ok(verified) => {
            // The comment is the signer's text: shown escaped, on one line.
            println!("valid: {}", one_line(&args.policy.display().to_string()));
            println!("key id: {}", verified.key_id);
            println!("trusted comment: {}", one_line(&verified.trusted_comment));
            Ok(0)
        }
        Err(e) => {
            println!(
                "invalid: {}: {}",
                one_line(&args.policy.display().to_string()),
                one_line(&e.to_string())
            );
            Ok(1)
        }
    }
}
