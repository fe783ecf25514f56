//! End-to-end: the host trusts the whole desired state, not only the code.
//! Settings are signed like policies; a signature is bound to the file name
//! it was made for; an older signed version than one already accepted is
//! refused (rollback), unless `--allow-rollback`. Signatures come from both
//! `host sign` and Debian's `minisign` CLI, with trusted comments written
//! exactly as each tool writes them. Every refusal is checked against the
//! fake systemctl's log: nothing may have run.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use policy_host_e2e::build::{host_command, minisign_command, policy_wasm};
use policy_host_e2e::fake_systemctl::FakeSystemctl;
use policy_host_e2e::outcome::{run, Run};
use policy_host_e2e::requires::e2e_test;
use serde_json::Value;

fn minisign() -> Command {
    minisign_command()
}

#[track_caller]
fn ok(mut cmd: Command, what: &str) {
    let out = cmd.output().expect("run command");
    assert!(
        out.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A machine: a fake systemctl with sshd running and enabled, a minisign
/// key pair (no password) that the host trusts, and a state directory.
struct Machine {
    fake: FakeSystemctl,
    public: PathBuf,
    secret: PathBuf,
}

impl Machine {
    fn new() -> Self {
        let fake = FakeSystemctl::new();
        fake.unit("sshd", "active", "enabled")
            .unit("web", "inactive", "disabled");
        let (public, secret) = (fake.root().join("ops.pub"), fake.root().join("ops.key"));
        let mut cmd = minisign();
        cmd.args(["-G", "-W", "-p"])
            .arg(&public)
            .arg("-s")
            .arg(&secret);
        ok(cmd, "minisign -G -W");
        Self {
            fake,
            public,
            secret,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.fake.root().join(name)
    }

    /// The manifest policy, copied under `name`.
    fn policy(&self, name: &str) -> PathBuf {
        let path = self.path(name);
        fs::copy(policy_wasm("manifest-policy"), &path).unwrap();
        path
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path(name);
        fs::write(&path, text).unwrap();
        path
    }

    /// `minisign -S` with its own trusted comment (`timestamp:…\tfile:…\thashed`),
    /// or with `comment` when given.
    fn minisign(&self, file: &Path, comment: Option<&str>) {
        let mut cmd = minisign();
        cmd.arg("-S")
            .arg("-s")
            .arg(&self.secret)
            .arg("-m")
            .arg(file);
        if let Some(comment) = comment {
            cmd.arg("-t").arg(comment);
        }
        ok(cmd, "minisign -S");
    }

    /// `host sign` with the same secret key.
    fn host_sign(&self, file: &Path) {
        let mut cmd = host_command();
        cmd.arg("sign").arg(file).arg("--key").arg(&self.secret);
        ok(cmd, "host sign");
    }

    fn run(&self, policy: &Path, settings: &Path, args: &[&str]) -> Run {
        let mut cmd = self.fake.host_command();
        cmd.arg("run")
            .arg(policy)
            .arg("--settings")
            .arg(settings)
            .arg("--trusted-key")
            .arg(&self.public)
            .arg("--lock-file")
            .arg(self.path("run.lock"))
            .arg("--cache-dir")
            .arg(self.path("cache"))
            .arg("--state-dir")
            .arg(self.path("state"))
            .arg("--json")
            .args(args);
        run(cmd)
    }

    fn verify(&self, file: &Path) -> (bool, String) {
        let out = host_command()
            .arg("verify")
            .arg(file)
            .arg("--trusted-key")
            .arg(&self.public)
            .arg("--state-dir")
            .arg(self.path("state"))
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }

    #[track_caller]
    fn assert_refused(&self, r: &Run, needle: &str) {
        r.assert_exit(1);
        assert_eq!(self.fake.calls(), Vec::<String>::new(), "nothing may run");
        assert!(
            r.stderr.contains(needle),
            "{needle:?} not in:\n{}",
            r.stderr
        );
        assert_eq!(self.fake.state("sshd").unwrap().0, "active");
    }
}

const STOP_SSHD: &str = "- service:\n    - sshd:\n        ensure: stopped\n        enable: false\n";
const WEB: &str = "- service:\n    - web:\n        ensure: running\n";

#[e2e_test(requires = "minisign")]
fn settings_must_be_signed_and_untampered() {
    let m = Machine::new();
    let policy = m.policy("site.wasm");
    m.minisign(&policy, None);
    let site = m.write("site.yaml", WEB);

    // Unsigned settings next to a signed policy.
    let r = m.run(&policy, &site, &[]);
    m.assert_refused(&r, "refusing settings file");
    assert!(
        r.stderr.contains("the settings file is not signed"),
        "{}",
        r.stderr
    );

    // Signed, then rewritten to stop sshd: the attack of the issue.
    m.minisign(&site, None);
    fs::write(&site, STOP_SSHD).unwrap();
    let r = m.run(&policy, &site, &[]);
    m.assert_refused(&r, "site.yaml was changed after it was signed");
    assert!(!r.stderr.contains("policy was changed"), "{}", r.stderr);
    let (valid, said) = m.verify(&site);
    assert!(!valid, "{said}");
    assert!(
        said.contains("site.yaml was changed after it was signed"),
        "{said}"
    );

    // Signed as it is, by either tool: it runs, and the report says so.
    for sign in [
        Machine::minisign as fn(&Machine, &Path, Option<&str>),
        |m, f, _| m.host_sign(f),
    ] {
        let site = m.write("site.yaml", WEB);
        sign(&m, &site, None);
        m.fake.clear_calls();
        let r = m.run(&policy, &site, &[]);
        r.assert_exit(0);
        let json = r.json();
        let settings = &json["signature"]["settings"];
        assert_eq!(settings["verified"], true, "{json:#}");
        assert!(settings["trusted_comment"]
            .as_str()
            .unwrap()
            .contains("file:site.yaml"));
        assert_eq!(m.fake.mutating_calls(), ["start --system -- web"]);
        m.fake.unit("web", "inactive", "disabled");
    }
}

#[e2e_test(requires = "minisign")]
fn allow_unsigned_covers_settings_and_says_so() {
    let m = Machine::new();
    let policy = m.policy("site.wasm");
    let site = m.write("site.yaml", WEB);
    let r = m.run(&policy, &site, &["--allow-unsigned"]);
    r.assert_exit(0);
    let json = r.json();
    assert_eq!(json["signature"]["settings"]["verified"], false);
    assert!(json["signature"]["settings"]["warning"]
        .as_str()
        .unwrap()
        .contains("settings file signature NOT verified"));
}

#[e2e_test(requires = "minisign")]
fn a_signature_runs_only_under_the_name_it_was_made_for() {
    let m = Machine::new();
    let site = m.write("site.yaml", WEB);
    m.minisign(&site, None);
    for (sign, tool) in [
        (
            Machine::minisign as fn(&Machine, &Path, Option<&str>),
            "minisign",
        ),
        (
            |m: &Machine, f: &Path, _: Option<&str>| m.host_sign(f),
            "host sign",
        ),
    ] {
        let original = m.policy("decommission-sshd.wasm");
        sign(&m, &original, None);
        let renamed = m.path("10-web.wasm");
        fs::copy(&original, &renamed).unwrap();
        fs::copy(
            m.path("decommission-sshd.wasm.minisig"),
            m.path("10-web.wasm.minisig"),
        )
        .unwrap();
        let r = m.run(&renamed, &site, &[]);
        m.assert_refused(
            &r,
            "signed as \"decommission-sshd.wasm\", not as \"10-web.wasm\"",
        );
        let (valid, out) = m.verify(&renamed);
        assert!(
            !valid,
            "{tool}: host verify called a renamed file valid: {out}"
        );
        assert!(
            out.contains("signed as \"decommission-sshd.wasm\""),
            "{out}"
        );
        assert!(m.verify(&original).0, "{tool}: the original is valid");
    }
    // Renamed settings are refused the same way.
    let other = m.path("other.yaml");
    fs::copy(&site, &other).unwrap();
    fs::copy(m.path("site.yaml.minisig"), m.path("other.yaml.minisig")).unwrap();
    let policy = m.policy("site.wasm");
    m.minisign(&policy, None);
    let r = m.run(&policy, &other, &[]);
    m.assert_refused(&r, "signed as \"site.yaml\", not as \"other.yaml\"");
}

#[e2e_test(requires = "minisign")]
fn an_older_signed_version_is_refused_unless_rollback_is_allowed() {
    let m = Machine::new();
    let site = m.write("site.yaml", WEB);
    m.minisign(&site, None);
    let policy = m.policy("web.wasm");
    let at = |t: u64| format!("timestamp:{t}\tfile:web.wasm\thashed");

    // Version 2 (signed in 2023), tried with --noop first: a noop run
    // records no version, so it could still be left for an older one.
    m.minisign(&policy, Some(&at(1_700_000_000)));
    m.run(&policy, &site, &["--noop"]).assert_exit(0);
    assert!(
        !m.path("state/versions.json").exists()
            || !fs::read_to_string(m.path("state/versions.json"))
                .unwrap()
                .contains("1700000000")
    );
    // `verify` says this machine would take it: nothing accepted yet.
    let (valid, said) = m.verify(&policy);
    assert!(valid, "{said}");
    assert!(said.starts_with("valid: "), "{said}");
    // Then for real: it runs and is remembered.
    m.run(&policy, &site, &[]).assert_exit(0);
    let state = fs::read_to_string(m.path("state/versions.json")).unwrap();
    assert!(state.contains("\"signed_at\": 1700000000"), "{state}");
    use std::os::unix::fs::PermissionsExt;
    let mode = fs::metadata(m.path("state/versions.json"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);

    // Version 1, older, with a valid signature: refused, naming both
    // versions; `verify` says so first, and answers 1.
    m.minisign(&policy, Some(&at(1_600_000_000)));
    let (valid, said) = m.verify(&policy);
    assert!(!valid, "{said}");
    assert!(
        said.starts_with(
            "valid, but older than the version this machine accepted (this one was signed \
             2020-09-13T12:26:40Z; the web.wasm by key "
        ) && said.contains("accepted here was signed 2023-11-14T22:13:20Z): a run refuses it"),
        "{said}"
    );
    m.fake.clear_calls();
    let r = m.run(&policy, &site, &[]);
    m.assert_refused(
        &r,
        "rollback refused: this web.wasm was signed 2020-09-13T12:26:40Z",
    );
    assert!(
        r.stderr
            .contains("already accepted here was signed 2023-11-14T22:13:20Z"),
        "{}",
        r.stderr
    );

    // On purpose, it runs, and becomes the accepted version.
    m.run(&policy, &site, &["--allow-rollback"]).assert_exit(0);
    m.fake.clear_calls();
    m.run(&policy, &site, &[]).assert_exit(0);

    // A host-signed version (signed now) is newer than either.
    m.host_sign(&policy);
    m.run(&policy, &site, &[]).assert_exit(0);
}

#[e2e_test(requires = "minisign")]
fn a_signature_without_a_name_or_a_time_is_refused() {
    let m = Machine::new();
    let site = m.write("site.yaml", WEB);
    m.minisign(&site, None);
    let policy = m.policy("web.wasm");
    m.minisign(&policy, Some("release 1.4"));
    let r = m.run(&policy, &site, &[]);
    m.assert_refused(&r, "the signature names no file");

    m.minisign(&policy, Some("file:web.wasm"));
    let r = m.run(&policy, &site, &[]);
    m.assert_refused(&r, "the signature carries no signing time");
    m.run(&policy, &site, &["--allow-rollback"]).assert_exit(0);
}

#[e2e_test(requires = "minisign")]
fn a_damaged_version_record_stops_the_run() {
    let m = Machine::new();
    let site = m.write("site.yaml", WEB);
    m.minisign(&site, None);
    let policy = m.policy("web.wasm");
    m.minisign(&policy, None);
    fs::create_dir_all(m.path("state")).unwrap();
    fs::write(m.path("state/versions.json"), "{\"format\": 1, \"versio").unwrap();
    let r = m.run(&policy, &site, &[]);
    m.assert_refused(&r, "is damaged; refusing to treat it as empty");
    let json: Value = serde_json::from_str(&r.stdout).unwrap_or(Value::Null);
    assert_ne!(json["summary"]["success"], true);
}
