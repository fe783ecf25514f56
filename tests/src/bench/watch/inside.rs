//! The watch figures' side inside the sandbox (`bench __watch JSON`, the
//! bench's own executable, as for `agent.rs`): a drift made and its repair
//! awaited in one process, so that no `nsenter` or process start lies
//! between the drift's command returning and the clock being read; and the
//! watch's report file's rewrites counted while a command runs.
//!
//! Times are CLOCK_MONOTONIC, the clock of systemd's `*TimestampMonotonic`
//! properties, so a repair's time can be taken from systemd's own record of
//! the unit entering `active`.

use std::fs;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

use super::super::agent::monotonic_us;

/// What to do inside.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) enum Inside {
    Trial(Trial),
    Apart(Apart),
    Writes(Writes),
    Floor(Floor),
}

/// Two units stopped `gap_ms` apart (issue 46): the second drift comes
/// while the repair of the first is under way (its settle window open), and
/// is timed as a lone stop is, by systemd's own timestamps of the second.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Apart {
    pub first: String,
    pub second: String,
    pub gap_ms: u64,
    /// As [`Trial`]'s.
    pub report: String,
    pub quiet_ms: u64,
    pub timeout_ms: u64,
}

/// The floor of a repair (issue 46): the drift and its undoing typed at
/// once by hand, on a unit no policy manages, timed as the watch's repair
/// of that drift is.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) enum Floor {
    /// `systemctl stop U && systemctl start U`: systemd's
    /// `InactiveEnterTimestampMonotonic` to `ActiveEnterTimestampMonotonic`.
    Stop(String),
    /// `systemctl disable U && systemctl enable U`: from `disable`
    /// returning to the modification time of the unit's `.wants/` link
    /// (the path given), which `enable` made.
    Disable { unit: String, link: String },
}

/// What a [`Floor`] took, in µs; `None` if the timestamps did not make sense.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct FloorTime {
    pub us: Option<u64>,
}

/// One drift and its repair.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Trial {
    /// The drift: a command run as is; it must succeed.
    pub drift: Vec<String>,
    pub until: Until,
    /// The watch's report file: the trial ends once the run that repaired
    /// has written it and it was then left alone for `quiet_ms` (the
    /// follow-up run of the watch's own changes is over), so that trials
    /// do not overlap.
    pub report: String,
    pub quiet_ms: u64,
    /// How long to wait for the repair, and again for the runs to end.
    pub timeout_ms: u64,
}

/// What a repair looks like.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) enum Until {
    /// Every unit is active again (after a stop).
    Active(Vec<String>),
    /// The path is a symlink again (after a disable: the `.wants/` link).
    Link(String),
    /// The unit entered `active` after the drift (a restart).
    Restarted(String),
}

/// What a trial saw.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Repair {
    /// CLOCK_MONOTONIC (µs) right after the drift's command returned.
    pub drifted_us: u64,
    /// From then until the repair was seen (µs), polling every millisecond
    /// for a link and every 20 ms for a unit; `None`: not within the timeout.
    pub seen_after_us: Option<u64>,
    /// systemd's `InactiveEnterTimestampMonotonic` and
    /// `ActiveEnterTimestampMonotonic` of the (first) unit, read once the
    /// repair was seen.
    pub inactive_enter_us: Option<u64>,
    pub active_enter_us: Option<u64>,
    /// Whether the report was written after the repair and then left alone
    /// for the quiet time, within the timeout.
    pub settled: bool,
}

/// A command, with the report file's rewrites counted while it runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Writes {
    pub argv: Vec<String>,
    pub path: String,
    /// How long to go on counting after the command ended.
    pub tail_ms: u64,
}

/// What a [`Writes`] saw.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Written {
    /// How many times the file's modification time moved (sampled every
    /// 10 ms: writes closer together count once).
    pub writes: usize,
    /// The command's run time, in ms.
    pub ms: f64,
    pub code: Option<i32>,
    pub stderr: String,
}

