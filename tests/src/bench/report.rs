//! The measurements, the tables made of them, and the targets checked.

use std::fmt::Write as _;
use std::time::Duration;

use super::machine::Machine;
use super::stats::{median, paired_ratios, Stats};
use super::{Plan, REFERENCE_N};

/// The unit counts of a full run.
pub(super) const SCALE_SIZES_FULL: [usize; 3] = [10, 100, 300];

/// What the bench read from one `host run --json`.
#[derive(Debug, Clone, Default)]
pub(super) struct HostRun {
    /// Spawn to exit, measured by the agent.
    pub wall_ms: f64,
    /// `compile.cache`: hit, miss or disabled.
    pub compile_cache: String,
    /// `compile.duration_ms`.
    pub compile_ms: f64,
    /// `summary.duration_ms`.
    pub summary_ms: f64,
    /// The sum of the calls' `duration_ms`, except the daemon-reload's (the
    /// first operation's duration already includes it).
    pub calls_ms: f64,
    /// The daemon-reload's `duration_ms`.
    pub reload_ms: f64,
    /// systemctl processes started (over D-Bus only the daemon-reloads; with
    /// systemctl a status call is two).
    pub systemctl_calls: usize,
    /// How the run read status: `dbus` or `systemctl`.
    pub status_reader: String,
    pub changed: usize,
    pub success: bool,
    /// GNU time's maximum RSS, when the run was under `/usr/bin/time`.
    pub maxrss_kb: Option<u64>,
}

/// The host and the shell script, measured alternately.
#[derive(Debug, Clone, Default)]
pub(super) struct Pair {
    pub host: Vec<HostRun>,
    pub script: Vec<f64>,
    /// Further baselines (at the reference size): name and times.
    pub extra: Vec<(String, Vec<f64>)>,
}

impl Pair {
    pub(super) fn host_ms(&self) -> Vec<f64> {
        self.host.iter().map(|r| r.wall_ms).collect()
    }
}

#[derive(Debug, Clone)]
pub(super) struct Scale {
    pub n: usize,
    pub noop: Pair,
    pub converge: Pair,
}

