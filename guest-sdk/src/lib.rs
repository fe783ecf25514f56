//! Write desired-state policies for systemd services in Rust, unit-test them
//! natively, and run them as signed WebAssembly components under `host run`.
//!
//! A policy is a function from a [`Context`] (the run's settings) to a
//! [`Policy`]: an ordered list of [`Service`] declarations. The SDK holds all
//! of the service type's logic (two-phase apply, idempotency, subscriptions,
//! noop mode, verification of the final state, name validation); the host only
//! carries out the six provider operations it is asked for.
//!
//! ```
//! use guest_sdk::prelude::*;
//!
//! fn web(_ctx: &Context) -> Result<Policy, PolicyError> {
//!     Ok(Policy::new().service(
//!         Service::new("httpd")
//!             .running()
//!             .enable(true)
//!             .subscribe("file#/etc/httpd/conf/httpd.conf"),
//!     ))
//! }
//! guest_sdk::export_policy!(web);
//!
//! // Natively, test it against a simulated system:
//! let mut system = SimulatedSystem::new().with_unit("httpd", UnitState::stopped());
//! let report = guest_sdk::run(web, &mut system, &RunOptions::default());
//! assert!(report.succeeded());
//! assert_eq!(system.mutating_calls(), ["start httpd", "enable httpd"]);
//!
//! // A second run finds everything converged and changes nothing.
//! system.clear_calls();
//! guest_sdk::run(web, &mut system, &RunOptions::default());
//! assert!(system.mutating_calls().is_empty());
//! ```
//!
//! Build the component with `cargo build --release --target wasm32-wasip2`
//! (the crate must have `crate-type = ["cdylib", "rlib"]`), then
//! `host run target/wasm32-wasip2/release/NAME.wasm`.
//!
//! # Tutorial
//!
//! From an empty directory to a policy running on a fleet: create the
//! crate, write the policy, test it natively, build it, sign it, give the
//! machines the public key, and run it.
//!
//! ## 1. Create the crate
//!
//! `host new-policy web-policy` writes a crate that builds and tests as it
//! is: `Cargo.toml`, `src/lib.rs` with one service and its tests, a
//! `README.md` with the commands below, and `.gitignore`. By hand, the
//! crate needs two things: both crate types, and this SDK.
//!
//! ```toml
//! [package]
//! name = "web-policy"
//! version = "0.1.0"
//! edition = "2021"
//!
//! [lib]
//! # cdylib: the WebAssembly component; rlib: the native tests.
//! crate-type = ["cdylib", "rlib"]
//!
//! [dependencies]
//! guest-sdk = { path = "/path/to/policy-host/guest-sdk" }
//! ```
//!
//! ## 2. Write the policy
//!
//! Declare each service's desired state with [`Service`]'s builder:
//!
//! - [`running`](Service::running) (the default) or
//!   [`stopped`](Service::stopped): the running state;
//! - [`enable(true)`](Service::enable) or `enable(false)`: start at boot or
//!   not; without it the boot configuration is left alone;
//! - [`subscribe("type#name")`](Service::subscribe): restart the service
//!   when that resource changed: `service#X` when service `X` changed
//!   earlier in the same run (declare `X` first), anything else when the
//!   operator says so with `host run --refresh type#name`.
//!
//! Services are applied in the order they are added, each in two phases
//! (running state, then enabled state), and only what differs is changed.
//! The whole policy is validated before anything is queried: a bad name, a
//! duplicate, or a subscription to a later service rejects it with every
//! problem listed, and nothing is applied.
//!
//! ```
//! use guest_sdk::prelude::*;
//!
//! /// The web server's configuration; a change to it restarts nginx.
//! pub const NGINX_CONFIG: &str = "file#/etc/nginx/nginx.conf";
//!
//! pub fn web_host(_ctx: &Context) -> Result<Policy, PolicyError> {
//!     Ok(Policy::new()
//!         .service(Service::new("postgresql").running().enable(true))
//!         .service(
//!             Service::new("nginx")
//!                 .running()
//!                 .enable(true)
//!                 .subscribe(NGINX_CONFIG)
//!                 .subscribe("service#postgresql"),
//!         )
//!         .service(Service::new("telnet.socket").stopped().enable(false)))
//! }
//!
//! // The component's entry point; natively it only checks the signature.
//! guest_sdk::export_policy!(web_host);
//! # let mut system = SimulatedSystem::new()
//! #     .with_unit("postgresql", UnitState::stopped())
//! #     .with_unit("nginx", UnitState::running())
//! #     .with_unit("telnet.socket", UnitState::running().enabled());
//! # guest_sdk::run(web_host, &mut system, &RunOptions::default()).assert_converged();
//! # system.assert_mutating_calls(&[
//! #     "start postgresql", "enable postgresql", "restart nginx", "enable nginx",
//! #     "stop telnet.socket", "disable telnet.socket",
//! # ]);
//! ```
//!
//! ## 3. Test it natively
//!
//! [`run`] applies a policy function through any [`Provider`]; in tests that
//! is a [`SimulatedSystem`](sim::SimulatedSystem) with the units you give it.
//! It records every call, so a test states exactly what the policy does on a
//! given machine. [`assert_calls`](sim::SimulatedSystem::assert_calls) and
//! [`assert_mutating_calls`](sim::SimulatedSystem::assert_mutating_calls)
//! panic with a diff of expected and actual calls;
//! [`Report::assert_converged`] and [`Report::assert_no_changes`] with the
//! resources that failed or changed.
//!
//! ```
//! use guest_sdk::prelude::*;
//! # const NGINX_CONFIG: &str = "file#/etc/nginx/nginx.conf";
//! # fn web_host(_ctx: &Context) -> Result<Policy, PolicyError> {
//! #     Ok(Policy::new()
//! #         .service(Service::new("postgresql").running().enable(true))
//! #         .service(Service::new("nginx").running().enable(true)
//! #             .subscribe(NGINX_CONFIG).subscribe("service#postgresql"))
//! #         .service(Service::new("telnet.socket").stopped().enable(false)))
//! # }
//!
//! // In the crate: #[cfg(test)] mod tests { ... #[test] fn ... }
//! fn fresh_machine() -> SimulatedSystem {
//!     SimulatedSystem::new()
//!         .with_unit("postgresql", UnitState::stopped())
//!         .with_unit("nginx", UnitState::stopped())
//!         .with_unit("telnet.socket", UnitState::running().enabled())
//! }
//!
//! // A fresh machine converges with exactly these calls. nginx is started,
//! // not restarted: it was not running.
//! let mut system = fresh_machine();
//! guest_sdk::run(web_host, &mut system, &RunOptions::default()).assert_converged();
//! system.assert_mutating_calls(&[
//!     "start postgresql",
//!     "enable postgresql",
//!     "start nginx",
//!     "enable nginx",
//!     "stop telnet.socket",
//!     "disable telnet.socket",
//! ]);
//! assert_eq!(system.unit("nginx"), Some(UnitState::running().enabled()));
//!
//! // A second run only queries: every service is already as declared.
//! system.clear_calls();
//! guest_sdk::run(web_host, &mut system, &RunOptions::default()).assert_no_changes();
//! system.assert_calls(&["status postgresql", "status nginx", "status telnet.socket"]);
//!
//! // The operator changed nginx's configuration: `host run --refresh file#...`.
//! system.clear_calls();
//! let options = RunOptions::default().with_refreshed(NGINX_CONFIG);
//! let report = guest_sdk::run(web_host, &mut system, &options);
//! system.assert_mutating_calls(&["restart nginx"]);
//! assert!(report.event("service#nginx").unwrap().refreshed);
//!
//! // Noop mode queries and explains, and changes nothing.
//! let mut system = fresh_machine();
//! let report = guest_sdk::run(web_host, &mut system, &RunOptions::noop());
//! system.assert_no_mutating_calls();
//! assert_eq!(
//!     report.noop_messages()[1],
//!     ("service#nginx".to_string(), "Would have started, would have enabled".to_string())
//! );
//!
//! // Failures: an operation that fails, or one that "succeeds" without effect
//! // (a unit whose program exits at once). Other services still converge.
//! let mut system = fresh_machine()
//!     .with_failure(
//!         Operation::Start,
//!         "postgresql",
//!         ProviderError::CommandFailed("Job for postgresql.service failed.".into()),
//!     )
//!     .with_no_effect(Operation::Start, "nginx");
//! let report = guest_sdk::run(web_host, &mut system, &RunOptions::default());
//! assert_eq!(report.failed_count(), 2);
//! assert_eq!(
//!     report.event("service#postgresql").unwrap().errors,
//!     ["start postgresql: Job for postgresql.service failed."]
//! );
//! assert_eq!(
//!     report.event("service#nginx").unwrap().errors,
//!     ["failed to reach desired state: expected running and enabled, found stopped and enabled"]
//! );
//! assert_eq!(system.unit("telnet.socket"), Some(UnitState::stopped()));
//! ```
//!
//! Run the tests with `cargo test`, as for any crate.
//!
//! ## 4. Settings
//!
//! `host run POLICY.wasm --settings FILE` hands the policy a document as
//! text ([`Context::settings`]); [`Context::settings_as`] parses it (YAML,
//! or JSON) into your own type, with errors that name the field and line.
//! The policy crate needs `serde = { version = "1", features = ["derive"] }`.
//!
//! ```
//! use guest_sdk::prelude::*;
//! use serde::Deserialize;
//!
//! #[derive(Deserialize)]
//! #[serde(deny_unknown_fields)]
//! struct Settings {
//!     /// How many of `worker-1` .. `worker-8` run; the others are stopped.
//!     workers: usize,
//! }
//!
//! fn workers(ctx: &Context) -> Result<Policy, PolicyError> {
//!     let settings: Settings = ctx.settings_as()?;
//!     let mut policy = Policy::new();
//!     for n in 1..=8 {
//!         let service = Service::new(format!("worker-{n}"));
//!         policy.add(if n <= settings.workers { service.running() } else { service.stopped() });
//!     }
//!     Ok(policy)
//! }
//!
//! let mut system = SimulatedSystem::new();
//! for n in 1..=8 {
//!     system = system.with_unit(&format!("worker-{n}"), UnitState::running());
//! }
//! let options = RunOptions::default().with_settings("workers: 6\n");
//! guest_sdk::run(workers, &mut system, &options).assert_converged();
//! system.assert_mutating_calls(&["stop worker-7", "stop worker-8"]);
//!
//! // A bad document is the policy's error: nothing is queried or changed.
//! system.clear_calls();
//! let options = RunOptions::default().with_settings("workers: six\n");
//! let report = guest_sdk::run(workers, &mut system, &options);
//! assert_eq!(
//!     report.errors,
//!     ["policy: settings: workers: invalid type: string \"six\", expected usize at line 1 column 10"]
//! );
//! system.assert_calls(&[]);
//! ```
//!
//! ## 5. Build the component
//!
//! ```sh
//! rustup target add wasm32-wasip2          # once
//! cargo build --release --target wasm32-wasip2
//! # -> target/wasm32-wasip2/release/web_policy.wasm (the crate name, with `_`)
//! ```
//!
//! On `wasm32`, [`export_policy!`] exports the function as the component's
//! `run`; the component imports nothing but the host's six service
//! operations and WASI with nothing granted, so a policy cannot read files,
//! the environment or the network: everything it knows comes from its
//! settings and the status queries.
//!
//! ## 6. Sign it and distribute the public key
//!
//! `host run` runs only policies signed by a key the machine trusts
//! (minisign format, so the `minisign` tool works too):
//!
//! ```sh
//! host keygen --out ~/keys        # policy-host.key (secret, password-protected) and policy-host.pub
//! host sign target/wasm32-wasip2/release/web_policy.wasm --key ~/keys/policy-host.key
//! # -> target/wasm32-wasip2/release/web_policy.wasm.minisig; ship both files
//!
//! # On each machine, once: trust the public key.
//! install -D -m 644 policy-host.pub /etc/policy-host/trusted-keys/ops.pub
//! host verify web_policy.wasm     # valid or invalid, key id, trusted comment
//! ```
//!
//! Sign again after every build: a policy changed after signing is refused.
//!
//! ## 7. Run it
//!
//! ```sh
//! host run web_policy.wasm --noop          # what would change: "Would have started, would have enabled"
//! host run web_policy.wasm                 # converge; a second run changes nothing
//! host run web_policy.wasm --refresh file#/etc/nginx/nginx.conf   # after a config change: restart nginx
//! host run web_policy.wasm --settings site.yaml --json --detailed-exitcodes
//! # Without the system key directory: --trusted-key policy-host.pub
//! ```
//!
//! The report has one line per resource (`service#nginx  started, enabled`)
//! and a summary; `--json` prints the whole [`Report`] plus the calls the
//! host made. The exit code is 0 when every resource converged, 1 otherwise
//! (`--detailed-exitcodes`: 0 no changes, 2 changes, 4 failures, 6 both).
//!
//! # The manifest policy
//!
//! For services that need no logic, the built-in manifest policy
//! (`policies/manifest`) applies a manifest given as settings:
//! `host run manifest_policy.wasm --settings site.yaml`. The same parser is
//! [`parse_manifest`], so a policy can also read a manifest and add to it:
//!
//! ```
//! use guest_sdk::prelude::*;
//!
//! let site = "\
//! - service:
//!     - httpd:
//!         ensure: running
//!         enable: true
//!         subscribe:
//!           - file#/etc/httpd/conf/httpd.conf
//!     - legacy-ftpd:
//!         ensure: stopped
//!         enable: false
//! ";
//! let manifest = |_: &Context| guest_sdk::parse_manifest(site);
//! let mut system = SimulatedSystem::new()
//!     .with_unit("httpd", UnitState::stopped())
//!     .with_unit("legacy-ftpd", UnitState::running().enabled());
//! guest_sdk::run(manifest, &mut system, &RunOptions::default()).assert_converged();
//! system.assert_mutating_calls(&["start httpd", "enable httpd", "stop legacy-ftpd", "disable legacy-ftpd"]);
//!
//! // Errors name the field and line.
//! let error = guest_sdk::parse_manifest("- service:\n    - httpd:\n        ensure: runing\n").unwrap_err();
//! assert!(error.to_string().contains("unknown variant `runing`"));
//! assert!(error.to_string().contains("at line 3"));
//! ```

