//! The seed design's YAML manifest format (or the same structure as JSON).
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
//! problems, the line and column.

use std::collections::BTreeMap;

use serde::Deserialize;
use thiserror::Error;

use crate::policy::Policy;
use crate::service::{Ensure, Service};

/// Why a manifest could not be read.
#[derive(Debug, Error)]
pub enum ManifestError {
    #[error("manifest: {0}")]
    Yaml(#[from] serde_yaml_ng::Error),
    #[error("manifest: {0}")]
    Json(#[from] serde_json::Error),
    #[error("manifest: {0}")]
    Structure(String),
}

/// One list item of the manifest: a resource type and its resources.
///
/// A struct rather than an enum: YAML libraries read enums as `!tags`, while
/// the seed format uses a plain one-key mapping. An unknown resource type is
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
    let blocks: Vec<Block> = if trimmed.starts_with('[') || trimmed.starts_with('{') {
        serde_json::from_str(text)?
    } else {
        serde_yaml_ng::from_str(text)?
    };
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

    const SEED: &str = "\
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
    fn parses_the_seed_format_in_order() {
        let policy = parse_manifest(SEED).unwrap();
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
        let err = parse_manifest("- service:\n    - httpd:\n        ensure: runing\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("runing"), "{err}");
        assert!(err.contains("line 3"), "{err}");
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
