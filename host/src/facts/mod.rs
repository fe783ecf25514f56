//! What every policy is told about the machine it runs on: the facts the
//! host gathers itself, then the operator's labels (host.toml `[labels]`).
//! With them one signed policy serves a whole fleet, each machine taking
//! its part (`role = "web"`, Debian 12 or 13).
//!
//! The gathered facts are [`contract_words::facts::GATHERED`], always all
//! of them, always in that order; a value the host cannot tell (a file
//! missing, systemd not answering) is the empty string, never a guess. The
//! labels follow, sorted by name; none may take a gathered fact's name.
//! Where each fact comes from, and why it holds nothing secret, is in
//! `gather.rs` ([`Sources`]); what a label may be, in `labels.rs`
//! ([`Labels::check`]).
//!
//! ```
//! use policy_host::facts::{Facts, Labels, Sources};
//!
//! let labels = Labels::check([("role".to_owned(), "web".to_owned())].into()).unwrap();
//! let facts = Facts::gather_from(&Sources::under(std::path::Path::new("/nonexistent")), &labels);
//! assert_eq!(facts.get("role"), Some("web"));
//! assert_eq!(facts.get("os.id"), Some("")); // no os-release there: not known
//! assert_eq!(facts.entries()[0].0, "hostname");
//! ```

mod gather;
mod labels;
mod parse;

pub use gather::Sources;
pub use labels::{LabelError, LabelPart, Labels, MAX_BYTES, MAX_LABELS};

/// The facts of one run: the gathered ones, then the labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    entries: Vec<(String, String)>,
    labels: Labels,
}

impl Facts {
    /// The facts of this machine, with the operator's `labels`.
    pub fn gather(labels: &Labels) -> Facts {
        Self::gather_from(&Sources::system(), labels)
    }

    /// The facts `sources` give (a test's fixtures), with `labels`.
    pub fn gather_from(sources: &Sources, labels: &Labels) -> Facts {
        let mut entries = gather::gathered(sources);
        entries.extend(
            labels
                .iter()
                .map(|(name, value)| (name.to_owned(), value.to_owned())),
        );
        Facts {
            entries,
            labels: labels.clone(),
        }
    }

    /// Every fact as a policy sees it, in order: the gathered ones, then
    /// the labels by name.
    pub fn entries(&self) -> &[(String, String)] {
        &self.entries
    }

    /// The value of the fact `name`; `None` when there is none of that name
    /// (a gathered fact is always there, perhaps empty).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The operator's labels alone.
    pub fn labels(&self) -> &Labels {
        &self.labels
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use contract_words::facts::GATHERED;

    use super::*;

    #[test]
    fn the_gathered_facts_come_first_in_order_then_the_labels_by_name() {
        let labels = Labels::check(BTreeMap::from([
            ("zone".to_owned(), "b".to_owned()),
            ("role".to_owned(), "web".to_owned()),
        ]))
        .unwrap();
        let facts = Facts::gather_from(
            &Sources::under(std::path::Path::new("/nonexistent")),
            &labels,
        );
        let names: Vec<&str> = facts.entries().iter().map(|(n, _)| n.as_str()).collect();
        let mut expected = GATHERED.to_vec();
        expected.extend(["role", "zone"]);
        assert_eq!(names, expected);
        assert_eq!(facts.get("zone"), Some("b"));
        assert_eq!(facts.get("nothing"), None);
        assert_eq!(facts.labels(), &labels);
    }
}
