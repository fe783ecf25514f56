//! Composition: a declaration component (a policy written in Python,
//! JavaScript or any language that builds components for wit/declaration)
//! plugged into the engine component (`policies/engine`, the Rust SDK's
//! apply logic), giving one policy component.
//!
//! The host runs the result as any other policy: signed, checked, limited
//! and sandboxed. Composition adds nothing to trust; it only refuses early
//! what `run` would refuse later (a declaration that asks the host for
//! anything but WASI, an engine that is not one), so an author learns it
//! at build time.

use anyhow::{anyhow, bail, Context};
use wac_graph::{types::Package, CompositionGraph, EncodeOptions, PackageId};

use crate::text::Untrusted;

/// The interface a declaration exports and the engine imports, by name
/// without its patch version: composition matches a compatible `0.1.x`.
const DECLARE: &str = "policy-host:declaration/declare@0.1";

/// The engine's exports: the host's `policy` world.
const ENGINE_EXPORTS: [&str; 2] = ["run", "subscriptions"];

/// Where the Debian package installs the engine (`host compose` uses it
/// unless told otherwise).
pub const PACKAGED_ENGINE: &str = "/usr/lib/policy-host/declaration-engine.wasm";

/// The composed policy, and what went into it.
#[derive(Debug)]
pub struct Composed {
    pub bytes: Vec<u8>,
    /// The declaration's imports (WASI only), which the policy carries.
    pub declaration_imports: Vec<String>,
}

/// Plugs `declaration` into `engine`: one component exporting `run` and
/// `subscriptions`, importing the engine's provider and the WASI both use.
pub fn compose(declaration: &[u8], engine: &[u8]) -> anyhow::Result<Composed> {
    let mut graph = CompositionGraph::new();
    let declaration = register(&mut graph, "declaration", declaration)
        .context("the declaration is not a WebAssembly component")?;
    let engine = register(&mut graph, "engine", engine)
        .context("the engine is not a WebAssembly component")?;

    let (declaration_imports, declaration_exports) = names(&graph, declaration);
    if !declaration_exports.iter().any(|name| is_declare(name)) {
        bail!(
            "the declaration does not export {DECLARE}.x (it exports: {}): build it for the \
             `declaration` world of wit/declaration/declaration.wit",
            shown(&declaration_exports)
        );
    }
    let forbidden: Vec<&String> = declaration_imports
        .iter()
        .filter(|name| !name.starts_with("wasi:"))
        .collect();
    if !forbidden.is_empty() {
        bail!(
            "the declaration imports {}: a declaration may import WASI only (the host links \
             it with nothing granted); the engine alone asks the host for anything",
            shown(&forbidden)
        );
    }
    let (engine_imports, engine_exports) = names(&graph, engine);
    if !engine_imports.iter().any(|name| is_declare(name))
        || !ENGINE_EXPORTS
            .iter()
            .all(|wanted| engine_exports.iter().any(|name| name == wanted))
    {
        bail!(
            "the engine does not import {DECLARE}.x and export run and subscriptions \
             (it imports: {}; exports: {}): use policies/engine's component",
            shown(&engine_imports),
            shown(&engine_exports)
        );
    }

    wac_graph::plug(&mut graph, vec![declaration], engine)
        .map_err(|e| anyhow!("{e:#}"))
        .context("plugging the declaration into the engine")?;
    let bytes = graph
        .encode(EncodeOptions::default())
        .context("encoding the composed policy")?;
    Ok(Composed {
        bytes,
        declaration_imports,
    })
}

fn register(graph: &mut CompositionGraph, name: &str, bytes: &[u8]) -> anyhow::Result<PackageId> {
    let package = Package::from_bytes(name, None, bytes.to_vec(), graph.types_mut())?;
    Ok(graph.register_package(package)?)
}

/// A package's import and export names, in its order.
fn names(graph: &CompositionGraph, package: PackageId) -> (Vec<String>, Vec<String>) {
    let world = &graph.types()[graph[package].ty()];
    (
        world.imports.keys().cloned().collect(),
        world.exports.keys().cloned().collect(),
    )
}

fn is_declare(name: &str) -> bool {
    name.strip_prefix(DECLARE)
        .is_some_and(|rest| rest.starts_with('.'))
}

/// Names read from a file, for an error: escaped, comma-separated.
fn shown<S: AsRef<str>>(names: &[S]) -> String {
    if names.is_empty() {
        return "nothing".into();
    }
    names
        .iter()
        .map(|name| Untrusted::new(name.as_ref()).to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declare_matches_every_patch_of_its_minor_only() {
        assert!(is_declare("policy-host:declaration/declare@0.1.0"));
        assert!(is_declare("policy-host:declaration/declare@0.1.7"));
        assert!(!is_declare("policy-host:declaration/declare@0.10.0"));
        assert!(!is_declare("policy-host:declaration/declare@0.2.0"));
        assert!(!is_declare("policy-host:declaration/declare"));
    }

    #[test]
    fn what_is_not_a_component_is_refused_naming_which_side() {
        let e = compose(b"\0asm\x01\0\0\0", b"").unwrap_err();
        assert_eq!(
            e.to_string(),
            "the declaration is not a WebAssembly component"
        );
    }

    #[test]
    fn names_from_a_file_are_escaped_in_errors() {
        assert_eq!(
            shown(&["wasi:cli/run@0.2.0", "evil\x1b[2J"]),
            "wasi:cli/run@0.2.0, evil\\x1b[2J"
        );
        assert_eq!(shown::<&str>(&[]), "nothing");
    }
}
