//! The scale tables: the host against the shell script (and, at the reference size, its variants), no-op and converging, at each N.

use super::*;

impl Bench {
    /// The host and its baselines (the first is the shell script) in turn,
    /// the order rotating each repetition. A no-op comparison starts with one
    /// untimed warm-up of each; a converging one checks after its first
    /// repetition that every side left the units running and enabled.
    pub(super) fn compare(
        &self,
        label: &str,
        units: &[String],
        host: &Spec,
        baselines: &[(&str, Spec)],
        expect: Expect,
        reps: Reps,
    ) -> anyhow::Result<Pair> {
        let converge = expect.changed > 0;
        // At the largest size every side runs under GNU time, which gives
        // the host's peak memory without extra (long) runs.
        let wrap = |spec: &Spec| {
            if units.len() < self.largest() {
                return spec.clone();
            }
            let mut argv: Vec<String> = ["/usr/bin/time", "-f", MAXRSS_FORMAT]
                .map(String::from)
                .to_vec();
            argv.extend(spec.argv.iter().cloned());
            Spec {
                argv,
                ..spec.clone()
            }
        };
        let host = &wrap(host);
        let baselines: Vec<(&str, Spec)> = baselines
            .iter()
            .map(|(name, spec)| (*name, wrap(spec)))
            .collect();
        if !converge {
            self.host_run(host, expect)
                .with_context(|| format!("{label}: warm-up host run"))?;
            for (name, spec) in &baselines {
                self.script_run(spec)
                    .with_context(|| format!("{label}: warm-up {name} run"))?;
            }
        }
        let mut pair = Pair {
            extra: baselines
                .iter()
                .skip(1)
                .map(|(name, _)| (name.to_string(), Vec::new()))
                .collect(),
            ..Pair::default()
        };
        let sides = baselines.len() + 1;
        let started = Instant::now();
        let mut rep = 0;
        while !reps.enough(rep, started.elapsed()) {
            for k in 0..sides {
                let side = (rep + k) % sides;
                if side == 0 {
                    let run = self
                        .host_run(host, expect)
                        .with_context(|| format!("{label}: host run {}", rep + 1))?;
                    ensure!(
                        run.compile_cache == "hit",
                        "{label}: the compile cache was {:?}, not a hit, in a warm run",
                        run.compile_cache
                    );
                    pair.host.push(run);
                } else {
                    let (name, spec) = &baselines[side - 1];
                    let name = *name;
                    let ms = self
                        .script_run(spec)
                        .with_context(|| format!("{label}: {name} run {}", rep + 1))?;
                    if side == 1 {
                        pair.script.push(ms);
                    } else {
                        pair.extra[side - 2].1.push(ms);
                    }
                }
                if rep == 0 && converge {
                    let who = if side == 0 {
                        "host"
                    } else {
                        baselines[side - 1].0
                    };
                    self.check_converged(units, &format!("the first {who} run"))?;
                }
            }
            rep += 1;
            let mut line = format!(
                "{label} {rep}: host {:.1} ms, script {:.1} ms",
                pair.host.last().map_or(f64::NAN, |r| r.wall_ms),
                pair.script.last().copied().unwrap_or(f64::NAN)
            );
            for (name, times) in &pair.extra {
                line.push_str(&format!(
                    ", {name} {:.1} ms",
                    times.last().copied().unwrap_or(f64::NAN)
                ));
            }
            progress(&line);
        }
        Ok(pair)
    }

