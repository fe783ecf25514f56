//! Cold and warm starts of the example policy, and the time to the first provider call.

use super::*;

impl Bench {
    /// Cold and warm starts of the example policy (converged, so each run
    /// makes six status queries over D-Bus and no reload), the time to its
    /// first provider call, and a warm run of a policy with nothing to
    /// manage. The first call is timed with `--provider systemctl`, whose
    /// first call is a process the shim sees (the design's reload); over
    /// D-Bus the host connects to the bus at that same moment.
    pub(super) fn startup(&self) -> anyhow::Result<Startup> {
        step("Start-up: the example policy, cold and warm");
        for unit in EXAMPLE_UNITS {
            self.sandbox.install_unit(unit, &sleep_service(unit));
        }
        let example = |cache: &str, first_call: bool| Spec {
            argv: {
                let mut argv = self.host_argv(&self.example_policy, None, cache);
                if first_call {
                    argv.extend(["--provider".into(), "systemctl".into()]);
                }
                argv
            },
            reset: (cache == COLD_CACHE).then(|| format!("rm -rf {COLD_CACHE}")),
            path: first_call.then(|| format!("{}:{STANDARD_PATH}", agent::SHIM_DIR)),
            first_call,
            poll_hwm: false,
        };
        // Converge once: from then on every run changes nothing.
        let converge = self.measure(&example(WARM_CACHE, false))?;
        let first = parse_host(&converge)?;
        ensure!(
            converge.code == Some(0) && first.success,
            "the example policy did not converge: {}\n{}",
            converge.stderr.trim(),
            tail(&converge.stdout, 2000)
        );
        let expect = Expect {
            changed: 0,
            systemctl_calls: 0,
        };
        let empty_settings = self.write("empty.yaml", "# no services\n")?;
        let empty = Spec {
            argv: self.host_argv(&self.manifest_policy, Some(&empty_settings), WARM_CACHE),
            ..Spec::default()
        };
        let empty_expect = Expect {
            changed: 0,
            systemctl_calls: 0,
        };
        self.host_run(&empty, empty_expect)?;
        let shim = Spec {
            argv: vec![agent::shim_path().display().to_string(), "--version".into()],
            first_call: true,
            ..Spec::default()
        };

        let mut startup = Startup::default();
        let reps = self.plan.startup_reps;
        for rep in 0..reps {
            let cold = self.host_run(&example(COLD_CACHE, false), expect)?;
            ensure!(
                cold.compile_cache == "miss",
                "a cold run was a cache {}",
                cold.compile_cache
            );
            startup.cold.push(cold);
            let warm = self.host_run(&example(WARM_CACHE, false), expect)?;
            ensure!(
                warm.compile_cache == "hit",
                "a warm run was a cache {}",
                warm.compile_cache
            );
            startup.warm.push(warm);
            for (cache, into) in [
                (COLD_CACHE, &mut startup.cold_first_call_ms),
                (WARM_CACHE, &mut startup.warm_first_call_ms),
            ] {
                let outcome = self.measure(&example(cache, true))?;
                ensure!(
                    outcome.code == Some(0),
                    "a run through the shim failed: {}",
                    outcome.stderr.trim()
                );
                let at = outcome
                    .first_call_ns
                    .context("the systemctl shim was never called")?;
                into.push(ms(at));
            }
            startup
                .empty_warm
                .push(self.host_run(&empty, empty_expect)?);
            let shim_outcome = self.measure(&shim)?;
            startup.shim_ms.push(ms(shim_outcome
                .first_call_ns
                .context("the shim wrote no time")?));
            progress(&format!(
                "start-up {}/{reps}: cold {:.1} ms, warm {:.1} ms, to first call cold {:.1} ms warm {:.1} ms, empty policy {:.1} ms",
                rep + 1,
                startup.cold.last().map_or(f64::NAN, |r| r.wall_ms),
                startup.warm.last().map_or(f64::NAN, |r| r.wall_ms),
                startup.cold_first_call_ms.last().copied().unwrap_or(f64::NAN),
                startup.warm_first_call_ms.last().copied().unwrap_or(f64::NAN),
                startup.empty_warm.last().map_or(f64::NAN, |r| r.wall_ms),
            ));
        }
        Ok(startup)
    }
}
