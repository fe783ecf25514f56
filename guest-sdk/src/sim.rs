//! A simulated system to unit-test policies natively, without WebAssembly or systemd.
//!
//! It holds unit states, records every provider call in order, and lets a
//! test inject failures: an operation that returns an error, or one that
//! "succeeds" without taking effect (like a `Type=simple` unit whose program
//! exits at once), to exercise the desired-state check.
//!
//! A unit's state carries the words `systemctl is-active` and `is-enabled`
//! would print, and the operations change them as systemd 252 does (with
//! the host's complete `disable`): `stop` removes a `transient` unit,
//! `disable` of an `alias` or a `linked` unit removes the link and so the
//! unit, `disable` of a `static`, `indirect` or `generated` one changes
//! nothing, a `masked` unit cannot be started or enabled. Units are found
//! by unit name, as systemd finds them: `web` and `web.service` are one unit.
//!
//! By default a `start`, `stop` or `restart` ends before it returns, as with
//! `systemctl` or the host's `jobs = 1`. [`SimulatedSystem::with_queued_jobs`]
//! makes them queue their job instead, as the host does over D-Bus with jobs
//! in parallel: the unit changes, and an injected failure shows, at its next
//! `status`, which carries how the job ended.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use crate::name::{unit_name, ServiceName};
use crate::provider::{JobOutcome, Operation, Progress, Provider, ProviderError, ServiceStatus};
use contract_words::UnitFileState;

/// `is-active` words and whether each counts as running (docs/service-type.md,
/// "Reading status: is-active"): the host's own table.
pub use contract_words::IS_ACTIVE_WORDS as ACTIVE_WORDS;

/// `is-enabled` words and whether each counts as enabled (docs/service-type.md,
/// "Reading status: is-enabled"): the host's own table.
pub use contract_words::IS_ENABLED_WORDS as ENABLED_WORDS;

#[track_caller]
fn counts(table: &[(&'static str, bool)], word: &str, command: &str) -> (&'static str, bool) {
    table
        .iter()
        .copied()
        .find(|(known, _)| *known == word)
        .unwrap_or_else(|| panic!("{word:?} is not a word systemctl {command} prints"))
}

/// The state of one simulated unit: whether it runs and starts at boot, and
/// the words systemd says that with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct UnitState {
    /// Whether it counts as running (`active`, `reloading`, `refreshing`; `activating`
    /// and `deactivating` count as stopped, as `inactive` and `failed` do).
    pub running: bool,
    /// Whether it counts as starting at boot.
    pub enabled: bool,
    /// What `systemctl is-active` prints: `active`, `inactive`, `failed`, ...
    pub active_word: &'static str,
    /// What `systemctl is-enabled` prints: `enabled`, `disabled`, `static`,
    /// `alias`, `enabled-runtime`, `masked`, ...
    pub enabled_word: &'static str,
    /// systemd is restarting the unit itself (`Restart=`): how many times
    /// it did since the unit was started by hand, and how its last run
    /// ended, as the host words it. See [`UnitState::crash_looping`].
    pub restarting: Option<(u32, &'static str)>,
}

/// Stopped and disabled.
impl Default for UnitState {
    fn default() -> Self {
        Self {
            running: false,
            enabled: false,
            active_word: "inactive",
            enabled_word: "disabled",
            restarting: None,
        }
    }
}

impl UnitState {
    /// Running (`active`) and disabled.
    pub fn running() -> Self {
        Self::default().with_active_word("active")
    }

    /// Stopped (`inactive`) and disabled.
    pub fn stopped() -> Self {
        Self::default()
    }

    /// Between two runs systemd makes by itself (`Restart=`, `SubState`
    /// `auto-restart`): `activating`, restarted `restarts` times, its last
    /// run ended as `last_exit` says (`"Result: exit-code; main process
    /// exited with status 3"`). A start or stop makes it an ordinary unit
    /// again.
    pub fn crash_looping(restarts: u32, last_exit: &'static str) -> Self {
        let mut state = Self::default().with_active_word("activating");
        state.restarting = Some((restarts, last_exit));
        state
    }

    /// `enabled`.
    pub fn enabled(self) -> Self {
        self.with_enabled_word("enabled")
    }

    /// `disabled`.
    pub fn disabled(self) -> Self {
        self.with_enabled_word("disabled")
    }

    /// Sets what `is-active` says, and so whether the unit counts as running:
    /// `UnitState::stopped().with_active_word("failed")`. Panics on a word
    /// systemctl does not print.
    #[track_caller]
    pub fn with_active_word(mut self, word: &str) -> Self {
        (self.active_word, self.running) = counts(&ACTIVE_WORDS, word, "is-active");
        self
    }

    /// Sets what `is-enabled` says, and so whether the unit counts as
    /// enabled: `UnitState::running().with_enabled_word("static")`. Panics on
    /// a word systemctl does not print.
    #[track_caller]
    pub fn with_enabled_word(mut self, word: &str) -> Self {
        (self.enabled_word, self.enabled) = counts(&ENABLED_WORDS, word, "is-enabled");
        self
    }

    fn is_masked(&self) -> bool {
        UnitFileState::parse(self.enabled_word).is_some_and(UnitFileState::is_masked)
    }
}

/// One recorded provider call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// Which of the six operations.
    pub operation: Operation,
    /// The name it was called with.
    pub service: String,
}

impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.operation, self.service)
    }
}

