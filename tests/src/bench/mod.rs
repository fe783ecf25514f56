//! The benchmark: `host run` (release build) against a real systemd booted in
//! the test sandbox, compared in the same run with a shell script making the
//! same systemctl calls, and with Ansible and Puppet managing the same units.
//!
//! Every timed command runs inside the sandbox under the bench's own agent
//! (`agent.rs`), which times it from spawn to exit; resets between
//! repetitions (stopping and disabling the units) happen outside the timing.
//! The host and its baseline are measured alternately, repetition by
//! repetition, so that drift in the machine's load hits both alike. Last,
//! slow units (starts of 0.5 s) show what starting units side by side on
//! systemd's job engine saves against starting them one after the other.

mod agent;
mod breakdown;
mod machine;
mod memory;
mod peers;
mod report;
mod scale;
mod setup;
mod slow;
mod startup;
mod stats;
mod tools;
mod trace;
mod watch;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use policy_host_e2e::build;
use policy_host_e2e::sandbox::{sleep_service, Sandbox};
use serde_json::Value;

use agent::{Outcome, Spec};
use machine::Machine;
use report::{
    HostRun, Memory, Pair, Results, Scale, Slow, SlowScale, Startup, ToolRun, ToolRuns,
    SCALE_SIZES_FULL,
};

/// The size at which the host is compared with Ansible and Puppet, and the
/// overhead target is checked.
pub(crate) const REFERENCE_N: usize = 100;

/// Where the measured host keeps its compile cache inside the sandbox (warm).
const WARM_CACHE: &str = "/var/cache/bench-warm";
/// Emptied before every cold run.
const COLD_CACHE: &str = "/var/cache/bench-cold";
/// The sandbox's standard `PATH` (what `sdbox.sh exec` gives commands).
const STANDARD_PATH: &str = "/usr/sbin:/usr/bin:/sbin:/bin";
/// The names of the baselines besides the script (see `baselines`).
pub(crate) const SCRIPT_LANG_C: &str = "script, LANG=C";
/// The host with status read by `systemctl` (`--provider systemctl`).
pub(crate) const HOST_SYSTEMCTL: &str = "host, --provider systemctl";
/// The host without its settle window (`--settle 0`): a start counts when
/// its job ended, as before the window existed.
pub(crate) const HOST_SETTLE_OFF: &str = "host, --settle 0";
pub(crate) const NATIVE_LOOP: &str = "native loop";
pub(crate) const NATIVE_LOOP_THREADS: &str = "native loop, 2 reader threads per call";
pub(crate) const WHAT_IF_BATCHED_NOOP: &str = "what-if: batched, 2 processes";
pub(crate) const WHAT_IF_NO_RELOAD: &str = "what-if: enable --no-reload";
pub(crate) const WHAT_IF_BATCHED_CONVERGE: &str = "what-if: batched, 6 processes";
/// The tools, as sides of the slow-unit comparison.
pub(crate) const ANSIBLE: &str = "Ansible";
pub(crate) const PUPPET: &str = "Puppet";

/// The names of the units of the main measurements, and of the slow ones:
/// apart, so that the slow units' longer starts touch no other table.
const FAST_PREFIX: &str = "bench";
const SLOW_PREFIX: &str = "slow";
/// How long a slow unit's `ExecStartPre=` sleeps: its start job takes that
/// long in systemd, whoever asked for it.
pub(crate) const SLOW_START: &str = "0.5";

/// GNU time's output format: the maximum resident set size in KiB.
const MAXRSS_FORMAT: &str = "bench-maxrss-kb=%M";
/// The units of the example policy (`policies/example`).
const EXAMPLE_UNITS: [&str; 3] = ["httpd", "legacy-ftpd", "metrics-agent"];

