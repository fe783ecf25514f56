//! End-to-end: `file#` subscriptions fire by themselves. A plain run (no
//! `--refresh`) notices that a subscribed file changed since the service's
//! last successful apply and restarts the service, once; the first sight of
//! a reference only records it; a noop run records nothing; a failed
//! restart is retried by the next run; an unreadable reference fails its
//! service once it was applied, and nothing else; a reference the host does
//! not watch is a warning, and fires on `--refresh`; a policy declaring as
//! many references as the caps allow keeps the report, the record and the
//! host's memory bounded. Against the fake systemctl.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};

use policy_host_e2e::build::{sign_file, signed_policy};
use policy_host_e2e::fake_systemctl::FakeSystemctl;
use policy_host_e2e::outcome::{resource, watched_states, Run};

/// A machine with `web` running and enabled, a watched directory holding
/// its configuration, and a state directory kept across runs.
struct Machine {
    fake: FakeSystemctl,
    etc: PathBuf,
    state: PathBuf,
}

impl Machine {
    fn new() -> Self {
        let fake = FakeSystemctl::new();
        fake.unit("web", "active", "enabled")
            .unit("db", "active", "enabled");
        let etc = fake.root().join("etc");
        fs::create_dir_all(etc.join("web")).unwrap();
        fs::write(etc.join("web/app.conf"), "workers = 2\n").unwrap();
        let state = fake.root().join("state");
        Self { fake, etc, state }
    }

    fn conf(&self) -> PathBuf {
        self.etc.join("web/app.conf")
    }

    fn reference(&self, path: &Path) -> String {
        format!("file#{}", path.display())
    }

    /// `host run manifest --settings SITE --json` with `manifest` as the
    /// site, the watched directory and the kept state directory.
    fn run(&self, manifest: &str, args: &[&str]) -> Run {
        let site = self.fake.root().join("site.yaml");
        if fs::read_to_string(&site).ok().as_deref() != Some(manifest) {
            fs::write(&site, manifest).unwrap();
            sign_file(&site);
        }
        let mut all: Vec<OsString> = vec![
            "--settings".into(),
            site.into(),
            "--json".into(),
            "--detailed-exitcodes".into(),
            "--watch-path".into(),
            self.etc.clone().into(),
            "--state-dir".into(),
            self.state.clone().into(),
        ];
        all.extend(args.iter().map(OsString::from));
        self.fake
            .host_run()
            .policy(signed_policy("manifest-policy"))
            .args(all)
            .run()
    }

    fn web_subscribed_to(&self, references: &[String]) -> String {
        let list = references
            .iter()
            .map(|r| format!("\"{r}\""))
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "- service:\n    - web:\n        ensure: running\n        subscribe: [{list}]\n    - db:\n        ensure: running\n"
        )
    }
}

#[test]
fn a_changed_file_restarts_its_subscriber_once_and_first_sight_only_records() {
    let m = Machine::new();
    let manifest = m.web_subscribed_to(&[m.reference(&m.conf())]);

    // First sight: recorded, nothing restarts, and the report says why.
    let r = m.run(&manifest, &[]);
    r.assert_exit(0);
    assert_eq!(m.fake.mutating_calls(), Vec::<String>::new());
    let json = r.json();
    assert_eq!(
        watched_states(resource(&json, "web")),
        ["recorded"],
        "{json:#}"
    );

    // Unchanged: nothing.
    assert_eq!(m.run(&manifest, &[]).code, Some(0));
    assert_eq!(m.fake.mutating_calls(), Vec::<String>::new());

    // Edited: one restart of web, not of db; the report says why.
    fs::write(m.conf(), "workers = 4\n").unwrap();
    let r = m.run(&manifest, &[]);
    r.assert_exit(2);
    assert_eq!(m.fake.mutating_calls(), ["restart --system -- web"]);
    let json = r.json();
    let web = resource(&json, "web");
    assert_eq!(web["actions"], serde_json::json!(["restarted"]), "{json:#}");
    assert_eq!(
        web["triggered_by"],
        serde_json::json!([{"reference": m.reference(&m.conf()), "change": "changed"}])
    );

    // And only once.
    m.fake.clear_calls();
    m.run(&manifest, &[]).assert_exit(0);
    assert_eq!(m.fake.mutating_calls(), Vec::<String>::new());

    // The human report names the cause.
    fs::write(m.conf(), "workers = 8\n").unwrap();
    let site = m.fake.root().join("site.yaml");
    let out = m
        .fake
        .host_run()
        .policy(signed_policy("manifest-policy"))
        .args(["--settings".as_ref(), site.as_os_str()])
        .args(["--watch-path".as_ref(), m.etc.as_os_str()])
        .args(["--state-dir".as_ref(), m.state.as_os_str()])
        .run();
    out.assert_exit(0);
    let line = format!("restarted ({} changed)", m.reference(&m.conf()));
    assert!(
        out.stdout.contains(&line),
        "{line:?} not in:\n{}",
        out.stdout
    );
}

