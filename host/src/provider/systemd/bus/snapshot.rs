//! The run's statuses served from one batched read, kept only while
//! systemd says nothing changed.
//!
//! A converging run reads a unit, changes it, then reads the next: each
//! read is a round trip that waits behind the job systemd just started
//! (about 5 ms a unit where the read alone costs 1). Here the units a run
//! will read (the host's hint: what the policy read last time, and every
//! unit this run changed) are asked in one batch, all questions sent
//! before the first answer is awaited, and each status is then answered
//! from that reading for as long as it is as fresh as a read at the call:
//!
//! - systemd's own signals (`PropertiesChanged` of a unit, `JobNew` and
//!   `JobRemoved` naming it) forget that unit's reading; `UnitFilesChanged`
//!   (someone enabled or disabled a unit) and `Reloading` forget them all;
//! - a change this run makes forgets the unit's reading, and the next
//!   status first hears systemd answer a `Ping` sent after the change:
//!   every signal systemd sent about the change (a dependency's job, a
//!   conflicting unit stopped) is then received and applied. systemd
//!   queues a unit's signals before it reads its next question
//!   (`manager_dispatch_dbus_queue` runs before each turn of its loop), so
//!   an answer that follows them is proof they are in;
//! - a reading with a job pending is never kept: that status waits for the
//!   job and reads again;
//! - whether a unit's files changed since systemd loaded them is never
//!   signalled (systemd compares the files' times when asked): while the
//!   run's reload is still to come, a status asks it at the call, alone.
//!
//! A unit whose reading was forgotten by a signal is read alone at its
//! next status; only units the hint named and not yet read, or changed by
//! this run since their last read, are read together, each at most once
//! per change, so a run's reads stay linear in its units.

use std::collections::{BTreeSet, HashMap};
use std::num::NonZeroUsize;
use std::pin::Pin;
use std::time::Duration;

use futures_core::Stream;
use zbus::OwnedObjectPath;

use super::super::words::dbus::{member, MANAGER, PROPERTIES, UNIT};
use super::super::words::property;
use super::dbus::{classify, transport, DbusError, SystemdBus, UnitAnswers, UnitJob};
use super::rules;
use crate::provider::unit_name::object_path;

/// How many units one batch reads at most: far above a policy's units,
/// and a bound on what one hint can make the host ask.
pub(crate) const MAX_BATCH: usize = 1024;

/// How many signals may wait to be read between two statuses (every
/// unit's, not only the run's): the connection never stalls on a full
/// queue.
const QUEUED_SIGNALS: usize = 1 << 16;

/// A unit's reading, with whether its files changed since systemd loaded
/// them (when that was asked).
#[derive(Debug, Clone)]
pub(crate) struct Reading {
    pub answers: UnitAnswers,
    pub files_changed: Option<bool>,
}

/// The readings kept, and what may still be read in a batch.
#[derive(Default)]
pub(crate) struct Snapshot {
    /// Every signal systemd sends this connection, from the first read on.
    signals: Option<zbus::MessageStream>,
    /// The readings systemd has said nothing against, by unit (mangled).
    readings: HashMap<String, Reading>,
    /// Each unit read or expected, by its object path (what
    /// `PropertiesChanged` names).
    paths: HashMap<String, String>,
    /// Units a batch may read: expected and not read yet, or changed by
    /// this run since their last read.
    due: BTreeSet<String>,
    /// A `Ping` sent after this run's last change, to be answered before
    /// a reading is served.
    sync: Option<tokio::task::JoinHandle<Result<(), DbusError>>>,
}

impl Snapshot {
    /// Units the host expects this run to read: read with the first that
    /// is, in one batch.
    pub(crate) fn expect(&mut self, units: impl IntoIterator<Item = String>) {
        for unit in units {
            if !self.readings.contains_key(&unit) && self.due.len() < MAX_BATCH {
                self.know(&unit);
                self.due.insert(unit);
            }
        }
    }

    /// This run changed `unit` (or queued its job): its reading is
    /// forgotten, and the next status hears systemd after the change.
    pub(crate) fn changed(&mut self, bus: &SystemdBus, unit: &str, timeout: Duration) {
        self.readings.remove(unit);
        self.know(unit);
        self.due.insert(unit.to_owned());
        self.sync_after(bus, timeout);
    }