/// One tool's no-op and converge times.
#[derive(Debug, Clone, Default)]
pub(super) struct ToolRun {
    pub noop: Vec<f64>,
    pub converge: Vec<f64>,
    pub error: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub(super) struct ToolRuns {
    pub n: usize,
    pub ansible_version: String,
    pub ansible_module: String,
    pub puppet_version: String,
    pub ansible: ToolRun,
    pub puppet: ToolRun,
}

#[derive(Debug, Clone, Default)]
pub(super) struct Startup {
    pub cold: Vec<HostRun>,
    pub warm: Vec<HostRun>,
    /// Spawn of `host run` to the first start of the systemctl shim.
    pub cold_first_call_ms: Vec<f64>,
    pub warm_first_call_ms: Vec<f64>,
    /// Spawn of the shim itself to its start: its own share of the above.
    pub shim_ms: Vec<f64>,
    /// The manifest policy with an empty manifest: no provider call at all.
    pub empty_warm: Vec<HostRun>,
}

/// Converging slow units (starts of 0.5 s) at one size: the host, the
/// script, and at the reference size Ansible and Puppet (`extra`).
#[derive(Debug, Clone)]
pub(super) struct SlowScale {
    pub n: usize,
    pub converge: Pair,
}

#[derive(Debug, Clone, Default)]
pub(super) struct Slow {
    pub sizes: Vec<SlowScale>,
    /// Why the measurement stopped short, if it did.
    pub error: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub(super) struct Memory {
    pub n: usize,
    pub noop_time_kb: Vec<u64>,
    pub converge_time_kb: Vec<u64>,
    pub noop_hwm_kb: Vec<u64>,
    pub converge_hwm_kb: Vec<u64>,
    /// GNU time's maximum RSS of the host converging slow units at `n`.
    pub slow_time_kb: Vec<u64>,
}

pub(super) struct Results {
    pub machine: Machine,
    pub plan: Plan,
    pub scale: Vec<Scale>,
    pub tools: Option<ToolRuns>,
    pub startup: Startup,
    pub slow: Slow,
    pub memory: Memory,
    pub load_at_end: String,
    pub duration: Duration,
}

/// `median (min–max)`.
fn spread(samples: &[f64]) -> String {
    match Stats::of(samples) {
        Some(s) if s.n == 1 => format!("{:.1}", s.median),
        Some(s) => format!("{:.1} ({:.1}–{:.1})", s.median, s.min, s.max),
        None => "–".into(),
    }
}

/// `ratio (IQR q1–q3)` of paired measurements: the ratio of the medians,
/// with the interquartile range of the per-repetition ratios.
fn ratio(numerators: &[f64], denominators: &[f64]) -> String {
    let r = median(numerators) / median(denominators);
    match Stats::of(&paired_ratios(numerators, denominators)) {
        Some(s) if s.n > 1 => format!("{r:.3} (IQR {:.3}–{:.3})", s.q1, s.q3),
        _ => format!("{r:.3}"),
    }
}

fn mib(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

fn verdict(pass: Option<bool>) -> &'static str {
    match pass {
        Some(true) => "**PASS**",
        Some(false) => "**MISS**",
        None => "not measured",
    }
}

struct Target {
    what: String,
    measured: String,
    pass: Option<bool>,
}

pub(super) fn render(r: &Results) -> String {
    let mut out = String::new();
    let m = &r.machine;
    let mode = if r.plan.quick {
        "quick run (--quick)"
    } else {
        "full run"
    };
    let _ = writeln!(out, "## Results: {mode}, {}\n", m.date);
    out.push_str(&machine_lines(m, &r.load_at_end, r.duration));
    let _ = writeln!(
        out,
        "Times in ms: median (min–max) of the repetitions, each run timed inside the sandbox from spawn to exit. \
         Ratios: ratio of the medians, with the interquartile range of the per-repetition ratios \
         (host and baseline run alternately).\n"
    );

    let mut targets = Vec::new();
    versus_script(&mut out, r, &mut targets);
    versus_tools(&mut out, r, &mut targets);
    startup(&mut out, r, &mut targets);
    scaling(&mut out, r, &mut targets);
    memory(&mut out, r, &mut targets);
    slow_units(&mut out, r, &mut targets);
    profile(&mut out, r);

    let _ = writeln!(out, "### Targets\n");
    let _ = writeln!(out, "| target | measured | result |\n|---|---|---|");
    for t in &targets {
        let _ = writeln!(out, "| {} | {} | {} |", t.what, t.measured, verdict(t.pass));
    }
    out
}

/// Where and with what the numbers were measured, as a Markdown list.
pub(super) fn machine_lines(m: &Machine, load_at_end: &str, duration: Duration) -> String {
    format!(
        "- machine: {} CPUs ({}), {} RAM, kernel {}, {}\n- {}, {}\n- host: {}, commit {}\n- load average at start {}, at end {}; the bench took {:.1} min\n\n",
        m.cpus,
        m.cpu_model,
        m.memory,
        m.kernel,
        m.os,
        m.systemd,
        m.rustc,
        m.host,
        m.commit,
        m.load_at_start,
        load_at_end,
        duration.as_secs_f64() / 60.0
    )
}

fn find(r: &Results, n: usize) -> Option<&Scale> {
    r.scale.iter().find(|s| s.n == n)
}

fn versus_script(out: &mut String, r: &Results, targets: &mut Vec<Target>) {
    let _ = writeln!(
        out,
        "### 1–2. `host run` vs. the design's systemctl calls from a shell script\n\n\
         Manifest policy, warm compile cache. No-op: the units are already running and enabled. \
         Converge: before each repetition, outside the timing, the units are stopped and disabled; \
         the policy starts and enables them. The host talks to systemd over D-Bus: no systemctl process \
         in a no-op run (no unit file changed, so no reload: see docs/service-type.md, daemon-reload) \
         and 2 per converging run (the reloads before the first change and after the last); \
         its starts are jobs on systemd's job engine (`StartUnit`, at most 64 pending at once) and \
         its enables `EnableUnitFiles`. `host --provider systemctl` makes every call with systemctl, \
         one at a time (1 + 2N and 2 + 6N processes). The script (`bench/systemctl-*.sh`) makes the \
         design's calls: 1 daemon-reload + 2 queries per unit, and for a converging run also `start` \
         and `enable` (which reloads systemd each time) and 2 queries again.\n"
    );
    let _ = writeln!(
        out,
        "| run | N | reps | host run (D-Bus) | host, --provider systemctl | shell script | host / script | host systemctl / script | extra per unit |\n|---|---:|---:|---|---|---|---|---|---|"
    );
    let forced = |pair: &Pair| {
        pair.extra
            .iter()
            .find(|(n, _)| n == super::HOST_SYSTEMCTL)
            .map(|(_, t)| t.clone())
            .unwrap_or_default()
    };
    for (name, converge) in [("no-op", false), ("converge", true)] {
        for s in &r.scale {
            let pair = if converge { &s.converge } else { &s.noop };
            let host = pair.host_ms();
            let systemctl = forced(pair);
            let extra = (median(&host) - median(&pair.script)) / s.n as f64;
            let _ = writeln!(
                out,
                "| {name} | {} | {} | {} | {} | {} | {} | {} | {extra:+.2} ms |",
                s.n,
                host.len(),
                spread(&host),
                spread(&systemctl),
                spread(&pair.script),
                ratio(&host, &pair.script),
                ratio(&systemctl, &pair.script)
            );
        }
    }
    let _ = writeln!(out);
    settle(out, r);
    if let Some(s) = find(r, REFERENCE_N) {
        for (name, pair, goal) in [
            ("no-op", &s.noop, 0.3),
            ("no-op", &s.noop, 0.2),
            ("converge", &s.converge, 0.3),
        ] {
            let value = median(&pair.host_ms()) / median(&pair.script);
            targets.push(Target {
                what: format!("{name} at N={REFERENCE_N}, host (D-Bus) / shell script: ≤ {goal}"),
                measured: format!("{value:.3}"),
                pass: Some(value <= goal),
            });
        }
        let settle_off = settle_off(&s.converge);
        let value = median(&settle_off) / median(&s.converge.script);
        targets.push(Target {
            what: format!(
                "converge at N={REFERENCE_N}, host with --settle 0 / shell script: ≤ 0.1"
            ),
            measured: format!("{value:.3}"),
            pass: Some(value <= 0.1),
        });
        let cost = median(&s.converge.host_ms()) - median(&settle_off);
        let bound = SETTLE_MS * 1.1;
        targets.push(Target {
            what: format!(
                "converge at N={REFERENCE_N}, the default settle window's cost (host − host \
                 --settle 0): ≤ the window + 10 % ({bound:.0} ms)"
            ),
            measured: format!("{cost:.0} ms"),
            pass: Some(cost <= bound),
        });
    }
}

/// The default settle window (`settle`, 1 s), in ms.
const SETTLE_MS: f64 = 1000.0;

/// The converging host runs without the settle window.
fn settle_off(pair: &Pair) -> Vec<f64> {
    pair.extra
        .iter()
        .find(|(n, _)| n == super::HOST_SETTLE_OFF)
        .map(|(_, t)| t.clone())
        .unwrap_or_default()
}

/// What the settle window costs a converging run: the host with its
/// default window and with `--settle 0`, side by side.
fn settle(out: &mut String, r: &Results) {
    let _ = writeln!(
        out,
        "#### The settle window

         A start counts only when its unit stayed up for `settle` (default 1 s) after its job \
         ended (docs/service-type.md, Verification); the windows of the units a run starts run \
         side by side, so a converging run pays about one window, whatever N. Measured in the same \
         converging repetitions as the table above.\n"
    );
    let _ = writeln!(
        out,
        "| N | host (settle 1 s) | host --settle 0 | cost of the window | --settle 0 / script |\n|---:|---|---|---:|---|"
    );
    for s in &r.scale {
        let off = settle_off(&s.converge);
        if off.is_empty() {
            continue;
        }
        let host = s.converge.host_ms();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:+.0} ms | {} |",
            s.n,
            spread(&host),
            spread(&off),
            median(&host) - median(&off),
            ratio(&off, &s.converge.script)
        );
    }
    let _ = writeln!(out);
}

