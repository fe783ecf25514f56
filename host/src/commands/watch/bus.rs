//! Following managed units over the system bus, without asking: systemd
//! sends `PropertiesChanged` on a unit's object path when its state moves
//! (to clients that called `Manager.Subscribe`), `UnitFilesChanged` when a
//! unit file is enabled or disabled (a unit's `UnitFileState` sends no
//! `PropertiesChanged`), and `Reloading` around a daemon-reload. The bus
//! delivers only what a match rule asks for: one rule per managed unit's
//! path, so that the units no policy manages cost nothing here (mgmt's
//! polling of `ListUnits` every second is what this avoids).
//!
//! On `UnitFilesChanged` and after a reload, the unit file state of each
//! managed unit is read (one question each, only then) and compared with
//! the last one seen: only the units whose state moved wake their policies.
//!
//! A lost connection is made again, and systemd coming back on the bus
//! (`daemon-reexec`) is subscribed to again; both are a wake for
//! everything, as events may have been missed meanwhile.
//!
//! This is the watch's own connection, read-only: the provider's changes
//! go over the run's connection.
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

use super::wake::Wake;
use crate::provider::unit_name::object_path;

const SYSTEMD: &str = "org.freedesktop.systemd1";
const MANAGER_PATH: &str = "/org/freedesktop/systemd1";
const MANAGER: &str = "org.freedesktop.systemd1.Manager";
const UNIT: &str = "org.freedesktop.systemd1.Unit";
const PROPERTIES: &str = "org.freedesktop.DBus.Properties";
/// The bus itself: the sender of `NameOwnerChanged`.
const BUS: &str = "org.freedesktop.DBus";
/// How long one question to the bus may take.
const TIMEOUT: Duration = Duration::from_secs(5);
/// How long between attempts to reach the bus again.
const RETRY: Duration = Duration::from_millis(250);

/// The handle of the bus thread: tells it which units to follow.
pub(crate) struct BusWatch {
    units: tokio::sync::watch::Sender<BTreeSet<String>>,
    dropped: Arc<AtomicU64>,
}

