//! `cargo run -p policy-host-e2e --bin demo`: the example policy
//! (`policies/example`) applied by the `host` binary to a real systemd,
//! booted in a throwaway sandbox (root and Linux namespaces needed; nothing
//! on this machine changes).
//!
//! The policy is signed with a freshly generated key and only that key is
//! trusted, so the demo goes through the real trust path; a tampered copy is
//! shown being refused. It then shows a `--noop` run, a real run, a second run that has nothing to do,
//! and, after `httpd`'s configuration is edited, a plain run that restarts
//! `httpd` by itself (it subscribes to the file), checking systemd's real
//! state after each; it exits non-zero if anything is not as expected.
//!
//! Every step starts with a `===` heading and ends with a line giving its
//! elapsed time; the builds show cargo's own progress (the first build of the
//! host compiles wasmtime and takes minutes).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use policy_host_e2e::build;
use policy_host_e2e::sandbox::{sleep_service, Sandbox};

/// The file `httpd` is subscribed to in the example policy.
const HTTPD_CONFIG: &str = "/etc/httpd/conf/httpd.conf";

fn main() -> ExitCode {
    let started = Instant::now();
    match demo() {
        Ok(()) => {
            println!(
                "\nThe demo ran as expected, in {}.",
                seconds(started.elapsed())
            );
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!(
                "\ndemo failed after {}: {err:#}",
                seconds(started.elapsed())
            );
            ExitCode::FAILURE
        }
    }
}

fn demo() -> anyhow::Result<()> {
    let step = Step::start("Building the host and the example policy");
    println!(
        "(cargo's output follows; a first build of the host compiles wasmtime \
         and can take several minutes)"
    );
    build::show_build_progress();
    let host = build::host_binary();
    let built = build::policy_wasm("example-policy");
    println!("host:   {}\npolicy: {}", host.display(), built.display());
    step.done();

    let step = Step::start("Signing the policy with a fresh key");
    let work = build::target_dir()
        .join("demo")
        .join(std::process::id().to_string());
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let policy = work.join("example_policy.wasm");
    std::fs::copy(&built, &policy).context("copying the policy")?;
    let keys = work.join("keys");
    show(
        &host,
        &[
            "keygen".as_ref(),
            "--unencrypted".as_ref(),
            "--out".as_ref(),
            keys.as_os_str(),
        ],
        0,
    )?;
    let (public_key, secret_key) = (keys.join("policy-host.pub"), keys.join("policy-host.key"));
    show(
        &host,
        &[
            "sign".as_ref(),
            policy.as_os_str(),
            "--key".as_ref(),
            secret_key.as_os_str(),
        ],
        0,
    )?;
    show(
        &host,
        &[
            "verify".as_ref(),
            policy.as_os_str(),
            "--trusted-key".as_ref(),
            public_key.as_os_str(),
        ],
        0,
    )?;
    let tampered = work.join("tampered.wasm");
    let mut bytes = std::fs::read(&policy)?;
    let middle = bytes.len() / 2;
    bytes[middle] ^= 1;
    std::fs::write(&tampered, bytes)?;
    std::fs::copy(
        build::signature_path(&policy),
        build::signature_path(&tampered),
    )?;
    println!("(a copy with one byte flipped, with the original signature:)");
    show(
        &host,
        &[
            "run".as_ref(),
            tampered.as_os_str(),
            "--trusted-key".as_ref(),
            public_key.as_os_str(),
        ],
        1,
    )?;
    step.done();

    let step = Step::start("Booting systemd in a sandbox");
    println!(
        "(systemd as PID 1 of new namespaces, on an overlay of / whose writable layer is a tmpfs)"
    );
    let sandbox = Sandbox::boot(&build::target_dir())?;
    println!(
        "systemd is PID {} here, up in {} ms",
        sandbox.pid(),
        sandbox.boot_time().as_millis()
    );
    step.done();
    let demo = Demo {
        sandbox,
        host,
        policy,
        public_key,
    };
    let result = demo.run();
    let _ = std::fs::remove_dir_all(&work);
    result?;

    let step = Step::start("Stopping the sandbox");
    let stopped = demo.sandbox.stop()?;
    println!("stopped in {} ms", stopped.as_millis());
    step.done();
    Ok(())
}

struct Demo {
    sandbox: Sandbox,
    host: PathBuf,
    policy: PathBuf,
    public_key: PathBuf,
}

