//! What a run reports: one event per resource.

use serde::Serialize;

use crate::provider::Operation;
use crate::service::Ensure;

/// A change made to a service, or that would have been made in noop mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Started,
    Stopped,
    Restarted,
    Enabled,
    Disabled,
}

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

    /// The seed design's noop phrase, lower-case after the first.
    fn noop_phrase(self) -> &'static str {
        match self {
            Action::Started => "started",
            Action::Stopped => "stopped",
            Action::Restarted => "restarted via subscribe",
            Action::Enabled => "enabled",
            Action::Disabled => "disabled",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Action::Started => "started",
            Action::Stopped => "stopped",
            Action::Restarted => "restarted",
            Action::Enabled => "enabled",
            Action::Disabled => "disabled",
        }
    }
}

/// "Would have started, would have enabled": the seed's phrases joined in order.
pub fn noop_message(actions: &[Action]) -> Option<String> {
    let (first, rest) = actions.split_first()?;
    let mut message = format!("Would have {}", first.noop_phrase());
    for action in rest {
        message.push_str(", would have ");
        message.push_str(action.noop_phrase());
    }
    Some(message)
}

/// The desired state as the policy declared it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RequestedState {
    pub ensure: Ensure,
    pub enable: Option<bool>,
}

/// The state found when the resource was done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FinalState {
    pub ensure: Ensure,
    pub enabled: bool,
}

/// One resource's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Event {
    /// `service#NAME`.
    pub resource: String,
    pub changed: bool,
    pub refreshed: bool,
    pub noop: bool,
    pub noop_message: Option<String>,
    pub actions: Vec<Action>,
    pub failed: bool,
    pub errors: Vec<String>,
    pub requested: RequestedState,
    #[serde(rename = "final")]
    pub final_state: Option<FinalState>,
}

/// The outcome of one run of a policy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    pub events: Vec<Event>,
    /// Problems with the policy as a whole; when any is present nothing was applied.
    pub errors: Vec<String>,
}

impl Report {
    /// A report for a policy that was refused before anything was applied.
    pub fn rejected(errors: Vec<String>) -> Self {
        Self {
            events: Vec::new(),
            errors,
        }
    }

    /// The event of `resource` (`service#NAME`), if the run reached it.
    pub fn event(&self, resource: &str) -> Option<&Event> {
        self.events.iter().find(|e| e.resource == resource)
    }

    /// True when the policy was accepted and no resource failed.
    pub fn succeeded(&self) -> bool {
        self.errors.is_empty() && self.events.iter().all(|e| !e.failed)
    }

    pub fn changed_count(&self) -> usize {
        self.events.iter().filter(|e| e.changed).count()
    }

    pub fn failed_count(&self) -> usize {
        self.events.iter().filter(|e| e.failed).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noop_message_joins_the_seed_phrases() {
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
