//! What a run reports: one event per resource.
//!
//! The types are the contract's ([`crate::contract`]); this module adds the
//! phrases and the queries a policy's tests use.

pub use crate::contract::{Action, Event, FinalState, Report, RequestedState};
use crate::provider::Operation;

impl Action {
    /// The provider operation that performs this action.
    pub fn operation(self) -> Operation {
        match self {
            Action::Started => Operation::Start,
            Action::Stopped => Operation::Stop,
            Action::Restarted => Operation::Restart,
            Action::Enabled => Operation::Enable,
            Action::Disabled => Operation::Disable,
        }
    }

    /// A start or restart counts only once the unit stayed up: the host
    /// judges it at the unit's next `status` (its settle window), so the
    /// SDK finishes such a resource after the others were begun.
    pub fn must_stay_up(self) -> bool {
        matches!(self, Action::Started | Action::Restarted)
    }

    /// The noop phrase (docs/service-type.md, "Noop mode and its messages"), lower-case after the first.
    fn noop_phrase(self) -> &'static str {
        match self {
            Action::Started => "started",
            Action::Stopped => "stopped",
            Action::Restarted => "restarted via subscribe",
            Action::Enabled => "enabled",
            Action::Disabled => "disabled",
        }
    }

    /// The word a report uses for it (`started`).
    pub fn as_str(self) -> &'static str {
        self.word().as_str()
    }
}

/// "Would have started, would have enabled": the phrases joined in order.
pub fn noop_message(actions: &[Action]) -> Option<String> {
    let (first, rest) = actions.split_first()?;
    let mut message = format!("Would have {}", first.noop_phrase());
    for action in rest {
        message.push_str(", would have ");
        message.push_str(action.noop_phrase());
    }
    Some(message)
}

impl Report {
    /// A report for a policy that was refused before anything was applied.
    pub fn rejected(errors: Vec<String>) -> Self {
        Self {
            events: Vec::new(),
            errors,
            left_out: Vec::new(),
        }
    }

    /// Why `resource` (`service#NAME`) was left out on this machine (its
    /// `when` did not match), if it was.
    pub fn why_left_out(&self, resource: &str) -> Option<&str> {
        self.left_out
            .iter()
            .find(|l| l.resource == resource)
            .map(|l| l.why.as_str())
    }

    /// The event of `resource` (`service#NAME`), if the run reached it.
    pub fn event(&self, resource: &str) -> Option<&Event> {
        self.events.iter().find(|e| e.resource == resource)
    }

    /// True when the policy was accepted and no resource failed.
    pub fn succeeded(&self) -> bool {
        self.errors.is_empty() && self.events.iter().all(|e| !e.failed)
    }

    /// How many resources changed.
    pub fn changed_count(&self) -> usize {
        self.events.iter().filter(|e| e.changed).count()
    }

    /// How many resources failed.
    pub fn failed_count(&self) -> usize {
        self.events.iter().filter(|e| e.failed).count()
    }

    /// The noop messages of a noop run, as `(resource, message)` pairs in
    /// application order; resources with nothing to do have none.
    ///
    /// ```
    /// use guest_sdk::prelude::*;
    ///
    /// let policy = |_: &Context| {
    ///     Ok::<_, PolicyError>(
    ///         Policy::new()
    ///             .service(Service::new("httpd").running().enable(true))
    ///             .service(Service::new("sshd").running()),
    ///     )
    /// };
    /// let mut system = SimulatedSystem::new()
    ///     .with_unit("httpd", UnitState::stopped())
    ///     .with_unit("sshd", UnitState::running());
    /// let report = guest_sdk::run(policy, &mut system, &RunOptions::noop());
    /// assert_eq!(
    ///     report.noop_messages(),
    ///     [("service#httpd".to_string(), "Would have started, would have enabled".to_string())]
    /// );
    /// ```
    pub fn noop_messages(&self) -> Vec<(String, String)> {
        self.events
            .iter()
            .filter_map(|e| Some((e.resource.clone(), e.noop_message.clone()?)))
            .collect()
    }

    /// Asserts that the policy was accepted and every resource reached its
    /// desired state (changes are allowed); panics listing the policy's
    /// errors and every failed resource with its errors.
    ///
    /// ```
    /// use guest_sdk::prelude::*;
    ///
    /// let policy = |_: &Context| Ok::<_, PolicyError>(Policy::new().service(Service::new("httpd")));
    /// let mut system = SimulatedSystem::new().with_unit("httpd", UnitState::stopped());
    /// guest_sdk::run(policy, &mut system, &RunOptions::default()).assert_converged();
    ///
    /// // A start that "succeeds" but leaves the unit stopped fails the check.
    /// let mut system = SimulatedSystem::new()
    ///     .with_unit("httpd", UnitState::stopped())
    ///     .with_no_effect(Operation::Start, "httpd");
    /// let report = guest_sdk::run(policy, &mut system, &RunOptions::default());
    /// assert!(std::panic::catch_unwind(|| report.assert_converged()).is_err());
    /// ```
    #[track_caller]
    pub fn assert_converged(&self) {
        if !self.succeeded() {
            panic!("the run did not converge:\n{}", self.describe());
        }
    }