#[test]
fn noop_reports_the_restart_and_records_nothing_so_the_real_run_restarts() {
    let m = Machine::new();
    let manifest = m.web_subscribed_to(&[m.reference(&m.conf())]);
    m.run(&manifest, &[]).assert_exit(0);
    fs::write(m.conf(), "workers = 4\n").unwrap();

    let r = m.run(&manifest, &["--noop"]);
    r.assert_exit(2);
    assert_eq!(m.fake.mutating_calls(), Vec::<String>::new());
    let json = r.json();
    assert_eq!(
        resource(&json, "web")["noop_message"],
        "Would have restarted via subscribe"
    );

    let r = m.run(&manifest, &[]);
    r.assert_exit(2);
    assert_eq!(m.fake.mutating_calls(), ["restart --system -- web"]);
}

#[test]
fn a_failed_restart_is_retried_by_the_next_run_without_a_new_change() {
    let m = Machine::new();
    let manifest = m.web_subscribed_to(&[m.reference(&m.conf())]);
    m.run(&manifest, &[]).assert_exit(0);
    fs::write(m.conf(), "workers = 4\n").unwrap();
    m.fake
        .fail("restart", "web", 1, "Job for web.service failed.");
    let r = m.run(&manifest, &[]);
    assert!(matches!(r.code, Some(4 | 6)), "a failure: {}", r.stdout);
    assert_eq!(resource(&r.json(), "web")["failed"], true);

    m.fake.clear_fault("restart", "web");
    m.fake.clear_calls();
    m.run(&manifest, &[]).assert_exit(2);
    assert_eq!(m.fake.mutating_calls(), ["restart --system -- web"]);
    m.fake.clear_calls();
    m.run(&manifest, &[]).assert_exit(0);
    assert_eq!(m.fake.mutating_calls(), Vec::<String>::new());
}

#[test]
fn a_directory_covers_what_is_added_below_it() {
    let m = Machine::new();
    let conf_d = m.etc.join("web/conf.d");
    fs::create_dir_all(&conf_d).unwrap();
    let manifest = m.web_subscribed_to(&[m.reference(&conf_d)]);
    m.run(&manifest, &[]).assert_exit(0);
    fs::write(conf_d.join("tls.conf"), "on\n").unwrap();
    m.run(&manifest, &[]).assert_exit(2);
    assert_eq!(m.fake.mutating_calls(), ["restart --system -- web"]);
}

#[test]
fn a_fifo_fails_its_service_after_it_was_started_and_the_next_run_retries() {
    let m = Machine::new();
    m.fake.unit("web", "inactive", "disabled");
    m.fake.unit("db", "inactive", "enabled");
    let fifo = m.etc.join("web/pipe");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path for the call's duration.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let manifest = m.web_subscribed_to(&[m.reference(&fifo)]);
    let r = m.run(&manifest, &[]);
    assert_eq!(r.code, Some(6), "changes and a failure: {}", r.stdout);
    let json = r.json();
    let web = resource(&json, "web");
    assert_eq!(web["failed"], true, "{json:#}");
    assert_eq!(web["actions"], serde_json::json!(["started"]), "{json:#}");
    let error = web["errors"][0].as_str().unwrap();
    assert!(error.contains("is a FIFO"), "{error}");
    assert_eq!(watched_states(web), ["unreadable"], "{json:#}");
    assert_eq!(
        m.fake.mutating_calls(),
        ["start --system -- web", "start --system -- db"],
        "web started before it failed, db converged"
    );

    // Not recorded: the next run reads it again, and fails again, with
    // nothing left to do to web.
    m.fake.clear_calls();
    let r = m.run(&manifest, &[]);
    assert_eq!(r.code, Some(4), "{}", r.stdout);
    assert_eq!(resource(&r.json(), "web")["failed"], true);
    assert_eq!(m.fake.mutating_calls(), Vec::<String>::new());
}

