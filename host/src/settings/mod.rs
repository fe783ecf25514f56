//! One settings model: every option of the host is declared once, in
//! [`options`], as a typed field with one name on the command line, one key in host.toml, one
//! default and one help text, and read from both places by the same code.
//!
//! The command line overrides the file, which overrides the default, except
//! for lists (`allow_units`), which add up. A bad value is an error that
//! names where it came from: `--memory-limit: ...` or
//! `/etc/policy-host/host.toml: limits.memory_mib: ...`. Values out of range
//! are errors, never silently changed.
//!
//! ```toml
//! allow_units = ["web-*", "nginx.service"]
//! trusted_keys_dir = "/etc/policy-host/trusted-keys"
//! lock_file = "/run/policy-host/lock"
//! lock_timeout_secs = 600
//! cache_dir = "/var/cache/policy-host"
//! state_dir = "/var/lib/policy-host"
//! registry_ca = "/etc/policy-host/registry-ca.pem"
//! insecure_registries = ["127.0.0.1:5000"]
//! registry_timeout_secs = 30
//! provider = "auto"
//!
//! # This machine's names: policies select by them, reports and metrics carry them.
//! [labels]
//! role = "web"
//! site = "eu-west-1"
//!
//! [limits]
//! cpu_time_secs = 10
//! memory_mib = 64
//! call_budget = 10000
//! log_bytes = 1048576
//! report_bytes = 1048576
//! wall_clock_secs = 900
//! systemctl_timeout_secs = 90
//!
//! # What `host run` with no policy named runs, in order.
//! [[policy]]
//! source = "oci://registry.example.com/policies/web:1.4"
//! settings = "oci://registry.example.com/settings/web:prod"
//!
//! [[policy]]
//! source = "/etc/policy-host/policies/manifest-policy.wasm"
//! settings = "/etc/policy-host/manifest.yaml"
//! ```

//!
//! The modules, by job: [`setting`] (what an option is: flag, key, kind,
//! scope), [`declare`] (how an option is declared),
//! [`options`] (the declaration: the command-line flags and typed values it
//! generates), [`value`] (reading and checking each kind of value),
//! [`file`] (host.toml; its `[labels]` in `labels`), [`resolve`] (what the commands use) and
//! [`template`] (the packaged host.toml).

pub mod declare;
pub mod file;
mod labels;
pub mod options;
pub mod resolve;
pub mod setting;
pub mod template;
pub mod value;