    /// Asserts that the run [converged](Self::assert_converged) and changed
    /// nothing (in a noop run: would have changed nothing): what a second
    /// run over a converged system must report. Panics listing every
    /// changed resource and its actions.
    ///
    /// ```
    /// use guest_sdk::prelude::*;
    ///
    /// let policy = |_: &Context| Ok::<_, PolicyError>(Policy::new().service(Service::new("httpd")));
    /// let mut system = SimulatedSystem::new().with_unit("httpd", UnitState::stopped());
    /// guest_sdk::run(policy, &mut system, &RunOptions::default()).assert_converged();
    /// guest_sdk::run(policy, &mut system, &RunOptions::default()).assert_no_changes();
    /// ```
    #[track_caller]
    pub fn assert_no_changes(&self) {
        if !self.succeeded() || self.changed_count() > 0 {
            panic!("expected a run without changes:\n{}", self.describe());
        }
    }

    /// One line per policy error and per changed or failed resource, for
    /// the assertion messages.
    fn describe(&self) -> String {
        let mut out = String::new();
        for error in &self.errors {
            out.push_str(&format!("  policy error: {error}\n"));
        }
        for event in &self.events {
            if !event.changed && !event.failed {
                continue;
            }
            let actions: Vec<&str> = event.actions.iter().map(|a| a.as_str()).collect();
            let actions = if actions.is_empty() {
                "no action".to_string()
            } else {
                actions.join(", ")
            };
            let noop = if event.noop { " (noop)" } else { "" };
            out.push_str(&format!("  {}: {actions}{noop}", event.resource));
            if event.failed {
                out.push_str(&format!("; failed: {}", event.errors.join("; ")));
            }
            out.push('\n');
        }
        if out.is_empty() {
            out.push_str("  (no resource changed or failed)\n");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::Ensure;

    fn event(resource: &str, actions: &[Action], failed: bool) -> Event {
        Event {
            resource: resource.to_string(),
            changed: !actions.is_empty(),
            refreshed: false,
            noop: false,
            noop_message: None,
            actions: actions.to_vec(),
            failed,
            errors: if failed {
                vec!["start web: boom".to_string()]
            } else {
                Vec::new()
            },
            requested: RequestedState {
                ensure: Ensure::Running,
                enable: None,
            },
            final_state: None,
        }
    }

    fn panic_message(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
        let payload = std::panic::catch_unwind(f).expect_err("the assertion must fail");
        payload
            .downcast_ref::<String>()
            .cloned()
            .expect("a formatted panic message")
    }

    #[test]
    fn assert_converged_lists_policy_errors_and_failures() {
        let report = Report {
            events: vec![
                event("service#db", &[Action::Started], false),
                event("service#web", &[], true),
            ],
            errors: Vec::new(),
            left_out: Vec::new(),
        };
        assert_eq!(
            panic_message(|| report.assert_converged()),
            "the run did not converge:\n  service#db: started\n  service#web: no action; failed: start web: boom\n"
        );
        let rejected = Report::rejected(vec!["policy: no settings".to_string()]);
        assert_eq!(
            panic_message(|| rejected.assert_converged()),
            "the run did not converge:\n  policy error: policy: no settings\n"
        );
    }

    #[test]
    fn assert_no_changes_names_the_changed_resources() {
        let report = Report {
            events: vec![
                event("service#db", &[], false),
                event("service#web", &[Action::Restarted], false),
            ],
            errors: Vec::new(),
            left_out: Vec::new(),
        };
        report.assert_converged();
        assert_eq!(
            panic_message(|| report.assert_no_changes()),
            "expected a run without changes:\n  service#web: restarted\n"
        );
        Report {
            events: vec![event("service#db", &[], false)],
            errors: Vec::new(),
            left_out: Vec::new(),
        }
        .assert_no_changes();
    }

    #[test]
    fn noop_message_joins_the_phrases() {
        assert_eq!(noop_message(&[]), None);
        assert_eq!(
            noop_message(&[Action::Started]).as_deref(),
            Some("Would have started")
        );
        assert_eq!(
            noop_message(&[Action::Started, Action::Enabled]).as_deref(),
            Some("Would have started, would have enabled")
        );
        assert_eq!(
            noop_message(&[Action::Restarted, Action::Disabled]).as_deref(),
            Some("Would have restarted via subscribe, would have disabled")
        );
        assert_eq!(
            noop_message(&[Action::Stopped]).as_deref(),
            Some("Would have stopped")
        );
    }
}