mod apply;
pub mod contract;
pub mod manifest;
pub mod name;
mod policy;
pub mod provider;
pub mod report;
pub mod resource_ref;
mod service;
pub mod sim;

#[cfg(target_arch = "wasm32")]
#[doc(hidden)]
pub mod wasm;

use std::fmt::Display;

use serde::de::DeserializeOwned;
use thiserror::Error;

pub use apply::{apply, RunOptions};
pub use manifest::{parse_manifest, ManifestError};
pub use name::{NameError, ServiceName};
pub use policy::Policy;
pub use provider::{Operation, Provider, ProviderError, ServiceStatus};
pub use report::{Action, Event, FinalState, Report, RequestedState};
pub use resource_ref::ResourceRef;
pub use service::{Ensure, Service};

/// The error type a policy function may return: anything that displays.
pub type PolicyError = Box<dyn std::error::Error + Send + Sync>;

/// What a policy function sees of the run.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    settings: Option<&'a str>,
    noop: bool,
}

impl<'a> Context<'a> {
    /// A context with the given settings text (`host run --settings`).
    pub fn new(settings: Option<&'a str>, noop: bool) -> Self {
        Self { settings, noop }
    }

    /// The settings document as text, if the host was given one.
    pub fn settings(&self) -> Option<&'a str> {
        self.settings
    }

    /// The settings document parsed into `T`: as JSON when it starts with `{`
    /// or `[` (after leading whitespace), as YAML otherwise. An empty YAML
    /// document reads like an empty mapping, so a `T` whose fields all have
    /// defaults accepts it.
    ///
    /// Errors name the field at fault and the line:
    /// `settings: server.port: invalid type: string "x", expected u16 at line 3 column 9`.
    /// Without a settings document (`host run` without `--settings`) the
    /// error is [`SettingsError::Missing`]; use [`settings`](Self::settings)
    /// first to make settings optional. Returned from the policy function with
    /// `?`, either error becomes the report's policy error and nothing is
    /// applied.
    ///
    /// ```
    /// use guest_sdk::prelude::*;
    /// use serde::Deserialize;
    ///
    /// #[derive(Deserialize)]
    /// #[serde(deny_unknown_fields)]
    /// struct Settings {
    ///     services: Vec<String>,
    ///     #[serde(default)]
    ///     enable: bool,
    /// }
    ///
    /// fn fleet(ctx: &Context) -> Result<Policy, PolicyError> {
    ///     let settings: Settings = ctx.settings_as()?;
    ///     let mut policy = Policy::new();
    ///     for name in settings.services {
    ///         policy.add(Service::new(name).running().enable(settings.enable));
    ///     }
    ///     Ok(policy)
    /// }
    ///
    /// let mut system = SimulatedSystem::new().with_unit("web", UnitState::stopped());
    /// let options = RunOptions::default().with_settings("services: [web]\nenable: true\n");
    /// guest_sdk::run(fleet, &mut system, &options).assert_converged();
    /// system.assert_mutating_calls(&["start web", "enable web"]);
    ///
    /// // A settings error is the policy's error; nothing is queried or changed.
    /// let options = RunOptions::default().with_settings("services: [web]\nenabled: true\n");
    /// let report = guest_sdk::run(fleet, &mut system, &options);
    /// assert!(report.errors[0].starts_with("policy: settings: unknown field `enabled`"));
    /// assert!(report.errors[0].contains("at line 2 column 1"));
    /// ```
    pub fn settings_as<T: DeserializeOwned>(&self) -> Result<T, SettingsError> {
        parse_settings(self.settings.ok_or(SettingsError::Missing)?)
    }

    /// True in a noop (dry) run. Policies rarely need this: the SDK already
    /// makes no change in noop mode.
    pub fn is_noop(&self) -> bool {
        self.noop
    }
}

