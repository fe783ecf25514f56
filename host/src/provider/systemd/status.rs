//! A unit's status: its `is-active` and `is-enabled` words, over the bus
//! in one round trip or with two systemctl commands; after any job systemd
//! has pending for it; and, for a unit systemd is restarting by itself,
//! how its crash loop stands.

use super::bus::dbus::UnitAnswers;
use super::bus::BusAnswer;
use super::cli::parse::{read_is_active, read_is_enabled, Word};
use super::words::ActiveState;
use super::{has_sysv_script, printed, SystemdBackend};
use crate::contract::{ProviderError, Restarting, ServiceStatus};
use crate::provider::backend::{Backend, Budget, Observed};
use crate::provider::unit_name::mangle;
use crate::service_name::CheckedName;

/// The two words, and over the bus whether the unit's files changed.
struct Answers {
    active: Word,
    enabled: Word,
    files_changed: Option<bool>,
    via_bus: bool,
}

impl SystemdBackend {
    /// `systemctl is-active` and `is-enabled` of the unit, and over D-Bus,
    /// when asked, whether its files changed since systemd loaded it.
    pub(super) fn read_status(
        &mut self,
        unit: &CheckedName,
        time: &Budget,
        files_changed_too: bool,
    ) -> Result<Observed, ProviderError> {
        self.bus.connect_once(time);
        let mangled = mangle(unit.as_str()).unwrap_or_else(|| unit.to_string());
        let mut answers = self.answers(unit, time, files_changed_too)?;
        let mut restarting = None;
        // `activating` is also systemd's word between two runs it makes by
        // itself (`auto-restart`), and, with systemctl, the word of a unit
        // whose job is pending: asked once more only then.
        let state = ActiveState::parse(answers.active.word);
        if matches!(
            state,
            Some(ActiveState::Activating | ActiveState::Deactivating | ActiveState::Reloading)
        ) {
            if !answers.via_bus && self.await_unit_jobs && self.cli.job_pending(&mangled, time) {
                self.cli.poll_unit_job(&mangled, time)?;
                let output = self.cli.is_active(unit.as_str(), time)?;
                answers.active = read_is_active(&output)?;
            }
            if ActiveState::parse(answers.active.word) == Some(ActiveState::Activating) {
                restarting = self.crash_loop(&mangled, &mut answers.active, time)?;
            }
        }
        let (active, enabled) = (answers.active, answers.enabled);
        tracing::debug!(
            unit = %unit,
            active = active.word,
            enabled = enabled.word,
            restarting = restarting.as_ref().map(|r| r.restarts),
            "status read"
        );
        let status = ServiceStatus {
            name: unit.to_string(),
            provider: self.name().to_owned(),
            enabled: enabled.counts,
            running: active.counts,
            active_word: active.word.to_owned(),
            enabled_word: enabled.word.to_owned(),
            // The guard adds how a queued job ended.
            job: None,
            restarting,
        };
        Ok(Observed {
            status,
            files_changed: answers.files_changed,
        })
    }

    /// The words, read after any job systemd has pending for the unit
    /// (another unit's dependency): the state after it is the one that
    /// counts.
    fn answers(
        &mut self,
        unit: &CheckedName,
        time: &Budget,
        files_changed_too: bool,
    ) -> Result<Answers, ProviderError> {
        let mut over_bus = self.status_over_bus(unit, time, files_changed_too)?;
        let pending_job = over_bus.as_ref().and_then(|(a, _)| a.job.0.clone());
        if let Some(path) = pending_job.filter(|_| self.await_unit_jobs) {
            let mangled = mangle(unit.as_str()).unwrap_or_else(|| unit.to_string());
            self.bus.wait_for_unit_job(&mangled, &path, time)?;
            over_bus = self.status_over_bus(unit, time, files_changed_too)?;
        }
        // In the order systemctl's answers come: is-active, is-enabled,
        // then the words read.
        let (active, enabled, files_changed, via_bus) = match over_bus {
            Some((answers, files_changed)) => (
                answers.is_active,
                read_is_enabled(unit.as_str(), &answers.is_enabled)?,
                files_changed,
                true,
            ),
            None => (
                self.cli.is_active(unit.as_str(), time)?,
                self.is_enabled(unit, time)?,
                None,
                false,
            ),
        };
        Ok(Answers {
            active: read_is_active(&active)?,
            enabled,
            files_changed,
            via_bus,
        })
    }

    /// A status's answers over D-Bus, in one round trip, and whether the
    /// unit's files changed since systemd loaded it; `None` when
    /// systemctl is to answer instead (no bus, or it failed). A unit
    /// generated from a SysV init script has its `is-enabled` asked of
    /// systemctl, which asks `systemd-sysv-install` as systemd 252 does.
    fn status_over_bus(
        &mut self,
        service: &CheckedName,
        time: &Budget,
        loaded_too: bool,
    ) -> Result<Option<(UnitAnswers, Option<bool>)>, ProviderError> {
        let Some(unit) = self.bus_name(service) else {
            return Ok(None);
        };
        let (mut answers, changed) = match self.bus.status(&unit, time, loaded_too)? {
            BusAnswer::Answered(answered) => answered,
            BusAnswer::Refused(refusal) => return Err(refusal.status_error()),
            BusAnswer::Fallback => return Ok(None),
        };
        if answers.is_enabled.stdout.trim() == contract_words::GENERATED && has_sysv_script(&unit) {
            answers.is_enabled = self.cli.is_enabled(service.as_str(), time)?;
        }
        Ok(Some((answers, changed)))
    }

    /// For a unit that reads `activating`: whether systemd is restarting it
    /// by itself, read once more. The later reading is the one that counts:
    /// the unit may have left `auto-restart` meanwhile (systemd ran it
    /// again), and its word and sub-state must agree.
    fn crash_loop(
        &mut self,
        unit: &str,
        active: &mut Word,
        time: &Budget,
    ) -> Result<Option<Restarting>, ProviderError> {
        let Ok(Some(now)) = self.liveness(unit, time) else {
            return Ok(None);
        };
        if !now.active.is_empty() && now.active != active.word {
            *active = read_is_active(&printed(&now.active))?;
        }
        Ok(now.is_auto_restarting().then(|| Restarting {
            restarts: now.restarts.unwrap_or(0),
            last_exit: match now.last_exit() {
                e if e.is_empty() => "how its last run ended is not known".into(),
                e => e,
            },
        }))
    }
}
