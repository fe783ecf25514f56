//! What one run of the `host` binary did, and assertions on its JSON report,
//! shared by the end-to-end tests.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::fake_systemctl::FakeSystemctl;

/// What one `host run` did.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Run {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}):\n--- stdout\n{}\n--- stderr\n{}",
                truncate(&self.stdout),
                self.stderr
            )
        })
    }

    /// The host exited by itself with `code` (a signal gives no code) and
    /// did not panic.
    #[track_caller]
    pub fn assert_exit(&self, code: i32) {
        assert_eq!(
            self.code,
            Some(code),
            "exit code (None = killed by a signal)\n--- stdout\n{}\n--- stderr\n{}",
            truncate(&self.stdout),
            self.stderr
        );
        assert!(
            !self.stderr.contains("panicked"),
            "the host panicked:\n{}",
            self.stderr
        );
    }

    /// The wall time of the run less the compile the report says it made
    /// (`compile.duration_ms`, when the report has it): what the limits
    /// govern, without the part a busy machine slows down most.
    pub fn run_time(&self, json: &Value) -> Duration {
        let compile = json["compile"]["duration_ms"].as_f64().unwrap_or(0.0);
        self.elapsed
            .saturating_sub(Duration::from_secs_f64(compile.max(0.0) / 1000.0))
    }

    /// Exit 1, a JSON report whose `failure.class` is `class`; returns the report.
    #[track_caller]
    pub fn assert_failure(&self, class: &str) -> Value {
        self.assert_exit(1);
        let json = self.json();
        assert_eq!(
            json["failure"]["class"], class,
            "failure: {:#}\nerrors: {:#}",
            json["failure"], json["errors"]
        );
        assert_eq!(json["summary"]["success"], false);
        json
    }
}

/// A command's output as text (invalid UTF-8 replaced), for messages and
/// comparisons.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub fn run(mut cmd: Command) -> Run {
    let start = Instant::now();
    let out = cmd.output().expect("run host");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        elapsed: start.elapsed(),
    }
}

/// The first few KiB of `text`, for failure messages about huge outputs.
pub fn truncate(text: &str) -> &str {
    let mut end = text.len().min(4000);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

pub fn resource<'a>(json: &'a Value, name: &str) -> &'a Value {
    let id = format!("service#{name}");
    json["resources"]
        .as_array()
        .expect("resources is an array")
        .iter()
        .find(|r| r["resource"] == id.as_str())
        .unwrap_or_else(|| panic!("no resource {id} in {json:#}"))
}

/// The `calls` entries of the report, as (operation, service, outcome).
pub fn json_calls(json: &Value) -> Vec<(String, Option<String>, String)> {
    json["calls"]
        .as_array()
        .unwrap_or_else(|| panic!("no calls array in {json:#}"))
        .iter()
        .map(|c| {
            (
                c["operation"].as_str().unwrap().to_string(),
                c["service"].as_str().map(str::to_string),
                c["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[track_caller]
pub fn assert_contains(haystack: &str, needle: &str) {
    assert!(
        haystack.contains(needle),
        "{needle:?} not found in:\n{}",
        truncate(haystack)
    );
}

/// Every invocation had an argument shape the host may use.
#[track_caller]
pub fn assert_shapes(fake: &FakeSystemctl) {
    assert_eq!(
        fake.rejected_calls(),
        Vec::<String>::new(),
        "systemctl invoked without `--system --`; all calls: {:#?}",
        fake.calls()
    );
}

/// The `state` of each of a resource's watched references (`recorded`,
/// `unchanged`, `changed`, `unreadable`), in order.
pub fn watched_states(event: &Value) -> Vec<String> {
    event["watched"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|w| w["state"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}
