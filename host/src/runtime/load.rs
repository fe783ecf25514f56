//! Turning policy bytes into a compiled component the host agrees to run.

use thiserror::Error;

use super::cache::{CacheOutcome, CompileCache};
use wasmtime::component::types::ComponentItem;
use wasmtime::component::Component;
use wasmtime::Engine;

/// The interfaces of our own package a policy may import.
const OWN_IMPORTS: [&str; 2] = [
    "policy-host:policy/service-provider@0.1.0",
    "policy-host:policy/types@0.1.0",
];

/// Why a policy was refused before it ran.
#[derive(Debug, Error)]
pub enum LoadError {
    #[error("not a WebAssembly file (it does not start with the \\0asm magic bytes)")]
    NotWasm,
    #[error("this is a core WebAssembly module, not a component; build the policy for the wasm32-wasip2 target")]
    CoreModule,
    #[error("unsupported WebAssembly version or layer {0:02x?}")]
    UnknownLayer([u8; 4]),
    #[error("could not compile the component: {0:#}")]
    Compile(anyhow::Error),
    #[error("the policy imports `{0}`, which the host does not provide (a policy may import only policy-host:policy/service-provider and WASI)")]
    ForbiddenImport(String),
    #[error("not a policy component: it does not export `run` from world policy-host:policy/policy (its exports: {0})")]
    NotAPolicy(String),
}

/// Checks the header, compiles (or takes the compiled artifact from `cache`),
/// and checks imports and exports.
pub fn load_component(
    engine: &Engine,
    bytes: &[u8],
    cache: Option<&CompileCache>,
) -> Result<(Component, CacheOutcome), LoadError> {
    check_header(bytes)?;
    let compile = || Component::from_binary(engine, bytes).map_err(anyhow::Error::from);
    let (component, outcome) = match cache {
        Some(cache) => cache.get_or_compile(engine, bytes, compile),
        None => compile().map(|c| (c, CacheOutcome::Disabled)),
    }
    .map_err(LoadError::Compile)?;
    check_imports(engine, &component)?;
    check_exports(engine, &component)?;
    Ok((component, outcome))
}

/// The names a component imports and exports, for `host inspect`.
pub fn interface_names(engine: &Engine, component: &Component) -> (Vec<String>, Vec<String>) {
    let ty = component.component_type();
    let imports = ty
        .imports(engine)
        .map(|(name, _)| name.to_owned())
        .collect();
    let exports = ty
        .exports(engine)
        .map(|(name, _)| name.to_owned())
        .collect();
    (imports, exports)
}

/// Whether a component would be accepted as a policy (imports and exports),
/// and if not, why.
pub fn check_policy_world(engine: &Engine, component: &Component) -> Result<(), LoadError> {
    check_imports(engine, component)?;
    check_exports(engine, component)
}

/// The preamble: magic, then version and layer (core module 1/0, component 0xd/1).
pub fn check_header(bytes: &[u8]) -> Result<(), LoadError> {
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err(LoadError::NotWasm);
    }
    let version: [u8; 4] = bytes[4..8].try_into().expect("4 bytes");
    match version {
        [1, 0, 0, 0] => Err(LoadError::CoreModule),
        [0x0d, 0, 1, 0] => Ok(()),
        other => Err(LoadError::UnknownLayer(other)),
    }
}

fn check_imports(engine: &Engine, component: &Component) -> Result<(), LoadError> {
    for (name, _) in component.component_type().imports(engine) {
        let allowed = name.starts_with("wasi:") || OWN_IMPORTS.contains(&name);
        if !allowed {
            return Err(LoadError::ForbiddenImport(name.to_owned()));
        }
    }
    Ok(())
}

fn check_exports(engine: &Engine, component: &Component) -> Result<(), LoadError> {
    let ty = component.component_type();
    let mut names = Vec::new();
    for (name, item) in ty.exports(engine) {
        if name == "run" && matches!(item.ty, ComponentItem::ComponentFunc(_)) {
            return Ok(());
        }
        names.push(format!("`{name}`"));
    }
    Err(LoadError::NotAPolicy(if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_checks_name_the_problem() {
        assert!(matches!(
            check_header(b"hello world"),
            Err(LoadError::NotWasm)
        ));
        assert!(matches!(
            check_header(b"\0asm\x01\0\0\0"),
            Err(LoadError::CoreModule)
        ));
        assert!(matches!(check_header(b"\0asm\x0d\0\x01\0"), Ok(())));
        assert!(matches!(
            check_header(b"\0asm\x02\0\0\0"),
            Err(LoadError::UnknownLayer(_))
        ));
    }
}
