//! End-to-end: a local user attacks the host through the file system and
//! through systemctl, each attack one test, against the real `host` binary
//! (as root) and the fake systemctl:
//!
//! - the run lock: holding it through a read-only descriptor so that no run
//!   ever happens, and a symbolic link planted at its path to make root
//!   overwrite a file;
//! - symbolic links planted where the metrics and the report are written;
//! - a trusted-keys directory or key file someone else can change;
//! - a symlinked compile-cache directory, to make root chmod its target;
//! - a systemctl whose grandchild holds its output pipe open.
//!
//! The unprivileged side of each attack runs as a throwaway system user that
//! the test creates (`useradd --system`) and removes (`userdel`), through
//! `setpriv`. That requires root (`#[e2e_test(requires = "root")]`). Each checks that the
//! victim (a root-only file, a directory's mode) is unchanged, that the run
//! is refused or goes on as specified, and that the message names the problem.

use std::ffi::{OsStr, OsString};
use std::fs;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use policy_host_e2e::build::{
    host_command, isolation_args, policy_wasm, signed_policy, test_key, trust_args,
};
use policy_host_e2e::executable::write_executable;
use policy_host_e2e::fake_systemctl::FakeSystemctl;
use policy_host_e2e::outcome::text;
use policy_host_e2e::outcome::{assert_contains, json_calls, Run};
use policy_host_e2e::requires::e2e_test;
use policy_host_e2e::scratch::Scratch;
use serde_json::Value;

// ------------------------------------------------------------------ harness

/// What a root-only file holds before the attack, and must hold after.
const PRECIOUS: &str = "root's only copy: must never be overwritten\n";

/// The effective uid of this test process (from /proc: no libc here).
fn euid() -> u32 {
    let status = fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        .and_then(|id| id.parse().ok())
        .expect("an effective uid in /proc/self/status")
}

fn on_path(tool: &str) -> bool {
    ["/usr/sbin", "/usr/bin", "/sbin", "/bin"]
        .iter()
        .any(|dir| Path::new(dir).join(tool).is_file())
}

/// Why throwaway users cannot be made here, if they cannot.
fn cannot_create_users() -> Option<String> {
    if euid() != 0 {
        return Some(format!("not root (euid {})", euid()));
    }
    ["useradd", "userdel", "setpriv"]
        .iter()
        .find(|tool| !on_path(tool))
        .map(|tool| format!("no `{tool}` on this machine"))
}

/// A system user that exists for one test, removed on drop.
struct Attacker {
    name: String,
    uid: u32,
    gid: u32,
}

/// useradd and userdel lock /etc/passwd: one at a time.
static USERS: Mutex<()> = Mutex::new(());

impl Attacker {
    /// Creates the user; panics, naming why, when users cannot be made
    /// here (the tests that need one require root).
    fn create(test: &str) -> Self {
        if let Some(why) = cannot_create_users() {
            panic!("{test} needs root to create a throwaway user, and {why}");
        }
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "ph-attacker-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let _one = USERS.lock().unwrap_or_else(|e| e.into_inner());
        let out = Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
            ])
            .arg(&name)
            .output()
            .expect("run useradd");
        assert!(
            out.status.success(),
            "useradd {name} failed: {}",
            text(&out.stderr)
        );
        let id = |flag: &str| -> u32 {
            let out = Command::new("id").arg(flag).arg(&name).output().unwrap();
            text(&out.stdout).trim().parse().expect("a numeric id")
        };
        let (uid, gid) = (id("-u"), id("-g"));
        assert_ne!(uid, 0);
        Self { name, uid, gid }
    }

    /// `program` run as this user: its uid and gid, no other group.
    fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new("setpriv");
        cmd.arg(format!("--reuid={}", self.uid))
            .arg(format!("--regid={}", self.gid))
            .arg("--clear-groups")
            .arg("--")
            .arg(program);
        cmd
    }

    /// `sh -c SCRIPT sh ARGS...` as this user; panics unless it succeeds.
    fn sh(&self, script: &str, args: &[&Path]) {
        let out = self
            .command("/bin/sh")
            .args(["-c", script, "sh"])
            .args(args)
            .output()
            .expect("run setpriv");
        assert!(
            out.status.success(),
            "as {}: {script} failed: {}",
            self.name,
            text(&out.stderr)
        );
    }

    /// Hands `path` to this user (as `chown USER:USER`).
    fn owns(&self, path: &Path) {
        std::os::unix::fs::chown(path, Some(self.uid), Some(self.gid)).unwrap();
    }
}