    /// This run made systemd reload: every reading is forgotten, and every
    /// unit known is read again in the next batch.
    pub(crate) fn reloaded(&mut self, bus: &SystemdBus, timeout: Duration) {
        self.readings.clear();
        self.due.extend(self.paths.values().cloned());
        self.sync_after(bus, timeout);
    }

    fn sync_after(&mut self, bus: &SystemdBus, timeout: Duration) {
        if let Some(earlier) = self.sync.take() {
            earlier.abort();
        }
        let ping = SystemdBus::ping(bus.connection.clone(), timeout);
        self.sync = Some(bus.runtime.spawn(ping));
    }

    fn know(&mut self, unit: &str) {
        self.paths
            .entry(object_path(unit))
            .or_insert_with(|| unit.to_owned());
    }

    /// The status answers of `unit` (mangled): its reading when systemd
    /// said nothing against it since, else read now, with every unit due
    /// beside it. `loaded_too`: see [`SystemdBus::unit_status`].
    pub(crate) fn read(
        &mut self,
        bus: &SystemdBus,
        unit: &str,
        loaded_too: bool,
        timeout: Duration,
    ) -> Result<Reading, DbusError> {
        if self.signals.is_none() {
            self.signals = Some(open(bus, timeout)?);
        }
        if let Some(sync) = self.sync.take() {
            bus.runtime
                .block_on(async { tokio::time::timeout(timeout, sync).await })
                .map_err(|_| transport("no answer to Ping in time"))?
                .map_err(transport)??;
        }
        self.hear(bus)?;
        // Whether the unit's files changed since systemd loaded them is
        // never signalled (systemd compares the files' times when asked):
        // while the run's reload is to come, that is asked at the call.
        if let Some(reading) = self.readings.get(unit).filter(|_| !loaded_too) {
            tracing::trace!(unit, "status from the batched reading");
            return Ok(reading.clone());
        }
        let mut units = vec![unit.to_owned()];
        self.due.remove(unit);
        while !loaded_too && units.len() < MAX_BATCH {
            let Some(next) = self.due.pop_first() else {
                break;
            };
            units.push(next);
        }
        tracing::debug!(unit, batch = units.len(), "statuses read together");
        let answers = bus.unit_statuses(&units, loaded_too, timeout);
        let mut asked = None;
        for (name, answer) in units.into_iter().zip(answers) {
            self.know(&name);
            let reading = answer.map(|answers| Reading {
                files_changed: answers
                    .loaded
                    .as_ref()
                    .map(|loaded| super::files_changed(&name, loaded)),
                answers,
            });
            match reading {
                Ok(reading) if reading.answers.job.0.is_none() => {
                    if asked.is_none() && name == unit {
                        asked = Some(Ok(reading.clone()));
                    }
                    self.readings.insert(name, reading);
                }
                other if asked.is_none() && name == unit => asked = Some(other),
                _ => {}
            }
        }
        // Signals heard while the batch was read may be older or newer than
        // its answers: the readings they name are not kept.
        self.hear(bus)?;
        asked.expect("the unit asked is read first")
    }

    /// Applies every signal received so far, without waiting.
    fn hear(&mut self, bus: &SystemdBus) -> Result<(), DbusError> {
        let Some(signals) = &mut self.signals else {
            return Ok(());
        };
        let received: Vec<zbus::Result<zbus::Message>> = bus.runtime.block_on(async {
            // Lets the connection's reader move what the socket holds.
            tokio::task::yield_now().await;
            let mut received = Vec::new();
            std::future::poll_fn(|cx| loop {
                match Pin::new(&mut *signals).poll_next(cx) {
                    std::task::Poll::Ready(Some(message)) => received.push(message),
                    _ => return std::task::Poll::Ready(()),
                }
            })
            .await;
            received
        });
        for message in received {
            let message = message.map_err(classify)?;
            self.apply(&Signal::of(&message));
        }
        Ok(())
    }

    /// What one signal of systemd's makes of the readings.
    fn apply(&mut self, signal: &Signal) {
        match signal {
            Signal::Unit { path, says } => {
                let Some(unit) = self.paths.get(path) else {
                    return;
                };
                let moved = self.readings.get(unit).is_some_and(|reading| {
                    says.job_queued
                        || says.unreadable
                        || says
                            .active
                            .as_deref()
                            .is_some_and(|word| word != reading.answers.is_active.stdout.trim())
                });
                if moved {
                    self.readings.remove(unit);
                }
            }
            Signal::Job(unit) => {
                self.readings.remove(unit);
            }
            Signal::UnitFiles => self.readings.clear(),
            Signal::Reloading => {
                self.readings.clear();
                self.due.extend(self.paths.values().cloned());
            }
            Signal::Other => {}
        }
    }
}