/// What an injected fault does.
#[derive(Debug, Clone)]
enum Fault {
    Fail(ProviderError),
    NoEffect,
    /// The operation works, then `is-enabled` says this word (once).
    LeavesEnabledWord(&'static str),
    /// The start or restart works, and the unit dies before the host's
    /// settle window ends: its next `status` finds it `failed` and says
    /// why, as the job's outcome.
    DiesAfterStart(String),
}

/// What an operation does to a unit.
enum Effect {
    Keep,
    Set(UnitState),
    Remove,
    Refuse(ProviderError),
}

/// A job queued and not yet ended: what it will do to its unit.
#[derive(Debug, Clone)]
struct QueuedJob {
    operation: Operation,
    outcome: Result<Option<UnitState>, ProviderError>,
}

/// A system of simulated units that implements [`Provider`].
#[derive(Debug, Clone, Default)]
pub struct SimulatedSystem {
    units: BTreeMap<String, UnitState>,
    faults: HashMap<(Operation, String), Fault>,
    calls: Vec<Call>,
    /// Jobs are queued (see [`SimulatedSystem::with_queued_jobs`]).
    queue_jobs: bool,
    /// Per unit, its queued job, ended at the unit's next `status`.
    queued: BTreeMap<String, QueuedJob>,
    /// Per unit, why its start did not stay up, said at its next `status`.
    settle_failures: BTreeMap<String, JobOutcome>,
    /// What the test set with [`SimulatedSystem::with_fact`], over the
    /// simulated machine's own facts.
    facts: Vec<crate::contract::Fact>,
}

impl SimulatedSystem {
    /// A system with no units: every name is `service not found`.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the machine's fact `name` (`os.version_id`, `arch`), or adds
    /// a label (`role`), as the host would give it: a policy's
    /// [`Context::fact`](crate::Context::fact) and a manifest's `when` read
    /// it. Before any is set the simulated machine is a Debian 12 host on
    /// amd64 named `sim`, with 2 CPUs, 2048 MiB and systemd 252, so that
    /// every fact the host gathers is there, as on a real machine.
    pub fn with_fact(mut self, name: &str, value: &str) -> Self {
        crate::facts::set(&mut self.facts, name, value);
        self
    }

    /// The machine's facts: the simulated ones, with those set over them.
    pub fn facts(&self) -> Vec<crate::contract::Fact> {
        let mut facts = crate::facts::simulated();
        for fact in &self.facts {
            crate::facts::set(&mut facts, fact.name.clone(), fact.value.clone());
        }
        facts
    }

    /// Adds a unit in the given state (`web` and `web.service` are the same unit).
    pub fn with_unit(mut self, name: &str, state: UnitState) -> Self {
        self.units.insert(unit_name(name).into_owned(), state);
        self
    }

