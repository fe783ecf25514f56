//! End-to-end: only policies signed by a trusted key run. Signatures are
//! exchanged with Debian's `minisign` command-line tool in both directions,
//! so the formats are proven compatible with the real tool, and every refusal
//! is checked against the fake systemctl's log: nothing may have run.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use policy_host_e2e::build::{self, host_command, policy_wasm};
use policy_host_e2e::fake_systemctl::FakeSystemctl;
use policy_host_e2e::outcome::text;
use policy_host_e2e::scratch::Scratch;
use serde_json::Value;

/// A scratch directory holding a copy of the example policy.
struct Signing {
    scratch: Scratch,
    policy: PathBuf,
}

impl Signing {
    fn new(name: &str) -> Self {
        let scratch = Scratch::new(name);
        let policy = scratch.join("example.wasm");
        fs::copy(policy_wasm("example-policy"), &policy).unwrap();
        Self { scratch, policy }
    }

    fn signature(&self) -> PathBuf {
        self.scratch.join("example.wasm.minisig")
    }
}

fn minisign() -> Command {
    let probe = Command::new("minisign").arg("-v").output();
    assert!(
        probe.is_ok_and(|o| o.status.success()),
        "the `minisign` command is needed for these tests: apt-get install minisign"
    );
    Command::new("minisign")
}

fn output(mut command: Command) -> Output {
    command.output().expect("run command")
}

#[track_caller]
fn assert_success(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what} failed ({:?})\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// `host keygen --unencrypted --out DIR`; returns (public, secret).
fn host_keygen(dir: &Path) -> (PathBuf, PathBuf) {
    let key = build::keygen(dir);
    (key.public_key, key.secret_key)
}

/// `minisign -G -W` (no password); returns (public, secret).
fn minisign_keygen(dir: &Path) -> (PathBuf, PathBuf) {
    let (public, secret) = (dir.join("minisign.pub"), dir.join("minisign.key"));
    let mut cmd = minisign();
    cmd.args(["-G", "-W", "-p"])
        .arg(&public)
        .arg("-s")
        .arg(&secret);
    assert_success(&output(cmd), "minisign -G");
    (public, secret)
}

fn host_run(fake: &FakeSystemctl, policy: &Path, args: &[&std::ffi::OsStr]) -> Output {
    fake.host_run()
        .policy(policy)
        .without_test_key()
        .args(args)
        .output()
}

/// A refusal: exit 1, one line on stderr naming `cause`, and no systemctl call.
#[track_caller]
fn assert_refused(fake: &FakeSystemctl, out: &Output, cause: &str) {
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "exit code; stderr: {stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line on stderr:\n{stderr}");
    assert!(lines[0].contains(cause), "{cause:?} not in {:?}", lines[0]);
    assert!(
        text(&out.stdout).is_empty(),
        "no report: {}",
        text(&out.stdout)
    );
    assert_eq!(
        fake.calls(),
        Vec::<String>::new(),
        "no systemctl command may run"
    );
}

/// The key id in a public key's untrusted comment, as the host prints it:
/// 16 hex digits (minisign 0.11 writes it without leading zeros).
fn key_id_of_pub(public: &Path) -> String {
    let first = fs::read_to_string(public).unwrap();
    let first = first.lines().next().unwrap();
    let id = first.rsplit(' ').next().unwrap();
    format!(
        "{:016X}",
        u64::from_str_radix(id, 16).expect("a hex key id")
    )
}

#[test]
fn policy_signed_by_the_minisign_cli_runs() {
    let s = Signing::new("sig-minisign-cli");
    let (public, secret) = minisign_keygen(s.scratch.path());
    let mut sign = minisign();
    sign.arg("-S")
        .arg("-s")
        .arg(&secret)
        .arg("-m")
        .arg(&s.policy);
    assert_success(&output(sign), "minisign -S");

    let fake = FakeSystemctl::example_units();
    let out = host_run(
        &fake,
        &s.policy,
        &[
            "--trusted-key".as_ref(),
            public.as_os_str(),
            "--json".as_ref(),
        ],
    );
    assert_success(&out, "host run");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["signature"]["verified"], true);
    assert_eq!(
        report["signature"]["key_id"],
        key_id_of_pub(&public).as_str()
    );
    let comment = report["signature"]["trusted_comment"].as_str().unwrap();
    assert!(
        comment.contains("file:example.wasm"),
        "minisign's own trusted comment: {comment}"
    );
    assert_eq!(
        fake.mutating_calls().len(),
        5,
        "the policy really ran: {:?}",
        fake.calls()
    );
}

