//! Slow units: converging N units whose starts take a while, the host against the shell script and its peers.

use super::*;

impl Bench {
    /// Slow units, measured last (their files and running processes are then
    /// no part of the other tables): converging N units whose starts take
    /// [`SLOW_START`] s, the host against the shell script and, at the
    /// reference size, Ansible and Puppet, in turn. A failure here is
    /// reported with the results instead of losing the run.
    pub(super) fn slow_units(&self) -> Slow {
        let mut slow = Slow::default();
        for &(n, reps) in &self.plan.slow {
            match self.slow_size(n, reps) {
                Ok(converge) => slow.sizes.push(SlowScale { n, converge }),
                Err(err) => {
                    eprintln!("  slow units, N = {n}: {err:#}");
                    slow.error = Some(format!("N = {n}: {err:#}"));
                    break;
                }
            }
        }
        slow
    }

    pub(super) fn slow_size(&self, n: usize, reps: Reps) -> anyhow::Result<Pair> {
        step(&format!(
            "Slow units (starts of {SLOW_START} s): N = {n}, converge"
        ));
        let units = unit_names(SLOW_PREFIX, n);
        self.install_units(&units, slow_service)?;
        let settings = self.write(&format!("manifest-slow-{n}.yaml"), &manifest(&units))?;
        let script = self.write("systemctl-converge.sh", tools::CONVERGE_SCRIPT)?;
        let spec = |argv: Vec<String>| Spec {
            argv,
            reset: Some(Self::set_all(&units, false)),
            ..Spec::default()
        };
        let host = spec(self.host_argv(&self.manifest_policy, Some(&settings), WARM_CACHE));
        let mut baselines = vec![("script", spec(script_argv(&script, &units)))];
        if n == REFERENCE_N && self.plan.tools {
            let module = tools::ansible_systemd_module();
            let ansible = self.ansible_argv(module, &units, SLOW_PREFIX)?;
            // Puppet says "changes made" with exit code 2; the comparison
            // wants 0 for success.
            let mut puppet = vec![
                "sh".to_owned(),
                "-c".into(),
                "\"$@\"; [ $? -eq 2 ]".into(),
                "puppet".into(),
            ];
            puppet.extend(self.puppet_argv(&units, SLOW_PREFIX)?);
            baselines.push((ANSIBLE, spec(ansible)));
            baselines.push((PUPPET, spec(puppet)));
        }
        let expect = Expect {
            changed: n,
            systemctl_calls: CONVERGE_PROCESSES,
        };
        self.compare(
            &format!("slow N={n} converge"),
            &units,
            &host,
            &baselines,
            expect,
            reps,
        )
    }
}
