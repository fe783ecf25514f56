//! `host verify FILE|REFERENCE`: valid or invalid, the key id and the
//! trusted comment. A reference is pulled from its registry now and checked
//! with the same trust and name binding as `run`; the verdict names the
//! digest the reference pointed to.

use crate::admission::{examine_reference, Location};
use crate::cli::VerifyArgs;
use crate::settings::{resolve_trust, ConfigFile};
use crate::signature::{SignatureError, Verified};
use crate::text::one_line;

pub fn execute(args: &VerifyArgs) -> anyhow::Result<i32> {
    // A configuration problem is an error (exit 1), not an "invalid" verdict.
    let file = ConfigFile::load(args.trust.config.as_deref())?;
    let trust = resolve_trust(&args.trust.trusted_key, &args.trust.flags, &file)?;
    let (shown, verdict) = match Location::parse(&args.policy)? {
        Location::File(path) => {
            let verdict = std::fs::read(&path)
                .map_err(|source| SignatureError::Io {
                    path: path.clone(),
                    source,
                })
                .and_then(|bytes| trust.verify("file", &path, &bytes));
            (path.display().to_string(), verdict)
        }
        Location::Oci(reference) => {
            // A registry that cannot be reached is an error, not a verdict.
            let registry = super::registry_client(&args.registry, &file)?;
            let (pulled, verdict) = examine_reference(&registry, &trust, &reference)?;
            (reference.pinned(&pulled.digest).to_string(), verdict)
        }
    };
    Ok(print_verdict(&shown, verdict))
}

/// The verdict on stdout; the exit code (0 valid, 1 invalid). The comment is
/// the signer's text, and the location may be too: shown escaped, on one line.
fn print_verdict(shown: &str, verdict: Result<Verified, SignatureError>) -> i32 {
    match verdict {
        Ok(verified) => {
            println!("valid: {}", one_line(shown));
            println!("key id: {}", verified.key_id);
            println!("trusted comment: {}", verified.trusted_comment);
            0
        }
        Err(e) => {
            println!("invalid: {}: {}", one_line(shown), one_line(&e.to_string()));
            1
        }
    }
}
