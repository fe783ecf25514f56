//! The manifest format (docs/service-type.md): YAML, or the same structure as JSON.
//!
//! ```yaml
//! - service:
//!     - httpd:
//!         ensure: running
//!         enable: true
//!         subscribe:
//!           - file#/etc/httpd/conf/httpd.conf
//! ```
//!
//! Errors name the field at fault and, for YAML and JSON syntax or type
//! problems, the line and column: the document is read by the same code as a
//! policy's settings ([`crate::settings`]).
//!
//! An entry, or a whole item (a group of entries), may say where it applies
//! with `when`: a mapping of fact names ([`crate::facts`]: `os.id`, `arch`,
//! `hostname`, or a label of host.toml such as `role`) to the value each
//! must have, exactly or as a shell-style pattern (`hostname: "web-*"`,
//! `?`, `[a-c]`). Every named fact must match, on the item and the entry;
//! an entry that does not match is left out, and the report says why. One
//! unit may have an entry per kind of machine (`app` stopped where `role:
//! db`, running where `role: web`): the entry left out then also says which
//! entry applies its unit here. A
//! fact name the machine does not have is an error, before anything is
//! applied, on every machine: a misspelt `when` never leaves a service out
//! silently.
//!
//! ```yaml
//! - service:
//!     - ssh:
//!     - nginx:
//!         when: { role: web }
//! - when: { os.id: debian, os.version_id: "12" }
//!   service:
//!     - php8.2-fpm:
//!         when: { role: web }
//! ```

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use thiserror::Error;

use crate::facts::Facts;
use crate::name::{unit_name, ServiceName};
use crate::policy::Policy;
use crate::resource_ref::ResourceRef;
use crate::service::{Ensure, Service};
use crate::settings::{field_at, parse_document, DocumentProblem};

/// Why a manifest could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ManifestError {
    /// Not YAML or JSON, or not the manifest's structure.
    #[error("manifest: {}{message}", path.as_deref().map(|p| format!("{p}: ")).unwrap_or_default())]
    Invalid {
        /// Where in the document the parser was (`[0].service[1].httpd`).
        path: Option<String>,
        /// The parser's message, with the position when it gives one.
        message: String,
        /// The 1-based line of the problem, when known.
        line: Option<usize>,
        /// The 1-based column of the problem, when known.
        column: Option<usize>,
    },
    /// Well-formed, but not a manifest (an entry with two names).
    #[error("manifest: {0}")]
    Structure(String),
}

impl ManifestError {
    /// The field at fault, as a path from the top of the document.
    pub fn field(&self) -> Option<String> {
        match self {
            ManifestError::Invalid { path, message, .. } => field_at(path.as_deref(), message),
            ManifestError::Structure(_) => None,
        }
    }

    /// The 1-based line of the problem, when the parser knows it.
    pub fn line(&self) -> Option<usize> {
        match self {
            ManifestError::Invalid { line, .. } => *line,
            ManifestError::Structure(_) => None,
        }
    }

    /// The 1-based column of the problem, when the parser knows it.
    pub fn column(&self) -> Option<usize> {
        match self {
            ManifestError::Invalid { column, .. } => *column,
            ManifestError::Structure(_) => None,
        }
    }
}

impl From<DocumentProblem> for ManifestError {
    fn from(p: DocumentProblem) -> Self {
        ManifestError::Invalid {
            path: p.path,
            message: p.message,
            line: p.line,
            column: p.column,
        }
    }
}

/// One list item of the manifest: a resource type and its resources.
///
/// A struct rather than an enum: YAML libraries read enums as `!tags`, while
/// the manifest format uses a plain one-key mapping. An unknown resource type is
/// then an unknown field, which serde names.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Block {
    service: Vec<BTreeMap<String, Option<ServiceProperties>>>,
    /// Where every entry of the item applies.
    #[serde(default)]
    when: When,
}

/// Fact names and the value (or pattern) each must have.
type When = BTreeMap<String, FactValue>;

/// A value of `when`: text, or a YAML integer or boolean read as the text
/// the host gives (`os.version_id: 12` is `"12"`). A number with a
/// fraction is refused: `12.10` would read as `12.1`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FactValue(String);