/// `bench __watch JSON`: does what the JSON [`Inside`] says, prints the
/// answer as JSON.
pub(super) fn main(spec: &str) -> ExitCode {
    let answer = match serde_json::from_str::<Inside>(spec) {
        Ok(Inside::Trial(trial)) => self::trial(&trial).map(|r| json(&r)),
        Ok(Inside::Apart(apart)) => self::apart(&apart).map(|r| json(&r)),
        Ok(Inside::Writes(writes)) => self::writes(&writes).map(|w| json(&w)),
        Ok(Inside::Floor(floor)) => self::floor(&floor).map(|f| json(&f)),
        Err(e) => Err(format!("bad spec: {e}")),
    };
    match answer {
        Ok(json) => {
            println!("{json}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bench __watch: {e}");
            ExitCode::from(2)
        }
    }
}

fn json(answer: &impl Serialize) -> String {
    serde_json::to_string(answer).expect("an answer serializes")
}

fn trial(t: &Trial) -> Result<Repair, String> {
    let timeout = Duration::from_millis(t.timeout_ms);
    run(&t.drift)?;
    let drifted_us = monotonic_us();
    let drifted = Instant::now();
    let repaired_at = wait_for(&t.until, drifted_us, drifted + timeout);
    let seen_after_us = repaired_at
        .as_ref()
        .map(|_| drifted.elapsed().as_micros() as u64);
    let unit = match &t.until {
        Until::Active(units) => units.first(),
        Until::Restarted(unit) => Some(unit),
        Until::Link(_) => None,
    };
    let shown = match unit {
        Some(unit) => show(unit)?,
        None => Shown::default(),
    };
    let settled = match repaired_at {
        Some(at) => settle(
            Path::new(&t.report),
            at,
            Duration::from_millis(t.quiet_ms),
            Instant::now() + timeout,
        ),
        None => false,
    };
    Ok(Repair {
        drifted_us,
        seen_after_us,
        inactive_enter_us: shown.inactive_enter_us,
        active_enter_us: shown.active_enter_us,
        settled,
    })
}

/// Stops `first`, then `second` `gap_ms` later; the repair is the
/// second's (systemd's timestamps of `second`), awaited with the first's.
fn apart(a: &Apart) -> Result<Repair, String> {
    let stop = |unit: &str| ["systemctl", "stop", "--", unit].map(String::from).to_vec();
    run(&stop(&a.first))?;
    thread::sleep(Duration::from_millis(a.gap_ms));
    trial(&Trial {
        drift: stop(&a.second),
        until: Until::Active(vec![a.second.clone(), a.first.clone()]),
        report: a.report.clone(),
        quiet_ms: a.quiet_ms,
        timeout_ms: a.timeout_ms,
    })
}

fn floor(f: &Floor) -> Result<FloorTime, String> {
    let systemctl =
        |verb: &str, unit: &str| run(&["systemctl", verb, "--quiet", "--", unit].map(String::from));
    match f {
        Floor::Stop(unit) => {
            systemctl("stop", unit)?;
            systemctl("start", unit)?;
            let shown = show(unit)?;
            Ok(FloorTime {
                us: match (shown.inactive_enter_us, shown.active_enter_us) {
                    (Some(down), Some(up)) if up > down && shown.active => Some(up - down),
                    _ => None,
                },
            })
        }
        Floor::Disable { unit, link } => {
            systemctl("disable", unit)?;
            let disabled = SystemTime::now();
            systemctl("enable", unit)?;
            let made = fs::symlink_metadata(link)
                .and_then(|m| m.modified())
                .map_err(|e| format!("{link} after `systemctl enable {unit}`: {e}"))?;
            Ok(FloorTime {
                us: made
                    .duration_since(disabled)
                    .ok()
                    .map(|d| d.as_micros() as u64),
            })
        }
    }
}

