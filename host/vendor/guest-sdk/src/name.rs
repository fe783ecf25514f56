//! Service names, checked once at the boundary.
//!
//! A name ends up as an argument of `systemctl`, so it is held to the
//! design's allowlist (docs/service-type.md, "Service names"): ASCII letters
//! and digits plus `. _ + : ~ -`. A leading `-` is refused as well, because
//! systemctl would read it as an option. The host applies the same rules
//! again on its side: it never trusts a guest.
//!
//! Names are compared as systemd compares them ([`unit_name`]): `web` and
//! `web.service` are one unit. A policy still sends each name as declared.

use std::borrow::Cow;
use std::fmt;

use thiserror::Error;

/// The longest name accepted, in bytes (systemd's own unit-name limit).
pub const MAX_SERVICE_NAME_LEN: usize = 255;

/// Why a service name was rejected. Every variant quotes the name.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NameError {
    /// The name is empty.
    #[error("invalid service name {0:?}: the name is empty")]
    Empty(String),
    /// The name is longer than [`MAX_SERVICE_NAME_LEN`] bytes.
    #[error("invalid service name {name:?}: {len} bytes is longer than the limit of {MAX_SERVICE_NAME_LEN}")]
    TooLong {
        /// The name as given.
        name: String,
        /// Its length in bytes.
        len: usize,
    },
    /// The name starts with `-`, which `systemctl` would read as an option.
    #[error(
        "invalid service name {0:?}: it starts with '-', which systemctl would read as an option"
    )]
    LeadingDash(String),
    /// The name holds a character systemd does not allow in unit names.
    #[error("invalid service name {name:?}: character {character:?} is not allowed (allowed: a-z A-Z 0-9 . _ + : ~ -)")]
    ForbiddenCharacter {
        /// The name as given.
        name: String,
        /// The first character that is not allowed.
        character: char,
    },
}

/// The unit types of systemd 252, as unit-name suffixes spell them.
pub use contract_words::UNIT_TYPES;

/// The unit `name` stands for, as systemctl reads it: a name whose suffix
/// (after the last `.`) is not one of the [`UNIT_TYPES`] gets `.service`
/// (`web` → `web.service`, `a.b` → `a.b.service`, `web.socket` stays). Two
/// names with the same unit name are the same unit.
pub fn unit_name(name: &str) -> Cow<'_, str> {
    match name.rsplit_once('.') {
        Some((stem, _)) if !stem.is_empty() && contract_words::unit_type(name).is_some() => {
            Cow::Borrowed(name)
        }
        _ => Cow::Owned(format!("{name}.service")),
    }
}

/// True for the characters the design allows in a service name.
pub fn is_allowed_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | ':' | '~' | '-')
}

/// A service name that passed validation.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServiceName(String);

impl ServiceName {
    /// Validates `name`; the error says exactly what is wrong with it.
    pub fn parse(name: &str) -> Result<Self, NameError> {
        if name.is_empty() {
            return Err(NameError::Empty(name.to_owned()));
        }
        let len = name.len();
        if len > MAX_SERVICE_NAME_LEN {
            return Err(NameError::TooLong {
                name: name.to_owned(),
                len,
            });
        }
        if let Some(character) = name.chars().find(|c| !is_allowed_name_char(*c)) {
            return Err(NameError::ForbiddenCharacter {
                name: name.to_owned(),
                character,
            });
        }
        if name.starts_with('-') {
            return Err(NameError::LeadingDash(name.to_owned()));
        }
        Ok(Self(name.to_owned()))
    }

    /// The name as the policy wrote it (`web` or `web.service`).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The unit this name stands for ([`unit_name`]): `web` → `web.service`.
    pub fn unit_name(&self) -> Cow<'_, str> {
        unit_name(&self.0)
    }
}

impl fmt::Display for ServiceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_examples_are_classified_as_documented() {
        for valid in ["httpd", "nginx.service", "my-app_v2"] {
            assert!(ServiceName::parse(valid).is_ok(), "{valid} should be valid");
        }
        for invalid in ["app@instance", "app; rm -rf /"] {
            assert!(
                ServiceName::parse(invalid).is_err(),
                "{invalid} should be rejected"
            );
        }
    }

    #[test]
    fn unit_names_get_service_unless_they_have_a_unit_type_suffix() {
        for (name, unit) in [
            ("web", "web.service"),
            ("web.service", "web.service"),
            ("web.socket", "web.socket"),
            ("web.timer", "web.timer"),
            ("ssh.automount", "ssh.automount"),
            ("a.b_c", "a.b_c.service"),
            ("web.Service", "web.Service.service"),
            ("web.service.d", "web.service.d.service"),
            ("my.app.target", "my.app.target"),
            (".service", ".service.service"),
        ] {
            assert_eq!(unit_name(name), unit, "{name}");
        }
        let name = ServiceName::parse("web").unwrap();
        assert_eq!(name.unit_name(), "web.service");
        assert_eq!(name.as_str(), "web", "the name itself is kept as declared");
    }

    #[test]
    fn every_allowed_punctuation_character_is_accepted() {
        let name = ServiceName::parse("a.b_c+d:e~f-g0Z").unwrap();
        assert_eq!(name.as_str(), "a.b_c+d:e~f-g0Z");
    }

    #[test]
    fn error_quotes_the_name_and_the_character() {
        let err = ServiceName::parse("app@instance").unwrap_err();
        assert_eq!(
            err,
            NameError::ForbiddenCharacter {
                name: "app@instance".into(),
                character: '@'
            }
        );
        let message = err.to_string();
        assert!(message.contains("\"app@instance\""), "{message}");
        assert!(message.contains("'@'"), "{message}");
    }

    #[test]
    fn leading_dash_is_rejected_because_systemctl_reads_options() {
        for name in ["-H", "--root=/", "--help", "-"] {
            let err = ServiceName::parse(name).unwrap_err();
            assert!(
                matches!(
                    err,
                    NameError::LeadingDash(_) | NameError::ForbiddenCharacter { .. }
                ),
                "{name}: {err:?}"
            );
        }
        assert_eq!(
            ServiceName::parse("--help").unwrap_err(),
            NameError::LeadingDash("--help".into())
        );
    }

    #[test]
    fn whitespace_slashes_and_shell_metacharacters_are_rejected() {
        for name in [
            "a b",
            "a\tb",
            "a\nb",
            "../../x",
            "/etc",
            "a|b",
            "a&b",
            "$(reboot)",
            "`id`",
            "a>b",
            "a\0b",
            "caf\u{e9}",
            "a'b",
            "a\"b",
            "a*b",
            "a?b",
        ] {
            assert!(
                matches!(
                    ServiceName::parse(name),
                    Err(NameError::ForbiddenCharacter { .. })
                ),
                "{name:?} should be rejected for a forbidden character"
            );
        }
    }

    #[test]
    fn empty_and_overlong_names_are_rejected() {
        assert_eq!(ServiceName::parse(""), Err(NameError::Empty(String::new())));
        assert!(ServiceName::parse(&"a".repeat(255)).is_ok());
        assert!(matches!(
            ServiceName::parse(&"a".repeat(256)),
            Err(NameError::TooLong { len: 256, .. })
        ));
    }
}
