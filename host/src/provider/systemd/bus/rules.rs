//! The match rules the host adds on the system bus, made here for every
//! connection that asks for signals: the run's (`jobs`, `unit_signals`) and
//! the one that follows managed units for a watch (`follow`). A signal is
//! delivered only when a rule asks for it; each rule names its sender.

use super::super::words::dbus::{
    member, BUS, MANAGER, MANAGER_PATH, PROPERTIES, SYSTEMD, UNIT_PATHS,
};

/// Where a `PropertiesChanged` rule listens.
pub(crate) enum UnitPaths<'a> {
    /// One unit's object path.
    One(&'a str),
    /// Every unit's (`path_namespace`).
    All,
}

/// A signal of systemd's manager (`JobRemoved`, `UnitFilesChanged`,
/// `Reloading`).
pub(crate) fn manager_signal(signal: &'static str) -> zbus::Result<zbus::MatchRule<'static>> {
    zbus::MatchRule::builder()
        .msg_type(zbus::message::Type::Signal)
        .sender(SYSTEMD)
        .path(MANAGER_PATH)
        .interface(MANAGER)
        .member(signal)
        .build()
}

/// `PropertiesChanged` of a unit, or of every unit.
pub(crate) fn unit_properties(paths: UnitPaths<'_>) -> zbus::Result<zbus::MatchRule<'static>> {
    let rule = zbus::MatchRule::builder()
        .msg_type(zbus::message::Type::Signal)
        .sender(SYSTEMD)
        .interface(PROPERTIES)
        .member(member::PROPERTIES_CHANGED);
    match paths {
        UnitPaths::One(path) => rule.path(path.to_owned()),
        UnitPaths::All => rule.path_namespace(UNIT_PATHS),
    }
    .build()
}

/// The bus's `NameOwnerChanged` for systemd's name: systemd leaving the
/// bus, or coming back with a new unique name.
pub(crate) fn systemd_owner_changed() -> zbus::Result<zbus::MatchRule<'static>> {
    zbus::MatchRule::builder()
        .msg_type(zbus::message::Type::Signal)
        .sender(BUS)
        .interface(BUS)
        .member(member::NAME_OWNER_CHANGED)
        .arg(0, SYSTEMD)
        .build()
}
