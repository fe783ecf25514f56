//! Ansible and Puppet managing the same units, no-op and converge.

use super::*;

impl Bench {
    /// Ansible and Puppet on the same units, no-op and converge.
    pub(super) fn tools(&self, units: &[String]) -> anyhow::Result<ToolRuns> {
        let n = units.len();
        step(&format!("Ansible and Puppet at N = {n}"));
        let module = tools::ansible_systemd_module();
        let ansible = self.ansible_argv(module, units, FAST_PREFIX)?;
        let puppet = self.puppet_argv(units, FAST_PREFIX)?;
        let mut runs = ToolRuns {
            n,
            ansible_version: tools::version_of("ansible-playbook", &["--version"])
                .unwrap_or_default(),
            ansible_module: module.to_owned(),
            puppet_version: tools::version_of("puppet", &["--version"]).unwrap_or_default(),
            ..ToolRuns::default()
        };
        // (name, argv, exit codes: no-op, converge)
        for (name, argv, codes) in [("ansible", &ansible, [0, 0]), ("puppet", &puppet, [0, 2])] {
            let mut result = ToolRun::default();
            for converge in [false, true] {
                let spec = Spec {
                    argv: argv.clone(),
                    reset: Some(Self::set_all(units, !converge)),
                    ..Spec::default()
                };
                let expected = codes[usize::from(converge)];
                let label = format!("{name} {}", if converge { "converge" } else { "no-op" });
                let mut times = Vec::new();
                // No-op: one warm-up, then the repetitions. Converge: the
                // first repetition is checked instead.
                let first = usize::from(converge);
                let reps = if converge {
                    self.plan.tool_converge_reps
                } else {
                    self.plan.tool_reps
                };
                for rep in first..=reps {
                    let outcome = self.measure(&spec)?;
                    if outcome.code != Some(expected) {
                        result.error = Some(format!(
                            "{label} exited {:?}, expected {expected}: {}{}",
                            outcome.code,
                            tail(&outcome.stdout, 1500),
                            tail(&outcome.stderr, 1500)
                        ));
                        break;
                    }
                    if rep == first {
                        self.check_converged(units, &label)?;
                    }
                    if rep > 0 {
                        times.push(ms(outcome.ns));
                    }
                    progress(&format!(
                        "{label} {}: {:.0} ms",
                        if rep == 0 {
                            "warm-up".to_owned()
                        } else {
                            format!("{rep}/{reps}")
                        },
                        ms(outcome.ns)
                    ));
                }
                if result.error.is_some() {
                    eprintln!("  {}", result.error.as_deref().unwrap_or_default());
                    break;
                }
                if converge {
                    result.converge = times;
                } else {
                    result.noop = times;
                }
            }
            match name {
                "ansible" => runs.ansible = result,
                _ => runs.puppet = result,
            }
        }
        // Leave the units as the next measurements expect them.
        self.sh(&Self::set_all(units, true))?;
        Ok(runs)
    }

    /// `ansible-playbook` making `units` running and enabled with Ansible's
    /// systemd `module`; `tag` tells its variables file apart.
    pub(super) fn ansible_argv(
        &self,
        module: &str,
        units: &[String],
        tag: &str,
    ) -> anyhow::Result<Vec<String>> {
        let playbook = self.write("playbook.yml", &tools::playbook(module))?;
        let vars = self.write(&format!("units-{tag}.json"), &tools::ansible_vars(units))?;
        Ok(vec![
            "ansible-playbook".to_owned(),
            "-i".into(),
            "localhost,".into(),
            "-c".into(),
            "local".into(),
            "-e".into(),
            "ansible_python_interpreter=/usr/bin/python3".into(),
            "-e".into(),
            format!("@{}", vars.display()),
            playbook.display().to_string(),
        ])
    }

    /// `puppet apply --detailed-exitcodes` of the manifest for `units`; `tag`
    /// tells its file apart.
    pub(super) fn puppet_argv(&self, units: &[String], tag: &str) -> anyhow::Result<Vec<String>> {
        let manifest = self.write(
            &format!("manifest-{tag}.pp"),
            &tools::puppet_manifest(units),
        )?;
        Ok(vec![
            "puppet".to_owned(),
            "apply".into(),
            "--detailed-exitcodes".into(),
            manifest.display().to_string(),
        ])
    }
}
