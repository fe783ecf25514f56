//! The catalogue against what is written from it by hand: the metrics table
//! of docs/monitoring.md (name, type, scope, labels and help, exactly), and
//! the monitoring mixin of dist/monitoring/ (its rules' and dashboard's
//! queries name only metrics the host writes, with their own labels; every
//! alert has a summary, a description and a runbook section, and promtool
//! unit tests where it fires and where it stays quiet, fed series shaped as
//! the host writes them). promtool itself runs the tests in the end-to-end
//! suite (tests/tests/monitoring.rs).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use regex::Regex;
use serde_yaml_ng::Value as Yaml;

use super::{Kind, Metric, Scope, LABEL_VALUES, METRICS};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn yaml(path: &str) -> Yaml {
    serde_yaml_ng::from_str(&read(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

const DOCS: &str = "docs/monitoring.md";
const RULE_FILES: [&str; 2] = ["dist/monitoring/alerts.yaml", "dist/monitoring/rules.yaml"];
const DASHBOARD: &str = "dist/monitoring/dashboard.json";
const TESTS: &str = "dist/monitoring/tests";

/// The labels every series carries besides its own: node_exporter's, and
/// the machine's `label_NAME` (host.toml `[labels]`).
fn is_ambient_label(label: &str) -> bool {
    label == "instance" || label == "job" || label.starts_with("label_")
}

const TABLE_START: &str = "<!-- metrics: ";
const TABLE_END: &str = "<!-- end of metrics -->";

fn scope_words(scope: Scope) -> &'static str {
    match scope {
        Scope::Machine => "machine",
        Scope::LastRun => "last run",
        Scope::Noop => "noop run",
        Scope::Watch => "watch",
    }
}

/// The metrics table docs/monitoring.md must have, one row per metric in
/// the catalogue's order.
fn table() -> String {
    let mut table = String::from(
        "| metric | type | written by | labels | help |\n| --- | --- | --- | --- | --- |\n",
    );
    for metric in METRICS {
        assert!(
            !metric.help.contains('|'),
            "{}: `|` in a table",
            metric.name
        );
        let labels = if metric.labels.is_empty() {
            "—".to_owned()
        } else {
            metric
                .labels
                .iter()
                .map(|l| format!("`{l}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        table.push_str(&format!(
            "| `{}` | {} | {} | {labels} | {} |\n",
            metric.name,
            metric.kind.word(),
            scope_words(metric.scope),
            metric.help
        ));
    }
    table
}

#[test]
fn the_docs_metrics_table_is_the_catalogue() {
    let docs = read(DOCS);
    let start = docs.find(TABLE_START).expect("the table's start marker");
    let start = start + docs[start..].find('\n').unwrap() + 1;
    let end = start
        + docs[start..]
            .find(TABLE_END)
            .expect("the table's end marker");
    let expected = table();
    assert!(
        docs[start..end] == expected,
        "{DOCS}'s metrics table is not the catalogue's (host/src/report/catalogue.rs); \
         replace it by:\n{expected}"
    );
}

/// Every metric name a query names: identifiers of the PromQL text that
/// mention `policy_host_`, a recording rule's (`level:metric:operations`)
/// with its colons.
fn names_in(expr: &str) -> BTreeSet<String> {
    let ident = Regex::new("[a-zA-Z_:][a-zA-Z0-9_:]*").unwrap();
    // Strings (label values, regexes) are no names.
    let strings = Regex::new(r#""(?:[^"\\]|\\.)*""#).unwrap();
    let expr = strings.replace_all(expr, "\"\"");
    ident
        .find_iter(&expr)
        .map(|m| m.as_str().to_owned())
        .filter(|name| name.contains("policy_host_"))
        .collect()
}

/// Each selector `policy_host_...{label=..., ...}` of a query: the metric
/// and the label names it matches on.
fn selectors(expr: &str) -> Vec<(String, Vec<String>)> {
    let selector = Regex::new(r"(policy_host_[a-z_]+)\s*\{([^}]*)\}").unwrap();
    let matcher = Regex::new(r#"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*"#).unwrap();
    let strings = Regex::new(r#""(?:[^"\\]|\\.)*""#).unwrap();
    selector
        .captures_iter(expr)
        .map(|c| {
            let inside = strings.replace_all(&c[2], "\"\"");
            let labels = matcher
                .captures_iter(&inside)
                .map(|m| m[1].to_owned())
                .collect();
            (c[1].to_owned(), labels)
        })
        .collect()
}

fn rules() -> Vec<(&'static str, Yaml)> {
    let mut all = Vec::new();
    for file in RULE_FILES {
        let doc = yaml(file);
        for group in doc["groups"].as_sequence().expect("groups") {
            for rule in group["rules"].as_sequence().expect("rules") {
                all.push((file, rule.clone()));
            }
        }
    }
    all
}

fn text(value: &Yaml) -> Option<&str> {
    value.as_str()
}

/// The dashboard's queries: every panel target's `expr`, and every
/// variable's query.
fn dashboard_queries() -> Vec<String> {
    fn walk(value: &serde_json::Value, key: Option<&str>, out: &mut Vec<String>) {
        match value {
            serde_json::Value::Object(map) => {
                for (k, v) in map {
                    walk(v, Some(k), out);
                }
            }
            serde_json::Value::Array(items) => {
                for item in items {
                    walk(item, key, out);
                }
            }
            serde_json::Value::String(s) => {
                if matches!(key, Some("expr" | "query" | "definition")) {
                    out.push(s.clone());
                }
            }
            _ => {}
        }
    }
    let dashboard: serde_json::Value = serde_json::from_str(&read(DASHBOARD)).expect(DASHBOARD);
    let mut queries = Vec::new();
    walk(&dashboard, None, &mut queries);
    queries
}

fn check_selectors(place: &str, expr: &str, wrong: &mut Vec<String>) {
    for (name, labels) in selectors(expr) {
        let Some(metric) = super::find(&name) else {
            continue;
        };
        for label in labels {
            if !metric.labels.contains(&label.as_str()) && !is_ambient_label(&label) {
                wrong.push(format!("{place}: {name} has no label {label}"));
            }
        }
    }
}

#[test]
fn the_mixin_names_only_metrics_the_host_writes() {
    let rules = rules();
    let recorded: BTreeSet<&str> = rules
        .iter()
        .filter_map(|(_, r)| text(&r["record"]))
        .collect();
    for name in &recorded {
        assert!(
            name.split(':').count() == 3,
            "{name}: a recording rule is named level:metric:operations"
        );
    }
    let mut queries: Vec<(String, String)> = rules
        .iter()
        .map(|(file, r)| {
            let name = text(&r["alert"]).or(text(&r["record"])).expect("a name");
            (
                format!("{file}: {name}"),
                text(&r["expr"]).expect("expr").to_owned(),
            )
        })
        .collect();
    let dashboard = dashboard_queries();
    assert!(
        dashboard.len() >= 10,
        "the dashboard's queries: {dashboard:?}"
    );
    queries.extend(dashboard.into_iter().map(|q| (DASHBOARD.to_owned(), q)));
    let mut wrong = Vec::new();
    let mut used = BTreeSet::new();
    for (place, expr) in &queries {
        for name in names_in(expr) {
            let known = if name.contains(':') {
                recorded.contains(name.as_str())
            } else {
                super::find(&name).is_some()
            };
            if known {
                used.insert(name);
            } else {
                wrong.push(format!("{place}: {name} in {expr}"));
            }
        }
        check_selectors(place, expr, &mut wrong);
    }
    assert!(
        wrong.is_empty(),
        "names no metric the host writes (host/src/report/catalogue.rs) or no recording rule \
         of {RULE_FILES:?}, or a label the metric does not have:\n{}",
        wrong.join("\n")
    );
    // The dashboard shows the machine's state, not only the alerts' few.
    for must in [
        "policy_host_run_success",
        "policy_host_policy_success",
        "policy_host_policy_refused",
        "policy_host_resources",
        "policy_host_units_left_alone",
        "policy_host_repairs_total",
        "policy_host_last_run_timestamp_seconds",
        "policy_host_watch_up",
    ] {
        assert!(used.contains(must), "the mixin does not use {must}");
    }
}

/// The anchors GitHub gives docs/monitoring.md's headings.
fn anchors(docs: &str) -> BTreeSet<String> {
    docs.lines()
        .filter_map(|l| l.strip_prefix('#'))
        .map(|heading| {
            heading
                .trim_start_matches('#')
                .trim()
                .to_lowercase()
                .chars()
                .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
                .map(|c| if c == ' ' { '-' } else { c })
                .collect()
        })
        .collect()
}

/// The runbook's sections: the `### ` headings of the "## Alerts" section.
fn runbook_sections(docs: &str) -> BTreeSet<String> {
    let alerts = &docs[docs.find("\n## Alerts\n").expect("an Alerts section")..];
    let alerts = &alerts[..alerts[1..].find("\n## ").map_or(alerts.len(), |i| i + 1)];
    alerts
        .lines()
        .filter_map(|l| l.strip_prefix("### "))
        .map(str::to_owned)
        .collect()
}

const SEVERITIES: [&str; 3] = ["info", "warning", "critical"];

fn alerts() -> Vec<Yaml> {
    rules()
        .into_iter()
        .filter(|(_, r)| r["alert"].is_string())
        .map(|(_, r)| r)
        .collect()
}

#[test]
fn every_alert_has_a_summary_a_description_and_a_runbook_section() {
    let docs = read(DOCS);
    let anchors = anchors(&docs);
    let sections = runbook_sections(&docs);
    let alerts = alerts();
    assert!(alerts.len() >= 6, "{} alerts", alerts.len());
    let mut names = BTreeSet::new();
    for alert in &alerts {
        let name = text(&alert["alert"]).unwrap();
        assert!(name.starts_with("PolicyHost"), "{name}");
        assert!(names.insert(name.to_owned()), "{name} twice");
        let severity = text(&alert["labels"]["severity"]).unwrap_or_default();
        assert!(
            SEVERITIES.contains(&severity),
            "{name}: severity {severity:?}"
        );
        for annotation in ["summary", "description"] {
            let said = text(&alert["annotations"][annotation]).unwrap_or_default();
            assert!(!said.trim().is_empty(), "{name}: no {annotation}");
        }
        let url = text(&alert["annotations"]["runbook_url"]).unwrap_or_default();
        let (page, anchor) = url
            .split_once('#')
            .unwrap_or_else(|| panic!("{name}: runbook_url {url:?} has no anchor"));
        assert!(page.ends_with("/docs/monitoring.md"), "{name}: {url}");
        assert!(anchors.contains(anchor), "{name}: {DOCS} has no #{anchor}");
        assert_eq!(anchor, name.to_lowercase(), "{name}: its own section");
    }
    let sections: BTreeSet<String> = sections.into_iter().collect();
    assert_eq!(sections, names, "{DOCS}'s runbook sections are the alerts");
}

/// A promtool test file's series selector: its metric and its labels.
fn series(selector: &str) -> (String, Vec<(String, String)>) {
    let re = Regex::new(r#"^([a-z_:]+)\{(.*)\}$"#).unwrap();
    let pair = Regex::new(r#"([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)""#).unwrap();
    let c = re
        .captures(selector.trim())
        .unwrap_or_else(|| panic!("series {selector:?}: name{{labels}}"));
    let labels = pair
        .captures_iter(&c[2])
        .map(|p| (p[1].to_owned(), p[2].to_owned()))
        .collect();
    (c[1].to_owned(), labels)
}

fn test_files() -> Vec<(String, Yaml)> {
    let mut files: Vec<String> = std::fs::read_dir(root().join(TESTS))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".yaml") || n.ends_with(".yml"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|f| {
            let path = format!("{TESTS}/{f}");
            let doc = yaml(&path);
            (path, doc)
        })
        .collect()
}

/// A series as the host writes it and node_exporter exports it: a metric of
/// the catalogue with exactly its own labels, and the machine's and
/// node_exporter's.
fn check_series(file: &str, selector: &str, wrong: &mut Vec<String>) {
    let (name, labels) = series(selector);
    let Some(metric) = super::find(&name) else {
        wrong.push(format!("{file}: {name} is no metric the host writes"));
        return;
    };
    let own: BTreeSet<&str> = labels
        .iter()
        .map(|(l, _)| l.as_str())
        .filter(|l| !is_ambient_label(l))
        .collect();
    let expected: BTreeSet<&str> = metric.labels.iter().copied().collect();
    if own != expected {
        wrong.push(format!(
            "{file}: {selector}: labels {own:?}, the host writes {expected:?}"
        ));
    }
    for ambient in ["instance", "job", "label_role"] {
        if !labels.iter().any(|(l, _)| l == ambient) {
            wrong.push(format!("{file}: {selector}: no {ambient}"));
        }
    }
}

#[test]
fn every_alert_and_rule_is_tested_firing_and_quiet_on_the_hosts_series() {
    let mut fires = BTreeSet::new();
    let mut quiet = BTreeSet::new();
    let mut evaluated = BTreeSet::new();
    let mut tested_files = BTreeSet::new();
    let mut wrong = Vec::new();
    for (file, doc) in test_files() {
        for rule_file in doc["rule_files"].as_sequence().expect("rule_files") {
            let rule_file = rule_file.as_str().unwrap();
            let resolved = Path::new(&file).parent().unwrap().join(rule_file);
            tested_files.insert(
                resolved
                    .components()
                    .fold(PathBuf::new(), |mut p, c| {
                        match c {
                            std::path::Component::ParentDir => {
                                p.pop();
                            }
                            c => p.push(c),
                        }
                        p
                    })
                    .to_string_lossy()
                    .into_owned(),
            );
        }
        for test in doc["tests"].as_sequence().expect("tests") {
            for input in test["input_series"].as_sequence().into_iter().flatten() {
                check_series(&file, text(&input["series"]).unwrap(), &mut wrong);
            }
            for case in test["alert_rule_test"].as_sequence().into_iter().flatten() {
                let name = text(&case["alertname"]).unwrap().to_owned();
                let expected = case["exp_alerts"].as_sequence().map_or(0, Vec::len);
                if expected > 0 {
                    fires.insert(name);
                } else {
                    quiet.insert(name);
                }
            }
            for case in test["promql_expr_test"].as_sequence().into_iter().flatten() {
                for name in names_in(text(&case["expr"]).unwrap()) {
                    evaluated.insert(name);
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "test series not shaped as the host writes them:\n{}",
        wrong.join("\n")
    );
    for rule_file in RULE_FILES {
        assert!(
            tested_files.contains(rule_file),
            "no test file of {TESTS} loads {rule_file}: {tested_files:?}"
        );
    }
    for alert in alerts() {
        let name = text(&alert["alert"]).unwrap();
        assert!(fires.contains(name), "no test where {name} fires");
        assert!(quiet.contains(name), "no test where {name} stays quiet");
    }
    for (_, rule) in rules() {
        if let Some(record) = text(&rule["record"]) {
            assert!(
                evaluated.contains(record),
                "no promql_expr_test of {record}"
            );
        }
    }
}

#[test]
fn the_table_renders_every_kind_and_scope() {
    let example = Metric {
        name: "policy_host_x_total",
        kind: Kind::Counter,
        scope: Scope::Watch,
        labels: &["a", "b"],
        help: "Help.",
    };
    assert_eq!(example.kind.word(), "counter");
    assert_eq!(scope_words(example.scope), "watch");
    assert_eq!(
        names_in(
            r#"sum by (label_role) (policy_host_a{state="policy_host_b"}) + x:policy_host_c:sum"#
        ),
        ["policy_host_a", "x:policy_host_c:sum"]
            .map(str::to_owned)
            .into()
    );
    assert_eq!(
        selectors(r#"policy_host_a{state!="x,y", label_role=~"$role"} or policy_host_b"#),
        [(
            "policy_host_a".to_owned(),
            vec!["state".to_owned(), "label_role".to_owned()]
        )]
    );
}

/// The backticked words of `cell` that are one word (`total`, not
/// `policy-host pause`).
fn backticked(cell: &str) -> Vec<&str> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .filter(|w| !w.contains(' '))
        .collect()
}

#[test]
fn the_docs_label_values_are_the_catalogues() {
    let docs = read(DOCS);
    // `| `label` (`metric`) | `a`, `b` |` rows: the label, the metric when
    // the row is one metric's, the values.
    let rows: Vec<(&str, Option<&str>, BTreeSet<&str>)> = docs
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split(" | ").collect();
            let [first, values] = cells.as_slice() else {
                return None;
            };
            let named = backticked(first.trim_start_matches("| "));
            let label = *named.first()?;
            let values = backticked(values.trim_end_matches(" |"));
            Some((label, named.get(1).copied(), values.into_iter().collect()))
        })
        .collect();
    for set in LABEL_VALUES {
        let row = rows
            .iter()
            .find(|(label, metric, _)| {
                *label == set.label && metric.is_none_or(|m| m == set.metric)
            })
            .unwrap_or_else(|| panic!("{DOCS} has no row for {}{{{}}}", set.metric, set.label));
        let want: BTreeSet<&str> = set.values.iter().copied().collect();
        assert_eq!(
            row.2, want,
            "{DOCS}: the values of {}{{{}}}",
            set.metric, set.label
        );
    }
}
