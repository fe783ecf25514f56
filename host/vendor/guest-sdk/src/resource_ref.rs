//! `type#name` references, as used by `subscribe` and `host run --refresh`.

use std::fmt;

use thiserror::Error;

/// Why a `type#name` reference was rejected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RefError {
    /// There is no `#` between a type and a name.
    #[error(
        "invalid resource reference {0:?}: expected TYPE#NAME, for example file#/etc/app.conf"
    )]
    MissingSeparator(String),
    /// The type is not lowercase letters, digits and `_`, starting with a letter.
    #[error("invalid resource reference {0:?}: the type before '#' must be lowercase letters, digits or '_', starting with a letter")]
    BadType(String),
    /// Nothing follows the `#`.
    #[error("invalid resource reference {0:?}: the name after '#' is empty")]
    EmptyName(String),
    /// The name holds a control character.
    #[error("invalid resource reference {0:?}: the name contains a control character")]
    ControlCharacter(String),
}

/// A reference to a resource: its type (`service`, `file`, `package`, ...) and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceRef {
    kind: String,
    name: String,
}

impl ResourceRef {
    /// Parses `type#name`. Only the first `#` separates: names may contain `#`.
    pub fn parse(text: &str) -> Result<Self, RefError> {
        let (kind, name) = text
            .split_once('#')
            .ok_or_else(|| RefError::MissingSeparator(text.to_owned()))?;
        let mut kind_chars = kind.chars();
        let type_ok = kind_chars.next().is_some_and(|c| c.is_ascii_lowercase())
            && kind_chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !type_ok {
            return Err(RefError::BadType(text.to_owned()));
        }
        if name.is_empty() {
            return Err(RefError::EmptyName(text.to_owned()));
        }
        if name.chars().any(char::is_control) {
            return Err(RefError::ControlCharacter(text.to_owned()));
        }
        Ok(Self {
            kind: kind.to_owned(),
            name: name.to_owned(),
        })
    }

    /// The reference to the service resource named `name`.
    pub fn service(name: &str) -> Self {
        Self {
            kind: "service".to_owned(),
            name: name.to_owned(),
        }
    }

    /// The reference as resources are compared: a `service` reference names
    /// its unit ([`crate::name::unit_name`]), so `service#web` and
    /// `service#web.service` are the same; other types are kept as written.
    pub fn key(&self) -> Self {
        if self.kind == "service" {
            Self::service(&crate::name::unit_name(&self.name))
        } else {
            self.clone()
        }
    }

    /// The type, before the `#` (`file`).
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The name, after the `#` (`/etc/app.conf`).
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl fmt::Display for ResourceRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.kind, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_type_and_name_at_the_first_hash() {
        let r = ResourceRef::parse("file#/etc/httpd/conf/httpd.conf").unwrap();
        assert_eq!((r.kind(), r.name()), ("file", "/etc/httpd/conf/httpd.conf"));
        let r = ResourceRef::parse("file#/tmp/a#b").unwrap();
        assert_eq!(r.name(), "/tmp/a#b");
        assert_eq!(r.to_string(), "file#/tmp/a#b");
    }

    #[test]
    fn service_references_are_compared_by_unit_name() {
        let key = |text: &str| ResourceRef::parse(text).unwrap().key();
        assert_eq!(key("service#web"), key("service#web.service"));
        assert_eq!(key("service#web").to_string(), "service#web.service");
        assert_ne!(key("service#web"), key("service#web.socket"));
        // Only services name units; a file is its path.
        assert_eq!(key("file#/etc/web").to_string(), "file#/etc/web");
        assert_ne!(key("file#web"), key("file#web.service"));
    }

    #[test]
    fn rejects_malformed_references_with_the_reason() {
        assert_eq!(
            ResourceRef::parse("httpd"),
            Err(RefError::MissingSeparator("httpd".into()))
        );
        assert_eq!(
            ResourceRef::parse("#httpd"),
            Err(RefError::BadType("#httpd".into()))
        );
        assert_eq!(
            ResourceRef::parse("File#x"),
            Err(RefError::BadType("File#x".into()))
        );
        assert_eq!(
            ResourceRef::parse("service#"),
            Err(RefError::EmptyName("service#".into()))
        );
        assert_eq!(
            ResourceRef::parse("service#a\nb"),
            Err(RefError::ControlCharacter("service#a\nb".into()))
        );
    }
}