impl Demo {
    fn run(&self) -> anyhow::Result<()> {
        let step = Step::start("A machine that has drifted from the policy");
        for name in ["httpd", "legacy-ftpd", "metrics-agent"] {
            self.sandbox.install_unit(name, &sleep_service(name));
        }
        self.sandbox
            .systemctl_ok(&["enable", "--now", "legacy-ftpd"]);
        self.sandbox.write_file(HTTPD_CONFIG, "ServerName demo\n");
        self.show_units();
        step.done();

        let step = Step::start("1. host run --noop: what would change (nothing is changed)");
        self.host(&["--noop"], 0)?;
        self.expect("httpd", "inactive", "disabled")?;
        self.expect("legacy-ftpd", "active", "enabled")?;
        step.done();

        let step = Step::start("2. host run: converge");
        self.host(&["--detailed-exitcodes"], 2)?;
        self.show_units();
        self.expect("httpd", "active", "enabled")?;
        self.expect("legacy-ftpd", "inactive", "disabled")?;
        self.expect("metrics-agent", "active", "disabled")?;
        step.done();

        let step = Step::start("3. host run again: nothing to change");
        self.host(&["--detailed-exitcodes"], 0)?;
        step.done();

        let step = Step::start(format!(
            "4. {HTTPD_CONFIG} edited, then a plain host run: httpd restarts by itself"
        ));
        self.sandbox
            .write_file(HTTPD_CONFIG, "ServerName demo\nKeepAlive On\n");
        let before = self.sandbox.main_pid("httpd");
        self.host(&["--detailed-exitcodes"], 2)?;
        let after = self.sandbox.main_pid("httpd");
        println!("httpd MainPID: {before} -> {after}");
        ensure!(after != 0 && after != before, "httpd was not restarted");
        step.done();

        let step = Step::start("The units afterwards");
        self.show_units();
        self.expect("httpd", "active", "enabled")?;
        self.expect("legacy-ftpd", "inactive", "disabled")?;
        self.expect("metrics-agent", "active", "disabled")?;
        step.done();
        Ok(())
    }

    /// Runs `host run POLICY ARGS` inside, shows its output and checks its
    /// exit code.
    fn host(&self, args: &[&str], expected_code: i32) -> anyhow::Result<()> {
        let key = path_str(&self.public_key)?;
        let args = [&["--trusted-key", key], args].concat();
        println!("$ host run {} {}", file_name(&self.policy), args.join(" "));
        let mut command = vec![path_str(&self.host)?, "run", path_str(&self.policy)?];
        command.extend_from_slice(&args);
        let started = Instant::now();
        let output = self.sandbox.exec(&command);
        let took = started.elapsed();
        print!("{}", String::from_utf8_lossy(&output.stdout));
        eprint!("{}", String::from_utf8_lossy(&output.stderr));
        let code = output.status.code();
        println!(
            "(exit code {}, after {})",
            code.map_or("none".into(), |c| c.to_string()),
            seconds(took)
        );
        ensure!(
            code == Some(expected_code),
            "host run {} exited with {:?}, expected {expected_code}",
            args.join(" "),
            code
        );
        Ok(())
    }

    fn show_units(&self) {
        println!("{:<15} {:<10} is-enabled", "unit", "is-active");
        for name in ["httpd", "legacy-ftpd", "metrics-agent"] {
            println!(
                "{name:<15} {:<10} {}",
                self.sandbox.is_active(name),
                self.sandbox.is_enabled(name)
            );
        }
    }

    fn expect(&self, name: &str, active: &str, enabled: &str) -> anyhow::Result<()> {
        let actual = (self.sandbox.is_active(name), self.sandbox.is_enabled(name));
        ensure!(
            actual == (active.to_string(), enabled.to_string()),
            "{name} is {actual:?}, expected ({active:?}, {enabled:?})"
        );
        Ok(())
    }
}

/// Runs the host outside the sandbox (signing needs no systemd), showing the
/// command and its output, and checks its exit code.
fn show(host: &Path, args: &[&std::ffi::OsStr], expected_code: i32) -> anyhow::Result<()> {
    let shown: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    println!("$ host {}", shown.join(" "));
    let output = std::process::Command::new(host)
        .args(args)
        .output()
        .context("running host")?;
    print!("{}", String::from_utf8_lossy(&output.stdout));
    print!("{}", String::from_utf8_lossy(&output.stderr));
    ensure!(
        output.status.code() == Some(expected_code),
        "host {} exited with {:?}, expected {expected_code}",
        shown.join(" "),
        output.status.code()
    );
    Ok(())
}

/// One step of the demo: its heading is printed when it starts, and a line
/// with its elapsed time when it is done (not if it fails: then `main` says
/// how long the demo ran).
struct Step {
    title: String,
    started: Instant,
}

impl Step {
    fn start(title: impl Into<String>) -> Step {
        let title = title.into();
        println!("\n=== {title}");
        Step {
            title,
            started: Instant::now(),
        }
    }

    fn done(self) {
        println!(
            "=== {} ... done in {}",
            self.title,
            seconds(self.started.elapsed())
        );
    }
}

/// `312.4 s`.
fn seconds(duration: Duration) -> String {
    format!("{:.1} s", duration.as_secs_f64())
}

fn path_str(path: &Path) -> anyhow::Result<&str> {
    path.to_str()
        .with_context(|| format!("{} is not UTF-8", path.display()))
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}