fn versus_tools(out: &mut String, r: &Results, targets: &mut Vec<Target>) {
    let Some(t) = &r.tools else {
        let _ = writeln!(
            out,
            "### 3. Ansible and Puppet\n\nNot measured in this run (--quick or --no-tools).\n"
        );
        for what in ["Ansible", "Puppet"] {
            targets.push(Target {
                what: format!("{what} no-op at N={REFERENCE_N} / host no-op"),
                measured: "–".into(),
                pass: None,
            });
        }
        return;
    };
    let Some(s) = find(r, t.n) else { return };
    let _ = writeln!(
        out,
        "### 3. Ansible and Puppet (N = {})\n\n\
         The same units to the same state, run inside the sandbox. Ansible: `ansible-playbook -c local` \
         (`bench/ansible-playbook.yml`, `{}` over the units in a loop, one daemon-reload task first, \
         no fact gathering). Puppet: `puppet apply` (`bench/puppet-manifest.pp`, `service` resources, \
         `provider => systemd`). No-op runs follow one untimed warm-up; the first converging run is checked instead.\n",
        t.n, t.ansible_module
    );
    let (host_noop, host_conv) = (s.noop.host_ms(), s.converge.host_ms());
    let _ = writeln!(
        out,
        "| tool | reps | no-op | converge | no-op: tool / host | converge: tool / host |\n|---|---:|---|---|---|---|"
    );
    let _ = writeln!(
        out,
        "| policy host | {} | {} | {} | 1 | 1 |",
        host_noop.len(),
        spread(&host_noop),
        spread(&host_conv)
    );
    for (name, version, run, goal) in [
        ("Ansible", &t.ansible_version, &t.ansible, 20.0),
        ("Puppet", &t.puppet_version, &t.puppet, 15.0),
    ] {
        let noop_ratio = median(&run.noop) / median(&host_noop);
        let conv_ratio = median(&run.converge) / median(&host_conv);
        let _ = writeln!(
            out,
            "| {name} ({version}) | {} | {} | {} | {noop_ratio:.1}× | {conv_ratio:.1}× |",
            run.noop.len(),
            spread(&run.noop),
            spread(&run.converge)
        );
        targets.push(Target {
            what: format!("{name} no-op at N={} / host no-op: ≥ {goal:.0}×", t.n),
            measured: if run.noop.is_empty() {
                run.error.clone().unwrap_or_else(|| "–".into())
            } else {
                format!("{noop_ratio:.1}×")
            },
            pass: (!run.noop.is_empty()).then_some(noop_ratio >= goal),
        });
    }
    for (name, run) in [("Ansible", &t.ansible), ("Puppet", &t.puppet)] {
        if let Some(error) = &run.error {
            let _ = writeln!(out, "\n{name} failed: `{}`", error.replace('\n', " "));
        }
    }
    let _ = writeln!(out);
}

