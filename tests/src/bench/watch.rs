//! `--watch`: `host watch` (issue 32) in the sandbox's systemd. How soon it
//! repairs drift (a stop, a disable, a subscribed file edited, a subscribed
//! package upgraded), what it costs while nothing happens and while units
//! no policy manages come and go, whether its memory grows with repairs,
//! and how many starts its crash-loop backoff gives a unit in an hour.
//!
//! One watch of one signed manifest of [`UNITS`] services, started as the
//! packaged service is (`Type=notify`, ready after its first run), with its
//! default debounce (0.1 s), settle window (1 s) and resync (15 min). Every
//! repair it makes counts towards its backoff (3 host starts of a unit
//! within 60 s hold the unit back), so the bench spreads the drifts it
//! makes over many units and never makes a unit's third start within a
//! window (see [`Starts`]): the figures are the watch's repairs, never its
//! holds. The holds themselves are measured on a simulated clock.

mod inside;
mod markdown;

use std::collections::{BTreeMap, HashMap};
use std::process::ExitCode;

use policy_host::left_alone::backoff::{self, Backoff};
use serde::de::DeserializeOwned;

use super::stats::percentile;
use super::*;
use inside::{Apart, Floor, FloorTime, Inside, Repair, Trial, Until, Writes, Written};

/// How many services the watch manages: `bw-001` ... `bw-050`.
const UNITS: usize = 50;
const PREFIX: &str = "bw";
/// A service no policy manages (`sleep infinity`, running and enabled):
/// the floor of a repair is the drift and its undoing typed at once on it.
const FLOOR_UNIT: &str = "bw-floor";
/// The transient unit the watch runs as.
const WATCH_UNIT: &str = "bw-watch";
/// The watch's report file: every run writes it, so its rewrites count runs.
const REPORT: &str = "/var/lib/bw-report.json";
/// The directory of the subscribed files (`--watch-path`).
const CONFIG_DIR: &str = "/etc/bw";
/// systemd's "Started UNIT" journal message (`SD_MESSAGE_UNIT_STARTED`):
/// one per start job done, so one per restart too.
const STARTED: &str = "39f53479d3a045ac8e11786248231fbf";
/// How long the report must stay unwritten before a trial counts as over.
const QUIET: Duration = Duration::from_secs(1);
/// How long a repair may take before the trial counts it as not repaired.
const REPAIR_TIMEOUT: Duration = Duration::from_secs(60);
/// How many units one memory round stops at once: every unit but `bw-001`
/// and `bw-002` (`bw-003` ... `bw-050`).
const ROUND: usize = UNITS - 2;
/// Transient units started and stopped beside the watch.
const TRANSIENT_UNITS: usize = 1000;
/// How soon a crash-looping unit is started again in the simulation.
const REACTION: Duration = Duration::from_millis(100);
const HOUR: Duration = Duration::from_secs(3600);
/// How far apart the two stops of [`Session::apart`] come (issue 46's
/// measurement of a repair behind another's settle window).
const APART: Duration = Duration::from_millis(500);

/// `bench __watch JSON`, inside the sandbox.
pub(super) fn inside_main(spec: &str) -> ExitCode {
    inside::main(spec)
}

/// The section "Watch mode (issue 32)" of the results, in Markdown.
pub(super) fn render(results: &WatchResults) -> String {
    markdown::render(results)
}

/// How many trials of what: the full figures, or `--quick`.
#[derive(Debug, Clone)]
pub(super) struct WatchPlan {
    pub quick: bool,
    /// `--repairs`: only the stop, the disable and the stops apart, each
    /// beside its floor.
    pub repairs_only: bool,
    /// Trials of each drift but the upgrades.
    pub trials: usize,
    /// Upgrades: each builds a package and runs dpkg.
    pub upgrades: usize,
    pub idle: Duration,
    /// The repair counts at which the watch's memory is read.
    pub repairs: Vec<usize>,
}

impl WatchPlan {
    fn new(quick: bool, repairs_only: bool) -> WatchPlan {
        if quick {
            // At most 2 starts of each of 48 units a minute: 500 repairs
            // take 5 minutes, 2,000 take 21.
            WatchPlan {
                quick,
                repairs_only,
                trials: 20,
                upgrades: 5,
                idle: Duration::from_secs(60),
                repairs: vec![100, 500],
            }
        } else {
            WatchPlan {
                quick,
                repairs_only,
                trials: 100,
                upgrades: 20,
                idle: Duration::from_secs(600),
                repairs: vec![100, 2000],
            }
        }
    }
}

/// The repair times of one kind of drift.
#[derive(Debug, Clone, Default)]
pub(super) struct Latency {
    /// The drift, in words.
    pub drift: String,
    /// How the time is taken.
    pub measured: String,
    pub trials: usize,
    /// The repaired trials' times, in ms.
    pub ms: Vec<f64>,
    /// Trials not repaired within [`REPAIR_TIMEOUT`], or whose runs did
    /// not end within it.
    pub unrepaired: usize,
    /// For restarts: trials in which systemd started the subscriber more
    /// than once, and in which it started other managed units.
    pub restarts: Option<Restarts>,
    /// The floor (issue 46), measured in turn with the trials: the drift
    /// and its undoing typed at once on [`FLOOR_UNIT`], in ms; empty when
    /// the drift has none.
    pub floor: Vec<f64>,
    /// Floor trials whose times did not make sense.
    pub floor_failed: usize,
    /// What the floor is and how it is timed.
    pub floor_measured: String,
}

#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Restarts {
    pub more_than_once: usize,
    pub never: usize,
    pub others: usize,
}

