//! The packaged host.toml: generated from the declared settings, so it
//! never drifts from the options.

use super::options::all_settings;
use super::setting::{Kind, Setting};

/// The settings the packaged host.toml sets (uncommented, at the example
/// value): where every run writes its report and metrics.
const PACKAGE_SETS: [&str; 2] = ["report_file", "metrics_file"];

/// The packaged `/etc/policy-host/host.toml`: every setting, commented out
/// at its default and explained, and how to list policies. Generated from
/// the declared settings, so it never drifts from the options.
pub fn host_toml_template() -> String {
    use std::fmt::Write as _;
    let mut out = String::from(
        "# /etc/policy-host/host.toml: the settings of policy host on this machine.\n\
         #\n\
         # Every setting is listed below at its default, commented out: uncomment a line to\n\
         # change it (report_file and metrics_file are set: every run writes them, by the timer\n\
         # or by hand). The command line overrides this file (policy-host(8)). An unknown key or a\n\
         # bad value stops every run with an error that names it.\n\
         #\n\
         # `policy-host run` with no policy named runs the [[policy]] list at the end, in order.\n\
         # With none listed, a run succeeds and does nothing.\n",
    );
    for s in all_settings().filter(|s| !s.key.contains('.')) {
        write_entry(&mut out, s, s.key);
    }
    for table in ["limits", "watch"] {
        let _ = writeln!(out, "\n[{table}]");
        if table == "watch" {
            out.push_str("# `policy-host watch` (policy-host-watch.service) alone.\n");
        }
        let prefix = format!("{table}.");
        for s in all_settings().filter(|s| s.key.starts_with(&prefix)) {
            write_entry(&mut out, s, &s.key[prefix.len()..]);
        }
    }
    out.push_str(LABELS_EXAMPLE);
    out.push_str(
        "\n# The policies `policy-host run` runs, in order: each a signed policy (a file, a directory\n\
         # of *.wasm files, or an oci:// reference) and, optionally, its signed settings (a file or\n\
         # an oci:// reference). Relative paths are relative to this file's directory.\n\
         #\n\
         #[[policy]]\n\
         #source = \"oci://registry.example.com/policies/web:1.4\"\n\
         #settings = \"oci://registry.example.com/settings/web:prod\"\n\
         #\n",
    );
    out.push_str(BUILT_IN_POLICY_EXAMPLE);
    out
}

/// The `[labels]` table, commented: names the operator gives this machine,
/// checked when host.toml is read (`crate::facts::Labels::check`).
pub(super) const LABELS_EXAMPLE: &str = "
# This machine's labels: policies select by them, and reports and metrics carry them (names
# and values: letters, digits and : - _ . \\ @; `policy-host facts` shows what policies see).
#[labels]
#role = \"web\"
#site = \"eu-west-1\"
";

/// The value a setting's line shows: its default, or an example where it
/// has none.
fn example_value(s: &Setting) -> String {
    match (s.kind, s.default) {
        (Kind::Path | Kind::Choice(_), Some(default)) => format!("{default:?}"),
        (Kind::Patterns, _) => "[\"web-*\", \"nginx.service\"]".to_owned(),
        (Kind::Hosts, _) => "[\"registry.internal:5000\"]".to_owned(),
        (Kind::Prefixes, Some(default)) => format!(
            "[{}]",
            default
                .split(',')
                .map(|d| format!("{d:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        (Kind::OptionalPath, _) if s.key == "registry_auth" => {
            "\"/etc/policy-host/docker/config.json\"".to_owned()
        }
        (Kind::OptionalPath, _) if s.key == "report_file" => {
            "\"/var/lib/policy-host/last-run.json\"".to_owned()
        }
        (Kind::OptionalPath, _) if s.key == "metrics_file" => {
            "\"/var/lib/prometheus/node-exporter/policy-host.prom\"".to_owned()
        }
        (Kind::OptionalPath, _) => "\"/etc/policy-host/registry-ca.pem\"".to_owned(),
        (_, Some(default)) => default.to_owned(),
        (_, None) => "\"\"".to_owned(),
    }
}

/// One setting: its help, wrapped, where it comes from on the command line
/// and its default, then its line (commented, unless the package sets it).
fn write_entry(out: &mut String, s: &Setting, key: &str) {
    use std::fmt::Write as _;
    let _ = writeln!(out);
    let help = s.help.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut line = String::from("#");
    for word in help.split(' ') {
        if line.len() + word.len() + 1 > 92 {
            let _ = writeln!(out, "{line}");
            line = String::from("#");
        }
        line.push(' ');
        line.push_str(word);
    }
    let _ = writeln!(out, "{line}");
    let default = match (s.kind, s.default) {
        (Kind::Patterns | Kind::Hosts, _) => "none".to_owned(),
        (Kind::Prefixes, Some(default)) => default.replace(',', ", "),
        (Kind::OptionalPath, _) => "none".to_owned(),
        (_, Some(default)) => default.to_owned(),
        (_, None) => "none".to_owned(),
    };
    let _ = writeln!(out, "# (command line: --{}; default: {default})", s.flag);
    // Set by the package, so that every run writes them, by the timer
    // or by hand: monitoring reads them.
    let set = PACKAGE_SETS.contains(&s.key);
    let _ = writeln!(
        out,
        "{}{key} = {}",
        if set { "" } else { "#" },
        example_value(s)
    );
}

/// The end of the host.toml template: the built-in manifest policy, made
/// ready to run. Its command lines (`#   ...`) are the ones README.Debian
/// gives, word for word; tests/tests/debian_package.rs runs them inside the
/// sandbox and then this `[[policy]]`, uncommented.
pub const BUILT_IN_POLICY_EXAMPLE: &str = "\
# The built-in manifest policy (see /usr/share/doc/policy-host/README.Debian). Like every
# policy it runs only when a key this machine trusts signed it, under the file name given
# here. Once, a key for this machine (leave out --unencrypted to protect it with a
# password, which signing then asks for):
#   policy-host keygen --unencrypted --out /root/policy-host
#   install -m 0644 /root/policy-host/policy-host.pub /etc/policy-host/trusted-keys/local.pub
# Then, with the desired state written to /etc/policy-host/manifest.yaml, three commands:
#   install -D -m 0644 /usr/lib/policy-host/manifest-policy.wasm /etc/policy-host/policies/manifest-policy.wasm
#   policy-host sign /etc/policy-host/policies/manifest-policy.wasm --key /root/policy-host/policy-host.key
#   policy-host sign /etc/policy-host/manifest.yaml --key /root/policy-host/policy-host.key
# and uncomment these three lines:
#[[policy]]
#source = \"/etc/policy-host/policies/manifest-policy.wasm\"
#settings = \"/etc/policy-host/manifest.yaml\"
";