#[test]
fn a_reference_outside_watch_paths_converges_with_a_warning_and_fires_on_refresh() {
    let m = Machine::new();
    m.fake.unit("web", "inactive", "enabled");
    let manifest = m.web_subscribed_to(&["file#/root/.profile".to_owned(), "foo#bar".to_owned()]);
    let r = m.run(&manifest, &[]);
    r.assert_exit(2);
    assert_eq!(
        m.fake.mutating_calls(),
        ["start --system -- web"],
        "web converges"
    );
    let json = r.json();
    let web = resource(&json, "web");
    assert_eq!(web["failed"], false, "{json:#}");
    assert_eq!(
        web["warnings"],
        serde_json::json!([
            format!(
                "file#/root/.profile is outside watch_paths ({}): not watched; it fires only on --refresh",
                m.etc.display()
            ),
            "foo#bar is not a file# or package# reference, the only kinds the host watches: not watched; it fires only on --refresh"
        ]),
        "{json:#}"
    );
    assert_eq!(web["reference_counts"]["not_watched"], 2, "{json:#}");
    assert!(web.get("watched").is_none(), "nothing watched: {json:#}");
    let record = fs::read_to_string(m.state.join("subscriptions.json")).unwrap_or_default();
    assert!(!record.contains("/root/.profile"), "not recorded: {record}");

    // The human report says it under the service's line.
    let site = m.fake.root().join("site.yaml");
    let out = m
        .fake
        .host_run()
        .policy(signed_policy("manifest-policy"))
        .args(["--settings".as_ref(), site.as_os_str()])
        .args(["--watch-path".as_ref(), m.etc.as_os_str()])
        .args(["--state-dir".as_ref(), m.state.as_os_str()])
        .run();
    out.assert_exit(0);
    let line = "service#web  unchanged\n    warning: file#/root/.profile is outside watch_paths (";
    assert!(
        out.stdout.contains(line),
        "{line:?} not in:\n{}",
        out.stdout
    );

    // --refresh fires it, as the design says; nothing else does.
    m.fake.clear_calls();
    m.run(&manifest, &[]).assert_exit(0);
    assert_eq!(m.fake.mutating_calls(), Vec::<String>::new());
    m.run(&manifest, &["--refresh", "file#/root/.profile"])
        .assert_exit(2);
    assert_eq!(m.fake.mutating_calls(), ["restart --system -- web"]);
}

/// What the host's peak RSS may exceed its memory limit and one copy of
/// the references by: the baseline `memory_budget.rs` measured for a
/// trivial policy (36-37 MiB), rounded up as it does.
const BASELINE_KIB: u64 = 64 << 10;

const TIME: &str = "/usr/bin/time";

/// `host run hostile-many-references` declaring `count` references of
/// `length` bytes, each naming web's configuration, under GNU time: the run
/// and the host's peak RSS in KiB.
fn many_references(m: &Machine, count: usize, length: usize, args: &[&str]) -> (Run, u64) {
    assert!(
        Path::new(TIME).is_file(),
        "{TIME} is missing: install GNU time (apt-get install time)"
    );
    let settings = m.fake.root().join("references.txt");
    fs::write(
        &settings,
        format!("{count} {length} {}", m.conf().display()),
    )
    .unwrap();
    sign_file(&settings);
    let rss_file = m.fake.root().join("peak-rss");
    let run = m
        .fake
        .host_run()
        .wrapped_in(
            TIME,
            [
                "-f".as_ref(),
                "%M".as_ref(),
                "-o".as_ref(),
                rss_file.as_os_str(),
            ],
        )
        .policy(signed_policy("hostile-many-references"))
        .args(["--settings".as_ref(), settings.as_os_str()])
        .args(["--watch-path".as_ref(), m.etc.as_os_str()])
        .args(["--state-dir".as_ref(), m.state.as_os_str()])
        .args(args)
        .run();
    let text = fs::read_to_string(&rss_file).expect("GNU time's output");
    let peak_rss_kib = text
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no peak RSS in GNU time's output {text:?}"));
    eprintln!(
        "{count} references of {length} bytes: peak RSS {:.1} MiB, stdout {} bytes",
        peak_rss_kib as f64 / 1024.0,
        run.stdout.len()
    );
    (run, peak_rss_kib)
}