/// Runs a command to its end; it must succeed.
fn run(argv: &[String]) -> Result<(), String> {
    let (program, args) = argv.split_first().ok_or("empty command")?;
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{argv:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

/// Polls until the repair is there; returns when it was seen (wall clock,
/// to compare with the report file's modification time), `None` at the
/// deadline.
fn wait_for(until: &Until, drifted_us: u64, deadline: Instant) -> Option<SystemTime> {
    loop {
        let seen = match until {
            Until::Active(units) => all_active(units),
            Until::Restarted(unit) => {
                show(unit).is_ok_and(|s| s.active && s.active_enter_us > Some(drifted_us))
            }
            // The link's own time: a run writes its report after it made the link.
            Until::Link(path) => {
                if let Ok(meta) = fs::symlink_metadata(path) {
                    return Some(meta.modified().unwrap_or_else(|_| SystemTime::now()));
                }
                false
            }
        };
        if seen {
            return Some(SystemTime::now());
        }
        if Instant::now() >= deadline {
            return None;
        }
        thread::sleep(match until {
            Until::Link(_) => Duration::from_millis(1),
            _ => Duration::from_millis(20),
        });
    }
}

fn all_active(units: &[String]) -> bool {
    let out = Command::new("systemctl")
        .arg("is-active")
        .arg("--")
        .args(units)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output();
    out.is_ok_and(|out| {
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines().filter(|l| *l == "active").count() == units.len()
    })
}

/// What `systemctl show` says of a unit's state and timestamps.
#[derive(Debug, Default)]
struct Shown {
    active: bool,
    inactive_enter_us: Option<u64>,
    active_enter_us: Option<u64>,
}

fn show(unit: &str) -> Result<Shown, String> {
    let out = Command::new("systemctl")
        .args([
            "show",
            "--property=ActiveState,ActiveEnterTimestampMonotonic,InactiveEnterTimestampMonotonic",
            "--",
            unit,
        ])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run systemctl show: {e}"))?;
    let mut shown = Shown::default();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        match key {
            "ActiveState" => shown.active = value == "active",
            "ActiveEnterTimestampMonotonic" => shown.active_enter_us = value.parse().ok(),
            "InactiveEnterTimestampMonotonic" => shown.inactive_enter_us = value.parse().ok(),
            _ => {}
        }
    }
    Ok(shown)
}

fn modified(path: &Path) -> Option<SystemTime> {
    fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Waits until `report` was written at or after `repaired` (by the run that
/// repaired: a run writes its report when it ends) and then left alone for
/// `quiet`; says whether that happened before `deadline`.
fn settle(report: &Path, repaired: SystemTime, quiet: Duration, deadline: Instant) -> bool {
    let mut last = modified(report);
    let mut changed = Instant::now();
    let mut written = last.is_some_and(|m| m >= repaired);
    loop {
        thread::sleep(Duration::from_millis(20));
        let now = modified(report);
        if now != last {
            last = now;
            changed = Instant::now();
            written |= now.is_some_and(|m| m >= repaired);
        }
        if written && changed.elapsed() >= quiet {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
    }
}

fn writes(w: &Writes) -> Result<Written, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let stop = Arc::clone(&stop);
        let path = w.path.clone();
        thread::spawn(move || {
            let path = Path::new(&path);
            let mut last = modified(path);
            let mut writes = 0;
            while !stop.load(Ordering::Relaxed) {
                thread::sleep(Duration::from_millis(10));
                let now = modified(path);
                if now != last {
                    writes += 1;
                    last = now;
                }
            }
            writes
        })
    };
    let (program, args) = w.argv.split_first().ok_or("empty command")?;
    let started = Instant::now();
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .output();
    let ms = started.elapsed().as_secs_f64() * 1e3;
    thread::sleep(Duration::from_millis(w.tail_ms));
    stop.store(true, Ordering::Relaxed);
    let writes = sampler.join().unwrap_or(0);
    let out = out.map_err(|e| format!("cannot run {program}: {e}"))?;
    Ok(Written {
        writes,
        ms,
        code: out.status.code(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}
