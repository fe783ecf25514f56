//! Metrics files as Prometheus reads them: every file a test has the host
//! write is checked with `promtool check metrics` (Debian's `prometheus`
//! package), which parses the text format and applies Prometheus' own lint
//! rules, before the test reads a value from it.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

/// The samples of a metrics file, in order: `name{labels}` (labels sorted by
/// name, as node_exporter prints them) and the value.
#[derive(Debug, Clone)]
pub struct Samples(pub Vec<(String, f64)>);

impl Samples {
    /// The value of the sample `series` (`name` or `name{label="v",...}`,
    /// labels in any order); panics when there is none.
    #[track_caller]
    pub fn value(&self, series: &str) -> f64 {
        let series = canonical(series);
        self.0
            .iter()
            .find(|(s, _)| *s == series)
            .map(|(_, v)| *v)
            .unwrap_or_else(|| panic!("no sample {series} in {:#?}", self.0))
    }

    /// The series of metric `name`.
    pub fn series(&self, name: &str) -> Vec<&str> {
        self.0
            .iter()
            .map(|(s, _)| s.as_str())
            .filter(|s| *s == name || s.starts_with(&format!("{name}{{")))
            .collect()
    }
}

/// Reads the metrics file at `path`, checked by `promtool check metrics`
/// (a failure names each problem promtool found), and returns its samples.
#[track_caller]
pub fn checked(path: &Path) -> Samples {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("reading the metrics file {}: {e}", path.display()));
    check_text(&text);
    parse(&text)
}

/// `promtool check metrics` on `text`: panics with its findings unless it
/// finds nothing.
#[track_caller]
pub fn check_text(text: &str) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot run promtool ({e}): install Debian's prometheus package, as the README's test command does")
        });
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(text.as_bytes())
        .expect("feed promtool");
    let out = child.wait_with_output().expect("wait for promtool");
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics ({}):\n{}{}\n--- the file\n{text}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The samples of the text format (comments skipped; label values may hold
/// spaces, so the value is what follows the last space).
pub fn parse(text: &str) -> Samples {
    Samples(
        text.lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(|l| {
                let (series, value) = l.rsplit_once(' ').expect("a sample line");
                let value = value
                    .parse()
                    .unwrap_or_else(|_| panic!("{value:?} is not a number in {l:?}"));
                (canonical(series), value)
            })
            .collect(),
    )
}

/// `name{labels}` with its labels sorted by name. Label values are quoted
/// and may hold escaped quotes, commas and braces.
fn canonical(series: &str) -> String {
    let Some((name, labels)) = series.split_once('{') else {
        return series.to_owned();
    };
    let labels = labels.strip_suffix('}').expect("labels end with }");
    let mut pairs = Vec::new();
    let (mut current, mut quoted, mut escaped) = (String::new(), false, false);
    for c in labels.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ',' if !quoted => {
                pairs.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    if !current.is_empty() {
        pairs.push(current);
    }
    pairs.sort();
    format!("{name}{{{}}}", pairs.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_compare_in_any_order_and_values_keep_their_commas() {
        let samples = parse("m{b=\"x,\\\"y\",a=\"1\"} 2\nn 3\n");
        assert_eq!(samples.value("m{a=\"1\",b=\"x,\\\"y\"}"), 2.0);
        assert_eq!(samples.value("m{b=\"x,\\\"y\",a=\"1\"}"), 2.0);
        assert_eq!(samples.value("n"), 3.0);
        assert_eq!(samples.series("m"), ["m{a=\"1\",b=\"x,\\\"y\"}"]);
    }
}
