//! Turning policy bytes into a compiled component the host agrees to run.

use thiserror::Error;

use super::cache::{CacheOutcome, CompileCache};
use crate::text::Untrusted;
use wasmtime::component::types::ComponentItem;
use wasmtime::component::Component;
use wasmtime::Engine;

/// The version of `wit/policy.wit` this host speaks (a test checks the two
/// agree). A policy built against another version is refused by name at
/// load, instead of failing to link with wasmtime's type error.
pub const CONTRACT_VERSION: &str = "0.6.0";

/// Our own package's interfaces, without their version.
const OWN_PACKAGE: &str = "policy-host:policy/";

/// The interfaces of our own package a policy may import.
const OWN_INTERFACES: [&str; 2] = ["service-provider", "types"];

/// Why a policy was refused before it ran. What the policy file wrote (its
/// import and export names, and the compiler's messages, which quote them)
/// is [`Untrusted`]: shown escaped, on one line.
#[derive(Debug, Error)]
pub enum LoadError {
    #[error("not a WebAssembly file (it does not start with the \\0asm magic bytes)")]
    NotWasm,
    #[error("this is a core WebAssembly module, not a component; build the policy for the wasm32-wasip2 target")]
    CoreModule,
    #[error("unsupported WebAssembly version or layer {0:02x?}")]
    UnknownLayer([u8; 4]),
    #[error("could not compile the component: {0}")]
    Compile(Untrusted),
    #[error("the policy imports `{0}`, which the host does not provide (a policy may import only policy-host:policy/service-provider and WASI)")]
    ForbiddenImport(Untrusted),
    #[error("not a policy component: it does not export `run` and `subscriptions` from world policy-host:policy/policy (its exports: {0})")]
    NotAPolicy(Untrusted),
    #[error("the policy was built against contract policy-host:policy@{found}, and this host speaks @{CONTRACT_VERSION}: rebuild it with the guest-sdk this host ships ({} vendors it)", crate::program::command("new-policy"))]
    ContractVersion { found: Untrusted },
}

impl LoadError {
    /// A compile or link error: wasmtime's message quotes the component.
    pub(crate) fn compile(error: &anyhow::Error) -> Self {
        LoadError::Compile(Untrusted::new(format!("{error:#}")))
    }
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
    .map_err(|e| LoadError::compile(&e))?;
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
        if name.starts_with("wasi:") {
            continue;
        }
        let own = name
            .strip_prefix(OWN_PACKAGE)
            .and_then(|rest| rest.split_once('@'))
            .filter(|(interface, _)| OWN_INTERFACES.contains(interface));
        match own {
            Some((_, version)) if version == CONTRACT_VERSION => {}
            Some((_, version)) => {
                return Err(LoadError::ContractVersion {
                    found: Untrusted::new(version),
                })
            }
            None => return Err(LoadError::ForbiddenImport(Untrusted::new(name))),
        }
    }
    Ok(())
}

/// The functions world policy-host:policy/policy exports.
const WORLD_EXPORTS: [&str; 2] = ["run", "subscriptions"];

fn check_exports(engine: &Engine, component: &Component) -> Result<(), LoadError> {
    let ty = component.component_type();
    let mut names = Vec::new();
    let mut found = 0;
    for (name, item) in ty.exports(engine) {
        if WORLD_EXPORTS.contains(&name) && matches!(item.ty, ComponentItem::ComponentFunc(_)) {
            found += 1;
        }
        names.push(format!("`{name}`"));
    }
    if found == WORLD_EXPORTS.len() {
        return Ok(());
    }
    Err(LoadError::NotAPolicy(Untrusted::new(if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    })))
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

    #[test]
    fn the_contract_version_is_the_wits() {
        let wit = include_str!("../../../wit/policy.wit");
        assert!(
            wit.contains(&format!("package policy-host:policy@{CONTRACT_VERSION};")),
            "wit/policy.wit and CONTRACT_VERSION disagree"
        );
    }

    fn importing(name: &str) -> Result<(), LoadError> {
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true);
        let engine = Engine::new(&config).unwrap();
        let wat = format!("(component (import \"{name}\" (instance)))");
        let component = Component::new(&engine, wat::parse_str(&wat).unwrap()).unwrap();
        check_imports(&engine, &component)
    }

    #[test]
    fn an_import_name_with_a_newline_is_refused_on_one_line() {
        // The component model accepts a newline inside a `url=<...>` name.
        let err = importing("url=<a\\nhost: error: forged>").unwrap_err();
        let message = err.to_string();
        assert!(matches!(err, LoadError::ForbiddenImport(_)), "{message}");
        assert!(
            message.contains("`url=<a\\nhost: error: forged>`"),
            "{message}"
        );
        assert_eq!(message.lines().count(), 1, "{message}");
    }

    #[test]
    fn a_policy_built_against_another_contract_is_refused_by_version() {
        importing(&format!("policy-host:policy/types@{CONTRACT_VERSION}")).unwrap();
        importing("wasi:cli/environment@0.2.6").unwrap();
        let err = importing("policy-host:policy/service-provider@0.1.0").unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("the policy was built against contract policy-host:policy@0.1.0, and this host speaks @{CONTRACT_VERSION}: rebuild it with the guest-sdk this host ships (`host new-policy` vendors it)")
        );
        assert!(matches!(
            importing("policy-host:policy/shell@0.2.0"),
            Err(LoadError::ForbiddenImport(_))
        ));
        assert!(matches!(
            importing("evil:thing/x@1.0.0"),
            Err(LoadError::ForbiddenImport(_))
        ));
    }
}
