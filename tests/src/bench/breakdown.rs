//! `--profile`: where a converging run's time goes (issue 46). At N = 10,
//! 100 and 300 (`--quick`: 10 and 100): converging runs of the host with
//! `--settle 0` and the default `--jobs`, their JSON reports summed per
//! operation and lined up with systemd's own timestamps of the units'
//! starts; systemd's batch (one `systemctl start` and one `systemctl
//! enable` naming every unit) timed command by command; systemd's own
//! reading of every unit a converging run must make first (one `systemctl
//! is-active` and one `is-enabled` naming all, stopped and disabled); a
//! no-op run beside
//! one `systemctl show` of every unit; and, at the reference size, `enable`
//! one unit at a time against one `enable` of all.
//!
//! A start's `duration_ms` runs from its submission to its job's end, so
//! the starts overlap; every other call is one at a time. The timeline
//! places the run on CLOCK_MONOTONIC, systemd's clock for
//! `InactiveExitTimestampMonotonic` (a unit's start job began running) and
//! `ActiveEnterTimestampMonotonic` (it ended), from the agent's spawn.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::stats::median;
use super::*;

/// The properties a no-op run reads of each unit, for the `systemctl show`
/// it is compared with.
const SHOW_PROPERTIES: &str = "Id,ActiveState,UnitFileState,NeedDaemonReload,DropInPaths";

/// One operation's calls in one run.
#[derive(Debug, Clone, Copy, Default)]
struct OpSum {
    count: usize,
    sum_ms: f64,
    max_ms: f64,
    /// Of `sum_ms`, the calls after the last start's submission (the
    /// second phase: awaiting each job, enabling, verifying).
    late_ms: f64,
}

/// What one converging host run's report and systemd's timestamps say.
#[derive(Debug, Clone, Default)]
struct Profiled {
    wall_ms: f64,
    summary_ms: f64,
    compile_ms: f64,
    ops: BTreeMap<String, OpSum>,
    /// Each operation's count and where its calls lie in the order.
    sequence: String,
    /// Σ `duration_ms` of the calls before the first start (one at a time).
    before_first_start_ms: f64,
    /// Σ `duration_ms` of every call but the starts (one at a time).
    serial_ms: f64,
    /// From spawn: systemd began the first start job, the last one, and the
    /// last unit became active (ms).
    first_start_ms: f64,
    last_start_ms: f64,
    last_active_ms: f64,
}

/// Everything measured at one size.
#[derive(Debug, Clone, Default)]
struct AtSize {
    n: usize,
    runs: Vec<Profiled>,
    start_batch: Vec<f64>,
    enable_batch: Vec<f64>,
    reload: Vec<f64>,
    /// systemd reading every unit as a converging run must before it
    /// changes anything (units stopped and disabled): one `is-active`
    /// and one `is-enabled` naming all.
    read_active: Vec<f64>,
    read_enabled: Vec<f64>,
    noop_host: Vec<f64>,
    noop_show: Vec<f64>,
    empty_host: Vec<f64>,
    /// At the reference size: (what, times).
    enables: Vec<(&'static str, Vec<f64>)>,
}

impl AtSize {
    fn wall(&self) -> Vec<f64> {
        self.runs.iter().map(|r| r.wall_ms).collect()
    }

    fn of(&self, f: impl Fn(&Profiled) -> f64) -> f64 {
        median(&self.runs.iter().map(f).collect::<Vec<_>>())
    }

    /// Count, median Σ, median Σ before and after the last start, largest
    /// call.
    fn op(&self, name: &str) -> (usize, f64, f64, f64, f64) {
        let of = |f: fn(&OpSum) -> f64| -> f64 {
            median(
                &self
                    .runs
                    .iter()
                    .map(|r| r.ops.get(name).map_or(0.0, f))
                    .collect::<Vec<_>>(),
            )
        };
        let count = self
            .runs
            .first()
            .and_then(|r| r.ops.get(name))
            .map_or(0, |o| o.count);
        let max = self
            .runs
            .iter()
            .filter_map(|r| r.ops.get(name))
            .map(|o| o.max_ms)
            .fold(0.0, f64::max);
        (
            count,
            of(|o| o.sum_ms),
            of(|o| o.sum_ms - o.late_ms),
            of(|o| o.late_ms),
            max,
        )
    }

    fn batch(&self) -> f64 {
        median(&self.start_batch) + median(&self.enable_batch)
    }

