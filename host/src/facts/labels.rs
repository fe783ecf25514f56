//! The operator's labels: names and values host.toml's `[labels]` gives
//! this machine (`role = "web"`), for policies to select by and for reports
//! and metrics to carry. Checked once, when host.toml is read: a label that
//! could not be told to a policy, written as a metric, or that would hide a
//! gathered fact is refused, with the label and the problem named.
//!
//! Names and values take the characters systemd takes in unit names (ASCII
//! letters, digits and `: - _ . \ @`), so a label is safe as it is in a
//! terminal, a log line, a unit name or a Prometheus label value (whose
//! writer escapes `\`); a name starts with a letter.

use std::collections::BTreeMap;

use contract_words::facts::is_gathered;
use thiserror::Error;

use crate::service_name::quote;

/// The most labels a machine may have.
pub const MAX_LABELS: usize = 64;

/// The longest a label's name or value may be, in bytes (and a gathered
/// fact's value).
pub const MAX_BYTES: usize = 256;

/// What a label may hold besides ASCII letters and digits.
const PUNCTUATION: &str = ":-_.\\@";

/// Labels that passed [`Labels::check`], by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(transparent)]
pub struct Labels(BTreeMap<String, String>);

/// Why a set of labels was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LabelError {
    #[error("{count} labels, at most {MAX_LABELS}")]
    TooMany { count: usize },
    #[error("label {}: the name is empty", quote(.name))]
    EmptyName { name: String },
    #[error("label {}: the value is empty", quote(.name))]
    EmptyValue { name: String },
    #[error("label {}: {part} is {len} bytes, at most {MAX_BYTES}", quote(.name))]
    TooLong {
        name: String,
        part: LabelPart,
        len: usize,
    },
    #[error("label {}: the name starts with {first:?}; a name starts with an ASCII letter", quote(.name))]
    NameStart { name: String, first: char },
    #[error(
        "label {}: the {part}{} has the character {found:?}; a label takes only ASCII letters, digits and : - _ . \\ @",
        quote(.name),
        .value.as_deref().map(|v| format!(" {}", quote(v))).unwrap_or_default()
    )]
    BadCharacter {
        name: String,
        part: LabelPart,
        /// The value, when the character is in it (the name is said anyway).
        value: Option<String>,
        found: char,
    },
    #[error("label {}: the host gathers a fact of that name, which a label would hide", quote(.name))]
    Reserved { name: String },
    #[error(
        "labels {} and {} are both `{metric}` in metrics; rename one",
        quote(.first),
        quote(.second)
    )]
    MetricCollision {
        first: String,
        second: String,
        metric: String,
    },
}

/// The part of a label a problem is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelPart {
    Name,
    Value,
}

impl std::fmt::Display for LabelPart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LabelPart::Name => "name",
            LabelPart::Value => "value",
        })
    }
}

impl LabelError {
    /// The label the problem is in (the later one of a collision); `None`
    /// for too many labels.
    pub fn label(&self) -> Option<&str> {
        match self {
            LabelError::TooMany { .. } => None,
            LabelError::EmptyName { name }
            | LabelError::EmptyValue { name }
            | LabelError::TooLong { name, .. }
            | LabelError::NameStart { name, .. }
            | LabelError::BadCharacter { name, .. }
            | LabelError::Reserved { name } => Some(name),
            LabelError::MetricCollision { second, .. } => Some(second),
        }
    }
}

impl Labels {
    /// Checks every label of `map`; the error names the first refused (by
    /// name).
    pub fn check(map: BTreeMap<String, String>) -> Result<Labels, LabelError> {
        if map.len() > MAX_LABELS {
            return Err(LabelError::TooMany { count: map.len() });
        }
        let mut metrics: BTreeMap<String, &str> = BTreeMap::new();
        for (name, value) in &map {
            check_one(name, value)?;
            if let Some(first) = metrics.insert(metric_name(name), name) {
                return Err(LabelError::MetricCollision {
                    first: first.to_owned(),
                    second: name.clone(),
                    metric: metric_name(name),
                });
            }
        }
        Ok(Labels(map))
    }

    /// The value of label `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// The labels, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The labels as Prometheus labels, for the metrics writer:
    /// (`label_` and the name with every character outside `[A-Za-z0-9_]`
    /// made `_`, the value), in the labels' order. Distinct by
    /// [`Labels::check`].
    pub fn metric_pairs(&self) -> Vec<(String, String)> {
        self.0
            .iter()
            .map(|(name, value)| (metric_name(name), value.clone()))
            .collect()
    }
}

/// `label_` and `name` with every character Prometheus does not take in a
/// label name made `_`.
fn metric_name(name: &str) -> String {
    let sanitized: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("label_{sanitized}")
}

