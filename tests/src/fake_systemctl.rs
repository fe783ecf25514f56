//! A fake `systemctl` on `PATH`: fast, deterministic, and able to fail on
//! demand.
//!
//! [`FakeSystemctl::new`] makes a private directory with `bin/systemctl` (a
//! copy of `tests/fake-systemctl/systemctl`) and `state/`. The script keeps
//! each unit's `is-active` and `is-enabled` words in files under `state/`,
//! answers like systemctl 252 does (docs/service-type.md, "Reading status"),
//! and logs every invocation with all its arguments. It finds its state from
//! its own location, because the host runs it with a cleared environment.
//!
//! ```no_run
//! use policy_host_e2e::fake_systemctl::FakeSystemctl;
//! let fake = FakeSystemctl::new();
//! fake.unit("web", "inactive", "disabled")
//!     .fail("start", "db", 1, "Job for db.service failed.");
//! // ... run the host with `PATH=fake.path_env()` ...
//! assert_eq!(fake.mutating_calls(), ["start --system -- web"]);
//! ```

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The commands that change the system.
pub const MUTATING_COMMANDS: [&str; 5] = ["start", "stop", "restart", "enable", "disable"];

/// The full unit name systemctl would use for `name` (`web` → `web.service`).
pub fn unit_name(name: &str) -> String {
    if contract_words::unit_type(name).is_some() {
        name.to_string()
    } else {
        format!("{name}.service")
    }
}

/// A fake systemctl in a private temporary directory, removed on drop (set
/// `FAKE_SYSTEMCTL_KEEP=1` to keep it for debugging).
#[derive(Debug)]
pub struct FakeSystemctl {
    root: PathBuf,
}

impl Default for FakeSystemctl {
    fn default() -> Self {
        Self::new()
    }
}

/// A fresh, empty directory under the system temp dir (mode 0755, as the
/// tests' other users may need to look in), kept until its owner removes it.
pub fn temp_dir(prefix: &str) -> PathBuf {
    let dir = tempfile::Builder::new()
        .prefix(&format!("{prefix}-"))
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .tempdir()
        .unwrap_or_else(|e| panic!("cannot create a temporary directory: {e}"));
    dir.keep()
}

impl FakeSystemctl {
    /// Sets up `bin/systemctl` and an empty `state/` (no units: every unit is
    /// missing until [`unit`](Self::unit) adds it).
    pub fn new() -> Self {
        let root = temp_dir("fake-systemctl");
        let bin = root.join("bin");
        fs::create_dir_all(&bin).unwrap();
        fs::create_dir_all(root.join("state/units")).unwrap();
        fs::create_dir_all(root.join("state/faults")).unwrap();
        let script = crate::build::workspace_root().join("tests/fake-systemctl/systemctl");
        let target = bin.join("systemctl");
        crate::executable::install_executable(&script, &target);
        for log in ["calls.log", "env.log", "rejected.log"] {
            fs::write(root.join("state").join(log), "").unwrap();
        }
        Self { root }
    }

    /// The fake's private directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory holding the fake `systemctl` (and nothing else).
    pub fn bin_dir(&self) -> PathBuf {
        self.root.join("bin")
    }

    /// The fake `systemctl` itself.
    pub fn systemctl(&self) -> PathBuf {
        self.bin_dir().join("systemctl")
    }

    /// The state directory the script reads and writes.
    pub fn state_dir(&self) -> PathBuf {
        self.root.join("state")
    }

    /// A `PATH` with the fake's `bin/` first, then the standard directories.
    pub fn path_env(&self) -> OsString {
        let mut path = self.bin_dir().into_os_string();
        path.push(":/usr/sbin:/usr/bin:/sbin:/bin");
        path
    }

