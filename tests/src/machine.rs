//! A real systemd in a sandbox with the manifest policy and the host binary
//! ready inside, and readers of the reports its runs print: what the tests
//! of `real_systemd.rs` and `parallel_jobs.rs` share.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use crate::build;
use crate::sandbox::{sleep_service, Sandbox};

/// A sandbox with the manifest policy and the host binary ready inside.
pub struct Machine {
    pub sandbox: Sandbox,
    pub host: PathBuf,
    pub policy: PathBuf,
    pub trusted_key: PathBuf,
}

/// Builds what the test runs, then boots a sandbox and starts its system
/// bus, waiting until systemd is on it: the host then talks to systemd over
/// D-Bus from its first run, as on a machine with `dbus` (without the wait,
/// a first run could find the bus still starting and use systemctl).
pub fn machine() -> Machine {
    let host = build::host_binary();
    let policy = build::signed_policy("manifest-policy");
    let trusted_key = build::test_key().public_key;
    let sandbox = Sandbox::boot_for_test(&build::target_dir());
    sandbox.start_system_bus();
    let m = Machine {
        sandbox,
        host,
        policy,
        trusted_key,
    };
    m.precompile(&m.policy);
    m
}

/// One run of the host: exit code, output and (with `--json`) the report.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit code {}\n--- stdout:\n{}\n--- stderr:\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

impl Run {
    pub fn report(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("the host printed no JSON report ({e}):\n{self:?}"))
    }
}

impl Machine {
    /// Installs a `sleep infinity` service and puts it in the given state.
    pub fn service(&self, name: &str, running: bool, enabled: bool) {
        self.sandbox.install_unit(name, &sleep_service(name));
        if running {
            self.sandbox.systemctl_ok(&["start", "--", name]);
        }
        if enabled {
            self.sandbox.systemctl_ok(&["enable", "--", name]);
        }
        assert_eq!(self.state(name), state(running, enabled));
    }

    /// `(is-active, is-enabled)` of a unit, as systemd says.
    pub fn state(&self, name: &str) -> (String, String) {
        (self.sandbox.is_active(name), self.sandbox.is_enabled(name))
    }

    /// Puts `policy` (signed by the test key), compiled, into the compile
    /// cache the machine's runs use by default (`/var/cache/policy-host`,
    /// root's alone), as `host compile` leaves it when an operator installs
    /// a policy. Compiling it again at each machine's first run was half
    /// of the host's CPU time in the e2e suite; the compile itself is
    /// tested where it happens (`operator.rs`, the Debian package).
    pub fn precompile(&self, policy: &Path) {
        let compiled = build::compiled_alone(policy);
        let out = self.sandbox.exec(&[
            "sh",
            "-c",
            r#"install -d -m 700 /var/cache/policy-host && cp "$1"/*.cwasm /var/cache/policy-host/"#,
            "sh",
            compiled.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "copying the compiled policy: {out:?}");
    }

    /// Runs `host run MANIFEST-POLICY --settings <manifest> ARGS` inside,
    /// with the policy signed by the test key and that key trusted.
    pub fn run(&self, manifest: &str, args: &[&str]) -> Run {
        self.run_policy(&self.policy, Some(manifest), args)
    }

    /// Runs `host run POLICY [--settings <settings>] ARGS` inside, with
    /// `policy` (signed by the test key, under the share) and that key
    /// trusted.
    pub fn run_policy(&self, policy: &Path, settings: Option<&str>, args: &[&str]) -> Run {
        let mut command = vec![
            self.host.to_str().unwrap().to_owned(),
            "run".to_owned(),
            policy.to_str().unwrap().to_owned(),
            "--trusted-key".to_owned(),
            self.trusted_key.to_str().unwrap().to_owned(),
        ];
        if let Some(settings) = settings {
            let settings = self.sandbox.share_file("manifest.yaml", settings);
            // Settings are signed like policies, under their own name.
            build::sign_file(&settings);
            command.extend([
                "--settings".to_owned(),
                settings.to_str().unwrap().to_owned(),
            ]);
        }
        command.extend(args.iter().map(|a| a.to_string()));
        let command: Vec<&str> = command.iter().map(String::as_str).collect();
        let Output {
            status,
            stdout,
            stderr,
        } = self.sandbox.exec(&command);
        Run {
            code: status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
        }
    }
}

pub fn state(running: bool, enabled: bool) -> (String, String) {
    (
        if running { "active" } else { "inactive" }.to_string(),
        if enabled { "enabled" } else { "disabled" }.to_string(),
    )
}

/// The report's entry for `resource` (e.g. `service#demo-a`).
pub fn resource<'a>(report: &'a Value, resource: &str) -> &'a Value {
    report["resources"]
        .as_array()
        .expect("resources is an array")
        .iter()
        .find(|r| r["resource"] == resource)
        .unwrap_or_else(|| panic!("no {resource} in the report:\n{report:#}"))
}

