//! End-to-end: `file#` subscriptions fire by themselves. A plain run (no
//! `--refresh`) notices that a subscribed file changed since the service's
//! last successful apply and restarts the service, once; the first sight of
//! a reference only records it; a noop run records nothing; a failed
//! restart is retried by the next run; an unreadable reference fails its
//! service and nothing else. Against the fake systemctl.

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
fn an_unreadable_reference_fails_its_service_and_the_others_apply() {
    let m = Machine::new();
    m.fake.unit("db", "inactive", "enabled");
    let fifo = m.etc.join("web/pipe");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path for the call's duration.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let manifest = m.web_subscribed_to(&[m.reference(&fifo)]);
    let r = m.run(&manifest, &[]);
    assert!(matches!(r.code, Some(4 | 6)), "a failure: {}", r.stdout);
    let json = r.json();
    let web = resource(&json, "web");
    assert_eq!(web["failed"], true);
    let error = web["errors"][0].as_str().unwrap();
    assert!(error.contains("is a FIFO"), "{error}");
    assert_eq!(
        m.fake.mutating_calls(),
        ["start --system -- db"],
        "web untouched, db still converged"
    );

    // Outside watch_paths: the error names the setting.
    let manifest = m.web_subscribed_to(&["file#/root/.profile".to_owned()]);
    let r = m.run(&manifest, &[]);
    let json = r.json();
    let error = resource(&json, "web")["errors"][0]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(error.contains("outside watch_paths"), "{error}");
}
