//! The operator's pauses (`host pause [--for D] [UNIT...]`, `host resume`):
//! kept in `paused.json` in the root-only state directory, so that timer
//! runs, watch runs and `host status` all read the same pauses, and written
//! atomically without the run lock (a pause is taken while a run runs; the
//! next run reads it).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::{until_words, Kind, LeftAlone, Reason};
use crate::state_file::{self, Versioned};

pub const FILE_NAME: &str = "paused.json";
/// Far more than any list of pauses an operator types.
const MAX_BYTES: u64 = 1 << 20;

/// The pauses in force and past, as `paused.json` holds them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pauses {
    format: u32,
    /// Every unit, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    all: Option<Pause>,
    /// By the name systemd knows the unit by.
    #[serde(default)]
    units: BTreeMap<String, Pause>,
}

/// One pause: since when, and until when (`None`: until `host resume`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pause {
    /// Seconds since the Unix epoch.
    pub since: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<u64>,
}

impl Versioned for Pauses {
    const FORMAT: u32 = 1;
    fn format(&self) -> u32 {
        self.format
    }
    fn empty() -> Self {
        Self {
            format: Self::FORMAT,
            ..Self::default()
        }
    }
}

fn secs(at: SystemTime) -> u64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn time(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
}

impl Pause {
    fn in_force(&self, now: SystemTime) -> bool {
        self.until.is_none_or(|until| time(until) > now)
    }

    pub fn until(&self) -> Option<SystemTime> {
        self.until.map(time)
    }

    fn reason(&self) -> Reason {
        Reason {
            kind: Kind::Paused,
            until: self.until(),
            why: format!(
                "paused by the operator ({} pause) {}",
                crate::program::name(),
                until_words(self.until())
            ),
        }
    }
}

impl Pauses {
    /// `paused.json` in `state_dir`: no pauses when it does not exist; an
    /// error when it is damaged (a run that forgot a pause would undo an
    /// operator's maintenance).
    pub fn open(state_dir: &Path) -> anyhow::Result<(PathBuf, Self)> {
        state_file::open::<Self>(
            state_dir,
            FILE_NAME,
            MAX_BYTES,
            "a pause record",
            &format!(
                "fix it, or remove it and pause again with {}",
                crate::program::command("pause")
            ),
        )
    }

    /// The units left alone at `now`.
    pub fn in_force(&self, now: SystemTime) -> LeftAlone {
        let mut set = LeftAlone::default();
        if let Some(all) = self.all.filter(|p| p.in_force(now)) {
            set.set_all(all.reason());
        }
        for (unit, pause) in self.units.iter().filter(|(_, p)| p.in_force(now)) {
            set.insert(unit.clone(), pause.reason());
        }
        set
    }

    /// The pauses in force at `now`: every unit's first (`None`), then by unit.
    pub fn listed(&self, now: SystemTime) -> Vec<(Option<&str>, Pause)> {
        let all = self.all.filter(|p| p.in_force(now)).map(|p| (None, p));
        all.into_iter()
            .chain(
                self.units
                    .iter()
                    .filter(|(_, p)| p.in_force(now))
                    .map(|(u, p)| (Some(u.as_str()), *p)),
            )
            .collect()
    }

    /// Pauses `units` (every unit when empty) from `now`, for `length` or
    /// until resumed; ended pauses are dropped.
    pub fn pause(&mut self, units: &[String], length: Option<Duration>, now: SystemTime) {
        self.drop_ended(now);
        let pause = Pause {
            since: secs(now),
            until: length.map(|l| secs(now + l).max(secs(now) + 1)),
        };
        if units.is_empty() {
            self.all = Some(pause);
        }
        for unit in units {
            self.units.insert(unit.clone(), pause);
        }
    }

    /// Ends the pauses of `units` (every pause when empty); returns whether
    /// any pause in force ended. Resuming a unit while every unit is paused
    /// is refused: the unit would stay paused.
    pub fn resume(&mut self, units: &[String], now: SystemTime) -> anyhow::Result<bool> {
        self.drop_ended(now);
        if units.is_empty() {
            let any = self.all.is_some() || !self.units.is_empty();
            self.all = None;
            self.units.clear();
            return Ok(any);
        }
        if let Some(all) = self.all {
            anyhow::bail!(
                "every unit is paused ({}): resume them all with {}, \
                 then pause again the units that must stay paused",
                until_words(all.until()),
                crate::program::command("resume")
            );
        }
        let mut any = false;
        for unit in units {
            any |= self.units.remove(unit).is_some();
        }
        Ok(any)
    }

    fn drop_ended(&mut self, now: SystemTime) {
        self.all = self.all.filter(|p| p.in_force(now));
        self.units.retain(|_, p| p.in_force(now));
    }

    /// Writes the record to `path` (0600, atomically).
    pub fn save(&self, path: &Path) -> anyhow::Result<()> {
        state_file::write(path, self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::Operation;

    fn state_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        dir
    }

    #[test]
    fn a_pause_is_kept_ends_on_time_and_is_resumed() {
        let dir = state_dir();
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let (path, mut pauses) = Pauses::open(dir.path()).unwrap();
        assert!(pauses.in_force(now).is_empty());
        pauses.pause(&["web.service".into()], Some(Duration::from_secs(600)), now);
        pauses.pause(&["db.service".into()], None, now);
        pauses.save(&path).unwrap();
        let (_, read) = Pauses::open(dir.path()).unwrap();
        assert_eq!(read, pauses);
        let set = read.in_force(now + Duration::from_secs(599));
        let web = set.forbidding("web.service", Operation::Start).unwrap();
        assert_eq!(web.kind, Kind::Paused);
        assert!(
            web.why.contains("until 2027-01-15T08:10:00Z"),
            "{}",
            web.why
        );
        assert!(set.forbidding("cron.service", Operation::Start).is_none());
        // Ten minutes on, web's pause is over; db's lasts until resumed.
        let later = read.in_force(now + Duration::from_secs(600));
        assert!(later.reason("web.service").is_none());
        assert!(later
            .reason("db.service")
            .unwrap()
            .why
            .contains("until `host resume`"));
        let mut resumed = read.clone();
        assert!(resumed.resume(&["db.service".into()], now).unwrap());
        assert!(!resumed.resume(&["db.service".into()], now).unwrap());
        assert_eq!(resumed.listed(now).len(), 1);
    }

    #[test]
    fn pausing_everything_leaves_every_unit_alone_until_all_are_resumed() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let mut pauses = Pauses::empty();
        pauses.pause(&[], None, now);
        assert!(pauses.in_force(now).reason("any.service").is_some());
        let refused = pauses.resume(&["web.service".into()], now).unwrap_err();
        assert!(
            refused.to_string().contains("every unit is paused"),
            "{refused}"
        );
        assert!(pauses.resume(&[], now).unwrap());
        assert!(pauses.in_force(now).is_empty());
    }

    #[test]
    fn a_damaged_record_is_refused_not_taken_as_no_pause() {
        let dir = state_dir();
        std::fs::write(dir.path().join(FILE_NAME), "{").unwrap();
        let error = format!("{:#}", Pauses::open(dir.path()).unwrap_err());
        assert!(error.contains("is damaged"), "{error}");
    }
}