/// The report's systemctl calls that change something, as `"start demo-a"`.
pub fn mutating_calls(report: &Value) -> Vec<String> {
    calls(report)
        .filter(|(op, _)| op != "daemon-reload" && op != "status")
        .map(|(op, service)| format!("{op} {service}"))
        .collect()
}

/// Every call the host made for the policy, the run's daemon-reload left
/// out, as `"status demo-a"`, `"stop demo-a"`.
pub fn guest_calls(report: &Value) -> Vec<String> {
    calls(report)
        .filter(|(op, _)| op != "daemon-reload")
        .map(|(op, service)| format!("{op} {service}"))
        .collect()
}

/// How many calls of `operation` the report lists.
pub fn count_calls(report: &Value, operation: &str) -> usize {
    calls(report).filter(|(op, _)| op == operation).count()
}

pub fn calls(report: &Value) -> impl Iterator<Item = (String, String)> + '_ {
    report["calls"]
        .as_array()
        .expect("calls is an array")
        .iter()
        .map(|c| {
            (
                c["operation"].as_str().unwrap_or_default().to_string(),
                c["service"].as_str().unwrap_or_default().to_string(),
            )
        })
}

pub fn actions(resource: &Value) -> Vec<&str> {
    resource["actions"]
        .as_array()
        .expect("actions is an array")
        .iter()
        .map(|a| a.as_str().unwrap_or_default())
        .collect()
}

pub fn errors(resource: &Value) -> String {
    resource["errors"]
        .as_array()
        .expect("errors is an array")
        .iter()
        .map(|e| e.as_str().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

impl Machine {
    /// Runs `manifest` with `--json --detailed-exitcodes`, asserts the exit
    /// code and every call the host made (the reload left out), and returns
    /// the report.
    pub fn run_expecting(&self, manifest: &str, code: i32, expected_calls: &[&str]) -> Value {
        let run = self.run(manifest, &["--json", "--detailed-exitcodes"]);
        assert_eq!(run.code, code, "{run:?}");
        let report = run.report();
        assert_eq!(guest_calls(&report), expected_calls, "{report:#}");
        report
    }

    /// `systemctl is-enabled` of a unit that may be gone: the word, or what
    /// systemd 252 says on stderr for a missing unit.
    pub fn is_enabled_or_why_not(&self, unit: &str) -> String {
        let output = self.sandbox.systemctl(&["is-enabled", "--", unit]);
        let stdout = String::from_utf8_lossy(&output.stdout).trim().to_string();
        if stdout.is_empty() {
            String::from_utf8_lossy(&output.stderr).trim().to_string()
        } else {
            stdout
        }
    }
}

impl Machine {
    /// Builds package `name` at `version` (an empty package, as dpkg-deb
    /// makes it) and installs it with dpkg, inside the sandbox.
    pub fn install_package(&self, name: &str, version: &str) {
        let script = format!(
            "set -e; d=/var/tmp/{name}-{version}; rm -rf $d; mkdir -p $d/DEBIAN; \
             printf 'Package: {name}\\nVersion: {version}\\nArchitecture: all\\nMaintainer: Test <test@example.com>\\nDescription: a watched package\\n' > $d/DEBIAN/control; \
             dpkg-deb --build $d $d.deb >/dev/null; dpkg -i $d.deb >/dev/null"
        );
        let out = self.sandbox.exec(&["sh", "-c", &script]);
        assert!(
            out.status.success(),
            "installing {name} {version}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A `sleep infinity` service whose start fails while /etc/demo/fail exists.
    pub fn service_that_can_fail(&self, name: &str) {
        self.sandbox.install_unit(
            name,
            &format!(
                "[Unit]\nDescription={name}\n\n[Service]\nExecStartPre=/bin/sh -c 'test ! -e /etc/demo/fail'\nExecStart=/bin/sleep infinity\n\n[Install]\nWantedBy=multi-user.target\n"
            ),
        );
        self.sandbox.systemctl_ok(&["enable", "--now", "--", name]);
    }
}

impl Machine {
    /// Installs unit files (`(name, contents)`) with one daemon-reload.
    pub fn install_units(&self, units: &[(String, String)]) {
        for (name, contents) in units {
            self.sandbox.write_file(
                &format!(
                    "/etc/systemd/system/{}",
                    crate::fake_systemctl::unit_name(name)
                ),
                contents,
            );
        }
        self.sandbox.systemctl_ok(&["daemon-reload"]);
    }

    /// A monotonic timestamp property of `unit` (`ActiveEnterTimestampMonotonic`,
    /// ...), in microseconds since boot; 0 when systemd never set it.
    pub fn monotonic(&self, unit: &str, property: &str) -> u64 {
        let output = self.sandbox.systemctl(&[
            "show",
            &format!("--property={property}"),
            "--value",
            "--",
            unit,
        ]);
        let word = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        word.parse()
            .unwrap_or_else(|_| panic!("{property} of {unit} is {word:?}, not a number"))
    }
}
