//! `host inspect POLICY`: what a policy file is, what it asks for, who signed it.
//!
//! Inspecting compiles the component (to read its imports and exports) but
//! never instantiates or runs it.

use anyhow::Context as _;
use serde::Serialize;
use sha2::{Digest, Sha256};
use wasmtime::component::Component;

use crate::cli::InspectArgs;
use crate::limits::Limits;
use crate::runtime::load::{check_header, check_policy_world, interface_names, LoadError};
use crate::runtime::PolicyRuntime;
use crate::signature::{
    load_trusted_keys, read_signature, signature_path_for, verify_bytes, DEFAULT_TRUSTED_KEYS_DIR,
};

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
    trusted_comment: Option<String>,
    detail: Option<String>,
}

pub fn execute(args: &InspectArgs) -> anyhow::Result<i32> {
    let bytes = std::fs::read(&args.policy)
        .with_context(|| format!("reading {}", args.policy.display()))?;
    let mut inspection = Inspection {
        file: args.policy.display().to_string(),
        size: bytes.len(),
        sha256: Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
        kind: "component".into(),
        world: None,
        problem: None,
        imports: Vec::new(),
        exports: Vec::new(),
        signature: signature_status(args, &bytes),
    };
    match check_header(&bytes) {
        Err(LoadError::CoreModule) => inspection.kind = "core module".into(),
        Err(e) => inspection.kind = format!("not a component: {e}"),
        Ok(()) => {
            let runtime = PolicyRuntime::new(Limits::default())?;
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

fn signature_status(args: &InspectArgs, bytes: &[u8]) -> SignatureStatus {
    let dir = args
        .trust
        .trusted_keys_dir
        .clone()
        .unwrap_or_else(|| DEFAULT_TRUSTED_KEYS_DIR.into());
    let result = read_signature(&signature_path_for(&args.policy)).and_then(|signature| {
        let keys = load_trusted_keys(&args.trust.trusted_key, &dir)?;
        verify_bytes(bytes, &signature, &keys)
    });
    match result {
        Ok(v) => SignatureStatus {
            status: "valid",
            key_id: Some(v.key_id),
            trusted_comment: Some(v.trusted_comment),
            detail: None,
        },
        Err(e) => SignatureStatus {
            status: match e {
                crate::signature::SignatureError::MissingSignature(_) => "unsigned",
                _ => "invalid",
            },
            key_id: None,
            trusted_comment: None,
            detail: Some(e.to_string()),
        },
    }
}

fn render(i: &Inspection) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(out, "file:      {}", i.file);
    let _ = writeln!(out, "size:      {} bytes", i.size);
    let _ = writeln!(out, "sha256:    {}", i.sha256);
    let _ = writeln!(out, "kind:      {}", i.kind);
    match (&i.world, &i.problem) {
        (Some(world), _) => {
            let _ = writeln!(out, "world:     {world} (the host accepts it)");
        }
        (None, Some(problem)) => {
            let _ = writeln!(out, "world:     refused: {problem}");
        }
        (None, None) => {}
    }
    let _ = writeln!(out, "imports:   {}", list(&i.imports));
    let _ = writeln!(out, "exports:   {}", list(&i.exports));
    let s = &i.signature;
    match (&s.key_id, &s.detail) {
        (Some(key), _) => {
            let comment = s.trusted_comment.as_deref().unwrap_or("");
            let _ = writeln!(out, "signature: valid, signed by key {key} ({comment})");
        }
        (None, Some(detail)) => {
            let _ = writeln!(out, "signature: {}: {detail}", s.status);
        }
        (None, None) => {}
    }
    out
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        "(none)".into()
    } else {
        names.join("\n           ")
    }
}