    /// Makes `operation` on `service` fail with `error` (the unit is left as it was).
    pub fn with_failure(
        mut self,
        operation: Operation,
        service: &str,
        error: ProviderError,
    ) -> Self {
        self.faults.insert(
            (operation, unit_name(service).into_owned()),
            Fault::Fail(error),
        );
        self
    }

    /// Makes `operation` on `service` report success without changing the unit.
    pub fn with_no_effect(mut self, operation: Operation, service: &str) -> Self {
        self.faults.insert(
            (operation, unit_name(service).into_owned()),
            Fault::NoEffect,
        );
        self
    }

    /// Makes the next `operation` on `service` work as usual and then leave
    /// `is-enabled` saying `word`: for example a `disable` after which
    /// something else enabled the unit again at runtime. Used once, then the
    /// operation is ordinary again.
    #[track_caller]
    pub fn with_enabled_word_after(
        mut self,
        operation: Operation,
        service: &str,
        word: &str,
    ) -> Self {
        let (word, _) = counts(&ENABLED_WORDS, word, "is-enabled");
        self.faults.insert(
            (operation, unit_name(service).into_owned()),
            Fault::LeavesEnabledWord(word),
        );
        self
    }

    /// Makes a `start` or `restart` of `service` work, and the unit then
    /// die within the host's settle window (a daemon that exits a moment
    /// after its start): the call succeeds, the unit's next `status` finds
    /// it `failed` and carries `why` as the outcome of the start, as the
    /// host says it (`"web.service did not stay up: ..."`).
    pub fn with_death_after(
        mut self,
        operation: Operation,
        service: &str,
        why: impl Into<String>,
    ) -> Self {
        self.faults.insert(
            (operation, unit_name(service).into_owned()),
            Fault::DiesAfterStart(why.into()),
        );
        self
    }

    /// Makes `start`, `stop` and `restart` queue their job, as the host does
    /// with jobs in parallel: they return [`Progress::Queued`], and the
    /// unit's next `status` ends the job, changes the unit and carries the
    /// job's outcome (an injected failure shows there, not as the call's
    /// error). A unit that does not exist or is masked is refused at once,
    /// as systemd refuses to queue a job for it.
    pub fn with_queued_jobs(mut self) -> Self {
        self.queue_jobs = true;
        self
    }

    /// The current state of a unit, if it exists.
    pub fn unit(&self, name: &str) -> Option<UnitState> {
        self.units.get(unit_name(name).as_ref()).copied()
    }

    /// Every call made, in order.
    pub fn calls(&self) -> &[Call] {
        &self.calls
    }

    /// Every call as `"operation service"` text, for readable assertions.
    pub fn call_log(&self) -> Vec<String> {
        self.calls.iter().map(Call::to_string).collect()
    }

    /// The calls that would change the system (everything but `status`), as text.
    pub fn mutating_calls(&self) -> Vec<String> {
        self.calls
            .iter()
            .filter(|c| c.operation.is_mutating())
            .map(Call::to_string)
            .collect()
    }

    /// Forgets the recorded calls, keeping the unit states (for a second run).
    pub fn clear_calls(&mut self) {
        self.calls.clear();
    }

    /// Asserts that the calls made so far, `status` included, are exactly
    /// `expected`, in order, each written `"operation service"`.
    ///
    /// On a mismatch it panics with a line diff (`-` expected, `+` actual)
    /// and the actual calls in a form ready to paste into the test.
    ///
    /// ```
    /// use guest_sdk::prelude::*;
    ///
    /// let mut system = SimulatedSystem::new().with_unit("httpd", UnitState::stopped());
    /// let policy = |_: &Context| Ok::<_, PolicyError>(Policy::new().service(Service::new("httpd")));
    /// guest_sdk::run(policy, &mut system, &RunOptions::default());
    /// // The status query, the change, then the status query that verifies it.
    /// system.assert_calls(&["status httpd", "start httpd", "status httpd"]);
    /// ```
    ///
    /// A wrong expectation fails the test with:
    ///
    /// ```text
    /// calls differ from the expected ones (- expected, + actual):
    ///   status httpd
    /// - restart httpd
    /// + start httpd
    ///   status httpd
    /// actual: ["status httpd", "start httpd", "status httpd"]
    /// ```
    #[track_caller]
    pub fn assert_calls(&self, expected: &[&str]) {
        assert_lines("calls", expected, &self.call_log());
    }

