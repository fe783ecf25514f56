//! End-to-end: secret keys are exchanged with Debian's `minisign` CLI in both
//! directions. `host sign` signs with keys made by `minisign -G`, with and
//! without a password, and `minisign -S` signs with keys made by
//! `host keygen`, with and without a password; every signature is checked by
//! both `minisign -V` and `host verify`.
//!
//! They require the `minisign` command (`#[e2e_test(requires)]`): without
//! it they are reported as ignored, never as passed, and fail under CI.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use policy_host_e2e::build::{host_command, minisign_command};
use policy_host_e2e::outcome::text;
use policy_host_e2e::requires::e2e_test;
use policy_host_e2e::scratch::Scratch;

/// The password every encrypted key of these tests has, and a file holding it.
const PASSWORD: &str = "correct horse battery";

/// A scratch directory with a policy to sign (any bytes: signing and
/// verifying do not compile it).
struct Signing {
    scratch: Scratch,
    policy: PathBuf,
}

impl Signing {
    fn new(name: &str) -> Self {
        let scratch = Scratch::new(name);
        let policy = scratch.write("policy.wasm", b"\0asm\x01\0\0\0 a policy to sign");
        Self { scratch, policy }
    }

    fn signature(&self) -> PathBuf {
        self.scratch.join("policy.wasm.minisig")
    }

    /// A file holding `password` on its first line.
    fn password_file(&self, name: &str, password: &str) -> PathBuf {
        self.scratch.write(name, format!("{password}\n"))
    }
}

fn minisign() -> Command {
    minisign_command()
}