impl Drop for Attacker {
    fn drop(&mut self) {
        let _one = USERS.lock().unwrap_or_else(|e| e.into_inner());
        // userdel refuses while a process of the user is still exiting.
        for attempt in 0..20 {
            match Command::new("userdel").arg(&self.name).output() {
                Ok(out) if out.status.success() => return,
                Ok(out) if attempt == 19 => {
                    eprintln!("userdel {} failed: {}", self.name, text(&out.stderr))
                }
                Ok(_) => std::thread::sleep(Duration::from_millis(100)),
                Err(e) => return eprintln!("userdel {}: {e}", self.name),
            }
        }
    }
}

/// What the attacks of this file need of a scratch directory (root's,
/// mode 0755): subdirectories of a given mode and a precious file.
trait AttackScratch {
    /// A subdirectory with `mode`.
    fn dir(&self, name: &str, mode: u32) -> PathBuf;
    /// A root-only file (mode 0600) holding [`PRECIOUS`].
    fn victim(&self) -> PathBuf;
}

impl AttackScratch for Scratch {
    fn dir(&self, name: &str, mode: u32) -> PathBuf {
        let dir = self.join(name);
        fs::create_dir_all(&dir).unwrap();
        chmod(&dir, mode);
        dir
    }

    fn victim(&self) -> PathBuf {
        let victim = self.write("victim", PRECIOUS);
        chmod(&victim, 0o600);
        victim
    }
}

