//! `host inspect POLICY|REFERENCE`: what a policy is, what it asks for, who
//! signed it. A reference is pulled from its registry now and its signature
//! checked as `run` checks it; `file` then names the digest it pointed to.
//!
//! Inspecting compiles the component (to read its imports and exports) but
//! never instantiates or runs it.

use anyhow::{bail, Context as _};
use serde::Serialize;
use sha2::{Digest, Sha256};
use wasmtime::component::Component;

use crate::admission::{examine_reference, Location};
use crate::cli::InspectArgs;
use crate::oci::Kind;
use crate::runtime::load::{check_header, check_policy_world, interface_names, LoadError};
use crate::runtime::PolicyRuntime;
use crate::settings::{resolve_trust, ConfigFile, RunSettings};
use crate::signature::{SignatureError, Verified};
use crate::text::{hex, one_line, Untrusted};

#[derive(Debug, Serialize)]
struct Inspection {
    file: String,
    size: usize,
    sha256: String,
    kind: String,
    /// `policy-host:policy/policy` when the host would accept it.
    world: Option<&'static str>,
    /// Why the host would refuse it, if it would.
    problem: Option<String>,
    imports: Vec<String>,
    exports: Vec<String>,
    signature: SignatureStatus,
}

#[derive(Debug, Serialize)]
struct SignatureStatus {
    status: &'static str,
    key_id: Option<String>,
    trusted_comment: Option<Untrusted>,
    detail: Option<String>,
}

pub fn execute(args: &InspectArgs) -> anyhow::Result<i32> {
    let file = ConfigFile::load(args.trust.config.as_deref())?;
    let trust = resolve_trust(&args.trust.trusted_key, &args.trust.flags, &file)?;
    let (shown, bytes, verdict) = match Location::parse(&args.policy)? {
        Location::File(path) => {
            let bytes =
                std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
            let verdict = trust.verify("policy", &path, &bytes);
            (path.display().to_string(), bytes, verdict)
        }
        Location::Oci(reference) => {
            let registry = super::registry_client(&args.registry, &file)?;
            let (pulled, verdict) = examine_reference(&registry, &trust, &reference)?;
            let shown = reference.pinned(&pulled.digest).to_string();
            if pulled.kind != Kind::Policy {
                bail!(
                    "{shown} is a {} document, not a policy: {} checks its signature",
                    pulled.kind.what(),
                    crate::program::command("verify")
                );
            }
            (shown, pulled.bytes, verdict)
        }
    };
    let mut inspection = Inspection {
        file: shown,
        size: bytes.len(),
        sha256: hex(&Sha256::digest(&bytes)),
        kind: "component".into(),
        world: None,
        problem: None,
        imports: Vec::new(),
        exports: Vec::new(),
        signature: signature_status(verdict),
    };
    match check_header(&bytes) {
        Err(LoadError::CoreModule) => inspection.kind = "core module".into(),
        Err(e) => inspection.kind = format!("not a component: {e}"),
        Ok(()) => {
            let runtime = PolicyRuntime::new(RunSettings::defaults().limits)?;
            match Component::from_binary(runtime.engine(), &bytes) {
                Ok(component) => {
                    (inspection.imports, inspection.exports) =
                        interface_names(runtime.engine(), &component);
                    match check_policy_world(runtime.engine(), &component) {
                        Ok(()) => inspection.world = Some("policy-host:policy/policy"),
                        Err(e) => inspection.problem = Some(e.to_string()),
                    }
                }
                Err(e) => inspection.problem = Some(format!("does not compile: {e:#}")),
            }
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&inspection)?);
    } else {
        print!("{}", render(&inspection));
    }
    Ok(0)
}

fn signature_status(verdict: Result<Verified, SignatureError>) -> SignatureStatus {
    match verdict {
        Ok(v) => SignatureStatus {
            status: "valid",
            key_id: Some(v.key_id),
            trusted_comment: Some(v.trusted_comment),
            detail: None,
        },
        Err(e) => SignatureStatus {
            status: match e {
                SignatureError::MissingSignature { .. }
                | SignatureError::NoSignatureReferrer { .. } => "unsigned",
                _ => "invalid",
            },
            key_id: None,
            trusted_comment: None,
            detail: Some(e.to_string()),
        },
    }
}

/// The report for people. Names and messages come from the policy file (its
/// imports, exports, signature comment): each is made safe for the terminal.
fn render(i: &Inspection) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(out, "file:      {}", one_line(&i.file));
    let _ = writeln!(out, "size:      {} bytes", i.size);
    let _ = writeln!(out, "sha256:    {}", i.sha256);
    let _ = writeln!(out, "kind:      {}", one_line(&i.kind));
    match (&i.world, &i.problem) {
        (Some(world), _) => {
            let _ = writeln!(out, "world:     {world} (the host accepts it)");
        }
        (None, Some(problem)) => {
            let _ = writeln!(out, "world:     refused: {}", one_line(problem));
        }
        (None, None) => {}
    }
    let _ = writeln!(out, "imports:   {}", list(&i.imports));
    let _ = writeln!(out, "exports:   {}", list(&i.exports));
    let s = &i.signature;
    match (&s.key_id, &s.detail) {
        (Some(key), _) => {
            let comment = s
                .trusted_comment
                .as_ref()
                .map(Untrusted::to_string)
                .unwrap_or_default();
            let _ = writeln!(out, "signature: valid, signed by key {key} ({comment})");
        }
        (None, Some(detail)) => {
            let _ = writeln!(out, "signature: {}: {}", s.status, one_line(detail));
        }
        (None, None) => {}
    }
    out
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        "(none)".into()
    } else {
        let names: Vec<_> = names.iter().map(|n| one_line(n)).collect();
        names.join("\n           ")
    }
}