fn startup(out: &mut String, r: &Results, targets: &mut Vec<Target>) {
    let st = &r.startup;
    let walls = |runs: &[HostRun]| runs.iter().map(|r| r.wall_ms).collect::<Vec<_>>();
    let field = |runs: &[HostRun], f: fn(&HostRun) -> f64| runs.iter().map(f).collect::<Vec<_>>();
    let (cold, warm) = (walls(&st.cold), walls(&st.warm));
    let shim = median(&st.shim_ms);
    let corrected = |xs: &[f64]| xs.iter().map(|x| x - shim).collect::<Vec<_>>();
    let (cold_first, warm_first) = (
        corrected(&st.cold_first_call_ms),
        corrected(&st.warm_first_call_ms),
    );
    let _ = writeln!(
        out,
        "### 4. Start-up: the example policy (3 units, already converged), cold and warm\n\n\
         Cold: an empty `--cache-dir` before each run (the policy is compiled, then stored); warm: \
         the compiled policy is loaded from the cache. Each run makes 6 queries over D-Bus and no reload. \
         \"To first provider call\": the same runs with `--provider systemctl`, whose first call (the \
         design's daemon-reload) is a process: a `systemctl` shim first on the host's `PATH` notes when \
         it is started; shown is spawn of `host run` → that moment, minus the shim's own start-up \
         ({shim:.2} ms, measured by spawning it directly). Over D-Bus the first call begins at the same \
         point (the host connects to the bus then, not at start-up). The compile and \"outside the \
         calls\" rows come from the JSON report.\n"
    );
    let _ = writeln!(
        out,
        "| {} reps | cold (empty cache) | warm (cache hit) | cold / warm |\n|---|---|---|---|",
        cold.len()
    );
    let outside = |runs: &[HostRun]| {
        runs.iter()
            .map(|r| r.summary_ms - r.calls_ms)
            .collect::<Vec<_>>()
    };
    let compile = |runs: &[HostRun]| field(runs, |r| r.compile_ms);
    for (name, c, w) in [
        ("whole `host run`", cold.clone(), warm.clone()),
        (
            "process start → first provider call",
            cold_first.clone(),
            warm_first.clone(),
        ),
        (
            "`compile.duration_ms` (compile or cache load, and link)",
            compile(&st.cold),
            compile(&st.warm),
        ),
        (
            "`summary.duration_ms` − Σ calls' `duration_ms`",
            outside(&st.cold),
            outside(&st.warm),
        ),
    ] {
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {:.1}× |",
            spread(&c),
            spread(&w),
            median(&c) / median(&w)
        );
    }
    let empty = walls(&st.empty_warm);
    let _ = writeln!(
        out,
        "\nA warm run of the manifest policy with an empty manifest (no provider call at all, \
         start to exit): {} ms.\n",
        spread(&empty)
    );
    // The target is checked on the uncorrected time: an upper bound.
    let warm_value = median(&st.warm_first_call_ms);
    targets.push(Target {
        what: "warm start → first provider call: < 10 ms".into(),
        measured: format!(
            "{warm_value:.1} ms (less the shim's start-up: {:.1} ms)",
            median(&warm_first)
        ),
        pass: (!warm_first.is_empty()).then_some(warm_value < 10.0),
    });
    let cold_value = median(&cold);
    targets.push(Target {
        what: "cold start of the example policy: < 500 ms".into(),
        measured: format!(
            "{cold_value:.1} ms whole run; {:.1} ms to the first call",
            median(&cold_first)
        ),
        pass: (!cold.is_empty()).then_some(cold_value < 500.0),
    });
}

