//! The watch figures as Markdown: the section "Watch mode (issue 32)", each
//! figure against the target.

use std::fmt::Write as _;
use std::time::Duration;

use policy_host::left_alone::backoff;

use super::super::report::machine_lines;
use super::super::stats::percentile;
use super::{
    config_file, file_subscribers, package, package_subscribers, Idle, Latency, Memory, Snapshot,
    Transient, WatchResults, QUIET, REACTION, REPAIR_TIMEOUT, ROUND, UNITS,
};

/// The targets.
const P50_MS: f64 = 200.0;
const P99_MS: f64 = 1000.0;
const IDLE_CPU_PERCENT: f64 = 0.1;
const MEMORY_GROWTH_KB: u64 = 2048;
const CRASH_LOOP_STARTS: usize = 12;
/// Issue 46's targets for the repair of a stop or a disable.
const FLOOR_P50_MS: f64 = 60.0;
const FLOOR_P99_MS: f64 = 150.0;
/// The syscalls that can carry a D-Bus message, and those that start a
/// process or thread.
const BUS_WRITES: [&str; 5] = ["sendmsg", "sendmmsg", "sendto", "write", "writev"];
const PROCESS_STARTS: [&str; 5] = ["clone", "clone3", "fork", "vfork", "execve"];

struct Target {
    what: String,
    measured: String,
    pass: bool,
}

fn verdict(pass: bool) -> &'static str {
    if pass {
        "**PASS**"
    } else {
        "**FAIL**"
    }
}

pub(super) fn render(r: &WatchResults) -> String {
    let mut out = String::new();
    let mode = match (r.plan.quick, r.plan.repairs_only) {
        (true, true) => "repairs only, quick run (--repairs --quick)",
        (false, true) => "repairs only (--repairs)",
        (true, false) => "quick run (--quick)",
        (false, false) => "full run",
    };
    let _ = writeln!(
        out,
        "## Watch mode (issue 32): {mode}, {}\n",
        r.machine.date
    );
    out.push_str(&machine_lines(&r.machine, &r.load_at_end, r.duration));
    setup(&mut out);
    let mut targets = Vec::new();
    latency(&mut out, &r.latency, &mut targets);
    if let Some(measured) = &r.idle {
        idle(&mut out, measured, &mut targets);
    }
    if let Some(measured) = &r.transient {
        transient(&mut out, measured, &mut targets);
    }
    if let Some(measured) = &r.memory {
        memory(&mut out, measured, r.plan.quick, &mut targets);
    }
    crash_loop(&mut out, &r.crash_loop, &mut targets);
    let _ = writeln!(out, "### Targets\n");
    let _ = writeln!(out, "| target | measured | result |\n|---|---|---|");
    for t in &targets {
        let _ = writeln!(out, "| {} | {} | {} |", t.what, t.measured, verdict(t.pass));
    }
    out
}

fn setup(out: &mut String) {
    let _ = writeln!(
        out,
        "`host watch` (release build) in the sandbox's systemd, started as the packaged service \
         is (`systemd-run --property=Type=notify`: ready once its first run ended), following one \
         signed manifest of {UNITS} services `bw-001` … `bw-{UNITS:03}` (`sleep infinity`, \
         `WantedBy=multi-user.target`, all running and enabled). {} of them subscribe to a file \
         of their own under `/etc/bw` (`bw-001`: `{}`; `--watch-path /etc/bw`) and {} to a \
         package of their own (`bw-002`: `{}`). Debounce, settle window and resync are the \
         defaults (0.1 s, 1 s, 15 min).\n\n\
         Every start or restart the watch makes counts towards its crash-loop backoff (3 host \
         starts of a unit within 60 s hold the unit back 10 s and more), so the drifts rotate \
         over units and the bench waits rather than cause a unit's third start within 60 s: the \
         times below are repairs, never holds. After each drift the bench waits until the run \
         that repaired has written its report and the report then stayed unwritten for {} s \
         (the follow-up run of the watch's own changes is over), so trials never overlap; the \
         two stops 0.5 s apart are one trial, whose second drift comes during the first's \
         repair on purpose.\n",
        file_subscribers().len(),
        config_file(1),
        package_subscribers().len(),
        package(2),
        QUIET.as_secs()
    );
}