/// Runs `command` with `stdin` as its standard input (nothing: an empty,
/// non-terminal input).
fn run(mut command: Command, stdin: &str) -> Output {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start command");
    // A command that does not read its input may close it first.
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    child.wait_with_output().expect("run command")
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

#[track_caller]
fn assert_failure_saying(out: &Output, what: &str, says: &str) {
    let said = text(&out.stdout) + &text(&out.stderr);
    assert!(!out.status.success(), "{what} succeeded:\n{said}");
    assert!(said.contains(says), "{what}: {says:?} not in:\n{said}");
}

/// `minisign -G`, with `password` or, for `None`, `-W` (no password);
/// returns (public, secret).
fn minisign_keygen(
    mut minisign: Command,
    dir: &Path,
    password: Option<&str>,
) -> (PathBuf, PathBuf) {
    let (public, secret) = (dir.join("minisign.pub"), dir.join("minisign.key"));
    minisign
        .arg("-G")
        .arg("-p")
        .arg(&public)
        .arg("-s")
        .arg(&secret);
    let stdin = match password {
        None => {
            minisign.arg("-W");
            String::new()
        }
        // Asked twice, read from standard input when it is not a terminal.
        Some(password) => format!("{password}\n{password}\n"),
    };
    assert_success(&run(minisign, &stdin), "minisign -G");
    (public, secret)
}

/// `minisign -S` with `secret`, the password (if any) on standard input.
fn minisign_sign(mut minisign: Command, secret: &Path, policy: &Path, stdin: &str) -> Output {
    minisign
        .arg("-S")
        .arg("-s")
        .arg(secret)
        .arg("-m")
        .arg(policy);
    run(minisign, stdin)
}

/// `host keygen --out DIR`, with `--password-file` or `--unencrypted`;
/// returns (public, secret).
fn host_keygen(dir: &Path, password_file: Option<&Path>) -> (PathBuf, PathBuf) {
    let mut cmd = host_command();
    cmd.args(["keygen", "--out"]).arg(dir);
    match password_file {
        Some(file) => cmd.arg("--password-file").arg(file),
        None => cmd.arg("--unencrypted"),
    };
    assert_success(&run(cmd, ""), "host keygen");
    (dir.join("policy-host.pub"), dir.join("policy-host.key"))
}

/// `host sign POLICY --key SECRET [--password-file FILE]`, with no terminal.
fn host_sign(policy: &Path, secret: &Path, password_file: Option<&Path>) -> Output {
    let mut cmd = host_command();
    cmd.arg("sign").arg(policy).arg("--key").arg(secret);
    if let Some(file) = password_file {
        cmd.arg("--password-file").arg(file);
    }
    run(cmd, "")
}

/// The key id in a public key file's comment (`minisign public key ID`).
fn key_id_of_pub(public: &Path) -> u64 {
    let text = fs::read_to_string(public).unwrap();
    let id = text.lines().next().unwrap().rsplit(' ').next().unwrap();
    u64::from_str_radix(id, 16).unwrap_or_else(|e| panic!("key id {id:?}: {e}"))
}

/// Both verifiers accept the policy's signature by `public`: `minisign -V`
/// and `host verify` (which names the key and the trusted comment).
#[track_caller]
fn assert_both_verify(minisign: Command, policy: &Path, public: &Path) {
    let mut verify = minisign;
    verify.arg("-V").arg("-p").arg(public).arg("-m").arg(policy);
    let out = run(verify, "");
    assert_success(&out, "minisign -V");
    let said = text(&out.stdout) + &text(&out.stderr);
    assert!(
        said.contains("Signature and comment signature verified"),
        "{said}"
    );

    let mut cmd = host_command();
    cmd.arg("verify")
        .arg(policy)
        .arg("--trusted-key")
        .arg(public);
    let out = run(cmd, "");
    assert_success(&out, "host verify");
    let said = text(&out.stdout);
    assert!(said.starts_with("valid: "), "{said}");
    let id = said
        .lines()
        .find_map(|l| l.strip_prefix("key id: "))
        .unwrap_or_else(|| panic!("no key id in:\n{said}"));
    assert_eq!(
        u64::from_str_radix(id, 16).unwrap(),
        key_id_of_pub(public),
        "{said}"
    );
    assert!(said.contains("file:policy.wasm"), "{said}");
}

#[e2e_test(requires = "minisign")]
fn host_sign_uses_an_unencrypted_key_from_minisign_w() {
    let minisign = minisign();
    let s = Signing::new("interop-minisign-w");
    let (public, secret) = minisign_keygen(minisign, s.scratch.path(), None);
    // No password file and no terminal: an unencrypted key needs neither.
    let out = host_sign(&s.policy, &secret, None);
    assert_success(&out, "host sign with a `minisign -G -W` key");
    assert!(
        text(&out.stdout).contains("trusted comment: file:policy.wasm sha256:"),
        "{}",
        text(&out.stdout)
    );
    assert_both_verify(Command::new("minisign"), &s.policy, &public);
}

#[e2e_test(requires = "minisign")]
fn host_sign_uses_a_password_protected_key_from_minisign() {
    let minisign = minisign();
    let s = Signing::new("interop-minisign-password");
    let (public, secret) = minisign_keygen(minisign, s.scratch.path(), Some(PASSWORD));

    // Without a password file and without a terminal, it says what to pass.
    let out = host_sign(&s.policy, &secret, None);
    assert_failure_saying(&out, "host sign without a password", "--password-file");
    let wrong = s.password_file("wrong", "not the password");
    let out = host_sign(&s.policy, &secret, Some(&wrong));
    assert_failure_saying(&out, "host sign with a wrong password", "Wrong password");
    assert!(!s.signature().exists(), "no signature from a failed sign");

    let password = s.password_file("password", PASSWORD);
    let out = host_sign(&s.policy, &secret, Some(&password));
    assert_success(&out, "host sign --password-file with a `minisign -G` key");
    assert_both_verify(Command::new("minisign"), &s.policy, &public);
}

#[e2e_test(requires = "minisign")]
fn host_sign_uses_a_key_whose_password_minisign_removed() {
    // `minisign -C -W` decrypts a key and, unlike `-G -W`, keeps its checksum.
    let minisign = minisign();
    let s = Signing::new("interop-minisign-cw");
    let (public, secret) = minisign_keygen(minisign, s.scratch.path(), Some(PASSWORD));
    let mut remove = Command::new("minisign");
    remove.arg("-C").arg("-W").arg("-s").arg(&secret);
    assert_success(&run(remove, &format!("{PASSWORD}\n")), "minisign -C -W");
    assert_success(
        &host_sign(&s.policy, &secret, None),
        "host sign with a key `minisign -C -W` decrypted",
    );
    assert_both_verify(Command::new("minisign"), &s.policy, &public);
}

#[e2e_test(requires = "minisign")]
fn minisign_signs_with_an_unencrypted_key_from_host_keygen() {
    let minisign = minisign();
    let s = Signing::new("interop-host-unencrypted");
    let (public, secret) = host_keygen(&s.scratch.path().join("keys"), None);
    // Nothing on standard input: minisign must not ask for a password.
    let out = minisign_sign(minisign, &secret, &s.policy, "");
    assert_success(&out, "minisign -S with a `host keygen --unencrypted` key");
    assert!(
        !(text(&out.stdout) + &text(&out.stderr)).contains("Password"),
        "minisign asked for a password"
    );
    assert_both_verify(Command::new("minisign"), &s.policy, &public);
}

#[e2e_test(requires = "minisign")]
fn minisign_signs_with_a_password_protected_key_from_host_keygen() {
    let minisign = minisign();
    let s = Signing::new("interop-host-password");
    let password = s.password_file("password", PASSWORD);
    let (public, secret) = host_keygen(&s.scratch.path().join("keys"), Some(&password));

    let out = minisign_sign(minisign, &secret, &s.policy, "not the password\n");
    assert_failure_saying(&out, "minisign -S with a wrong password", "Wrong password");
    assert!(!s.signature().exists(), "no signature from a failed sign");

    // The password file itself serves as minisign's standard input.
    let out = minisign_sign(
        Command::new("minisign"),
        &secret,
        &s.policy,
        &fs::read_to_string(&password).unwrap(),
    );
    assert_success(
        &out,
        "minisign -S with a `host keygen` key and its password",
    );
    assert_both_verify(Command::new("minisign"), &s.policy, &public);
}