fn scaling(out: &mut String, r: &Results, targets: &mut Vec<Target>) {
    let _ = writeln!(
        out,
        "### 5. Scaling: time per unit\n\n\
         Per unit: median run time / N, which includes each run's fixed costs (start-up, the \
         daemon-reload) and so falls with N. Marginal: the cost of one more unit, \
         (t(N₂) − t(N₁)) / (N₂ − N₁), from the medians; flat scaling means equal marginal costs. \
         The what-ifs (section \"Where the host's time goes\") are shown too: they tell the cost \
         of systemd's own work apart from the cost of one process per call.\n"
    );
    let sizes: Vec<usize> = r.scale.iter().map(|s| s.n).collect();
    let mut header = String::from("| run | ");
    let mut rule = String::from("|---|");
    for n in &sizes {
        let _ = write!(header, "N={n} | ");
        rule.push_str("---:|");
    }
    for w in sizes.windows(2) {
        let _ = write!(header, "marginal {}→{} | ", w[0], w[1]);
        rule.push_str("---:|");
    }
    header.push_str("marginal max/min |");
    rule.push_str("---:|");
    let _ = writeln!(out, "{header}\n{rule}");
    for (name, converge) in [("no-op", false), ("converge", true)] {
        let pair_of = |s: &'_ Scale| {
            if converge {
                s.converge.clone()
            } else {
                s.noop.clone()
            }
        };
        // The host, the script, and the baselines measured at every size.
        let mut sides = vec!["host".to_owned(), "script".to_owned()];
        if let Some(first) = r.scale.first() {
            for (extra, _) in &pair_of(first).extra {
                if r.scale
                    .iter()
                    .all(|s| pair_of(s).extra.iter().any(|(n, _)| n == extra))
                {
                    sides.push(extra.clone());
                }
            }
        }
        for side in &sides {
            let totals: Vec<f64> = r
                .scale
                .iter()
                .map(|s| {
                    let pair = pair_of(s);
                    match side.as_str() {
                        "host" => median(&pair.host_ms()),
                        "script" => median(&pair.script),
                        extra => pair
                            .extra
                            .iter()
                            .find(|(n, _)| n == extra)
                            .map_or(f64::NAN, |(_, t)| median(t)),
                    }
                })
                .collect();
            let mut row = format!("| {name}, {side} | ");
            for (t, n) in totals.iter().zip(&sizes) {
                let _ = write!(row, "{:.2} ms | ", t / *n as f64);
            }
            let marginals: Vec<f64> = totals
                .windows(2)
                .zip(sizes.windows(2))
                .map(|(t, n)| (t[1] - t[0]) / (n[1] - n[0]) as f64)
                .collect();
            for m in &marginals {
                let _ = write!(row, "{m:.2} ms | ");
            }
            let flat = flatness(&marginals);
            let _ = write!(row, "{} |", flat.map_or("–".into(), |f| format!("{f:.2}")));
            let _ = writeln!(out, "{row}");
            if side == "host" {
                let measured = if marginals.len() >= 2 {
                    format!(
                        "{} (marginal {})",
                        flat.map_or("–".into(), |f| format!("{f:.2}")),
                        marginals
                            .iter()
                            .map(|m| format!("{m:.2}"))
                            .collect::<Vec<_>>()
                            .join(" / ")
                            + " ms"
                    )
                } else {
                    "needs N = 10, 100 and 300 (full run)".into()
                };
                targets.push(Target {
                    what: format!("{name}: per-unit cost flat from N=10 to N=300: ≤ 1.2×"),
                    measured,
                    pass: (marginals.len() >= 2 && sizes.contains(&300))
                        .then(|| flat.is_some_and(|f| f <= 1.2)),
                });
            }
        }
    }
    let _ = writeln!(out);
}

