//! The guard's generic layers: each one job, the same for any operation on
//! any backend. The unit-specific ones (the run's reload, jobs, settle
//! windows) are in `reload.rs`, `jobs.rs` and `settle.rs`.

use std::time::{Duration, Instant};

use crate::contract::{Operation, ProviderError};
use crate::left_alone::{Kind, LeftAlone};
use crate::provider::backend::{Backend, Budget};
use crate::provider::{Call, CallRecord, Outcome, UnitAllowlist};
use crate::service_name::{quote, CheckedName};
use crate::text::Untrusted;

/// Steps 1 to 3: the name check (a unit name systemd would take, never an
/// option), the allowlist (`allow_units`), availability.
#[derive(Debug, Clone)]
pub(crate) struct Names {
    allow: Option<UnitAllowlist>,
}

impl Names {
    pub(crate) fn new(allow: Option<UnitAllowlist>) -> Self {
        Self { allow }
    }

    /// The name checked, or why the operation is refused.
    pub(crate) fn admit(
        &self,
        name: &str,
        backend: &impl Backend,
    ) -> Result<CheckedName, ProviderError> {
        let unit = CheckedName::check(name).map_err(ProviderError::InvalidName)?;
        if let Some(allow) = &self.allow {
            if !allow.allows(unit.as_str()) {
                return Err(ProviderError::Denied(format!(
                    "unit {unit} is not allowed on this machine (--allow-unit {})",
                    allow.patterns().join(", ")
                )));
            }
        }
        if let Some(reason) = backend.unavailable_reason() {
            return Err(ProviderError::Unavailable(reason.to_owned()));
        }
        Ok(unit)
    }
}

/// Step 4: a change of a unit the operator paused, or a start of one held
/// back after a crash loop, is refused ([`crate::left_alone`]).
#[derive(Debug, Clone)]
pub(crate) struct LeftAloneUnits {
    units: LeftAlone,
}

impl LeftAloneUnits {
    pub(crate) fn new(units: LeftAlone) -> Self {
        Self { units }
    }

    /// Why `operation` of `unit` is refused for now, if it is, by the name
    /// systemd knows the unit by; the kind goes on the call's record.
    pub(crate) fn refusal(
        &self,
        unit: &CheckedName,
        operation: Operation,
    ) -> Option<(Kind, ProviderError)> {
        let systemd_name = crate::provider::unit_name::mangle(unit.as_str())?;
        let reason = self.units.forbidding(&systemd_name, operation)?;
        let error = ProviderError::Denied(format!("{operation} {unit} refused: {}", reason.why));
        Some((reason.kind, error))
    }
}

/// Step 6: a dry run refuses every change (and makes no daemon-reload).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Noop {
    pub(crate) on: bool,
}

impl Noop {
    /// Why `operation` of `unit` is refused, in a dry run.
    pub(crate) fn refusal(self, operation: Operation, unit: &CheckedName) -> Option<ProviderError> {
        self.on.then(|| {
            ProviderError::Denied(format!("{operation} {unit} refused: this is a noop run"))
        })
    }
}

/// Step 7: the per-command timeout, cut at the run's wall clock.
#[derive(Debug, Clone)]
pub(crate) struct Deadline {
    /// The longest a single exchange with systemd may take, and a job from
    /// its submission to its end.
    pub(crate) timeout: Duration,
    /// No exchange may run past this (the run's wall-clock limit).
    at: Option<Instant>,
}

impl Deadline {
    pub(crate) fn new(timeout: Duration) -> Self {
        Self { timeout, at: None }
    }

    pub(crate) fn set(&mut self, deadline: Instant) {
        self.at = Some(deadline);
    }

    /// The run's wall-clock limit, once set.
    pub(crate) fn at(&self) -> Option<Instant> {
        self.at
    }

    /// What one exchange with systemd may take.
    pub(crate) fn budget(&self) -> Budget {
        Budget {
            timeout: self.timeout,
            deadline: self.at,
        }
    }
}

/// Step 9: one [`CallRecord`] per operation, whatever happened, and one per
/// daemon-reload; later layers complete a record by its index.
#[derive(Debug, Clone, Default)]
pub(crate) struct Record {
    calls: Vec<CallRecord>,
}

impl Record {
    /// Records one call; returns the record, for a status to add what it found.
    pub(crate) fn add(
        &mut self,
        operation: Call,
        service: Option<&str>,
        started: Instant,
        error: Option<&ProviderError>,
    ) -> &mut CallRecord {
        tracing::debug!(
            operation = operation.verb(),
            service = service.unwrap_or(""),
            ms = crate::text::millis(started.elapsed()),
            error = error.map(ProviderError::message),
            "provider call"
        );
        self.calls.push(CallRecord {
            operation,
            service: service.map(|s| {
                Untrusted::new(if CheckedName::check(s).is_ok() {
                    s.to_owned()
                } else {
                    quote(s)
                })
            }),
            outcome: error.map_or(Outcome::Ok, Outcome::of),
            error: error.map(|e| Untrusted::new(e.message())),
            state: None,
            journal: Vec::new(),
            left_alone: None,
            duration: started.elapsed(),
        });
        self.calls.last_mut().expect("just recorded")
    }

    /// The index of the last record made.
    pub(crate) fn last(&self) -> usize {
        self.calls.len() - 1
    }

    pub(crate) fn get_mut(&mut self, index: usize) -> Option<&mut CallRecord> {
        self.calls.get_mut(index)
    }

    pub(crate) fn all(&self) -> &[CallRecord] {
        &self.calls
    }

    /// Every record, leaving none.
    pub(crate) fn take(&mut self) -> Vec<CallRecord> {
        std::mem::take(&mut self.calls)
    }
}