    /// systemd's own reading of every unit, stopped and disabled.
    fn reading(&self) -> f64 {
        median(&self.read_active) + median(&self.read_enabled)
    }
}

impl Bench {
    /// `--profile`: every figure, as Markdown.
    pub(super) fn profile(&self) -> anyhow::Result<String> {
        let reps = self.plan.profile_reps;
        let mut sizes = Vec::new();
        for &n in &self.plan.sizes {
            step(&format!("Profile: converging N = {n} units"));
            let units = unit_names(FAST_PREFIX, n);
            self.install_units(&units, sleep_service)?;
            let settings = self.write(&format!("manifest-{n}.yaml"), &manifest(&units))?;
            sizes.push(self.profile_size(&units, &settings, reps)?);
        }
        Ok(render(&sizes, reps))
    }

    fn profile_size(
        &self,
        units: &[String],
        settings: &Path,
        reps: usize,
    ) -> anyhow::Result<AtSize> {
        let n = units.len();
        let mut argv = self.host_argv(&self.manifest_policy, Some(settings), WARM_CACHE);
        argv.extend(["--settle".into(), "0".into()]);
        let host = Spec {
            argv: argv.clone(),
            reset: Some(Self::set_all(units, false)),
            ..Spec::default()
        };
        let expect = Expect {
            changed: n,
            systemctl_calls: CONVERGE_PROCESSES,
        };
        // Untimed: fills the compile cache, checks the run converges.
        self.host_run(&host, expect)?;
        self.check_converged(units, "the first profiled host run")?;
        let systemctl = |verb: &[&str], reset: Option<String>| Spec {
            argv: ["systemctl"]
                .iter()
                .chain(verb)
                .map(|s| s.to_string())
                .chain(std::iter::once("--".to_owned()))
                .chain(units.iter().cloned())
                .collect(),
            reset,
            ..Spec::default()
        };
        let start_batch = systemctl(&["start"], Some(Self::set_all(units, false)));
        let enable_batch = systemctl(&["enable", "--quiet"], None);
        let reload = Spec {
            argv: vec!["systemctl".into(), "daemon-reload".into()],
            ..Spec::default()
        };
        let read_active = systemctl(&["is-active"], Some(Self::set_all(units, false)));
        let read_enabled = systemctl(&["is-enabled"], None);
        let mut at = AtSize {
            n,
            ..AtSize::default()
        };
        for rep in 0..reps {
            // systemd's own reading, first: its reset leaves every unit
            // stopped and disabled, and each run below resets them again.
            at.read_active
                .push(self.read_run(&read_active, n, "inactive")?);
            at.read_enabled
                .push(self.read_run(&read_enabled, n, "disabled")?);
            // The order rotates, as in the other comparisons.
            for k in 0..2 {
                if (rep + k) % 2 == 0 {
                    let outcome = self.measure(&host)?;
                    setup::host_checked(&outcome, expect)?;
                    let profiled = self.profiled(&outcome, units)?;
                    progress(&format!(
                        "N={n} host converge {}: {:.1} ms ({})",
                        rep + 1,
                        profiled.wall_ms,
                        profiled.sequence
                    ));
                    at.runs.push(profiled);
                } else {
                    at.start_batch.push(self.script_run(&start_batch)?);
                    at.enable_batch.push(self.script_run(&enable_batch)?);
                    progress(&format!(
                        "N={n} systemd batch {}: start {:.1} ms, enable {:.1} ms",
                        rep + 1,
                        at.start_batch.last().copied().unwrap_or(f64::NAN),
                        at.enable_batch.last().copied().unwrap_or(f64::NAN)
                    ));
                }
                self.check_converged(units, "a profiled run")?;
            }
            at.reload.push(self.script_run(&reload)?);
        }
        // No-op: the units are running and enabled now.
        let noop = Spec {
            argv: self.host_argv(&self.manifest_policy, Some(settings), WARM_CACHE),
            ..Spec::default()
        };
        let show = systemctl(&["show", &format!("--property={SHOW_PROPERTIES}")], None);
        let empty_settings = self.write("empty.yaml", "# no services\n")?;
        let empty = Spec {
            argv: self.host_argv(&self.manifest_policy, Some(&empty_settings), WARM_CACHE),
            ..Spec::default()
        };
        let quiet = Expect {
            changed: 0,
            systemctl_calls: 0,
        };
        self.host_run(&noop, quiet)?;
        for _ in 0..reps {
            at.noop_host.push(self.host_run(&noop, quiet)?.wall_ms);
            at.noop_show.push(self.script_run(&show)?);
            at.empty_host.push(self.host_run(&empty, quiet)?.wall_ms);
        }
        progress(&format!(
            "N={n} no-op: host {:.1} ms, systemctl show {:.1} ms, empty manifest {:.1} ms",
            median(&at.noop_host),
            median(&at.noop_show),
            median(&at.empty_host)
        ));
        if n == REFERENCE_N {
            at.enables = self.enables(units, reps.min(2))?;
        }
        Ok(at)
    }

