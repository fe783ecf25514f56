//! `--strace`: syscall timelines of warm runs, relative to the host's exec.

use super::*;

impl Bench {
    /// `--strace`: syscall timelines of warm runs, relative to the host's exec.
    pub(super) fn trace(&self) -> anyhow::Result<()> {
        for unit in EXAMPLE_UNITS {
            self.sandbox.install_unit(unit, &sleep_service(unit));
        }
        let units = unit_names(FAST_PREFIX, 10);
        self.install_units(&units, sleep_service)?;
        self.sh(&Self::set_all(&units, true))?;
        let settings = self.write("manifest-10.yaml", &manifest(&units))?;
        let runs = [
            (
                "the example policy (converged: 6 queries over D-Bus, no reload)",
                self.host_argv(&self.example_policy, None, WARM_CACHE),
            ),
            (
                "the manifest policy, N = 10, no-op",
                self.host_argv(&self.manifest_policy, Some(&settings), WARM_CACHE),
            ),
        ];
        for (label, argv) in runs {
            // Converge, and warm the compile cache.
            for _ in 0..2 {
                self.measure(&Spec {
                    argv: argv.clone(),
                    ..Spec::default()
                })?;
            }
            let log = "/run/bench-strace.txt";
            let mut traced: Vec<String> = [
                "strace",
                "-f",
                "-ttt",
                "-e",
                "trace=execve,clone,clone3,clock_nanosleep,wait4,exit,exit_group",
                "-o",
                log,
            ]
            .map(String::from)
            .to_vec();
            traced.extend(argv);
            let outcome = self.measure(&Spec {
                argv: traced,
                ..Spec::default()
            })?;
            ensure!(
                outcome.code == Some(0),
                "traced run failed: {}",
                tail(&outcome.stderr, 2000)
            );
            step(&format!(
                "strace -f of a warm run of {label}: {:.1} ms under strace",
                ms(outcome.ns)
            ));
            print_timeline(&self.sh(&format!("cat {log}"))?);
        }
        Ok(())
    }
}
