//! Settings documents (`host run --settings FILE`): YAML or JSON, read into
//! the policy's own type, with errors that name the field, line and column.
//! The manifest parser reads its documents the same way.

use serde::de::DeserializeOwned;
use thiserror::Error;

/// Why [`Context::settings_as`](crate::Context::settings_as) could not produce the settings.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SettingsError {
    /// The host was given no settings document.
    #[error("no settings given: run the policy with --settings FILE (YAML or JSON)")]
    Missing,
    /// The document is not YAML or JSON, or does not fit the settings type.
    #[error("settings: {}{message}", path.as_deref().map(|p| format!("{p}: ")).unwrap_or_default())]
    Invalid {
        /// Where in the document the parser was (`server.port`, `services[2]`),
        /// when it was below the top level.
        path: Option<String>,
        /// The parser's message, with the position when the parser gives one
        /// (`invalid type: string "x", expected u16 at line 3 column 9`).
        message: String,
        /// The 1-based line of the problem, when known.
        line: Option<usize>,
        /// The 1-based column of the problem, when known.
        column: Option<usize>,
    },
}

impl SettingsError {
    /// The field at fault, as a path from the top of the document: the
    /// parser's position, joined with the field a `missing field` or
    /// `unknown field` message names (`server.port`).
    ///
    /// ```
    /// use guest_sdk::Context;
    ///
    /// #[derive(Debug, serde::Deserialize)]
    /// struct Settings { server: Server }
    /// #[derive(Debug, serde::Deserialize)]
    /// struct Server { host: String, port: u16 }
    ///
    /// let text = "server:\n  host: example.org\n  port: https\n";
    /// let error = Context::new(Some(text), false).settings_as::<Settings>().unwrap_err();
    /// assert_eq!(error.field().as_deref(), Some("server.port"));
    /// assert_eq!(error.line(), Some(3));
    /// assert_eq!(
    ///     error.to_string(),
    ///     "settings: server.port: invalid type: string \"https\", expected u16 at line 3 column 9"
    /// );
    /// ```
    pub fn field(&self) -> Option<String> {
        let SettingsError::Invalid { path, message, .. } = self else {
            return None;
        };
        field_at(path.as_deref(), message)
    }

    /// The 1-based line of the problem, when the parser knows it.
    pub fn line(&self) -> Option<usize> {
        match self {
            SettingsError::Invalid { line, .. } => *line,
            SettingsError::Missing => None,
        }
    }

    /// The 1-based column of the problem, when the parser knows it.
    pub fn column(&self) -> Option<usize> {
        match self {
            SettingsError::Invalid { column, .. } => *column,
            SettingsError::Missing => None,
        }
    }
}

impl From<DocumentProblem> for SettingsError {
    fn from(p: DocumentProblem) -> Self {
        SettingsError::Invalid {
            path: p.path,
            message: p.message,
            line: p.line,
            column: p.column,
        }
    }
}

/// Where and why a YAML or JSON document could not be read into its type;
/// what both [`SettingsError`] and [`ManifestError`](crate::ManifestError) report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DocumentProblem {
    pub path: Option<String>,
    pub message: String,
    pub line: Option<usize>,
    pub column: Option<usize>,
}

/// The field at fault, as a path from the top of the document: the
/// parser's position `path`, joined with the field a `missing field` or
/// `unknown field` message names.
pub(crate) fn field_at(path: Option<&str>, message: &str) -> Option<String> {
    let named = ["missing field `", "unknown field `"]
        .iter()
        .find_map(|prefix| message.strip_prefix(prefix))
        .and_then(|rest| rest.split_once('`'))
        .map(|(field, _)| field);
    match (path, named) {
        (Some(path), Some(field)) => Some(format!("{path}.{field}")),
        (Some(path), None) => Some(path.to_owned()),
        (None, Some(field)) => Some(field.to_owned()),
        (None, None) => None,
    }
}