    /// A command running `program` with `PATH` set to [`path_env`](Self::path_env).
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new(program);
        cmd.env("PATH", self.path_env());
        cmd
    }

    /// A command running the `host` binary (built on first use) with the
    /// fake first on `PATH`.
    pub fn host_command(&self) -> Command {
        self.command(crate::build::host_binary())
    }

    fn unit_dir(&self, name: &str) -> PathBuf {
        self.state_dir().join("units").join(unit_name(name))
    }

    /// A machine where the example policy's three units are as it has not
    /// converged them yet: httpd and metrics-agent stopped and disabled,
    /// legacy-ftpd running and enabled.
    pub fn example_units() -> Self {
        let fake = Self::new();
        fake.example_units_unconverged();
        fake
    }

    /// Sets the example policy's three units back to unconverged.
    pub fn example_units_unconverged(&self) -> &Self {
        self.unit("httpd", "inactive", "disabled")
            .unit("legacy-ftpd", "active", "enabled")
            .unit("metrics-agent", "inactive", "disabled")
    }

    /// Adds (or replaces) a unit with the given `is-active` word (`active`,
    /// `inactive`, `failed`, ...) and `is-enabled` word (`enabled`,
    /// `disabled`, `masked`, `static`, ...). Units not added are missing.
    ///
    /// The words behave as in systemd 252: a plain `disable` leaves an
    /// `enabled-runtime` unit as it is, and `disable --runtime` disables it;
    /// `disable` of an `alias` or a `linked` unit deletes the link (the unit
    /// is then missing); `stop` of a `transient` unit makes it disappear.
    pub fn unit(&self, name: &str, active: &str, enabled: &str) -> &Self {
        let dir = self.unit_dir(name);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("active"), format!("{active}\n")).unwrap();
        fs::write(dir.join("enabled"), format!("{enabled}\n")).unwrap();
        self
    }

    /// Removes a unit: it becomes missing.
    pub fn remove_unit(&self, name: &str) -> &Self {
        let dir = self.unit_dir(name);
        if dir.exists() {
            fs::remove_dir_all(dir).unwrap();
        }
        self
    }

    /// After `start`/`restart` (which still exit 0) the unit's `is-active` is
    /// `active`: e.g. `"failed"` emulates a `Type=simple` unit whose program
    /// exits at once.
    pub fn start_result(&self, name: &str, active: &str) -> &Self {
        let dir = self.unit_dir(name);
        assert!(dir.is_dir(), "add unit {name} first");
        fs::write(dir.join("start_result"), format!("{active}\n")).unwrap();
        self
    }

    fn fault_dir(&self, command: &str, name: Option<&str>) -> PathBuf {
        let key = name.map(unit_name).unwrap_or_else(|| "_".to_string());
        let dir = self.state_dir().join("faults").join(command).join(key);
        if dir.exists() {
            fs::remove_dir_all(&dir).unwrap();
        }
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// `command` (`start`, `is-active`, ...) on unit `name` prints `stderr`
    /// and exits with `rc`, changing nothing.
    pub fn fail(&self, command: &str, name: &str, rc: i32, stderr: &str) -> &Self {
        let dir = self.fault_dir(command, Some(name));
        fs::write(dir.join("rc"), rc.to_string()).unwrap();
        fs::write(dir.join("stderr"), stderr).unwrap();
        self
    }

    /// `daemon-reload` prints `stderr` and exits with `rc`.
    pub fn fail_daemon_reload(&self, rc: i32, stderr: &str) -> &Self {
        let dir = self.fault_dir("daemon-reload", None);
        fs::write(dir.join("rc"), rc.to_string()).unwrap();
        fs::write(dir.join("stderr"), stderr).unwrap();
        self
    }

    /// `command` on unit `name` prints `stdout` (a newline is added) and
    /// exits with `rc`: for `is-active`/`is-enabled` answers the host must
    /// refuse to interpret.
    pub fn output(&self, command: &str, name: &str, stdout: &str, rc: i32) -> &Self {
        let dir = self.fault_dir(command, Some(name));
        fs::write(dir.join("rc"), rc.to_string()).unwrap();
        fs::write(dir.join("stdout"), stdout).unwrap();
        self
    }

    /// `command` on unit `name` hangs for `seconds` (as a single process,
    /// like a systemctl waiting on a stuck job) and then exits 0.
    pub fn hang(&self, command: &str, name: &str, seconds: u32) -> &Self {
        let dir = self.fault_dir(command, Some(name));
        fs::write(dir.join("sleep"), seconds.to_string()).unwrap();
        self
    }

    /// Makes the `n`th invocation from now on (counting the calls logged so
    /// far) kill its caller, the host, with SIGKILL, once.
    pub fn kill_host_at(&self, n: usize) -> &Self {
        fs::write(self.state_dir().join("kill-host-at"), n.to_string()).unwrap();
        self
    }

    /// Removes the fault injected for `command` on `name`.
    pub fn clear_fault(&self, command: &str, name: &str) -> &Self {
        let dir = self.fault_dir(command, Some(name));
        fs::remove_dir_all(dir).unwrap();
        self
    }

    /// Emulates systemd >= 253: `is-enabled` of a missing unit prints
    /// `not-found` and exits 4 (252 prints nothing and exits 1).
    pub fn systemd_253(&self) -> &Self {
        fs::write(self.state_dir().join("mode"), "253\n").unwrap();
        self
    }

    fn read_lines(&self, log: &str) -> Vec<String> {
        let text = fs::read_to_string(self.state_dir().join(log)).unwrap_or_default();
        text.lines().map(str::to_string).collect()
    }

    /// Every invocation so far, one line each: the arguments, each quoted as
    /// bash `printf %q` would (plain names appear as they are), e.g.
    /// `is-active --system -- web` or `daemon-reload`.
    pub fn calls(&self) -> Vec<String> {
        self.read_lines("calls.log")
    }

    /// The invocations of start/stop/restart/enable/disable, in order.
    pub fn mutating_calls(&self) -> Vec<String> {
        self.calls()
            .into_iter()
            .filter(|c| {
                let cmd = c.split(' ').next().unwrap_or("");
                MUTATING_COMMANDS.contains(&cmd)
            })
            .collect()
    }

    /// How many times `daemon-reload` ran.
    pub fn daemon_reloads(&self) -> usize {
        self.calls()
            .iter()
            .filter(|c| *c == "daemon-reload")
            .count()
    }

    /// Invocations whose argument shape was neither `daemon-reload`,
    /// `CMD --system -- NAME` with a known CMD, nor `disable --runtime
    /// --system -- NAME` (the fake exited 64 for them).
    pub fn rejected_calls(&self) -> Vec<String> {
        self.read_lines("rejected.log")
    }

    /// For each invocation, the names of the environment variables it got.
    pub fn env_names(&self) -> Vec<Vec<String>> {
        self.read_lines("env.log")
            .into_iter()
            .map(|l| l.split_whitespace().map(str::to_string).collect())
            .collect()
    }

    /// Forgets the invocations logged so far.
    pub fn clear_calls(&self) {
        for log in ["calls.log", "env.log", "rejected.log"] {
            fs::write(self.state_dir().join(log), "").unwrap();
        }
    }

    fn read_word(&self, name: &str, file: &str) -> Option<String> {
        fs::read_to_string(self.unit_dir(name).join(file))
            .ok()
            .map(|s| s.trim().to_string())
    }

    /// The unit's current `is-active` word, `None` if the unit is missing.
    pub fn active(&self, name: &str) -> Option<String> {
        self.read_word(name, "active")
    }

    /// The unit's current `is-enabled` word, `None` if the unit is missing.
    pub fn enabled(&self, name: &str) -> Option<String> {
        self.read_word(name, "enabled")
    }

    /// `(active, enabled)`, `None` if the unit is missing.
    pub fn state(&self, name: &str) -> Option<(String, String)> {
        Some((self.active(name)?, self.enabled(name)?))
    }
}