/// A signal of systemd's, as far as the readings are concerned.
#[derive(Debug, PartialEq, Eq)]
enum Signal {
    /// `PropertiesChanged` of the object at this path, with what it says
    /// of what a reading holds.
    Unit { path: String, says: Moved },
    /// `JobNew` or `JobRemoved` of this unit.
    Job(String),
    /// `UnitFilesChanged`.
    UnitFiles,
    /// `Reloading`.
    Reloading,
    Other,
}

impl Signal {
    fn of(message: &zbus::Message) -> Self {
        let header = message.header();
        let member = header.member().map(|m| m.as_str().to_owned());
        let interface = header.interface().map(|i| i.as_str().to_owned());
        match (interface.as_deref(), member.as_deref()) {
            (Some(PROPERTIES), Some(member::PROPERTIES_CHANGED)) => match header.path() {
                Some(path) => Signal::Unit {
                    path: path.as_str().to_owned(),
                    says: Moved::of(message),
                },
                None => Signal::Other,
            },
            (Some(MANAGER), Some(member::JOB_NEW | member::JOB_REMOVED)) => {
                match message
                    .body()
                    .deserialize::<(u32, OwnedObjectPath, String)>()
                    .or_else(|_| {
                        message
                            .body()
                            .deserialize::<(u32, OwnedObjectPath, String, String)>()
                            .map(|(id, path, unit, _)| (id, path, unit))
                    }) {
                    Ok((_, _, unit)) => Signal::Job(unit),
                    // A job signal that cannot be read could be any
                    // unit's: every reading goes.
                    Err(_) => Signal::UnitFiles,
                }
            }
            (Some(MANAGER), Some(member::UNIT_FILES_CHANGED)) => Signal::UnitFiles,
            (Some(MANAGER), Some(member::RELOADING)) => Signal::Reloading,
            _ => Signal::Other,
        }
    }
}

/// What a unit's `PropertiesChanged` says of the two things a reading
/// holds that systemd signals: its `ActiveState` and its `Job` (a unit
/// file's state moves with `UnitFilesChanged`). systemd also sends the
/// signal when it merely loads a unit (a batch loads the units it reads)
/// or when other properties move (a service's main PID): those keep the
/// reading.
#[derive(Debug, Default, PartialEq, Eq)]
struct Moved {
    /// The `ActiveState` it carries, if it carries one.
    active: Option<String>,
    /// It carries a `Job` with a job, or says `ActiveState` or `Job`
    /// changed without their values.
    job_queued: bool,
    /// It could not be read: it may say anything.
    unreadable: bool,
}

impl Moved {
    fn of(message: &zbus::Message) -> Self {
        type Body = (String, HashMap<String, zbus::OwnedVariant>, Vec<String>);
        let Ok((interface, mut changed, invalidated)) = message.body().deserialize::<Body>()
        else {
            return Self {
                unreadable: true,
                ..Self::default()
            };
        };
        if interface != UNIT {
            return Self::default();
        }
        let active = changed
            .remove(property::ACTIVE_STATE)
            .map(String::try_from);
        let job = changed.remove(property::JOB).map(UnitJob::try_from);
        let named = invalidated
            .iter()
            .any(|p| p == property::ACTIVE_STATE || p == property::JOB);
        Self {
            unreadable: matches!(active, Some(Err(_))) || matches!(job, Some(Err(_))),
            job_queued: named || matches!(job, Some(Ok(UnitJob(Some(_))))),
            active: active.and_then(Result::ok),
        }
    }
}

