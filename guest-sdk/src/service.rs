//! The service resource: what a policy author declares.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub use crate::contract::Ensure;

/// Desired (or found) running state; `running` unless a policy says otherwise
/// (docs/service-type.md, "Ensure").
impl Default for Ensure {
    fn default() -> Self {
        Ensure::Running
    }
}

impl Ensure {
    /// Reads `running` or `stopped`, as settings and manifests spell them.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "running" => Some(Ensure::Running),
            "stopped" => Some(Ensure::Stopped),
            _ => None,
        }
    }

    /// The state a service is in when `running` says whether it runs.
    pub fn from_running(running: bool) -> Self {
        if running {
            Ensure::Running
        } else {
            Ensure::Stopped
        }
    }

    /// The word a manifest and a report use: `running` or `stopped`.
    pub fn as_str(self) -> &'static str {
        self.word().as_str()
    }
}

impl fmt::Display for Ensure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Ensure {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Ensure {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Ensure::parse(&text)
            .ok_or_else(|| serde::de::Error::unknown_variant(&text, &["running", "stopped"]))
    }
}

/// A desired-state declaration for one systemd service.
///
/// Nothing is checked when it is built; [`crate::Policy`] validates every
/// service (name, subscriptions) before anything is applied, so one bad
/// declaration cannot leave the machine half-changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Service {
    pub(crate) name: String,
    pub(crate) ensure: Ensure,
    pub(crate) enable: Option<bool>,
    pub(crate) subscribe: Vec<String>,
}

impl Service {
    /// A service that must be running, with its boot configuration left alone.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ensure: Ensure::Running,
            enable: None,
            subscribe: Vec::new(),
        }
    }

    /// Sets the desired running state.
    pub fn ensure(mut self, ensure: Ensure) -> Self {
        self.ensure = ensure;
        self
    }

    /// Shorthand for `.ensure(Ensure::Running)`.
    pub fn running(self) -> Self {
        self.ensure(Ensure::Running)
    }

    /// Shorthand for `.ensure(Ensure::Stopped)`.
    pub fn stopped(self) -> Self {
        self.ensure(Ensure::Stopped)
    }

    /// `true`: start at boot; `false`: do not. Not calling it leaves the boot configuration alone.
    pub fn enable(mut self, enable: bool) -> Self {
        self.enable = Some(enable);
        self
    }

    /// Sets the enable property from an optional value (`None` = leave alone).
    pub fn enable_option(mut self, enable: Option<bool>) -> Self {
        self.enable = enable;
        self
    }

    /// Restart the service (when it should run and runs) after `reference`
    /// (`type#name`) changed.
    pub fn subscribe(mut self, reference: impl Into<String>) -> Self {
        self.subscribe.push(reference.into());
        self
    }

    /// The service's name, as declared.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether it should run: [`Ensure::Running`] unless declared otherwise.
    pub fn desired_ensure(&self) -> Ensure {
        self.ensure
    }

    /// Whether it should start at boot; `None` leaves that as it is.
    pub fn desired_enable(&self) -> Option<bool> {
        self.enable
    }

    /// The `type#name` references it subscribes to, as declared.
    pub fn subscriptions(&self) -> &[String] {
        &self.subscribe
    }
}
