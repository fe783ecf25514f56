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
mod machine;
mod report;
mod stats;
mod tools;

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
";

#[derive(Debug, Clone)]
struct Options {
    quick: bool,
    reps: Option<usize>,
    tools: Option<bool>,
    markdown: Option<PathBuf>,
    strace: bool,
}

impl Options {
    fn parse(args: &[String]) -> anyhow::Result<Options> {
        let mut options = Options {
            quick: false,
            reps: None,
            tools: None,
            markdown: None,
            strace: false,
        };
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--quick" => options.quick = true,
                "--no-tools" => options.tools = Some(false),
                "--strace" => options.strace = true,
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
    /// The sizes of the slow-unit measurement and their repetitions: the
    /// shell script takes N × 0.55 s there (2.7 min at N = 300).
    slow: Vec<(usize, Reps)>,
}

impl Plan {
    fn new(options: &Options) -> Plan {
        let mut plan = if options.quick {
            Plan {
                quick: true,
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
                slow: vec![(10, Reps::new(2, 2, 60)), (REFERENCE_N, Reps::exactly(1))],
            }
        } else {
            Plan {
                quick: false,
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
    if options.strace {
        wanted.push(("strace", "strace"));
    }
    if plan.tools && !options.strace {
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
        let stopped = bench.sandbox.stop();
        let _ = std::fs::remove_dir_all(&work);
        traced?;
        stopped.context("stopping the sandbox")?;
        return Ok(());
    }
    let results = bench.run_all(machine);
    let stopped = bench.sandbox.stop();
    let _ = std::fs::remove_dir_all(&work);
    let mut results = results?;
    stopped.context("stopping the sandbox")?;
    results.duration = started.elapsed();
    results.load_at_end = machine::load_average();

    let markdown = report::render(&results);
    step("Results");
    println!("{markdown}");
    if let Some(path) = &options.markdown {
        std::fs::write(path, &markdown).with_context(|| format!("writing {}", path.display()))?;
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

    /// `--strace`: syscall timelines of warm runs, relative to the host's exec.
    fn trace(&self) -> anyhow::Result<()> {
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

    fn largest(&self) -> usize {
        self.plan.sizes.iter().copied().max().unwrap_or(0)
    }

    /// Runs `spec` in the sandbox under the agent.
    fn measure(&self, spec: &Spec) -> anyhow::Result<Outcome> {
        let json = serde_json::to_string(spec)?;
        let agent = self.agent.to_string_lossy();
        let out = self.sandbox.exec(&[&agent, "__inner", &json]);
        ensure!(
            out.status.success(),
            "the bench agent failed in the sandbox ({}) running {:?}: {}",
            out.status,
            spec.argv,
            String::from_utf8_lossy(&out.stderr).trim()
        );
        let outcome: Outcome = serde_json::from_slice(&out.stdout).with_context(|| {
            format!(
                "reading the agent's answer: {}",
                String::from_utf8_lossy(&out.stdout)
            )
        })?;
        if let Some(problem) = &outcome.reset_error {
            bail!("resetting before {:?} failed: {problem}", spec.argv);
        }
        Ok(outcome)
    }

    /// `sh -c SCRIPT` in the sandbox; it must succeed.
    fn sh(&self, script: &str) -> anyhow::Result<String> {
        let out = self.sandbox.exec(&["sh", "-c", script]);
        ensure!(
            out.status.success(),
            "in the sandbox, {script:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Writes a file into the work directory (visible inside at the same
    /// path). A settings document (`*.yaml`) is signed: the host runs only
    /// signed settings.
    fn write(&self, name: &str, contents: &str) -> anyhow::Result<PathBuf> {
        let path = self.work.join(name);
        std::fs::write(&path, contents).with_context(|| format!("writing {}", path.display()))?;
        if name.ends_with(".yaml") {
            checked(
                std::process::Command::new(&self.host)
                    .arg("sign")
                    .arg(&path)
                    .arg("--key")
                    .arg(self.public_key.with_file_name("policy-host.key")),
                "host sign",
            )?;
        }
        Ok(path)
    }

    fn host_argv(&self, policy: &Path, settings: Option<&Path>, cache: &str) -> Vec<String> {
        let mut argv = vec![
            self.host.display().to_string(),
            "run".into(),
            policy.display().to_string(),
        ];
        if let Some(settings) = settings {
            argv.push("--settings".into());
            argv.push(settings.display().to_string());
        }
        argv.extend([
            "--trusted-key".into(),
            self.public_key.display().to_string(),
            "--cache-dir".into(),
            cache.into(),
            "--json".into(),
        ]);
        argv
    }

    /// Creates the unit files of `units` that do not exist yet, in one go,
    /// then reloads systemd. `unit_file` makes a unit's file from its name.
    fn install_units(&self, units: &[String], unit_file: fn(&str) -> String) -> anyhow::Result<()> {
        let mut script = String::from("set -e\n");
        for unit in units {
            script.push_str(&format!(
                "[ -e /etc/systemd/system/{unit}.service ] || cat > /etc/systemd/system/{unit}.service <<'UNIT'\n{}UNIT\n",
                unit_file(unit)
            ));
        }
        script.push_str("systemctl daemon-reload\n");
        let out = self
            .sandbox
            .exec_with_stdin(&["sh", "-s"], script.as_bytes());
        ensure!(
            out.status.success(),
            "creating the units failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        Ok(())
    }

    /// `systemctl enable --now` (or `disable --now`) of every unit, as a script.
    fn set_all(units: &[String], running_and_enabled: bool) -> String {
        let verb = if running_and_enabled {
            "enable"
        } else {
            "disable"
        };
        format!("systemctl {verb} --now --quiet -- {}", units.join(" "))
    }

    /// Fails unless every unit is active and enabled.
    fn check_converged(&self, units: &[String], who: &str) -> anyhow::Result<()> {
        let list = units.join(" ");
        let out = self.sh(&format!(
            "systemctl is-active -- {list} | grep -cx active; systemctl is-enabled -- {list} | grep -cx enabled; true"
        ))?;
        let counts: Vec<usize> = out
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        ensure!(
            counts == [units.len(), units.len()],
            "after {who}, expected {0} units active and {0} enabled, found {counts:?}",
            units.len()
        );
        Ok(())
    }

    fn host_run(&self, spec: &Spec, expect: Expect) -> anyhow::Result<HostRun> {
        let outcome = self.measure(spec)?;
        let mut run = parse_host(&outcome)?;
        run.maxrss_kb = maxrss_kb(&outcome.stderr);
        ensure!(
            outcome.code == Some(0) && run.success,
            "host run exited {:?}: {}\n{}",
            outcome.code,
            outcome.stderr.trim(),
            tail(&outcome.stdout, 2000)
        );
        ensure!(
            run.status_reader == "dbus",
            "host run read status with {}, not over D-Bus: is the sandbox's system bus up?",
            run.status_reader
        );
        ensure!(
            run.changed == expect.changed && run.systemctl_calls == expect.systemctl_calls,
            "host run changed {} resources with {} systemctl calls; expected {} and {}",
            run.changed,
            run.systemctl_calls,
            expect.changed,
            expect.systemctl_calls
        );
        Ok(run)
    }

    fn script_run(&self, spec: &Spec) -> anyhow::Result<f64> {
        let outcome = self.measure(spec)?;
        ensure!(
            outcome.code == Some(0),
            "{:?} exited {:?}: {}",
            spec.argv,
            outcome.code,
            tail(&outcome.stderr, 2000)
        );
        Ok(ms(outcome.ns))
    }

    /// The host and its baselines (the first is the shell script) in turn,
    /// the order rotating each repetition. A no-op comparison starts with one
    /// untimed warm-up of each; a converging one checks after its first
    /// repetition that every side left the units running and enabled.
    fn compare(
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
    fn baselines(
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

    fn noop_pair(&self, units: &[String], settings: &Path) -> anyhow::Result<Pair> {
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

    fn converge_pair(&self, units: &[String], settings: &Path) -> anyhow::Result<Pair> {
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

    /// Cold and warm starts of the example policy (converged, so each run
    /// makes six status queries over D-Bus and no reload), the time to its
    /// first provider call, and a warm run of a policy with nothing to
    /// manage. The first call is timed with `--provider systemctl`, whose
    /// first call is a process the shim sees (the design's reload); over
    /// D-Bus the host connects to the bus at that same moment.
    fn startup(&self) -> anyhow::Result<Startup> {
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

    /// Peak resident memory of the host at the largest N: GNU time's maximum
    /// RSS from the timed runs (the host or its largest child, whichever is
    /// larger), and the host's own `VmHWM`, sampled every millisecond in
    /// separate no-op runs (converging runs at this size take minutes).
    fn memory(&self, scale: &Scale, settings: &Path) -> anyhow::Result<Memory> {
        let n = scale.n;
        step(&format!("Peak memory at N = {n}"));
        let rss =
            |pair: &Pair| -> Vec<u64> { pair.host.iter().filter_map(|r| r.maxrss_kb).collect() };
        let mut memory = Memory {
            n,
            noop_time_kb: rss(&scale.noop),
            converge_time_kb: rss(&scale.converge),
            ..Memory::default()
        };
        let host = self.host_argv(&self.manifest_policy, Some(settings), WARM_CACHE);
        for rep in 0..self.plan.memory_reps {
            let sampled = self.measure(&Spec {
                argv: host.clone(),
                poll_hwm: true,
                ..Spec::default()
            })?;
            ensure!(
                sampled.code == Some(0),
                "host run failed: {}",
                sampled.stderr.trim()
            );
            let hwm = sampled.vmhwm_kb.unwrap_or(0);
            memory.noop_hwm_kb.push(hwm);
            progress(&format!(
                "memory {}: no-op: sampled VmHWM {hwm} KiB",
                rep + 1
            ));
        }
        Ok(memory)
    }

    /// Ansible and Puppet on the same units, no-op and converge.
    fn tools(&self, units: &[String]) -> anyhow::Result<ToolRuns> {
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
    fn ansible_argv(
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
    fn puppet_argv(&self, units: &[String], tag: &str) -> anyhow::Result<Vec<String>> {
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

    /// Slow units, measured last (their files and running processes are then
    /// no part of the other tables): converging N units whose starts take
    /// [`SLOW_START`] s, the host against the shell script and, at the
    /// reference size, Ansible and Puppet, in turn. A failure here is
    /// reported with the results instead of losing the run.
    fn slow_units(&self) -> Slow {
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

    fn slow_size(&self, n: usize, reps: Reps) -> anyhow::Result<Pair> {
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
