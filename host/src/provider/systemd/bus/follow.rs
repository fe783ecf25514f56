//! Following managed units over the system bus, without asking: systemd
//! sends `PropertiesChanged` on a unit's object path when its state moves
//! (to clients that called `Manager.Subscribe`), `UnitFilesChanged` when a
//! unit file is enabled or disabled (a unit's `UnitFileState` sends no
//! `PropertiesChanged`), and `Reloading` around a daemon-reload. The bus
//! delivers only what a match rule asks for: one rule per managed unit's
//! path, so that the units no policy manages cost nothing here (mgmt's
//! polling of `ListUnits` every second is what this avoids).
//!
//! On `UnitFilesChanged` the unit file state of the managed units is read
//! (one question, only then) and compared with the last one seen: only the
//! units whose state moved wake their policies. The end of a reload wakes
//! every policy that manages units, without a question (see [`BusEvent`]).
//!
//! A lost connection is made again, and systemd coming back on the bus
//! (`daemon-reexec`) is subscribed to again; both are a wake for
//! everything, as events may have been missed meanwhile.
//!
//! This is the watch's own connection, read-only: the provider's changes
//! go over the run's connection. It says what it heard as [`BusEvent`]s;
//! what a watch does with them is the watch's (`commands::watch`).
//!
//! Only systemd wakes the watch. Match rules filter the broadcasts a client
//! asks for by sender, but a signal *addressed* to the watch's connection is
//! delivered whoever sent it (any local user may send signals on the system
//! bus, and `busctl list` shows the watch's unique name). So every message
//! is checked here, whatever the match rules say: a signal counts only when
//! its sender is systemd's current unique name (asked with `GetNameOwner`
//! at connect, followed through `NameOwnerChanged`), and `NameOwnerChanged`
//! only when the bus itself sent it. What is dropped is counted (a debug
//! line each, and `policy_host_watch_signals_dropped_total`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

use futures_core::Stream;

use super::super::words::dbus::{
    error, member, BUS, BUS_PATH, MANAGER, MANAGER_PATH, PROPERTIES, SYSTEMD, UNIT,
};
use super::super::words::property;
use super::rules::{self, UnitPaths};
use crate::provider::unit_name::object_path;

/// How long one question to the bus may take.
const TIMEOUT: Duration = Duration::from_secs(5);
/// How long between attempts to reach the bus again.
const RETRY: Duration = Duration::from_millis(250);

/// What the followed units' signals told: each one is worth a look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BusEvent {
    /// A followed unit's `ActiveState` or `SubState` moved, or its unit
    /// file state did (systemd's name of the unit).
    Unit(String),
    /// systemd finished reloading its unit files (`Reloading(false)`): any
    /// followed unit may read differently now.
    Reloaded,
    /// Something may have been missed: the bus came back, or systemd did.
    Missed(&'static str),
}

/// The follower: a task on the process's runtime ([`crate::io_runtime`]),
/// not a thread of its own, as it only ever awaits (the bus, a timer);
/// this handle tells it which units to follow, and ends it when dropped.
pub(crate) struct UnitFollower {
    units: tokio::sync::watch::Sender<BTreeSet<String>>,
    dropped: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl UnitFollower {
    /// Starts following (no unit yet); what it hears goes to `events`, as
    /// the receiver's type.
    pub(crate) fn start<E>(events: Sender<E>) -> std::io::Result<Self>
    where
        E: From<BusEvent> + Send + 'static,
    {
        let (units, followed) = tokio::sync::watch::channel(BTreeSet::new());
        let dropped = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&dropped);
        let task = crate::io_runtime::handle()?.spawn(follow(followed, events, counted));
        Ok(Self {
            units,
            dropped,
            task,
        })
    }

