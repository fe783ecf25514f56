//! `cargo run -p policy-host-e2e --bin demo`: the example policy
//! (`policies/example`) applied by the `host` binary to a real systemd,
//! booted in a throwaway sandbox (root and Linux namespaces needed; nothing
//! on this machine changes).
//!
//! It shows a `--noop` run, a real run, a second run that has nothing to do,
//! and a `--refresh` run that restarts `httpd`, checking systemd's real state
//! after each; it exits non-zero if anything is not as expected.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{ensure, Context};
use policy_host_e2e::build;
use policy_host_e2e::sandbox::{sleep_service, Sandbox};

/// The file `httpd` is subscribed to in the example policy.
const HTTPD_CONFIG: &str = "file#/etc/httpd/conf/httpd.conf";

fn main() -> ExitCode {
    match demo() {
        Ok(()) => {
            println!("\nThe demo ran as expected.");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("\ndemo failed: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn demo() -> anyhow::Result<()> {
    heading("Building the host and the example policy");
    let host = build::host_binary();
    let policy = build::policy_wasm("example-policy");
    println!("host:   {}\npolicy: {}", host.display(), policy.display());

    heading("Booting systemd in a sandbox");
    let sandbox = Sandbox::boot(&build::target_dir())?;
    println!(
        "systemd is PID {} here, up in {} ms",
        sandbox.pid(),
        sandbox.boot_time().as_millis()
    );
    let demo = Demo {
        sandbox,
        host,
        policy,
    };
    demo.run()?;

    heading("Stopping the sandbox");
    let stopped = demo.sandbox.stop()?;
    println!("stopped in {} ms", stopped.as_millis());
    Ok(())
}

struct Demo {
    sandbox: Sandbox,
    host: PathBuf,
    policy: PathBuf,
}

impl Demo {
    fn run(&self) -> anyhow::Result<()> {
        heading("A machine that has drifted from the policy");
        for name in ["httpd", "legacy-ftpd", "metrics-agent"] {
            self.sandbox.install_unit(name, &sleep_service(name));
        }
        self.sandbox
            .systemctl_ok(&["enable", "--now", "legacy-ftpd"]);
        self.show_units();

        heading("1. host run --noop: what would change (nothing is changed)");
        self.host(&["--noop"], 0)?;
        self.expect("httpd", "inactive", "disabled")?;
        self.expect("legacy-ftpd", "active", "enabled")?;

        heading("2. host run: converge");
        self.host(&["--detailed-exitcodes"], 2)?;
        self.show_units();
        self.expect("httpd", "active", "enabled")?;
        self.expect("legacy-ftpd", "inactive", "disabled")?;
        self.expect("metrics-agent", "active", "disabled")?;

        heading("3. host run again: nothing to change");
        self.host(&["--detailed-exitcodes"], 0)?;

        heading(&format!(
            "4. host run --refresh {HTTPD_CONFIG}: httpd restarts"
        ));
        let before = self.sandbox.main_pid("httpd");
        self.host(&["--detailed-exitcodes", "--refresh", HTTPD_CONFIG], 2)?;
        let after = self.sandbox.main_pid("httpd");
        println!("httpd MainPID: {before} -> {after}");
        ensure!(after != 0 && after != before, "httpd was not restarted");

        heading("The units afterwards");
        self.show_units();
        self.expect("httpd", "active", "enabled")?;
        self.expect("legacy-ftpd", "inactive", "disabled")?;
        self.expect("metrics-agent", "active", "disabled")?;
        Ok(())
    }

    /// Runs `host run POLICY ARGS` inside, shows its output and checks its
    /// exit code.
    fn host(&self, args: &[&str], expected_code: i32) -> anyhow::Result<()> {
        let (host, policy) = (path_str(&self.host)?, path_str(&self.policy)?);
        println!("$ host run {} {}", file_name(&self.policy), args.join(" "));
        let mut command = vec![host, "run", policy];
        command.extend_from_slice(args);
        let output = self.sandbox.exec(&command);
        print!("{}", String::from_utf8_lossy(&output.stdout));
        eprint!("{}", String::from_utf8_lossy(&output.stderr));
        let code = output.status.code();
        println!(
            "(exit code {})",
            code.map_or("none".into(), |c| c.to_string())
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

fn heading(text: &str) {
    println!("\n=== {text}");
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