fn ms(value: f64) -> String {
    if value.is_nan() {
        "–".into()
    } else {
        format!("{value:.1} ms")
    }
}

fn latency(out: &mut String, kinds: &[Latency], targets: &mut Vec<Target>) {
    let _ = writeln!(
        out,
        "### Repair latency\n\n\
         | drift | trials | p50 | p99 | max | not repaired | restarts ≠ 1 | target | result |\n\
         |---|---:|---:|---:|---:|---:|---|---|---|"
    );
    for kind in kinds {
        let (p50, p99, max) = (
            percentile(&kind.ms, 0.5),
            percentile(&kind.ms, 0.99),
            percentile(&kind.ms, 1.0),
        );
        let restarts = match kind.restarts {
            Some(r) => format!(
                "{} more than once, {} never, {} with other units",
                r.more_than_once, r.never, r.others
            ),
            None => "–".into(),
        };
        let restarts_ok = kind
            .restarts
            .is_none_or(|r| r.more_than_once == 0 && r.never == 0 && r.others == 0);
        let fast = p50 <= P50_MS && p99 <= P99_MS && kind.unrepaired == 0;
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {restarts} | p50 ≤ {P50_MS:.0} ms, p99 ≤ {:.0} s{} | {} |",
            kind.drift,
            kind.trials,
            ms(p50),
            ms(p99),
            ms(max),
            kind.unrepaired,
            P99_MS / 1e3,
            if kind.restarts.is_some() {
                ", restarted exactly once"
            } else {
                ""
            },
            verdict(fast && restarts_ok)
        );
        targets.push(Target {
            what: format!(
                "{}: p50 ≤ {P50_MS:.0} ms, p99 ≤ {:.0} s",
                kind.drift,
                P99_MS / 1e3
            ),
            measured: format!("p50 {}, p99 {}", ms(p50), ms(p99)),
            pass: fast,
        });
        if let Some(r) = kind.restarts {
            targets.push(Target {
                what: format!("{}: the subscriber restarted exactly once", kind.drift),
                measured: format!(
                    "{} of {} trials otherwise",
                    r.more_than_once + r.never + r.others,
                    kind.trials
                ),
                pass: restarts_ok,
            });
        }
    }
    let _ = writeln!(out);
    for kind in kinds {
        let _ = writeln!(out, "- {}: {}.", kind.drift, kind.measured);
    }
    let _ = writeln!(
        out,
        "\np50 and p99 interpolate between ranks (with 20 trials the p99 is nearly the maximum). \
         Not repaired: the repair was not seen, or its runs did not end, within {} s. Restarts ≠ 1 \
         (systemd's own \"Started\" journal messages after the drift): trials in which the \
         subscriber was started more than once or never, or another managed unit was started \
         too.\n",
        REPAIR_TIMEOUT.as_secs()
    );
    floors(out, kinds);
}

/// The repairs against their floors (issue 46), measured in turn with them.
fn floors(out: &mut String, kinds: &[Latency]) {
    let with: Vec<&Latency> = kinds.iter().filter(|k| !k.floor.is_empty()).collect();
    if with.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "#### Against the floor (issue 46)\n\n\
         The floor: the drift and its undoing typed at once by hand, on a unit no policy manages, \
         timed as the repair is; one floor trial after each repair trial, in the same run.\n\n\
         | drift | trials | host p50 | floor p50 | host / floor | host p99 | floor p99 | host / floor | target (issue 46) | result |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---|---|"
    );
    for kind in &with {
        let (p50, p99) = (percentile(&kind.ms, 0.5), percentile(&kind.ms, 0.99));
        let (f50, f99) = (percentile(&kind.floor, 0.5), percentile(&kind.floor, 0.99));
        let pass = p50 <= FLOOR_P50_MS && p99 <= FLOOR_P99_MS && kind.unrepaired == 0;
        let _ = writeln!(
            out,
            "| {} | {} / {} | {} | {} | {:.2}× | {} | {} | {:.2}× | p50 ≤ {FLOOR_P50_MS:.0} ms, p99 ≤ {FLOOR_P99_MS:.0} ms | {} |",
            kind.drift,
            kind.ms.len(),
            kind.floor.len(),
            ms(p50),
            ms(f50),
            p50 / f50,
            ms(p99),
            ms(f99),
            p99 / f99,
            verdict(pass)
        );
    }
    let _ = writeln!(out);
    for kind in &with {
        let _ = writeln!(
            out,
            "- {} floor: {}{}.",
            kind.drift,
            kind.floor_measured,
            match kind.floor_failed {
                0 => String::new(),
                n => format!(" ({n} floor trials not timed)"),
            }
        );
    }
    let _ = writeln!(out);
}