/// The watch while nothing happens.
#[derive(Debug, Clone)]
pub(super) struct Idle {
    pub wall: Duration,
    pub before: Snapshot,
    pub after: Snapshot,
    /// Report rewrites seen (runs).
    pub runs: usize,
    /// strace's count of each syscall, or why strace could not be used.
    pub syscalls: Result<Vec<(String, u64)>, String>,
    /// `strace -V`'s first line.
    pub strace: String,
}

impl Default for Idle {
    fn default() -> Idle {
        Idle {
            wall: Duration::ZERO,
            before: Snapshot::default(),
            after: Snapshot::default(),
            runs: 0,
            syscalls: Err("not measured".into()),
            strace: String::new(),
        }
    }
}

/// Units no policy manages coming and going.
#[derive(Debug, Clone, Default)]
pub(super) struct Transient {
    pub units: usize,
    pub took: Duration,
    pub runs: usize,
    pub before: Snapshot,
    pub after: Snapshot,
    /// Transient units still loaded afterwards.
    pub left: usize,
}

/// The watch's memory as repairs add up.
#[derive(Debug, Clone, Default)]
pub(super) struct Memory {
    pub points: Vec<MemoryPoint>,
    /// Why the rounds stopped short, if they did.
    pub stopped: Option<String>,
}

/// The watch's memory after some repairs.
#[derive(Debug, Clone, Default)]
pub(super) struct MemoryPoint {
    /// Repairs the bench made the watch do.
    pub repairs: usize,
    /// Starts of managed units in systemd's journal since the watch began.
    pub started: usize,
    pub rss_kb: u64,
    /// The peak since the point before (since the start for the first).
    pub hwm_kb: u64,
}

/// What `/proc` says of the watch process.
#[derive(Debug, Clone, Default)]
pub(super) struct Snapshot {
    /// utime + stime of all its threads, and of its waited-for children.
    pub ticks: u64,
    pub child_ticks: u64,
    pub clk_tck: u64,
    pub threads: usize,
    /// Context switches of all its threads (each wake-up is one).
    pub switches: u64,
    /// Read and write syscalls (`/proc/PID/io` `syscr`, `syscw`).
    pub syscr: u64,
    pub syscw: u64,
    pub rss_kb: u64,
    pub hwm_kb: u64,
}

impl Snapshot {
    /// The CPU time between two snapshots, in seconds.
    pub(super) fn cpu_secs_since(&self, before: &Snapshot) -> f64 {
        self.ticks.saturating_sub(before.ticks) as f64 / self.clk_tck.max(1) as f64
    }
}

pub(super) struct WatchResults {
    pub machine: Machine,
    pub plan: WatchPlan,
    pub latency: Vec<Latency>,
    /// `None` with `--repairs` (not measured).
    pub idle: Option<Idle>,
    pub transient: Option<Transient>,
    pub memory: Option<Memory>,
    /// The simulated crash loop's start times, from the first.
    pub crash_loop: Vec<Duration>,
    pub load_at_end: String,
    pub duration: Duration,
}

/// The host starts the bench had the watch make, per unit, so that no unit
/// gets a third within the backoff's window: that start would be held back
/// (10 s and more), and a trial would time the hold, not the repair.
#[derive(Debug, Default)]
struct Starts(HashMap<String, Vec<Instant>>);

impl Starts {
    /// Sleeps until each of `units` can take one more start without
    /// [`backoff::STARTS`] of them falling within [`backoff::WINDOW`].
    fn pace(&self, units: &[String]) {
        let allowed = backoff::STARTS - 2;
        let ready = units
            .iter()
            .filter_map(|unit| {
                let starts = self.0.get(unit)?;
                let oldest_counted = starts.len().checked_sub(allowed + 1)?;
                // A second of margin: the watch counts a start when its run
                // ends, before the bench records it (after the runs ended).
                Some(starts[oldest_counted] + backoff::WINDOW + Duration::from_secs(1))
            })
            .max();
        if let Some(wait) = ready.and_then(|r| r.checked_duration_since(Instant::now())) {
            progress(&format!(
                "waiting {:.0} s: another start now would be held back as a crash loop",
                wait.as_secs_f64()
            ));
            std::thread::sleep(wait);
        }
    }

    /// Records a start of each of `units`, now (after the runs ended).
    fn record(&mut self, units: &[String]) {
        let now = Instant::now();
        for unit in units {
            self.0.entry(unit.clone()).or_default().push(now);
        }
    }
}

/// The subscribed file of file subscriber `n`: `bw-001`'s is `app.conf`.
fn config_file(n: usize) -> String {
    match n {
        1 => format!("{CONFIG_DIR}/app.conf"),
        n => format!("{CONFIG_DIR}/app-{n:03}.conf"),
    }
}

/// The subscribed package of package subscriber `n`: `bw-002`'s is `bw-pkg`.
fn package(n: usize) -> String {
    match n {
        2 => "bw-pkg".into(),
        n => format!("bw-pkg-{n:03}"),
    }
}

fn unit(n: usize) -> String {
    format!("{PREFIX}-{n:03}")
}

/// The units whose files are edited, in turn: `bw-001` (`app.conf`) and
/// 15 more, so that an edit every ~2.5 s restarts each at most twice a
/// minute (under the backoff).
fn file_subscribers() -> Vec<usize> {
    std::iter::once(1).chain(3..=17).collect()
}

/// The units whose packages are upgraded, in turn: `bw-002` (`bw-pkg`) and
/// 9 more, for the same reason.
fn package_subscribers() -> Vec<usize> {
    std::iter::once(2).chain(18..=26).collect()
}

