//! The service type's apply logic: two phases, idempotent, with noop mode and
//! verification of the final state (docs/service-type.md). The words a
//! `status` carries (`static`, `alias`, `enabled-runtime`, ...) are read
//! here, and only here: the host reports them, the policy decides.

use std::collections::HashSet;

use crate::policy::{Policy, ValidService};
use crate::provider::{Provider, ProviderError, ServiceStatus};
use crate::report::{noop_message, Action, Event, FinalState, Report, RequestedState};
use crate::resource_ref::ResourceRef;
use crate::service::Ensure;

pub use crate::contract::{RunOptions, Watched};

/// A normal run: changes allowed, nothing refreshed or watched, no settings.
impl Default for RunOptions {
    fn default() -> Self {
        Self {
            noop: false,
            refreshed: Vec::new(),
            watched: Vec::new(),
            settings: None,
        }
    }
}

impl RunOptions {
    /// Options for a noop (dry) run.
    pub fn noop() -> Self {
        Self {
            noop: true,
            ..Self::default()
        }
    }

    /// Adds a reference that changed outside the policy.
    pub fn with_refreshed(mut self, reference: impl Into<String>) -> Self {
        self.refreshed.push(reference.into());
        self
    }

    /// Says that `reference` (`file#...`, `package#...`), which `service`
    /// subscribes to, changed since the service's last run: what the host
    /// tells a policy when it notices such a change by itself.
    pub fn with_changed(mut self, service: &str, reference: impl Into<String>) -> Self {
        self.watch_of(service).changed.push(reference.into());
        self
    }

    /// Says that a reference `service` subscribes to could not be read,
    /// and why: the service then fails, and nothing is done to it.
    pub fn with_unreadable(mut self, service: &str, error: impl Into<String>) -> Self {
        self.watch_of(service).errors.push(error.into());
        self
    }

    fn watch_of(&mut self, service: &str) -> &mut Watched {
        let resource = format!("service#{service}");
        let index = match self.watched.iter().position(|w| w.resource == resource) {
            Some(index) => index,
            None => {
                self.watched.push(Watched {
                    resource,
                    changed: Vec::new(),
                    errors: Vec::new(),
                });
                self.watched.len() - 1
            }
        };
        &mut self.watched[index]
    }

    /// Sets the settings document.
    pub fn with_settings(mut self, settings: impl Into<String>) -> Self {
        self.settings = Some(settings.into());
        self
    }
}

/// Applies `policy` through `provider`.
///
/// The policy is validated first; if it is invalid nothing is queried or
/// changed and the report carries the problems. Resources are then applied
/// in declaration order; one failing resource does not stop the others.
pub fn apply(policy: &Policy, provider: &mut dyn Provider, options: &RunOptions) -> Report {
    let services = match policy.validate() {
        Ok(services) => services,
        Err(errors) => return Report::rejected(errors),
    };
    let mut changed = HashSet::new();
    for text in &options.refreshed {
        match ResourceRef::parse(text) {
            Ok(reference) => {
                changed.insert(reference.key());
            }
            Err(e) => return Report::rejected(vec![format!("refresh: {e}")]),
        }
    }

    let mut events = Vec::with_capacity(services.len());
    for service in &services {
        let resource = service.resource_ref().to_string();
        let watched = options.watched.iter().find(|w| w.resource == resource);
        let event = apply_service(service, provider, options.noop, &changed, watched);
        if event.changed {
            changed.insert(service.key());
        }
        events.push(event);
    }
    Report {
        events,
        errors: Vec::new(),
    }
}

/// The running and enabled state of a service, as compared by the apply logic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Observed {
    ensure: Ensure,
    enabled: bool,
}

impl From<&ServiceStatus> for Observed {
    fn from(status: &ServiceStatus) -> Self {
        Self {
            ensure: Ensure::from_running(status.running),
            enabled: status.enabled,
        }
    }
}

impl From<Observed> for FinalState {
    fn from(o: Observed) -> Self {
        FinalState {
            ensure: o.ensure,
            enabled: o.enabled,
        }
    }
}

/// Phase 1: the running state. A triggered subscription restarts a service
/// only when it should run and does; a stopped service that should run is
/// started instead; `ensure: stopped` ignores subscriptions.
fn running_action(desired: Ensure, found: Ensure, triggered: bool) -> Option<Action> {
    match (desired, found) {
        (Ensure::Running, Ensure::Running) if triggered => Some(Action::Restarted),
        (Ensure::Running, Ensure::Stopped) => Some(Action::Started),
        (Ensure::Stopped, Ensure::Running) => Some(Action::Stopped),
        _ => None,
    }
}

/// Phase 2: the enabled state; `None` leaves the boot configuration alone.
fn enable_action(desired: Option<bool>, enabled: bool) -> Option<Action> {
    match (desired, enabled) {
        (Some(true), false) => Some(Action::Enabled),
        (Some(false), true) => Some(Action::Disabled),
        _ => None,
    }
}

/// The desired-state check (docs/service-type.md, "Verification"): ensure
/// must match; enable only when set.
fn is_desired(service: &ValidService, found: Observed) -> bool {
    found.ensure == service.ensure && service.enable.is_none_or(|want| want == found.enabled)
}

fn describe_desired(service: &ValidService) -> String {
    match service.enable {
        Some(true) => format!("{} and enabled", service.ensure),
        Some(false) => format!("{} and disabled", service.ensure),
        None => service.ensure.to_string(),
    }
}

fn describe_found(found: Observed) -> String {
    let enabled = if found.enabled { "enabled" } else { "disabled" };
    format!("{} and {enabled}", found.ensure)
}