/// The largest marginal cost over the smallest.
fn flatness(marginals: &[f64]) -> Option<f64> {
    if marginals.len() < 2 {
        return None;
    }
    let max = marginals.iter().copied().fold(f64::MIN, f64::max);
    let min = marginals.iter().copied().fold(f64::MAX, f64::min);
    (min > 0.0).then_some(max / min)
}

fn memory(out: &mut String, r: &Results, targets: &mut Vec<Target>) {
    let m = &r.memory;
    let max = |xs: &[u64]| xs.iter().copied().max();
    let show = |kb: Option<u64>| kb.map_or("–".into(), |kb| format!("{:.1} MiB", mib(kb)));
    let _ = writeln!(
        out,
        "### 6. Peak resident memory at N = {}\n\n\
         GNU time's maximum RSS (`/usr/bin/time -f %M` around every timed run at this size, host \
         and script alike: the larger of the host process and its largest child, a systemctl), \
         and the host's own `VmHWM`, sampled from `/proc` every millisecond in separate no-op \
         runs. Largest value over the runs (count in brackets).\n",
        m.n
    );
    let _ = writeln!(
        out,
        "| run | max RSS (GNU time) | VmHWM (sampled) |\n|---|---|---|"
    );
    for (name, time, hwm) in [
        ("no-op", &m.noop_time_kb, &m.noop_hwm_kb),
        ("converge", &m.converge_time_kb, &m.converge_hwm_kb),
        (
            "converge, slow units (section 7)",
            &m.slow_time_kb,
            &Vec::new(),
        ),
    ] {
        let _ = writeln!(
            out,
            "| {name} | {} ({}) | {} ({}) |",
            show(max(time)),
            time.len(),
            show(max(hwm)),
            hwm.len()
        );
    }
    let _ = writeln!(out);
    let peak = [
        max(&m.noop_time_kb),
        max(&m.converge_time_kb),
        max(&m.noop_hwm_kb),
        max(&m.slow_time_kb),
    ]
    .into_iter()
    .flatten()
    .max();
    targets.push(Target {
        what: format!(
            "peak memory at N=300: < 50 MiB{}",
            if m.n == 300 {
                String::new()
            } else {
                format!(" (measured at N={})", m.n)
            }
        ),
        measured: show(peak),
        pass: peak.filter(|_| m.n == 300).map(|kb| mib(kb) < 50.0),
    });
}

