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

use std::collections::BTreeMap;

use serde::Deserialize;
use thiserror::Error;

use crate::policy::Policy;
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
}

/// Parses a manifest into a [`Policy`]. Text starting with `[` or `{` is read
/// as JSON, anything else as YAML. An empty document is an empty policy.
pub fn parse_manifest(text: &str) -> Result<Policy, ManifestError> {
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
    for (index, block) in blocks.into_iter().enumerate() {
        for entry in block.service {
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
            let mut service = Service::new(name)
                .ensure(properties.ensure.unwrap_or_default())
                .enable_option(properties.enable);
            for reference in properties.subscribe {
                service = service.subscribe(reference);
            }
            policy.add(service);
        }
    }
    Ok(policy)
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
}