/// Parses a document into `T`: JSON when it starts with `{` or `[` (after
/// leading whitespace), YAML otherwise. The one reader of settings and
/// manifests, so both name the field, line and column of a problem.
pub(crate) fn parse_document<T: DeserializeOwned>(text: &str) -> Result<T, DocumentProblem> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        serde_json::from_str(text).map_err(|e| {
            // serde_json does not say where in the document a type error is;
            // JSON is also YAML, and serde_yaml_ng does.
            let path = match e.classify() {
                serde_json::error::Category::Data => serde_yaml_ng::from_str::<T>(text)
                    .err()
                    .and_then(|y| split_yaml_path(&y.to_string()).0.map(str::to_string)),
                _ => None,
            };
            DocumentProblem {
                path,
                message: e.to_string(),
                line: Some(e.line()).filter(|&l| l > 0),
                column: Some(e.column()).filter(|&c| c > 0),
            }
        })
    } else {
        serde_yaml_ng::from_str(text).map_err(|e| {
            let text = e.to_string();
            let (path, message) = split_yaml_path(&text);
            let location = e.location();
            // serde_yaml_ng leaves the position out of its message when it is
            // the document's first character (a misspelt first field); the
            // message says it wherever the problem is (a missing field has
            // no place of its own).
            let message = match &location {
                Some(l)
                    if !message.contains(" at line ") && !message.starts_with("missing field") =>
                {
                    format!("{message} at line {} column {}", l.line(), l.column())
                }
                _ => message.to_string(),
            };
            DocumentProblem {
                path: path.map(str::to_string),
                message,
                line: location.as_ref().map(|l| l.line()),
                column: location.as_ref().map(|l| l.column()),
            }
        })
    }
}