impl Drop for FakeSystemctl {
    fn drop(&mut self) {
        if std::env::var_os("FAKE_SYSTEMCTL_KEEP").is_none() {
            let _ = fs::remove_dir_all(&self.root);
        }
    }
}

/// The `systemctl show` the host makes to judge a start's settle window,
/// as the fake's call log writes it (`%q`-quoted: commas escaped).
pub fn show(name: &str) -> String {
    let unit = if name.contains('.') {
        name.to_owned()
    } else {
        format!("{name}.service")
    };
    format!(
        "show --property=ActiveState\\,SubState\\,InvocationID\\,NRestarts\\,Result\\,\
         ExecMainCode\\,ExecMainStatus\\,Job --system -- {unit}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the fake like the host does: cleared environment.
    fn sysctl(fake: &FakeSystemctl, args: &[&str]) -> (String, String, i32) {
        let out = Command::new(fake.systemctl())
            .args(args)
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .env("LANG", "C")
            .env("LC_ALL", "C")
            .output()
            .unwrap();
        (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
            out.status.code().unwrap(),
        )
    }

    fn q(fake: &FakeSystemctl, cmd: &str, name: &str) -> (String, String, i32) {
        sysctl(fake, &[cmd, "--system", "--", name])
    }

    fn o(stdout: &str, stderr: &str, rc: i32) -> (String, String, i32) {
        (stdout.to_string(), stderr.to_string(), rc)
    }

    #[test]
    fn answers_like_systemctl_252() {
        let fake = FakeSystemctl::new();
        fake.unit("web", "inactive", "disabled")
            .unit("m", "inactive", "masked")
            .unit("st", "active", "static");
        assert_eq!(q(&fake, "is-active", "web"), o("inactive\n", "", 3));
        assert_eq!(q(&fake, "is-enabled", "web"), o("disabled\n", "", 1));
        assert_eq!(q(&fake, "start", "web"), o("", "", 0));
        assert_eq!(q(&fake, "is-active", "web"), o("active\n", "", 0));
        assert_eq!(q(&fake, "enable", "web.service").2, 0);
        assert_eq!(q(&fake, "is-enabled", "web"), o("enabled\n", "", 0));
        assert_eq!(
            fake.state("web").unwrap(),
            ("active".into(), "enabled".into())
        );
        assert_eq!(q(&fake, "stop", "web"), o("", "", 0));
        assert_eq!(q(&fake, "disable", "web").2, 0);
        assert_eq!(
            fake.state("web").unwrap(),
            ("inactive".into(), "disabled".into())
        );

        assert_eq!(q(&fake, "is-enabled", "st"), o("static\n", "", 0));
        assert_eq!(q(&fake, "is-enabled", "m"), o("masked\n", "", 1));
        assert_eq!(
            q(&fake, "start", "m"),
            o(
                "",
                "Failed to start m.service: Unit m.service is masked.\n",
                1
            )
        );

        assert_eq!(q(&fake, "is-active", "nosuch"), o("inactive\n", "", 3));
        assert_eq!(
            q(&fake, "is-enabled", "nosuch"),
            o(
                "",
                "Failed to get unit file state for nosuch.service: No such file or directory\n",
                1
            )
        );
        assert_eq!(
            q(&fake, "start", "nosuch"),
            o(
                "",
                "Failed to start nosuch.service: Unit nosuch.service not found.\n",
                5
            )
        );
        fake.systemd_253();
        assert_eq!(q(&fake, "is-enabled", "nosuch"), o("not-found\n", "", 4));
        assert_eq!(sysctl(&fake, &["daemon-reload"]), o("", "", 0));
        assert!(fake.rejected_calls().is_empty());
        assert_eq!(fake.calls().len(), 16);
        assert_eq!(fake.calls()[0], "is-active --system -- web");
        assert_eq!(fake.calls()[15], "daemon-reload");
        assert_eq!(fake.mutating_calls().len(), 6);
        for mut names in fake.env_names() {
            names.sort();
            assert_eq!(names, ["LANG", "LC_ALL", "PATH"]);
        }
    }

    #[test]
    fn answers_for_kinds_of_units_like_systemctl_252() {
        let fake = FakeSystemctl::new();
        fake.unit("rt", "active", "enabled-runtime")
            .unit("ali", "active", "alias")
            .unit("lnk", "inactive", "linked")
            .unit("tr", "active", "transient")
            .unit("st", "inactive", "static");
        let runtime = |name: &str| sysctl(&fake, &["disable", "--runtime", "--system", "--", name]);

        // A plain disable leaves the runtime enablement; --runtime removes it.
        assert_eq!(q(&fake, "disable", "rt"), o("", "", 0));
        assert_eq!(q(&fake, "is-enabled", "rt"), o("enabled-runtime\n", "", 0));
        assert_eq!(
            runtime("rt"),
            o(
                "",
                "Removed \"/run/systemd/system/multi-user.target.wants/rt.service\".\n",
                0
            )
        );
        assert_eq!(q(&fake, "is-enabled", "rt"), o("disabled\n", "", 1));
        assert_eq!(runtime("st"), o("", "", 0));
        assert_eq!(fake.enabled("st").unwrap(), "static");

        // Disabling an alias or a link deletes it: the unit is gone.
        for name in ["ali", "lnk"] {
            assert_eq!(q(&fake, "disable", name).2, 0);
            assert_eq!(fake.state(name), None, "{name}");
            assert_eq!(q(&fake, "is-enabled", name).2, 1);
        }
        // A transient unit is gone once stopped; static stays static.
        assert_eq!(q(&fake, "is-enabled", "tr"), o("transient\n", "", 0));
        assert_eq!(q(&fake, "stop", "tr"), o("", "", 0));
        assert_eq!(fake.state("tr"), None);
        assert_eq!(q(&fake, "disable", "st"), o("", "", 0));
        assert_eq!(q(&fake, "is-enabled", "st"), o("static\n", "", 0));

        assert!(
            fake.rejected_calls().is_empty(),
            "{:?}",
            fake.rejected_calls()
        );
        assert_eq!(
            fake.mutating_calls()[1],
            "disable --runtime --system -- rt",
            "the runtime disable is a mutating call"
        );
        // Its faults are keyed `disable-runtime`.
        fake.unit("rt", "active", "enabled-runtime").fail(
            "disable-runtime",
            "rt",
            1,
            "Access denied",
        );
        assert_eq!(runtime("rt"), o("", "Access denied\n", 1));
        assert_eq!(fake.enabled("rt").unwrap(), "enabled-runtime");
    }

    #[test]
    fn rejects_other_argument_shapes() {
        let fake = FakeSystemctl::new();
        fake.unit("web", "active", "enabled");
        for args in [
            &["is-active", "web"][..],
            &["is-active", "--system", "web"],
            &["--help"],
            &["start", "--", "--system", "web"],
            &["daemon-reload", "--system"],
            &["kill", "--system", "--", "web"],
            &["enable", "--runtime", "--system", "--", "web"],
            &["disable", "--system", "--runtime", "--", "web"],
            &[],
        ] {
            assert_eq!(sysctl(&fake, args).2, 64, "{args:?}");
        }
        assert_eq!(fake.rejected_calls().len(), 9);
        assert_eq!(fake.rejected_calls()[0], "is-active web");
        assert_eq!(
            fake.state("web").unwrap(),
            ("active".into(), "enabled".into())
        );
    }

    #[test]
    fn injected_faults() {
        let fake = FakeSystemctl::new();
        fake.unit("web", "inactive", "disabled")
            .fail("start", "web", 7, "boom")
            .output("is-active", "web", "bogus", 0)
            .fail_daemon_reload(1, "reload failed");
        assert_eq!(q(&fake, "start", "web"), o("", "boom\n", 7));
        assert_eq!(fake.active("web").unwrap(), "inactive");
        assert_eq!(q(&fake, "is-active", "web"), o("bogus\n", "", 0));
        assert_eq!(
            sysctl(&fake, &["daemon-reload"]),
            o("", "reload failed\n", 1)
        );
        fake.clear_fault("start", "web")
            .start_result("web", "failed");
        assert_eq!(q(&fake, "start", "web"), o("", "", 0));
        assert_eq!(fake.active("web").unwrap(), "failed");
        fake.hang("stop", "web", 1);
        let t = std::time::Instant::now();
        assert_eq!(q(&fake, "stop", "web").2, 0);
        assert!(t.elapsed() >= std::time::Duration::from_millis(900));
        // Hostile names never touch the file system and log quoted.
        assert_eq!(q(&fake, "start", "../../x").2, 5);
        assert_eq!(q(&fake, "start", "a b").2, 5);
        assert_eq!(fake.calls().last().unwrap(), "start --system -- a\\ b");
    }
}