    /// Asserts that the calls which change the system (everything but
    /// `status`) are exactly `expected`, in order; panics with a diff like
    /// [`assert_calls`](Self::assert_calls).
    ///
    /// ```
    /// use guest_sdk::prelude::*;
    ///
    /// let policy = |_: &Context| {
    ///     Ok::<_, PolicyError>(
    ///         Policy::new()
    ///             .service(Service::new("httpd").running().enable(true))
    ///             .service(Service::new("legacy-ftpd").stopped()),
    ///     )
    /// };
    /// let mut system = SimulatedSystem::new()
    ///     .with_unit("httpd", UnitState::stopped())
    ///     .with_unit("legacy-ftpd", UnitState::running());
    /// guest_sdk::run(policy, &mut system, &RunOptions::default());
    /// // httpd's start counts once it stayed up: its second phase comes
    /// // after the other services were begun.
    /// system.assert_mutating_calls(&["start httpd", "stop legacy-ftpd", "enable httpd"]);
    /// ```
    #[track_caller]
    pub fn assert_mutating_calls(&self, expected: &[&str]) {
        assert_lines("mutating calls", expected, &self.mutating_calls());
    }

    /// Asserts that no call changed the system (only `status` queries were
    /// made): what a second run over a converged system, or any noop run,
    /// must do.
    ///
    /// ```
    /// use guest_sdk::prelude::*;
    ///
    /// let policy = |_: &Context| Ok::<_, PolicyError>(Policy::new().service(Service::new("httpd")));
    /// let mut system = SimulatedSystem::new().with_unit("httpd", UnitState::stopped());
    /// guest_sdk::run(policy, &mut system, &RunOptions::noop());
    /// system.assert_no_mutating_calls();
    /// ```
    #[track_caller]
    pub fn assert_no_mutating_calls(&self) {
        assert_lines("mutating calls", &[], &self.mutating_calls());
    }

    /// Runs a job (`start`, `stop`, `restart`): at once, or queued until
    /// the unit's next `status`.
    fn job(
        &mut self,
        operation: Operation,
        service: &ServiceName,
        effect: impl FnOnce(UnitState, &ServiceName) -> Effect,
    ) -> Result<Progress, ProviderError> {
        if !self.queue_jobs {
            return self
                .perform(operation, service, effect)
                .map(|()| Progress::Finished);
        }
        self.calls.push(Call {
            operation,
            service: service.to_string(),
        });
        let name = service.unit_name().into_owned();
        let unit = *self
            .units
            .get(&name)
            .ok_or_else(|| ProviderError::not_found(service.as_str()))?;
        let outcome = match self.faults.get(&(operation, name.clone())).cloned() {
            Some(Fault::Fail(error)) => Err(error),
            Some(Fault::NoEffect) => Ok(Some(unit)),
            Some(Fault::DiesAfterStart(why)) => match effect(unit, service) {
                Effect::Refuse(error) => return Err(error),
                _ => {
                    self.settle_failures.insert(
                        name.clone(),
                        JobOutcome {
                            operation,
                            error: Some(ProviderError::CommandFailed(why)),
                        },
                    );
                    Ok(Some(unit.with_active_word("failed")))
                }
            },
            Some(Fault::LeavesEnabledWord(_)) | None => match effect(unit, service) {
                Effect::Refuse(error) => return Err(error),
                Effect::Set(state) => Ok(Some(state)),
                Effect::Keep => Ok(Some(unit)),
                Effect::Remove => Ok(None),
            },
        };
        self.queued.insert(name, QueuedJob { operation, outcome });
        Ok(Progress::Queued)
    }