#[test]
fn host_signature_verifies_with_the_minisign_cli() {
    let s = Signing::new("sig-host-sign");
    let (public, secret) = host_keygen(&s.scratch.path().join("keys"));
    build::sign_with(&s.policy, &secret);

    let mut verify = minisign();
    verify
        .arg("-V")
        .arg("-p")
        .arg(&public)
        .arg("-m")
        .arg(&s.policy);
    let out = output(verify);
    assert_success(&out, "minisign -V");
    let said = text(&out.stdout) + &text(&out.stderr);
    assert!(
        said.contains("Signature and comment signature verified"),
        "{said}"
    );
    let digest = sha256_hex(&fs::read(&s.policy).unwrap());
    assert!(
        said.contains(&format!("file:example.wasm sha256:{digest} signed:")),
        "{said}"
    );
}

fn sha256_hex(bytes: &[u8]) -> String {
    let out = Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(bytes)?;
            child.wait_with_output()
        })
        .unwrap();
    text(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}

#[test]
fn host_verify_says_valid_with_key_id_and_comment_or_invalid() {
    let s = Signing::new("sig-verify");
    let (public, secret) = host_keygen(&s.scratch.path().join("keys"));
    build::sign_with(&s.policy, &secret);
    let verify = |policy: &Path| {
        let mut cmd = host_command();
        cmd.arg("verify")
            .arg(policy)
            .arg("--trusted-key")
            .arg(&public);
        output(cmd)
    };
    let out = verify(&s.policy);
    assert_success(&out, "host verify");
    let said = text(&out.stdout);
    assert!(said.starts_with("valid: "), "{said}");
    assert!(
        said.contains(&format!("key id: {}", key_id_of_pub(&public))),
        "{said}"
    );
    assert!(
        said.contains("trusted comment: file:example.wasm sha256:"),
        "{said}"
    );

    flip_one_byte(&s.policy);
    let out = verify(&s.policy);
    assert_eq!(out.status.code(), Some(1));
    let said = text(&out.stdout);
    assert!(
        said.starts_with("invalid: ") && said.contains("changed after it was signed"),
        "{said}"
    );
}