/// Calls of the syscalls named in `names`, and which.
fn calls_of(counts: &[(String, u64)], names: &[&str]) -> (u64, String) {
    let found: Vec<String> = counts
        .iter()
        .filter(|(name, _)| names.contains(&name.as_str()))
        .map(|(name, calls)| format!("{name} {calls}"))
        .collect();
    let total = counts
        .iter()
        .filter(|(name, _)| names.contains(&name.as_str()))
        .map(|(_, calls)| calls)
        .sum();
    (total, found.join(", "))
}

fn cpu_percent(before: &Snapshot, after: &Snapshot, wall: Duration) -> f64 {
    after.cpu_secs_since(before) / wall.as_secs_f64().max(1e-9) * 100.0
}

fn idle(out: &mut String, idle: &Idle, targets: &mut Vec<Target>) {
    let wall = idle.wall.as_secs_f64();
    let cpu = idle.after.cpu_secs_since(&idle.before);
    let percent = cpu_percent(&idle.before, &idle.after, idle.wall);
    let _ = writeln!(
        out,
        "### Idle, converged and quiet\n\n\
         {wall:.0} s right after a full run (SIGHUP: the next resync then falls after this \
         period and the next), with `strace -f -c -p` ({}) attached to all the watch's threads \
         the whole time (strace's attach and detach wake each thread once: those calls are \
         strace's). CPU time: utime + stime of all threads from `/proc/PID/stat`, before and \
         after.\n",
        idle.strace
    );
    let _ = writeln!(
        out,
        "| figure | measured | target | result |\n|---|---|---|---|"
    );
    let cpu_pass = percent < IDLE_CPU_PERCENT;
    let _ = writeln!(
        out,
        "| CPU time | {cpu:.2} s in {wall:.0} s: {percent:.3} % of one core | < {IDLE_CPU_PERCENT} % | {} |",
        verdict(cpu_pass)
    );
    targets.push(Target {
        what: format!("idle CPU < {IDLE_CPU_PERCENT} % of one core"),
        measured: format!("{percent:.3} %"),
        pass: cpu_pass,
    });
    match &idle.syscalls {
        Ok(counts) => {
            let total: u64 = counts.iter().map(|(_, calls)| calls).sum();
            let mut sorted = counts.clone();
            sorted.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            let named: Vec<String> = sorted
                .iter()
                .take(8)
                .map(|(name, calls)| format!("{name} {calls}"))
                .collect();
            let _ = writeln!(
                out,
                "| syscalls (strace) | {total}{} | – | |",
                if named.is_empty() {
                    String::new()
                } else {
                    format!(": {}", named.join(", "))
                }
            );
            let (bus, which) = calls_of(counts, &BUS_WRITES);
            let (processes, started) = calls_of(counts, &PROCESS_STARTS);
            for (what, value, which) in [
                (
                    "D-Bus calls or other writes (sendmsg, sendmmsg, sendto, write, writev)",
                    bus,
                    which,
                ),
                (
                    "processes or threads started (clone, clone3, fork, vfork, execve)",
                    processes,
                    started,
                ),
            ] {
                let pass = value == 0;
                let which = if which.is_empty() {
                    String::new()
                } else {
                    format!(" ({which})")
                };
                let _ = writeln!(out, "| {what} | {value}{which} | 0 | {} |", verdict(pass));
                targets.push(Target {
                    what: format!("idle: no {}", what.split(" (").next().unwrap_or(what)),
                    measured: value.to_string(),
                    pass,
                });
            }
        }
        Err(why) => {
            let writes = idle.after.syscw.saturating_sub(idle.before.syscw);
            let _ = writeln!(
                out,
                "| syscalls | strace not usable: {why} | – | |\n\
                 | D-Bus calls, at most the write syscalls (`/proc/PID/io` syscw) | {writes} | 0 | {} |",
                verdict(writes == 0)
            );
            targets.push(Target {
                what: "idle: no D-Bus calls (write syscalls, strace not usable)".into(),
                measured: writes.to_string(),
                pass: writes == 0,
            });
        }
    }
    let runs_pass = idle.runs == 0;
    let _ = writeln!(
        out,
        "| runs (report file rewritten) | {} | 0 | {} |\n\
         | wake-ups (context switches of its {} threads) | {} | – | |\n\
         | read / write syscalls (`/proc/PID/io` syscr / syscw) | {} / {} | – | |\n\
         | CPU time of waited-for children (cutime + cstime) | {:.2} s | – | |\n",
        idle.runs,
        verdict(runs_pass),
        idle.after.threads,
        idle.after.switches.saturating_sub(idle.before.switches),
        idle.after.syscr.saturating_sub(idle.before.syscr),
        idle.after.syscw.saturating_sub(idle.before.syscw),
        idle.after
            .child_ticks
            .saturating_sub(idle.before.child_ticks) as f64
            / idle.after.clk_tck.max(1) as f64,
    );
    targets.push(Target {
        what: "idle: no run".into(),
        measured: idle.runs.to_string(),
        pass: runs_pass,
    });
}