    /// Ends the queued job of `service`, if it has one: the unit changes as
    /// the job did, and the outcome is what `status` says of it.
    fn end_queued_job(&mut self, service: &ServiceName) -> Option<JobOutcome> {
        let name = service.unit_name().into_owned();
        let job = self.queued.remove(&name)?;
        let error = match job.outcome {
            Ok(Some(state)) => {
                self.units.insert(name.clone(), state);
                None
            }
            Ok(None) => {
                self.units.remove(&name);
                None
            }
            Err(error) => Some(error),
        };
        let died = self.settle_failures.remove(&name);
        Some(died.unwrap_or(JobOutcome {
            operation: job.operation,
            error,
        }))
    }

    fn perform(
        &mut self,
        operation: Operation,
        service: &ServiceName,
        effect: impl FnOnce(UnitState, &ServiceName) -> Effect,
    ) -> Result<(), ProviderError> {
        self.calls.push(Call {
            operation,
            service: service.to_string(),
        });
        let key = (operation, service.unit_name().into_owned());
        let fault = self.faults.get(&key).cloned();
        let unit = *self
            .units
            .get(&key.1)
            .ok_or_else(|| ProviderError::not_found(service.as_str()))?;
        let effect = match fault {
            Some(Fault::Fail(error)) => return Err(error),
            Some(Fault::NoEffect) => return Ok(()),
            Some(Fault::DiesAfterStart(why)) => match effect(unit, service) {
                Effect::Refuse(error) => Effect::Refuse(error),
                _ => {
                    self.settle_failures.insert(
                        key.1.clone(),
                        JobOutcome {
                            operation,
                            error: Some(ProviderError::CommandFailed(why)),
                        },
                    );
                    Effect::Set(unit.with_active_word("failed"))
                }
            },
            Some(Fault::LeavesEnabledWord(word)) => {
                self.faults.remove(&key);
                match effect(unit, service) {
                    Effect::Set(state) => Effect::Set(state.with_enabled_word(word)),
                    Effect::Keep => Effect::Set(unit.with_enabled_word(word)),
                    other => other,
                }
            }
            None => effect(unit, service),
        };
        match effect {
            Effect::Keep => {}
            Effect::Set(state) => {
                self.units.insert(key.1, state);
            }
            Effect::Remove => {
                self.units.remove(&key.1);
            }
            Effect::Refuse(error) => return Err(error),
        }
        Ok(())
    }
}

/// `systemctl VERB` refused a masked unit, as the host reports it.
fn masked(verb: &str, service: &ServiceName, stderr: String) -> Effect {
    Effect::Refuse(ProviderError::CommandFailed(format!(
        "systemctl {verb} --system -- {service} failed (exit status 1): {stderr}"
    )))
}

fn start(unit: UnitState, service: &ServiceName, verb: &str) -> Effect {
    if unit.is_masked() {
        let name = service.unit_name();
        return masked(
            verb,
            service,
            format!("Failed to {verb} {name}: Unit {name} is masked."),
        );
    }
    Effect::Set(UnitState {
        restarting: None,
        ..unit.with_active_word("active")
    })
}

impl Provider for SimulatedSystem {
    fn machine_facts(&self) -> Vec<crate::contract::Fact> {
        self.facts()
    }

    /// Ends the unit's queued job first, if it has one, and says how.
    fn status(&mut self, service: &ServiceName) -> Result<ServiceStatus, ProviderError> {
        let job = self
            .end_queued_job(service)
            .or_else(|| self.settle_failures.remove(service.unit_name().as_ref()));
        self.perform(Operation::Status, service, |_, _| Effect::Keep)?;
        let unit = self.units[service.unit_name().as_ref()];
        Ok(ServiceStatus {
            name: service.to_string(),
            provider: "simulated".to_owned(),
            enabled: unit.enabled,
            running: unit.running,
            active_word: unit.active_word.to_owned(),
            enabled_word: unit.enabled_word.to_owned(),
            job,
            restarting: unit
                .restarting
                .map(|(restarts, last_exit)| crate::provider::Restarting {
                    restarts,
                    last_exit: last_exit.to_owned(),
                }),
        })
    }

    fn start(&mut self, service: &ServiceName) -> Result<Progress, ProviderError> {
        self.job(Operation::Start, service, |u, s| start(u, s, "start"))
    }