/// The units stopped and disabled, in turn: `bw-003` ... `bw-050`.
fn drift_units() -> Vec<String> {
    (3..=UNITS).map(unit).collect()
}

/// The settings: every unit running and enabled; the file and package
/// subscribers subscribe.
fn watch_manifest() -> String {
    let files = file_subscribers();
    let packages = package_subscribers();
    let mut text = String::from("- service:\n");
    for n in 1..=UNITS {
        text.push_str(&format!(
            "    - {}:\n        ensure: running\n        enable: true\n",
            unit(n)
        ));
        if files.contains(&n) {
            text.push_str(&format!(
                "        subscribe: [\"file#{}\"]\n",
                config_file(n)
            ));
        }
        if packages.contains(&n) {
            text.push_str(&format!(
                "        subscribe: [\"package#{}\"]\n",
                package(n)
            ));
        }
    }
    text
}

/// A unit's `.wants/` link, which `enable` makes.
fn wants_link(unit: &str) -> String {
    format!("/etc/systemd/system/multi-user.target.wants/{unit}.service")
}

/// Builds package `name` at `version` (empty, as dpkg-deb makes it) and
/// returns the `.deb`'s path, inside the sandbox.
fn build_package_script(name: &str, version: &str) -> (String, String) {
    let dir = format!("/var/tmp/{name}-{version}");
    let script = format!(
        "set -e; d={dir}; rm -rf $d; mkdir -p $d/DEBIAN; \
         printf 'Package: {name}\\nVersion: {version}\\nArchitecture: all\\nMaintainer: Bench <bench@example.com>\\nDescription: a watched package\\n' > $d/DEBIAN/control; \
         dpkg-deb --build $d $d.deb >/dev/null"
    );
    (script, format!("{dir}.deb"))
}

/// The crash loop of the backoff's test, with the watch's own `Backoff`: a
/// unit that dies as soon as it starts, started again [`REACTION`] after
/// each death unless held, for an hour. The start times, from the first.
fn crash_loop() -> Vec<Duration> {
    let zero = Instant::now();
    let mut backoff = Backoff::default();
    let mut starts = Vec::new();
    let mut now = zero;
    while now - zero < HOUR {
        starts.push(now - zero);
        now = match backoff.started("bw-crash.service", now) {
            Some(hold) => hold.until,
            None => now + REACTION,
        };
    }
    starts
}

/// What the watch in the sandbox showed.
struct Measured {
    latency: Vec<Latency>,
    /// `None` with `--repairs` (not measured).
    idle: Option<Idle>,
    transient: Option<Transient>,
    memory: Option<Memory>,
}

/// Says how long a phase took (what a full run's length is estimated from).
fn took(since: Instant) {
    progress(&format!("took {:.0} s", since.elapsed().as_secs_f64()));
}

/// One watch in the sandbox, measured.
struct Session<'a> {
    bench: &'a Bench,
    plan: WatchPlan,
    starts: Starts,
    /// The watch's PID inside the sandbox.
    pid: u32,
    /// systemd's journal cursor when the watch had started.
    cursor_at_start: String,
}

impl Bench {
    /// `--watch`: every watch figure, in one sandbox.
    pub(super) fn watch(&self, machine: Machine) -> anyhow::Result<WatchResults> {
        let plan = WatchPlan::new(self.plan.quick, self.plan.watch_repairs_only);
        step(&format!("Watch mode: {UNITS} managed units"));
        let settings = self.watch_setup()?;
        let mut session = Session::start(self, plan.clone(), &settings)?;
        let measured = session.measure_all();
        // The watch ends with SIGTERM, as systemd stops the service.
        let stopped = self.sh(&format!("systemctl stop {WATCH_UNIT}"));
        let Measured {
            latency,
            idle,
            transient,
            memory,
        } = measured?;
        stopped?;
        step("The crash loop, on a simulated clock");
        let crash_loop = crash_loop();
        println!(
            "{} host starts in the first hour ({} ms reaction, the watch's own Backoff)",
            crash_loop.len(),
            REACTION.as_millis()
        );
        Ok(WatchResults {
            machine,
            plan,
            latency,
            idle,
            transient,
            memory,
            crash_loop,
            load_at_end: String::new(),
            duration: Duration::ZERO,
        })
    }

    /// The units (running and enabled), the subscribed files and packages,
    /// and the signed settings; returns the settings' path.
    fn watch_setup(&self) -> anyhow::Result<PathBuf> {
        let units: Vec<String> = (1..=UNITS).map(unit).collect();
        let mut all = units.clone();
        all.push(FLOOR_UNIT.to_owned());
        self.install_units(&all, sleep_service)?;
        self.sh(&Self::set_all(&all, true))?;
        let mut script = format!("set -e; mkdir -p {CONFIG_DIR}\n");
        for n in file_subscribers() {
            script.push_str(&format!("echo 'workers = 1' > {}\n", config_file(n)));
        }
        self.sh(&script)?;
        for n in package_subscribers() {
            let (build, deb) = build_package_script(&package(n), "1.0");
            self.sh(&format!("{build}; dpkg -i {deb} >/dev/null"))?;
        }
        self.check_converged(&units, "the setup")?;
        self.write("watch-manifest.yaml", &watch_manifest())
    }