/// serde_yaml_ng writes `PATH: MESSAGE` when the problem is below the top
/// level; serde's own messages (`invalid type: ...`) have a space before the
/// first `: `, paths (`server.port`, `list[0]`) do not.
fn split_yaml_path(text: &str) -> (Option<&str>, &str) {
    match text.split_once(": ") {
        Some((path, message)) if !path.is_empty() && !path.contains(char::is_whitespace) => {
            // A document whose top is a list has paths like `.[0].service`.
            (Some(path.strip_prefix('.').unwrap_or(path)), message)
        }
        _ => (None, text),
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;
    use crate::sim::{SimulatedSystem, UnitState};
    use crate::{run, Context, Policy, PolicyError, RunOptions, Service};

    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Settings {
        port: u16,
        #[serde(default)]
        server: Option<Server>,
        #[serde(default)]
        backends: Vec<Server>,
    }

    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Server {
        host: String,
        port: u16,
    }

    #[derive(Debug, Default, PartialEq, Deserialize)]
    #[serde(default)]
    struct AllDefaults {
        services: Vec<String>,
    }

    fn parse<T: DeserializeOwned>(text: &str) -> Result<T, SettingsError> {
        Context::new(Some(text), false).settings_as()
    }

    fn invalid(text: &str) -> SettingsError {
        parse::<Settings>(text).expect_err("settings should be rejected")
    }

    #[test]
    fn yaml_and_json_documents_are_read() {
        let expected = Settings {
            port: 8080,
            server: Some(Server {
                host: "example.org".into(),
                port: 443,
            }),
            backends: Vec::new(),
        };
        let yaml = "port: 8080\nserver:\n  host: example.org\n  port: 443\n";
        assert_eq!(parse::<Settings>(yaml).unwrap(), expected);
        let json = r#"  {"port": 8080, "server": {"host": "example.org", "port": 443}}"#;
        assert_eq!(parse::<Settings>(json).unwrap(), expected);
        assert_eq!(
            parse::<Vec<String>>(r#"["a", "b"]"#).unwrap(),
            ["a", "b"],
            "a document starting with [ is JSON"
        );
    }

    #[test]
    fn empty_yaml_document_gives_the_defaults() {
        assert_eq!(parse::<AllDefaults>("").unwrap(), AllDefaults::default());
        assert_eq!(
            parse::<AllDefaults>("# nothing yet\n").unwrap(),
            AllDefaults::default()
        );
    }

    #[test]
    fn missing_document_is_its_own_error() {
        let error = Context::new(None, false)
            .settings_as::<Settings>()
            .unwrap_err();
        assert_eq!(error, SettingsError::Missing);
        assert_eq!(
            error.to_string(),
            "no settings given: run the policy with --settings FILE (YAML or JSON)"
        );
        assert_eq!(
            (error.field(), error.line(), error.column()),
            (None, None, None)
        );
    }

    #[test]
    fn a_misspelt_first_field_says_its_line_and_column_too() {
        // serde_yaml_ng's own message leaves out line 1 column 1.
        let error = invalid("prot: 80\n");
        assert_eq!((error.line(), error.column()), (Some(1), Some(1)));
        let text = error.to_string();
        assert!(
            text.starts_with("settings: unknown field `prot`, expected one of"),
            "{text}"
        );
        assert!(text.ends_with("at line 1 column 1"), "{text}");
        let error = invalid("port: 80\nserver:\n  hots: x\n  port: 1\n");
        assert_eq!(
            error.to_string().matches(" at line ").count(),
            1,
            "said once: {error}"
        );
    }

    #[test]
    fn unknown_field_is_named_with_its_line() {
        let error = invalid("port: 80\nprot: 81\n");
        assert_eq!(error.field().as_deref(), Some("prot"));
        assert_eq!(error.line(), Some(2));
        let text = error.to_string();
        assert!(
            text.starts_with("settings: unknown field `prot`, expected one of"),
            "{text}"
        );
        assert!(text.ends_with("at line 2 column 1"), "{text}");
    }

    #[test]
    fn wrong_type_names_the_nested_field_and_line() {
        let error = invalid("port: 80\nserver:\n  host: example.org\n  port: https\n");
        assert_eq!(
            error,
            SettingsError::Invalid {
                path: Some("server.port".into()),
                message: "invalid type: string \"https\", expected u16 at line 4 column 9".into(),
                line: Some(4),
                column: Some(9),
            }
        );
        assert_eq!(error.field().as_deref(), Some("server.port"));
        assert_eq!(
            error.to_string(),
            "settings: server.port: invalid type: string \"https\", expected u16 at line 4 column 9"
        );
    }

    #[test]
    fn out_of_range_value_in_a_list_is_located() {
        let error = invalid("port: 80\nbackends:\n  - host: a\n    port: 70000\n");
        assert_eq!(error.field().as_deref(), Some("backends[0].port"));
        assert_eq!((error.line(), error.column()), (Some(4), Some(11)));
        assert!(
            error.to_string().contains("invalid value: integer `70000`"),
            "{error}"
        );
    }

    #[test]
    fn missing_field_is_named() {
        let error = invalid("backends: []\n");
        assert_eq!(error.field().as_deref(), Some("port"));
        assert_eq!(error.to_string(), "settings: missing field `port`");
        let nested = invalid("port: 1\nserver:\n  host: a\n");
        assert_eq!(nested.field().as_deref(), Some("server.port"));
        assert_eq!(
            nested.to_string(),
            "settings: server: missing field `port` at line 3 column 3"
        );
    }

    #[test]
    fn json_type_error_names_field_and_line() {
        let error =
            invalid("{\n  \"port\": 80,\n  \"server\": {\"host\": \"a\", \"port\": \"https\"}\n}");
        assert_eq!(error.field().as_deref(), Some("server.port"));
        assert_eq!(error.line(), Some(3));
        assert_eq!(
            error.to_string(),
            "settings: server.port: invalid type: string \"https\", expected u16 at line 3 column 41"
        );
    }

    #[test]
    fn syntax_errors_give_the_line() {
        let json = invalid("{\"port\": 80,\n");
        assert_eq!(json.field(), None);
        assert_eq!(json.line(), Some(2));
        assert!(
            json.to_string().starts_with("settings: EOF while parsing"),
            "{json}"
        );

        let yaml = invalid("port: 80\n- a\n");
        assert_eq!(yaml.field(), None);
        assert_eq!(yaml.line(), Some(2));
        assert_eq!(
            yaml.to_string(),
            "settings: did not find expected key at line 2 column 1, while parsing a block mapping"
        );
    }

    #[test]
    fn policy_returning_a_settings_error_applies_nothing() {
        fn policy(ctx: &Context) -> Result<Policy, PolicyError> {
            let settings: Settings = ctx.settings_as()?;
            Ok(Policy::new().service(Service::new(format!("web-{}", settings.port))))
        }
        let mut system = SimulatedSystem::new().with_unit("web-80", UnitState::stopped());
        let report = run(
            policy,
            &mut system,
            &RunOptions::default().with_settings("port: eighty\n"),
        );
        assert_eq!(
            report.errors,
            ["policy: settings: port: invalid type: string \"eighty\", expected u16 at line 1 column 7"]
        );
        assert!(report.events.is_empty());
        system.assert_calls(&[]);

        let report = run(policy, &mut system, &RunOptions::default());
        assert_eq!(
            report.errors,
            ["policy: no settings given: run the policy with --settings FILE (YAML or JSON)"]
        );

        let report = run(
            policy,
            &mut system,
            &RunOptions::default().with_settings("port: 80\n"),
        );
        report.assert_converged();
        system.assert_mutating_calls(&["start web-80"]);
    }
}