    /// A transient unit is gone once stopped.
    fn stop(&mut self, service: &ServiceName) -> Result<Progress, ProviderError> {
        self.job(
            Operation::Stop,
            service,
            |u, _| match UnitFileState::parse(u.enabled_word) {
                Some(UnitFileState::Transient) => Effect::Remove,
                _ => Effect::Set(UnitState {
                    restarting: None,
                    ..u.with_active_word("inactive")
                }),
            },
        )
    }

    fn restart(&mut self, service: &ServiceName) -> Result<Progress, ProviderError> {
        self.job(Operation::Restart, service, |u, s| start(u, s, "restart"))
    }

    /// Only a unit with an `[Install]` section to carry out changes: the words
    /// that already count as enabled stay as they are.
    fn enable(&mut self, service: &ServiceName) -> Result<(), ProviderError> {
        self.perform(Operation::Enable, service, |u, s| {
            if u.is_masked() {
                let stderr = format!(
                    "Failed to enable unit: Unit file /etc/systemd/system/{} is masked.",
                    s.unit_name()
                );
                return masked("enable", s, stderr);
            }
            if u.enabled {
                Effect::Keep
            } else {
                Effect::Set(u.with_enabled_word("enabled"))
            }
        })
    }

    /// The host's complete disable: `enabled` and `enabled-runtime` become
    /// `disabled`; an alias or a linked unit loses its link and is gone;
    /// the other words do not change.
    fn disable(&mut self, service: &ServiceName) -> Result<(), ProviderError> {
        self.perform(
            Operation::Disable,
            service,
            |u, _| match UnitFileState::parse(u.enabled_word) {
                Some(UnitFileState::Enabled | UnitFileState::EnabledRuntime) => {
                    Effect::Set(u.with_enabled_word(UnitFileState::Disabled.as_str()))
                }
                Some(
                    UnitFileState::Alias | UnitFileState::Linked | UnitFileState::LinkedRuntime,
                ) => Effect::Remove,
                _ => Effect::Keep,
            },
        )
    }
}

/// Panics with a line diff unless `actual` equals `expected`.
#[track_caller]
fn assert_lines(what: &str, expected: &[&str], actual: &[String]) {
    if expected
        .iter()
        .copied()
        .eq(actual.iter().map(String::as_str))
    {
        return;
    }
    panic!(
        "{what} differ from the expected ones (- expected, + actual):\n{}actual: {actual:?}",
        line_diff(expected, actual)
    );
}

/// A minimal unified-style diff of two short lists of lines: common lines
/// are indented by two spaces, lines only in `expected` start with `- `,
/// lines only in `actual` with `+ `. Empty lists show as `(none)`.
fn line_diff(expected: &[&str], actual: &[String]) -> String {
    let (n, m) = (expected.len(), actual.len());
    // lcs[i][j]: length of the longest common subsequence of expected[i..] and actual[j..].
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if expected[i] == actual[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut out = String::new();
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && expected[i] == actual[j] {
            out.push_str(&format!("  {}\n", expected[i]));
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            out.push_str(&format!("- {}\n", expected[i]));
            i += 1;
        } else {
            out.push_str(&format!("+ {}\n", actual[j]));
            j += 1;
        }
    }
    if n == 0 {
        out.push_str("  (none expected)\n");
    }
    if m == 0 {
        out.push_str("  (none made)\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(lines: &[&str]) -> Vec<String> {
        lines.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn diff_marks_missing_and_unexpected_lines() {
        let diff = line_diff(
            &["status a", "restart a", "status a"],
            &strings(&["status a", "start a", "status a"]),
        );
        assert_eq!(diff, "  status a\n- restart a\n+ start a\n  status a\n");
    }

    #[test]
    fn diff_of_empty_lists_says_so() {
        assert_eq!(
            line_diff(&[], &strings(&["start a"])),
            "+ start a\n  (none expected)\n"
        );
        assert_eq!(line_diff(&["start a"], &[]), "- start a\n  (none made)\n");
    }

    fn name(text: &str) -> ServiceName {
        ServiceName::parse(text).unwrap()
    }

    #[test]
    fn the_constructors_say_the_words_systemctl_would() {
        let state = UnitState::running().enabled();
        assert_eq!(
            (state.active_word, state.enabled_word),
            ("active", "enabled")
        );
        assert_eq!(UnitState::stopped(), UnitState::default());
        assert_eq!(UnitState::stopped().active_word, "inactive");
        let failed = UnitState::running().with_active_word("failed");
        assert!(!failed.running);
        let alias = UnitState::stopped().with_enabled_word("alias");
        assert!(alias.enabled);
        let linked = UnitState::stopped().with_enabled_word("linked");
        assert!(!linked.enabled);
        let bad = std::panic::catch_unwind(|| UnitState::stopped().with_enabled_word("bogus"));
        assert!(bad.is_err(), "an unknown word is a mistake in the test");
    }

    #[test]
    fn operations_change_units_as_systemd_does() {
        let mut system = SimulatedSystem::new()
            .with_unit("tr", UnitState::running().with_enabled_word("transient"))
            .with_unit("ali", UnitState::running().with_enabled_word("alias"))
            .with_unit("lnk", UnitState::stopped().with_enabled_word("linked"))
            .with_unit("st", UnitState::stopped().with_enabled_word("static"))
            .with_unit(
                "rt",
                UnitState::stopped().with_enabled_word("enabled-runtime"),
            )
            .with_unit("m", UnitState::stopped().with_enabled_word("masked"));
        system.stop(&name("tr")).unwrap();
        assert_eq!(
            system.unit("tr"),
            None,
            "a transient unit is gone once stopped"
        );
        system.disable(&name("ali")).unwrap();
        assert_eq!(system.unit("ali"), None, "disable deletes an alias");
        system.disable(&name("lnk")).unwrap();
        assert_eq!(system.unit("lnk"), None, "disable deletes a link");
        system.disable(&name("st")).unwrap();
        system.enable(&name("st")).unwrap();
        assert_eq!(system.unit("st").unwrap().enabled_word, "static");
        system.disable(&name("rt")).unwrap();
        assert_eq!(system.unit("rt"), Some(UnitState::stopped().disabled()));
        assert!(matches!(
            system.start(&name("m")),
            Err(ProviderError::CommandFailed(m)) if m.ends_with("Unit m.service is masked.")
        ));
        assert!(system.enable(&name("m")).is_err());
        assert_eq!(system.unit("m").unwrap().enabled_word, "masked");
    }

    #[test]
    fn units_are_found_by_unit_name() {
        let mut system = SimulatedSystem::new().with_unit("web", UnitState::stopped());
        system.start(&name("web.service")).unwrap();
        assert_eq!(system.unit("web"), Some(UnitState::running()));
        assert_eq!(system.unit("web.service"), Some(UnitState::running()));
        assert!(system.status(&name("web.socket")).is_err());
        system.assert_calls(&["start web.service", "status web.socket"]);
    }

    #[test]
    fn assert_calls_passes_on_equal_lists() {
        let mut system = SimulatedSystem::new().with_unit("a", UnitState::stopped());
        system.start(&ServiceName::parse("a").unwrap()).unwrap();
        system.assert_calls(&["start a"]);
        system.assert_mutating_calls(&["start a"]);
        system.clear_calls();
        system.assert_calls(&[]);
        system.assert_no_mutating_calls();
    }

    #[test]
    fn assert_mutating_calls_panics_with_the_diff() {
        let mut system = SimulatedSystem::new().with_unit("a", UnitState::running());
        let name = ServiceName::parse("a").unwrap();
        system.status(&name).unwrap();
        system.stop(&name).unwrap();
        let message = std::panic::catch_unwind(|| system.assert_mutating_calls(&["start a"]))
            .expect_err("the assertion must fail");
        let message = message
            .downcast_ref::<String>()
            .expect("a formatted panic message");
        assert_eq!(
            message,
            "mutating calls differ from the expected ones (- expected, + actual):\n\
             - start a\n\
             + stop a\n\
             actual: [\"stop a\"]"
        );
    }
}
