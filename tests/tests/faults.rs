//! Faults during a run, tried as an operator meets them, against the fake
//! systemctl: a signal in the middle of the changes, a second signal, a full
//! disk under the outputs, outputs that cannot be written, temporary files
//! left by a killed run, and the host killed with SIGKILL at each provider
//! call in turn. After each, the next run converges and every file the host
//! keeps is whole.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use policy_host_e2e::build::{host_binary, sign_file, signed_policy, trust_args};
use policy_host_e2e::fake_systemctl::FakeSystemctl;
use policy_host_e2e::outcome::{run, Run};
use policy_host_e2e::requires::e2e_test;
use serde_json::Value;

const UNITS: [&str; 5] = ["flt-a", "flt-b", "flt-c", "flt-d", "flt-e"];

/// Five services to start and enable.
fn five(fake: &FakeSystemctl) -> PathBuf {
    services(fake, &UNITS)
}

/// `units`, each to start and enable, as signed settings.
fn services(fake: &FakeSystemctl, units: &[&str]) -> PathBuf {
    let mut yaml = String::from("- service:\n");
    for unit in units {
        fake.unit(unit, "inactive", "disabled");
        yaml.push_str(&format!(
            "    - {unit}:\n        ensure: running\n        enable: true\n"
        ));
    }
    let path = fake.root().join("services.yaml");
    fs::write(&path, yaml).unwrap();
    sign_file(&path);
    path
}

/// `host run` of the manifest policy with `settings`, this fake's own state,
/// cache and lock, and `args`.
fn command(fake: &FakeSystemctl, settings: &Path, args: &[&str]) -> Command {
    let mut cmd = fake.host_command();
    cmd.arg("run")
        .arg(signed_policy("manifest-policy"))
        .arg("--settings")
        .arg(settings)
        .args(trust_args())
        .arg("--lock-file")
        .arg(fake.root().join("run.lock"))
        .arg("--cache-dir")
        .arg(fake.root().join("cache"))
        .arg("--state-dir")
        .arg(fake.root().join("state"))
        .args(args);
    cmd
}

fn converged(fake: &FakeSystemctl) -> bool {
    converged_units(fake, &UNITS)
}

fn converged_units(fake: &FakeSystemctl, units: &[&str]) -> bool {
    units
        .iter()
        .all(|u| fake.state(u) == Some(("active".into(), "enabled".into())))
}