    /// A `systemctl is-active` or `is-enabled` naming all `n` units, timed,
    /// checked to have said `word` of each (it exits non-zero for them).
    fn read_run(&self, spec: &Spec, n: usize, word: &str) -> anyhow::Result<f64> {
        let outcome = self.measure(spec)?;
        let said = outcome.stdout.lines().filter(|l| *l == word).count();
        ensure!(
            said == n,
            "{:?} said {word} of {said} units, not {n}: {}",
            spec.argv,
            tail(&outcome.stdout, 500)
        );
        Ok(ms(outcome.ns))
    }

    /// `systemctl enable` of one unit after the other against one `enable`
    /// of all, with and without its daemon-reload; from disabled units.
    fn enables(
        &self,
        units: &[String],
        reps: usize,
    ) -> anyhow::Result<Vec<(&'static str, Vec<f64>)>> {
        let list = units.join(" ");
        let disable = format!("systemctl disable --quiet -- {list}");
        let script = |text: String| Spec {
            argv: vec!["sh".into(), "-c".into(), text],
            reset: Some(disable.clone()),
            ..Spec::default()
        };
        let kinds: [(&'static str, Spec); 4] = [
            (
                "`systemctl enable U` one unit at a time",
                script(format!(
                    "for u in {list}; do systemctl enable --quiet -- $u || exit 1; done"
                )),
            ),
            (
                "one `systemctl enable` of all units",
                script(format!("systemctl enable --quiet -- {list}")),
            ),
            (
                "`systemctl enable --no-reload U` one unit at a time, then one `daemon-reload`",
                script(format!(
                    "for u in {list}; do systemctl enable --quiet --no-reload -- $u || exit 1; done; systemctl daemon-reload"
                )),
            ),
            (
                "one `systemctl enable --no-reload` of all units",
                script(format!("systemctl enable --quiet --no-reload -- {list}")),
            ),
        ];
        let mut times: Vec<(&'static str, Vec<f64>)> =
            kinds.iter().map(|(what, _)| (*what, Vec::new())).collect();
        for rep in 0..reps {
            for (k, (what, spec)) in kinds.iter().enumerate() {
                let ms = self.script_run(spec)?;
                progress(&format!("{what} {}: {ms:.1} ms", rep + 1));
                times[k].1.push(ms);
            }
        }
        // Leave them as the other measurements expect them.
        self.sh(&Self::set_all(units, true))?;
        Ok(times)
    }

    /// One converging run's report, and systemd's timestamps of its starts.
    fn profiled(&self, outcome: &Outcome, units: &[String]) -> anyhow::Result<Profiled> {
        let doc: Value = serde_json::from_str(&outcome.stdout).context("the host's report")?;
        let mut profiled = Profiled {
            wall_ms: ms(outcome.ns),
            summary_ms: doc["summary"]["duration_ms"].as_f64().unwrap_or(f64::NAN),
            ..Profiled::default()
        };
        let mut compiles = Vec::new();
        collect(&doc, "compile", &mut compiles);
        profiled.compile_ms = compiles
            .first()
            .and_then(|c| c.get("duration_ms"))
            .and_then(Value::as_f64)
            .unwrap_or(f64::NAN);
        let mut lists = Vec::new();
        collect(&doc, "calls", &mut lists);
        let mut sequence: Vec<String> = Vec::new();
        let mut started = false;
        let calls: Vec<&Value> = lists
            .iter()
            .filter_map(|c| c.as_array())
            .flatten()
            .collect();
        let last_start = calls
            .iter()
            .rposition(|c| c["operation"].as_str() == Some("start"))
            .unwrap_or(0);
        for (i, call) in calls.into_iter().enumerate() {
            let operation = call["operation"].as_str().unwrap_or("?").to_owned();
            let duration = call["duration_ms"].as_f64().unwrap_or(0.0);
            let sum = profiled.ops.entry(operation.clone()).or_default();
            sum.count += 1;
            sum.sum_ms += duration;
            sum.max_ms = sum.max_ms.max(duration);
            if i > last_start {
                sum.late_ms += duration;
            }
            if operation == "start" {
                started = true;
            } else {
                profiled.serial_ms += duration;
                if !started {
                    profiled.before_first_start_ms += duration;
                }
            }
            sequence.push(operation);
        }
        profiled.sequence = describe_sequence(&sequence);
        let shown = self.sh(&format!(
            "systemctl show --property=InactiveExitTimestampMonotonic,ActiveEnterTimestampMonotonic -- {}",
            units.join(" ")
        ))?;
        let stamps = |key: &str| -> Vec<f64> {
            shown
                .lines()
                .filter_map(|l| l.strip_prefix(key)?.strip_prefix('='))
                .filter_map(|v| v.parse::<u64>().ok())
                .map(|us| us as f64 / 1e3 - outcome.spawned_mono_us as f64 / 1e3)
                .collect()
        };
        let exits = stamps("InactiveExitTimestampMonotonic");
        let actives = stamps("ActiveEnterTimestampMonotonic");
        ensure!(
            exits.len() == units.len() && actives.len() == units.len(),
            "systemctl show gave {} and {} timestamps for {} units",
            exits.len(),
            actives.len(),
            units.len()
        );
        profiled.first_start_ms = exits.iter().copied().fold(f64::INFINITY, f64::min);
        profiled.last_start_ms = exits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        profiled.last_active_ms = actives.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Ok(profiled)
    }
}

/// `status ×300 (calls 1–500), daemon-reload ×2 (calls 2, 502), …`: each
/// operation in the order of its first call, with where its calls lie.
fn describe_sequence(operations: &[String]) -> String {
    let mut seen: Vec<(&str, Vec<usize>)> = Vec::new();
    for (i, op) in operations.iter().enumerate() {
        match seen.iter_mut().find(|(name, _)| *name == op.as_str()) {
            Some((_, at)) => at.push(i + 1),
            None => seen.push((op, vec![i + 1])),
        }
    }
    seen.iter()
        .map(|(op, at)| {
            let place = match at.as_slice() {
                [one] => format!("call {one}"),
                [a, b] => format!("calls {a}, {b}"),
                [first, .., last] => format!("calls {first}–{last}"),
                [] => String::new(),
            };
            format!("{op} ×{} ({place})", at.len())
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn render(sizes: &[AtSize], reps: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## Where converge time goes (`--profile`)\n\n\
         Converging runs of the manifest policy (`--settle 0`, default `--jobs`, over D-Bus, warm \
         cache) from every unit stopped and disabled; {reps} runs per size, in turn with \
         systemd's batch (one `systemctl start`, then one `systemctl enable`, naming every unit, \
         each timed alone). Medians of the runs (ms).\n"
    );
    let _ = writeln!(
        out,
        "### Per operation (the host's JSON report)\n\n\
         | N | operation | count | Σ duration_ms | mean | max | Σ before the last start | Σ after |\n\
         |---:|---|---:|---:|---:|---:|---:|---:|"
    );
    for at in sizes {
        let mut names: Vec<&String> = at.runs.iter().flat_map(|r| r.ops.keys()).collect();
        names.sort();
        names.dedup();
        for name in names {
            let (count, sum, early, late, max) = at.op(name);
            let _ = writeln!(
                out,
                "| {} | {name} | {count} | {sum:.1} | {:.2} | {max:.1} | {early:.1} | {late:.1} |",
                at.n,
                sum / count.max(1) as f64
            );
        }
    }
    let _ = writeln!(
        out,
        "\nA start's `duration_ms` runs from its submission to its job's end: the starts overlap, \
         their sum is not time spent one after the other.\n"
    );
    let _ = writeln!(out, "### The run, against systemd's batch\n");
    let header: String = sizes.iter().map(|a| format!(" N={} |", a.n)).collect();
    let rule: String = sizes.iter().map(|_| "---:|").collect();
    let _ = writeln!(out, "| |{header}\n|---|{rule}");
    let row = |out: &mut String, what: &str, f: &dyn Fn(&AtSize) -> String| {
        let cells: String = sizes.iter().map(|a| format!(" {} |", f(a))).collect();
        let _ = writeln!(out, "| {what} |{cells}");
    };
    let f1 = |v: f64| format!("{v:.1}");
    row(&mut out, "host converge, spawn to exit", &|a: &AtSize| {
        f1(median(&a.wall()))
    });
    row(&mut out, "… `summary.duration_ms`", &|a: &AtSize| {
        f1(a.of(|r| r.summary_ms))
    });
    row(
        &mut out,
        "… `compile.duration_ms` (cache load, link)",
        &|a: &AtSize| f1(a.of(|r| r.compile_ms)),
    );
    row(
        &mut out,
        "… Σ calls one at a time (all but the starts)",
        &|a: &AtSize| f1(a.of(|r| r.serial_ms)),
    );
    row(
        &mut out,
        "… of which before the first start (a status, the first reload)",
        &|a: &AtSize| f1(a.of(|r| r.before_first_start_ms)),
    );
    row(
        &mut out,
        "… outside them (spawn to exit − Σ: start-up, the starts' submissions, WebAssembly)",
        &|a: &AtSize| f1(a.of(|r| r.wall_ms - r.serial_ms)),
    );
    row(
        &mut out,
        "spawn → systemd began the first start",
        &|a: &AtSize| f1(a.of(|r| r.first_start_ms)),
    );
    row(
        &mut out,
        "spawn → systemd began the last start",
        &|a: &AtSize| f1(a.of(|r| r.last_start_ms)),
    );
    row(&mut out, "spawn → the last unit active", &|a: &AtSize| {
        f1(a.of(|r| r.last_active_ms))
    });
    row(&mut out, "the last unit active → exit", &|a: &AtSize| {
        f1(a.of(|r| r.wall_ms - r.last_active_ms))
    });
    row(
        &mut out,
        "systemd: one `systemctl start` of all",
        &|a: &AtSize| f1(median(&a.start_batch)),
    );
    row(
        &mut out,
        "systemd: one `systemctl enable` of all (its reload included)",
        &|a: &AtSize| f1(median(&a.enable_batch)),
    );
    row(
        &mut out,
        "systemd: one `systemctl daemon-reload`",
        &|a: &AtSize| f1(median(&a.reload)),
    );
    row(
        &mut out,
        "systemd's batch (start + enable)",
        &|a: &AtSize| f1(a.batch()),
    );
    row(&mut out, "**host / batch**", &|a: &AtSize| {
        format!("**{:.2}×**", median(&a.wall()) / a.batch())
    });
    row(
        &mut out,
        "systemd: one `systemctl is-active` of all, stopped",
        &|a: &AtSize| f1(median(&a.read_active)),
    );
    row(
        &mut out,
        "systemd: one `systemctl is-enabled` of all, disabled",
        &|a: &AtSize| f1(median(&a.read_enabled)),
    );
    row(
        &mut out,
        "host / (batch + systemd's reading of every unit)",
        &|a: &AtSize| format!("{:.2}×", median(&a.wall()) / (a.batch() + a.reading())),
    );
    row(&mut out, "no-op: host, spawn to exit", &|a: &AtSize| {
        f1(median(&a.noop_host))
    });
    row(
        &mut out,
        &format!("no-op: one `systemctl show --property={SHOW_PROPERTIES}` of all"),
        &|a: &AtSize| f1(median(&a.noop_show)),
    );
    row(
        &mut out,
        "no-op: host with an empty manifest (its fixed start-up)",
        &|a: &AtSize| f1(median(&a.empty_host)),
    );
    row(
        &mut out,
        "**no-op / (show + fixed start-up)**",
        &|a: &AtSize| {
            format!(
                "**{:.2}×**",
                median(&a.noop_host) / (median(&a.noop_show) + median(&a.empty_host))
            )
        },
    );
    let _ = writeln!(out);
    if let Some(first) = sizes.iter().find_map(|a| a.runs.first()) {
        let _ = writeln!(out, "The calls' order (first run): {}.\n", first.sequence);
    }
    for at in sizes.iter().filter(|a| !a.enables.is_empty()) {
        let _ = writeln!(
            out,
            "### `enable` one unit at a time or all at once, N = {}\n\n\
             From the units disabled (running); {} runs each, in turn.\n\n\
             | | median | per unit |\n|---|---:|---:|",
            at.n,
            at.enables.first().map_or(0, |(_, t)| t.len())
        );
        for (what, times) in &at.enables {
            let m = median(times);
            let _ = writeln!(out, "| {what} | {m:.1} | {:.2} |", m / at.n as f64);
        }
        let (count, sum, _, _, _) = at.op("enable");
        let _ = writeln!(
            out,
            "| the host's `EnableUnitFiles` calls over D-Bus (Σ `duration_ms`, from its converging runs) | {sum:.1} | {:.2} |\n",
            sum / count.max(1) as f64
        );
    }
    out
}
