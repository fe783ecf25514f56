//! host.toml's `[labels]`: the operator's names for this machine
//! (`role = "web"`), read into [`Labels`] when the file is read, so a bad
//! label stops every command that reads host.toml, with the file, the
//! label, its line and the problem named.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::bail;

use super::options::all_settings;
use crate::facts::Labels;

/// The labels of `value` (host.toml's `labels`), checked.
pub(super) fn read(path: &Path, text: &str, value: toml::Value) -> anyhow::Result<Labels> {
    let toml::Value::Table(table) = value else {
        bail!(
            "host configuration {}: `labels`{} is a table: a `[labels]` header, then `name = \"value\"` lines",
            path.display(),
            at(line_of(text, None))
        );
    };
    let mut labels = BTreeMap::new();
    for (name, value) in table {
        let toml::Value::String(value) = value else {
            // `[labels]` then a setting: TOML reads it as a label.
            if all_settings().any(|s| s.key == name) {
                bail!(
                    "host configuration {}: `{name}`{} is below the `[labels]` header, so TOML reads it as a label; move it above `[labels]`",
                    path.display(),
                    at(line_of(text, Some(&name)))
                );
            }
            bail!(
                "host configuration {}: [labels]{}: label {name:?}: the value is a TOML {}; a label's value is a string (`{name} = \"...\"`)",
                path.display(),
                at(line_of(text, Some(&name))),
                value.type_str()
            );
        };
        labels.insert(name, value);
    }
    Labels::check(labels).map_err(|error| {
        anyhow::anyhow!(
            "host configuration {}: [labels]{}: {error}",
            path.display(),
            at(line_of(text, error.label()))
        )
    })
}

/// ` (line N)`, or nothing when the line is not known.
fn at(line: Option<usize>) -> String {
    line.map(|n| format!(" (line {n})")).unwrap_or_default()
}

/// The line where the label `name` is given below `[labels]` (quoted or
/// not), or, for `None`, the `[labels]` header's line.
fn line_of(text: &str, name: Option<&str>) -> Option<usize> {
    let header = text
        .lines()
        .position(|l| l.trim().starts_with("[labels]"))?;
    let Some(name) = name else {
        return Some(header + 1);
    };
    text.lines()
        .enumerate()
        .skip(header + 1)
        .find(|(_, line)| {
            line.split_once('=').is_some_and(|(key, _)| {
                let key = key.trim();
                let unquoted = key
                    .strip_prefix('"')
                    .and_then(|k| k.strip_suffix('"'))
                    .or_else(|| key.strip_prefix('\'').and_then(|k| k.strip_suffix('\'')))
                    .unwrap_or(key);
                unquoted == name
            })
        })
        .map(|(i, _)| i + 1)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::settings::ConfigFile;

    fn file(text: &str) -> anyhow::Result<ConfigFile> {
        ConfigFile::parse(Path::new("/etc/policy-host/host.toml"), text)
    }

    fn error(text: &str) -> String {
        format!("{:#}", file(text).expect_err("should be refused"))
    }

    #[test]
    fn labels_are_read_sorted_and_absent_means_none() {
        let config =
            file("lock_timeout_secs = 30\n\n[labels]\nzone = \"eu-west-1\"\nrole = \"web\"\n")
                .unwrap();
        let labels: Vec<(&str, &str)> = config.labels().iter().collect();
        assert_eq!(labels, [("role", "web"), ("zone", "eu-west-1")]);
        assert!(file("").unwrap().labels().is_empty());
        assert!(file("[labels]\n").unwrap().labels().is_empty());
    }

    #[test]
    fn a_bad_label_is_refused_naming_the_file_the_label_its_line_and_the_problem() {
        let long = "w".repeat(300);
        assert_eq!(
            error(&format!("[labels]\nrole = \"{long}\"\n")),
            "host configuration /etc/policy-host/host.toml: [labels] (line 2): label \"role\": \
             value is 300 bytes, at most 256"
        );
        assert_eq!(
            error("[labels]\nsite = \"x\"\n\"rôle\" = \"web\"\n"),
            "host configuration /etc/policy-host/host.toml: [labels] (line 3): label \"rôle\": \
             the name has the character 'ô'; a label takes only ASCII letters, digits and : - _ . \\ @"
        );
        assert!(error("[labels]\n\"os.id\" = \"debian\"\n")
            .contains("[labels] (line 2): label \"os.id\": the host gathers a fact of that name"));
        assert!(error("[labels]\na-b = \"1\"\na_b = \"2\"\n")
            .contains("(line 3): labels \"a-b\" and \"a_b\" are both `label_a_b` in metrics"));
        assert!(error("[labels]\nweight = 3\n").ends_with(
            "[labels] (line 2): label \"weight\": the value is a TOML integer; a label's value is \
             a string (`weight = \"...\"`)"
        ));
        assert!(error("labels = \"web\"\n").contains("`labels` is a table"));
        let many: String = (0..65).map(|i| format!("l{i} = \"v\"\n")).collect();
        assert!(error(&format!("[labels]\n{many}"))
            .ends_with("[labels] (line 1): 65 labels, at most 64"));
    }

    #[test]
    fn a_setting_below_the_labels_header_is_said_to_belong_above_it() {
        assert_eq!(
            error("[labels]\nrole = \"web\"\nlock_timeout_secs = 30\n"),
            "host configuration /etc/policy-host/host.toml: `lock_timeout_secs` (line 3) is below \
             the `[labels]` header, so TOML reads it as a label; move it above `[labels]`"
        );
    }

    #[test]
    fn the_templates_labels_uncommented_are_read() {
        let template = crate::settings::host_toml_template();
        assert!(template.contains(super::super::template::LABELS_EXAMPLE));
        let uncommented = template.replace(
            super::super::template::LABELS_EXAMPLE,
            &super::super::template::LABELS_EXAMPLE
                .replace("\n#[labels]", "\n[labels]")
                .replace("\n#role", "\nrole")
                .replace("\n#site", "\nsite"),
        );
        let labels: Vec<(String, String)> = file(&uncommented)
            .unwrap()
            .labels()
            .iter()
            .map(|(n, v)| (n.to_owned(), v.to_owned()))
            .collect();
        assert_eq!(
            labels,
            [
                ("role".to_owned(), "web".to_owned()),
                ("site".to_owned(), "eu-west-1".to_owned())
            ]
        );
    }

    #[test]
    fn the_run_settings_carry_the_labels() {
        let config = file("[labels]\nrole = \"web\"\n").unwrap();
        let settings = crate::settings::RunSettings::resolve(
            &Default::default(),
            &Default::default(),
            &Default::default(),
            &Default::default(),
            &config,
        )
        .unwrap();
        assert_eq!(settings.labels.get("role"), Some("web"));
    }
}
