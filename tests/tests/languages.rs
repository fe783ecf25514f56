//! End-to-end: policies written in Python and JavaScript. Each example
//! (policies/example-python, policies/example-js) is built by its
//! language's toolchain into a declaration component, composed with the
//! engine by `host compose`, signed, and run by the real `host`: on a real
//! systemd (converge, nothing to do, noop with the engine's messages) and
//! against the fake systemctl (the author's error in the report). The SDKs'
//! own tests run in the languages' own runners.

use std::path::Path;
use std::process::Command;

use policy_host_e2e::build::{compiled_alone, host_command, policy_wasm, workspace_root};
use policy_host_e2e::fake_systemctl::FakeSystemctl;
use policy_host_e2e::languages::{
    compose, example_declaration, example_policy, run_ok, work_dir, Language,
};
use policy_host_e2e::machine::{machine, mutating_calls, resource, state};
use policy_host_e2e::outcome::{assert_contains, text};
use policy_host_e2e::requires::e2e_test;

/// The example's services on a machine it has not converged, plus the one
/// its settings add; then three runs: noop, converge, nothing to do.
fn converges_a_real_systemd(language: Language) {
    let policy = example_policy(language);
    let m = machine();
    m.precompile(&policy);
    let extra = format!("extra-{}", language.tag());
    m.service("httpd", false, false);
    m.service("legacy-ftpd", true, true);
    m.service("metrics-agent", false, false);
    m.service(&extra, false, false);
    let settings = format!(r#"{{"extra": ["{extra}"]}}"#);
    let all = ["httpd", "legacy-ftpd", "metrics-agent", extra.as_str()];
    let before: Vec<_> = all.iter().map(|u| m.state(u)).collect();

    // Noop: the engine's messages, nothing changed.
    let noop = m.run_policy(&policy, Some(&settings), &["--json", "--noop"]);
    assert_eq!(noop.code, 0, "{noop:?}");
    let report = noop.report();
    assert_eq!(
        resource(&report, "service#httpd")["noop_message"],
        "Would have started, would have enabled",
        "{report:#}"
    );
    assert_eq!(
        resource(&report, "service#legacy-ftpd")["noop_message"],
        "Would have stopped, would have disabled",
        "{report:#}"
    );
    assert_eq!(
        resource(&report, &format!("service#{extra}"))["noop_message"],
        "Would have started",
        "{report:#}"
    );
    assert_eq!(mutating_calls(&report), Vec::<String>::new());
    let after_noop: Vec<_> = all.iter().map(|u| m.state(u)).collect();
    assert_eq!(after_noop, before, "a noop run changed the machine");

    // Converge.
    let run = m.run_policy(&policy, Some(&settings), &["--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let report = run.report();
    assert_eq!(report["summary"]["changed"], 4, "{report:#}");
    assert_eq!(m.state("httpd"), state(true, true));
    assert_eq!(m.state("legacy-ftpd"), state(false, false));
    assert_eq!(m.state("metrics-agent"), state(true, false));
    assert_eq!(m.state(&extra), state(true, false));
    let httpd = resource(&report, "service#httpd");
    assert_eq!(httpd["final"]["ensure"], "running", "{report:#}");
    assert_eq!(httpd["final"]["enabled"], true, "{report:#}");

    // Nothing to do: the engine's idempotency, only statuses asked.
    let again = m.run_policy(&policy, Some(&settings), &["--json"]);
    assert_eq!(again.code, 0, "{again:?}");
    let report = again.report();
    assert_eq!(report["summary"]["changed"], 0, "{report:#}");
    assert_eq!(mutating_calls(&report), Vec::<String>::new(), "{report:#}");
}

#[e2e_test(requires = "root, systemd, componentize-py")]
fn a_python_policy_converges_a_real_systemd_once_and_noop_says_what_it_would_do() {
    converges_a_real_systemd(Language::Python);
}

#[e2e_test(requires = "root, systemd, componentize-qjs")]
fn a_javascript_policy_converges_a_real_systemd_once_and_noop_says_what_it_would_do() {
    converges_a_real_systemd(Language::JavaScript);
}

/// A run of the example in `language` against `fake` with `settings`.
fn run_example_with_settings(
    fake: &FakeSystemctl,
    language: Language,
    settings: &str,
) -> serde_json::Value {
    let file = work_dir(language.tag()).join("settings.json");
    std::fs::write(&file, settings).unwrap();
    policy_host_e2e::build::sign_file(&file);
    let policy = example_policy(language);
    // Compiled once for every test of this process, the real systemd's
    // included: a cold compile of the Python policy is ~35 s of CPU here.
    let compiled = compiled_alone(&policy);
    let run = fake
        .host_run()
        .policy(&policy)
        .args(["--json", "--cache-dir"])
        .args([&compiled])
        .args(["--settings"])
        .args([&file])
        .run();
    run.assert_exit(1);
    run.json()
}

#[e2e_test(requires = "componentize-py")]
fn a_python_exception_is_the_runs_error_with_its_traceback_and_nothing_is_applied() {
    let fake = FakeSystemctl::example_units();
    let report =
        run_example_with_settings(&fake, Language::Python, "{\"extra\": [\"a\",\n  oops]}");
    let errors = report["errors"].to_string();
    // The author's exception, where it was raised, and the line and column
    // of the settings: the traceback as Python wrote it.
    assert_contains(&errors, "declaration: ");
    assert_contains(&errors, "Traceback (most recent call last)");
    assert_contains(&errors, "in extra_services");
    assert_contains(&errors, "SettingsError");
    assert_contains(&errors, "line 2 column 3");
    assert_eq!(fake.mutating_calls(), Vec::<String>::new());
}

#[e2e_test(requires = "componentize-qjs")]
fn a_javascript_throw_is_the_runs_error_with_its_stack_and_nothing_is_applied() {
    let fake = FakeSystemctl::example_units();
    let report = run_example_with_settings(&fake, Language::JavaScript, r#"{"extra": "cron"}"#);
    let errors = report["errors"].to_string();
    assert_contains(
        &errors,
        "declaration: TypeError: settings: extra must be an array",
    );
    assert_contains(&errors, "extraServices");
    assert_eq!(fake.mutating_calls(), Vec::<String>::new());
}

/// `host compose` with the engine, expected to fail: what it said.
fn compose_refused(declaration: &Path) -> String {
    let out = host_command()
        .arg("compose")
        .arg(declaration)
        .arg("-o")
        .arg(work_dir("refused").join("refused.wasm"))
        .arg("--engine")
        .arg(policy_wasm("declaration-engine"))
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", text(&out.stdout));
    text(&out.stderr)
}

#[e2e_test(requires = "componentize-qjs")]
fn compose_refuses_a_declaration_that_asks_the_host_for_anything() {
    // A Rust policy is no declaration.
    let said = compose_refused(&policy_wasm("example-policy"));
    assert_contains(
        &said,
        "does not export policy-host:declaration/declare@0.1.x",
    );
    assert_contains(&said, "run, subscriptions");

    // A declaration that imports the provider itself, as a hostile author
    // would write it to act behind the engine's back.
    let dir = work_dir("hostile");
    let deps = dir.join("wit").join("deps");
    std::fs::create_dir_all(&deps).unwrap();
    let root = workspace_root();
    std::fs::copy(root.join("wit/policy.wit"), deps.join("policy.wit")).unwrap();
    std::fs::copy(
        root.join("wit/declaration/declaration.wit"),
        deps.join("declaration.wit"),
    )
    .unwrap();
    std::fs::write(
        dir.join("wit").join("world.wit"),
        "package hostile:declaration;\n\
         world declaration {\n\
             import policy-host:policy/service-provider@0.6.0;\n\
             export policy-host:declaration/declare@0.1.0;\n\
         }\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("policy.js"),
        "import { stop } from 'policy-host:policy/service-provider@0.6.0';\n\
         export const declare = { declare() { stop('sshd'); return { services: [], leftOut: [] }; } };\n",
    )
    .unwrap();
    let built = dir.join("declaration.wasm");
    run_ok(
        Command::new("componentize-qjs")
            .current_dir(&dir)
            .args([
                "--wit",
                "wit",
                "-j",
                "policy.js",
                "-n",
                "declaration",
                "--sync",
                "--stub-wasi",
                "-o",
            ])
            .arg(&built),
    );
    let said = compose_refused(&built);
    assert_contains(&said, "the declaration imports ");
    assert_contains(&said, "policy-host:policy/service-provider@0.6.0");
    assert_contains(&said, "a declaration may import WASI only");
}

#[e2e_test(requires = "componentize-qjs")]
fn a_composed_policy_is_a_policy_of_the_hosts_contract_and_nothing_else() {
    let declaration = example_declaration(Language::JavaScript);
    let composed = declaration.with_file_name("inspected.wasm");
    let said = compose(&declaration, &composed);
    assert_contains(&said, "applied by the engine");
    let inspect = run_ok(host_command().arg("inspect").arg(&composed));
    assert_contains(
        &inspect,
        "world:     policy-host:policy/policy (the host accepts it)",
    );
    assert_contains(&inspect, "contract:  @0.6.0");
    assert!(
        !inspect.contains("policy-host:declaration"),
        "the declaration interface is satisfied inside the component:\n{inspect}"
    );
}

#[e2e_test(requires = "pytest, node")]
fn the_sdks_and_examples_pass_their_own_tests_in_their_own_runners() {
    let root = workspace_root();
    let pytest = run_ok(
        Command::new("python3")
            .current_dir(&root)
            .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
            .args(["sdk/python/tests", "policies/example-python"]),
    );
    assert!(pytest.contains(" passed"), "{pytest}");
    assert!(!pytest.contains("skipped"), "{pytest}");
    let node = run_ok(Command::new("node").current_dir(&root).args([
        "--test",
        "sdk/js/test/",
        "policies/example-js/",
    ]));
    assert_contains(&node, "# fail 0");
    assert!(!node.contains("# pass 0"), "{node}");
}

/// The fact names the host gathers, as the SDKs of other languages list
/// them: the same as the contract's, in its order.
#[test]
fn the_sdks_gather_the_contracts_fact_names() {
    let root = workspace_root();
    let wanted: Vec<String> = contract_words::facts::GATHERED
        .iter()
        .map(|name| format!("\"{name}\""))
        .collect();
    for (file, quote) in [
        ("sdk/python/policy_host/facts.py", '"'),
        ("sdk/js/policy-host.js", '\''),
    ] {
        let source = std::fs::read_to_string(root.join(file)).unwrap();
        let start = source.find("GATHERED = ").expect("a GATHERED list");
        let list = &source[start..];
        let list = &list[list.find(['(', '[']).unwrap()..=list.find([')', ']']).unwrap()];
        let found: Vec<String> = list
            .split(quote)
            .skip(1)
            .step_by(2)
            .map(|name| format!("\"{name}\""))
            .collect();
        assert_eq!(found, wanted, "{file}");
    }
}

#[e2e_test(requires = "componentize-qjs")]
fn a_machines_labels_reach_the_declaration_which_leaves_out_what_is_not_for_it() {
    let fake = FakeSystemctl::example_units();
    let config = fake.root().join("host.toml");
    std::fs::write(&config, "[labels]\nrole = \"db\"\n").unwrap();
    let run = fake
        .host_run()
        .policy(example_policy(Language::JavaScript))
        .args(["--json".as_ref(), "--config".as_ref(), config.as_os_str()])
        .run();
    run.assert_exit(0);
    let report = run.json();
    assert_eq!(
        report["left_out"],
        serde_json::json!([{
            "resource": "service#httpd",
            "why": "when role = web (this machine: db)"
        }]),
        "{report:#}"
    );
    assert!(
        !fake.calls().iter().any(|call| call.contains("httpd")),
        "nothing is asked of a unit left out: {:?}",
        fake.calls()
    );
    assert_eq!(fake.active("legacy-ftpd").as_deref(), Some("inactive"));
}