fn flip_one_byte(path: &Path) {
    let mut bytes = fs::read(path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    fs::write(path, bytes).unwrap();
}

/// A signed policy and its trusted key, for the refusal tests.
fn signed_scratch(name: &str) -> (Signing, PathBuf) {
    let s = Signing::new(name);
    let (public, secret) = host_keygen(&s.scratch.path().join("keys"));
    build::sign_with(&s.policy, &secret);
    (s, public)
}

#[test]
fn tampered_policy_is_refused() {
    let (s, public) = signed_scratch("sig-tampered");
    flip_one_byte(&s.policy);
    let fake = FakeSystemctl::example_units();
    let out = host_run(
        &fake,
        &s.policy,
        &["--trusted-key".as_ref(), public.as_os_str()],
    );
    assert_refused(&fake, &out, "example.wasm was changed after it was signed");
}

#[test]
fn signature_by_an_untrusted_key_is_refused_with_its_key_id() {
    let (s, _) = signed_scratch("sig-wrong-key");
    let (other, _) = host_keygen(&s.scratch.path().join("other"));
    let signer_id = {
        let mut cmd = host_command();
        cmd.arg("verify")
            .arg(&s.policy)
            .arg("--trusted-key")
            .arg(s.scratch.path().join("keys/policy-host.pub"));
        let said = text(&output(cmd).stdout);
        said.lines()
            .find_map(|l| l.strip_prefix("key id: "))
            .unwrap()
            .to_owned()
    };
    let fake = FakeSystemctl::example_units();
    let out = host_run(
        &fake,
        &s.policy,
        &["--trusted-key".as_ref(), other.as_os_str()],
    );
    assert_refused(
        &fake,
        &out,
        &format!("signature by untrusted key {signer_id}"),
    );
}

#[test]
fn missing_signature_is_refused() {
    let (s, public) = signed_scratch("sig-missing");
    fs::remove_file(s.signature()).unwrap();
    let fake = FakeSystemctl::example_units();
    let out = host_run(
        &fake,
        &s.policy,
        &["--trusted-key".as_ref(), public.as_os_str()],
    );
    assert_refused(&fake, &out, "policy is not signed");
}

#[test]
fn truncated_signature_is_refused_as_malformed() {
    let (s, public) = signed_scratch("sig-truncated");
    let sig = fs::read(s.signature()).unwrap();
    fs::write(s.signature(), &sig[..sig.len() / 2]).unwrap();
    let fake = FakeSystemctl::example_units();
    let out = host_run(
        &fake,
        &s.policy,
        &["--trusted-key".as_ref(), public.as_os_str()],
    );
    assert_refused(&fake, &out, "is malformed");
}

#[test]
fn garbage_trusted_key_file_is_refused() {
    let (s, _) = signed_scratch("sig-garbage-key");
    let garbage = s.scratch.path().join("garbage.pub");
    fs::write(
        &garbage,
        "untrusted comment: not really\nthis is not a key\n",
    )
    .unwrap();
    let fake = FakeSystemctl::example_units();
    let out = host_run(
        &fake,
        &s.policy,
        &["--trusted-key".as_ref(), garbage.as_os_str()],
    );
    assert_refused(&fake, &out, "trusted key file");
}

#[test]
fn no_trusted_keys_configured_is_refused() {
    let (s, _) = signed_scratch("sig-no-keys");
    let empty = s.scratch.path().join("empty-trust-dir");
    fs::create_dir(&empty).unwrap();
    let fake = FakeSystemctl::example_units();
    let out = host_run(
        &fake,
        &s.policy,
        &["--trusted-keys-dir".as_ref(), empty.as_os_str()],
    );
    assert_refused(&fake, &out, "no trusted keys configured");
}

#[test]
fn keys_in_the_trusted_keys_directory_are_used() {
    let (s, public) = signed_scratch("sig-key-dir");
    let dir = s.scratch.path().join("trusted");
    fs::create_dir(&dir).unwrap();
    fs::copy(&public, dir.join("ops.pub")).unwrap();
    let fake = FakeSystemctl::example_units();
    let out = host_run(
        &fake,
        &s.policy,
        &["--trusted-keys-dir".as_ref(), dir.as_os_str()],
    );
    assert_success(&out, "host run with a trusted-keys directory");
    let said = text(&out.stdout);
    assert!(
        said.lines().next().unwrap().starts_with("signed by key "),
        "{said}"
    );
}

#[test]
fn allow_unsigned_runs_and_records_the_warning() {
    let s = Signing::new("sig-allow-unsigned");
    let fake = FakeSystemctl::example_units();
    let out = host_run(
        &fake,
        &s.policy,
        &["--allow-unsigned".as_ref(), "--json".as_ref()],
    );
    assert_success(&out, "host run --allow-unsigned");
    assert!(
        text(&out.stderr).contains("warning: policy signature NOT verified"),
        "{}",
        text(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["signature"]["verified"], false);
    assert!(report["signature"]["warning"]
        .as_str()
        .unwrap()
        .contains("--allow-unsigned"));
    assert!(!fake.mutating_calls().is_empty(), "the policy ran");
}

#[test]
fn encrypted_key_signs_with_its_password_and_refuses_a_wrong_one() {
    let s = Signing::new("sig-password");
    let password = s.scratch.path().join("password");
    fs::write(&password, "s3cret phrase\n").unwrap();
    let keys = s.scratch.path().join("keys");
    let mut keygen = host_command();
    keygen
        .args(["keygen", "--out"])
        .arg(&keys)
        .arg("--password-file")
        .arg(&password);
    let out = output(keygen);
    assert_success(&out, "host keygen with a password");
    let secret_text = fs::read_to_string(keys.join("policy-host.key")).unwrap();
    assert!(
        !text(&out.stdout).contains(secret_text.lines().nth(1).unwrap()),
        "never print the secret key"
    );

    let sign = |password_file: Option<&Path>| {
        let mut cmd = host_command();
        cmd.arg("sign")
            .arg(&s.policy)
            .arg("--key")
            .arg(keys.join("policy-host.key"));
        if let Some(file) = password_file {
            cmd.arg("--password-file").arg(file);
        }
        cmd.stdin(std::process::Stdio::null());
        output(cmd)
    };
    let out = sign(None);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("--password-file"),
        "{}",
        text(&out.stderr)
    );

    let wrong = s.scratch.path().join("wrong");
    fs::write(&wrong, "not it\n").unwrap();
    let out = sign(Some(&wrong));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("Wrong password"),
        "{}",
        text(&out.stderr)
    );
    assert!(!s.signature().exists());

    assert_success(&sign(Some(&password)), "host sign with the password");
    let mut verify = minisign();
    verify
        .arg("-V")
        .arg("-p")
        .arg(keys.join("policy-host.pub"))
        .arg("-m")
        .arg(&s.policy);
    assert_success(
        &output(verify),
        "minisign -V of a signature made with an encrypted key",
    );
}
