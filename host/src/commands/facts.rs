//! `host facts [--json]`: what policies are told about this machine, for
//! an operator writing a policy that selects by them, or checking why one
//! took the part it did. The gathered facts, then host.toml's labels, as
//! a run gives them. Read-only, and no root needed: nothing gathered is
//! secret.

use std::fmt::Write as _;

use serde::ser::{SerializeMap as _, Serializer};
use serde::Serialize;

use crate::cli::FactsArgs;
use crate::facts::{Facts, Labels};
use crate::settings::ConfigFile;
use crate::text::one_line;

pub fn execute(args: &FactsArgs) -> anyhow::Result<i32> {
    let file = ConfigFile::load(args.config.path())?;
    let facts = Facts::gather(file.labels());
    if args.json {
        println!("{}", serde_json::to_string_pretty(&Json(&facts))?);
    } else {
        print!("{}", render(&facts));
    }
    Ok(0)
}

/// One `name  value` line per fact, the names aligned. The values are the
/// machine's own, but a file may hold anything: shown escaped.
fn render(facts: &Facts) -> String {
    let width = facts
        .entries()
        .iter()
        .map(|(name, _)| name.len())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for (name, value) in facts.entries() {
        let line = format!("{name:width$}  {}", one_line(value));
        let _ = writeln!(out, "{}", line.trim_end());
    }
    out
}

/// `{"facts": {...}, "labels": {...}}`: `facts` everything a policy sees,
/// in its order; `labels` the labels alone.
struct Json<'a>(&'a Facts);

impl Serialize for Json<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut document = serializer.serialize_map(Some(2))?;
        document.serialize_entry("facts", &InOrder(self.0.entries()))?;
        document.serialize_entry::<_, Labels>("labels", self.0.labels())?;
        document.end()
    }
}

/// Name/value pairs as one JSON object, in their order.
struct InOrder<'a>(&'a [(String, String)]);

impl Serialize for InOrder<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, value) in self.0 {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::facts::Sources;

    fn facts() -> Facts {
        let dir = tempfile::tempdir().unwrap();
        let etc = dir.path().join("etc");
        std::fs::create_dir_all(&etc).unwrap();
        std::fs::write(
            etc.join("os-release"),
            "ID=debian\nVERSION_CODENAME=\"book\\`worm\"\nVERSION_ID=\"1\x1b[2J\"\n",
        )
        .unwrap();
        let labels = Labels::check(BTreeMap::from([
            ("zone".to_owned(), "b".to_owned()),
            ("role".to_owned(), "web".to_owned()),
        ]))
        .unwrap();
        Facts::gather_from(&Sources::under(dir.path()), &labels)
    }

    #[test]
    fn the_human_form_aligns_names_escapes_values_and_ends_with_the_labels() {
        let text = render(&facts());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), contract_words::facts::GATHERED.len() + 2);
        assert_eq!(lines[0], "hostname", "an empty value: the name alone");
        assert_eq!(lines[2], "os.id                debian");
        assert_eq!(lines[3], "os.version_id        1\\x1b[2J", "escaped");
        assert_eq!(lines[4], "os.version_codename  book`worm");
        assert_eq!(
            &lines[lines.len() - 2..],
            ["role                 web", "zone                 b"]
        );
    }

    #[test]
    fn the_json_form_has_every_fact_in_order_and_the_labels_alone() {
        let json = serde_json::to_string(&Json(&facts())).unwrap();
        let parsed: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(
            parsed["labels"],
            serde_json::json!({"role": "web", "zone": "b"})
        );
        assert_eq!(parsed["facts"]["os.id"], "debian");
        assert_eq!(parsed["facts"]["role"], "web");
        assert_eq!(
            parsed["facts"]["os.version_id"], "1\u{1b}[2J",
            "JSON keeps the value"
        );
        // In the policies' order, not sorted.
        let first = json.find("\"hostname\"").unwrap();
        assert!(first < json.find("\"arch\"").unwrap(), "{json}");
        assert!(json.find("\"host.version\"").unwrap() < json.find("\"role\"").unwrap());
    }
}