fn transient(out: &mut String, t: &Transient, targets: &mut Vec<Target>) {
    let pass = t.runs == 0;
    let _ = writeln!(
        out,
        "### Units no policy manages\n\n\
         {} transient units started and stopped one after the other \
         (`systemd-run --unit bw-tr-N --quiet true`, in one shell loop) while the watch runs; \
         its runs counted as rewrites of its report file, until 1.5 s after the last unit.\n\n\
         | figure | measured | target | result |\n|---|---|---|---|\n\
         | transient units | {} in {:.1} s; {} still loaded after | – | |\n\
         | watch runs meanwhile | {} | 0 | {} |\n\
         | watch CPU time meanwhile | {:.2} s ({:.3} % of one core) | – | |\n",
        t.units,
        t.units,
        t.took.as_secs_f64(),
        t.left,
        t.runs,
        verdict(pass),
        t.after.cpu_secs_since(&t.before),
        cpu_percent(&t.before, &t.after, t.took),
    );
    targets.push(Target {
        what: format!("{} unmanaged transient units: no run", t.units),
        measured: t.runs.to_string(),
        pass,
    });
}

fn mib(kb: u64) -> String {
    format!("{:.1} MiB", kb as f64 / 1024.0)
}

fn memory(out: &mut String, memory: &Memory, quick: bool, targets: &mut Vec<Target>) {
    let points = &memory.points;
    let _ = writeln!(
        out,
        "### Memory after repairs\n\n\
         Rounds of up to {ROUND} units stopped at once (`bw-003` … `bw-{UNITS:03}` in turn), each \
         round waiting until all are active again and the runs ended; one repair is one unit \
         started again. `VmRSS` and `VmHWM` from `/proc/PID/status` of the watch; the peak is \
         reset after each line (`echo 5 > /proc/PID/clear_refs`), so each `VmHWM` is the peak \
         since the line before (the first: since the start, compiling the policy). These \
         rounds come first, so the repair counts are all the watch made.\n\n\
         | repairs | starts in systemd's journal | VmRSS | VmHWM since the line before |\n\
         |---:|---:|---:|---:|"
    );
    for p in points {
        let _ = writeln!(
            out,
            "| {}{} | {} | {} | {} |",
            p.repairs,
            if p.repairs == 0 { " (ready)" } else { "" },
            p.started,
            mib(p.rss_kb),
            mib(p.hwm_kb)
        );
    }
    if let Some(why) = &memory.stopped {
        let _ = writeln!(out, "\nThe rounds stopped short: {why}.");
        targets.push(Target {
            what: "memory: every round of repairs repaired in time".into(),
            measured: why.clone(),
            pass: false,
        });
    }
    let first = points.iter().find(|p| p.repairs > 0);
    let last = points
        .last()
        .filter(|last| first.is_some_and(|first| last.repairs > first.repairs));
    if let (Some(first), Some(last)) = (first, last) {
        let growth = last.hwm_kb as i64 - first.rss_kb as i64;
        let pass = growth <= MEMORY_GROWTH_KB as i64;
        let note = if quick {
            " (--quick: the issue's figure is after 2,000)"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "\nPeak from {} to {} repairs − RSS after {}: {:+.2} MiB; target ≤ {} MiB{note}: {}\n",
            first.repairs,
            last.repairs,
            first.repairs,
            growth as f64 / 1024.0,
            MEMORY_GROWTH_KB / 1024,
            verdict(pass)
        );
        // The target compares a peak with a resting size: a run's own
        // working set is in it. Growth, resting and peak, tells a leak.
        let _ = writeln!(
            out,
            "For comparison, like with like: RSS after {} − RSS after {}: {:+.2} MiB; peak from {} \
             to {} repairs − peak up to {}: {:+.2} MiB.\n",
            last.repairs,
            first.repairs,
            (last.rss_kb as f64 - first.rss_kb as f64) / 1024.0,
            first.repairs,
            last.repairs,
            first.repairs,
            (last.hwm_kb as f64 - first.hwm_kb as f64) / 1024.0,
        );
        targets.push(Target {
            what: format!(
                "peak RSS up to {} repairs within {} MiB of the RSS after {}{note}",
                last.repairs,
                MEMORY_GROWTH_KB / 1024,
                first.repairs
            ),
            measured: format!("{:+.2} MiB", growth as f64 / 1024.0),
            pass,
        });
    }
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// The gaps between starts, equal ones counted: `0.1 s ×2, 10.0 s, ...`.
fn gaps(starts: &[Duration]) -> String {
    let mut runs: Vec<(String, usize)> = Vec::new();
    for pair in starts.windows(2) {
        let gap = secs(pair[1] - pair[0]);
        match runs.last_mut() {
            Some((last, n)) if *last == gap => *n += 1,
            _ => runs.push((gap, 1)),
        }
    }
    runs.iter()
        .map(|(gap, n)| {
            if *n == 1 {
                gap.clone()
            } else {
                format!("{gap} ×{n}")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn crash_loop(out: &mut String, starts: &[Duration], targets: &mut Vec<Target>) {
    let pass = starts.len() <= CRASH_LOOP_STARTS;
    let first: Vec<String> = starts.iter().take(10).map(|&s| secs(s)).collect();
    let _ = writeln!(
        out,
        "### Crash loop, simulated clock\n\n\
         A unit that dies as soon as it starts, started again {} ms after each death unless \
         held, for one hour, counted by the watch's own `Backoff` \
         (`host/src/left_alone/backoff.rs`) on a simulated clock, as in its unit test \
         `a_crash_loop_is_started_three_times_then_held_back_exactly_so`.\n\n\
         | figure | measured | target | result |\n|---|---|---|---|\n\
         | host starts in the first hour | {} | ≤ {CRASH_LOOP_STARTS} (the issue) | {} |\n\n\
         Starts at {}, …; gaps between starts: {}.\n\n\
         The issue's own parameters, which the backoff implements (a hold after {} starts \
         within {} s; holds of {} s doubling to at most {} min), give the {} starts above: {} \
         before the first hold, one after each shorter hold, then one every {} min. \"At most \
         {CRASH_LOOP_STARTS}\" cannot hold with them; the backoff is left as specified and the \
         figure reported as it is.\n",
        REACTION.as_millis(),
        starts.len(),
        verdict(pass),
        first.join(", "),
        gaps(starts),
        backoff::STARTS,
        backoff::WINDOW.as_secs(),
        backoff::FIRST_HOLD.as_secs(),
        backoff::LONGEST_HOLD.as_secs() / 60,
        starts.len(),
        backoff::STARTS,
        backoff::LONGEST_HOLD.as_secs() / 60,
    );
    targets.push(Target {
        what: format!(
            "crash loop: ≤ {CRASH_LOOP_STARTS} host starts in the first hour (conflicts with the \
             issue's own backoff parameters)"
        ),
        measured: starts.len().to_string(),
        pass,
    });
}