impl BusWatch {
    /// Starts the bus thread; wakes go to `wakes`.
    pub(crate) fn start(wakes: Sender<Wake>) -> std::io::Result<Self> {
        let (units, followed) = tokio::sync::watch::channel(BTreeSet::new());
        let dropped = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&dropped);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        std::thread::Builder::new()
            .name("bus-watch".into())
            .spawn(move || runtime.block_on(follow(followed, wakes, counted)))?;
        Ok(Self { units, dropped })
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

/// The bus thread: connects, follows, and connects again when the
/// connection is lost, until the watch ends.
async fn follow(
    mut followed: tokio::sync::watch::Receiver<BTreeSet<String>>,
    wakes: Sender<Wake>,
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
                        .send(Wake::Missed("the system bus came back"))
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
            manager_signal("UnitFilesChanged")?,
            manager_signal("Reloading")?,
            zbus::MatchRule::builder()
                .msg_type(zbus::message::Type::Signal)
                .sender(BUS)
                .interface(BUS)
                .member("NameOwnerChanged")
                .arg(0, SYSTEMD)
                .build()?,
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
                "/org/freedesktop/DBus",
                Some(BUS),
                "GetNameOwner",
                &(SYSTEMD,),
            )
            .await;
        match reply {
            Ok(reply) => Ok(Some(reply.body().deserialize::<String>()?)),
            Err(zbus::Error::MethodError(name, _, _))
                if name.as_str() == "org.freedesktop.DBus.Error.NameHasNoOwner" =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Asks the bus to deliver the signals `rule` matches.
    async fn add_match(&self, rule: &zbus::MatchRule<'_>) -> zbus::Result<()> {
        self.bus_call("AddMatch", rule).await
    }

    async fn remove_match(&self, rule: &zbus::MatchRule<'_>) -> zbus::Result<()> {
        self.bus_call("RemoveMatch", rule).await
    }

    async fn bus_call(&self, method: &str, rule: &zbus::MatchRule<'_>) -> zbus::Result<()> {
        self.connection
            .call_method(
                Some(BUS),
                "/org/freedesktop/DBus",
                Some(BUS),
                method,
                &(rule.to_string(),),
            )
            .await
            .map(drop)
    }

    /// Asks systemd to send unit signals (per client; lost when systemd
    /// is re-executed).
    async fn subscribe(&self) -> zbus::Result<()> {
        self.connection
            .call_method(Some(SYSTEMD), MANAGER_PATH, Some(MANAGER), "Subscribe", &())
            .await
            .map(drop)
    }

    async fn run(
        &mut self,
        followed: &mut tokio::sync::watch::Receiver<BTreeSet<String>>,
        wakes: &Sender<Wake>,
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
                    for wake in self.read(&message).await {
                        if wakes.send(wake).is_err() {
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
            self.remove_match(&unit_rule(&path)?).await?;
        }
        for (path, unit) in wanted {
            if self.paths.contains_key(&path) {
                continue;
            }
            self.add_match(&unit_rule(&path)?).await?;
            let state = self.file_state(&unit).await;
            self.file_states.insert(unit.clone(), state);
            self.paths.insert(path, unit);
        }
        Ok(())
    }

    /// A unit's `UnitFileState` ("" when systemd has no file for it).
    async fn file_state(&self, unit: &str) -> String {
        let reply = self
            .connection
            .call_method(
                Some(SYSTEMD),
                MANAGER_PATH,
                Some(MANAGER),
                "GetUnitFileState",
                &(unit,),
            )
            .await;
        reply
            .ok()
            .and_then(|reply| reply.body().deserialize::<String>().ok())
            .unwrap_or_default()
    }

    /// The wakes one message makes: none for a signal that systemd (or,
    /// for `NameOwnerChanged`, the bus) did not send.
    async fn read(&mut self, message: &zbus::Message) -> Vec<Wake> {
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
            (PROPERTIES, "PropertiesChanged") => {
                let Some(unit) = self.paths.get(&path) else {
                    return Vec::new();
                };
                type Changed = (String, HashMap<String, zbus::OwnedVariant>, Vec<String>);
                let Ok((changed_interface, changed, invalidated)) =
                    message.body().deserialize::<Changed>()
                else {
                    return Vec::new();
                };
                let moved = |name: &str| {
                    changed.contains_key(name) || invalidated.iter().any(|i| i == name)
                };
                if changed_interface == UNIT && (moved("ActiveState") || moved("SubState")) {
                    vec![Wake::Unit(unit.clone())]
                } else {
                    Vec::new()
                }
            }
            (MANAGER, "UnitFilesChanged") => self.file_states_moved().await,
            (MANAGER, "Reloading") => match message.body().deserialize::<bool>() {
                // The reload's end: the files systemd reads may differ.
                Ok(false) => {
                    let mut wakes = self.file_states_moved().await;
                    if wakes.is_empty() {
                        wakes.push(Wake::Reloaded);
                    }
                    wakes
                }
                _ => Vec::new(),
            },
            (BUS, "NameOwnerChanged") => {
                match message.body().deserialize::<(String, String, String)>() {
                    Ok((name, _, new_owner)) if name == SYSTEMD && new_owner.is_empty() => {
                        self.systemd = None;
                        Vec::new()
                    }
                    Ok((name, _, new_owner)) if name == SYSTEMD => {
                        self.systemd = Some(new_owner);
                        // systemd keeps its subscribers across a re-execution;
                        // a new systemd process needs asking again.
                        match self.subscribe().await {
                            Err(zbus::Error::MethodError(name, _, _))
                                if name.as_str()
                                    == "org.freedesktop.systemd1.AlreadySubscribed" => {}
                            Err(e) => tracing::warn!("subscribing to systemd again failed: {e}"),
                            Ok(()) => {}
                        }
                        vec![Wake::Missed("systemd came back on the bus")]
                    }
                    _ => Vec::new(),
                }
            }
            _ => Vec::new(),
        }
    }

    /// The units whose unit file state moved since last seen.
    async fn file_states_moved(&mut self) -> Vec<Wake> {
        let units: Vec<String> = self.paths.values().cloned().collect();
        let mut wakes = Vec::new();
        for unit in units {
            let state = self.file_state(&unit).await;
            if self.file_states.get(&unit) != Some(&state) {
                self.file_states.insert(unit.clone(), state);
                wakes.push(Wake::Unit(unit));
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
        (BUS, "NameOwnerChanged") => sender == Some(BUS),
        _ => sender.is_some() && sender == systemd,
    }
}

fn manager_signal(member: &'static str) -> zbus::Result<zbus::MatchRule<'static>> {
    zbus::MatchRule::builder()
        .msg_type(zbus::message::Type::Signal)
        .sender(SYSTEMD)
        .path(MANAGER_PATH)
        .interface(MANAGER)
        .member(member)
        .build()
}

fn unit_rule(path: &str) -> zbus::Result<zbus::MatchRule<'static>> {
    zbus::MatchRule::builder()
        .msg_type(zbus::message::Type::Signal)
        .sender(SYSTEMD)
        .path(path.to_owned())
        .interface(PROPERTIES)
        .member("PropertiesChanged")
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_systemds_unique_name_wakes_and_only_the_bus_says_who_systemd_is() {
        let systemd = Some(":1.3");
        let unit = (PROPERTIES, "PropertiesChanged");
        let reloading = (MANAGER, "Reloading");
        let owner = (BUS, "NameOwnerChanged");
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
