//! One way to build a `host run` in the end-to-end tests: the fake
//! `systemctl` first on `PATH`, the test key trusted, this test process's
//! lock and compile cache, a state directory of the call's own. Each default
//! gives way to the test's own flag of the same name, so a test says only
//! what it is about.

use std::ffi::{OsStr, OsString};
use std::process::{Command, Output};

use crate::build::{host_binary, isolation_args, trust_args};
use crate::fake_systemctl::FakeSystemctl;
use crate::outcome::{run, Run};

/// The flags that say whom to trust: the test key is not added when a test
/// gives any of them. (A `--config` naming a keys directory does not count:
/// a test trusting only that says [`HostRun::without_test_key`].)
const TRUST_FLAGS: [&str; 3] = ["--trusted-key", "--trusted-keys-dir", "--allow-unsigned"];

/// A `host run` being built (see the module documentation).
#[must_use]
pub struct HostRun<'a> {
    fake: &'a FakeSystemctl,
    policies: Vec<OsString>,
    args: Vec<OsString>,
    /// A program the host runs under (`/usr/bin/time -f %M -o FILE`).
    wrapper: Vec<OsString>,
    trust: bool,
}

impl FakeSystemctl {
    /// `host run` against this fake; see [`HostRun`].
    pub fn host_run(&self) -> HostRun<'_> {
        HostRun {
            fake: self,
            policies: Vec::new(),
            args: Vec::new(),
            wrapper: Vec::new(),
            trust: true,
        }
    }
}

impl HostRun<'_> {
    /// A policy (or directory, or reference) to run; repeatable.
    pub fn policy(mut self, policy: impl AsRef<OsStr>) -> Self {
        self.policies.push(policy.as_ref().to_owned());
        self
    }

    /// Flags and values, after the defaults they replace.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// No trust flag at all: the host's own default (host.toml, the system
    /// directory) decides, or the test's flags.
    pub fn without_test_key(mut self) -> Self {
        self.trust = false;
        self
    }

    /// Runs the host under `program ARGS...` (for example GNU time).
    pub fn wrapped_in<I, S>(mut self, program: impl AsRef<OsStr>, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.wrapper = std::iter::once(program.as_ref().to_owned())
            .chain(args.into_iter().map(|a| a.as_ref().to_owned()))
            .collect();
        self
    }

    fn gives(&self, flag: &str) -> bool {
        self.args.iter().any(|a| {
            let a = a.to_string_lossy();
            a == flag || a.starts_with(&format!("{flag}="))
        })
    }

    /// The command, ready to run.
    pub fn command(self) -> Command {
        let mut cmd = match self.wrapper.split_first() {
            None => self.fake.host_command(),
            Some((program, wrapper_args)) => {
                let mut cmd = self.fake.command(program);
                cmd.args(wrapper_args).arg(host_binary());
                cmd
            }
        };
        cmd.arg("run").args(&self.policies);
        if self.trust && !TRUST_FLAGS.iter().any(|f| self.gives(f)) {
            cmd.args(trust_args());
        }
        for pair in isolation_args().chunks(2) {
            if !self.gives(&pair[0].to_string_lossy()) {
                cmd.args(pair);
            }
        }
        cmd.args(&self.args);
        cmd
    }

    /// Runs it: exit code, output and time.
    pub fn run(self) -> Run {
        run(self.command())
    }

    /// Runs it, for tests that read the raw output.
    pub fn output(self) -> Output {
        self.command().output().expect("run host")
    }
}
