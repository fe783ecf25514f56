//! The resources policies name (`service#web`, `file#/etc/app.conf`,
//! `package#nginx`), parsed once where the host takes them from a guest and
//! carried as typed values from there on: nobody matches `"service#"` in a
//! string again, and the unit a service names is mangled once, as systemd
//! reads it ([`UnitName`]).

use std::fmt;

use serde::{Serialize, Serializer};

use crate::service_name::CheckedName;

/// The kinds of resource a reference can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// `service#NAME`: a systemd unit (a service unless NAME says another type).
    Service,
    /// `file#PATH`: what a reader of PATH sees.
    File,
    /// `package#NAME`: a package in dpkg's database.
    Package,
}

impl Kind {
    /// The word before `#`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Service => "service",
            Kind::File => "file",
            Kind::Package => "package",
        }
    }

    fn of(word: &str) -> Option<Self> {
        [Kind::Service, Kind::File, Kind::Package]
            .into_iter()
            .find(|k| k.as_str() == word)
    }
}

/// `KIND#NAME`, parsed: a service's name is checked ([`CheckedName`]); a
/// file's or package's is kept as written (their readers check them against
/// `watch_paths` and dpkg's database).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceRef {
    kind: Kind,
    name: String,
}

/// Why a text is not a resource the host knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BadRef {
    /// Not `KIND#NAME` with a kind the host knows.
    UnknownKind,
    /// `service#NAME` with a name systemd would not take (why).
    ServiceName(String),
    /// Nothing after `#`.
    EmptyName,
}

impl ResourceRef {
    /// Parses `KIND#NAME`.
    pub fn parse(text: &str) -> Result<Self, BadRef> {
        let (kind, name) = text
            .split_once('#')
            .and_then(|(kind, name)| Some((Kind::of(kind)?, name)))
            .ok_or(BadRef::UnknownKind)?;
        if name.is_empty() {
            return Err(BadRef::EmptyName);
        }
        if kind == Kind::Service {
            CheckedName::check(name).map_err(BadRef::ServiceName)?;
        }
        Ok(Self {
            kind,
            name: name.to_owned(),
        })
    }

    /// Parses `service#NAME`, and nothing else.
    pub fn parse_service(text: &str) -> Result<Self, BadRef> {
        let parsed = Self::parse(text)?;
        match parsed.kind {
            Kind::Service => Ok(parsed),
            Kind::File | Kind::Package => Err(BadRef::UnknownKind),
        }
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// What follows `#`, as written.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The unit a `service#NAME` names, as systemd reads it (`web` →
    /// `web.service`); `None` for another kind.
    pub fn unit(&self) -> Option<UnitName> {
        match self.kind {
            Kind::Service => UnitName::of(&self.name),
            Kind::File | Kind::Package => None,
        }
    }

    /// Whether two references name one unit (`service#web`,
    /// `service#web.service`), or are the same reference.
    pub fn same_unit(&self, other: &ResourceRef) -> bool {
        self == other || self.unit().is_some_and(|u| Some(u) == other.unit())
    }
}

impl fmt::Display for ResourceRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.kind.as_str(), self.name)
    }
}

/// As written: `"service#web"`.
impl Serialize for ResourceRef {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Read back as written, checked again: the machine's state holds them.
impl<'de> serde::Deserialize<'de> for ResourceRef {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Self::parse(&text)
            .map_err(|e| serde::de::Error::custom(format!("not a resource ({e:?}): {text}")))
    }
}

impl PartialEq<str> for ResourceRef {
    fn eq(&self, other: &str) -> bool {
        other
            .split_once('#')
            .is_some_and(|(kind, name)| kind == self.kind.as_str() && name == self.name)
    }
}

impl PartialEq<&str> for ResourceRef {
    fn eq(&self, other: &&str) -> bool {
        self == *other
    }
}

/// A unit as systemd names it (`web.service`, `a\x2bb.service`): the name a
/// policy wrote, mangled as `systemctl` mangles it, once.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UnitName(String);

impl UnitName {
    /// The unit systemd reads for `name`; `None` when systemctl would refuse
    /// the name ("Failed to mangle unit name").
    pub fn of(name: &str) -> Option<Self> {
        crate::provider::unit_name::mangle(name).map(Self)
    }

    /// The unit of a checked service name.
    pub fn of_checked(name: &CheckedName) -> Option<Self> {
        Self::of(name.as_str())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for UnitName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// For tests: a reference that must parse.
#[cfg(test)]
impl From<&str> for ResourceRef {
    fn from(text: &str) -> Self {
        Self::parse(text).expect("a valid reference in a test")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_parse_once_into_their_kind_and_name() {
        let web = ResourceRef::parse("service#web").unwrap();
        assert_eq!((web.kind(), web.name()), (Kind::Service, "web"));
        assert_eq!(web.to_string(), "service#web");
        assert_eq!(web.unit().unwrap().as_str(), "web.service");
        let conf = ResourceRef::parse("file#/etc/app.conf").unwrap();
        assert_eq!((conf.kind(), conf.name()), (Kind::File, "/etc/app.conf"));
        assert_eq!(conf.unit(), None);
        assert_eq!(
            ResourceRef::parse("package#nginx").unwrap().kind(),
            Kind::Package
        );
        assert_eq!(ResourceRef::parse("web"), Err(BadRef::UnknownKind));
        assert_eq!(ResourceRef::parse("socket#web"), Err(BadRef::UnknownKind));
        assert_eq!(ResourceRef::parse("file#"), Err(BadRef::EmptyName));
        assert!(matches!(
            ResourceRef::parse("service#-rf"),
            Err(BadRef::ServiceName(_))
        ));
        assert_eq!(
            ResourceRef::parse_service("file#/etc/x"),
            Err(BadRef::UnknownKind)
        );
        assert!(web == *"service#web");
        assert!(web != *"service#db");
    }

    #[test]
    fn one_unit_under_two_spellings_is_one_unit() {
        let short = ResourceRef::parse("service#web").unwrap();
        let long = ResourceRef::parse("service#web.service").unwrap();
        assert!(short.same_unit(&long));
        assert!(!short.same_unit(&ResourceRef::parse("service#db").unwrap()));
        assert_eq!(
            UnitName::of("a+b").map(UnitName::into_string).as_deref(),
            Some("a\\x2bb.service")
        );
        assert_eq!(
            serde_json::to_string(&long).unwrap(),
            "\"service#web.service\""
        );
    }
}