impl<'de> Deserialize<'de> for FactValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Text;
        impl Visitor<'_> for Text {
            type Value = FactValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a fact's value or pattern, as text")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<FactValue, E> {
                Ok(FactValue(v.to_owned()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<FactValue, E> {
                Ok(FactValue(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<FactValue, E> {
                Ok(FactValue(v.to_string()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<FactValue, E> {
                Ok(FactValue(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<FactValue, E> {
                Err(E::custom(format!(
                    "{v} is a number with a fraction, which may not read as written \
                     (12.10 is 12.1): quote the value"
                )))
            }
        }
        deserializer.deserialize_any(Text)
    }
}

/// The properties of one `name:` entry.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServiceProperties {
    #[serde(default)]
    ensure: Option<Ensure>,
    #[serde(default)]
    enable: Option<bool>,
    #[serde(default)]
    subscribe: Vec<String>,
    /// Where this entry applies.
    #[serde(default)]
    when: When,
}

/// Parses a manifest into a [`Policy`], for a machine without facts: an
/// entry with `when` is an error (its fact is not there). Text starting
/// with `[` or `{` is read as JSON, anything else as YAML. An empty
/// document is an empty policy.
pub fn parse_manifest(text: &str) -> Result<Policy, ManifestError> {
    parse_manifest_for(text, &Facts::default())
}

/// Parses a manifest into the [`Policy`] of the machine with `facts`
/// (`ctx.facts()`): the entries whose `when` matches are its services, the
/// others are left out ([`Policy::left_out`]) with the facts that did not
/// match, and, when another entry of the same unit applies here, which one
/// (`when role = db (this machine: web); app is applied here by item 1's
/// entry 2 (when role = web)`). Every `when` is checked, matching or not: a
/// fact name the machine does not have, or a pattern that is not one, is an
/// error.
pub fn parse_manifest_for(text: &str, facts: &Facts<'_>) -> Result<Policy, ManifestError> {
    let trimmed = text.trim_start();
    if trimmed.is_empty()
        || trimmed
            .lines()
            .all(|l| l.trim_start().starts_with('#') || l.trim().is_empty())
    {
        return Ok(Policy::new());
    }
    let blocks: Vec<Block> = parse_document(text)?;
    let mut policy = Policy::new();
    // The entries left out, noted once every entry applied here is known.
    let mut left_out: Vec<(String, String)> = Vec::new();
    // Where each unit applied here was declared: its unit, then the entry
    // as a left-out entry of the same unit names it.
    let mut applied: Vec<(String, String)> = Vec::new();
    for (index, block) in blocks.into_iter().enumerate() {
        let item = format!("item {} (service)", index + 1);
        let block_mismatches = mismatches(&block.when, facts, &item)?;
        for (position, entry) in block.service.into_iter().enumerate() {
            if entry.len() != 1 {
                let names: Vec<&str> = entry.keys().map(String::as_str).collect();
                return Err(ManifestError::Structure(format!(
                    "item {} (service): each entry must be one `name:` mapping, found {} keys {:?}; start each service with `- `",
                    index + 1,
                    entry.len(),
                    names
                )));
            }
            let (name, properties) = entry.into_iter().next().expect("one entry");
            let properties = properties.unwrap_or_default();
            let mut mismatched = block_mismatches.clone();
            mismatched.extend(mismatches(
                &properties.when,
                facts,
                &format!("{item}: {name}"),
            )?);
            if !mismatched.is_empty() {
                check_left_out(&name, &properties.subscribe)?;
                left_out.push((name, format!("when {}", mismatched.join(", "))));
                continue;
            }
            applied.push((
                unit_name(&name).into_owned(),
                format!(
                    "item {}'s entry {} ({})",
                    index + 1,
                    position + 1,
                    conditions(&block.when, &properties.when)
                ),
            ));
            let mut service = Service::new(name)
                .ensure(properties.ensure.unwrap_or_default())
                .enable_option(properties.enable);
            for reference in properties.subscribe {
                service = service.subscribe(reference);
            }
            policy.add(service);
        }
    }
    // One unit with an entry per kind of machine: the entry left out says
    // which one applies its unit here, so the report never reads as if the
    // unit were not applied.
    for (name, mut why) in left_out {
        let unit = unit_name(&name);
        if let Some((_, entry)) = applied.iter().find(|(u, _)| *u == unit) {
            why.push_str(&format!("; {name} is applied here by {entry}"));
        }
        policy.leave_out(&name, why);
    }
    Ok(policy)
}

/// The conditions an entry applied under, as a report says them: `when
/// role = web` (the item's, then the entry's), or `no when`.
fn conditions(item: &When, entry: &When) -> String {
    let all: Vec<String> = item
        .iter()
        .chain(entry)
        .map(|(name, FactValue(wanted))| format!("{name} = {wanted}"))
        .collect();
    if all.is_empty() {
        "no when".to_owned()
    } else {
        format!("when {}", all.join(", "))
    }
}

/// The conditions of `when` this machine does not meet, as the report says
/// them (`role = web (this machine: db)`); an error for a fact name it does
/// not have or a pattern that is not one. `at` says where `when` is.
fn mismatches(when: &When, facts: &Facts<'_>, at: &str) -> Result<Vec<String>, ManifestError> {
    let mut mismatched = Vec::new();
    for (name, FactValue(wanted)) in when {
        let Some(value) = facts.get(name) else {
            let known: Vec<&str> = facts.names().collect();
            return Err(ManifestError::Structure(format!(
                "{at}: when: `{name}` is not a fact of this machine (its facts: {})",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            )));
        };
        if !matches(wanted, value).map_err(|e| {
            ManifestError::Structure(format!(
                "{at}: when: {name}: {wanted:?} is not a pattern: {e}"
            ))
        })? {
            let value = if value.is_empty() { "unknown" } else { value };
            mismatched.push(format!("{name} = {wanted} (this machine: {value})"));
        }
    }
    Ok(mismatched)
}

/// Whether `value` is `wanted`, or matches it as a shell-style pattern when
/// it has one of `*?[`.
fn matches(wanted: &str, value: &str) -> Result<bool, glob::PatternError> {
    if wanted.contains(['*', '?', '[']) {
        Ok(glob::Pattern::new(wanted)?.matches(value))
    } else {
        Ok(wanted == value)
    }
}

/// An entry left out is checked as far as it can be without applying it
/// (its name, its references), so that a manifest that is wrong for one
/// kind of machine is wrong on all of them.
fn check_left_out(name: &str, subscribe: &[String]) -> Result<(), ManifestError> {
    let label = format!("service#{name}");
    ServiceName::parse(name).map_err(|e| ManifestError::Structure(format!("{label}: {e}")))?;
    for reference in subscribe {
        ResourceRef::parse(reference)
            .map_err(|e| ManifestError::Structure(format!("{label}: subscribe: {e}")))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = "\
- service:
    - httpd:
        ensure: running
        enable: true
        subscribe:
          - file#/etc/httpd/conf/httpd.conf
          - package#httpd
    - legacy:
        ensure: stopped
        enable: false
    - myapp:
";

    #[test]
    fn parses_the_documented_format_in_order() {
        let policy = parse_manifest(EXAMPLE).unwrap();
        let services = policy.services();
        assert_eq!(services.len(), 3);
        assert_eq!(services[0].name(), "httpd");
        assert_eq!(services[0].desired_ensure(), Ensure::Running);
        assert_eq!(services[0].desired_enable(), Some(true));
        assert_eq!(
            services[0].subscriptions(),
            ["file#/etc/httpd/conf/httpd.conf", "package#httpd"]
        );
        assert_eq!(services[1].desired_ensure(), Ensure::Stopped);
        assert_eq!(services[1].desired_enable(), Some(false));
        assert_eq!(services[2].name(), "myapp");
        assert_eq!(
            services[2].desired_ensure(),
            Ensure::Running,
            "ensure defaults to running"
        );
        assert_eq!(
            services[2].desired_enable(),
            None,
            "enable unset leaves boot config alone"
        );
    }

    #[test]
    fn json_with_the_same_structure_is_accepted() {
        let json = r#"[{"service": [{"httpd": {"ensure": "stopped", "enable": false}}]}]"#;
        let policy = parse_manifest(json).unwrap();
        assert_eq!(policy.services()[0].desired_ensure(), Ensure::Stopped);
        assert_eq!(policy.services()[0].desired_enable(), Some(false));
    }

    #[test]
    fn empty_document_is_an_empty_policy() {
        assert!(parse_manifest("").unwrap().services().is_empty());
        assert!(parse_manifest("# nothing yet\n")
            .unwrap()
            .services()
            .is_empty());
    }

    #[test]
    fn bad_ensure_value_names_field_and_line() {
        let error =
            parse_manifest("- service:\n    - httpd:\n        ensure: runing\n").unwrap_err();
        // The parser names the service; its message names the value and what was expected.
        assert_eq!(error.field().as_deref(), Some("[0].service[0].httpd"));
        assert_eq!(error.line(), Some(3));
        assert!(error.column().is_some());
        let err = error.to_string();
        assert!(
            err.contains("unknown variant `runing`, expected `running` or `stopped`"),
            "{err}"
        );
        assert!(err.contains("line 3"), "{err}");
    }

    #[test]
    fn json_type_error_names_field_line_and_column() {
        let error = parse_manifest(r#"[{"service": [{"httpd": {"enable": "yes"}}]}]"#).unwrap_err();
        assert_eq!(
            error.field().as_deref(),
            Some("[0].service[0].httpd.enable")
        );
        assert_eq!(error.line(), Some(1));
        assert!(error.column().is_some());
    }

    #[test]
    fn unknown_property_is_named() {
        let err = parse_manifest("- service:\n    - httpd:\n        ensur: running\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `ensur`"), "{err}");
        assert!(err.contains("line 3"), "{err}");
    }

    #[test]
    fn unsupported_resource_type_is_named() {
        let err = parse_manifest("- file:\n    - /etc/x:\n        ensure: present\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("unknown field `file`, expected `service`"),
            "{err}"
        );
        assert!(err.contains("line 1"), "{err}");
    }

    #[test]
    fn enable_must_be_a_boolean() {
        let err = parse_manifest("- service:\n    - httpd:\n        enable: maybe\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("enable"), "{err}");
        assert!(err.contains("line 3"), "{err}");
    }

    #[test]
    fn entry_with_two_names_is_rejected() {
        let err = parse_manifest("- service:\n    - httpd:\n      nginx:\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("found 2 keys"), "{err}");
    }

    #[test]
    fn json_syntax_error_names_line_and_column() {
        let err = parse_manifest("[{\"service\": [\n  {\"httpd\": {\"ensure\": }}]}]")
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 2"), "{err}");
    }

    fn machine(pairs: &[(&str, &str)]) -> Vec<crate::contract::Fact> {
        let mut list = crate::facts::simulated();
        for (name, value) in pairs {
            crate::facts::set(&mut list, *name, *value);
        }
        list
    }

    const FLEET: &str = "\
- service:
    - ssh:
    - nginx:
        when: { role: web }
    - postgresql:
        when: { role: db, hostname: \"db-*\" }
- when: { os.id: debian, os.version_id: 12 }
  service:
    - php8.2-fpm:
        when: { role: web }
        subscribe: [service#nginx]
";

    fn names(policy: &Policy) -> Vec<&str> {
        policy.services().iter().map(Service::name).collect()
    }

    #[test]
    fn when_selects_the_entries_of_this_machine_and_says_why_others_are_left_out() {
        let web = machine(&[("role", "web"), ("hostname", "web-01")]);
        let policy = parse_manifest_for(FLEET, &Facts::new(&web)).unwrap();
        assert_eq!(names(&policy), ["ssh", "nginx", "php8.2-fpm"]);
        assert_eq!(policy.left_out().len(), 1);
        assert_eq!(policy.left_out()[0].resource, "service#postgresql");
        assert_eq!(
            policy.left_out()[0].why,
            "when hostname = db-* (this machine: web-01), role = db (this machine: web)"
        );

        let db = machine(&[
            ("role", "db"),
            ("hostname", "db-7"),
            ("os.version_id", "13"),
        ]);
        let policy = parse_manifest_for(FLEET, &Facts::new(&db)).unwrap();
        assert_eq!(names(&policy), ["ssh", "postgresql"]);
        let why: Vec<_> = policy.left_out().iter().map(|l| l.why.as_str()).collect();
        assert_eq!(
            why,
            [
                "when role = web (this machine: db)",
                // The group's condition and the entry's, both said.
                "when os.version_id = 12 (this machine: 13), role = web (this machine: db)",
            ]
        );
    }

    #[test]
    fn a_fact_this_machine_does_not_have_is_an_error_even_where_nothing_matches() {
        let text = "- when: { os.id: plan9 }\n  service:\n    - web:\n        when: { rol: web }\n";
        let err = parse_manifest_for(text, &Facts::new(&machine(&[("role", "web")])))
            .unwrap_err()
            .to_string();
        assert!(err.contains("`rol` is not a fact of this machine"), "{err}");
        assert!(err.contains("item 1 (service): web"), "{err}");
        assert!(err.contains("role"), "the facts it has are listed: {err}");
        // Without facts (parse_manifest), any `when` is such an error.
        let err = parse_manifest("- service:\n    - web:\n        when: { role: web }\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("its facts: none"), "{err}");
    }

    #[test]
    fn patterns_match_shell_style_and_a_bad_one_is_named() {
        let facts = machine(&[("hostname", "web-12")]);
        let facts = Facts::new(&facts);
        for (pattern, applies) in [
            ("web-*", true),
            ("web-?2", true),
            ("web-[0-9][0-9]", true),
            ("web-1", false),
            ("db-*", false),
            ("WEB-12", false),
        ] {
            let text =
                format!("- service:\n    - web:\n        when: {{ hostname: \"{pattern}\" }}\n");
            let policy = parse_manifest_for(&text, &facts).unwrap();
            assert_eq!(policy.services().len() == 1, applies, "{pattern}");
        }
        let err = parse_manifest_for(
            "- service:\n    - web:\n        when: { hostname: \"web-[\" }\n",
            &facts,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("is not a pattern"), "{err}");
    }

    #[test]
    fn a_value_with_a_fraction_must_be_quoted() {
        let facts = machine(&[]);
        let err = parse_manifest_for(
            "- service:\n    - web:\n        when: { os.version_id: 12.10 }\n",
            &Facts::new(&facts),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("quote the value"), "{err}");
        assert!(err.contains("line 3"), "{err}");
    }

    #[test]
    fn an_entry_left_out_is_still_checked() {
        let facts = machine(&[("role", "db")]);
        let err = parse_manifest_for(
            "- service:\n    - \"bad name!\":\n        when: { role: web }\n",
            &Facts::new(&facts),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("service#bad name!"), "{err}");
        // One unit for two kinds of machine is not declared twice.
        let text = "- service:\n    - app:\n        when: { role: web }\n    - app:\n        ensure: stopped\n        when: { role: db }\n";
        let policy = parse_manifest_for(text, &Facts::new(&facts)).unwrap();
        assert_eq!(policy.services()[0].desired_ensure(), Ensure::Stopped);
        assert!(policy.validate().is_ok());
    }

    #[test]
    fn an_entry_left_out_names_the_entry_that_applies_its_unit_here() {
        // The applying entry after the one left out, in another spelling,
        // under an item's `when`; and one without any `when`.
        let text = "\
- service:
    - app:
        ensure: stopped
        when: { role: db }
    - other:
        when: { role: db }
- when: { os.id: debian }
  service:
    - app.service:
        when: { role: web }
- service:
    - ssh:
    - ssh:
        ensure: stopped
        when: { role: db }
";
        let facts = machine(&[("role", "web")]);
        let policy = parse_manifest_for(text, &Facts::new(&facts)).unwrap();
        assert_eq!(names(&policy), ["app.service", "ssh"]);
        let left: Vec<(&str, &str)> = policy
            .left_out()
            .iter()
            .map(|l| (l.resource.as_str(), l.why.as_str()))
            .collect();
        assert_eq!(
            left,
            [
                (
                    "service#app",
                    "when role = db (this machine: web); app is applied here by item 2's \
                     entry 1 (when os.id = debian, role = web)"
                ),
                // No entry of its unit applies here: said as before.
                ("service#other", "when role = db (this machine: web)"),
                (
                    "service#ssh",
                    "when role = db (this machine: web); ssh is applied here by item 3's \
                     entry 1 (no when)"
                ),
            ]
        );
    }
}