const USAGE: &str = "\
usage: cargo run --release -p policy-host-e2e --features bench --bin bench -- [OPTIONS]

  --quick          fewer repetitions, N = 10 and 100 only (slow units too), no Ansible or Puppet
  --reps R         exactly R repetitions of every host/baseline measurement (default: as many
                   as fit in a time budget per measurement, between a minimum and a maximum)
  --no-tools       skip Ansible and Puppet
  --tools          compare with Ansible and Puppet even with --quick
  --markdown FILE  also write the results as Markdown to FILE
  --strace         measure nothing: show a syscall timeline (strace) of a warm run of the
                   example policy and of a no-op run at N = 10, to see where the host spends time
  --watch          measure only `host watch` (issue 32), 50 managed units: repair latency of a
                   stop, a disable, a subscribed file edited and a package upgraded; idle cost
                   (CPU, syscalls under strace); 1,000 unmanaged transient units; memory after
                   100 and 2,000 repairs; the crash-loop backoff on a simulated clock. With
                   --quick: 20 trials (5 upgrades) instead of 100 (20), 60 s idle instead of
                   10 min, memory after 100 and 500 repairs
  --repairs        with --watch: only the repair latencies of a stop, a disable, and two stops
                   0.5 s apart, each beside its floor (no memory, file, package, idle or
                   transient figures)
  --profile        measure only where a converging run's time goes (issue 46): at N = 10, 100,
                   300 (--quick: 10, 100), 3 runs (--reps R: R) of the host with --settle 0, each
                   report summed per operation and lined up with systemd's timestamps of the
                   starts, against one `systemctl start` and one `systemctl enable` of all units;
                   a no-op run against one `systemctl show` of all; at N = 100 `enable` one unit
                   at a time against one `enable` of all
";

#[derive(Debug, Clone)]
struct Options {
    quick: bool,
    reps: Option<usize>,
    tools: Option<bool>,
    markdown: Option<PathBuf>,
    strace: bool,
    watch: bool,
    /// `--repairs`: of the watch, only the repairs against their floors.
    repairs: bool,
    profile: bool,
}

impl Options {
    fn parse(args: &[String]) -> anyhow::Result<Options> {
        let mut options = Options {
            quick: false,
            reps: None,
            tools: None,
            markdown: None,
            strace: false,
            watch: false,
            repairs: false,
            profile: false,
        };
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--quick" => options.quick = true,
                "--no-tools" => options.tools = Some(false),
                "--strace" => options.strace = true,
                "--watch" => options.watch = true,
                "--repairs" => options.repairs = true,
                "--profile" => options.profile = true,
                "--tools" => options.tools = Some(true),
                "--reps" => {
                    let value = args.next().context("--reps needs a number")?;
                    let reps: usize = value.parse().context("--reps needs a number")?;
                    ensure!(reps >= 1, "--reps must be at least 1");
                    options.reps = Some(reps);
                }
                "--markdown" => {
                    options.markdown = Some(args.next().context("--markdown needs a file")?.into())
                }
                "-h" | "--help" => {
                    print!("{USAGE}");
                    std::process::exit(0);
                }
                other => bail!("unknown argument {other:?}\n{USAGE}"),
            }
        }
        ensure!(
            !options.repairs || options.watch,
            "--repairs is a part of --watch: give both"
        );
        Ok(options)
    }
}

/// How many repetitions of one measurement: as many as fit in `budget`
/// (judged after each repetition), at least `min`, at most `max`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reps {
    pub min: usize,
    pub max: usize,
    pub budget: Duration,
}

impl Reps {
    const fn new(min: usize, max: usize, budget_secs: u64) -> Reps {
        Reps {
            min,
            max,
            budget: Duration::from_secs(budget_secs),
        }
    }

    /// Exactly `n`.
    fn exactly(n: usize) -> Reps {
        Reps {
            min: n,
            max: n,
            budget: Duration::MAX,
        }
    }

    /// Whether to stop after `done` repetitions that took `elapsed`.
    fn enough(&self, done: usize, elapsed: Duration) -> bool {
        if done >= self.max {
            return true;
        }
        if done < self.min {
            return false;
        }
        let next = elapsed / done as u32;
        elapsed + next > self.budget
    }
}