pub use file::{ConfigFile, PolicyEntry, DEFAULT_CONFIG_FILE};
pub use options::{
    all_settings, CacheFlags, CacheValues, OutputFlags, OutputValues, ProviderFlags, RegistryFlags,
    RunFlags, StateFlags, TrustFlags, WatchFlags, WatchValues,
};
pub use resolve::{resolve_trust, ProviderSettings, RegistrySettings, RunSettings};
pub use setting::{Kind, Scope, Setting};
pub use template::{host_toml_template, BUILT_IN_POLICY_EXAMPLE};
pub use value::Source;

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use super::*;

    fn file(text: &str) -> anyhow::Result<ConfigFile> {
        ConfigFile::parse(Path::new("/etc/policy-host/host.toml"), text)
    }

    fn run(flags: RunFlags, text: &str) -> anyhow::Result<RunSettings> {
        RunSettings::resolve(
            &flags,
            &CacheFlags::default(),
            &ProviderFlags::default(),
            &StateFlags::default(),
            &file(text)?,
        )
    }

    fn error(flags: RunFlags, text: &str) -> String {
        format!("{:#}", run(flags, text).expect_err("should be refused"))
    }

    #[test]
    fn every_default_is_valid_and_the_documented_example_parses() {
        let defaults = RunSettings::defaults();
        assert_eq!(defaults.limits.memory_bytes, 64 << 20);
        assert_eq!(defaults.systemctl_timeout, Duration::from_secs(90));
        assert!(defaults.allow.is_none());
        let text = include_str!("mod.rs")
            .lines()
            .filter_map(|l| l.strip_prefix("//! "))
            .skip_while(|l| !l.starts_with("```toml"))
            .skip(1)
            .take_while(|l| !l.starts_with("```"))
            .collect::<Vec<_>>()
            .join("\n");
        let settings = run(RunFlags::default(), &text).unwrap();
        assert_eq!(settings.limits.wall_clock, Duration::from_secs(900));
        assert_eq!(settings.labels.get("role"), Some("web"));
        assert_eq!(
            settings.allow.unwrap().patterns(),
            ["web-*", "nginx.service"]
        );
    }

    #[test]
    fn every_setting_has_one_flag_and_one_key() {
        let settings: Vec<&Setting> = all_settings().collect();
        for (i, a) in settings.iter().enumerate() {
            for b in &settings[i + 1..] {
                assert_ne!(a.flag, b.flag);
                assert_ne!(a.key, b.key);
            }
            let optional = matches!(a.kind, Kind::Patterns | Kind::Hosts | Kind::OptionalPath);
            assert_eq!(a.default.is_none(), optional, "{}", a.flag);
        }
    }

    #[test]
    fn the_command_line_overrides_the_file_which_overrides_the_default() {
        let text = "[limits]\nmemory_mib = 32\ncpu_time_secs = 2.5\n";
        let settings = run(
            RunFlags {
                memory_limit: vec!["16".into()],
                ..RunFlags::default()
            },
            text,
        )
        .unwrap();
        assert_eq!(settings.limits.memory_bytes, 16 << 20);
        assert_eq!(settings.limits.cpu_time, Duration::from_millis(2500));
        assert_eq!(settings.limits.call_budget, 10_000);
    }

    #[test]
    fn policies_are_listed_in_order_relative_to_the_file() {
        let config = file(
            "[[policy]]\nsource = \"oci://r.example/policies/web:1\"\nsettings = \"web.yaml\"\n\n[[policy]]\nsource = \"/usr/lib/p.wasm\"\nmemory_mib = 256\n",
        )
        .unwrap();
        assert_eq!(
            config.policies,
            [
                PolicyEntry {
                    source: "oci://r.example/policies/web:1".into(),
                    settings: Some("/etc/policy-host/web.yaml".into()),
                    memory_mib: None,
                },
                PolicyEntry {
                    source: "/usr/lib/p.wasm".into(),
                    settings: None,
                    memory_mib: Some(256),
                },
            ]
        );
        assert_eq!(config.policies[1].memory_bytes(), Some(256 << 20));
        let err = format!("{:#}", file("[[policy]]\nsorce = \"x\"\n").unwrap_err());
        assert!(err.contains("`[[policy]]` takes `source`"), "{err}");
        for wrong in ["0", "65537"] {
            let text = format!("[[policy]]\nsource = \"/usr/lib/p.wasm\"\nmemory_mib = {wrong}\n");
            let err = format!("{:#}", file(&text).unwrap_err());
            assert!(
                err.contains(&format!("the [[policy]] of /usr/lib/p.wasm: memory_mib = {wrong} is not between 1 and 65536")),
                "{err}"
            );
        }
    }

    #[test]
    fn registry_settings_are_read_and_checked() {
        let config =
            file("insecure_registries = [\"127.0.0.1:5000\"]\nregistry_timeout_secs = 5\n")
                .unwrap();
        let flags = RegistryFlags {
            insecure_registries: vec!["localhost:5001".into()],
            ..RegistryFlags::default()
        };
        let registry = RegistrySettings::resolve(&flags, &config).unwrap();
        assert_eq!(registry.insecure, ["127.0.0.1:5000", "localhost:5001"]);
        assert_eq!(registry.timeout, Duration::from_secs(5));
        assert_eq!(registry.ca, None);
        let bad = file("insecure_registries = [\"http://x/\"]\n").unwrap();
        let err = RegistrySettings::resolve(&RegistryFlags::default(), &bad).unwrap_err();
        assert!(
            format!("{err:#}").contains("insecure_registries"),
            "{err:#}"
        );
    }

    #[test]
    fn the_template_parses_lists_every_setting_and_each_line_uncommented_parses() {
        let template = host_toml_template();
        let config = file(&template).unwrap();
        assert!(config.policies.is_empty());
        run(RunFlags::default(), &template).unwrap();
        // The two the package sets are set, to where the package's unit
        // and monitoring expect them.
        let outputs = OutputFlags::default().resolve(&config).unwrap();
        assert_eq!(
            outputs.report_file.as_deref(),
            Some(std::path::Path::new("/var/lib/policy-host/last-run.json"))
        );
        assert_eq!(
            outputs.metrics_file.as_deref(),
            Some(std::path::Path::new(
                "/var/lib/prometheus/node-exporter/policy-host.prom"
            ))
        );
        for s in all_settings() {
            let key = s.key.rsplit('.').next().unwrap();
            if ["report_file", "metrics_file"].contains(&key) {
                assert!(template.contains(&format!("\n{key} = ")), "{key}");
                continue;
            }
            let line = template
                .lines()
                .find(|l| l.starts_with(&format!("#{key} = ")))
                .unwrap_or_else(|| panic!("{} is not in the template", s.key));
            // Uncommented, the line is a valid setting in its place.
            let uncommented = template.replacen(line, &line[1..], 1);
            let config = file(&uncommented).unwrap_or_else(|e| panic!("{line}: {e:#}"));
            assert!(config.value(s.key).is_some(), "{line}");
            RunSettings::resolve(
                &RunFlags::default(),
                &CacheFlags::default(),
                &ProviderFlags::default(),
                &StateFlags::default(),
                &config,
            )
            .unwrap_or_else(|e| panic!("{line}: {e:#}"));
            RegistrySettings::resolve(&RegistryFlags::default(), &config)
                .unwrap_or_else(|e| panic!("{line}: {e:#}"));
        }
    }

    #[test]
    fn a_setting_below_a_policy_header_is_said_to_belong_above_it() {
        let text = "[[policy]]\nsource = \"/etc/policy-host/policies\"\nlock_timeout_secs = 30\n";
        let error = format!("{:#}", file(text).unwrap_err());
        assert_eq!(
            error,
            "host configuration /etc/policy-host/host.toml: `lock_timeout_secs` (line 3) is below a \
             `[[policy]]` header, so TOML reads it as that policy's; move it above the first `[[policy]]`"
        );
        // Anything else in a [[policy]] is still its own mistake.
        let text = "[[policy]]\nsource = \"a.wasm\"\nsetings = \"s.yaml\"\n";
        assert!(format!("{:#}", file(text).unwrap_err())
            .contains("`[[policy]]` takes `source` and, optionally, `settings`"));
        // Above the header, the same line is a setting.
        let text = "lock_timeout_secs = 30\n[[policy]]\nsource = \"a.wasm\"\n";
        assert_eq!(file(text).unwrap().policies.len(), 1);
        // The same trap with `[limits]`: said the same way.
        let text = "[limits]\nmemory_mib = 32\ninsecure_registries = [\"r:5000\"]\n";
        assert_eq!(
            format!("{:#}", file(text).unwrap_err()),
            "host configuration /etc/policy-host/host.toml: `insecure_registries` (line 3) is below \
             the `[limits]` header, so TOML reads it as `limits.insecure_registries`; move it above `[limits]`"
        );
    }

    #[test]
    fn allowlists_add_up() {
        let flags = ProviderFlags {
            allow_units: vec!["db".into()],
            ..ProviderFlags::default()
        };
        let config = file("allow_units = [\"web-*\"]\n").unwrap();
        let settings = RunSettings::resolve(
            &RunFlags::default(),
            &CacheFlags::default(),
            &flags,
            &StateFlags::default(),
            &config,
        )
        .unwrap();
        assert_eq!(settings.allow.unwrap().patterns(), ["web-*", "db"]);
    }

    #[test]
    fn errors_name_where_the_value_came_from() {
        assert_eq!(
            error(RunFlags {
            memory_limit: vec!["17592186044416".into()],
            ..RunFlags::default()
        }, ""),
            "--memory-limit: expected a whole number of MiB from 1 to 1048576, got \"17592186044416\""
        );
        assert_eq!(
            error(RunFlags::default(), "[limits]\nmemory_mib = 0\n"),
            "/etc/policy-host/host.toml: limits.memory_mib: expected a whole number of MiB from 1 to 1048576, got 0"
        );
        assert_eq!(
            error(RunFlags::default(), "[limits]\ncpu_time_secs = \"ten\"\n"),
            "/etc/policy-host/host.toml: limits.cpu_time_secs: expected more than 0 and at most 86400 seconds, got \"ten\""
        );
        assert!(error(
            RunFlags {
                wall_clock: vec!["nan".into()],
                ..RunFlags::default()
            },
            ""
        )
        .starts_with("--wall-clock:"));
        assert!(error(
            RunFlags {
                call_budget: vec!["-1".into()],
                ..RunFlags::default()
            },
            ""
        )
        .starts_with("--call-budget:"));
        assert!(error(RunFlags::default(), "allow_units = \"web\"\n")
            .contains("allow_units: expected a list of strings"));
        assert_eq!(
            error(RunFlags::default(), "allow_units = [\"web-[\"]\n")
                .split(": pattern")
                .next(),
            Some("/etc/policy-host/host.toml: allow_units")
        );
        let flags = ProviderFlags {
            allow_units: vec!["web-[".into()],
            ..ProviderFlags::default()
        };
        let refused = ProviderSettings::resolve(&flags, &file("").unwrap()).unwrap_err();
        assert!(format!("{refused:#}").starts_with("--allow-unit: pattern \"web-[\""));
    }

    #[test]
    fn unknown_keys_are_named_with_their_line() {
        let e = format!(
            "{:#}",
            file("allow_units = []\n[limits]\ncpu_secs = 3\n").unwrap_err()
        );
        assert!(
            e.contains("unknown setting `limits.cpu_secs` (line 3)"),
            "{e}"
        );
    }

    #[test]
    fn absent_default_file_is_empty_but_absent_explicit_file_is_an_error() {
        assert!(ConfigFile::load(Some(Path::new("/nonexistent/host.toml"))).is_err());
    }

    #[test]
    fn trust_settings_read_the_files_directory() {
        let file = file("trusted_keys_dir = \"/srv/keys\"\n").unwrap();
        let trust = resolve_trust(&[], &TrustFlags::default(), &file).unwrap();
        assert_eq!(trust.keys_dir, Path::new("/srv/keys"));
        let flags = TrustFlags {
            trusted_keys_dir: vec!["/opt/keys".into()],
        };
        let trust = resolve_trust(&[], &flags, &file).unwrap();
        assert_eq!(trust.keys_dir, Path::new("/opt/keys"));
    }

    #[test]
    fn each_choice_word_means_something() {
        use super::value::Words as _;
        for word in crate::provider::StatusVia::WORDS {
            assert!(
                crate::provider::StatusVia::from_word(word).is_some(),
                "{word}"
            );
        }
        let settings = run(RunFlags::default(), "provider = \"systemctl\"\n").unwrap();
        assert_eq!(settings.status_via, crate::provider::StatusVia::Systemctl);
        assert!(error(RunFlags::default(), "provider = \"dbus\"\n")
            .ends_with("provider: expected one of auto, systemctl, got \"dbus\""));
    }

    #[test]
    fn a_single_valued_flag_given_twice_is_refused_and_a_list_adds_up() {
        use clap::Parser as _;
        let parse = |argv: &[&str]| {
            crate::cli::Cli::try_parse_from(["host", "run", "p.wasm"].iter().chain(argv))
        };
        assert!(parse(&["--cpu-time", "1", "--cpu-time", "2"]).is_err());
        let cli = parse(&["--allow-unit", "a", "--allow-unit", "b", "--cpu-time", "3"]).unwrap();
        let crate::cli::Command::Run(args) = cli.command else {
            panic!("not run")
        };
        assert_eq!(args.run.provider_flags.allow_units, ["a", "b"]);
        assert_eq!(args.run.run_flags.cpu_time, ["3"]);
    }
}
