//! `host verify FILE|REFERENCE`: valid or invalid, the key id and the
//! trusted comment. A reference is pulled from its registry now and checked
//! with the same trust and name binding as `run`; the verdict names the
//! digest the reference pointed to.

use crate::admission::{examine_reference, Location};
use crate::cli::VerifyArgs;
use crate::settings::{resolve_trust, ConfigFile};
use crate::signature::{SignatureError, Verified};
use crate::text::one_line;
use crate::versions::{Version, Versions};

use std::path::Path;

pub fn execute(args: &VerifyArgs) -> anyhow::Result<i32> {
    // A configuration problem is an error (exit 1), not an "invalid" verdict.
    let file = ConfigFile::load(args.trust.config.path())?;
    let trust = resolve_trust(&args.trust.trusted_key, &args.trust.flags, &file)?;
    let state_dir = args.state_flags.resolve(&file)?.state_dir;
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
    let here = verdict.as_ref().ok().map(|v| here(v, &state_dir));
    Ok(print_verdict(&shown, verdict, here))
}

/// What this machine's rollback record says of a valid signature: whether
/// a run here would take it.
enum Here {
    /// A run takes it: the first of its name and key here, or not older.
    Runs(String),
    /// A run refuses it, and why.
    Refused(String),
    /// The record could not be read (not root, a damaged record): unknown.
    Unknown(String),
}

fn here(verified: &Verified, state_dir: &Path) -> Here {
    let Some(signed_at) = verified.signed_at else {
        return Here::Refused(
            "it carries no signing time, so a run refuses it (--allow-rollback runs it on purpose)"
                .to_owned(),
        );
    };
    let record = state_dir.join("versions.json");
    if !record.exists() {
        return Here::Runs(format!(
            "nothing accepted here yet ({} does not exist)",
            record.display()
        ));
    }
    let versions = match Versions::open(state_dir) {
        Ok(versions) => versions,
        Err(e) => return Here::Unknown(format!("{e:#}")),
    };
    let version = Version {
        key_id: verified.key_id.clone(),
        name: verified.name.clone(),
        signed_at,
        sha256: String::new(),
    };
    match versions.accepted(&version) {
        None => Here::Runs(format!(
            "the first {} by key {} on this machine",
            verified.name, verified.key_id
        )),
        Some(accepted) if signed_at < accepted => Here::Refused(format!(
            "older than the version this machine accepted (this one was signed {}; the {} by key {} accepted here was signed {}): a run refuses it (--allow-rollback runs it on purpose)",
            Versions::when(signed_at),
            verified.name,
            verified.key_id,
            Versions::when(accepted)
        )),
        Some(accepted) => Here::Runs(format!(
            "not older than the version this machine accepted (signed {})",
            Versions::when(accepted)
        )),
    }
}

/// The verdict on stdout; the exit code: 0 valid (and not refused by this
/// machine's rollback record), 1 invalid or refused here. The comment is the
/// signer's text, and the location may be too: shown escaped, on one line.
fn print_verdict(
    shown: &str,
    verdict: Result<Verified, SignatureError>,
    here: Option<Here>,
) -> i32 {
    match verdict {
        Ok(verified) => {
            let refused = match &here {
                Some(Here::Refused(why)) => {
                    println!("valid, but {why}: {}", one_line(shown));
                    true
                }
                _ => {
                    println!("valid: {}", one_line(shown));
                    false
                }
            };
            println!("key id: {}", verified.key_id);
            println!("trusted comment: {}", verified.trusted_comment);
            match here {
                Some(Here::Runs(why)) => println!("on this machine: a run takes it: {why}"),
                Some(Here::Unknown(why)) => {
                    println!(
                        "on this machine: unknown, the rollback record cannot be read: {}",
                        one_line(&why)
                    )
                }
                Some(Here::Refused(_)) | None => {}
            }
            i32::from(refused)
        }
        Err(e) => {
            println!("invalid: {}: {}", one_line(shown), one_line(&e.to_string()));
            1
        }
    }
}