/// Why [`Context::settings_as`] could not produce the settings.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SettingsError {
    /// The host was given no settings document.
    #[error("no settings given: run the policy with --settings FILE (YAML or JSON)")]
    Missing,
    /// The document is not YAML or JSON, or does not fit the settings type.
    #[error("settings: {}{message}", path.as_deref().map(|p| format!("{p}: ")).unwrap_or_default())]
    Invalid {
        /// Where in the document the parser was (`server.port`, `services[2]`),
        /// when it was below the top level.
        path: Option<String>,
        /// The parser's message, with the position when the parser gives one
        /// (`invalid type: string "x", expected u16 at line 3 column 9`).
        message: String,
        /// The 1-based line of the problem, when known.
        line: Option<usize>,
        /// The 1-based column of the problem, when known.
        column: Option<usize>,
    },
}

impl SettingsError {
    /// The field at fault, as a path from the top of the document: the
    /// parser's position, joined with the field a `missing field` or
    /// `unknown field` message names (`server.port`).
    ///
    /// ```
    /// use guest_sdk::Context;
    ///
    /// #[derive(Debug, serde::Deserialize)]
    /// struct Settings { server: Server }
    /// #[derive(Debug, serde::Deserialize)]
    /// struct Server { host: String, port: u16 }
    ///
    /// let text = "server:\n  host: example.org\n  port: https\n";
    /// let error = Context::new(Some(text), false).settings_as::<Settings>().unwrap_err();
    /// assert_eq!(error.field().as_deref(), Some("server.port"));
    /// assert_eq!(error.line(), Some(3));
    /// assert_eq!(
    ///     error.to_string(),
    ///     "settings: server.port: invalid type: string \"https\", expected u16 at line 3 column 9"
    /// );
    /// ```
    pub fn field(&self) -> Option<String> {
        let SettingsError::Invalid { path, message, .. } = self else {
            return None;
        };
        let named = ["missing field `", "unknown field `"]
            .iter()
            .find_map(|prefix| message.strip_prefix(prefix))
            .and_then(|rest| rest.split_once('`'))
            .map(|(field, _)| field);
        match (path, named) {
            (Some(path), Some(field)) => Some(format!("{path}.{field}")),
            (Some(path), None) => Some(path.clone()),
            (None, Some(field)) => Some(field.to_string()),
            (None, None) => None,
        }
    }

