//! A simulated system to unit-test policies natively, without WebAssembly or systemd.
//!
//! It holds unit states, records every provider call in order, and lets a
//! test inject failures: an operation that returns an error, or one that
//! "succeeds" without taking effect (like a `Type=simple` unit whose program
//! exits at once), to exercise the desired-state check.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use crate::name::ServiceName;
use crate::provider::{Operation, Provider, ProviderError, ServiceStatus};

/// The state of one simulated unit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UnitState {
    pub running: bool,
    pub enabled: bool,
}

impl UnitState {
    pub fn running() -> Self {
        Self {
            running: true,
            enabled: false,
        }
    }

    pub fn stopped() -> Self {
        Self::default()
    }

    pub fn enabled(mut self) -> Self {
        self.enabled = true;
        self
    }

    pub fn disabled(mut self) -> Self {
        self.enabled = false;
        self
    }
}

/// One recorded provider call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub operation: Operation,
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
}

/// A system of simulated units that implements [`Provider`].
#[derive(Debug, Clone, Default)]
pub struct SimulatedSystem {
    units: BTreeMap<String, UnitState>,
    faults: HashMap<(Operation, String), Fault>,
    calls: Vec<Call>,
}

impl SimulatedSystem {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a unit in the given state.
    pub fn with_unit(mut self, name: &str, state: UnitState) -> Self {
        self.units.insert(name.to_owned(), state);
        self
    }

    /// Makes `operation` on `service` fail with `error` (the unit is left as it was).
    pub fn with_failure(
        mut self,
        operation: Operation,
        service: &str,
        error: ProviderError,
    ) -> Self {
        self.faults
            .insert((operation, service.to_owned()), Fault::Fail(error));
        self
    }

    /// Makes `operation` on `service` report success without changing the unit.
    pub fn with_no_effect(mut self, operation: Operation, service: &str) -> Self {
        self.faults
            .insert((operation, service.to_owned()), Fault::NoEffect);
        self
    }

    /// The current state of a unit, if it exists.
    pub fn unit(&self, name: &str) -> Option<UnitState> {
        self.units.get(name).copied()
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
    /// system.assert_mutating_calls(&["start httpd", "enable httpd", "stop legacy-ftpd"]);
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

    fn perform(
        &mut self,
        operation: Operation,
        service: &ServiceName,
        effect: impl FnOnce(&mut UnitState),
    ) -> Result<(), ProviderError> {
        self.calls.push(Call {
            operation,
            service: service.to_string(),
        });
        let fault = self.faults.get(&(operation, service.to_string())).cloned();
        let unit = self
            .units
            .get_mut(service.as_str())
            .ok_or_else(|| ProviderError::not_found(service.as_str()))?;
        match fault {
            Some(Fault::Fail(error)) => Err(error),
            Some(Fault::NoEffect) => Ok(()),
            None => {
                effect(unit);
                Ok(())
            }
        }
    }
}

impl Provider for SimulatedSystem {
    fn status(&mut self, service: &ServiceName) -> Result<ServiceStatus, ProviderError> {
        self.perform(Operation::Status, service, |_| {})?;
        let unit = self.units[service.as_str()];
        Ok(ServiceStatus {
            name: service.to_string(),
            provider: "simulated".to_owned(),
            enabled: unit.enabled,
            running: unit.running,
        })
    }

    fn start(&mut self, service: &ServiceName) -> Result<(), ProviderError> {
        self.perform(Operation::Start, service, |u| u.running = true)
    }

    fn stop(&mut self, service: &ServiceName) -> Result<(), ProviderError> {
        self.perform(Operation::Stop, service, |u| u.running = false)
    }

    fn restart(&mut self, service: &ServiceName) -> Result<(), ProviderError> {
        self.perform(Operation::Restart, service, |u| u.running = true)
    }

    fn enable(&mut self, service: &ServiceName) -> Result<(), ProviderError> {
        self.perform(Operation::Enable, service, |u| u.enabled = true)
    }

    fn disable(&mut self, service: &ServiceName) -> Result<(), ProviderError> {
        self.perform(Operation::Disable, service, |u| u.enabled = false)
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
