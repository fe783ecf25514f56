//! Unit names as `systemctl` 252 turns them into the names systemd knows,
//! and object paths as systemd's bus API names units: so that status read
//! over D-Bus asks about exactly the unit `systemctl is-active NAME` would.
//!
//! From systemd's `unit_name_mangle_with_suffix` (src/basic/unit-name.c): a
//! valid unit name is used as it is; otherwise `/` becomes `-`, every
//! character outside `[A-Za-z0-9:_.\]` becomes `\xNN`, and `.service` is
//! appended when the result has no unit type. And from `bus_label_escape`
//! (src/basic/bus-label.c): an object path element keeps `[A-Za-z0-9]`
//! (a leading digit excepted) and writes every other byte as `_xx`.

/// systemd's valid characters in a unit name, before the type suffix.
fn is_valid_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b':' | b'-' | b'_' | b'.' | b'\\')
}

/// Whether `name` ends with a known unit type (`unit_name_to_type`).
fn has_unit_type(name: &str) -> bool {
    contract_words::unit_type(name).is_some()
}

/// `unit_name_is_valid(name, UNIT_NAME_ANY)`: a prefix of valid characters
/// (and at most one template `@`, not first), a known type, shorter than 256.
fn is_valid(name: &str) -> bool {
    if name.is_empty() || name.len() >= 256 {
        return false;
    }
    let Some((prefix, suffix)) = name.rsplit_once('.') else {
        return false;
    };
    if prefix.is_empty() || !contract_words::UNIT_TYPES.contains(&suffix) {
        return false;
    }
    let bytes = prefix.as_bytes();
    if bytes[0] == b'@' {
        return false;
    }
    bytes.iter().all(|&c| is_valid_char(c) || c == b'@')
}

/// The unit `systemctl` asks systemd about for `name`; `None` when
/// systemctl would refuse the name ("Failed to mangle unit name").
pub(crate) fn mangle(name: &str) -> Option<String> {
    if is_valid(name) {
        return Some(name.to_owned());
    }
    let mut mangled = String::with_capacity(name.len() * 4 + 8);
    for &c in name.as_bytes() {
        if c == b'/' {
            mangled.push('-');
        } else if is_valid_char(c) {
            mangled.push(char::from(c));
        } else {
            mangled.push_str(&format!("\\x{c:02x}"));
        }
    }
    if !has_unit_type(&mangled) {
        mangled.push_str(".service");
    }
    is_valid(&mangled).then_some(mangled)
}

/// The object path of `unit` in systemd's bus API.
pub(crate) fn object_path(unit: &str) -> String {
    let mut path = format!("{}/", crate::provider::systemd::words::dbus::UNIT_PATHS);
    if unit.is_empty() {
        path.push('_');
    }
    for (i, &c) in unit.as_bytes().iter().enumerate() {
        if c.is_ascii_alphabetic() || (c.is_ascii_digit() && i > 0) {
            path.push(char::from(c));
        } else {
            path.push_str(&format!("_{c:02x}"));
        }
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_mangled_as_systemctl_does() {
        assert_eq!(mangle("web").as_deref(), Some("web.service"));
        assert_eq!(mangle("web.service").as_deref(), Some("web.service"));
        assert_eq!(mangle("dbus.socket").as_deref(), Some("dbus.socket"));
        assert_eq!(mangle("a.b").as_deref(), Some("a.b.service"));
        assert_eq!(mangle("a+b").as_deref(), Some("a\\x2bb.service"));
        assert_eq!(mangle("x~y.service").as_deref(), Some("x\\x7ey.service"));
        assert_eq!(
            mangle("getty@tty1.service").as_deref(),
            Some("getty@tty1.service")
        );
        assert_eq!(mangle(".service"), None);
        assert_eq!(mangle(&"a".repeat(250)), None);
    }

    #[test]
    fn object_paths_are_escaped_as_systemd_does() {
        assert_eq!(
            object_path("dbus.service"),
            "/org/freedesktop/systemd1/unit/dbus_2eservice"
        );
        assert_eq!(
            object_path("a\\x2bb.service"),
            "/org/freedesktop/systemd1/unit/a_5cx2bb_2eservice"
        );
        assert_eq!(
            object_path("1web-a.service"),
            "/org/freedesktop/systemd1/unit/_31web_2da_2eservice"
        );
    }
}