/// Section 7: converging slow units, the host against the script and, at
/// the reference size, Ansible and Puppet.
fn slow_units(out: &mut String, r: &Results, targets: &mut Vec<Target>) {
    let slow = &r.slow;
    let _ = writeln!(
        out,
        "### 7. Slow units: starts that take {start} s\n\n\
         N services `slow-001` … `slow-N` (`ExecStartPre=/bin/sleep {start}`, then \
         `ExecStart=/bin/sleep infinity`), measured after everything else, converging from stopped \
         and disabled to running and enabled (the same manifest policy and reset as the converge \
         runs above). Each start job takes {start} s in systemd, whoever asks: the script \
         (`bench/systemctl-converge.sh`) waits for each start in turn; the host queues the starts \
         as jobs (at most 64 pending) and makes 2 systemctl processes. At N = {REFERENCE_N} also \
         Ansible and Puppet with the playbook and manifest of section 3, in turn with the host \
         (Puppet must exit 2, changes made).\n",
        start = super::SLOW_START
    );
    let tools_measured = slow.sizes.iter().any(|s| !s.converge.extra.is_empty());
    let mut header = String::from(
        "| N | reps | host run (D-Bus) | shell script | host / script | script, per unit |",
    );
    let mut rule = String::from("|---:|---:|---|---|---|---:|");
    if tools_measured {
        for tool in [super::ANSIBLE, super::PUPPET] {
            let _ = write!(header, " {tool} | {tool} / host |");
            rule.push_str("---|---:|");
        }
    }
    let _ = writeln!(out, "{header}\n{rule}");
    for s in &slow.sizes {
        let pair = &s.converge;
        let host = pair.host_ms();
        let mut row = format!(
            "| {} | {} | {} | {} | {} | {:.1} ms |",
            s.n,
            host.len(),
            spread(&host),
            spread(&pair.script),
            ratio(&host, &pair.script),
            median(&pair.script) / s.n as f64
        );
        if tools_measured {
            for tool in [super::ANSIBLE, super::PUPPET] {
                match pair.extra.iter().find(|(name, _)| name == tool) {
                    Some((_, times)) => {
                        let _ = write!(
                            row,
                            " {} | {:.1}× |",
                            spread(times),
                            median(times) / median(&host)
                        );
                    }
                    None => row.push_str(" – | – |"),
                }
            }
        }
        let _ = writeln!(out, "{row}");
    }
    if let Some(error) = &slow.error {
        let _ = writeln!(
            out,
            "\nThe measurement stopped: `{}`",
            error.replace('\n', " ")
        );
    }
    let _ = writeln!(out);
    let at_reference = slow.sizes.iter().find(|s| s.n == REFERENCE_N);
    let value = at_reference.map(|s| median(&s.converge.host_ms()) / median(&s.converge.script));
    targets.push(Target {
        what: format!("slow units (starts of {} s), converge at N={REFERENCE_N}, host (D-Bus) / shell script: ≤ 0.05", super::SLOW_START),
        measured: value.map_or("–".into(), |v| format!("{v:.3}")),
        pass: value.map(|v| v <= 0.05),
    });
}

/// One column of the profile: a measurement, and how many systemctl
/// processes the script made in each of its runs (the per-process rows
/// divide by it: the host over D-Bus makes only its reloads).
struct Column<'a> {
    name: String,
    n: usize,
    pair: &'a Pair,
    script_processes: usize,
}

/// How one cell of a profile row is computed from a column.
type Cell<'a> = Box<dyn Fn(&Column) -> String + 'a>;

