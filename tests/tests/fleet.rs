//! End-to-end: policies and settings travel through a real OCI registry
//! (Debian's docker-registry, started by the test on 127.0.0.1) with the
//! same trust rules as local files. `host push` uploads; `host run
//! oci://...` pulls, verifies and runs; host.toml's `[[policy]]` list runs
//! on its own. Every refusal is checked against the fake systemctl's log:
//! nothing may have run.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use policy_host_e2e::build::{self, host_command, policy_wasm, sign_file, trust_args};
use policy_host_e2e::fake_systemctl::FakeSystemctl;
use policy_host_e2e::outcome::{run, Run};
use policy_host_e2e::registry::{Certificate, Options, TestRegistry};
use policy_host_e2e::requires::e2e_test;
use serde_json::Value;

const START_WEB: &str = "- service:\n    - web:\n        ensure: running\n";
const STOP_WEB: &str = "- service:\n    - web:\n        ensure: stopped\n";

/// A machine of the fleet (a fake systemctl, its own state, cache and
/// lock), and an operator's workstation directory.
struct Machine {
    fake: FakeSystemctl,
    registry_args: Vec<String>,
}

impl Machine {
    fn new(registry: &TestRegistry) -> Self {
        let fake = FakeSystemctl::new();
        fake.unit("web", "inactive", "disabled");
        let registry_args = match &registry.ca {
            Some(ca) => vec!["--registry-ca".to_owned(), ca.display().to_string()],
            None => vec!["--insecure-registry".to_owned(), registry.addr.clone()],
        };
        Self {
            fake,
            registry_args,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.fake.root().join(name)
    }

    /// The manifest policy as `name`, signed by the test key.
    fn policy(&self, name: &str) -> PathBuf {
        let path = self.path(name);
        fs::copy(policy_wasm("manifest-policy"), &path).unwrap();
        sign_file(&path);
        path
    }

    /// A settings document, signed unless `signed` is false.
    fn settings(&self, name: &str, text: &str, signed: bool) -> PathBuf {
        let path = self.path(name);
        fs::write(&path, text).unwrap();
        let _ = fs::remove_file(self.path(&format!("{name}.minisig")));
        if signed {
            sign_file(&path);
        }
        path
    }

    fn push(&self, file: &Path, reference: &str) -> Run {
        self.push_with(file, reference, &[])
    }

    fn push_with(&self, file: &Path, reference: &str, args: &[&str]) -> Run {
        let mut cmd = host_command();
        cmd.arg("push")
            .arg(file)
            .arg(reference)
            .args(&self.registry_args)
            .args(args);
        run(cmd)
    }

    /// Pushes and returns the digest reference it printed.
    #[track_caller]
    fn pushed(&self, file: &Path, reference: &str) -> String {
        let r = self.push(file, reference);
        r.assert_exit(0);
        let printed = r.stdout.trim().to_owned();
        assert!(printed.contains("@sha256:"), "push printed {printed:?}");
        printed
    }

    /// Pushes the signed `web` policy to `policies/web:1` and settings that
    /// start web to `settings/web:prod`; returns the two tag references and
    /// the policy's digest reference.
    fn publish_web(&self, registry: &TestRegistry) -> (String, String, String) {
        let policy_ref = registry.reference("policies/web:1");
        let settings_ref = registry.reference("settings/web:prod");
        let pinned = self.pushed(&self.policy("web.wasm"), &policy_ref);
        self.pushed(&self.settings("web.yaml", START_WEB, true), &settings_ref);
        (policy_ref, settings_ref, pinned)
    }

    fn host_run(&self, args: &[&str], cache: &str) -> Run {
        let mut cmd = self.fake.host_command();
        cmd.arg("run")
            .args(args)
            .args(trust_args())
            .args(&self.registry_args)
            .arg("--lock-file")
            .arg(self.path("run.lock"))
            .arg("--cache-dir")
            .arg(self.path(cache))
            .arg("--state-dir")
            .arg(self.path("state"))
            .arg("--registry-timeout")
            .arg("5")
            .arg("--json");
        run(cmd)
    }

    fn run_refs(&self, policy: &str, settings: &str) -> Run {
        self.host_run(&[policy, "--settings", settings], "cache")
    }

    #[track_caller]
    fn assert_refused(&self, r: &Run, needle: &str) {
        r.assert_exit(1);
        assert_eq!(
            self.fake.mutating_calls(),
            Vec::<String>::new(),
            "nothing may run"
        );
        assert!(
            r.stderr.contains(needle),
            "{needle:?} not in:\n{}",
            r.stderr
        );
        let lines: Vec<&str> = r.stderr.lines().filter(|l| l.contains("error:")).collect();
        assert_eq!(lines.len(), 1, "one line says why:\n{}", r.stderr);
    }
}

fn digest_of(pinned: &str) -> &str {
    pinned.split_once('@').expect("a digest reference").1
}

#[e2e_test(requires = "docker-registry, promtool")]
fn push_then_run_follows_the_tag_and_refuses_a_rollback() {
    let registry = TestRegistry::start(Options::default());
    let m = Machine::new(&registry);
    let policy = m.policy("web.wasm");
    let (policy_ref, settings_ref) = (
        registry.reference("policies/web:1.4"),
        registry.reference("settings/web:prod"),
    );
    let policy_pinned = m.pushed(&policy, &policy_ref);
    assert!(policy_pinned.starts_with(&registry.reference("policies/web@sha256:")));
    let old = m.settings("web.yaml", START_WEB, true);
    let old_copy = (
        fs::read(&old).unwrap(),
        fs::read(m.path("web.yaml.minisig")).unwrap(),
    );
    let settings_pinned = m.pushed(&old, &settings_ref);

    let r = m.run_refs(&policy_ref, &settings_ref);
    r.assert_exit(0);
    assert_eq!(m.fake.mutating_calls(), ["start --system -- web"]);
    let json = r.json();
    assert_eq!(json["source"]["location"], policy_ref.as_str());
    assert_eq!(json["source"]["digest"], digest_of(&policy_pinned));
    assert_eq!(json["source"]["stale"], false);
    assert_eq!(
        json["settings_source"]["digest"],
        digest_of(&settings_pinned)
    );
    assert_eq!(json["signature"]["verified"], true);
    assert_eq!(json["signature"]["settings"]["verified"], true);

    // An unchanged tag costs its manifest and its signatures (a few hundred
    // bytes each, read every time: a signature pushed since counts); the
    // content is not downloaded again.
    let manifests = registry.requests("GET /v2/policies/web/manifests/1.4");
    let blobs = registry.requests("GET /v2/policies/web/blobs/");
    let signatures = registry.requests("GET /v2/policies/web/manifests/sha256");
    let r = m.run_refs(&policy_ref, &settings_ref);
    r.assert_exit(0);
    assert_eq!(
        registry.requests("GET /v2/policies/web/manifests/1.4"),
        manifests + 1
    );
    assert_eq!(
        registry.requests("GET /v2/policies/web/blobs/"),
        blobs + 1,
        "the signature's one blob, not the component"
    );
    assert_eq!(
        registry.requests("GET /v2/policies/web/manifests/sha256"),
        signatures + 2,
        "the referrers tag (distribution 2.8 has no referrers API) and the one signature's manifest"
    );

    // The tag moves to a newer signed version: the next run picks it up.
    std::thread::sleep(Duration::from_millis(1100));
    let new = m.settings("web.yaml", STOP_WEB, true);
    let moved = m.pushed(&new, &settings_ref);
    assert_ne!(moved, settings_pinned);
    m.fake.clear_calls();
    let r = m.run_refs(&policy_ref, &settings_ref);
    r.assert_exit(0);
    assert_eq!(m.fake.mutating_calls(), ["stop --system -- web"]);
    assert_eq!(r.json()["settings_source"]["digest"], digest_of(&moved));

    // The older signed version pushed to the tag again: a rollback.
    fs::write(m.path("web.yaml"), &old_copy.0).unwrap();
    fs::write(m.path("web.yaml.minisig"), &old_copy.1).unwrap();
    m.pushed(&m.path("web.yaml"), &settings_ref);
    m.fake.clear_calls();
    let r = m.run_refs(&policy_ref, &settings_ref);
    m.assert_refused(&r, "rollback refused");
}

/// docs/fleet.md's rollback, as written: the old content signed again is
/// the newer version, and it reaches a machine that ran both versions (its
/// kept copy of those bytes carries the old signature) as well as one that
/// ran only the first.
#[e2e_test(requires = "docker-registry, promtool")]
fn a_fleet_rollback_signed_again_reaches_a_machine_that_ran_both_versions() {
    let registry = TestRegistry::start(Options::default());
    let (both, first_only) = (Machine::new(&registry), Machine::new(&registry));
    let policy_ref = registry.reference("policies/web:1");
    let settings_ref = registry.reference("settings/web:prod");
    both.pushed(&both.policy("web.wasm"), &policy_ref);
    // v1 (signed at t1): both machines run it.
    let v1 = both.settings("web.yaml", START_WEB, true);
    let v1_pinned = both.pushed(&v1, &settings_ref);
    for m in [&both, &first_only] {
        m.run_refs(&policy_ref, &settings_ref).assert_exit(0);
        assert_eq!(m.fake.mutating_calls(), ["start --system -- web"]);
        m.fake.clear_calls();
    }
    // v2 (t2): one machine runs it.
    std::thread::sleep(Duration::from_millis(1100));
    let v2 = both.settings("web.yaml", STOP_WEB, true);
    both.pushed(&v2, &settings_ref);
    both.run_refs(&policy_ref, &settings_ref).assert_exit(0);
    assert_eq!(both.fake.mutating_calls(), ["stop --system -- web"]);
    both.fake.clear_calls();

    // The rollback: v1's bytes signed again (t3), pushed, the tag moved back.
    std::thread::sleep(Duration::from_millis(1100));
    let again = both.settings("web.yaml", START_WEB, true);
    let again_pinned = both.pushed(&again, &settings_ref);
    assert_eq!(
        digest_of(&again_pinned),
        digest_of(&v1_pinned),
        "the same bytes make the same artifact; only its signatures differ"
    );
    let signed_at = |r: &Run| r.json()["signature"]["settings"]["trusted_comment"].clone();
    let r = both.run_refs(&policy_ref, &settings_ref);
    r.assert_exit(0);
    assert_eq!(both.fake.mutating_calls(), ["start --system -- web"]);
    let resigned = signed_at(&r);
    assert_eq!(r.json()["settings_source"]["digest"], digest_of(&v1_pinned));
    let r = first_only.run_refs(&policy_ref, &settings_ref);
    r.assert_exit(0);
    assert_eq!(first_only.fake.mutating_calls(), Vec::<String>::new());
    assert_eq!(
        signed_at(&r),
        resigned,
        "the newest signature of the registry's is the one taken"
    );

    // A third signing of the same bytes is taken too, by both.
    std::thread::sleep(Duration::from_millis(1100));
    let third = both.settings("web.yaml", START_WEB, true);
    both.pushed(&third, &settings_ref);
    for m in [&both, &first_only] {
        let r = m.run_refs(&policy_ref, &settings_ref);
        r.assert_exit(0);
        assert_ne!(signed_at(&r), resigned, "the third signature");
    }
}

#[e2e_test(requires = "docker-registry, promtool")]
fn unsigned_tampered_untrusted_misnamed_and_two_layer_artifacts_are_refused() {
    let registry = TestRegistry::start(Options::default());
    let m = Machine::new(&registry);
    let settings_ref = registry.reference("settings/web:prod");
    m.pushed(&m.settings("web.yaml", START_WEB, true), &settings_ref);

    // Unsigned: push refuses it; pushed anyway, the host refuses it.
    let unsigned = m.path("web.wasm");
    fs::copy(policy_wasm("manifest-policy"), &unsigned).unwrap();
    let unsigned_ref = registry.reference("policies/unsigned/web:1");
    let r = m.push(&unsigned, &unsigned_ref);
    r.assert_exit(1);
    assert!(
        r.stderr
            .contains("web.wasm is unsigned, and hosts refuse it")
            && r.stderr.contains("nothing was pushed"),
        "{}",
        r.stderr
    );
    assert_eq!(registry.requests("PUT /v2/policies/unsigned/web/"), 0);
    let r = m.push_with(&unsigned, &unsigned_ref, &["--allow-unsigned"]);
    r.assert_exit(0);
    assert!(
        r.stderr.contains("pushed anyway (--allow-unsigned)"),
        "{}",
        r.stderr
    );
    let r = m.run_refs(
        &registry.reference("policies/unsigned/web:1"),
        &settings_ref,
    );
    m.assert_refused(&r, "policy is not signed: the registry lists no signature");

    // Signed by a key the machine does not trust.
    let other = m.path("other-key");
    let other_key = build::keygen(&other);
    let untrusted = m.path("untrusted/web.wasm");
    fs::create_dir_all(untrusted.parent().unwrap()).unwrap();
    fs::copy(policy_wasm("manifest-policy"), &untrusted).unwrap();
    build::sign_with(&untrusted, &other_key.secret_key);
    m.pushed(&untrusted, &registry.reference("policies/untrusted/web:1"));
    let r = m.run_refs(
        &registry.reference("policies/untrusted/web:1"),
        &settings_ref,
    );
    m.assert_refused(&r, "signature by untrusted key");

    // Signed as db.wasm, pushed where hosts expect web.wasm: push refuses
    // it; pushed anyway, the host refuses it.
    let db = m.policy("db.wasm");
    let r = m.push(&db, &registry.reference("policies/web:misnamed"));
    r.assert_exit(1);
    assert!(
        r.stderr.contains("expect web.wasm") && r.stderr.contains("nothing was pushed"),
        "{}",
        r.stderr
    );
    let r = m.push_with(
        &db,
        &registry.reference("policies/web:misnamed"),
        &["--allow-unsigned"],
    );
    r.assert_exit(0);
    assert!(r.stderr.contains("expect web.wasm"), "{}", r.stderr);
    let r = m.run_refs(&registry.reference("policies/web:misnamed"), &settings_ref);
    m.assert_refused(&r, "signed as \"db.wasm\", not as \"web.wasm\"");

    // Tampered in the registry's storage after a good push.
    let policy = m.policy("web.wasm");
    let pinned = m.pushed(&policy, &registry.reference("policies/tampered/web:1"));
    let (_, manifest) = registry.http(
        "GET",
        &format!("/v2/policies/tampered/web/manifests/{}", digest_of(&pinned)),
        "application/vnd.oci.image.manifest.v1+json",
        b"",
    );
    let manifest: Value = serde_json::from_slice(&manifest).unwrap();
    let layer = manifest["layers"][0]["digest"].as_str().unwrap();
    let file = registry.blob_file(layer);
    let mut bytes = fs::read(&file).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    fs::write(&file, bytes).unwrap();
    let r = m.run_refs(
        &registry.reference("policies/tampered/web:1"),
        &settings_ref,
    );
    m.assert_refused(&r, "Digest");

    // Two layers: not something `host push` makes, so written by hand.
    let mut two = manifest.clone();
    let layer = two["layers"][0].clone();
    two["layers"] = Value::Array(vec![layer.clone(), layer]);
    let (status, body) = registry.http(
        "PUT",
        "/v2/policies/tampered/web/manifests/two",
        "application/vnd.oci.image.manifest.v1+json",
        serde_json::to_string(&two).unwrap().as_bytes(),
    );
    assert_eq!(status, 201, "{}", String::from_utf8_lossy(&body));
    let r = m.run_refs(
        &registry.reference("policies/tampered/web:two"),
        &settings_ref,
    );
    m.assert_refused(&r, "the artifact has 2 layers");

    // A pinned digest that the tag does not hold.
    let wrong = format!(
        "{}@sha256:{}",
        registry.reference("policies/tampered/web"),
        "0".repeat(64)
    );
    let r = m.run_refs(&wrong, &settings_ref);
    m.assert_refused(&r, "no such manifest");
}

#[e2e_test(requires = "docker-registry, promtool")]
fn a_registry_outage_runs_the_last_verified_copy_marked_stale() {
    let mut registry = TestRegistry::start(Options::default());
    let m = Machine::new(&registry);
    let (policy_ref, settings_ref, pinned) = m.publish_web(&registry);
    m.run_refs(&policy_ref, &settings_ref).assert_exit(0);

    registry.stop();
    m.fake.unit("web", "inactive", "disabled").clear_calls();
    let metrics = m.path("policy_host.prom");
    let r = m.host_run(
        &[
            &policy_ref,
            "--settings",
            &settings_ref,
            "--metrics",
            metrics.to_str().unwrap(),
        ],
        "cache",
    );
    r.assert_exit(0);
    assert_eq!(
        m.fake.mutating_calls(),
        ["start --system -- web"],
        "the fleet still converges"
    );
    assert!(r.stderr.contains("stale"), "{}", r.stderr);
    assert!(r.stderr.contains(&registry.addr), "{}", r.stderr);
    let json = r.json();
    assert_eq!(json["source"]["stale"], true);
    assert_eq!(json["source"]["digest"], digest_of(&pinned));
    assert_eq!(json["settings_source"]["stale"], true);
    // Bounded labels on the gauge; where it came from and which digest ran
    // in the info metric, one series per policy and kind.
    let samples = policy_host_e2e::metrics::checked(&metrics);
    assert_eq!(
        samples.value("policy_host_source_stale{policy=\"web.wasm\",kind=\"policy\"}"),
        1.0
    );
    assert_eq!(
        samples.value("policy_host_source_stale{policy=\"web.wasm\",kind=\"settings\"}"),
        1.0
    );
    let info = samples.series("policy_host_source_info");
    assert_eq!(info.len(), 2, "{info:?}");
    let policy_info = format!(
        "policy_host_source_info{{policy=\"web.wasm\",kind=\"policy\",source=\"{policy_ref}\",digest=\"{}\"}}",
        digest_of(&pinned)
    );
    assert_eq!(samples.value(&policy_info), 1.0);

    // With no verified copy on this machine, the registry's error.
    m.fake.clear_calls();
    let r = m.host_run(&[&policy_ref, "--settings", &settings_ref], "empty-cache");
    m.assert_refused(&r, &format!("registry {} cannot be reached", registry.addr));
    assert!(r.stderr.contains("no verified copy"), "{}", r.stderr);
}

#[e2e_test(requires = "docker-registry, promtool")]
fn tls_with_a_private_ca_and_htpasswd_login() {
    let options = Options {
        tls: true,
        login: Some(("ops".into(), "fleet-secret".into())),
        ..Options::default()
    };
    let registry = TestRegistry::start(options);
    let m = Machine::new(&registry);
    let policy_ref = registry.reference("policies/web:1");
    let settings_ref = registry.reference("settings/web:1");
    let policy = m.policy("web.wasm");

    // No login: the registry's refusal, named, with where the logins were
    // looked for (HOME without a Docker configuration).
    let home = m.path("home");
    fs::create_dir_all(&home).unwrap();
    let r = {
        let mut cmd = host_command();
        cmd.env("HOME", &home)
            .env_remove("DOCKER_CONFIG")
            .arg("push")
            .arg(&policy)
            .arg(&policy_ref)
            .args(&m.registry_args);
        run(cmd)
    };
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    for needle in [
        format!(
            "registry {} refused access (401 Unauthorized)",
            registry.addr
        ),
        format!(
            "its credentials are read from {}",
            home.join(".docker/config.json").display()
        ),
    ] {
        assert!(
            r.stderr.contains(&needle),
            "{needle:?} not in:\n{}",
            r.stderr
        );
    }

    let docker = registry.docker_config();
    let push = |file: &Path, reference: &str| {
        let mut cmd = host_command();
        cmd.env("DOCKER_CONFIG", &docker)
            .arg("push")
            .arg(file)
            .arg(reference)
            .args(&m.registry_args);
        let r = run(cmd);
        r.assert_exit(0);
    };
    push(&policy, &policy_ref);
    push(&m.settings("web.yaml", START_WEB, true), &settings_ref);

    let mut cmd = m.fake.host_command();
    cmd.env("DOCKER_CONFIG", &docker)
        .arg("run")
        .arg(&policy_ref)
        .arg("--settings")
        .arg(&settings_ref)
        .args(trust_args())
        .args(&m.registry_args)
        .arg("--lock-file")
        .arg(m.path("run.lock"))
        .arg("--cache-dir")
        .arg(m.path("cache"))
        .arg("--state-dir")
        .arg(m.path("state"));
    run(cmd).assert_exit(0);
    assert_eq!(m.fake.mutating_calls(), ["start --system -- web"]);

    // The same logins named by host.toml's registry_auth, with no
    // DOCKER_CONFIG and a HOME without them: every command reads them.
    let config = m.path("host.toml");
    fs::write(
        &config,
        format!(
            "registry_auth = {:?}\n",
            docker.join("config.json").display().to_string()
        ),
    )
    .unwrap();
    m.fake.unit("web", "inactive", "disabled").clear_calls();
    let mut cmd = m.fake.host_command();
    cmd.env("HOME", &home)
        .env_remove("DOCKER_CONFIG")
        .arg("run")
        .arg(&policy_ref)
        .arg("--settings")
        .arg(&settings_ref)
        .arg("--config")
        .arg(&config)
        .args(trust_args())
        .args(&m.registry_args)
        .arg("--lock-file")
        .arg(m.path("run.lock"))
        .arg("--cache-dir")
        .arg(m.path("auth-cache"))
        .arg("--state-dir")
        .arg(m.path("state"));
    run(cmd).assert_exit(0);
    assert_eq!(m.fake.mutating_calls(), ["start --system -- web"]);
    for command in ["verify", "push"] {
        let mut cmd = host_command();
        cmd.env("HOME", &home)
            .env_remove("DOCKER_CONFIG")
            .arg(command);
        if command == "push" {
            cmd.arg(&policy);
        }
        cmd.arg(&policy_ref).args(&m.registry_args);
        if command == "verify" {
            cmd.args(trust_args());
        }
        cmd.arg("--config").arg(&config);
        let r = run(cmd);
        r.assert_exit(0);
    }

    // Without the private CA the certificate is not trusted.
    m.fake.unit("web", "inactive", "disabled").clear_calls();
    let mut cmd = m.fake.host_command();
    cmd.env("DOCKER_CONFIG", &docker)
        .arg("run")
        .arg(&policy_ref)
        .arg("--settings")
        .arg(&settings_ref)
        .args(trust_args())
        .arg("--lock-file")
        .arg(m.path("run.lock"))
        .arg("--cache-dir")
        .arg(m.path("other-cache"))
        .arg("--state-dir")
        .arg(m.path("state"));
    let r = run(cmd);
    r.assert_exit(1);
    assert_eq!(m.fake.mutating_calls(), Vec::<String>::new());
    assert!(
        r.stderr.to_lowercase().contains("certificate"),
        "{}",
        r.stderr
    );
}

/// `host verify` and `host inspect` take a reference as they take a file:
/// the same trust, the same verdict and the same lines, with the digest the
/// tag points to; `host push` takes a digest pin and refuses one that the
/// file does not make, before uploading anything.
#[e2e_test(requires = "docker-registry, promtool")]
fn verify_inspect_and_push_take_references_and_digest_pins() {
    let registry = TestRegistry::start(Options::default());
    let m = Machine::new(&registry);
    let (policy_ref, settings_ref, pinned) = m.publish_web(&registry);
    let host = |args: &[&std::ffi::OsStr]| {
        let mut cmd = host_command();
        cmd.args(args).args(trust_args()).args(&m.registry_args);
        run(cmd)
    };
    let os = |s: &str| std::ffi::OsString::from(s);

    // verify: the file and the reference give the same key and comment.
    let by_file = host(&[&os("verify"), m.path("web.wasm").as_os_str()]);
    by_file.assert_exit(0);
    let by_reference = host(&[&os("verify"), &os(&policy_ref)]);
    by_reference.assert_exit(0);
    let lines: Vec<&str> = by_reference.stdout.lines().collect();
    assert_eq!(
        lines[0],
        format!("valid: {pinned}"),
        "{}",
        by_reference.stdout
    );
    assert_eq!(lines[1..], by_file.stdout.lines().collect::<Vec<_>>()[1..]);
    assert!(
        lines[2].contains("file:web.wasm"),
        "{}",
        by_reference.stdout
    );
    let settings = host(&[&os("verify"), &os(&settings_ref)]);
    settings.assert_exit(0);
    assert!(
        settings.stdout.contains("file:web.yaml"),
        "{}",
        settings.stdout
    );

    // An unsigned artifact is invalid, as an unsigned file is.
    let unsigned = m.path("unsigned/web.wasm");
    fs::create_dir_all(unsigned.parent().unwrap()).unwrap();
    fs::copy(policy_wasm("manifest-policy"), &unsigned).unwrap();
    let unsigned_ref = registry.reference("policies/unsigned/web:1");
    m.push_with(&unsigned, &unsigned_ref, &["--allow-unsigned"])
        .assert_exit(0);
    let r = host(&[&os("verify"), &os(&unsigned_ref)]);
    r.assert_exit(1);
    assert!(r.stdout.starts_with("invalid: oci://"), "{}", r.stdout);
    assert!(r.stdout.contains("no signature"), "{}", r.stdout);

    // inspect: the same component, world and signature as the file.
    let file_view = host(&[
        &os("inspect"),
        &os("--json"),
        m.path("web.wasm").as_os_str(),
    ]);
    file_view.assert_exit(0);
    let remote_view = host(&[&os("inspect"), &os("--json"), &os(&policy_ref)]);
    remote_view.assert_exit(0);
    let (file_view, remote_view): (Value, Value) = (file_view.json(), remote_view.json());
    assert_eq!(remote_view["file"], pinned.as_str());
    for field in ["sha256", "size", "world", "imports", "exports", "signature"] {
        assert_eq!(remote_view[field], file_view[field], "{field}");
    }
    assert_eq!(remote_view["signature"]["status"], "valid");
    // A settings document: what it is and who signed it, from the registry
    // as from the file.
    let settings_file = host(&[
        &os("inspect"),
        &os("--json"),
        m.path("web.yaml").as_os_str(),
    ]);
    settings_file.assert_exit(0);
    let settings_remote = host(&[&os("inspect"), &os("--json"), &os(&settings_ref)]);
    settings_remote.assert_exit(0);
    let (settings_file, settings_remote): (Value, Value) =
        (settings_file.json(), settings_remote.json());
    assert_eq!(
        settings_remote["kind"], "settings document (YAML, read by the policy)",
        "{settings_remote:#}"
    );
    for field in ["sha256", "size", "kind", "lines", "signature"] {
        assert_eq!(settings_remote[field], settings_file[field], "{field}");
    }
    assert_eq!(settings_remote["signature"]["status"], "valid");
    assert!(settings_remote["signature"]["trusted_comment"]
        .as_str()
        .unwrap()
        .contains("file:web.yaml"));
    let human = host(&[&os("inspect"), &os(&settings_ref)]);
    human.assert_exit(0);
    assert!(human.stdout.contains("lines:"), "{}", human.stdout);
    assert!(!human.stdout.contains("imports:"), "{}", human.stdout);

    // push: a pin the file makes is pushed under its tag, or by digest alone.
    let policy = m.path("web.wasm");
    let digest = digest_of(&pinned);
    let tag_and_pin = format!("{}:2@{digest}", registry.reference("policies/web"));
    assert_eq!(m.pushed(&policy, &tag_and_pin), pinned);
    let r = m.run_refs(&registry.reference("policies/web:2"), &settings_ref);
    r.assert_exit(0);
    assert_eq!(r.json()["source"]["digest"], digest);
    let only_pin = format!("{}@{digest}", registry.reference("policies/copy/web"));
    let copy = m.pushed(&policy, &only_pin);
    assert_eq!(digest_of(&copy), digest);
    host(&[&os("verify"), &os(&only_pin)]).assert_exit(0);
    // A pin the file does not make: refused, and the tag never appears.
    let wrong = format!(
        "{}:3@sha256:{}",
        registry.reference("policies/web"),
        "0".repeat(64)
    );
    let r = m.push(&policy, &wrong);
    r.assert_exit(1);
    assert!(
        r.stderr.contains("nothing was pushed") && r.stderr.contains(digest),
        "{}",
        r.stderr
    );
    let (status, _) = registry.http(
        "GET",
        "/v2/policies/web/manifests/3",
        "application/vnd.oci.image.manifest.v1+json",
        b"",
    );
    assert_eq!(status, 404);
}

/// A refusal by the registry's certificate or its login says so, on one
/// `error:` line that names the setting to change, never as a network
/// problem, and never with a library's log line as a second error.
#[e2e_test(requires = "docker-registry, promtool")]
fn registry_errors_name_their_real_cause_once() {
    let cases = [
        (
            Certificate::Valid,
            false,
            "certificate not trusted: UnknownIssuer",
            "--registry-ca",
        ),
        (
            Certificate::OtherName,
            true,
            "certificate not valid for this name: NotValidForName",
            "127.0.0.2",
        ),
        (
            Certificate::Expired,
            true,
            "certificate expired: Expired",
            "renewed",
        ),
    ];
    for (certificate, with_ca, cause, remedy) in cases {
        let options = Options {
            tls: true,
            certificate,
            ..Options::default()
        };
        let registry = TestRegistry::start(options);
        let m = Machine::new(&registry);
        let reference = registry.reference("policies/web:1");
        for command in ["run", "verify", "inspect"] {
            let mut cmd = m.fake.host_command();
            cmd.arg(command)
                .arg(&reference)
                .args(trust_args())
                .args(["--registry-timeout", "5"]);
            if command == "run" {
                cmd.arg("--lock-file")
                    .arg(m.path("run.lock"))
                    .arg("--cache-dir")
                    .arg(m.path("cache"))
                    .arg("--state-dir")
                    .arg(m.path("state"));
            }
            if with_ca {
                cmd.args(&m.registry_args);
            }
            let r = run(cmd);
            r.assert_exit(1);
            let errors: Vec<&str> = r.stderr.lines().filter(|l| l.contains("error")).collect();
            assert_eq!(
                errors.len(),
                1,
                "{certificate:?}, {command}: one line:\n{}",
                r.stderr
            );
            for needle in [cause, remedy, registry.addr.as_str()] {
                assert!(
                    errors[0].contains(needle),
                    "{certificate:?}, {command}: {needle:?} not in:\n{}",
                    r.stderr
                );
            }
            for wrong in ["cannot be reached", "error sending request"] {
                assert!(
                    !r.stderr.contains(wrong),
                    "{certificate:?}, {command}: {wrong:?} in:\n{}",
                    r.stderr
                );
            }
        }
        assert_eq!(m.fake.mutating_calls(), Vec::<String>::new());
    }

    // A login the registry wants and this machine does not have: the
    // registry, the answer and the credentials file looked at.
    let options = Options {
        tls: true,
        login: Some(("ops".into(), "fleet-secret".into())),
        ..Options::default()
    };
    let registry = TestRegistry::start(options);
    let m = Machine::new(&registry);
    let nowhere = m.path("no-docker-config");
    let r = {
        let mut cmd = m.fake.host_command();
        cmd.env("DOCKER_CONFIG", &nowhere)
            .arg("verify")
            .arg(registry.reference("policies/web:1"))
            .args(trust_args())
            .args(&m.registry_args);
        run(cmd)
    };
    r.assert_exit(1);
    let errors: Vec<&str> = r.stderr.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(errors.len(), 1, "one line:\n{}", r.stderr);
    let expected_config = nowhere.join("config.json");
    for needle in [
        format!(
            "registry {} refused access (401 Unauthorized)",
            registry.addr
        ),
        expected_config.display().to_string(),
        "does not exist".to_owned(),
    ] {
        assert!(
            errors[0].contains(&needle),
            "{needle:?} not in:\n{}",
            r.stderr
        );
    }
}

#[e2e_test(requires = "docker-registry, promtool")]
fn a_plain_http_registry_reached_as_https_names_insecure_registries() {
    let registry = TestRegistry::start(Options::default());
    let m = Machine::new(&registry);
    let (policy_ref, settings_ref, _) = m.publish_web(&registry);
    // The same run without --insecure-registry: the client speaks TLS.
    let mut cmd = m.fake.host_command();
    cmd.arg("run")
        .arg(&policy_ref)
        .arg("--settings")
        .arg(&settings_ref)
        .args(trust_args())
        .arg("--lock-file")
        .arg(m.path("run.lock"))
        .arg("--cache-dir")
        .arg(m.path("cache"))
        .arg("--state-dir")
        .arg(m.path("state"));
    let r = run(cmd);
    m.assert_refused(
        &r,
        &format!(
            "registry {0} answered plain HTTP, not TLS: list it in insecure_registries (host.toml) or pass --insecure-registry {0}",
            registry.addr
        ),
    );
    assert!(!r.stderr.contains("InvalidContentType"), "{}", r.stderr);
    let mut cmd = host_command();
    cmd.arg("push").arg(m.path("web.wasm")).arg(&policy_ref);
    let r = run(cmd);
    assert_eq!(r.code, Some(1));
    assert!(
        r.stderr.contains("answered plain HTTP, not TLS"),
        "{}",
        r.stderr
    );
}

#[e2e_test(requires = "docker-registry, promtool")]
fn host_toml_lists_the_policies_a_bare_run_runs() {
    let registry = TestRegistry::start(Options::default());
    let m = Machine::new(&registry);
    let (policy_ref, settings_ref, _) = m.publish_web(&registry);
    let config = m.path("host.toml");
    fs::write(
        &config,
        format!(
            "insecure_registries = [\"{}\"]\n\n[[policy]]\nsource = \"{policy_ref}\"\nsettings = \"{settings_ref}\"\n",
            registry.addr
        ),
    )
    .unwrap();
    let mut cmd = m.fake.host_command();
    cmd.arg("run")
        .arg("--config")
        .arg(&config)
        .args(trust_args())
        .arg("--lock-file")
        .arg(m.path("run.lock"))
        .arg("--cache-dir")
        .arg(m.path("cache"))
        .arg("--state-dir")
        .arg(m.path("state"))
        .arg("--json");
    let r = run(cmd);
    r.assert_exit(0);
    assert_eq!(m.fake.mutating_calls(), ["start --system -- web"]);
    assert_eq!(r.json()["source"]["location"], policy_ref.as_str());

    // Listing nothing is a run that does nothing, successfully.
    fs::write(&config, "# no policies yet\n").unwrap();
    m.fake.clear_calls();
    let mut cmd = m.fake.host_command();
    cmd.arg("run")
        .arg("--config")
        .arg(&config)
        .args(trust_args())
        .arg("--lock-file")
        .arg(m.path("run.lock"))
        .arg("--state-dir")
        .arg(m.path("state"));
    run(cmd).assert_exit(0);
    assert_eq!(m.fake.calls(), Vec::<String>::new());
}

#[e2e_test(requires = "docker-registry, promtool")]
fn the_pushed_artifact_follows_the_cncf_wasm_layout() {
    let registry = TestRegistry::start(Options::default());
    let m = Machine::new(&registry);
    let policy = m.policy("web.wasm");
    let pinned = m.pushed(&policy, &registry.reference("policies/web:1"));
    let digest = digest_of(&pinned);
    let get = |path: &str, accept: &str| {
        let (status, body) = registry.http("GET", path, accept, b"");
        assert_eq!(
            status,
            200,
            "GET {path}: {}",
            String::from_utf8_lossy(&body)
        );
        body
    };
    let manifest_bytes = get(
        &format!("/v2/policies/web/manifests/{digest}"),
        "application/vnd.oci.image.manifest.v1+json",
    );
    let manifest: Value = serde_json::from_slice(&manifest_bytes).unwrap();
    assert_eq!(manifest["schemaVersion"], 2);
    assert_eq!(
        manifest["mediaType"],
        "application/vnd.oci.image.manifest.v1+json"
    );
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.wasm.config.v0+json"
    );
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1);
    assert_eq!(layers[0]["mediaType"], "application/wasm");
    let wasm = fs::read(&policy).unwrap();
    assert_eq!(layers[0]["size"], wasm.len());
    let wasm_digest = layers[0]["digest"].as_str().unwrap();
    assert_eq!(
        get(&format!("/v2/policies/web/blobs/{wasm_digest}"), "*/*"),
        wasm
    );
    assert_eq!(
        layers[0]["annotations"]["org.opencontainers.image.title"],
        "web.wasm"
    );

    let config_digest = manifest["config"]["digest"].as_str().unwrap();
    let config: Value = serde_json::from_slice(&get(
        &format!("/v2/policies/web/blobs/{config_digest}"),
        "*/*",
    ))
    .unwrap();
    assert_eq!(config["architecture"], "wasm");
    assert_eq!(config["os"], "wasip2");
    assert_eq!(config["layerDigests"], serde_json::json!([wasm_digest]));
    assert!(
        config["created"].as_str().is_some_and(|c| c.ends_with('Z')),
        "{config}"
    );
    let names = |key: &str| -> Vec<String> {
        config["component"][key]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    };
    assert!(
        names("imports").contains(&"policy-host:policy/service-provider@0.6.0".to_owned()),
        "{config}"
    );
    assert!(names("exports").contains(&"run".to_owned()), "{config}");

    // The signature: a referrer of the manifest, listed under the
    // referrers tag (distribution 2.8 has no referrers API).
    let index: Value = serde_json::from_slice(&get(
        &format!("/v2/policies/web/manifests/{}", digest.replace(':', "-")),
        "application/vnd.oci.image.index.v1+json",
    ))
    .unwrap();
    assert_eq!(
        index["mediaType"],
        "application/vnd.oci.image.index.v1+json"
    );
    let referrer = &index["manifests"][0];
    assert_eq!(
        referrer["artifactType"],
        "application/vnd.policy-host.signature.v1+minisign"
    );
    let signature: Value = serde_json::from_slice(&get(
        &format!(
            "/v2/policies/web/manifests/{}",
            referrer["digest"].as_str().unwrap()
        ),
        "application/vnd.oci.image.manifest.v1+json",
    ))
    .unwrap();
    assert_eq!(signature["subject"]["digest"], digest);
    assert_eq!(signature["subject"]["size"], manifest_bytes.len());
    let minisig_digest = signature["layers"][0]["digest"].as_str().unwrap();
    assert_eq!(
        get(&format!("/v2/policies/web/blobs/{minisig_digest}"), "*/*"),
        fs::read(m.path("web.wasm.minisig")).unwrap()
    );
}