/// One label's name and value, each on its own.
fn check_one(name: &str, value: &str) -> Result<(), LabelError> {
    let owned = || name.to_owned();
    let Some(first) = name.chars().next() else {
        return Err(LabelError::EmptyName { name: owned() });
    };
    if value.is_empty() {
        return Err(LabelError::EmptyValue { name: owned() });
    }
    for (part, text) in [(LabelPart::Name, name), (LabelPart::Value, value)] {
        if text.len() > MAX_BYTES {
            return Err(LabelError::TooLong {
                name: owned(),
                part,
                len: text.len(),
            });
        }
        if let Some(found) = text
            .chars()
            .find(|&c| !c.is_ascii_alphanumeric() && !PUNCTUATION.contains(c))
        {
            return Err(LabelError::BadCharacter {
                name: owned(),
                part,
                value: (part == LabelPart::Value).then(|| value.to_owned()),
                found,
            });
        }
    }
    if !first.is_ascii_alphabetic() {
        return Err(LabelError::NameStart {
            name: owned(),
            first,
        });
    }
    if is_gathered(name) {
        return Err(LabelError::Reserved { name: owned() });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Result<Labels, LabelError> {
        Labels::check(
            pairs
                .iter()
                .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
                .collect(),
        )
    }

    fn refused(pairs: &[(&str, &str)]) -> String {
        labels(pairs).expect_err("should be refused").to_string()
    }

    #[test]
    fn good_labels_are_kept_sorted_by_name() {
        let checked = labels(&[
            ("zone", "eu-west-1"),
            ("role", "web"),
            ("Team", "a@b.example"),
            ("unit", "getty@tty1.service"),
            ("path", "dev-disk-by\\x2dlabel"),
            ("x", &"v".repeat(MAX_BYTES)),
            (&"n".repeat(MAX_BYTES), "1:2"),
        ])
        .unwrap();
        let names: Vec<&str> = checked.iter().map(|(n, _)| n).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted);
        assert_eq!(checked.len(), 7);
        assert_eq!(checked.get("role"), Some("web"));
        assert!(labels(&[]).unwrap().is_empty());
    }

    #[test]
    fn at_most_64_labels() {
        let names: Vec<String> = (0..=MAX_LABELS).map(|i| format!("l{i}")).collect();
        let pairs: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "v")).collect();
        assert_eq!(refused(&pairs), "65 labels, at most 64");
        assert!(labels(&pairs[..MAX_LABELS]).is_ok());
    }

    #[test]
    fn names_and_values_are_1_to_256_bytes() {
        assert_eq!(
            refused(&[("role", &"w".repeat(300))]),
            "label \"role\": value is 300 bytes, at most 256"
        );
        let long = "n".repeat(257);
        let error = labels(&[(&long, "v")]).unwrap_err();
        assert!(
            error
                .to_string()
                .ends_with(": name is 257 bytes, at most 256"),
            "{error}"
        );
        assert!(error.to_string().len() < 150, "a long name is cut: {error}");
        assert_eq!(error.label(), Some(long.as_str()));
        assert_eq!(refused(&[("", "v")]), "label \"\": the name is empty");
        assert_eq!(
            refused(&[("role", "")]),
            "label \"role\": the value is empty"
        );
    }

    #[test]
    fn a_character_outside_the_unit_name_set_is_named() {
        assert_eq!(
            refused(&[("rôle", "web")]),
            "label \"rôle\": the name has the character 'ô'; a label takes only ASCII letters, \
             digits and : - _ . \\ @"
        );
        assert!(refused(&[("role", "web server")])
            .starts_with("label \"role\": the value \"web server\" has the character ' '"));
        assert!(
            refused(&[("role", "web\n")]).contains("the value \"web\\n\" has the character '\\n'")
        );
        assert!(refused(&[("a/b", "v")]).contains("the name has the character '/'"));
        assert_eq!(
            refused(&[("1role", "web")]),
            "label \"1role\": the name starts with '1'; a name starts with an ASCII letter"
        );
        assert!(refused(&[("_x", "v")]).contains("starts with '_'"));
    }

    #[test]
    fn a_label_cannot_hide_a_gathered_fact() {
        for name in contract_words::facts::GATHERED {
            assert_eq!(
                refused(&[(name, "x")]),
                format!(
                    "label \"{name}\": the host gathers a fact of that name, which a label would hide"
                )
            );
        }
        // Only the exact name: a longer one is a label of its own.
        assert!(labels(&[("os.id.override", "x"), ("Hostname", "y")]).is_ok());
    }

    #[test]
    fn two_names_with_one_metric_name_are_refused() {
        let error = labels(&[("a.b", "1"), ("a_b", "2")]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "labels \"a.b\" and \"a_b\" are both `label_a_b` in metrics; rename one"
        );
        assert_eq!(error.label(), Some("a_b"));
        assert!(labels(&[("a-b", "1"), ("a@b", "2")]).is_err());
        assert!(labels(&[("ab", "1"), ("a_b", "2")]).is_ok());
    }

    #[test]
    fn metric_pairs_are_prefixed_and_sanitized() {
        let checked = labels(&[("role", "web"), ("site.zone-a", "eu:1"), ("x@y", "z")]).unwrap();
        assert_eq!(
            checked.metric_pairs(),
            [
                ("label_role".to_owned(), "web".to_owned()),
                ("label_site_zone_a".to_owned(), "eu:1".to_owned()),
                ("label_x_y".to_owned(), "z".to_owned()),
            ]
        );
    }
}