/// How many repetitions of what.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub quick: bool,
    /// `--watch --repairs`.
    pub watch_repairs_only: bool,
    pub sizes: Vec<usize>,
    noop: Reps,
    converge: Reps,
    /// At N = 300 runs are long (each `systemctl enable` reloads systemd).
    noop_large: Reps,
    converge_large: Reps,
    converge_reference: Reps,
    pub startup_reps: usize,
    /// No-op runs measured for memory (converge: one).
    memory_reps: usize,
    /// Ansible and Puppet no-op runs (after a warm-up), and converging runs.
    tool_reps: usize,
    tool_converge_reps: usize,
    pub tools: bool,
    /// `--profile`'s runs of each command at each size.
    pub profile_reps: usize,
    /// The sizes of the slow-unit measurement and their repetitions: the
    /// shell script takes N × 0.55 s there (2.7 min at N = 300).
    slow: Vec<(usize, Reps)>,
}

impl Plan {
    fn new(options: &Options) -> Plan {
        let mut plan = if options.quick {
            Plan {
                quick: true,
                watch_repairs_only: options.repairs,
                sizes: vec![10, REFERENCE_N],
                noop: Reps::new(3, 5, 60),
                converge: Reps::new(2, 3, 60),
                noop_large: Reps::new(2, 3, 60),
                converge_large: Reps::new(2, 2, 60),
                converge_reference: Reps::new(2, 3, 60),
                startup_reps: 5,
                memory_reps: 1,
                tool_reps: 1,
                tool_converge_reps: 1,
                tools: false,
                profile_reps: 3,
                slow: vec![(10, Reps::new(2, 2, 60)), (REFERENCE_N, Reps::exactly(1))],
            }
        } else {
            Plan {
                quick: false,
                watch_repairs_only: options.repairs,
                sizes: SCALE_SIZES_FULL.to_vec(),
                noop: Reps::new(7, 15, 120),
                converge: Reps::new(5, 11, 120),
                noop_large: Reps::new(3, 9, 150),
                converge_large: Reps::new(3, 5, 300),
                converge_reference: Reps::new(3, 11, 240),
                startup_reps: 15,
                memory_reps: 3,
                tool_reps: 3,
                tool_converge_reps: 2,
                tools: true,
                profile_reps: 3,
                // With Ansible and Puppet a repetition at N = 100 takes ~5 min:
                // two of them; without, three.
                slow: vec![
                    (10, Reps::new(3, 7, 90)),
                    (REFERENCE_N, Reps::new(2, 3, 400)),
                    (300, Reps::new(1, 2, 400)),
                ],
            }
        };
        if let Some(reps) = options.reps {
            let exactly = Reps::exactly(reps);
            plan.noop = exactly;
            plan.converge = exactly;
            plan.noop_large = exactly;
            plan.converge_large = exactly;
            plan.converge_reference = exactly;
            plan.startup_reps = reps;
            plan.profile_reps = reps;
            for (_, slow) in &mut plan.slow {
                *slow = exactly;
            }
        }
        if let Some(tools) = options.tools {
            plan.tools = tools;
        }
        plan
    }

    fn reps(&self, n: usize, converge: bool) -> Reps {
        match (n.cmp(&REFERENCE_N), converge) {
            (std::cmp::Ordering::Greater, false) => self.noop_large,
            (std::cmp::Ordering::Greater, true) => self.converge_large,
            (std::cmp::Ordering::Equal, true) => self.converge_reference,
            (_, false) => self.noop,
            (_, true) => self.converge,
        }
    }
}

