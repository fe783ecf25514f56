//! Units the host leaves alone for a while, whatever the policies want:
//! those an operator paused (`host pause`, kept in the state directory,
//! [`pause`]) and those a watch held back because it had to start them
//! again and again ([`backoff`]: a crash loop). The guard refuses the
//! changes such a unit would get; the report says `paused` or `held`, with
//! what the policy would have done, instead of a failure.

pub mod backoff;
pub mod pause;

use std::collections::BTreeMap;
use std::fmt;
use std::time::SystemTime;

use serde::Serialize;

use crate::contract::Operation;

/// Why a unit is left alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// An operator said so (`host pause`): no change at all.
    Paused,
    /// A watch held it back after it had to start it 3 times within a
    /// minute: no start or restart until the hold ends.
    Held,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Paused => "paused",
            Kind::Held => "held",
        }
    }

    /// Whether a unit left alone this way may not get `operation`.
    pub fn forbids(self, operation: Operation) -> bool {
        match self {
            Kind::Paused => operation.is_mutating(),
            Kind::Held => matches!(operation, Operation::Start | Operation::Restart),
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One unit left alone (or all of them): how, until when, and the host's
/// sentence for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reason {
    pub kind: Kind,
    /// `None`: until `host resume`.
    pub until: Option<SystemTime>,
    /// `paused by the operator (host pause) until 2026-12-05T17:30:00Z`.
    pub why: String,
}

/// The units a run leaves alone, by the name systemd knows them by
/// (`web.service`), and possibly every unit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeftAlone {
    all: Option<Reason>,
    units: BTreeMap<String, Reason>,
}

impl LeftAlone {
    /// Every unit is left alone for `reason`.
    pub fn set_all(&mut self, reason: Reason) {
        self.all = Some(reason);
    }

    /// `unit` (as systemd names it) is left alone for `reason`; a pause
    /// outranks a hold, which forbids less.
    pub fn insert(&mut self, unit: String, reason: Reason) {
        match self.units.get(&unit) {
            Some(have) if have.kind == Kind::Paused && reason.kind == Kind::Held => {}
            _ => {
                self.units.insert(unit, reason);
            }
        }
    }

    /// Why `unit` (as systemd names it) is left alone, if it is.
    pub fn reason(&self, unit: &str) -> Option<&Reason> {
        match (self.all.as_ref(), self.units.get(unit)) {
            (Some(all), _) => Some(all),
            (None, one) => one,
        }
    }

    /// Why `operation` of `unit` (as systemd names it) is refused, if it is.
    pub fn forbidding(&self, unit: &str, operation: Operation) -> Option<&Reason> {
        let all = self.all.as_ref().filter(|r| r.kind.forbids(operation));
        all.or_else(|| self.units.get(unit).filter(|r| r.kind.forbids(operation)))
    }

    /// Every entry: the one for every unit (`None`) first, then each
    /// unit's.
    pub fn entries(&self) -> impl Iterator<Item = (Option<&str>, &Reason)> + '_ {
        let all = self.all.iter().map(|r| (None, r));
        all.chain(self.units.iter().map(|(u, r)| (Some(u.as_str()), r)))
    }

    pub fn is_empty(&self) -> bool {
        self.all.is_none() && self.units.is_empty()
    }

    /// Adds `other`'s units (a pause outranks a hold); its "every unit"
    /// when this has none.
    pub fn extend(&mut self, other: LeftAlone) {
        if self.all.is_none() {
            self.all = other.all;
        }
        for (unit, reason) in other.units {
            self.insert(unit, reason);
        }
    }
}

/// What a report says of a resource whose unit was left alone: how, why,
/// and the changes the policy asked for that were refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeftAloneEvent {
    pub kind: Kind,
    pub why: String,
    /// The refused operations (`start`, ...); empty when the unit needed
    /// none of what was refused.
    #[serde(serialize_with = "operation_words")]
    pub would: Vec<Operation>,
}

fn operation_words<S: serde::Serializer>(ops: &[Operation], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(ops.iter().map(|op| op.verb()))
}

/// `until 2026-12-05T17:30:00Z`, or "until `host resume`" (in the name
/// the binary was called by).
pub fn until_words(until: Option<SystemTime>) -> String {
    match until {
        Some(at) => format!("until {}", humantime::format_rfc3339_seconds(at)),
        None => format!("until {}", crate::program::command("resume")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(kind: Kind) -> Reason {
        Reason {
            kind,
            until: None,
            why: kind.as_str().to_owned(),
        }
    }

    #[test]
    fn a_pause_forbids_every_change_and_a_hold_only_starts() {
        let mut set = LeftAlone::default();
        set.insert("web.service".into(), reason(Kind::Held));
        assert!(set.forbidding("web.service", Operation::Start).is_some());
        assert!(set.forbidding("web.service", Operation::Restart).is_some());
        assert!(set.forbidding("web.service", Operation::Stop).is_none());
        assert!(set.forbidding("web.service", Operation::Enable).is_none());
        assert!(set.forbidding("db.service", Operation::Start).is_none());
        set.insert("web.service".into(), reason(Kind::Paused));
        set.insert("web.service".into(), reason(Kind::Held));
        assert_eq!(set.reason("web.service").unwrap().kind, Kind::Paused);
        assert!(set.forbidding("web.service", Operation::Disable).is_some());
        assert!(set.forbidding("web.service", Operation::Status).is_none());
        set.set_all(reason(Kind::Paused));
        assert!(set.forbidding("db.service", Operation::Stop).is_some());
    }
}