    /// How many signals were dropped since the watch began: sent by
    /// someone other than systemd (or, for `NameOwnerChanged`, the bus).
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Follows exactly `units` from now on (systemd's names).
    pub(crate) fn follow(&self, units: BTreeSet<String>) {
        self.units.send_if_modified(|current| {
            let changed = *current != units;
            *current = units;
            changed
        });
    }
}

impl Drop for UnitFollower {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The follower's task: connects, follows, and connects again when the
/// connection is lost, until the watch ends.
async fn follow<E: From<BusEvent>>(
    mut followed: tokio::sync::watch::Receiver<BTreeSet<String>>,
    wakes: Sender<E>,
    dropped: Arc<AtomicU64>,
) {
    let mut connected_before = false;
    let mut said = false;
    loop {
        match Following::connect(Arc::clone(&dropped)).await {
            Ok(mut following) => {
                said = false;
                if connected_before
                    && wakes
                        .send(BusEvent::Missed("the system bus came back").into())
                        .is_err()
                {
                    return;
                }
                connected_before = true;
                match following.run(&mut followed, &wakes).await {
                    Ended::Lost(why) => tracing::warn!(
                        "the system bus connection was lost ({why}); connecting again"
                    ),
                    Ended::WatchEnded => return,
                }
            }
            Err(e) => {
                if !said {
                    tracing::warn!("cannot follow units over the system bus: {e}; trying again (resyncs still run)");
                    said = true;
                }
            }
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// Moves every message of `stream` to `sender` as it comes. zbus holds
/// at most a few dozen unread messages per stream and then stops reading
/// the socket; a stream left unread while the watch asks systemd a question
/// (a unit file state after `Reloading`, with the signals of a run's
/// changes queued) would hold back the answer too, until the question
/// timed out and the connection was dropped. Drained here, the answers
/// always arrive.
async fn drain(
    mut stream: zbus::MessageStream,
    sender: tokio::sync::mpsc::UnboundedSender<zbus::Result<zbus::Message>>,
) {
    while let Some(message) =
        std::future::poll_fn(|cx| std::pin::Pin::new(&mut stream).poll_next(cx)).await
    {
        if sender.send(message).is_err() {
            return;
        }
    }
}

impl Drop for Following {
    fn drop(&mut self) {
        self.drain.abort();
    }
}

enum Ended {
    Lost(String),
    WatchEnded,
}

/// One connection, following some units.
struct Following {
    connection: zbus::Connection,
    /// Every message the connection receives, drained from zbus's stream
    /// as it comes by a task of its own ([`drain`]).
    messages: tokio::sync::mpsc::UnboundedReceiver<zbus::Result<zbus::Message>>,
    drain: tokio::task::JoinHandle<()>,
    /// Object path → unit, for the units followed.
    paths: BTreeMap<String, String>,
    /// The unit file state last seen of each unit followed.
    file_states: HashMap<String, String>,
    /// systemd's unique name on the bus now (`None` while it has none):
    /// the only sender whose signals count.
    systemd: Option<String>,
    /// Signals dropped: not from systemd (or the bus).
    dropped: Arc<AtomicU64>,
}

impl Following {
    async fn connect(dropped: Arc<AtomicU64>) -> zbus::Result<Self> {
        let connection = tokio::time::timeout(
            TIMEOUT,
            zbus::connection::Builder::system()
                .method_timeout(TIMEOUT)
                .build(),
        )
        .await
        .map_err(|_| zbus::Error::Failure("the system bus did not answer in time".into()))??;
        let (sender, messages) = tokio::sync::mpsc::unbounded_channel();
        let drain = tokio::spawn(drain(zbus::MessageStream::from(&connection), sender));
        let mut following = Self {
            connection,
            messages,
            drain,
            paths: BTreeMap::new(),
            file_states: HashMap::new(),
            systemd: None,
            dropped,
        };
        for rule in [
            rules::manager_signal(member::UNIT_FILES_CHANGED)?,
            rules::manager_signal(member::RELOADING)?,
            rules::systemd_owner_changed()?,
        ] {
            following.add_match(&rule).await?;
        }
        // Asked after the rule for NameOwnerChanged is in place: a change of
        // owner from here on is seen, whichever comes first.
        following.systemd = following.systemd_owner().await?;
        following.subscribe().await?;
        Ok(following)
    }

    /// systemd's unique name on the bus, or `None` when it is not on it.
    async fn systemd_owner(&self) -> zbus::Result<Option<String>> {
        let reply = self
            .connection
            .call_method(
                Some(BUS),
                BUS_PATH,
                Some(BUS),
                member::GET_NAME_OWNER,
                &(SYSTEMD,),
            )
            .await;
        match reply {
            Ok(reply) => Ok(Some(reply.body().deserialize::<String>()?)),
            Err(zbus::Error::MethodError(name, _, _))
                if name.as_str() == error::NAME_HAS_NO_OWNER =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Asks the bus to deliver the signals `rule` matches.
    async fn add_match(&self, rule: &zbus::MatchRule<'_>) -> zbus::Result<()> {
        self.bus_call(member::ADD_MATCH, rule).await
    }

    async fn remove_match(&self, rule: &zbus::MatchRule<'_>) -> zbus::Result<()> {
        self.bus_call(member::REMOVE_MATCH, rule).await
    }

    async fn bus_call(&self, method: &str, rule: &zbus::MatchRule<'_>) -> zbus::Result<()> {
        self.connection
            .call_method(Some(BUS), BUS_PATH, Some(BUS), method, &(rule.to_string(),))
            .await
            .map(drop)
    }

    /// Asks systemd to send unit signals (per client; lost when systemd
    /// is re-executed).
    async fn subscribe(&self) -> zbus::Result<()> {
        self.connection
            .call_method(
                Some(SYSTEMD),
                MANAGER_PATH,
                Some(MANAGER),
                member::SUBSCRIBE,
                &(),
            )
            .await
            .map(drop)
    }

    async fn run<E: From<BusEvent>>(
        &mut self,
        followed: &mut tokio::sync::watch::Receiver<BTreeSet<String>>,
        wakes: &Sender<E>,
    ) -> Ended {
        let units = followed.borrow_and_update().clone();
        if let Err(e) = self.set_units(units).await {
            return Ended::Lost(e.to_string());
        }
        loop {
            let next = self.messages.recv();
            tokio::select! {
                changed = followed.changed() => {
                    if changed.is_err() {
                        return Ended::WatchEnded;
                    }
                    let units = followed.borrow_and_update().clone();
                    if let Err(e) = self.set_units(units).await {
                        return Ended::Lost(e.to_string());
                    }
                }
                message = next => {
                    let message = match message {
                        None => return Ended::Lost("the connection closed".into()),
                        Some(Err(e)) => return Ended::Lost(e.to_string()),
                        Some(Ok(message)) => message,
                    };
                    for event in self.read(&message).await {
                        if wakes.send(event.into()).is_err() {
                            return Ended::WatchEnded;
                        }
                    }
                }
            }
        }
    }

    /// Adds and removes match rules so that exactly `units` are followed,
    /// and reads the unit file state of the new ones.
    async fn set_units(&mut self, units: BTreeSet<String>) -> zbus::Result<()> {
        tracing::debug!(?units, "following units on the bus");
        let wanted: BTreeMap<String, String> = units
            .into_iter()
            .map(|unit| (object_path(&unit), unit))
            .collect();
        let gone: Vec<String> = self
            .paths
            .keys()
            .filter(|p| !wanted.contains_key(*p))
            .cloned()
            .collect();
        for path in gone {
            if let Some(unit) = self.paths.remove(&path) {
                self.file_states.remove(&unit);
            }
            self.remove_match(&rules::unit_properties(UnitPaths::One(&path))?)
                .await?;
        }
        for (path, unit) in wanted {
            if self.paths.contains_key(&path) {
                continue;
            }
            self.add_match(&rules::unit_properties(UnitPaths::One(&path))?)
                .await?;
            let state = self.file_state(&unit).await;
            self.file_states.insert(unit.clone(), state);
            self.paths.insert(path, unit);
        }
        Ok(())
    }

    /// The `UnitFileState` of those of `units` that have a unit file of
    /// their own name, in one question (`ListUnitFilesByPatterns`): a
    /// disable is seen without a question per managed unit, each of which
    /// reads the unit directories again. What it does not list (an
    /// instance of a template, a unit with no file) is asked one by one, as
    /// `GetUnitFileState` answers for it what systemctl would.
    async fn listed_file_states(&self, units: &[String]) -> HashMap<String, String> {
        if units.is_empty() {
            return HashMap::new();
        }
        let no_states: Vec<&str> = Vec::new();
        let listed: Vec<(String, String)> = self
            .ask_manager(member::LIST_UNIT_FILES_BY_PATTERNS, &(no_states, units))
            .await
            .unwrap_or_default();
        listed
            .into_iter()
            .filter_map(|(path, state)| {
                let name = path.rsplit('/').next()?.to_owned();
                units.contains(&name).then_some((name, state))
            })
            .collect()
    }

    /// A unit's `UnitFileState` ("" when systemd has no file for it).
    async fn file_state(&self, unit: &str) -> String {
        self.ask_manager(member::GET_UNIT_FILE_STATE, &(unit,))
            .await
            .unwrap_or_default()
    }

    /// systemd's manager's answer to `method` with `body`; `None` when it
    /// gave none (what the caller then takes is its own affair).
    async fn ask_manager<B, R>(&self, method: &str, body: &B) -> Option<R>
    where
        B: serde::Serialize + zbus::zvariant::DynamicType,
        R: for<'d> serde::Deserialize<'d> + zbus::zvariant::Type,
    {
        let reply = self
            .connection
            .call_method(Some(SYSTEMD), MANAGER_PATH, Some(MANAGER), method, body)
            .await
            .ok()?;
        reply.body().deserialize::<R>().ok()
    }

    /// The events one message makes: none for a signal that systemd (or,
    /// for `NameOwnerChanged`, the bus) did not send.
    async fn read(&mut self, message: &zbus::Message) -> Vec<BusEvent> {
        let header = message.header();
        tracing::trace!(?header, "bus message");
        if header.message_type() != zbus::message::Type::Signal {
            return Vec::new();
        }
        let member = header
            .member()
            .map(|m| m.as_str().to_owned())
            .unwrap_or_default();
        let interface = header
            .interface()
            .map(|i| i.as_str().to_owned())
            .unwrap_or_default();
        let path = header
            .path()
            .map(|p| p.as_str().to_owned())
            .unwrap_or_default();
        let sender = header.sender().map(|s| s.as_str().to_owned());
        if !trusted(
            sender.as_deref(),
            (interface.as_str(), member.as_str()),
            self.systemd.as_deref(),
        ) {
            let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            tracing::debug!(
                sender = sender.as_deref().unwrap_or("(none)"),
                interface,
                member,
                path,
                dropped,
                "a signal not sent by systemd dropped"
            );
            return Vec::new();
        }
        match (interface.as_str(), member.as_str()) {
            (PROPERTIES, member::PROPERTIES_CHANGED) => self.unit_moved(&path, message),
            (MANAGER, member::UNIT_FILES_CHANGED) => self.file_states_moved().await,
            (MANAGER, member::RELOADING) => match message.body().deserialize::<bool>() {
                // The reload's end: the files systemd reads may differ, for
                // any followed unit. Its policies run and read every unit
                // afresh, so no unit file state is asked here: that list
                // (tens of ms of systemd's time with 50 units) would come
                // just as the run's first statuses do, and delay them. The
                // states last seen are left as they are: one that moved
                // unseen shows at the next `UnitFilesChanged`, as a wake
                // of its policies that finds nothing more to do.
                Ok(false) => vec![BusEvent::Reloaded],
                _ => Vec::new(),
            },
            (BUS, member::NAME_OWNER_CHANGED) => self.owner_changed(message).await,
            _ => Vec::new(),
        }
    }

    /// A followed unit whose `ActiveState` or `SubState` moved.
    fn unit_moved(&self, path: &str, message: &zbus::Message) -> Vec<BusEvent> {
        let Some(unit) = self.paths.get(path) else {
            return Vec::new();
        };
        type Changed = (String, HashMap<String, zbus::OwnedVariant>, Vec<String>);
        let Ok((changed_interface, changed, invalidated)) = message.body().deserialize::<Changed>()
        else {
            return Vec::new();
        };
        let moved =
            |name: &str| changed.contains_key(name) || invalidated.iter().any(|i| i == name);
        if changed_interface == UNIT
            && (moved(property::ACTIVE_STATE) || moved(property::SUB_STATE))
        {
            vec![BusEvent::Unit(unit.clone())]
        } else {
            Vec::new()
        }
    }

    /// systemd left the bus (nobody's signals count until it is back) or
    /// came back under a new unique name (subscribed to again; everything
    /// may have been missed).
    async fn owner_changed(&mut self, message: &zbus::Message) -> Vec<BusEvent> {
        match message.body().deserialize::<(String, String, String)>() {
            Ok((name, _, new_owner)) if name == SYSTEMD && new_owner.is_empty() => {
                self.systemd = None;
                Vec::new()
            }
            Ok((name, _, new_owner)) if name == SYSTEMD => {
                self.systemd = Some(new_owner);
                // systemd keeps its subscribers across a re-execution; a new
                // systemd process needs asking again.
                match self.subscribe().await {
                    Err(zbus::Error::MethodError(name, _, _))
                        if name.as_str() == error::ALREADY_SUBSCRIBED => {}
                    Err(e) => tracing::warn!("subscribing to systemd again failed: {e}"),
                    Ok(()) => {}
                }
                vec![BusEvent::Missed("systemd came back on the bus")]
            }
            _ => Vec::new(),
        }
    }

    /// The units whose unit file state moved since last seen.
    async fn file_states_moved(&mut self) -> Vec<BusEvent> {
        let units: Vec<String> = self.paths.values().cloned().collect();
        let mut states = self.listed_file_states(&units).await;
        let mut wakes = Vec::new();
        for unit in units {
            let state = match states.remove(&unit) {
                Some(state) => state,
                None => self.file_state(&unit).await,
            };
            if self.file_states.get(&unit) != Some(&state) {
                self.file_states.insert(unit.clone(), state);
                wakes.push(BusEvent::Unit(unit));
            }
        }
        wakes
    }
}

/// Whether a signal from `sender` may wake the watch: `NameOwnerChanged`
/// from the bus itself, anything else from systemd's unique name of the
/// moment (`systemd`). A signal with no sender, or while systemd is not on
/// the bus, counts for nothing.
fn trusted(sender: Option<&str>, (interface, member): (&str, &str), systemd: Option<&str>) -> bool {
    match (interface, member) {
        (BUS, member::NAME_OWNER_CHANGED) => sender == Some(BUS),
        _ => sender.is_some() && sender == systemd,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_systemds_unique_name_wakes_and_only_the_bus_says_who_systemd_is() {
        let systemd = Some(":1.3");
        let unit = (PROPERTIES, member::PROPERTIES_CHANGED);
        let reloading = (MANAGER, member::RELOADING);
        let owner = (BUS, member::NAME_OWNER_CHANGED);
        assert!(trusted(Some(":1.3"), unit, systemd));
        assert!(trusted(Some(":1.3"), reloading, systemd));
        // Another client, addressing the watch directly.
        assert!(!trusted(Some(":1.42"), unit, systemd));
        assert!(!trusted(Some(":1.42"), reloading, systemd));
        assert!(!trusted(Some(":1.42"), owner, systemd));
        // systemd cannot claim to be the bus, nor the bus to be systemd.
        assert!(!trusted(Some(":1.3"), owner, systemd));
        assert!(trusted(Some(BUS), owner, systemd));
        assert!(!trusted(Some(BUS), unit, systemd));
        // A well-known name is not a sender; no sender, or no systemd, is nobody.
        assert!(!trusted(Some(SYSTEMD), unit, systemd));
        assert!(!trusted(None, unit, systemd));
        assert!(!trusted(None, unit, None));
        assert!(!trusted(Some(":1.3"), unit, None));
    }
}
