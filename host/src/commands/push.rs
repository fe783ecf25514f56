//! `host push FILE oci://REGISTRY/REPOSITORY:TAG`: uploads a policy (as a
//! CNCF Wasm OCI Artifact) or a settings document, then its `.minisig` as a
//! referrer of it, and prints the digest reference that pins what was
//! pushed. A reference pinned by digest (`:TAG@sha256:...`, or
//! `@sha256:...` alone for no tag) is pushed only when the file makes
//! exactly that artifact.
//!
//! Pushing checks what it can without the hosts' keys: the file is a
//! component (or UTF-8 text), and its signature names the file a host will
//! expect from that repository. A file that every host would refuse
//! (unsigned, or signed under another name) is not pushed, unless
//! `--allow-unsigned` says so (a test registry).

use std::time::{Duration, SystemTime};

use anyhow::{bail, Context as _};

use crate::cli::PushArgs;
use crate::oci::layout::{self, Kind, IMAGE_INDEX, IMAGE_MANIFEST};
use crate::oci::OciRef;
use crate::settings::ConfigFile;
use crate::signature::{parse_signature, signature_path_for, Claims, MAX_SIGNATURE_FILE};

pub fn execute(args: &PushArgs) -> anyhow::Result<i32> {
    let file = ConfigFile::load(args.config.path())?;
    let registry = super::registry_client(&args.registry, &file)?;
    let reference = OciRef::parse(&args.reference)?;
    let file_name = args
        .file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .with_context(|| format!("{} names no file", args.file.display()))?;
    let kind = Kind::of_file(&file_name)?;
    let bytes =
        std::fs::read(&args.file).with_context(|| format!("reading {}", args.file.display()))?;
    let signature = read_signature(args, &file_name, &reference, kind)?;
    let artifact = match kind {
        Kind::Policy => layout::policy_artifact(&file_name, bytes, created(args, &signature)?)?,
        Kind::Settings => layout::settings_artifact(&file_name, bytes)?,
    };
    let digest = artifact.digest();
    // A pinned reference says what must be pushed: checked before any upload.
    if let Some(pinned) = &reference.digest {
        if *pinned != digest {
            bail!(
                "{reference}: {} makes an artifact whose digest is {digest}, not the pinned {pinned}; nothing was pushed",
                args.file.display()
            );
        }
    }
    // Under the tag when there is one, else by digest alone.
    let destination = match &reference.tag {
        Some(tag) => reference.tagged(tag),
        None => reference.pinned(&digest),
    };

    for blob in &artifact.blobs {
        registry.push_blob(&reference, blob)?;
    }
    registry.push_manifest(&destination, &artifact.manifest, IMAGE_MANIFEST)?;
    let pinned = reference.pinned(&digest);

    if let Some(Signature { text: minisig, .. }) = signature {
        let signature = layout::signature_artifact(artifact.descriptor(), &file_name, minisig);
        for blob in &signature.blobs {
            registry.push_blob(&reference, blob)?;
        }
        let signature_digest = signature.digest();
        registry.push_manifest(
            &reference.pinned(&signature_digest),
            &signature.manifest,
            IMAGE_MANIFEST,
        )?;
        // A registry with the referrers API lists the signature itself;
        // for one without, the referrers tag is kept up to date.
        if !registry.lists_referrer(&reference, &digest, &signature_digest) {
            let existing = registry.referrers_tag_index(&reference, &digest)?;
            let mut descriptor = signature.descriptor();
            descriptor.artifact_type = Some(layout::SIGNATURE_ARTIFACT.to_owned());
            let index = layout::with_referrer(existing, descriptor);
            registry.push_manifest(
                &reference.tagged(&layout::referrers_tag(&digest)),
                &index,
                IMAGE_INDEX,
            )?;
        }
        eprintln!("pushed {file_name} and its signature to {reference}");
    }
    println!("{pinned}");
    Ok(0)
}

/// A file's `.minisig`, and what its trusted comment claims.
struct Signature {
    text: Vec<u8>,
    claims: Claims,
}

/// The policy artifact's `created` time: when the file was signed, so that a
/// signed file makes the same digest on every push (a digest pin can name
/// it in advance); for an unsigned file, when it was last modified.
fn created(args: &PushArgs, signature: &Option<Signature>) -> anyhow::Result<SystemTime> {
    if let Some(signed_at) = signature.as_ref().and_then(|s| s.claims.signed_at) {
        return Ok(SystemTime::UNIX_EPOCH + Duration::from_secs(signed_at));
    }
    std::fs::metadata(&args.file)
        .and_then(|m| m.modified())
        .with_context(|| format!("reading the modification time of {}", args.file.display()))
}

/// The file's `.minisig`, checked for what can be checked here; `None`
/// (with a warning) when there is none.
fn read_signature(
    args: &PushArgs,
    file_name: &str,
    reference: &OciRef,
    kind: Kind,
) -> anyhow::Result<Option<Signature>> {
    let path = signature_path_for(&args.file);
    let text = match std::fs::metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let problem = format!(
                "{} not found: {file_name} is unsigned, and hosts refuse it (sign it with {})",
                path.display(),
                crate::program::command("sign")
            );
            if !args.allow_unsigned {
                bail!("{problem}; nothing was pushed (--allow-unsigned pushes it anyway)");
            }
            eprintln!("warning: {problem}; pushed anyway (--allow-unsigned)");
            return Ok(None);
        }
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        Ok(meta) if meta.len() > MAX_SIGNATURE_FILE => {
            bail!(
                "{} is {} bytes, not a signature",
                path.display(),
                meta.len()
            )
        }
        Ok(_) => {
            std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?
        }
    };
    let parsed = parse_signature(&path.display().to_string(), &text)?;
    let claims = Claims::parse(parsed.trusted_comment());
    let expected: Vec<String> = match kind {
        Kind::Policy => vec![format!("{}.wasm", reference.name())],
        Kind::Settings => ["yaml", "yml", "json"]
            .iter()
            .map(|ext| format!("{}.{ext}", reference.name()))
            .collect(),
    };
    match claims.file.as_deref() {
        Some(signed) if expected.iter().any(|e| e == signed) => {}
        signed => {
            let problem = format!(
                "{} is signed as {:?}, but hosts pulling {reference} expect {}: they refuse it (push it to a repository named after the file, or sign a file of that name)",
                path.display(),
                signed.unwrap_or("(no file name)"),
                expected.join(" or ")
            );
            if !args.allow_unsigned {
                bail!("{problem}; nothing was pushed (--allow-unsigned pushes it anyway)");
            }
            eprintln!("warning: {problem}; pushed anyway (--allow-unsigned)");
        }
    }
    Ok(Some(Signature {
        text: text.into_bytes(),
        claims,
    }))
}
