//! What a policy function sees of the run: its settings, the machine's
//! facts and whether it is a noop run.

use serde::de::DeserializeOwned;

use crate::contract::Fact;
use crate::facts::Facts;
use crate::settings::{parse_document, SettingsError};

/// What a policy function sees of the run.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    settings: Option<&'a str>,
    noop: bool,
    facts: Facts<'a>,
}

impl<'a> Context<'a> {
    /// A context with the given settings text (`host run --settings`).
    pub fn new(settings: Option<&'a str>, noop: bool) -> Self {
        Self {
            settings,
            noop,
            facts: Facts::default(),
        }
    }

    /// The same context, on a machine with `facts`.
    pub fn with_facts(self, facts: &'a [Fact]) -> Self {
        Self {
            facts: Facts::new(facts),
            ..self
        }
    }

    /// The machine's fact `name`, as the host gave it: one it gathers
    /// (`os.id`, `os.version_id`, `arch`, `hostname`, ...: see
    /// [`crate::facts::GATHERED`]) or a label of host.toml (`role`).
    /// `None` when the host gave none of that name.
    pub fn fact(&self, name: &str) -> Option<&'a str> {
        self.facts.get(name)
    }

    /// Every fact of the machine, with typed helpers (`os_id()`,
    /// `cpus()`, `label("role")`): see [`crate::facts`].
    pub fn facts(&self) -> Facts<'a> {
        self.facts
    }

    /// The settings document as text, if the host was given one.
    pub fn settings(&self) -> Option<&'a str> {
        self.settings
    }

    /// The settings document parsed into `T`: as JSON when it starts with `{`
    /// or `[` (after leading whitespace), as YAML otherwise. An empty YAML
    /// document reads like an empty mapping, so a `T` whose fields all have
    /// defaults accepts it.
    ///
    /// Errors name the field at fault and the line:
    /// `settings: server.port: invalid type: string "x", expected u16 at line 3 column 9`.
    /// Without a settings document (`host run` without `--settings`) the
    /// error is [`SettingsError::Missing`]; use [`settings`](Self::settings)
    /// first to make settings optional. Returned from the policy function with
    /// `?`, either error becomes the report's policy error and nothing is
    /// applied.
    ///
    /// ```
    /// use guest_sdk::prelude::*;
    /// use serde::Deserialize;
    ///
    /// #[derive(Deserialize)]
    /// #[serde(deny_unknown_fields)]
    /// struct Settings {
    ///     services: Vec<String>,
    ///     #[serde(default)]
    ///     enable: bool,
    /// }
    ///
    /// fn fleet(ctx: &Context) -> Result<Policy, PolicyError> {
    ///     let settings: Settings = ctx.settings_as()?;
    ///     let mut policy = Policy::new();
    ///     for name in settings.services {
    ///         policy.add(Service::new(name).running().enable(settings.enable));
    ///     }
    ///     Ok(policy)
    /// }
    ///
    /// let mut system = SimulatedSystem::new().with_unit("web", UnitState::stopped());
    /// let options = RunOptions::default().with_settings("services: [web]\nenable: true\n");
    /// guest_sdk::run(fleet, &mut system, &options).assert_converged();
    /// system.assert_mutating_calls(&["start web", "enable web"]);
    ///
    /// // A settings error is the policy's error; nothing is queried or changed.
    /// let options = RunOptions::default().with_settings("services: [web]\nenabled: true\n");
    /// let report = guest_sdk::run(fleet, &mut system, &options);
    /// assert!(report.errors[0].starts_with("policy: settings: unknown field `enabled`"));
    /// assert!(report.errors[0].contains("at line 2 column 1"));
    /// ```
    pub fn settings_as<T: DeserializeOwned>(&self) -> Result<T, SettingsError> {
        Ok(parse_document(
            self.settings.ok_or(SettingsError::Missing)?,
        )?)
    }

    /// True in a noop (dry) run. Policies rarely need this: the SDK already
    /// makes no change in noop mode.
    pub fn is_noop(&self) -> bool {
        self.noop
    }
}