    /// Runs `what` inside the sandbox with the bench's agent.
    fn inside<T: DeserializeOwned>(&self, what: &Inside) -> anyhow::Result<T> {
        let json = serde_json::to_string(what)?;
        let agent = self.agent.to_string_lossy();
        let out = self.sandbox.exec(&[&agent, "__watch", &json]);
        ensure!(
            out.status.success(),
            "the bench agent failed in the sandbox ({}) doing {what:?}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
        serde_json::from_slice(&out.stdout).with_context(|| {
            format!(
                "reading the agent's answer: {}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }

    /// What the watch said (its journal).
    fn watch_journal(&self) -> String {
        let out = self
            .sandbox
            .exec(&["journalctl", "--no-pager", "-o", "cat", "-u", WATCH_UNIT]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The journal's cursor now: what is logged later comes after it.
    fn journal_cursor(&self) -> anyhow::Result<String> {
        let out = self.sh("journalctl -n 0 --show-cursor -q")?;
        out.lines()
            .find_map(|l| l.strip_prefix("-- cursor: "))
            .map(str::to_owned)
            .context("journalctl showed no cursor")
    }

    /// How many times systemd started each unit since `cursor`. (Read as
    /// JSON and filtered here: journalctl 252 skips a match's first entry
    /// after a cursor that does not match.)
    fn started_since(&self, cursor: &str) -> anyhow::Result<BTreeMap<String, usize>> {
        let out = self.sandbox.exec(&[
            "journalctl",
            "--no-pager",
            "-o",
            "json",
            "--output-fields=MESSAGE_ID,UNIT",
            &format!("--after-cursor={cursor}"),
        ]);
        ensure!(
            out.status.success(),
            "journalctl failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        let mut started = BTreeMap::new();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let Ok(entry) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            if entry["MESSAGE_ID"] != STARTED {
                continue;
            }
            if let Some(unit) = entry["UNIT"].as_str() {
                let unit = unit.trim_end_matches(".service").to_owned();
                *started.entry(unit).or_insert(0) += 1;
            }
        }
        Ok(started)
    }

    /// `/proc` of process `pid` inside the sandbox.
    fn snapshot(&self, pid: u32) -> anyhow::Result<Snapshot> {
        let out = self.sh(&format!(
            "p=/proc/{pid}; getconf CLK_TCK; cat $p/stat; cat $p/io; \
             grep -E '^(VmRSS|VmHWM):' $p/status; cat $p/task/*/status | grep ctxt_switches"
        ))?;
        parse_snapshot(&out).with_context(|| format!("reading /proc/{pid}: {out}"))
    }
}

/// Reads what [`Bench::snapshot`]'s script printed.
fn parse_snapshot(out: &str) -> Option<Snapshot> {
    let mut lines = out.lines();
    let clk_tck = lines.next()?.trim().parse().ok()?;
    let stat = lines.next()?;
    // The fields after "(comm)": [0] is field 3 (state), so utime (14) is [11].
    let fields: Vec<u64> = stat
        .rsplit_once(") ")?
        .1
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    let field = |n: usize| fields.get(n - 3).copied().unwrap_or(0);
    let mut snapshot = Snapshot {
        ticks: field(14) + field(15),
        child_ticks: field(16) + field(17),
        clk_tck,
        threads: field(20) as usize,
        ..Snapshot::default()
    };
    for line in lines {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let number = || -> u64 {
            value
                .split_whitespace()
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        match key {
            "syscr" => snapshot.syscr = number(),
            "syscw" => snapshot.syscw = number(),
            "VmRSS" => snapshot.rss_kb = number(),
            "VmHWM" => snapshot.hwm_kb = number(),
            "voluntary_ctxt_switches" | "nonvoluntary_ctxt_switches" => {
                snapshot.switches += number()
            }
            _ => {}
        }
    }
    Some(snapshot)
}

/// strace -c's table: calls per syscall.
fn parse_strace_counts(table: &str) -> Vec<(String, u64)> {
    let mut counts = Vec::new();
    for line in table.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        // % time, seconds, usecs/call, calls, [errors,] syscall.
        if words.len() < 5 || words[0].parse::<f64>().is_err() {
            continue;
        }
        let (Some(name), Ok(calls)) = (words.last(), words[3].parse::<u64>()) else {
            continue;
        };
        if *name != "total" {
            counts.push(((*name).to_owned(), calls));
        }
    }
    counts
}

impl<'a> Session<'a> {
    /// Starts `host watch` as the packaged service starts (Type=notify:
    /// systemd-run returns once it said READY=1 after its first run).
    fn start(bench: &'a Bench, plan: WatchPlan, settings: &Path) -> anyhow::Result<Session<'a>> {
        let cursor_at_start = bench.journal_cursor()?;
        let host = bench.host.display().to_string();
        let policy = bench.manifest_policy.display().to_string();
        let key = bench.public_key.display().to_string();
        let settings = settings.display().to_string();
        let started = Instant::now();
        let out = bench.sandbox.exec(&[
            "systemd-run",
            "--unit",
            WATCH_UNIT,
            "--property=Type=notify",
            "--property=NotifyAccess=main",
            "--property=TimeoutStartSec=120",
            "--",
            &host,
            "watch",
            &policy,
            "--trusted-key",
            &key,
            "--settings",
            &settings,
            "--report",
            REPORT,
            "--watch-path",
            CONFIG_DIR,
        ]);
        ensure!(
            out.status.success(),
            "the watch did not become ready: {}{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            bench.watch_journal()
        );
        let pid: u32 = bench
            .sh(&format!("systemctl show -P MainPID {WATCH_UNIT}"))?
            .trim()
            .parse()
            .context("the watch's MainPID")?;
        ensure!(pid != 0, "the watch has no main process");
        println!(
            "host watch ready in {} ms (PID {pid} in the sandbox)",
            started.elapsed().as_millis()
        );
        Ok(Session {
            bench,
            plan,
            starts: Starts::default(),
            pid,
            cursor_at_start,
        })
    }

    fn measure_all(&mut self) -> anyhow::Result<Measured> {
        if self.plan.repairs_only {
            let mut latency = Vec::new();
            for measure in [Self::disables, Self::stops, Self::apart] {
                let phase = Instant::now();
                latency.push(measure(self)?);
                took(phase);
            }
            return Ok(Measured {
                latency,
                idle: None,
                transient: None,
                memory: None,
            });
        }
        // Memory first, so that its repair counts are the watch's only ones.
        let phase = Instant::now();
        let memory = self.memory()?;
        if memory.stopped.is_some() {
            self.wait_converged(Duration::from_secs(300))?;
        }
        took(phase);
        let mut latency = Vec::new();
        for measure in [
            Self::disables,
            Self::stops,
            Self::apart,
            Self::edits,
            Self::upgrades,
        ] {
            let phase = Instant::now();
            latency.push(measure(self)?);
            took(phase);
        }
        let phase = Instant::now();
        let idle = self.idle()?;
        took(phase);
        let phase = Instant::now();
        let transient = self.transient()?;
        took(phase);
        Ok(Measured {
            latency,
            idle: Some(idle),
            transient: Some(transient),
            memory: Some(memory),
        })
    }

    /// Waits up to `limit` until every managed unit is active again (after
    /// repairs that did not come in time); says how that went.
    fn wait_converged(&self, limit: Duration) -> anyhow::Result<()> {
        let units: Vec<String> = (1..=UNITS).map(unit).collect();
        let started = Instant::now();
        while started.elapsed() < limit {
            if self.bench.check_converged(&units, "waiting").is_ok() {
                progress(&format!(
                    "all units active and enabled again after {:.0} s",
                    started.elapsed().as_secs_f64()
                ));
                return Ok(());
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        progress(&format!(
            "not all units active and enabled again after {} s: going on",
            limit.as_secs()
        ));
        Ok(())
    }

    fn trial(&self, drift: Vec<String>, until: Until) -> anyhow::Result<Repair> {
        self.bench.inside(&Inside::Trial(Trial {
            drift,
            until,
            report: REPORT.into(),
            quiet_ms: QUIET.as_millis() as u64,
            timeout_ms: REPAIR_TIMEOUT.as_millis() as u64,
        }))
    }

    /// Stops `ROUND` units at once, again and again, reading the watch's
    /// memory at each count of [`WatchPlan::repairs`]. A round not repaired
    /// in time ends the rounds (the other figures are still measured).
    fn memory(&mut self) -> anyhow::Result<Memory> {
        step(&format!(
            "Memory: rounds of {ROUND} units stopped at once, up to {} repairs",
            self.plan.repairs.last().copied().unwrap_or(0)
        ));
        let mut memory = Memory {
            points: vec![self.memory_point(0)?],
            stopped: None,
        };
        let units = drift_units();
        let mut done = 0;
        let mut next = 0;
        for target in self.plan.repairs.clone() {
            while done < target {
                let batch: Vec<String> = (0..ROUND.min(target - done))
                    .map(|i| units[(next + i) % units.len()].clone())
                    .collect();
                next = (next + batch.len()) % units.len();
                self.starts.pace(&batch);
                let mut drift = vec!["systemctl".to_owned(), "stop".into(), "--".into()];
                drift.extend(batch.iter().cloned());
                let repair = self.trial(drift, Until::Active(batch.clone()))?;
                self.starts.record(&batch);
                if repair.seen_after_us.is_none() || !repair.settled {
                    let why = format!(
                        "after {done} repairs, {} units stopped at once were not all started \
                         again, or the runs did not end, within {} s",
                        batch.len(),
                        REPAIR_TIMEOUT.as_secs()
                    );
                    progress(&format!(
                        "{why}; the watch said last:\n{}",
                        tail(&self.bench.watch_journal(), 1500)
                    ));
                    memory.stopped = Some(why);
                    return Ok(memory);
                }
                done += batch.len();
            }
            let point = self.memory_point(done)?;
            progress(&format!(
                "after {done} repairs ({} starts in systemd's journal): VmRSS {} KiB, VmHWM {} KiB",
                point.started, point.rss_kb, point.hwm_kb
            ));
            memory.points.push(point);
        }
        Ok(memory)
    }

    /// The watch's memory now. Its peak is then reset (`clear_refs` 5), so
    /// that the next point's `VmHWM` is the peak since this one: a peak
    /// from the start (compiling the policy) hides nothing later.
    fn memory_point(&self, repairs: usize) -> anyhow::Result<MemoryPoint> {
        let snapshot = self.bench.snapshot(self.pid)?;
        self.bench
            .sh(&format!("echo 5 > /proc/{}/clear_refs", self.pid))?;
        let started = self.bench.started_since(&self.cursor_at_start)?;
        Ok(MemoryPoint {
            repairs,
            started: (1..=UNITS).filter_map(|n| started.get(&unit(n))).sum(),
            rss_kb: snapshot.rss_kb,
            hwm_kb: snapshot.hwm_kb,
        })
    }

    /// `systemctl disable`: until the `.wants/` link is back.
    fn disables(&mut self) -> anyhow::Result<Latency> {
        step("Repair latency: systemctl disable");
        let units = drift_units();
        let mut latency = Latency {
            drift: "`systemctl disable`".into(),
            measured: "from `disable` returning until the unit's `.wants/` link exists again \
                       (polled every ms)"
                .into(),
            floor_measured: format!(
                "`systemctl disable {FLOOR_UNIT} && systemctl enable {FLOOR_UNIT}` (a unit no \
                 policy manages), from `disable` returning to the modification time of the \
                 `.wants/` link `enable` made"
            ),
            ..Latency::default()
        };
        for k in 0..self.plan.trials {
            let unit = &units[k % units.len()];
            let drift = ["systemctl", "disable", "--quiet", "--", unit].map(String::from);
            let repair = self.trial(drift.to_vec(), Until::Link(wants_link(unit)))?;
            latency.add(repair.seen_after_us.filter(|_| repair.settled));
            let floor: FloorTime = self.bench.inside(&Inside::Floor(Floor::Disable {
                unit: FLOOR_UNIT.into(),
                link: wants_link(FLOOR_UNIT),
            }))?;
            latency.add_floor(floor.us);
        }
        latency.say();
        Ok(latency)
    }

    /// `systemctl stop`: systemd's own times, the unit entering `inactive`
    /// to entering `active` again.
    fn stops(&mut self) -> anyhow::Result<Latency> {
        step("Repair latency: systemctl stop");
        let units = drift_units();
        let mut latency = Latency {
            drift: "`systemctl stop`".into(),
            measured: "systemd's `InactiveEnterTimestampMonotonic` at the stop to \
                       `ActiveEnterTimestampMonotonic` after the repair"
                .into(),
            floor_measured: format!(
                "`systemctl stop {FLOOR_UNIT} && systemctl start {FLOOR_UNIT}` (a unit no policy \
                 manages), systemd's `InactiveEnterTimestampMonotonic` to \
                 `ActiveEnterTimestampMonotonic`"
            ),
            ..Latency::default()
        };
        for k in 0..self.plan.trials {
            let unit = units[k % units.len()].clone();
            let batch = [unit.clone()];
            self.starts.pace(&batch);
            let drift = ["systemctl", "stop", "--", &unit].map(String::from);
            let repair = self.trial(drift.to_vec(), Until::Active(batch.to_vec()))?;
            self.starts.record(&batch);
            self.add_stop(&mut latency, &repair)?;
        }
        latency.say();
        Ok(latency)
    }

    /// A stop's repair, by systemd's timestamps of the unit, then a floor
    /// trial of a stop (`bw-floor` stopped and started by hand).
    fn add_stop(&self, latency: &mut Latency, repair: &Repair) -> anyhow::Result<()> {
        let us = match (repair.inactive_enter_us, repair.active_enter_us) {
            (Some(down), Some(up)) if up > down && repair.settled => Some(up - down),
            _ => None,
        };
        latency.add(us);
        let floor: FloorTime = self
            .bench
            .inside(&Inside::Floor(Floor::Stop(FLOOR_UNIT.into())))?;
        latency.add_floor(floor.us);
        Ok(())
    }

    /// Two units stopped 0.5 s apart (issue 46): the second drift comes
    /// while the first's repair waits its settle window; timed as a lone
    /// stop, by systemd's timestamps of the second unit.
    fn apart(&mut self) -> anyhow::Result<Latency> {
        step(&format!(
            "Repair latency: two systemctl stops {} ms apart",
            APART.as_millis()
        ));
        let units = drift_units();
        let mut latency = Latency {
            drift: format!(
                "two `systemctl stop`s {:.1} s apart (the second)",
                APART.as_secs_f64()
            ),
            measured: format!(
                "one unit stopped, another {} ms later; the second's \
                 `InactiveEnterTimestampMonotonic` at its stop to `ActiveEnterTimestampMonotonic` \
                 after the repair (the first's repair is under way then: its start's settle \
                 window, 1 s, is open); the second unit is the lone stop's of the same trial, \
                 at the same place in the manifest",
                APART.as_millis()
            ),
            floor_measured: format!(
                "`systemctl stop {FLOOR_UNIT} && systemctl start {FLOOR_UNIT}`, as for a lone stop"
            ),
            ..Latency::default()
        };
        for k in 0..self.plan.trials {
            // The second is the lone stop's unit of the same trial: a repair
            // costs a status per entry before its unit in the manifest, so
            // the two are compared at the same places. The first is half the
            // manifest away.
            let second = units[k % units.len()].clone();
            let first = units[(k + units.len() / 2) % units.len()].clone();
            let batch = [first.clone(), second.clone()];
            self.starts.pace(&batch);
            let repair: Repair = self.bench.inside(&Inside::Apart(Apart {
                first,
                second,
                gap_ms: APART.as_millis() as u64,
                report: REPORT.into(),
                quiet_ms: QUIET.as_millis() as u64,
                timeout_ms: REPAIR_TIMEOUT.as_millis() as u64,
            }))?;
            self.starts.record(&batch);
            self.add_stop(&mut latency, &repair)?;
        }
        latency.say();
        Ok(latency)
    }

    /// `sed -i` of a subscribed file: until systemd says its subscriber
    /// entered `active` again.
    fn edits(&mut self) -> anyhow::Result<Latency> {
        step("Repair latency: sed -i of a subscribed file");
        let subscribers = file_subscribers();
        let mut latency = Latency {
            drift: "`sed -i` of a subscribed file".into(),
            measured: format!(
                "from `sed` returning to the subscriber's `ActiveEnterTimestampMonotonic` \
                 (restart); the edits rotate over {} subscribers (`bw-001`: `{}`)",
                subscribers.len(),
                config_file(1)
            ),
            restarts: Some(Restarts::default()),
            ..Latency::default()
        };
        for k in 0..self.plan.trials {
            let n = subscribers[k % subscribers.len()];
            let drift = [
                "sed".to_owned(),
                "-i".into(),
                format!("s/^workers = .*/workers = {}/", k + 2),
                config_file(n),
            ];
            self.restart_trial(&mut latency, &unit(n), drift.to_vec())?;
        }
        latency.say();
        Ok(latency)
    }

    /// A package upgrade (`dpkg -i` of a newer version, built beforehand):
    /// until systemd says its subscriber entered `active` again.
    fn upgrades(&mut self) -> anyhow::Result<Latency> {
        step("Repair latency: dpkg -i of a subscribed package's next version");
        let subscribers = package_subscribers();
        let mut latency = Latency {
            drift: "`dpkg -i` (upgrade) of a subscribed package".into(),
            measured: format!(
                "from `dpkg -i` returning to the subscriber's `ActiveEnterTimestampMonotonic` \
                 (restart); the upgrades rotate over {} packages (`bw-002`: `{}`); fewer trials \
                 ({} here; {} full, {} with --quick), as each builds its `.deb` first (untimed)",
                subscribers.len(),
                package(2),
                self.plan.upgrades,
                WatchPlan::new(false, false).upgrades,
                WatchPlan::new(true, false).upgrades
            ),
            restarts: Some(Restarts::default()),
            ..Latency::default()
        };
        for k in 0..self.plan.upgrades {
            let n = subscribers[k % subscribers.len()];
            let version = format!("1.{}", k / subscribers.len() + 1);
            let (build, deb) = build_package_script(&package(n), &version);
            self.bench.sh(&build)?;
            let drift = ["dpkg", "-i", &deb].map(String::from);
            self.restart_trial(&mut latency, &unit(n), drift.to_vec())?;
        }
        latency.say();
        Ok(latency)
    }

    /// One drift that must restart `unit` once, and no other unit.
    fn restart_trial(
        &mut self,
        latency: &mut Latency,
        unit: &str,
        drift: Vec<String>,
    ) -> anyhow::Result<()> {
        let batch = [unit.to_owned()];
        self.starts.pace(&batch);
        let cursor = self.bench.journal_cursor()?;
        let repair = self.trial(drift, Until::Restarted(unit.to_owned()))?;
        self.starts.record(&batch);
        let us = match repair.active_enter_us {
            Some(up) if repair.seen_after_us.is_some() && repair.settled => {
                Some(up.saturating_sub(repair.drifted_us))
            }
            _ => None,
        };
        latency.add(us);
        let started = self.bench.started_since(&cursor)?;
        let restarts = latency.restarts.get_or_insert_with(Restarts::default);
        match started.get(unit).copied().unwrap_or(0) {
            0 => restarts.never += 1,
            1 => {}
            _ => restarts.more_than_once += 1,
        }
        let managed = |u: &&String| (1..=UNITS).any(|n| **u == self::unit(n));
        if started.keys().filter(managed).any(|u| u != unit) {
            restarts.others += 1;
        }
        Ok(())
    }

    /// Converged and quiet: CPU, wake-ups and syscalls of the watch over
    /// the idle period, with strace attached to all its threads.
    fn idle(&mut self) -> anyhow::Result<Idle> {
        let secs = self.plan.idle.as_secs();
        step(&format!("Idle: {secs} s, converged and quiet"));
        self.full_run()?;
        let log = "/run/bw-strace.txt";
        let before = self.bench.snapshot(self.pid)?;
        let started = Instant::now();
        let secs_text = secs.to_string();
        let pid = self.pid.to_string();
        let traced: Written = self.bench.inside(&Inside::Writes(Writes {
            argv: [
                "timeout", "-s", "INT", &secs_text, "strace", "-f", "-c", "-o", log, "-p", &pid,
            ]
            .map(String::from)
            .to_vec(),
            path: REPORT.into(),
            tail_ms: 0,
        }))?;
        let mut runs = traced.writes;
        // strace that could not attach ends at once: the period is then
        // measured without it.
        let syscalls = if traced.ms >= self.plan.idle.as_secs_f64() * 900.0 {
            Ok(parse_strace_counts(&self.bench.sh(&format!("cat {log}"))?))
        } else {
            let rest = self.plan.idle.saturating_sub(started.elapsed());
            let slept: Written = self.bench.inside(&Inside::Writes(Writes {
                argv: vec!["sleep".into(), format!("{:.3}", rest.as_secs_f64())],
                path: REPORT.into(),
                tail_ms: 0,
            }))?;
            runs += slept.writes;
            Err(format!(
                "strace ended at once ({:?}): {}",
                traced.code,
                traced.stderr.trim()
            ))
        };
        let wall = started.elapsed();
        let after = self.bench.snapshot(self.pid)?;
        let idle = Idle {
            wall,
            before,
            after,
            runs,
            syscalls,
            strace: tools::version_of("strace", &["-V"]).unwrap_or_default(),
        };
        progress(&format!(
            "CPU {:.3} s in {:.0} s, {} runs, {} context switches",
            idle.after.cpu_secs_since(&idle.before),
            wall.as_secs_f64(),
            runs,
            idle.after.switches.saturating_sub(idle.before.switches)
        ));
        Ok(idle)
    }

    /// A full run (SIGHUP), ended: the next resync (every 15 min, give or
    /// take a tenth) then comes after the idle period and the transient
    /// units, which must see no run.
    fn full_run(&self) -> anyhow::Result<()> {
        let written: Written = self.bench.inside(&Inside::Writes(Writes {
            argv: ["kill", "-HUP", &self.pid.to_string()]
                .map(String::from)
                .to_vec(),
            path: REPORT.into(),
            tail_ms: 3000,
        }))?;
        ensure!(
            written.code == Some(0),
            "kill -HUP {}: {}",
            self.pid,
            written.stderr.trim()
        );
        if written.writes == 0 {
            progress("the full run after SIGHUP wrote no report within 3 s");
        }
        Ok(())
    }

    /// Transient units no policy manages, started and stopped one after
    /// the other: the runs they woke and the CPU the watch used meanwhile.
    fn transient(&mut self) -> anyhow::Result<Transient> {
        step(&format!(
            "Units no policy manages: {TRANSIENT_UNITS} transient units"
        ));
        let before = self.bench.snapshot(self.pid)?;
        let script = format!(
            "i=0; while [ $i -lt {TRANSIENT_UNITS} ]; do i=$((i+1)); \
             systemd-run --unit=bw-tr-$i --quiet true || exit 1; done"
        );
        let written: Written = self.bench.inside(&Inside::Writes(Writes {
            argv: vec!["sh".into(), "-c".into(), script],
            path: REPORT.into(),
            // A run woken by the last units is due after the debounce.
            tail_ms: 1500,
        }))?;
        ensure!(
            written.code == Some(0),
            "starting transient units failed: {}",
            written.stderr.trim()
        );
        let after = self.bench.snapshot(self.pid)?;
        let left = self
            .bench
            .sh("systemctl list-units --all --no-legend --plain 'bw-tr-*' | wc -l")?
            .trim()
            .parse()
            .unwrap_or(0);
        let transient = Transient {
            units: TRANSIENT_UNITS,
            took: Duration::from_secs_f64(written.ms / 1e3),
            runs: written.writes,
            before,
            after,
            left,
        };
        progress(&format!(
            "{} units in {:.1} s: {} runs, watch CPU {:.3} s",
            transient.units,
            transient.took.as_secs_f64(),
            transient.runs,
            transient.after.cpu_secs_since(&transient.before)
        ));
        Ok(transient)
    }
}

impl Latency {
    fn add(&mut self, us: Option<u64>) {
        self.trials += 1;
        match us {
            Some(us) => self.ms.push(us as f64 / 1e3),
            None => self.unrepaired += 1,
        }
        if let Some(&ms) = self.ms.last().filter(|_| us.is_some()) {
            progress(&format!("{} {}: {ms:.1} ms", self.drift, self.trials));
        } else {
            progress(&format!("{} {}: not repaired", self.drift, self.trials));
        }
    }

    fn add_floor(&mut self, us: Option<u64>) {
        match us {
            Some(us) => {
                self.floor.push(us as f64 / 1e3);
                progress(&format!(
                    "{} {}: floor {:.1} ms",
                    self.drift,
                    self.trials,
                    us as f64 / 1e3
                ));
            }
            None => {
                self.floor_failed += 1;
                progress(&format!("{} {}: floor not timed", self.drift, self.trials));
            }
        }
    }

    fn say(&self) {
        println!(
            "{}: {} trials, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms, {} not repaired",
            self.drift,
            self.trials,
            percentile(&self.ms, 0.5),
            percentile(&self.ms, 0.99),
            percentile(&self.ms, 1.0),
            self.unrepaired
        );
        if !self.floor.is_empty() {
            let (p50, p99) = (percentile(&self.ms, 0.5), percentile(&self.ms, 0.99));
            let (f50, f99) = (percentile(&self.floor, 0.5), percentile(&self.floor, 0.99));
            println!(
                "{} floor: {} trials, p50 {f50:.1} ms, p99 {f99:.1} ms; host / floor: p50 {:.2}×, p99 {:.2}×",
                self.drift,
                self.floor.len(),
                p50 / f50,
                p99 / f99
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strace_counts_are_read_from_its_table_errors_column_or_not() {
        let table = "\
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 60.00    0.000030          10         3         1 futex
 40.00    0.000020          20         1           epoll_wait
------ ----------- ----------- --------- --------- ----------------
100.00    0.000050          12         4         1 total
";
        assert_eq!(
            parse_strace_counts(table),
            [("futex".to_owned(), 3), ("epoll_wait".to_owned(), 1)]
        );
    }

    #[test]
    fn a_snapshot_adds_up_the_threads() {
        let out = "100\n\
12 (host watch) S 1 12 12 0 -1 4194560 900 0 0 0 7 5 1 2 20 0 3 0 100 1000 200\n\
rchar: 10\nsyscr: 40\nsyscw: 9\n\
VmHWM:\t   30000 kB\nVmRSS:\t   25000 kB\n\
voluntary_ctxt_switches:\t10\nnonvoluntary_ctxt_switches:\t1\n\
voluntary_ctxt_switches:\t5\nnonvoluntary_ctxt_switches:\t0\n";
        let s = parse_snapshot(out).unwrap();
        assert_eq!(
            (s.clk_tck, s.ticks, s.child_ticks, s.threads),
            (100, 12, 3, 3)
        );
        assert_eq!((s.syscr, s.syscw, s.switches), (40, 9, 16));
        assert_eq!((s.rss_kb, s.hwm_kb), (25000, 30000));
    }

    #[test]
    fn the_crash_loop_and_the_settings_are_the_issue_s() {
        let starts = crash_loop();
        assert_eq!(starts.len(), 18, "{starts:?}");
        let manifest = watch_manifest();
        assert!(manifest.contains("    - bw-001:\n        ensure: running\n        enable: true\n        subscribe: [\"file#/etc/bw/app.conf\"]\n"));
        assert!(manifest.contains("subscribe: [\"package#bw-pkg\"]"));
        assert_eq!(manifest.matches("subscribe").count(), 26);
    }
}
