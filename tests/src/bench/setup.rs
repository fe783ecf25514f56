//! What every scenario does: run a command in the sandbox, write a signed document, install units, and time the host and a script with their outcomes checked.

use super::*;

impl Bench {
    pub(super) fn largest(&self) -> usize {
        self.plan.sizes.iter().copied().max().unwrap_or(0)
    }

    /// Runs `spec` in the sandbox under the agent.
    pub(super) fn measure(&self, spec: &Spec) -> anyhow::Result<Outcome> {
        let json = serde_json::to_string(spec)?;
        let agent = self.agent.to_string_lossy();
        let out = self.sandbox.exec(&[&agent, "__inner", &json]);
        ensure!(
            out.status.success(),
            "the bench agent failed in the sandbox ({}) running {:?}: {}",
            out.status,
            spec.argv,
            String::from_utf8_lossy(&out.stderr).trim()
        );
        let outcome: Outcome = serde_json::from_slice(&out.stdout).with_context(|| {
            format!(
                "reading the agent's answer: {}",
                String::from_utf8_lossy(&out.stdout)
            )
        })?;
        if let Some(problem) = &outcome.reset_error {
            bail!("resetting before {:?} failed: {problem}", spec.argv);
        }
        Ok(outcome)
    }

    /// `sh -c SCRIPT` in the sandbox; it must succeed.
    pub(super) fn sh(&self, script: &str) -> anyhow::Result<String> {
        let out = self.sandbox.exec(&["sh", "-c", script]);
        ensure!(
            out.status.success(),
            "in the sandbox, {script:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Writes a file into the work directory (visible inside at the same
    /// path). A settings document (`*.yaml`) is signed: the host runs only
    /// signed settings.
    pub(super) fn write(&self, name: &str, contents: &str) -> anyhow::Result<PathBuf> {
        let path = self.work.join(name);
        std::fs::write(&path, contents).with_context(|| format!("writing {}", path.display()))?;
        if name.ends_with(".yaml") {
            checked(
                std::process::Command::new(&self.host)
                    .arg("sign")
                    .arg(&path)
                    .arg("--key")
                    .arg(self.public_key.with_file_name("policy-host.key")),
                "host sign",
            )?;
        }
        Ok(path)
    }

    pub(super) fn host_argv(
        &self,
        policy: &Path,
        settings: Option<&Path>,
        cache: &str,
    ) -> Vec<String> {
        let mut argv = vec![
            self.host.display().to_string(),
            "run".into(),
            policy.display().to_string(),
        ];
        if let Some(settings) = settings {
            argv.push("--settings".into());
            argv.push(settings.display().to_string());
        }
        argv.extend([
            "--trusted-key".into(),
            self.public_key.display().to_string(),
            "--cache-dir".into(),
            cache.into(),
            "--json".into(),
        ]);
        argv
    }

    /// Creates the unit files of `units` that do not exist yet, in one go,
    /// then reloads systemd. `unit_file` makes a unit's file from its name.
    pub(super) fn install_units(
        &self,
        units: &[String],
        unit_file: fn(&str) -> String,
    ) -> anyhow::Result<()> {
        let mut script = String::from("set -e\n");
        for unit in units {
            script.push_str(&format!(
                "[ -e /etc/systemd/system/{unit}.service ] || cat > /etc/systemd/system/{unit}.service <<'UNIT'\n{}UNIT\n",
                unit_file(unit)
            ));
        }
        script.push_str("systemctl daemon-reload\n");
        let out = self
            .sandbox
            .exec_with_stdin(&["sh", "-s"], script.as_bytes());
        ensure!(
            out.status.success(),
            "creating the units failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        Ok(())
    }

    /// `systemctl enable --now` (or `disable --now`) of every unit, as a script.
    pub(super) fn set_all(units: &[String], running_and_enabled: bool) -> String {
        let verb = if running_and_enabled {
            "enable"
        } else {
            "disable"
        };
        format!("systemctl {verb} --now --quiet -- {}", units.join(" "))
    }

    /// Fails unless every unit is active and enabled.
    pub(super) fn check_converged(&self, units: &[String], who: &str) -> anyhow::Result<()> {
        let list = units.join(" ");
        let out = self.sh(&format!(
            "systemctl is-active -- {list} | grep -cx active; systemctl is-enabled -- {list} | grep -cx enabled; true"
        ))?;
        let counts: Vec<usize> = out
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        ensure!(
            counts == [units.len(), units.len()],
            "after {who}, expected {0} units active and {0} enabled, found {counts:?}",
            units.len()
        );
        Ok(())
    }

    pub(super) fn host_run(&self, spec: &Spec, expect: Expect) -> anyhow::Result<HostRun> {
        let outcome = self.measure(spec)?;
        let mut run = host_checked(&outcome, expect)?;
        run.maxrss_kb = maxrss_kb(&outcome.stderr);
        Ok(run)
    }

    pub(super) fn script_run(&self, spec: &Spec) -> anyhow::Result<f64> {
        let outcome = self.measure(spec)?;
        ensure!(
            outcome.code == Some(0),
            "{:?} exited {:?}: {}",
            spec.argv,
            outcome.code,
            tail(&outcome.stderr, 2000)
        );
        Ok(ms(outcome.ns))
    }
}

/// A host run's report, checked: it succeeded over D-Bus, with the changes
/// and systemctl calls `expect` says.
pub(super) fn host_checked(outcome: &Outcome, expect: Expect) -> anyhow::Result<HostRun> {
    let run = parse_host(outcome)?;
    ensure!(
        outcome.code == Some(0) && run.success,
        "host run exited {:?}: {}\n{}",
        outcome.code,
        outcome.stderr.trim(),
        tail(&outcome.stdout, 2000)
    );
    ensure!(
        run.status_reader == "dbus",
        "host run read status with {}, not over D-Bus: is the sandbox's system bus up?",
        run.status_reader
    );
    ensure!(
        run.changed == expect.changed && run.systemctl_calls == expect.systemctl_calls,
        "host run changed {} resources with {} systemctl calls; expected {} and {}",
        run.changed,
        run.systemctl_calls,
        expect.changed,
        expect.systemctl_calls
    );
    Ok(run)
}