    /// The 1-based line of the problem, when the parser knows it.
    pub fn line(&self) -> Option<usize> {
        match self {
            SettingsError::Invalid { line, .. } => *line,
            SettingsError::Missing => None,
        }
    }

    /// The 1-based column of the problem, when the parser knows it.
    pub fn column(&self) -> Option<usize> {
        match self {
            SettingsError::Invalid { column, .. } => *column,
            SettingsError::Missing => None,
        }
    }
}

/// Parses a settings document: JSON when it starts with `{` or `[`, else YAML.
fn parse_settings<T: DeserializeOwned>(text: &str) -> Result<T, SettingsError> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        serde_json::from_str(text).map_err(|e| {
            // serde_json does not say where in the document a type error is;
            // JSON is also YAML, and serde_yaml_ng does.
            let path = match e.classify() {
                serde_json::error::Category::Data => serde_yaml_ng::from_str::<T>(text)
                    .err()
                    .and_then(|y| split_yaml_path(&y.to_string()).0.map(str::to_string)),
                _ => None,
            };
            SettingsError::Invalid {
                path,
                message: e.to_string(),
                line: Some(e.line()).filter(|&l| l > 0),
                column: Some(e.column()).filter(|&c| c > 0),
            }
        })
    } else {
        serde_yaml_ng::from_str(text).map_err(|e| {
            let text = e.to_string();
            let (path, message) = split_yaml_path(&text);
            let location = e.location();
            SettingsError::Invalid {
                path: path.map(str::to_string),
                message: message.to_string(),
                line: location.as_ref().map(|l| l.line()),
                column: location.as_ref().map(|l| l.column()),
            }
        })
    }
}