/// Every signal systemd sends this client (it must already have
/// subscribed, as [`super::jobs`] does).
fn open(bus: &SystemdBus, timeout: Duration) -> Result<zbus::MessageStream, DbusError> {
    let rule = rules::systemd_signals().map_err(transport)?;
    let queued = NonZeroUsize::new(QUEUED_SIGNALS).expect("not zero");
    bus.runtime.block_on(async {
        tokio::time::timeout(
            timeout,
            zbus::MessageStream::for_match_rule(rule, &bus.connection, Some(queued)),
        )
        .await
        .map_err(|_| transport("no answer to AddMatch in time"))?
        .map_err(classify)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::runner::CommandOutput;

    fn reading(job: Option<&str>) -> Reading {
        let printed = |word: &str| CommandOutput {
            code: Some(0),
            stdout: format!("{word}\n"),
            stderr: String::new(),
        };
        Reading {
            answers: UnitAnswers {
                is_active: printed("active"),
                is_enabled: printed("enabled"),
                loaded: None,
                job: super::super::dbus::UnitJob(job.map(str::to_owned)),
            },
            files_changed: None,
        }
    }

    fn kept(units: &[&str]) -> Snapshot {
        let mut snapshot = Snapshot::default();
        for unit in units {
            snapshot.know(unit);
            snapshot.readings.insert((*unit).to_owned(), reading(None));
        }
        snapshot
    }

    #[test]
    fn a_units_signal_forgets_that_unit_only() {
        let mut snapshot = kept(&["a.service", "b.service"]);
        let moved = |says: Moved| Signal::Unit {
            path: object_path("a.service"),
            says,
        };
        // Loaded, or another property moved: the reading holds.
        snapshot.apply(&moved(Moved {
            active: Some("active".into()),
            ..Moved::default()
        }));
        snapshot.apply(&moved(Moved::default()));
        assert!(snapshot.readings.contains_key("a.service"));
        snapshot.apply(&moved(Moved {
            active: Some("deactivating".into()),
            ..Moved::default()
        }));
        assert!(!snapshot.readings.contains_key("a.service"));
        assert!(snapshot.readings.contains_key("b.service"));
        // A forgotten unit is read alone, not in the next batch.
        assert!(snapshot.due.is_empty());
    }

    #[test]
    fn a_job_queued_or_a_signal_that_cannot_be_read_forgets_the_unit() {
        for says in [
            Moved {
                job_queued: true,
                ..Moved::default()
            },
            Moved {
                unreadable: true,
                ..Moved::default()
            },
        ] {
            let mut snapshot = kept(&["a.service"]);
            snapshot.apply(&Signal::Unit {
                path: object_path("a.service"),
                says,
            });
            assert!(snapshot.readings.is_empty());
        }
    }

    #[test]
    fn a_job_of_a_unit_forgets_it() {
        let mut snapshot = kept(&["a.service", "b.service"]);
        snapshot.apply(&Signal::Job("b.service".into()));
        assert!(snapshot.readings.contains_key("a.service"));
        assert!(!snapshot.readings.contains_key("b.service"));
    }

    #[test]
    fn enablement_changed_by_anyone_forgets_every_reading() {
        let mut snapshot = kept(&["a.service", "b.service"]);
        snapshot.apply(&Signal::UnitFiles);
        assert!(snapshot.readings.is_empty());
        assert!(
            snapshot.due.is_empty(),
            "read one by one, not batched again"
        );
    }

    #[test]
    fn a_reload_forgets_every_reading_and_batches_them_again() {
        let mut snapshot = kept(&["a.service", "b.service"]);
        snapshot.apply(&Signal::Reloading);
        assert!(snapshot.readings.is_empty());
        assert_eq!(
            snapshot.due.iter().cloned().collect::<Vec<_>>(),
            ["a.service", "b.service"]
        );
    }

    #[test]
    fn other_units_signals_change_nothing() {
        let mut snapshot = kept(&["a.service"]);
        snapshot.apply(&Signal::Unit {
            path: object_path("other.service"),
            says: Moved {
                job_queued: true,
                ..Moved::default()
            },
        });
        snapshot.apply(&Signal::Other);
        assert!(snapshot.readings.contains_key("a.service"));
    }

    #[test]
    fn what_is_expected_is_due_once_and_bounded() {
        let mut snapshot = kept(&["a.service"]);
        snapshot.expect(["a.service".to_owned(), "b.service".to_owned()]);
        assert_eq!(snapshot.due.iter().collect::<Vec<_>>(), ["b.service"]);
        snapshot.expect((0..2 * MAX_BATCH).map(|i| format!("u{i}.service")));
        assert_eq!(snapshot.due.len(), MAX_BATCH);
    }
}