/// Where the host's time goes, at the reference and the largest size.
fn profile(out: &mut String, r: &Results) {
    let mut columns: Vec<Column> = Vec::new();
    let largest = r.scale.iter().map(|s| s.n).max().unwrap_or(0);
    for s in &r.scale {
        if s.n == REFERENCE_N || s.n == largest {
            columns.push(Column {
                name: format!("no-op, N={}", s.n),
                n: s.n,
                pair: &s.noop,
                script_processes: 1 + 2 * s.n,
            });
            columns.push(Column {
                name: format!("converge, N={}", s.n),
                n: s.n,
                pair: &s.converge,
                script_processes: 1 + 6 * s.n,
            });
        }
    }
    if columns.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "### Where the host's time goes (warm; medians, ms)\n\n\
         Baselines run in turn with the host, in the same repetitions (in brackets: host time / \
         baseline time, the ratio of the medians). At N = {REFERENCE_N} (no-op) also: the script \
         with the environment the host gives systemctl (`env -i PATH=... LANG=C LC_ALL=C`); a \
         native loop, the bench's own Rust binary spawning the script's systemctl commands one after \
         the other as the host's provider does with `--provider systemctl` (clean environment, \
         pipes, no WebAssembly), reading both pipes on its one thread; and the same loop reading \
         each pipe on a thread spawned per command, as the host does. The what-ifs are shell \
         scripts with fewer systemctl processes (`bench/what-if-*.sh`). Inside/outside the calls: \
         from the host's JSON report (the daemon-reloads are calls there, counted once). In a \
         converging run the host's starts overlap (a start's `duration_ms` runs from its \
         submission to the job's end), so there Σ `duration_ms` counts overlapping time more \
         than once and can exceed the run (\"outside its calls\" is then not shown), and the \
         time per unit includes the wait in systemd's job queue.\n"
    );
    let mut header = String::from("| |");
    let mut rule = String::from("|---|");
    for c in &columns {
        let _ = write!(header, " {} |", c.name);
        rule.push_str("---:|");
    }
    let _ = writeln!(out, "{header}\n{rule}");

    let host = |c: &Column| median(&c.pair.host_ms());
    let field =
        |c: &Column, f: fn(&HostRun) -> f64| median(&c.pair.host.iter().map(f).collect::<Vec<_>>());
    let calls = |c: &Column| c.pair.host.first().map_or(0, |r| r.systemctl_calls);
    let extra = |c: &Column, name: &str| {
        c.pair
            .extra
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| median(t))
            .unwrap_or(f64::NAN)
    };
    let versus = |ms: f64, c: &Column| format!("{ms:.1} (×{:.3})", host(c) / ms);
    let mut rows: Vec<(String, Cell)> = vec![
        (
            "host (D-Bus): systemctl processes per run".into(),
            Box::new(|c| format!("{}", calls(c))),
        ),
        (
            "shell script: systemctl processes per run".into(),
            Box::new(|c| format!("{}", c.script_processes)),
        ),
        (
            "`host run`, spawn to exit".into(),
            Box::new(|c| format!("{:.1}", host(c))),
        ),
        (
            "shell script".into(),
            Box::new(|c| versus(median(&c.pair.script), c)),
        ),
    ];
    let mut names: Vec<String> = Vec::new();
    for c in &columns {
        for (name, _) in &c.pair.extra {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
    }
    for name in names {
        rows.push((name.clone(), Box::new(move |c| versus(extra(c, &name), c))));
    }
    rows.push((
        "shell script, per systemctl process".into(),
        Box::new(|c| format!("{:.2}", median(&c.pair.script) / c.script_processes as f64)),
    ));
    for name in [super::NATIVE_LOOP, super::NATIVE_LOOP_THREADS] {
        rows.push((
            format!("{name}, per systemctl process"),
            Box::new(move |c| format!("{:.2}", extra(c, name) / c.script_processes as f64)),
        ));
    }
    rows.push((
        "host: inside its calls (Σ `duration_ms`)".into(),
        Box::new(|c| format!("{:.1}", field(c, |r| r.calls_ms))),
    ));
    rows.push((
        "host: of which the daemon-reloads".into(),
        Box::new(|c| format!("{:.1}", field(c, |r| r.reload_ms))),
    ));
    rows.push((
        "host: per unit, Σ of its calls but the reloads / N".into(),
        Box::new(|c| format!("{:.2}", field(c, |r| r.calls_ms - r.reload_ms) / c.n as f64)),
    ));
    // Overlapping calls: Σ exceeds the run, and "outside" means nothing.
    let outside = move |c: &Column, ms: f64| {
        if field(c, |r| r.calls_ms) > host(c) {
            "– (calls overlap)".to_owned()
        } else {
            format!("{ms:.1}")
        }
    };
    rows.push((
        "host: outside its calls (spawn to exit − Σ)".into(),
        Box::new(move |c| outside(c, host(c) - field(c, |r| r.calls_ms))),
    ));
    rows.push((
        "… of which in `main` (`summary.duration_ms` − Σ)".into(),
        Box::new(move |c| outside(c, field(c, |r| r.summary_ms - r.calls_ms))),
    ));
    rows.push((
        "… of which cache load + link (`compile.duration_ms`)".into(),
        Box::new(|c| format!("{:.1}", field(c, |r| r.compile_ms))),
    ));
    for (name, value) in &rows {
        let mut line = format!("| {name} |");
        for c in &columns {
            let text = value(c);
            let text = if text.contains("NaN") {
                "–".to_owned()
            } else {
                text
            };
            let _ = write!(line, " {text} |");
        }
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(out);
}