fn temporary_files(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".tmp"))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether a process runs exactly `command line` (the fake's hang is an
/// `exec sleep N`).
fn running(command_line: &str) -> bool {
    Command::new("pgrep")
        .args(["-f", "-x", command_line])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn wait_for_call(fake: &FakeSystemctl, call: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !fake.calls().iter().any(|c| c == call) {
        assert!(
            Instant::now() < deadline,
            "no {call:?} in {:#?}",
            fake.calls()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[e2e_test(requires = "promtool")]
fn sigterm_mid_apply_reports_what_was_done_and_exits_in_order() {
    let fake = FakeSystemctl::new();
    let settings = five(&fake);
    fake.hang("start", "flt-c", 47);
    let report = fake.root().join("out/report.json");
    let metrics = fake.root().join("out/policy_host.prom");
    let mut cmd = command(
        &fake,
        &settings,
        &[
            "--json",
            "--report",
            report.to_str().unwrap(),
            "--metrics",
            metrics.to_str().unwrap(),
        ],
    );
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_call(&fake, "start --system -- flt-c");
    let signalled = Instant::now();
    signal(child.id(), "TERM");
    let out = child.wait_with_output().unwrap();
    let took = signalled.elapsed();
    assert!(
        took < Duration::from_secs(10),
        "exited {took:?} after SIGTERM"
    );
    let code = out.status.code();
    assert!(
        code.is_some_and(|c| c != 0 && c != 2),
        "exit status {code:?}"
    );
    assert!(
        !running("sleep 47"),
        "the hung systemctl was killed with its group"
    );

    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let interrupted = &json["interrupted"];
    assert_eq!(interrupted["signal"], "SIGTERM", "{json:#}");
    let list = |key: &str| -> Vec<String> {
        interrupted[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    };
    // A start counts once its unit stayed up: flt-a and flt-b were started
    // (done), and were to be judged, then enabled, after every service was
    // begun. The signal came first, so their apply was not completed
    // either (not reached: their enable). flt-c's start was cut after its
    // grace; its enable, and everything of flt-d and flt-e, was never made.
    assert_eq!(list("done"), ["service#flt-a", "service#flt-b"], "{json:#}");
    assert_eq!(
        list("not_reached"),
        [
            "service#flt-a",
            "service#flt-b",
            "service#flt-c",
            "service#flt-d",
            "service#flt-e"
        ]
    );
    for unit in ["flt-a", "flt-b"] {
        let event = json["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == format!("service#{unit}"))
            .unwrap();
        assert_eq!(
            event["actions"],
            serde_json::json!(["started"]),
            "{event:#}"
        );
    }
    assert_eq!(json["summary"]["success"], false);
    // The files say the same, and nothing after the signal was changed.
    let written: Value = serde_json::from_str(&fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(written["last_run"]["interrupted"], "SIGTERM");
    let metrics = policy_host_e2e::metrics::checked(&metrics);
    assert_eq!(metrics.value("policy_host_run_interrupted"), 1.0);
    assert_eq!(metrics.value("policy_host_run_success"), 0.0);
    for unit in ["flt-d", "flt-e"] {
        assert_eq!(
            fake.state(unit),
            Some(("inactive".into(), "disabled".into()))
        );
    }
    // The lock is free, and the next run finishes the job.
    fake.clear_fault("start", "flt-c");
    let r = run(command(&fake, &settings, &["--no-wait"]));
    r.assert_exit(0);
    assert!(converged(&fake));
}

#[test]
fn a_second_signal_ends_the_run_at_once() {
    let fake = FakeSystemctl::new();
    let settings = five(&fake);
    fake.hang("start", "flt-b", 53);
    let child = command(&fake, &settings, &["--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_call(&fake, "start --system -- flt-b");
    signal(child.id(), "INT");
    std::thread::sleep(Duration::from_millis(300));
    let signalled = Instant::now();
    signal(child.id(), "INT");
    let out = child.wait_with_output().unwrap();
    // 130 (128 + SIGINT) is the second signal's exit, which no orderly end
    // gives. The bound tells "at once" from waiting out the 5 s grace of the
    // command under way: below it, with room for a busy machine.
    assert_eq!(out.status.code(), Some(130));
    assert!(
        signalled.elapsed() < Duration::from_millis(4500),
        "{:?}",
        signalled.elapsed()
    );
    assert!(!running("sleep 53"), "the command under way was killed too");
}

#[test]
fn outputs_that_cannot_be_written_are_refused_before_any_change() {
    let fake = FakeSystemctl::new();
    let settings = five(&fake);
    let file = fake.root().join("a-file");
    fs::write(&file, "x").unwrap();
    let under_a_file = file.join("report.json");
    let r = run(command(
        &fake,
        &settings,
        &["--report", under_a_file.to_str().unwrap()],
    ));
    r.assert_exit(1);
    assert!(
        r.stderr.contains("--report") && r.stderr.contains(under_a_file.to_str().unwrap()),
        "{}",
        r.stderr
    );
    assert_eq!(fake.calls(), Vec::<String>::new(), "nothing ran");

    let a_directory = fake.root().join("metrics-dir");
    fs::create_dir(&a_directory).unwrap();
    let r = run(command(
        &fake,
        &settings,
        &["--metrics", a_directory.to_str().unwrap()],
    ));
    r.assert_exit(1);
    assert!(
        r.stderr.contains("--metrics") && r.stderr.contains("is a directory"),
        "{}",
        r.stderr
    );
    assert_eq!(fake.calls(), Vec::<String>::new(), "nothing ran");
}

/// A 64 KiB tmpfs for the outputs, unmounted when dropped.
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn mount(dir: PathBuf) -> Self {
        fs::create_dir_all(&dir).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
            .arg(&dir)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "this test needs root, to mount a tmpfs");
        Self(dir)
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[e2e_test(requires = "root")]
fn a_full_disk_loses_nothing_and_hides_nothing() {
    let fake = FakeSystemctl::new();
    let settings = five(&fake);
    let disk = SmallDisk::mount(fake.root().join("disk"));
    let (report, metrics) = (disk.0.join("report.json"), disk.0.join("policy_host.prom"));
    fs::write(&report, "{\"previous\": true}\n").unwrap();
    fs::write(&metrics, "policy_host_run_success 1\n").unwrap();
    // Fill the rest of the disk.
    let filler = disk.0.join("filler");
    let mut file = fs::File::create(&filler).unwrap();
    let block = vec![0u8; 4096];
    while std::io::Write::write_all(&mut file, &block).is_ok() {}
    drop(file);

    let r = run(command(
        &fake,
        &settings,
        &[
            "--report",
            report.to_str().unwrap(),
            "--metrics",
            metrics.to_str().unwrap(),
        ],
    ));
    r.assert_exit(1);
    // The run happened and said so, however the files fared.
    assert!(converged(&fake));
    for unit in UNITS {
        assert!(
            r.stdout.contains(&format!("service#{unit}")),
            "{}",
            r.stdout
        );
    }
    assert!(r.stderr.contains("report.json"), "{}", r.stderr);
    assert!(r.stderr.contains("No space left on device"), "{}", r.stderr);
    // The previous files, byte for byte, and no temporary file left.
    assert_eq!(
        fs::read_to_string(&report).unwrap(),
        "{\"previous\": true}\n"
    );
    assert_eq!(
        fs::read_to_string(&metrics).unwrap(),
        "policy_host_run_success 1\n"
    );
    assert_eq!(temporary_files(&disk.0), Vec::<String>::new());
}

#[e2e_test(requires = "promtool")]
fn temporary_files_of_a_killed_run_are_removed_by_the_next() {
    let fake = FakeSystemctl::new();
    let settings = five(&fake);
    let out = fake.root().join("out");
    fs::create_dir_all(&out).unwrap();
    for name in [".report.json.Xy12ab.tmp", ".policy_host.prom.Qq99zz.tmp"] {
        fs::write(out.join(name), "half").unwrap();
    }
    let r = run(command(
        &fake,
        &settings,
        &[
            "--report",
            out.join("report.json").to_str().unwrap(),
            "--metrics",
            out.join("policy_host.prom").to_str().unwrap(),
        ],
    ));
    r.assert_exit(0);
    assert_eq!(temporary_files(&out), Vec::<String>::new());
    let metrics = policy_host_e2e::metrics::checked(&out.join("policy_host.prom"));
    assert_eq!(metrics.value("policy_host_run_success"), 1.0);
}

/// The host killed with SIGKILL at each systemctl call of a converging run
/// in turn: every time, the next run converges, and the report, metrics,
/// version record and cache are whole. Three services make every kind of
/// call at the first, a middle and the last place of its phase (29 calls;
/// each further service only repeats the middle one's nine).
#[e2e_test(requires = "promtool")]
fn killed_at_every_call_the_next_run_converges() {
    let units = &UNITS[..3];
    let fake = FakeSystemctl::new();
    let settings = services(&fake, units);
    let out = fake.root().join("out");
    let args = [
        "--report".to_owned(),
        out.join("report.json").to_str().unwrap().to_owned(),
        "--metrics".to_owned(),
        out.join("policy_host.prom").to_str().unwrap().to_owned(),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // How many calls a converging run makes.
    run(command(&fake, &settings, &args)).assert_exit(0);
    let calls = fake.calls().len();
    assert!(calls > 10, "{calls} calls");

    for k in 1..=calls {
        for unit in units {
            fake.unit(unit, "inactive", "disabled");
        }
        fake.clear_calls();
        fake.kill_host_at(k);
        let killed = run(command(&fake, &settings, &args));
        assert_eq!(
            killed.code, None,
            "call {k}: the host was to be killed: {}",
            killed.stderr
        );

        let next: Run = run(command(&fake, &settings, &args));
        next.assert_exit(0);
        assert!(converged_units(&fake, units), "call {k}: not converged");
        let report: Value =
            serde_json::from_str(&fs::read_to_string(out.join("report.json")).unwrap())
                .unwrap_or_else(|e| panic!("call {k}: the report is not whole: {e}"));
        assert_eq!(report["summary"]["success"], true, "call {k}");
        let metrics = policy_host_e2e::metrics::checked(&out.join("policy_host.prom"));
        assert_eq!(metrics.value("policy_host_run_success"), 1.0, "call {k}");
        let versions = fs::read_to_string(fake.root().join("state/versions.json")).unwrap();
        serde_json::from_str::<Value>(&versions)
            .unwrap_or_else(|e| panic!("call {k}: the version record is not whole: {e}"));
        assert_eq!(temporary_files(&out), Vec::<String>::new(), "call {k}");
        assert_eq!(
            temporary_files(&fake.root().join("state")),
            Vec::<String>::new(),
            "call {k}"
        );
    }
    // The cache was used all along: the last run loaded the policy from it.
    let r = run(command(&fake, &settings, &["--json"]));
    r.assert_exit(0);
    assert_eq!(r.json()["compile"]["cache"], "hit");
    let _ = host_binary();
}
