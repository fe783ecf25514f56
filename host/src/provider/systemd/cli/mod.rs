//! systemd through `systemctl`: the design's commands, one process each
//! (docs/service-type.md), with `--` before every unit name and a clean
//! environment. Used when the system bus does not answer, with
//! `provider = "systemctl"`, for the run's daemon-reload, for SysV init
//! scripts' enablement, and for the unit's journal.
//!
//! `systemctl` runs one command under the global lock within its time
//! budget; `runner` starts the process (or a test's script); `parse` reads
//! what it printed.

pub mod parse;
pub mod runner;
pub(crate) mod systemctl;

use std::time::{Duration, Instant, SystemTime};

use self::parse::{read_is_enabled, Word};
use self::runner::CommandOutput;
use self::systemctl::Systemctl;
use crate::contract::ProviderError;
use crate::provider::backend::{Budget, Change};
use crate::provider::liveness::{self, Liveness};
use crate::text::Untrusted;

/// How often `systemctl show` is asked whether a unit's job ended, when a
/// status must wait for a job systemctl did not queue.
const JOB_POLL: Duration = Duration::from_millis(100);

/// The design's systemctl commands.
pub(crate) struct Cli {
    systemctl: Systemctl,
}

impl Cli {
    pub(crate) fn new(systemctl: Systemctl) -> Self {
        Self { systemctl }
    }

    /// Why systemctl cannot be used at all (not found, no systemd).
    pub(crate) fn unavailable_reason(&self) -> Option<&str> {
        self.systemctl.unavailable_reason()
    }

    /// What `systemctl is-active --system -- NAME` printed.
    pub(crate) fn is_active(
        &self,
        name: &str,
        time: &Budget,
    ) -> Result<CommandOutput, ProviderError> {
        self.systemctl
            .output(&["is-active", "--system", "--", name], time)
    }

    /// What `systemctl is-enabled --system -- NAME` printed.
    pub(crate) fn is_enabled(
        &self,
        name: &str,
        time: &Budget,
    ) -> Result<CommandOutput, ProviderError> {
        self.systemctl
            .output(&["is-enabled", "--system", "--", name], time)
    }

    /// `systemctl show` of what tells whether `unit` is up.
    pub(crate) fn liveness(&self, unit: &str, time: &Budget) -> Result<Liveness, ProviderError> {
        let property = format!("--property={}", liveness::show_properties());
        let output = self
            .systemctl
            .output(&["show", &property, "--system", "--", unit], time)?;
        if !output.success() {
            return Err(parse::command_failed(
                &format!("show {property} --system -- {unit}"),
                &output,
            ));
        }
        Ok(liveness::from_show(&output.stdout))
    }

    /// Whether `unit` has a job pending.
    pub(crate) fn job_pending(&self, unit: &str, time: &Budget) -> bool {
        self.liveness(unit, time).is_ok_and(|l| l.job_pending)
    }

    /// Waits, within `time`, until `unit` has no pending job (systemctl
    /// cannot follow a job it did not queue: `show` is asked again every
    /// [`JOB_POLL`]).
    pub(crate) fn poll_unit_job(&self, unit: &str, time: &Budget) -> Result<(), ProviderError> {
        let until = Instant::now() + time.now("waiting for the unit's job")?;
        while Instant::now() < until && crate::interrupt::since().is_none() {
            if !self.job_pending(unit, time) {
                break;
            }
            std::thread::sleep(JOB_POLL.min(until.saturating_duration_since(Instant::now())));
        }
        Ok(())
    }

    /// The design's commands for `change`: `systemctl start|stop|restart
    /// --system -- NAME`, and `enable|disable --no-reload --system -- NAME`.
    ///
    /// `disable` is carried out completely: a plain `disable` leaves a
    /// runtime enablement (the links in `/run/systemd/system`), so when
    /// `is-enabled` says `enabled-runtime` afterwards, `systemctl disable
    /// --runtime --no-reload --system -- NAME` follows. This is what the
    /// contract's `disable` means; whether to disable is the guest's call.
    pub(crate) fn change(
        &self,
        change: Change,
        name: &str,
        time: &Budget,
    ) -> Result<(), ProviderError> {
        if !change.is_enablement() {
            return self
                .systemctl
                .change(&[change.verb(), "--system", "--", name], time);
        }
        self.systemctl.change(
            &[change.verb(), "--no-reload", "--system", "--", name],
            time,
        )?;
        if change == Change::Disable {
            // Only the word itself counts; anything else (the unit gone, an
            // error) leaves the verification to the guest.
            let left = self
                .is_enabled(name, time)
                .and_then(|o| read_is_enabled(name, &o));
            if left.map(|w: Word| w.word) == Ok(contract_words::ENABLED_RUNTIME) {
                self.systemctl.change(
                    &[
                        "disable",
                        "--runtime",
                        "--no-reload",
                        "--system",
                        "--",
                        name,
                    ],
                    time,
                )?;
            }
        }
        Ok(())
    }

    /// `systemctl daemon-reload`.
    pub(crate) fn daemon_reload(&self, time: &Budget) -> Result<(), ProviderError> {
        self.systemctl.change(&["daemon-reload"], time)
    }

    /// The unit's last journal lines since `since` (bounded, untrusted).
    pub(crate) fn journal(&self, unit: &str, since: SystemTime, time: &Budget) -> Vec<Untrusted> {
        // journald may not have written what the unit said just before it
        // died: `--sync` returns once it has.
        let _ = self.systemctl.journalctl(&["--sync"], time);
        let args = crate::provider::journal::arguments(unit, since);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        match self.systemctl.journalctl(&args, time) {
            Some(output) if output.success() => crate::provider::journal::lines(&output.stdout),
            _ => Vec::new(),
        }
    }
}