    /// The baselines: the shell script, and at the reference size also the
    /// script with the host's environment for systemctl and the native loop.
    pub(super) fn baselines(
        &self,
        units: &[String],
        converge: bool,
    ) -> anyhow::Result<Vec<(&'static str, Spec)>> {
        let (file, text, mode) = if converge {
            ("systemctl-converge.sh", tools::CONVERGE_SCRIPT, "converge")
        } else {
            ("systemctl-noop.sh", tools::NOOP_SCRIPT, "noop")
        };
        let script_file = self.write(file, text)?;
        let reset = converge.then(|| Self::set_all(units, false));
        let spec = |argv: Vec<String>| Spec {
            argv,
            reset: reset.clone(),
            ..Spec::default()
        };
        let settings = self.work.join(format!("manifest-{}.yaml", units.len()));
        let mut forced = self.host_argv(&self.manifest_policy, Some(&settings), WARM_CACHE);
        forced.extend(["--provider".into(), "systemctl".into()]);
        let mut baselines = vec![
            ("script", spec(script_argv(&script_file, units))),
            (HOST_SYSTEMCTL, spec(forced)),
        ];
        if converge {
            let mut settle_off = self.host_argv(&self.manifest_policy, Some(&settings), WARM_CACHE);
            settle_off.extend(["--settle".into(), "0".into()]);
            baselines.push((HOST_SETTLE_OFF, spec(settle_off)));
        }
        if units.len() == REFERENCE_N && !converge {
            let mut clean = vec![
                "env".to_owned(),
                "-i".into(),
                format!("PATH={STANDARD_PATH}"),
                "LANG=C".into(),
                "LC_ALL=C".into(),
            ];
            clean.extend(script_argv(&script_file, units));
            baselines.push((SCRIPT_LANG_C, spec(clean)));
            for (name, threads) in [(NATIVE_LOOP, false), (NATIVE_LOOP_THREADS, true)] {
                let mut native = vec![self.agent.display().to_string(), "__calls".into()];
                if threads {
                    native.push("--threads".into());
                }
                native.push(mode.into());
                native.extend(units.iter().cloned());
                baselines.push((name, spec(native)));
            }
        }
        let what_ifs: &[(&str, &str, &str)] = if converge {
            &[
                (
                    WHAT_IF_NO_RELOAD,
                    "what-if-converge-no-reload.sh",
                    tools::WHAT_IF_CONVERGE_NO_RELOAD,
                ),
                (
                    WHAT_IF_BATCHED_CONVERGE,
                    "what-if-batched-converge.sh",
                    tools::WHAT_IF_BATCHED_CONVERGE,
                ),
            ]
        } else {
            &[(
                WHAT_IF_BATCHED_NOOP,
                "what-if-batched-noop.sh",
                tools::WHAT_IF_BATCHED_NOOP,
            )]
        };
        for (name, file, text) in what_ifs {
            let file = self.write(file, text)?;
            baselines.push((name, spec(script_argv(&file, units))));
        }
        Ok(baselines)
    }

    pub(super) fn noop_pair(&self, units: &[String], settings: &Path) -> anyhow::Result<Pair> {
        self.sh(&Self::set_all(units, true))?;
        let n = units.len();
        let host = Spec {
            argv: self.host_argv(&self.manifest_policy, Some(settings), WARM_CACHE),
            ..Spec::default()
        };
        // Over D-Bus, with no unit file changed and nothing to change: no
        // reload, and no systemctl process at all.
        let expect = Expect {
            changed: 0,
            systemctl_calls: 0,
        };
        self.compare(
            &format!("N={n} no-op"),
            units,
            &host,
            &self.baselines(units, false)?,
            expect,
            self.plan.reps(n, false),
        )
    }

    pub(super) fn converge_pair(&self, units: &[String], settings: &Path) -> anyhow::Result<Pair> {
        let n = units.len();
        let host = Spec {
            argv: self.host_argv(&self.manifest_policy, Some(settings), WARM_CACHE),
            reset: Some(Self::set_all(units, false)),
            ..Spec::default()
        };
        let expect = Expect {
            changed: n,
            systemctl_calls: CONVERGE_PROCESSES,
        };
        self.compare(
            &format!("N={n} converge"),
            units,
            &host,
            &self.baselines(units, true)?,
            expect,
            self.plan.reps(n, true),
        )
    }
}
