//! `host inspect FILE|REFERENCE`: what a policy is, what it asks for, who
//! signed it; for a settings document, what it is and who signed it. A
//! reference is pulled from its registry now and its signature checked as
//! `run` checks it; `file` then names the digest it pointed to.
//!
//! Inspecting compiles the component (to read its imports and exports) but
//! never instantiates or runs it. A settings document is the policy's to
//! read: the host shows its size, digest, lines and signature, never its
//! meaning.

use anyhow::Context as _;
use serde::Serialize;
use sha2::{Digest, Sha256};
use wasmtime::component::Component;

use crate::admission::{examine_reference, Location};
use crate::cli::InspectArgs;
use crate::contract::ContractVersion;
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
    /// The contract version it was built against, when it names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    contract: Option<&'static str>,
    /// Why the host would refuse it, if it would.
    problem: Option<String>,
    imports: Vec<String>,
    exports: Vec<String>,
    /// A settings document's lines.
    #[serde(skip_serializing_if = "Option::is_none")]
    lines: Option<usize>,
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
    let file = ConfigFile::load(args.trust.config.path())?;
    let trust = resolve_trust(&args.trust.trusted_key, &args.trust.flags, &file)?;
    let (shown, bytes, verdict, kind) = match Location::parse(&args.policy)? {
        Location::File(path) => {
            let bytes =
                std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
            // By its name, as `push` tells them apart; a policy otherwise.
            let kind = path
                .file_name()
                .and_then(|n| Kind::of_file(&n.to_string_lossy()).ok())
                .unwrap_or(Kind::Policy);
            let verdict = trust.verify(kind.noun(), &path, &bytes);
            (path.display().to_string(), bytes, verdict, kind)
        }
        Location::Oci(reference) => {
            let registry = super::registry_client(&args.registry, &file)?;
            let (pulled, verdict) = examine_reference(&registry, &trust, &reference)?;
            let shown = reference.pinned(&pulled.digest).to_string();
            (shown, pulled.bytes, verdict, pulled.kind)
        }
    };
    let mut inspection = Inspection {
        file: shown,
        size: bytes.len(),
        sha256: hex(&Sha256::digest(&bytes)),
        kind: "component".into(),
        world: None,
        contract: None,
        problem: None,
        imports: Vec::new(),
        exports: Vec::new(),
        lines: None,
        signature: signature_status(verdict),
    };
    if kind == Kind::Settings {
        inspect_settings(&mut inspection, &bytes);
        return print(&inspection, args.json);
    }
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
                        Ok(contract) => {
                            inspection.world = Some("policy-host:policy/policy");
                            inspection.contract = contract.map(ContractVersion::as_str);
                        }
                        Err(e) => inspection.problem = Some(e.to_string()),
                    }
                }
                Err(e) => inspection.problem = Some(format!("does not compile: {e:#}")),
            }
        }
    }
    print(&inspection, args.json)
}

/// What the host can say of a settings document without reading it as the
/// policy does: YAML or JSON (by its first character, as the SDK decides),
/// UTF-8 or not, how many lines.
fn inspect_settings(inspection: &mut Inspection, bytes: &[u8]) {
    match std::str::from_utf8(bytes) {
        Ok(text) => {
            let trimmed = text.trim_start();
            let format = if trimmed.starts_with('{') || trimmed.starts_with('[') {
                "JSON"
            } else {
                "YAML"
            };
            inspection.kind = format!("settings document ({format}, read by the policy)");
            inspection.lines = Some(text.lines().count());
        }
        Err(e) => {
            inspection.kind = "settings document".into();
            inspection.problem = Some(format!("not UTF-8 text ({e}): the policy cannot read it"));
        }
    }
}

fn print(inspection: &Inspection, json: bool) -> anyhow::Result<i32> {
    if json {
        println!("{}", serde_json::to_string_pretty(inspection)?);
    } else {
        print!("{}", render(inspection));
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
            if let Some(contract) = i.contract {
                let _ = writeln!(out, "contract:  @{contract}{}", contract_note(contract));
            }
        }
        (None, Some(problem)) => {
            let _ = writeln!(out, "world:     refused: {}", one_line(problem));
        }
        (None, None) => {}
    }
    if let Some(lines) = i.lines {
        let _ = writeln!(out, "lines:     {lines}");
    } else if !i.kind.starts_with("settings") {
        let _ = writeln!(out, "imports:   {}", list(&i.imports));
        let _ = writeln!(out, "exports:   {}", list(&i.exports));
    }
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

/// What a contract version means on this host, for the human report.
fn contract_note(contract: &str) -> String {
    if contract == ContractVersion::CURRENT.as_str() {
        " (this host's own)".to_owned()
    } else {
        format!(
            " (an earlier contract this host still runs: it is not told what @{} added, such as facts)",
            ContractVersion::CURRENT
        )
    }
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        "(none)".into()
    } else {
        let names: Vec<_> = names.iter().map(|n| one_line(n)).collect();
        names.join("\n           ")
    }
}
