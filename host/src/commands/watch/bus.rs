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

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::mpsc::Sender;
use std::time::Duration;

use futures_core::Stream;

use super::wake::Wake;
use crate::provider::unit_name::object_path;

const SYSTEMD: &str = "org.freedesktop.systemd1";
const MANAGER_PATH: &str = "/org/freedesktop/systemd1";
const MANAGER: &str = "org.freedesktop.systemd1.Manager";
const UNIT: &str = "org.freedesktop.systemd1.Unit";
const PROPERTIES: &str = "org.freedesktop.DBus.Properties";
/// How long one question to the bus may take.
const TIMEOUT: Duration = Duration::from_secs(5);
/// How long between attempts to reach the bus again.
const RETRY: Duration = Duration::from_millis(250);

/// The handle of the bus thread: tells it which units to follow.
pub(crate) struct BusWatch {
    units: tokio::sync::watch::Sender<BTreeSet<String>>,
}

impl BusWatch {
    /// Starts the bus thread; wakes go to `wakes`.
    pub(crate) fn start(wakes: Sender<Wake>) -> std::io::Result<Self> {
        let (units, followed) = tokio::sync::watch::channel(BTreeSet::new());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        std::thread::Builder::new()
            .name("bus-watch".into())
            .spawn(move || runtime.block_on(follow(followed, wakes)))?;
        Ok(Self { units })
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
async fn follow(mut followed: tokio::sync::watch::Receiver<BTreeSet<String>>, wakes: Sender<Wake>) {
    let mut connected_before = false;
    let mut said = false;
    loop {
        match Following::connect().await {
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
}

impl Following {
    async fn connect() -> zbus::Result<Self> {
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
        let following = Self {
            connection,
            messages,
            drain,
            paths: BTreeMap::new(),
            file_states: HashMap::new(),
        };
        for rule in [
            manager_signal("UnitFilesChanged")?,
            manager_signal("Reloading")?,
            zbus::MatchRule::builder()
                .msg_type(zbus::message::Type::Signal)
                .sender("org.freedesktop.DBus")
                .interface("org.freedesktop.DBus")
                .member("NameOwnerChanged")
                .arg(0, SYSTEMD)
                .build()?,
        ] {
            following.add_match(&rule).await?;
        }
        following.subscribe().await?;
        Ok(following)
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
                Some("org.freedesktop.DBus"),
                "/org/freedesktop/DBus",
                Some("org.freedesktop.DBus"),
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

    /// The wakes one message makes.
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
            ("org.freedesktop.DBus", "NameOwnerChanged") => {
                match message.body().deserialize::<(String, String, String)>() {
                    Ok((name, _, new_owner)) if name == SYSTEMD && !new_owner.is_empty() => {
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
