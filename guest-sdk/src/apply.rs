//! The service type's apply logic: two phases, idempotent, with noop mode and
//! verification of the final state (docs/service-type.md). The words a
//! `status` carries (`static`, `alias`, `enabled-runtime`, ...) are read
//! here, and only here: the host reports them, the policy decides.

use std::collections::HashSet;

use crate::policy::{Policy, ValidService};
use crate::provider::{Progress, Provider, ProviderError, ServiceStatus};
use crate::report::{noop_message, Action, Event, FinalState, Report, RequestedState};
use crate::resource_ref::ResourceRef;
use crate::service::Ensure;
use contract_words::UnitFileState;

pub use crate::contract::{RunOptions, Watched};

/// A normal run: changes allowed, nothing refreshed or watched, no settings.
impl Default for RunOptions {
    fn default() -> Self {
        Self {
            noop: false,
            refreshed: Vec::new(),
            watched: Vec::new(),
            settings: None,
            facts: Vec::new(),
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
    /// and why: the service is applied as usual (that reference triggers
    /// nothing), then its event fails with this error.
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

    /// Sets the fact `name` to `value` for this run, over what the
    /// provider's machine says (see [`crate::sim::SimulatedSystem::with_fact`]).
    pub fn with_fact(mut self, name: &str, value: &str) -> Self {
        crate::facts::set(&mut self.facts, name, value);
        self
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
///
/// A start, stop or restart the host queues ([`Progress::Queued`]) runs
/// beside the others, and a start or restart is judged by the host only
/// once the unit stayed up through its settle window: such a resource is
/// finished (its job awaited, its enablement changed, its state verified)
/// after every resource has been begun, or earlier when a later resource
/// subscribes to it, so that a refresh follows the job it depends on and
/// the settle windows of units started one after another still overlap.
/// Events keep declaration order.
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

    let mut applying: Vec<Applying<'_>> = Vec::with_capacity(services.len());
    for service in &services {
        // What it subscribes to must have ended before its trigger is known.
        for earlier in applying
            .iter_mut()
            .filter(|a| a.is_queued() && service.subscribe.contains(&a.service.key()))
        {
            earlier.finish(provider);
            if earlier.event.changed {
                changed.insert(earlier.service.key());
            }
        }
        let resource = service.resource_ref().to_string();
        let watched = options.watched.iter().find(|w| w.resource == resource);
        let begun = Applying::begin(service, provider, options.noop, &changed, watched);
        if !begun.is_queued() && begun.event.changed {
            changed.insert(service.key());
        }
        applying.push(begun);
    }
    let events = applying
        .into_iter()
        .map(|mut a| {
            a.finish(provider);
            let watched = options
                .watched
                .iter()
                .find(|w| w.resource == a.event.resource);
            fail_unreadable(&mut a.event, watched);
            a.event
        })
        .collect();
    Report {
        events,
        errors: Vec::new(),
        left_out: policy.left_out().to_vec(),
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
    let state = UnitFileState::parse(word)?;
    let (kind, why) = match state {
        UnitFileState::Static => (
            "a static unit",
            "It has no [Install] section, so disable has nothing to remove, and it starts \
             whenever another unit needs it.",
        ),
        UnitFileState::Indirect => (
            "an indirect unit",
            "It is not enabled itself: its [Install] section only names other units (Also=), \
             or another name or instance of it is enabled; disable would disable those instead.",
        ),
        UnitFileState::Generated => (
            "a generated unit",
            "A systemd generator writes it at boot and on every daemon-reload, so disable has \
             nothing to remove.",
        ),
        UnitFileState::Transient => (
            "a transient unit",
            "It was created at runtime (systemd-run) and has no unit file for disable to \
             change; it disappears once it stops.",
        ),
        UnitFileState::Alias => {
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

/// One resource being applied.
struct Applying<'a> {
    service: &'a ValidService,
    event: Event,
    /// A job of phase one is queued; `None` once the event is complete.
    queued: Option<Queued>,
}

/// A phase-one job whose end is still to be known, and what follows it:
/// a job the host queued, or a start or restart, which counts only once
/// the unit stayed up (the host says so at the unit's next `status`).
struct Queued {
    action: Action,
    /// Phase two, made once the job ended well.
    then: Option<Action>,
}

impl<'a> Applying<'a> {
    fn is_queued(&self) -> bool {
        self.queued.is_some()
    }

    /// Reads the service's state and makes its changes, up to a queued job.
    fn begin(
        service: &'a ValidService,
        provider: &mut dyn Provider,
        noop: bool,
        changed: &HashSet<ResourceRef>,
        watched: Option<&Watched>,
    ) -> Self {
        let mut applying = Self {
            service,
            event: Event {
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
            },
            queued: None,
        };
        let event = &mut applying.event;

        let status = match provider.status(&service.name) {
            Ok(status) => status,
            Err(e) => {
                fail(
                    event,
                    format!("status of {}: {}", service.name, e.message()),
                );
                return applying;
            }
        };
        let found = Observed::from(&status);
        if let Some(why) = unreachable_enable(service, &status) {
            event.final_state = Some(found.into());
            fail(event, why);
            return applying;
        }
        if let (Some(restarting), Ensure::Running) = (&status.restarting, service.ensure) {
            event.final_state = Some(found.into());
            fail(event, crash_loop(service, restarting));
            return applying;
        }
        // Between two runs systemd makes by itself, the unit counts as
        // running for `ensure: stopped`: a stop ends the loop.
        let found_running = match status.restarting {
            Some(_) => Ensure::Running,
            None => found.ensure,
        };
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
        let running = running_action(service.ensure, found_running, triggered);
        let enablement = enable_action(service.enable, found.enabled);
        let planned: Vec<Action> = running.into_iter().chain(enablement).collect();

        event.refreshed = planned.contains(&Action::Restarted);
        event.changed = !planned.is_empty();
        if noop || planned.is_empty() {
            event.noop_message = if noop { noop_message(&planned) } else { None };
            event.actions = planned;
            event.final_state = Some(found.into());
            return applying;
        }

        for action in planned {
            match provider.mutate(action.operation(), &service.name) {
                Ok(progress)
                    if Some(action) == running
                        && (progress == Progress::Queued || action.must_stay_up()) =>
                {
                    event.actions.push(action);
                    applying.queued = Some(Queued {
                        action,
                        then: enablement,
                    });
                    return applying;
                }
                Ok(_) => event.actions.push(action),
                Err(e) => {
                    failed_call(event, action, service, &e);
                    break;
                }
            }
        }
        // The contract's `disable` is complete (the host removes a runtime
        // enablement too): one call, then the verification.
        let after = provider.status(&service.name);
        verify(event, service, after);
        applying
    }

    /// Completes the event: awaits the queued job (the unit's `status`
    /// waits for it), makes phase two when the job ended well, verifies.
    fn finish(&mut self, provider: &mut dyn Provider) {
        let Some(Queued { action, then }) = self.queued.take() else {
            return;
        };
        let service = self.service;
        let event = &mut self.event;
        let ended = provider.status(&service.name);
        let job_error = ended.as_ref().ok().and_then(|status| {
            status
                .job
                .as_ref()
                .filter(|job| job.operation == action.operation())
                .and_then(|job| job.error.clone())
        });
        if let Some(e) = job_error {
            event.actions.retain(|a| *a != action);
            failed_call(event, action, service, &e);
            verify(event, service, ended);
            return;
        }
        let after = match then {
            None => ended,
            Some(action) => {
                match provider.mutate(action.operation(), &service.name) {
                    Ok(_) => event.actions.push(action),
                    Err(e) => failed_call(event, action, service, &e),
                }
                provider.status(&service.name)
            }
        };
        verify(event, service, after);
    }
}

/// The desired-state check of the status read after the changes, made
/// after a change that failed too: beside why it failed (a start that did
/// not stay up), `failed to reach desired state` says what was expected and
/// what was found (docs/service-type.md, Verification).
fn verify(event: &mut Event, service: &ValidService, after: Result<ServiceStatus, ProviderError>) {
    match after {
        Ok(status) => {
            let after = Observed::from(&status);
            event.final_state = Some(after.into());
            if !is_desired(service, after) {
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
        Err(ProviderError::NotFound(_)) if event.actions.contains(&Action::Stopped) => {
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
}

/// Why a unit systemd is restarting by itself is not started: a crash loop
/// is a failure to report, not a state to start from (a start would only
/// cut systemd's wait short, and hide the loop).
fn crash_loop(service: &ValidService, restarting: &crate::provider::Restarting) -> String {
    let times = match restarting.restarts {
        0 => "its main process ended and systemd restarts it".to_owned(),
        1 => "restarted once by systemd since start".to_owned(),
        n => format!("restarted {n} times by systemd since start"),
    };
    format!(
        "{name} is in a crash loop: {times}; {last}. \
         It was not started: systemd is restarting it itself (Restart=). See \
         journalctl -u {unit}; fix the unit, or ensure it stopped.",
        name = service.name,
        last = restarting.last_exit,
        unit = service.name.unit_name()
    )
}

/// Marks `event` failed by `action`'s call (or its job): a refresh or a
/// change counts only for the actions that were made.
fn failed_call(event: &mut Event, action: Action, service: &ValidService, e: &ProviderError) {
    event.refreshed &= event.actions.contains(&Action::Restarted);
    event.changed = !event.actions.is_empty();
    event.failed = true;
    event.errors.push(format!(
        "{} {}: {}",
        action.operation(),
        service.name,
        e.message()
    ));
}

/// A subscribed file or package the host could not read fails the event,
/// once the service was applied like any other (with no trigger from that
/// reference): a subscription never keeps a service from its `ensure` and
/// `enable`, and the failure makes the host retry the reference next run.
fn fail_unreadable(event: &mut Event, watched: Option<&Watched>) {
    if let Some(watched) = watched.filter(|w| !w.errors.is_empty()) {
        event.failed = true;
        event.errors.extend(watched.errors.iter().cloned());
    }
}

fn fail(event: &mut Event, error: String) {
    event.failed = true;
    event.errors.push(error);
}
