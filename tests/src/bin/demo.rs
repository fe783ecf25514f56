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
//!
//! `-- --host PATH` (or `POLICY_HOST_DEMO_HOST=PATH`) runs a `host` binary
//! you already have (the package's `/usr/sbin/policy-host`, a release
//! build) instead of building one; the example policy is still built. The
//! binary is copied into the demo's directory, which the sandbox sees.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use policy_host_e2e::build;
use policy_host_e2e::sandbox::{sleep_service, Sandbox};

/// The file `httpd` is subscribed to in the example policy.
const HTTPD_CONFIG: &str = "/etc/httpd/conf/httpd.conf";

/// The environment variable that names a `host` binary to use, as `--host`.
const HOST_VARIABLE: &str = "POLICY_HOST_DEMO_HOST";

const USAGE: &str = "\
usage: cargo run -p policy-host-e2e --bin demo [-- --host PATH]

Builds the example policy, signs it with a fresh key, and applies it with the host to a real
systemd booted in a throwaway sandbox (as root). Nothing on this machine changes.

  --host PATH   run this host binary (for example /usr/sbin/policy-host) instead of building
                one; POLICY_HOST_DEMO_HOST=PATH does the same (--host wins)
  -h, --help    this text";

fn main() -> ExitCode {
    let started = Instant::now();
    let given = match given_host(std::env::args_os().skip(1), std::env::var_os(HOST_VARIABLE)) {
        Ok(Given::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Ok(Given::Host(host)) => host,
        Err(err) => {
            eprintln!("demo: {err:#}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match demo(given) {
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

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
enum Given {
    Help,
    /// The `host` binary to use, checked; `None`: build one.
    Host(Option<PathBuf>),
}

/// Reads `--host PATH` (or `--host=PATH`) from `args`, else the
/// environment variable's `variable`, and checks that it names an
/// executable file.
fn given_host(
    args: impl IntoIterator<Item = std::ffi::OsString>,
    variable: Option<std::ffi::OsString>,
) -> anyhow::Result<Given> {
    let mut args = args.into_iter();
    let mut host = None;
    while let Some(arg) = args.next() {
        let text = arg.to_string_lossy();
        if text == "-h" || text == "--help" {
            return Ok(Given::Help);
        } else if text == "--host" {
            let path = args.next().context("--host needs a PATH")?;
            host = Some((PathBuf::from(path), "--host".to_owned()));
        } else if let Some(path) = text.strip_prefix("--host=") {
            host = Some((PathBuf::from(path), "--host".to_owned()));
        } else {
            anyhow::bail!("unknown argument {text:?}");
        }
    }
    let host = host.or_else(|| {
        variable
            .filter(|v| !v.is_empty())
            .map(|v| (PathBuf::from(v), HOST_VARIABLE.to_owned()))
    });
    let Some((path, from)) = host else {
        return Ok(Given::Host(None));
    };
    Ok(Given::Host(Some(
        executable(&path).with_context(|| format!("{from} {}", path.display()))?,
    )))
}

/// `path`, absolute, when it is a file someone may execute.
fn executable(path: &Path) -> anyhow::Result<PathBuf> {
    let metadata = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => anyhow::anyhow!(
            "no such file (omit --host to build the host; the package installs /usr/sbin/policy-host)"
        ),
        _ => anyhow::Error::new(e),
    })?;
    anyhow::ensure!(metadata.is_file(), "not a file");
    let mode = metadata.permissions().mode();
    anyhow::ensure!(
        mode & 0o111 != 0,
        "not executable (mode {:o}): chmod +x it, or omit --host to build the host",
        mode & 0o7777
    );
    std::fs::canonicalize(path).context("finding its absolute path")
}

fn demo(given: Option<PathBuf>) -> anyhow::Result<()> {
    build::show_build_progress();
    let (host, built) = match given {
        None => {
            let step = Step::start("Building the host and the example policy");
            println!(
                "(cargo's output follows; a first build of the host compiles wasmtime \
                 and can take several minutes)"
            );
            let host = build::host_binary();
            let built = build::policy_wasm("example-policy");
            println!("host:   {}\npolicy: {}", host.display(), built.display());
            step.done();
            (host, built)
        }
        Some(host) => {
            let step = Step::start("Building the example policy (the host is given)");
            println!("(cargo's output follows)");
            let built = build::policy_wasm("example-policy");
            println!(
                "host:   {} (given)\npolicy: {}",
                host.display(),
                built.display()
            );
            step.done();
            (host, built)
        }
    };

    let step = Step::start("Signing the policy with a fresh key");
    let work = build::target_dir()
        .join("demo")
        .join(std::process::id().to_string());
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    // The sandbox sees the target directory; a host from anywhere else is
    // run from a copy there.
    let host = if host.starts_with(build::target_dir()) {
        host
    } else {
        let copy = work.join("host");
        std::fs::copy(&host, &copy)
            .with_context(|| format!("copying {} to {}", host.display(), copy.display()))?;
        copy
    };
    show(&host, &["--version".as_ref()], 0)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn given(args: &[&str], variable: Option<&str>) -> anyhow::Result<Given> {
        given_host(args.iter().map(Into::into), variable.map(Into::into))
    }

    #[test]
    fn the_host_is_built_unless_one_is_given() {
        assert_eq!(given(&[], None).unwrap(), Given::Host(None));
        assert_eq!(given(&[], Some("")).unwrap(), Given::Host(None));
        assert_eq!(given(&["--help"], None).unwrap(), Given::Help);
        let sh = std::fs::canonicalize("/bin/sh").unwrap();
        assert_eq!(
            given(&["--host", "/bin/sh"], None).unwrap(),
            Given::Host(Some(sh.clone()))
        );
        assert_eq!(
            given(&["--host=/bin/sh"], Some("/nowhere")).unwrap(),
            Given::Host(Some(sh.clone())),
            "--host wins over the variable"
        );
        assert_eq!(given(&[], Some("/bin/sh")).unwrap(), Given::Host(Some(sh)));
    }

    #[test]
    fn a_host_that_cannot_run_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("host");
        std::fs::write(&plain, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
        for (args, variable, said) in [
            (
                vec!["--host", "/nowhere/host"],
                None,
                "--host /nowhere/host: no such file",
            ),
            (
                vec![],
                Some("/nowhere/host"),
                "POLICY_HOST_DEMO_HOST /nowhere/host: no such file",
            ),
            (
                vec!["--host", plain.to_str().unwrap()],
                None,
                "not executable (mode 644)",
            ),
            (vec!["--host", "/"], None, "--host /: not a file"),
            (vec!["--host"], None, "--host needs a PATH"),
            (vec!["--hots", "x"], None, "unknown argument \"--hots\""),
        ] {
            let err = format!("{:#}", given(&args, variable).unwrap_err());
            assert!(err.contains(said), "{args:?}: {err}");
        }
    }
}
