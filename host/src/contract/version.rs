//! Which versions of the contract this host runs policies of.
//!
//! A fleet upgrades its hosts machine by machine over days, while the
//! policies in its registry stay as they were built: a host runs a policy
//! built against its own contract and against every earlier one back to
//! [`ContractVersion::OLDEST`] (the window, as Kubernetes keeps a skew window
//! between its parts). What an earlier policy cannot be told (facts, a
//! restart systemd is making) it is not told; what it cannot say (units left
//! out) is empty. Each earlier version keeps its WIT in `wit/released/` and
//! its generated bindings in [`super::earlier`].

use std::fmt;

/// A contract version this host runs policies of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ContractVersion {
    /// Start, stop and restart say whether their job is queued or finished.
    V0_4,
    /// A status says when systemd restarts a unit itself.
    V0_5,
    /// Facts; units left out.
    V0_6,
}

impl ContractVersion {
    /// The version of `wit/policy.wit`: what `host new-policy` builds against.
    pub const CURRENT: Self = Self::V0_6;
    /// The oldest version this host still runs.
    pub const OLDEST: Self = Self::V0_4;
    /// Every version this host runs, newest first: the order in which a
    /// component that names none is tried.
    pub const ALL: [Self; 3] = [Self::V0_6, Self::V0_5, Self::V0_4];

    /// `0.6.0`, as the package names it (`policy-host:policy@0.6.0`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::V0_4 => "0.4.0",
            Self::V0_5 => "0.5.0",
            Self::V0_6 => "0.6.0",
        }
    }

    /// The version a component's import names, or why this host cannot run
    /// a policy built against it.
    pub fn parse(version: &str) -> Result<Self, Unsupported> {
        if let Some(known) = Self::ALL.into_iter().find(|v| v.as_str() == version) {
            return Ok(known);
        }
        let relation = match semver(version) {
            Some(found) if found > semver(Self::CURRENT.as_str()).expect("ours parse") => {
                Relation::Newer
            }
            Some(found) if found < semver(Self::OLDEST.as_str()).expect("ours parse") => {
                Relation::Older
            }
            // Between two versions this host runs, or not a version at all.
            _ => Relation::Unknown,
        };
        Err(Unsupported {
            found: version.to_owned(),
            relation,
        })
    }

    /// `@0.4.0 to @0.6.0`: the window, as messages and docs say it.
    pub fn window() -> String {
        format!("@{} to @{}", Self::OLDEST, Self::CURRENT)
    }
}

impl fmt::Display for ContractVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A contract version outside this host's window. `found` is what the
/// component wrote: shown escaped by whoever shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported {
    pub found: String,
    pub relation: Relation,
}

/// Where an unsupported version lies, which says what to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relation {
    /// Newer than this host: upgrade the host.
    Newer,
    /// Older than the window: rebuild the policy.
    Older,
    /// Not a version this host ever spoke (or not a version).
    Unknown,
}

/// `major.minor.patch` as numbers; a pre-release or build suffix is not a
/// released contract, and compares as not parsed.
fn semver(version: &str) -> Option<(u64, u64, u64)> {
    let mut parts = version.split('.').map(|p| p.parse::<u64>().ok());
    let parsed = (parts.next()??, parts.next()??, parts.next()??);
    parts.next().is_none().then_some(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_version_in_the_window_parses_and_only_those() {
        for version in ContractVersion::ALL {
            assert_eq!(ContractVersion::parse(version.as_str()), Ok(version));
        }
        assert_eq!(ContractVersion::ALL[0], ContractVersion::CURRENT);
        assert_eq!(
            *ContractVersion::ALL.last().unwrap(),
            ContractVersion::OLDEST
        );
        assert!(ContractVersion::ALL.windows(2).all(|w| w[0] > w[1]));
        let relation = |v: &str| ContractVersion::parse(v).unwrap_err().relation;
        assert_eq!(relation("0.7.0"), Relation::Newer);
        assert_eq!(relation("1.0.0"), Relation::Newer);
        assert_eq!(relation("0.3.0"), Relation::Older);
        assert_eq!(relation("0.1.0"), Relation::Older);
        assert_eq!(relation("0.5.1"), Relation::Unknown);
        assert_eq!(relation("0.6.0-rc1"), Relation::Unknown);
        assert_eq!(relation("x"), Relation::Unknown);
    }

    #[test]
    fn the_current_version_is_the_wits_and_is_kept_in_released() {
        let wit = include_str!("../../../wit/policy.wit");
        assert!(
            wit.contains(&format!(
                "package policy-host:policy@{};",
                ContractVersion::CURRENT
            )),
            "wit/policy.wit and ContractVersion::CURRENT disagree"
        );
    }
}