fn chmod(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

fn mode_of(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().mode() & 0o7777
}

#[track_caller]
fn assert_victim_unchanged(victim: &Path) {
    let meta = fs::symlink_metadata(victim).expect("the victim still exists");
    assert!(meta.is_file(), "the victim is still a regular file");
    assert_eq!(
        fs::read_to_string(victim).unwrap(),
        PRECIOUS,
        "victim changed"
    );
    assert_eq!(meta.mode() & 0o7777, 0o600, "victim's mode changed");
    assert_eq!(meta.uid(), 0, "victim's owner changed");
}

/// `host run POLICY --json`, trusting `trust` (the test key when empty),
/// with this test process's isolation settings (lock, cache, ...) except the
/// flags in `args`, which replace them; the fake first on PATH.
fn host_run(fake: &FakeSystemctl, policy: &Path, trust: &[OsString], args: &[&OsStr]) -> Run {
    fake.host_run()
        .policy(policy)
        .args(["--json"])
        .args(trust)
        .args(args)
        .run()
}

/// Refused before anything ran: exit 1, `needles` in stderr, no report, no
/// systemctl call, the units as they were.
#[track_caller]
fn assert_refused(fake: &FakeSystemctl, r: &Run, needles: &[&str]) {
    r.assert_exit(1);
    for needle in needles {
        assert_contains(&r.stderr, needle);
    }
    assert_eq!(r.stdout, "", "no report of a run that did not happen");
    assert_eq!(fake.calls(), Vec::<String>::new(), "systemctl ran");
    assert_eq!(
        fake.state("httpd").unwrap(),
        ("inactive".into(), "disabled".into())
    );
}

/// The run went on and converged the three units.
#[track_caller]
fn assert_converged(fake: &FakeSystemctl, r: &Run) -> Value {
    r.assert_exit(0);
    let json = r.json();
    assert_eq!(json["summary"]["success"], true, "{json:#}");
    assert_eq!(
        fake.state("httpd").unwrap(),
        ("active".into(), "enabled".into())
    );
    json
}

/// Waits up to `limit` for `child` to exit; kills it (and its process group,
/// when it leads one) and says so with `None` when it does not.
fn wait_or_kill(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if started.elapsed() > limit {
            kill_group(child);
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Kills `child`'s process group (it was spawned with `process_group(0)`)
/// and reaps `child`: what it started goes too (a user with processes left
/// cannot be removed).
fn kill_group(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .stderr(Stdio::null())
        .status();
    let _ = child.kill();
    let _ = child.wait();
}

// ------------------------------------------------------------- the run lock

/// The issue: with the lock at `/run/lock/policy-host.lock` (a world-writable
/// directory, the file 0644), any user could open it read-only, take the
/// flock and hold it forever, so that the timer's runs never happened. Now
/// the lock's directory is created 0700: the user cannot even open the file.
#[e2e_test(requires = "root")]
fn a_user_cannot_hold_the_lock_in_its_private_directory() {
    let attacker = Attacker::create("a_user_cannot_hold_the_lock");
    let s = Scratch::new("attack-lock-hold");
    // Like /run/policy-host on a machine where no run has happened yet.
    let dir = s.join("policy-host");
    let lock = dir.join("lock");
    let fake = FakeSystemctl::example_units();
    let first = host_run(
        &fake,
        &signed_policy("example-policy"),
        &[],
        &["--lock-file".as_ref(), lock.as_os_str()],
    );
    assert_converged(&fake, &first);
    assert_eq!(
        mode_of(&dir),
        0o700,
        "the lock's directory is created private"
    );
    assert_eq!(mode_of(&lock), 0o600);

    // The attack: take the lock through a read-only descriptor, and keep it.
    let mut holder = attacker
        .command("flock")
        .args(["--shared", "--nonblock"])
        .arg(&lock)
        .args(["sleep", "60"])
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run flock as the attacker");
    let status = wait_or_kill(&mut holder, Duration::from_secs(5));
    let mut said = String::new();
    if let Some(mut stderr) = holder.stderr.take() {
        use std::io::Read;
        let _ = stderr.read_to_string(&mut said);
    }
    assert!(
        status.is_some_and(|s| !s.success()),
        "the attacker could take the lock ({status:?}): {said}"
    );
    assert_contains(&said, "Permission denied");

    // And the next run is not blocked: --no-wait would fail at once.
    let fake = FakeSystemctl::example_units();
    let second = host_run(
        &fake,
        &signed_policy("example-policy"),
        &[],
        &[
            "--lock-file".as_ref(),
            lock.as_os_str(),
            "--no-wait".as_ref(),
        ],
    );
    assert_converged(&fake, &second);
}

/// The old layout itself is refused, with the reason: a lock directory
/// others can write (like /run/lock, mode 1777), where the attacker has
/// already taken the lock through a read-only descriptor of a file of hers.
#[e2e_test(requires = "root")]
fn a_lock_directory_others_can_write_is_refused_not_waited_on() {
    let attacker = Attacker::create("a_lock_directory_others_can_write");
    let s = Scratch::new("attack-lock-shared");
    let shared = s.dir("lock", 0o1777);
    let lock = shared.join("policy-host.lock");
    let mut holder = attacker
        .command("flock")
        .args(["--shared", "--nonblock"])
        .arg(&lock)
        .args(["sleep", "60"])
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run flock as the attacker");
    // Until her lock file exists (flock creates it, then locks it).
    let started = Instant::now();
    while !lock.exists() && started.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let fake = FakeSystemctl::example_units();
    let r = host_run(
        &fake,
        &signed_policy("example-policy"),
        &[],
        &["--lock-file".as_ref(), lock.as_os_str()],
    );
    kill_group(&mut holder);
    assert_refused(
        &fake,
        &r,
        &[
            "refusing the lock directory",
            "is writable by group or others (mode 1777)",
        ],
    );
    assert!(
        r.elapsed < Duration::from_secs(30),
        "refused at once, not after waiting for the lock: {:?}",
        r.elapsed
    );
}

/// The issue: a symlink planted at the lock path before root's first run
/// made root truncate and overwrite a root-only file. Planted by the user in
/// a directory she can write, or found in the lock's own directory: refused
/// either way, with the reason, and the file is untouched.
#[e2e_test(requires = "root")]
fn a_symlink_planted_at_the_lock_path_is_refused_and_the_victim_is_unchanged() {
    let attacker = Attacker::create("a_symlink_planted_at_the_lock_path");
    let s = Scratch::new("attack-lock-symlink");
    let victim = s.victim();
    let policy = signed_policy("example-policy");

    // In a world-writable directory, as /run/lock was.
    let shared = s.dir("lock", 0o1777);
    let lock = shared.join("policy-host.lock");
    attacker.sh(r#"ln -s "$1" "$2""#, &[&victim, &lock]);
    let fake = FakeSystemctl::example_units();
    let r = host_run(
        &fake,
        &policy,
        &[],
        &["--lock-file".as_ref(), lock.as_os_str()],
    );
    assert_refused(&fake, &r, &["refusing the lock directory", "(mode 1777)"]);
    assert_victim_unchanged(&victim);

    // In a directory of hers (0755, so not writable by others).
    let hers = s.dir("hers", 0o755);
    attacker.owns(&hers);
    let lock = hers.join("lock");
    attacker.sh(r#"ln -s "$1" "$2""#, &[&victim, &lock]);
    let fake = FakeSystemctl::example_units();
    let r = host_run(
        &fake,
        &policy,
        &[],
        &["--lock-file".as_ref(), lock.as_os_str()],
    );
    assert_refused(
        &fake,
        &r,
        &[
            "refusing the lock directory",
            &format!("is owned by uid {}", attacker.uid),
        ],
    );
    assert_victim_unchanged(&victim);

    // Left in root's own lock directory (planted before it was made safe).
    let roots = s.dir("roots", 0o700);
    let lock = roots.join("lock");
    symlink(&victim, &lock).unwrap();
    let fake = FakeSystemctl::example_units();
    let r = host_run(
        &fake,
        &policy,
        &[],
        &["--lock-file".as_ref(), lock.as_os_str()],
    );
    assert_refused(
        &fake,
        &r,
        &["refusing the lock file", "it is a symbolic link"],
    );
    assert_victim_unchanged(&victim);
}

// ------------------------------------------------ report and metrics files

/// The metrics directory belongs to node_exporter's user, who can plant
/// symbolic links there: at the predictable temporary names of the old
/// scheme (`.NAME.PID.tmp`, the host's pid known once it starts), and at the
/// files themselves. The files are written through unpredictable `O_EXCL`
/// temporary files and renamed over the links: the victim is untouched.
#[e2e_test(requires = "root")]
fn symlinks_planted_for_the_metrics_and_report_files_are_never_followed() {
    let attacker = Attacker::create("symlinks_planted_for_the_metrics");
    let s = Scratch::new("attack-metrics");
    let victim = s.victim();
    let textfile = s.dir("node-exporter", 0o755);
    attacker.owns(&textfile);
    let metrics = textfile.join("policy-host.prom");
    let report = textfile.join("last-run.json");
    attacker.sh(
        r#"ln -s "$1" "$2" && ln -s "$1" "$3""#,
        &[&victim, &metrics, &report],
    );

    let fake = FakeSystemctl::example_units();
    let mut cmd = fake.host_command();
    cmd.arg("run")
        .arg(signed_policy("example-policy"))
        .args(trust_args())
        .args(isolation_args())
        .arg("--metrics")
        .arg(&metrics)
        .arg("--report")
        .arg(&report)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().expect("run host");
    // The host is compiling the policy now; the temporary names it would
    // have used under the old scheme.
    let pid = child.id().to_string();
    let mut planted: Vec<PathBuf> = Vec::new();
    for name in ["policy-host.prom", "last-run.json"] {
        planted.push(textfile.join(format!(".{name}.{pid}.tmp")));
        planted.push(textfile.join(format!(".{name}.tmp")));
        planted.push(textfile.join(format!("{name}.tmp")));
    }
    let mut script = String::from("set -e; v=$1; shift; for l; do ln -s \"$v\" \"$l\"; done");
    script.push('\n');
    let mut args: Vec<&Path> = vec![&victim];
    args.extend(planted.iter().map(PathBuf::as_path));
    attacker.sh(&script, &args);
    let out = child.wait_with_output().expect("wait for host");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "the run goes on:\n{stderr}");
    assert_victim_unchanged(&victim);
    for file in [&metrics, &report] {
        let meta = fs::symlink_metadata(file).unwrap();
        assert!(
            meta.is_file(),
            "{} replaced by a regular file",
            file.display()
        );
        assert_eq!(meta.uid(), 0);
    }
    let samples = policy_host_e2e::metrics::checked(&metrics);
    assert_eq!(samples.value("policy_host_run_success"), 1.0);
    assert_contains(&fs::read_to_string(&report).unwrap(), "\"success\": true");
    // Her links were left alone, no temporary file was left behind.
    for link in &planted {
        assert!(fs::symlink_metadata(link).unwrap().file_type().is_symlink());
    }
    let left: Vec<String> = fs::read_dir(&textfile)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp") && !planted.iter().any(|p| p.ends_with(n)))
        .collect();
    assert_eq!(left, Vec::<String>::new(), "temporary files left behind");
}

// ------------------------------------------------------------ trusted keys

/// `host keygen --unencrypted --out DIR`: (public, secret).
fn keygen(dir: &Path) -> (PathBuf, PathBuf) {
    let key = policy_host_e2e::build::keygen(dir);
    (key.public_key, key.secret_key)
}

/// The example policy, copied into `dir` and signed there with `secret`.
fn policy_signed_with(dir: &Path, secret: &Path) -> PathBuf {
    let built = policy_wasm("example-policy");
    let policy = dir.join(built.file_name().unwrap());
    fs::copy(&built, &policy).unwrap();
    policy_host_e2e::build::sign_with(&policy, secret);
    policy
}

/// The issue: the trusted-keys directory was not checked, so a group that
/// could write it could add a key, and run any policy as root. The attacker
/// adds her own key to a group-writable directory and signs a policy with
/// it: refused, and so are a key file she could change, and a directory on
/// the way that is hers.
#[e2e_test(requires = "root")]
fn trusted_keys_anyone_else_can_change_are_refused() {
    let attacker = Attacker::create("trusted_keys_anyone_else_can_change");
    let s = Scratch::new("attack-keys");
    let (_, her_secret) = keygen(&s.join("her-key"));
    let her_public = s.join("her-key/policy-host.pub");
    chmod(&s.join("her-key"), 0o755);
    chmod(&her_public, 0o644);
    let evil = policy_signed_with(&s.dir("evil", 0o755), &her_secret);

    // The directory, writable by her group.
    let keys = s.dir("trusted-keys", 0o755);
    fs::copy(test_key().public_key, keys.join("ops.pub")).unwrap();
    chmod(&keys.join("ops.pub"), 0o644);
    std::os::unix::fs::chown(&keys, Some(0), Some(attacker.gid)).unwrap();
    chmod(&keys, 0o775);
    attacker.sh(r#"cp "$1" "$2""#, &[&her_public, &keys.join("evil.pub")]);
    let dir_trust = vec![OsString::from("--trusted-keys-dir"), keys.clone().into()];
    let fake = FakeSystemctl::example_units();
    let r = host_run(&fake, &evil, &dir_trust, &[]);
    assert_refused(
        &fake,
        &r,
        &[
            "refusing the trusted-keys directory",
            &format!(
                "{} is writable by group or others (mode 775)",
                keys.display()
            ),
        ],
    );
    // The legitimate policy is refused too: the directory cannot be trusted.
    let fake = FakeSystemctl::example_units();
    let r = host_run(&fake, &signed_policy("example-policy"), &dir_trust, &[]);
    assert_refused(&fake, &r, &["refusing the trusted-keys directory"]);

    // The directory fixed, her key gone: a key file her group can write.
    fs::remove_file(keys.join("evil.pub")).unwrap();
    chmod(&keys, 0o755);
    std::os::unix::fs::chown(&keys, Some(0), Some(0)).unwrap();
    let fake = FakeSystemctl::example_units();
    let r = host_run(&fake, &signed_policy("example-policy"), &dir_trust, &[]);
    assert_converged(&fake, &r);
    let ops = keys.join("ops.pub");
    std::os::unix::fs::chown(&ops, Some(0), Some(attacker.gid)).unwrap();
    chmod(&ops, 0o664);
    let fake = FakeSystemctl::example_units();
    let r = host_run(&fake, &signed_policy("example-policy"), &dir_trust, &[]);
    assert_refused(
        &fake,
        &r,
        &[
            "refusing the trusted key file",
            "ops.pub is writable by group or others (mode 664)",
        ],
    );
    // Named with --trusted-key, the same.
    let file_trust = vec![OsString::from("--trusted-key"), ops.clone().into()];
    let fake = FakeSystemctl::example_units();
    let r = host_run(&fake, &signed_policy("example-policy"), &file_trust, &[]);
    assert_refused(&fake, &r, &["refusing the trusted key file", "(mode 664)"]);

    // A key file that is hers, and a directory on the way that is hers.
    chmod(&ops, 0o644);
    attacker.owns(&ops);
    let fake = FakeSystemctl::example_units();
    let r = host_run(&fake, &signed_policy("example-policy"), &file_trust, &[]);
    assert_refused(
        &fake,
        &r,
        &[
            "refusing the trusted key file",
            &format!("is owned by uid {}", attacker.uid),
        ],
    );
    let hers = s.dir("hers", 0o755);
    attacker.owns(&hers);
    let inner = hers.join("trusted-keys");
    fs::create_dir(&inner).unwrap();
    chmod(&inner, 0o755);
    fs::copy(test_key().public_key, inner.join("ops.pub")).unwrap();
    chmod(&inner.join("ops.pub"), 0o644);
    let fake = FakeSystemctl::example_units();
    let r = host_run(
        &fake,
        &signed_policy("example-policy"),
        &[OsString::from("--trusted-keys-dir"), inner.into()],
        &[],
    );
    assert_refused(
        &fake,
        &r,
        &[
            "refusing the trusted-keys directory",
            &format!("{} is owned by uid {}", hers.display(), attacker.uid),
        ],
    );
}

// ----------------------------------------------------------- compile cache

/// The issue: the cache directory was chmodded before its symlink check, so
/// a `--cache-dir` that is a symbolic link (planted by a user in a sticky
/// world-writable directory such as /var/tmp) changed its target's mode to
/// 0700. Now it is refused before anything is changed: the target keeps its
/// mode and contents, the run goes on without a cache, and says why.
#[e2e_test(requires = "root")]
fn a_symlinked_cache_dir_is_not_used_and_its_target_keeps_its_mode() {
    let attacker = Attacker::create("a_symlinked_cache_dir");
    let s = Scratch::new("attack-cache");
    let var_tmp = s.dir("var-tmp", 0o1777);
    let target = s.dir("shared-with-everyone", 0o755);
    fs::write(target.join("README"), "unchanged\n").unwrap();
    let cache = var_tmp.join("policy-host-cache");
    attacker.sh(r#"ln -s "$1" "$2""#, &[&target, &cache]);

    let fake = FakeSystemctl::example_units();
    let r = host_run(
        &fake,
        &signed_policy("example-policy"),
        &[],
        &["--cache-dir".as_ref(), cache.as_os_str()],
    );
    let json = assert_converged(&fake, &r);
    assert_eq!(
        json["compile"]["cache"], "disabled",
        "{:#}",
        json["compile"]
    );
    assert_contains(&r.stderr, "not using");
    assert_contains(
        &r.stderr,
        &format!("{} is a symbolic link", cache.display()),
    );
    assert_eq!(mode_of(&target), 0o755, "the target's mode was changed");
    let names: Vec<_> = fs::read_dir(&target)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, [OsString::from("README")], "nothing added");

    // A real directory of hers is not used either (and not changed).
    let hers = var_tmp.join("hers");
    attacker.sh(r#"mkdir -m 700 "$1""#, &[&hers]);
    let fake = FakeSystemctl::example_units();
    let r = host_run(
        &fake,
        &signed_policy("example-policy"),
        &[],
        &["--cache-dir".as_ref(), hers.as_os_str()],
    );
    let json = assert_converged(&fake, &r);
    assert_eq!(json["compile"]["cache"], "disabled");
    assert_contains(&r.stderr, &format!("is owned by uid {}", attacker.uid));
    assert_eq!(fs::read_dir(&hers).unwrap().count(), 0);
}

// --------------------------------------------------------------- systemctl

/// Processes now running `sleep SECONDS` (zombies, which run no more, aside).
fn sleepers(seconds: &str) -> usize {
    let wanted = format!("sleep\0{seconds}\0");
    fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| fs::read(e.path().join("cmdline")).is_ok_and(|c| c == wanted.as_bytes()))
        .filter(|e| {
            fs::read_to_string(e.path().join("stat"))
                .ok()
                .and_then(|s| Some(s.rsplit_once(") ")?.1.starts_with('Z')))
                == Some(false)
        })
        .count()
}

/// Runs the example policy against a `systemctl` that is `script`, with a
/// 1 s systemctl timeout and a 4 s wall clock; kills the host (and fails)
/// if it is still running after a minute.
fn run_with_systemctl(script: &str) -> (Run, Value) {
    let s = Scratch::new("attack-systemctl");
    let bin = s.dir("bin", 0o755);
    let systemctl = bin.join("systemctl");
    write_executable(&systemctl, script);
    let mut path = bin.into_os_string();
    path.push(":/usr/sbin:/usr/bin:/sbin:/bin");
    // Build everything first: the clock below times the run alone.
    let mut command = host_command();
    command
        .env("PATH", path)
        .arg("run")
        .arg(signed_policy("example-policy"))
        .arg("--json")
        .args(trust_args())
        .args(isolation_args())
        .args(["--systemctl-timeout", "1", "--wall-clock", "4"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = command.spawn().expect("run host");
    // Read the pipes on threads: the host's own output must not stall it.
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let read = |mut pipe: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let (stdout, stderr) = (read(Box::new(stdout)), read(Box::new(stderr)));
    let status = wait_or_kill(&mut child, Duration::from_secs(60));
    let elapsed = started.elapsed();
    let Some(status) = status else {
        panic!("the host was still running after a minute (killed)");
    };
    let r = Run {
        code: status.code(),
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
        elapsed,
    };
    let json = r.json();
    (r, json)
}

/// The first systemctl call timed out at its 1 s timeout, the run ended
/// within its wall clock, and `marker` (the grandchild's `sleep` argument)
/// left no process.
#[track_caller]
fn assert_cut_off(r: &Run, json: &Value, marker: &str) {
    assert!(
        r.code.is_some() && !r.stderr.contains("panicked"),
        "the host exited by itself: {:?}\n{}",
        r.code,
        r.stderr
    );
    // The first call (the run's daemon-reload) is cut off at its timeout,
    // and the operations after it fail with its error.
    let calls = json_calls(json);
    assert_eq!(
        calls.first(),
        Some(&("daemon-reload".to_owned(), None, "timed-out".to_owned())),
        "{json:#}"
    );
    assert_contains(
        json["calls"][0]["error"].as_str().unwrap(),
        "timed out after 1s; the command and its process group were killed",
    );
    // Cut off by the 1 s timeout and the 4 s wall clock, not by the
    // grandchild's sleep of over an hour: bounds a busy machine cannot reach.
    let cut_at = json["calls"][0]["duration_ms"].as_f64().unwrap();
    assert!(cut_at < 20_000.0, "the call was cut off after {cut_at} ms");
    assert!(
        r.run_time(json) < Duration::from_secs(30),
        "the run took {:?} ({:?} with the compile)",
        r.run_time(json),
        r.elapsed
    );
    let started = Instant::now();
    while sleepers(marker) > 0 && started.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(sleepers(marker), 0, "a grandchild of systemctl survived");
}

/// The issue: on a timeout only systemctl itself was killed, and its pipes
/// were read to their end, so a grandchild holding them held the run (here
/// for 4711 s). A systemctl that hangs, with a grandchild holding its pipes.
#[test]
fn a_hung_systemctl_with_a_grandchild_holding_its_pipe_ends_at_the_timeout() {
    let (r, json) = run_with_systemctl("#!/bin/sh\nsleep 4711 &\nexec sleep 4712\n");
    assert_cut_off(&r, &json, "4711");
    assert_eq!(sleepers("4712"), 0, "the hung systemctl survived");
}

/// A systemctl that answers at once and exits, leaving behind a grandchild
/// that holds its output open: the call still ends at its timeout.
#[test]
fn a_grandchild_holding_the_pipe_of_an_exited_systemctl_does_not_hold_the_run() {
    let (r, json) = run_with_systemctl("#!/bin/sh\nsleep 4713 &\necho active\nexit 0\n");
    assert_cut_off(&r, &json, "4713");
}