pub(crate) fn main() -> ExitCode {
    if agent::invoked_as_shim() {
        return agent::shim();
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("__inner") => return agent::inner(args.get(1).map_or("", String::as_str)),
        Some("__calls") => return agent::calls(&args[1..]),
        Some("__watch") => return watch::inside_main(args.get(1).map_or("", String::as_str)),
        _ => {}
    }
    let result = Options::parse(&args).and_then(|options| run(&options));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("\nbench failed: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(options: &Options) -> anyhow::Result<()> {
    let started = Instant::now();
    let plan = Plan::new(options);
    // Ansible and Puppet at N = 100 take minutes; the harness's default
    // per-command limit inside the sandbox is 300 s.
    std::env::set_var("SDBOX_EXEC_TIMEOUT", "1800");

    step("Building the host (release) and the policies");
    // A first release build of the host takes minutes: show cargo's progress.
    build::show_build_progress();
    let built_host = build::host_binary_release();
    let built_manifest = build::policy_wasm("manifest-policy");
    let built_example = build::policy_wasm("example-policy");

    let mut wanted = vec![("/usr/bin/time", "time")];
    if options.strace || options.watch {
        wanted.push(("strace", "strace"));
    }
    if plan.tools && !options.strace && !options.watch && !options.profile {
        wanted.push(("ansible-playbook", "ansible-core"));
        wanted.push(("puppet", "puppet-agent"));
    }
    tools::ensure_installed(&wanted)?;

    // Copies under the target directory, which the sandbox sees read-only at
    // the same path: a rebuild during the bench cannot swap the binaries.
    let work = build::target_dir()
        .join("bench")
        .join(std::process::id().to_string());
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let copy = |from: &Path, name: &str| -> anyhow::Result<PathBuf> {
        let to = work.join(name);
        std::fs::copy(from, &to)
            .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
        Ok(to)
    };
    let host = copy(&built_host, "host")?;
    let agent = copy(&std::env::current_exe()?, "bench-agent")?;
    let manifest_policy = copy(&built_manifest, "manifest_policy.wasm")?;
    let example_policy = copy(&built_example, "example_policy.wasm")?;
    let keys = work.join("keys");
    checked(
        std::process::Command::new(&host)
            .args(["keygen", "--unencrypted", "--out"])
            .arg(&keys),
        "host keygen",
    )?;
    for policy in [&manifest_policy, &example_policy] {
        checked(
            std::process::Command::new(&host)
                .arg("sign")
                .arg(policy)
                .arg("--key")
                .arg(keys.join("policy-host.key")),
            "host sign",
        )?;
    }
    let machine = Machine::describe(&host);
    println!(
        "host:   {} (copied from {})",
        host.display(),
        built_host.display()
    );
    println!("policy: {}", manifest_policy.display());

    step("Booting systemd in a sandbox");
    let sandbox = Sandbox::boot(&build::target_dir())?;
    // The host reads status over D-Bus when the system bus answers.
    sandbox.start_system_bus();
    println!(
        "systemd is PID {} here, up in {} ms",
        sandbox.pid(),
        sandbox.boot_time().as_millis()
    );
    let bench = Bench {
        sandbox,
        agent,
        host,
        manifest_policy,
        example_policy,
        public_key: keys.join("policy-host.pub"),
        work: work.clone(),
        plan,
    };
    if options.strace {
        let traced = bench.trace();
        return wind_down(bench.sandbox, &work, traced);
    }
    if options.profile {
        let profiled = bench.profile();
        let profiled = wind_down(bench.sandbox, &work, profiled)?;
        let markdown = format!(
            "{}{profiled}",
            report::machine_lines(&machine, &machine::load_average(), started.elapsed())
        );
        return publish(&markdown, options);
    }
    if options.watch {
        let results = bench.watch(machine);
        let mut results = wind_down(bench.sandbox, &work, results)?;
        results.duration = started.elapsed();
        results.load_at_end = machine::load_average();
        return publish(&watch::render(&results), options);
    }
    let results = bench.run_all(machine);
    let mut results = wind_down(bench.sandbox, &work, results)?;
    results.duration = started.elapsed();
    results.load_at_end = machine::load_average();
    publish(&report::render(&results), options)
}

/// Stops the sandbox and removes the work directory, whatever came of the
/// measurements: their error first, then the sandbox's.
fn wind_down<T>(sandbox: Sandbox, work: &Path, measured: anyhow::Result<T>) -> anyhow::Result<T> {
    let stopped = sandbox.stop();
    let _ = std::fs::remove_dir_all(work);
    let measured = measured?;
    stopped.context("stopping the sandbox")?;
    Ok(measured)
}

/// Prints the results, and writes them to `--markdown`'s file.
fn publish(markdown: &str, options: &Options) -> anyhow::Result<()> {
    step("Results");
    println!("{markdown}");
    if let Some(path) = &options.markdown {
        std::fs::write(path, markdown).with_context(|| format!("writing {}", path.display()))?;
        println!("(written to {})", path.display());
    }
    Ok(())
}

fn checked(cmd: &mut std::process::Command, what: &str) -> anyhow::Result<()> {
    let out = cmd.output().with_context(|| format!("running {what}"))?;
    ensure!(
        out.status.success(),
        "{what} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(())
}

fn step(title: &str) {
    println!("\n=== {title}");
}

fn progress(text: &str) {
    eprintln!("  {text}");
}

/// `bench-001`, `bench-002`, ... (`prefix` `bench`).
fn unit_names(prefix: &str, n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("{prefix}-{i:03}")).collect()
}

/// A service whose start takes [`SLOW_START`] seconds: the start job ends
/// only once `ExecStartPre=` has exited, as for a daemon that needs time to
/// come up. What starting units one after the other costs, and starting
/// them side by side saves.
fn slow_service(description: &str) -> String {
    format!(
        "[Unit]\nDescription={description}\n\n\
         [Service]\nExecStartPre=/bin/sleep {SLOW_START}\nExecStart=/bin/sleep infinity\n\n\
         [Install]\nWantedBy=multi-user.target\n"
    )
}

/// The manifest making every unit running and enabled.
fn manifest(units: &[String]) -> String {
    let mut text = String::from("- service:\n");
    for unit in units {
        text.push_str(&format!(
            "    - {unit}:\n        ensure: running\n        enable: true\n"
        ));
    }
    text
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

struct Bench {
    sandbox: Sandbox,
    agent: PathBuf,
    host: PathBuf,
    manifest_policy: PathBuf,
    example_policy: PathBuf,
    public_key: PathBuf,
    work: PathBuf,
    plan: Plan,
}

/// systemctl processes of a converging host run over D-Bus: the reload
/// before and the reload after. Starts are jobs on systemd's job engine and
/// enables `EnableUnitFiles`, both over the bus.
const CONVERGE_PROCESSES: usize = 2;

/// How a host run must have ended for its time to count.
#[derive(Debug, Clone, Copy)]
struct Expect {
    changed: usize,
    /// systemctl processes the run must have started.
    systemctl_calls: usize,
}

impl Bench {
    fn run_all(&self, machine: Machine) -> anyhow::Result<Results> {
        self.sh(&format!(
            "mkdir -p {dir} && ln -sf {agent} {shim}",
            dir = agent::SHIM_DIR,
            agent = self.agent.display(),
            shim = agent::shim_path().display()
        ))?;
        let startup = self.startup()?;
        let mut scale = Vec::new();
        let mut tools = None;
        let mut memory = None;
        let largest = *self.plan.sizes.iter().max().expect("at least one size");
        for &n in &self.plan.sizes {
            step(&format!("N = {n} units"));
            let units = unit_names(FAST_PREFIX, n);
            self.install_units(&units, sleep_service)?;
            let settings = self.write(&format!("manifest-{n}.yaml"), &manifest(&units))?;
            let noop = self.noop_pair(&units, &settings)?;
            let converge = self.converge_pair(&units, &settings)?;
            scale.push(Scale { n, noop, converge });
            if n == REFERENCE_N && self.plan.tools {
                tools = Some(self.tools(&units)?);
            }
            if n == largest {
                let last = scale.last().expect("just measured");
                memory = Some(self.memory(last, &settings)?);
            }
        }
        let slow = self.slow_units();
        let mut memory = memory.expect("the largest size was measured");
        if let Some(s) = slow.sizes.iter().find(|s| s.n == memory.n) {
            memory.slow_time_kb = s.converge.host.iter().filter_map(|r| r.maxrss_kb).collect();
        }
        Ok(Results {
            machine,
            plan: self.plan.clone(),
            scale,
            tools,
            startup,
            slow,
            memory,
            load_at_end: String::new(),
            duration: Default::default(),
        })
    }
}

fn script_argv(script: &Path, units: &[String]) -> Vec<String> {
    let mut argv = vec!["sh".to_owned(), script.display().to_string()];
    argv.extend(units.iter().cloned());
    argv
}

fn tail(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// Reads what the bench needs from a `host run --json` report. The report's
/// layout may nest per-policy sections, so `calls` and `compile` are looked
/// for anywhere in the document.
fn parse_host(outcome: &Outcome) -> anyhow::Result<HostRun> {
    let doc: Value = serde_json::from_str(&outcome.stdout).with_context(|| {
        format!(
            "host run printed no JSON report (exit {:?}): {}\n{}",
            outcome.code,
            outcome.stderr.trim(),
            tail(&outcome.stdout, 500)
        )
    })?;
    let summary = doc.get("summary").context("the report has no summary")?;
    let mut providers = Vec::new();
    collect(&doc, "provider", &mut providers);
    let status_reader = providers
        .first()
        .and_then(|p| p.get("status_reader"))
        .and_then(Value::as_str)
        .unwrap_or("systemctl")
        .to_owned();
    let mut calls = Vec::new();
    collect(&doc, "calls", &mut calls);
    let mut systemctl_calls = 0;
    let mut calls_ms = 0.0;
    let mut reload_ms = 0.0;
    for call in calls.iter().filter_map(|c| c.as_array()).flatten() {
        let operation = call.get("operation").and_then(Value::as_str);
        // Over D-Bus only the daemon-reloads are systemctl processes; with
        // systemctl a status is two (`is-active`, `is-enabled`).
        systemctl_calls += match operation {
            Some("daemon-reload") => 1,
            _ if status_reader == "dbus" => 0,
            Some("status") => 2,
            _ => 1,
        };
        let duration = call
            .get("duration_ms")
            .and_then(Value::as_f64)
            .unwrap_or(0.0);
        // The daemon-reload is recorded as its own call (and is not part of
        // the first operation's duration): inside the calls includes it.
        calls_ms += duration;
        if operation == Some("daemon-reload") {
            reload_ms += duration;
        }
    }
    let mut compiles = Vec::new();
    collect(&doc, "compile", &mut compiles);
    let compile = compiles.first().copied();
    Ok(HostRun {
        wall_ms: ms(outcome.ns),
        compile_cache: compile
            .and_then(|c| c.get("cache"))
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_owned(),
        compile_ms: compile
            .and_then(|c| c.get("duration_ms"))
            .and_then(Value::as_f64)
            .unwrap_or(f64::NAN),
        summary_ms: summary
            .get("duration_ms")
            .and_then(Value::as_f64)
            .unwrap_or(f64::NAN),
        calls_ms,
        reload_ms,
        systemctl_calls,
        changed: summary.get("changed").and_then(Value::as_u64).unwrap_or(0) as usize,
        success: summary
            .get("success")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        maxrss_kb: None,
        status_reader,
    })
}

/// Every value under `key`, anywhere in `value`.
fn collect<'a>(value: &'a Value, key: &str, found: &mut Vec<&'a Value>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                if k == key {
                    found.push(v);
                } else {
                    collect(v, key, found);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect(v, key, found)),
        _ => {}
    }
}

/// Prints an `strace -f -ttt` log with times in ms since its first line,
/// naming the host's main thread `main`.
fn print_timeline(log: &str) {
    let mut first: Option<(f64, String)> = None;
    for line in log.lines() {
        let Some((pid, rest)) = line.split_once(' ') else {
            continue;
        };
        let Some((time, rest)) = rest.trim_start().split_once(' ') else {
            continue;
        };
        let Ok(time) = time.parse::<f64>() else {
            continue;
        };
        let (start, main) = first.get_or_insert_with(|| (time, pid.to_owned()));
        let who = if pid == main.as_str() { "main" } else { pid };
        let rest: String = rest.chars().take(110).collect();
        println!("{:>9.3} ms  {who:>7}  {rest}", (time - *start) * 1e3);
    }
}

/// GNU time's maximum RSS, from a run's stderr.
fn maxrss_kb(stderr: &str) -> Option<u64> {
    let prefix = MAXRSS_FORMAT.trim_end_matches("%M");
    stderr
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|v| v.trim().parse().ok())
}
