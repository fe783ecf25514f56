//! # Tutorial: from an empty directory to a fleet
//!
//! From an empty directory to a policy running on a fleet: create the
//! crate, write the policy, test it natively, build it, sign it, give the
//! machines the public key, and run it.
//!
//! ## 1. Create the crate
//!
//! `host new-policy web-policy` writes a crate that builds and tests as it
//! is, on any machine where the host is installed: `Cargo.toml`, a
//! `Cargo.lock` with the dependency versions the host was tested with,
//! `src/lib.rs` with one service and its tests, a `README.md` with the
//! commands below, `build.sh`, `.gitignore`, and `vendor/`: this SDK and the
//! WIT contract, copied out of the host binary itself, so the crate needs no
//! checkout of this repository. By hand, the crate needs two things: both
//! crate types, and this SDK.
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
//! # The SDK `host new-policy` vendored, or a checkout's guest-sdk/.
//! guest-sdk = { path = "vendor/guest-sdk" }
//! ```
//!
//! ## 2. Write the policy
//!
//! Declare each service's desired state with [`Service`](crate::Service)'s builder:
//!
//! - [`running`](crate::Service::running) (the default) or
//!   [`stopped`](crate::Service::stopped): the running state;
//! - [`enable(true)`](crate::Service::enable) or `enable(false)`: start at boot or
//!   not; without it the boot configuration is left alone;
//! - [`subscribe("type#name")`](crate::Service::subscribe): restart the
//!   service when that resource changed:
//!   - `service#X` when service `X` changed earlier in the same run
//!     (declare `X` first);
//!   - `file#PATH` (a file, or everything below a directory) and
//!     `package#NAME` when the host finds them changed since the service's
//!     last successful run: a plain `host run` restarts the service, no
//!     flag needed. The host reads files only below its `watch_paths`
//!     (`/etc`, `/opt`, `/srv` and `/usr` unless configured otherwise) and
//!     packages from dpkg's status file; the first run only records what it
//!     found;
//!   - any other reference (another type, or a path outside `watch_paths`)
//!     is not watched: the service's event carries a warning saying so, and
//!     the reference fires only when the operator names it with
//!     `host run --refresh type#name` (which marks any reference as
//!     changed).
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
//! #     "start postgresql", "enable postgresql", "restart nginx",
//! #     "stop telnet.socket", "disable telnet.socket", "enable nginx",
//! # ]);
//! ```
//!
//! ## 3. Test it natively
//!
//! [`run`](crate::run) applies a policy function through any
//! [`Provider`](crate::Provider); in tests that is a
//! [`SimulatedSystem`](crate::sim::SimulatedSystem) with the units you give
//! it. It records every call, so a test states exactly what the policy does
//! on a given machine.
//! [`assert_calls`](crate::sim::SimulatedSystem::assert_calls) and
//! [`assert_mutating_calls`](crate::sim::SimulatedSystem::assert_mutating_calls)
//! panic with a diff of expected and actual calls;
//! [`Report::assert_converged`](crate::Report::assert_converged) and
//! [`Report::assert_no_changes`](crate::Report::assert_no_changes) with the
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
//! // not restarted: it was not running. A start counts only once the unit
//! // stayed up (the host's settle window, said at the unit's next status):
//! // postgresql's is awaited before nginx, which subscribes to it, and
//! // nginx's after the other services were begun, then each is enabled.
//! let mut system = fresh_machine();
//! guest_sdk::run(web_host, &mut system, &RunOptions::default()).assert_converged();
//! system.assert_mutating_calls(&[
//!     "start postgresql",
//!     "enable postgresql",
//!     "start nginx",
//!     "stop telnet.socket",
//!     "disable telnet.socket",
//!     "enable nginx",
//! ]);
//! assert_eq!(system.unit("nginx"), Some(UnitState::running().enabled()));
//!
//! // A second run only queries: every service is already as declared.
//! system.clear_calls();
//! guest_sdk::run(web_host, &mut system, &RunOptions::default()).assert_no_changes();
//! system.assert_calls(&["status postgresql", "status nginx", "status telnet.socket"]);
//!
//! // nginx's configuration was edited: the next `host run` sees the change
//! // and tells the policy, which restarts nginx (`with_changed` simulates it).
//! system.clear_calls();
//! let options = RunOptions::default().with_changed("nginx", NGINX_CONFIG);
//! let report = guest_sdk::run(web_host, &mut system, &options);
//! system.assert_mutating_calls(&["restart nginx"]);
//! assert!(report.event("service#nginx").unwrap().refreshed);
//!
//! // The operator can also name a reference: `host run --refresh file#...`.
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
//! // Why the start failed, then what the status after it found.
//! assert_eq!(
//!     report.event("service#postgresql").unwrap().errors,
//!     [
//!         "start postgresql: Job for postgresql.service failed.",
//!         "failed to reach desired state: expected running and enabled, found stopped and disabled",
//!     ]
//! );
//! assert_eq!(
//!     report.event("service#nginx").unwrap().errors,
//!     ["failed to reach desired state: expected running and enabled, found stopped and enabled"]
//! );
//! assert_eq!(system.unit("telnet.socket"), Some(UnitState::stopped()));
//! ```
//!
//! On a machine with a system bus the host runs starts, stops and restarts
//! side by side on systemd's job engine: they return once queued, and the
//! unit's next `status` waits for the job. The SDK then begins every service
//! before it finishes any, with the same events.
//! [`with_queued_jobs`](crate::sim::SimulatedSystem::with_queued_jobs) simulates
//! that, an injected failure showing where the host shows a failed job:
//!
//! ```
//! # use guest_sdk::prelude::*;
//! let policy = |_: &Context| {
//!     Ok::<_, PolicyError>(
//!         Policy::new()
//!             .service(Service::new("db").enable(true))
//!             .service(Service::new("app").enable(true)),
//!     )
//! };
//! let mut system = SimulatedSystem::new()
//!     .with_unit("db", UnitState::stopped())
//!     .with_unit("app", UnitState::stopped())
//!     .with_queued_jobs();
//! guest_sdk::run(policy, &mut system, &RunOptions::default()).assert_converged();
//! // Both starts are queued before either is awaited (by its `status`).
//! system.assert_mutating_calls(&["start db", "start app", "enable db", "enable app"]);
//! ```
//!
//! Declaration order alone does not order starts then: order them in the
//! units (`After=`), or subscribe (`service#db`): a subscriber is looked at
//! only after the job it subscribes to has ended.
//!
//! A start or restart counts only when the unit stays up: the host watches
//! it for its `settle` window (1 s by default) after the job ended, and a
//! unit that died or was restarted by systemd meanwhile fails its service
//! with systemd's reason. A unit systemd is restarting by itself
//! (`Restart=`, a crash loop) is a failure too, and is not started (a
//! policy that wants it stopped stops it). Both can be simulated:
//!
//! ```
//! # use guest_sdk::prelude::*;
//! let policy = |_: &Context| {
//!     Ok::<_, PolicyError>(
//!         Policy::new()
//!             .service(Service::new("flaky").enable(true))
//!             .service(Service::new("looping")),
//!     )
//! };
//! let mut system = SimulatedSystem::new()
//!     .with_unit("flaky", UnitState::stopped())
//!     .with_unit("looping", UnitState::crash_looping(3, "Result: exit-code; main process exited with status 3"))
//!     .with_death_after(Operation::Start, "flaky", "flaky.service did not stay up: ...");
//! let report = guest_sdk::run(policy, &mut system, &RunOptions::default());
//! // The start was made; it did not count, and phase two was not made.
//! system.assert_mutating_calls(&["start flaky"]);
//! let flaky = report.event("service#flaky").unwrap();
//! assert!(flaky.failed && flaky.actions.is_empty());
//! assert_eq!(
//!     flaky.errors,
//!     [
//!         "start flaky: flaky.service did not stay up: ...",
//!         "failed to reach desired state: expected running and enabled, found stopped and disabled",
//!     ]
//! );
//! let looping = report.event("service#looping").unwrap();
//! assert!(looping.failed);
//! assert!(looping.errors[0].contains("restarted 3 times by systemd since start"));
//! ```
//!
//! Run the tests with `cargo test`, as for any crate.
//!
//! ## 4. Settings
//!
//! `host run POLICY.wasm --settings FILE` hands the policy a document as
//! text ([`Context::settings`](crate::Context::settings));
//! [`Context::settings_as`](crate::Context::settings_as) parses it (YAML,
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
//! ## 4b. One policy for the whole fleet: facts
//!
//! The host tells every policy about its machine: facts it gathers itself
//! (`hostname`, `os.id`, `os.version_id`, `arch`, `cpus`, `memory_mib`,
//! `systemd.version`, ...; `host facts` prints them) and the labels its
//! operator gave it in host.toml (`[labels]`, `role = "web"`).
//! [`Context::fact`](crate::Context::fact) reads one by name,
//! [`Context::facts`](crate::Context::facts) has typed helpers. A service
//! meant for other machines can be noted with
//! [`Policy::leave_out`](crate::Policy::leave_out), so the report says why
//! it was not applied. Test each kind of machine natively with
//! [`SimulatedSystem::with_fact`](crate::sim::SimulatedSystem::with_fact)
//! (the simulated machine is otherwise a Debian 12 amd64 host):
//!
//! ```
//! use guest_sdk::prelude::*;
//!
//! fn fleet(ctx: &Context) -> Result<Policy, PolicyError> {
//!     let facts = ctx.facts();
//!     let mut policy = Policy::new().service(Service::new("ssh").running());
//!     match facts.label("role") {
//!         Some("web") => policy.add(Service::new("nginx").running().enable(true)),
//!         _ => policy.leave_out("nginx", "only where role = web"),
//!     }
//!     // More workers where there are more CPUs.
//!     let workers = facts.cpus().unwrap_or(1).min(4);
//!     for n in 1..=workers {
//!         policy.add(Service::new(format!("worker-{n}")).running());
//!     }
//!     Ok(policy)
//! }
//!
//! let mut web = SimulatedSystem::new()
//!     .with_fact("role", "web")
//!     .with_fact("cpus", "1")
//!     .with_unit("ssh", UnitState::running())
//!     .with_unit("nginx", UnitState::stopped())
//!     .with_unit("worker-1", UnitState::running());
//! guest_sdk::run(fleet, &mut web, &RunOptions::default()).assert_converged();
//! web.assert_mutating_calls(&["start nginx", "enable nginx"]);
//!
//! let mut db = SimulatedSystem::new()
//!     .with_fact("role", "db")
//!     .with_unit("ssh", UnitState::running())
//!     .with_unit("worker-1", UnitState::running())
//!     .with_unit("worker-2", UnitState::stopped());
//! let report = guest_sdk::run(fleet, &mut db, &RunOptions::default());
//! db.assert_mutating_calls(&["start worker-2"]);
//! assert_eq!(report.why_left_out("service#nginx"), Some("only where role = web"));
//! ```
//!
//! The manifest policy does the same without Rust: `when: { role: web }`
//! on an entry (see docs/service-type.md).
//!
//! ## 5. Build the component
//!
//! ```sh
//! rustup target add wasm32-wasip2          # once
//! cargo build --release --target wasm32-wasip2
//! # -> target/wasm32-wasip2/release/web_policy.wasm (the crate name, with `_`)
//! ```
//!
//! On `wasm32`, [`export_policy!`](crate::export_policy!) exports the function as the component's
//! `run`; the component imports nothing but the host's six service
//! operations and WASI with nothing granted, so a policy cannot read files,
//! the environment or the network: everything it knows is what the host
//! tells each run (its settings, this machine's facts and labels, step 4b,
//! and the references that changed) and what its status queries answer.
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
//! host run web_policy.wasm                 # converge; again: no change, unless nginx.conf changed (restart nginx)
//! host run web_policy.wasm --refresh file#/etc/nginx/nginx.conf   # restart nginx even without a change
//! host run web_policy.wasm --settings site.yaml --json --detailed-exitcodes
//! # Without the system key directory: --trusted-key policy-host.pub
//! ```
//!
//! The report has one line per resource (`service#nginx  started, enabled`)
//! and a summary; `--json` prints the whole [`Report`](crate::Report) plus the calls the
//! host made. The exit code is 0 when every resource converged, 1 otherwise
//! (`--detailed-exitcodes`: 0 no changes, 2 changes, 4 failures, 6 both).
//!
//! # The manifest policy
//!
//! For services that need no logic, the built-in manifest policy
//! (`policies/manifest`) applies a manifest given as settings:
//! `host run manifest_policy.wasm --settings site.yaml`. The same parser is
//! [`parse_manifest`](crate::parse_manifest), so a policy can also read a manifest and add to it:
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
//! system.assert_mutating_calls(&["start httpd", "stop legacy-ftpd", "disable legacy-ftpd", "enable httpd"]);
//!
//! // Errors name the field and line.
//! let error = guest_sdk::parse_manifest("- service:\n    - httpd:\n        ensure: runing\n").unwrap_err();
//! assert!(error.to_string().contains("unknown variant `runing`"));
//! assert!(error.to_string().contains("at line 3"));
//! ```