#[test]
fn ten_thousand_references_of_four_thousand_bytes_keep_report_record_and_memory_bounded() {
    const COUNT: usize = 10_000;
    const LENGTH: usize = 4_000;
    const MIB: u64 = 1 << 20;
    let report_limit: usize = 1 << 20;
    // The default memory limit (64 MiB), plus one copy of what the guest
    // declared, plus the baseline.
    let bound_kib = (64 * MIB + (COUNT * LENGTH) as u64) / 1024 + BASELINE_KIB;
    let m = Machine::new();

    // First sight, for people: counted, not listed.
    let (r, peak) = many_references(&m, COUNT, LENGTH, &[]);
    r.assert_exit(0);
    assert!(
        r.stdout
            .contains("unchanged (10,000 references first seen: recorded, nothing to restart)"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.len() < 4 << 10,
        "human output of {} bytes",
        r.stdout.len()
    );
    assert!(
        peak < bound_kib,
        "peak RSS {peak} KiB, over {bound_kib} KiB"
    );

    // The record: the long references kept as digests.
    let record = m.state.join("subscriptions.json");
    let size = fs::metadata(&record).unwrap().len();
    eprintln!("subscriptions.json: {size} bytes");
    assert!(size < 3 * MIB, "subscriptions.json is {size} bytes");

    // Unchanged, as JSON: within the report limit, every state counted.
    let (r, peak) = many_references(&m, COUNT, LENGTH, &["--json"]);
    r.assert_exit(0);
    assert!(
        r.stdout.len() < report_limit + (64 << 10),
        "a JSON report of {} bytes, over the report limit of {report_limit}",
        r.stdout.len()
    );
    let json = r.json();
    let web = resource(&json, "web");
    assert_eq!(
        web["reference_counts"]["unchanged"], COUNT,
        "{:#}",
        web["reference_counts"]
    );
    let listed = web["watched"].as_array().unwrap().len();
    assert!(listed > 100 && listed < COUNT, "{listed} listed");
    assert_eq!(web["reference_counts"]["left_out"], COUNT - listed);
    assert!(
        peak < bound_kib,
        "peak RSS {peak} KiB, over {bound_kib} KiB"
    );

    // Edited: the one restart, and what triggered it counted too.
    fs::write(m.conf(), "workers = 4\n").unwrap();
    let (r, _) = many_references(&m, COUNT, LENGTH, &[]);
    r.assert_exit(0);
    assert_eq!(m.fake.mutating_calls(), ["restart --system -- web"]);
    assert!(
        r.stdout.contains(" changed and 9,997 more)"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.len() < 4 << 10,
        "human output of {} bytes",
        r.stdout.len()
    );
}

#[test]
fn a_declaration_over_ten_thousand_references_fails_before_run() {
    let m = Machine::new();
    m.fake.unit("web", "inactive", "enabled");
    let (r, _) = many_references(&m, 10_001, 100, &["--json"]);
    let json = r.assert_failure("subscriptions");
    let message = json["failure"]["message"].as_str().unwrap();
    assert!(
        message.contains("10001 references; at most 10000"),
        "{message}"
    );
    assert!(
        m.fake.calls().iter().all(|c| !c.contains("web")),
        "run was never called: {:?}",
        m.fake.calls()
    );
    assert_eq!(m.fake.mutating_calls(), Vec::<String>::new());
}