/// A registry that accepts connections and never answers (or a test's own
/// scripted answers), on the port of a stopped real one.
struct FakeServer {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeServer {
    /// Serves `addr` with `answer`, called with each request's first line
    /// and the connection; connections are kept open until the server stops.
    fn start(addr: &str, answer: impl Fn(&str, &mut std::net::TcpStream) + Send + 'static) -> Self {
        use std::io::{BufRead as _, BufReader};
        let listener = std::net::TcpListener::bind(addr).expect("bind the fake registry");
        listener.set_nonblocking(true).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut held = Vec::new();
            while !stopping.load(std::sync::atomic::Ordering::SeqCst) {
                match listener.accept() {
                    Ok((mut stream, _)) => {
                        stream.set_nonblocking(false).unwrap();
                        stream
                            .set_read_timeout(Some(Duration::from_millis(500)))
                            .unwrap();
                        let mut first = String::new();
                        let mut reader = BufReader::new(stream.try_clone().unwrap());
                        let _ = reader.read_line(&mut first);
                        // The rest of the head.
                        let mut line = String::new();
                        while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                            line.clear();
                        }
                        answer(first.trim(), &mut stream);
                        held.push(stream);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[e2e_test(requires = "docker-registry, promtool")]
fn a_registry_that_never_answers_costs_its_timeout_then_the_kept_copy_runs() {
    let mut registry = TestRegistry::start(Options::default());
    let m = Machine::new(&registry);
    let (policy_ref, settings_ref, _) = m.publish_web(&registry);
    m.run_refs(&policy_ref, &settings_ref).assert_exit(0);
    registry.stop();

    // Accepts, reads the request, and says nothing.
    let _silent = FakeServer::start(&registry.addr, |_, _| {});
    m.fake.unit("web", "inactive", "disabled").clear_calls();
    let started = std::time::Instant::now();
    let r = m.run_refs(&policy_ref, &settings_ref);
    let took = started.elapsed();
    r.assert_exit(0);
    assert_eq!(m.fake.mutating_calls(), ["start --system -- web"]);
    assert!(r.stderr.contains("no answer within 5s"), "{}", r.stderr);
    assert!(
        r.stderr.contains(&policy_ref),
        "names the reference: {}",
        r.stderr
    );
    assert_eq!(r.json()["source"]["stale"], true);
    assert_eq!(r.json()["settings_source"]["stale"], true);
    // Two references, and one timeout: the second is not asked.
    assert_eq!(
        r.stderr.matches("no answer within 5s").count(),
        2,
        "said for the first, recalled for the second:\n{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("earlier in this run; not asked again"),
        "{}",
        r.stderr
    );
    assert!(
        took < Duration::from_secs(10),
        "one timeout of 5 s, not two: {took:?}"
    );

    // With nothing kept: the registry's silence, named, and nothing runs.
    m.fake.clear_calls();
    let r = m.host_run(&[&policy_ref, "--settings", &settings_ref], "empty-cache");
    m.assert_refused(&r, &format!("registry {} cannot be reached", registry.addr));
    assert!(
        r.stderr.contains("timed out") || r.stderr.contains("no answer within"),
        "{}",
        r.stderr
    );
}

#[e2e_test(requires = "docker-registry, promtool")]
fn a_blob_cut_in_the_middle_is_never_kept_and_the_kept_copy_runs() {
    let mut registry = TestRegistry::start(Options::default());
    let m = Machine::new(&registry);
    let settings_ref = registry.reference("settings/web:prod");
    m.pushed(&m.settings("web.yaml", START_WEB, true), &settings_ref);
    // Version 1 runs and is kept; version 2 is pushed to the same tag.
    let policy_ref = registry.reference("policies/web:1");
    let first = m.pushed(&m.policy("web.wasm"), &policy_ref);
    m.run_refs(&policy_ref, &settings_ref).assert_exit(0);
    std::thread::sleep(Duration::from_millis(1100));
    let second = m.pushed(&m.policy("web.wasm"), &policy_ref);
    assert_ne!(first, second);
    let digest = digest_of(&second).to_owned();
    let (_, manifest) = registry.http(
        "GET",
        &format!("/v2/policies/web/manifests/{digest}"),
        "application/vnd.oci.image.manifest.v1+json",
        b"",
    );
    let settings_manifest = registry
        .http(
            "GET",
            "/v2/settings/web/manifests/prod",
            "application/vnd.oci.image.manifest.v1+json",
            b"",
        )
        .1;
    registry.stop();

    // Serves the new manifest, then half of its blob before resetting.
    let manifest_text = manifest.clone();
    let _cut = FakeServer::start(&registry.addr, move |request, stream| {
        use std::io::Write as _;
        let respond = |stream: &mut std::net::TcpStream, body: &[u8], declared: usize| {
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.oci.image.manifest.v1+json\r\nContent-Length: {declared}\r\n\r\n"
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(body);
            let _ = stream.flush();
        };
        if request.starts_with("GET /v2/ ") {
            respond(stream, b"{}", 2);
        } else if request.contains("/v2/policies/web/manifests/1 ") {
            respond(stream, &manifest_text, manifest_text.len());
        } else if request.contains("/v2/settings/web/manifests/prod ") {
            respond(stream, &settings_manifest, settings_manifest.len());
        } else if request.contains("/blobs/") {
            let declared = 1 << 20;
            respond(stream, &vec![0u8; 4096], declared);
            let _ = stream.shutdown(std::net::Shutdown::Both);
        } else {
            let _ = stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
        }
    });
    m.fake.unit("web", "inactive", "disabled").clear_calls();
    let r = m.run_refs(&policy_ref, &settings_ref);
    r.assert_exit(0);
    assert_eq!(m.fake.mutating_calls(), ["start --system -- web"]);
    let json = r.json();
    assert_eq!(json["source"]["stale"], true, "{json:#}");
    assert_eq!(
        json["source"]["digest"],
        digest_of(&first),
        "the kept version ran"
    );
    assert!(r.stderr.contains(&registry.addr), "{}", r.stderr);
    // No partial blob was kept: every kept blob matches its digest.
    let blobs = m.path("cache/oci/blobs/sha256");
    for entry in fs::read_dir(&blobs).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        assert!(!name.ends_with(".tmp"), "a temporary file was left: {name}");
        let bytes = fs::read(entry.path()).unwrap();
        let out = Command::new("sha256sum")
            .arg(entry.path())
            .output()
            .unwrap();
        let sum = String::from_utf8_lossy(&out.stdout);
        assert!(
            sum.starts_with(&name),
            "{name} holds other bytes ({} bytes)",
            bytes.len()
        );
    }
    let _ = manifest;
}