/// serde_yaml_ng writes `PATH: MESSAGE` when the problem is below the top
/// level; serde's own messages (`invalid type: ...`) have a space before the
/// first `: `, paths (`server.port`, `list[0]`) do not.
fn split_yaml_path(text: &str) -> (Option<&str>, &str) {
    match text.split_once(": ") {
        Some((path, message)) if !path.is_empty() && !path.contains(char::is_whitespace) => {
            (Some(path), message)
        }
        _ => (None, text),
    }
}

/// Builds the policy with `policy_fn` and applies it through `provider`.
///
/// This is what the exported entry point does inside the component; native
/// tests call it with a [`sim::SimulatedSystem`]. An error from the policy
/// function becomes a policy-level error in the report, and nothing is applied.
pub fn run<F, E>(policy_fn: F, provider: &mut dyn Provider, options: &RunOptions) -> Report
where
    F: FnOnce(&Context<'_>) -> Result<Policy, E>,
    E: Display,
{
    let context = Context::new(options.settings.as_deref(), options.noop);
    match policy_fn(&context) {
        Ok(policy) => apply(&policy, provider, options),
        Err(e) => Report::rejected(vec![format!("policy: {e}")]),
    }
}

/// Everything a policy crate usually needs.
pub mod prelude {
    pub use crate::sim::{SimulatedSystem, UnitState};
    pub use crate::{
        Action, Context, Ensure, Operation, Policy, PolicyError, ProviderError, Report, RunOptions,
        Service,
    };
}

/// Exports a policy function as the component's `run` entry point.
///
/// The function has the shape `fn(&Context) -> Result<Policy, E>` with
/// `E: Display`. On targets other than `wasm32` the macro only checks the
/// signature, so the same crate builds and tests natively.
#[macro_export]
macro_rules! export_policy {
    ($policy_fn:path) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct ExportedPolicy;
            impl $crate::contract::bindings::Guest for ExportedPolicy {
                fn run(options: $crate::RunOptions) -> $crate::Report {
                    $crate::wasm::run_exported($policy_fn, options)
                }
            }
            $crate::contract::bindings::__export_policy_world!(ExportedPolicy with_types_in $crate::contract::bindings);
        };
        #[cfg(not(target_arch = "wasm32"))]
        const _: () = {
            fn _signature_check(context: &$crate::Context<'_>) -> $crate::Report {
                let _ = context;
                let mut system = $crate::sim::SimulatedSystem::new();
                $crate::run($policy_fn, &mut system, &$crate::RunOptions::default())
            }
        };
    };
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;
    use crate::sim::{SimulatedSystem, UnitState};

    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Settings {
        port: u16,
        #[serde(default)]
        server: Option<Server>,
        #[serde(default)]
        backends: Vec<Server>,
    }

    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Server {
        host: String,
        port: u16,
    }

    #[derive(Debug, Default, PartialEq, Deserialize)]
    #[serde(default)]
    struct AllDefaults {
        services: Vec<String>,
    }

    fn parse<T: DeserializeOwned>(text: &str) -> Result<T, SettingsError> {
        Context::new(Some(text), false).settings_as()
    }

    fn invalid(text: &str) -> SettingsError {
        parse::<Settings>(text).expect_err("settings should be rejected")
    }

    #[test]
    fn yaml_and_json_documents_are_read() {
        let expected = Settings {
            port: 8080,
            server: Some(Server {
                host: "example.org".into(),
                port: 443,
            }),
            backends: Vec::new(),
        };
        let yaml = "port: 8080\nserver:\n  host: example.org\n  port: 443\n";
        assert_eq!(parse::<Settings>(yaml).unwrap(), expected);
        let json = r#"  {"port": 8080, "server": {"host": "example.org", "port": 443}}"#;
        assert_eq!(parse::<Settings>(json).unwrap(), expected);
        assert_eq!(
            parse::<Vec<String>>(r#"["a", "b"]"#).unwrap(),
            ["a", "b"],
            "a document starting with [ is JSON"
        );
    }

    #[test]
    fn empty_yaml_document_gives_the_defaults() {
        assert_eq!(parse::<AllDefaults>("").unwrap(), AllDefaults::default());
        assert_eq!(
            parse::<AllDefaults>("# nothing yet\n").unwrap(),
            AllDefaults::default()
        );
    }

    #[test]
    fn missing_document_is_its_own_error() {
        let error = Context::new(None, false)
            .settings_as::<Settings>()
            .unwrap_err();
        assert_eq!(error, SettingsError::Missing);
        assert_eq!(
            error.to_string(),
            "no settings given: run the policy with --settings FILE (YAML or JSON)"
        );
        assert_eq!(
            (error.field(), error.line(), error.column()),
            (None, None, None)
        );
    }

    #[test]
    fn unknown_field_is_named_with_its_line() {
        let error = invalid("port: 80\nprot: 81\n");
        assert_eq!(error.field().as_deref(), Some("prot"));
        assert_eq!(error.line(), Some(2));
        let text = error.to_string();
        assert!(
            text.starts_with("settings: unknown field `prot`, expected one of"),
            "{text}"
        );
        assert!(text.ends_with("at line 2 column 1"), "{text}");
    }

    #[test]
    fn wrong_type_names_the_nested_field_and_line() {
        let error = invalid("port: 80\nserver:\n  host: example.org\n  port: https\n");
        assert_eq!(
            error,
            SettingsError::Invalid {
                path: Some("server.port".into()),
                message: "invalid type: string \"https\", expected u16 at line 4 column 9".into(),
                line: Some(4),
                column: Some(9),
            }
        );
        assert_eq!(error.field().as_deref(), Some("server.port"));
        assert_eq!(
            error.to_string(),
            "settings: server.port: invalid type: string \"https\", expected u16 at line 4 column 9"
        );
    }

    #[test]
    fn out_of_range_value_in_a_list_is_located() {
        let error = invalid("port: 80\nbackends:\n  - host: a\n    port: 70000\n");
        assert_eq!(error.field().as_deref(), Some("backends[0].port"));
        assert_eq!((error.line(), error.column()), (Some(4), Some(11)));
        assert!(
            error.to_string().contains("invalid value: integer `70000`"),
            "{error}"
        );
    }

    #[test]
    fn missing_field_is_named() {
        let error = invalid("backends: []\n");
        assert_eq!(error.field().as_deref(), Some("port"));
        assert_eq!(error.to_string(), "settings: missing field `port`");
        let nested = invalid("port: 1\nserver:\n  host: a\n");
        assert_eq!(nested.field().as_deref(), Some("server.port"));
        assert_eq!(
            nested.to_string(),
            "settings: server: missing field `port` at line 3 column 3"
        );
    }

    #[test]
    fn json_type_error_names_field_and_line() {
        let error =
            invalid("{\n  \"port\": 80,\n  \"server\": {\"host\": \"a\", \"port\": \"https\"}\n}");
        assert_eq!(error.field().as_deref(), Some("server.port"));
        assert_eq!(error.line(), Some(3));
        assert_eq!(
            error.to_string(),
            "settings: server.port: invalid type: string \"https\", expected u16 at line 3 column 41"
        );
    }

    #[test]
    fn syntax_errors_give_the_line() {
        let json = invalid("{\"port\": 80,\n");
        assert_eq!(json.field(), None);
        assert_eq!(json.line(), Some(2));
        assert!(
            json.to_string().starts_with("settings: EOF while parsing"),
            "{json}"
        );

        let yaml = invalid("port: 80\n- a\n");
        assert_eq!(yaml.field(), None);
        assert_eq!(yaml.line(), Some(2));
        assert_eq!(
            yaml.to_string(),
            "settings: did not find expected key at line 2 column 1, while parsing a block mapping"
        );
    }

    #[test]
    fn policy_returning_a_settings_error_applies_nothing() {
        fn policy(ctx: &Context) -> Result<Policy, PolicyError> {
            let settings: Settings = ctx.settings_as()?;
            Ok(Policy::new().service(Service::new(format!("web-{}", settings.port))))
        }
        let mut system = SimulatedSystem::new().with_unit("web-80", UnitState::stopped());
        let report = run(
            policy,
            &mut system,
            &RunOptions::default().with_settings("port: eighty\n"),
        );
        assert_eq!(
            report.errors,
            ["policy: settings: port: invalid type: string \"eighty\", expected u16 at line 1 column 7"]
        );
        assert!(report.events.is_empty());
        system.assert_calls(&[]);

        let report = run(policy, &mut system, &RunOptions::default());
        assert_eq!(
            report.errors,
            ["policy: no settings given: run the policy with --settings FILE (YAML or JSON)"]
        );

        let report = run(
            policy,
            &mut system,
            &RunOptions::default().with_settings("port: 80\n"),
        );
        report.assert_converged();
        system.assert_mutating_calls(&["start web-80"]);
    }
}