/// Why `enable: false` cannot be reached by `disable` on the unit `status`
/// describes, with what the operator can do; `None` when it can
/// (docs/service-type.md, "Kinds of units").
fn unreachable_enable(service: &ValidService, status: &ServiceStatus) -> Option<String> {
    if service.enable != Some(false) {
        return None;
    }
    let name = &service.name;
    let word = status.enabled_word.as_str();
    let (kind, why) = match word {
        "static" => (
            "a static unit",
            "It has no [Install] section, so disable has nothing to remove, and it starts \
             whenever another unit needs it.",
        ),
        "indirect" => (
            "an indirect unit",
            "It is not enabled itself: its [Install] section only names other units (Also=), \
             or another name or instance of it is enabled; disable would disable those instead.",
        ),
        "generated" => (
            "a generated unit",
            "A systemd generator writes it at boot and on every daemon-reload, so disable has \
             nothing to remove.",
        ),
        "transient" => (
            "a transient unit",
            "It was created at runtime (systemd-run) and has no unit file for disable to \
             change; it disappears once it stops.",
        ),
        "alias" => {
            return Some(format!(
                "enable: false cannot be applied to {name}: it is an alias of another unit \
                 (systemctl is-enabled says \"alias\"). Disabling it would disable the unit it \
                 names and delete the alias. Manage the unit it points to instead: \
                 systemctl show -p Id {name} gives its name. Nothing was changed."
            ))
        }
        _ => return None,
    };
    Some(format!(
        "enable: false cannot be applied to {name}: it is {kind} (systemctl is-enabled says \
         \"{word}\"). {why} Drop enable from this service, or mask the unit outside the \
         policy (systemctl mask {unit}) if it must never start. Nothing was changed.",
        unit = name.unit_name()
    ))
}

fn apply_service(
    service: &ValidService,
    provider: &mut dyn Provider,
    noop: bool,
    changed: &HashSet<ResourceRef>,
    watched: Option<&Watched>,
) -> Event {
    let mut event = Event {
        resource: service.resource_ref().to_string(),
        changed: false,
        refreshed: false,
        noop,
        noop_message: None,
        actions: Vec::new(),
        failed: false,
        errors: Vec::new(),
        requested: RequestedState {
            ensure: service.ensure,
            enable: service.enable,
        },
        final_state: None,
    };

    // A subscribed file or package the host could not read: the service
    // fails, and nothing is done to it (its trigger cannot be known).
    if let Some(watched) = watched.filter(|w| !w.errors.is_empty()) {
        let mut event = event;
        event.failed = true;
        event.errors.extend(watched.errors.iter().cloned());
        return event;
    }
    let status = match provider.status(&service.name) {
        Ok(status) => status,
        Err(e) => {
            return fail(
                event,
                format!("status of {}: {}", service.name, e.message()),
            )
        }
    };
    let found = Observed::from(&status);
    if let Some(why) = unreachable_enable(service, &status) {
        event.final_state = Some(found.into());
        return fail(event, why);
    }
    let watched_changed = |r: &ResourceRef| {
        watched.is_some_and(|w| {
            w.changed
                .iter()
                .any(|c| ResourceRef::parse(c).is_ok_and(|c| c.key() == *r))
        })
    };
    let triggered = service
        .subscribe
        .iter()
        .any(|r| changed.contains(r) || watched_changed(r));
    let planned: Vec<Action> = running_action(service.ensure, found.ensure, triggered)
        .into_iter()
        .chain(enable_action(service.enable, found.enabled))
        .collect();

    event.refreshed = planned.contains(&Action::Restarted);
    event.changed = !planned.is_empty();
    if noop || planned.is_empty() {
        event.noop_message = if noop { noop_message(&planned) } else { None };
        event.actions = planned;
        event.final_state = Some(found.into());
        return event;
    }

    for action in planned {
        if let Err(e) = provider.mutate(action.operation(), &service.name) {
            event.refreshed &= event.actions.contains(&Action::Restarted);
            event.changed = !event.actions.is_empty();
            failed_call(&mut event, action, service, &e);
            break;
        }
        event.actions.push(action);
    }

    // The contract's `disable` is complete (the host removes a runtime
    // enablement too): one call, then the verification.
    let after = provider.status(&service.name);

    match after {
        Ok(status) => {
            let after = Observed::from(&status);
            event.final_state = Some(after.into());
            if !event.failed && !is_desired(service, after) {
                event.failed = true;
                event.errors.push(format!(
                    "failed to reach desired state: expected {}, found {}",
                    describe_desired(service),
                    describe_found(after)
                ));
            }
        }
        // A transient unit is gone once it stopped: that is `stopped`, and
        // nothing is left to be enabled. (Missing before anything was done,
        // it is "service not found", above.)
        Err(ProviderError::NotFound(_))
            if !event.failed && event.actions.contains(&Action::Stopped) =>
        {
            if service.enable == Some(true) {
                event.failed = true;
                event.errors.push(format!(
                    "failed to reach desired state: expected {}, found no unit {}: it was \
                     removed when it stopped (a transient unit)",
                    describe_desired(service),
                    service.name
                ));
            }
        }
        Err(e) => {
            event.failed = true;
            event.errors.push(format!(
                "status of {} after changes: {}",
                service.name,
                e.message()
            ));
        }
    }
    event
}

/// Marks `event` failed by `action`'s call.
fn failed_call(event: &mut Event, action: Action, service: &ValidService, e: &ProviderError) {
    event.failed = true;
    event.errors.push(format!(
        "{} {}: {}",
        action.operation(),
        service.name,
        e.message()
    ));
}

fn fail(mut event: Event, error: String) -> Event {
    event.failed = true;
    event.errors.push(error);
    event
}
