//! Turning policy bytes into a compiled component the host agrees to run.

use thiserror::Error;

use super::cache::{CacheOutcome, CompileCache};
use crate::contract::version::{ContractVersion, Relation};
use crate::text::Untrusted;
use wasmtime::component::types::ComponentItem;
use wasmtime::component::Component;
use wasmtime::Engine;

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
    #[error("the policy was built against contract policy-host:policy@{found}, {}", what_to_do(found, *relation))]
    ContractVersion {
        found: Untrusted,
        relation: Relation,
    },
    #[error("the policy imports more than one version of the contract ({0}): it was not built by one guest-sdk; rebuild it")]
    MixedContracts(Untrusted),
}

/// The rest of a contract-version refusal: the window this host runs, and
/// what to do about a policy outside it.
fn what_to_do(found: &Untrusted, relation: Relation) -> String {
    let window = ContractVersion::window();
    let rebuild = format!(
        "rebuild it with the guest-sdk this host ships ({} vendors it)",
        crate::program::command("new-policy")
    );
    match relation {
        Relation::Newer => format!(
            "newer than this host runs ({window}): upgrade the host to one that speaks @{found} or later (hosts before the policies that need them)"
        ),
        Relation::Older => format!("older than this host runs ({window}): {rebuild}"),
        Relation::Unknown => format!("which this host does not know (it runs {window}): {rebuild}"),
    }
}

impl LoadError {
    /// A compile or link error: wasmtime's message quotes the component.
    pub(crate) fn compile(error: &anyhow::Error) -> Self {
        LoadError::Compile(Untrusted::new(format!("{error:#}")))
    }
}

/// A component the host agrees to run: compiled, its imports and exports
/// checked, and the contract version it was built against when it names one
/// (a component that imports nothing of the contract is tried against each
/// version the host runs, newest first).
pub struct Checked {
    pub component: Component,
    pub cache: CacheOutcome,
    pub contract: Option<ContractVersion>,
}

/// Checks the header, compiles (or takes the compiled artifact from `cache`),
/// and checks imports and exports.
pub fn load_component(
    engine: &Engine,
    bytes: &[u8],
    cache: Option<&CompileCache>,
) -> Result<Checked, LoadError> {
    check_header(bytes)?;
    // Checked before it is cached: the cache holds policies only.
    let compile = || {
        let component = Component::from_binary(engine, bytes)
            .map_err(|e| LoadError::compile(&anyhow::Error::from(e)))?;
        check_policy_world(engine, &component)?;
        Ok(component)
    };
    let (component, outcome) = match cache {
        Some(cache) => cache.get_or_compile(engine, bytes, compile)?,
        None => (compile()?, CacheOutcome::Disabled),
    };
    // Checked again when it came from the cache, and its version read.
    let contract = check_imports(engine, &component)?;
    check_exports(engine, &component)?;
    Ok(Checked {
        component,
        cache: outcome,
        contract,
    })
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
/// and if not, why; when it is, the contract version it names.
pub fn check_policy_world(
    engine: &Engine,
    component: &Component,
) -> Result<Option<ContractVersion>, LoadError> {
    let contract = check_imports(engine, component)?;
    check_exports(engine, component)?;
    Ok(contract)
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

/// Every import is WASI or one of our own interfaces, all of one contract
/// version this host runs; that version, if the component names one.
fn check_imports(
    engine: &Engine,
    component: &Component,
) -> Result<Option<ContractVersion>, LoadError> {
    let mut contract: Option<ContractVersion> = None;
    for (name, _) in component.component_type().imports(engine) {
        if name.starts_with("wasi:") {
            continue;
        }
        let own = name
            .strip_prefix(OWN_PACKAGE)
            .and_then(|rest| rest.split_once('@'))
            .filter(|(interface, _)| OWN_INTERFACES.contains(interface));
        let Some((_, version)) = own else {
            return Err(LoadError::ForbiddenImport(Untrusted::new(name)));
        };
        let version =
            ContractVersion::parse(version).map_err(|unsupported| LoadError::ContractVersion {
                found: Untrusted::new(unsupported.found),
                relation: unsupported.relation,
            })?;
        match contract {
            Some(seen) if seen != version => {
                return Err(LoadError::MixedContracts(Untrusted::new(format!(
                    "@{seen} and @{version}"
                ))))
            }
            _ => contract = Some(version),
        }
    }
    Ok(contract)
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

    fn importing(name: &str) -> Result<Option<ContractVersion>, LoadError> {
        importing_all(&[name])
    }

    fn importing_all(names: &[&str]) -> Result<Option<ContractVersion>, LoadError> {
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true);
        let engine = Engine::new(&config).unwrap();
        let wat = names
            .iter()
            .map(|name| format!("(import \"{name}\" (instance))"))
            .collect::<String>();
        let wat = format!("(component {wat})");
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
    fn a_policy_of_any_contract_in_the_window_is_taken_and_others_are_refused_by_version() {
        for version in ContractVersion::ALL {
            assert_eq!(
                importing(&format!("policy-host:policy/types@{version}")).unwrap(),
                Some(version)
            );
        }
        assert_eq!(importing("wasi:cli/environment@0.2.6").unwrap(), None);
        let current = ContractVersion::CURRENT;
        let oldest = ContractVersion::OLDEST;
        let err = importing("policy-host:policy/service-provider@0.1.0").unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("the policy was built against contract policy-host:policy@0.1.0, older than this host runs (@{oldest} to @{current}): rebuild it with the guest-sdk this host ships (`host new-policy` vendors it)")
        );
        let err = importing("policy-host:policy/service-provider@9.0.0").unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("the policy was built against contract policy-host:policy@9.0.0, newer than this host runs (@{oldest} to @{current}): upgrade the host to one that speaks @9.0.0 or later (hosts before the policies that need them)")
        );
        assert!(matches!(
            importing_all(&[
                "policy-host:policy/types@0.5.0",
                "policy-host:policy/service-provider@0.6.0"
            ]),
            Err(LoadError::MixedContracts(_))
        ));
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
