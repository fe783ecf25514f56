//! The service provider: the six operations a guest may ask for, carried out
//! with `systemctl`. This is the trusted side: it re-checks every name, and it
//! holds no desired-state logic (that is the guest's).

pub mod allow;
pub mod parse;
pub mod runner;
pub mod systemd;

use std::fmt;
use std::time::Duration;

use serde::Serialize;
use thiserror::Error;

pub use allow::UnitAllowlist;
pub use systemd::{SystemdConfig, SystemdProvider};

/// Why an operation failed; mirrors the WIT `provider-error` variant.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ProviderError {
    #[error("{0}")]
    InvalidName(String),
    #[error("service not found: {0}")]
    NotFound(String),
    #[error("{0}")]
    CommandFailed(String),
    #[error("{0}")]
    TimedOut(String),
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    Denied(String),
    #[error("{0}")]
    LimitExceeded(String),
}

impl ProviderError {
    /// The outcome name used in reports.
    pub fn kind(&self) -> &'static str {
        match self {
            ProviderError::InvalidName(_) => "invalid-name",
            ProviderError::NotFound(_) => "not-found",
            ProviderError::CommandFailed(_) => "command-failed",
            ProviderError::TimedOut(_) => "timed-out",
            ProviderError::Unavailable(_) => "unavailable",
            ProviderError::Denied(_) => "denied",
            ProviderError::LimitExceeded(_) => "limit-exceeded",
        }
    }
}

/// What `status` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub name: String,
    pub enabled: bool,
    pub running: bool,
}

/// The operations of a run, as recorded in the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Operation {
    DaemonReload,
    Status,
    Start,
    Stop,
    Restart,
    Enable,
    Disable,
}

impl Operation {
    /// The systemctl verb of a mutating operation.
    pub fn verb(self) -> &'static str {
        match self {
            Operation::DaemonReload => "daemon-reload",
            Operation::Status => "status",
            Operation::Start => "start",
            Operation::Stop => "stop",
            Operation::Restart => "restart",
            Operation::Enable => "enable",
            Operation::Disable => "disable",
        }
    }

    pub fn is_mutating(self) -> bool {
        !matches!(self, Operation::Status | Operation::DaemonReload)
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.verb())
    }
}

/// One operation the host carried out (or refused) during a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallRecord {
    pub operation: Operation,
    /// The name as the guest sent it (checked or not); `None` for daemon-reload.
    pub service: Option<String>,
    /// `ok` or the error kind (`invalid-name`, `command-failed`, ...).
    pub outcome: &'static str,
    pub error: Option<String>,
    #[serde(rename = "duration_ms", serialize_with = "as_millis")]
    pub duration: Duration,
}

fn as_millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(crate::report::millis(*d))
}
