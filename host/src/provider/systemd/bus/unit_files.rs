//! Enabling and disabling over D-Bus: `Manager.EnableUnitFiles` and
//! `DisableUnitFiles`, what `systemctl enable` and `disable` call.
//!
//! systemd answers with the `changes` it made (`symlink`, `unlink`, ...). A
//! change it could not make is left out of that array, not raised as an
//! error, so the caller reads the array: an enable that made no link for a
//! unit that was not already enabled failed, and says so.

use std::time::Duration;

use super::super::words::dbus::{member, MANAGER, MANAGER_PATH, SYSTEMD};
use super::super::words::install_change;
use super::dbus::{DbusError, SystemdBus};

/// One entry of systemd's `changes` array.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, zbus::zvariant::Type)]
pub(crate) struct UnitFileChange {
    /// `symlink`, `unlink`, `is-masked`, `is-dangerous`, ...
    pub kind: String,
    /// The link (or file) changed.
    pub path: String,
    /// Where a new link points.
    pub destination: String,
}

impl UnitFileChange {
    /// Whether it made or removed a link (systemd 252 signals
    /// `UnitFilesChanged` for a call with such a change:
    /// `install_changes_have_modification`).
    pub(crate) fn moved_a_link(&self) -> bool {
        self.kind == install_change::SYMLINK || self.kind == install_change::UNLINK
    }
}

impl std::fmt::Display for UnitFileChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.destination.is_empty() {
            write!(f, "{} {}", self.kind, self.path)
        } else {
            write!(f, "{} {} -> {}", self.kind, self.path, self.destination)
        }
    }
}

/// What `EnableUnitFiles` answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Enabled {
    /// Whether the unit file has an `[Install]` section to carry out.
    pub carries_install_info: bool,
    pub changes: Vec<UnitFileChange>,
}

impl Enabled {
    /// Whether systemd made a link of `unit` (named by the link, or the
    /// unit file it points to): what enabling a unit that was not enabled
    /// must do. Links of other units (`Also=`) do not count.
    pub(crate) fn linked(&self, unit: &str) -> bool {
        let names = |path: &str| path.rsplit('/').next() == Some(unit);
        self.changes
            .iter()
            .any(|c| c.kind == install_change::SYMLINK && (names(&c.path) || names(&c.destination)))
    }
}

/// `EnableUnitFiles([unit], runtime = false, force = false)`.
pub(crate) fn enable(
    bus: &SystemdBus,
    unit: &str,
    timeout: Duration,
) -> Result<Enabled, DbusError> {
    let (carries_install_info, changes): (bool, Vec<UnitFileChange>) = bus.call(
        SYSTEMD,
        MANAGER_PATH,
        MANAGER,
        member::ENABLE_UNIT_FILES,
        &(vec![unit], false, false),
        timeout,
    )?;
    Ok(Enabled {
        carries_install_info,
        changes,
    })
}

/// `DisableUnitFiles([unit], runtime)`: with `runtime`, the links in
/// `/run` (`systemctl disable --runtime`).
pub(crate) fn disable(
    bus: &SystemdBus,
    unit: &str,
    runtime: bool,
    timeout: Duration,
) -> Result<Vec<UnitFileChange>, DbusError> {
    bus.call(
        SYSTEMD,
        MANAGER_PATH,
        MANAGER,
        member::DISABLE_UNIT_FILES,
        &(vec![unit], runtime),
        timeout,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(kind: &str, path: &str, destination: &str) -> UnitFileChange {
        UnitFileChange {
            kind: kind.into(),
            path: path.into(),
            destination: destination.into(),
        }
    }

    #[test]
    fn only_a_link_of_the_unit_itself_counts() {
        let wants = "/etc/systemd/system/multi-user.target.wants";
        let made = |changes| Enabled {
            carries_install_info: true,
            changes,
        };
        let own = change(
            "symlink",
            &format!("{wants}/web.service"),
            "/etc/systemd/system/web.service",
        );
        assert!(made(vec![own.clone()]).linked("web.service"));
        // An alias: the link has another name, it points to the unit.
        let alias = change(
            "symlink",
            "/etc/systemd/system/www.service",
            "/lib/systemd/system/web.service",
        );
        assert!(made(vec![alias]).linked("web.service"));
        // Only the Also= unit's link was made.
        let other = change(
            "symlink",
            &format!("{wants}/log.service"),
            "/etc/systemd/system/log.service",
        );
        assert!(!made(vec![other]).linked("web.service"));
        assert!(
            !made(vec![change("unlink", &format!("{wants}/web.service"), "")])
                .linked("web.service")
        );
        assert!(!made(Vec::new()).linked("web.service"));
        assert_eq!(
            own.to_string(),
            format!("symlink {wants}/web.service -> /etc/systemd/system/web.service")
        );
    }
}
