//! A policy: an ordered list of resources, validated as a whole before any is applied.

use std::collections::HashMap;

use crate::contract::LeftOut;
use crate::name::{unit_name, ServiceName};
use crate::resource_ref::ResourceRef;
use crate::service::{Ensure, Service};

/// The desired state a policy declares, in application order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    services: Vec<Service>,
    /// Services declared for other machines, and why not this one.
    left_out: Vec<LeftOut>,
}

/// A service whose name and subscriptions passed validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ValidService {
    pub name: ServiceName,
    pub ensure: Ensure,
    pub enable: Option<bool>,
    pub subscribe: Vec<ResourceRef>,
}

impl ValidService {
    /// `service#NAME`, with the name as declared: what the report names.
    pub(crate) fn resource_ref(&self) -> ResourceRef {
        ResourceRef::service(self.name.as_str())
    }

    /// The key subscriptions compare with ([`ResourceRef::key`]):
    /// `service#web.service` for a service declared `web` or `web.service`.
    pub(crate) fn key(&self) -> ResourceRef {
        self.resource_ref().key()
    }
}

impl Policy {
    /// A policy with no services.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a service; services are applied in the order they are added.
    pub fn service(mut self, service: Service) -> Self {
        self.services.push(service);
        self
    }

    /// Adds a service to a policy held in a variable.
    pub fn add(&mut self, service: Service) {
        self.services.push(service);
    }

    /// The services, in the order they were added (and are applied).
    pub fn services(&self) -> &[Service] {
        &self.services
    }

    /// Notes that the service `name` is declared for other machines and
    /// not applied on this one, and why (`when role = web (this machine:
    /// db)`): the report lists it, so an operator sees what was not done
    /// and need not wonder. Nothing is asked of the unit. A unit that
    /// another service of this policy applies may be left out too (one
    /// unit, a declaration per kind of machine): the host then reports
    /// both, so `why` should say which declaration applies it here.
    pub fn leave_out(&mut self, name: impl AsRef<str>, why: impl Into<String>) {
        self.left_out.push(LeftOut {
            resource: format!("service#{}", name.as_ref()),
            why: why.into(),
        });
    }

    /// The services left out on this machine, in the order noted.
    pub fn left_out(&self) -> &[LeftOut] {
        &self.left_out
    }

    /// Checks the whole policy; returns every problem found, not just the first.
    ///
    /// Rules: every service name is valid; no unit is declared twice, in any
    /// spelling (`web` and `web.service` are one unit, see
    /// [`crate::name::unit_name`]); every subscription is a `type#name`
    /// reference; a `service#X` subscription names a service declared
    /// *earlier* (resources apply in order, so a later one cannot have changed
    /// yet), and never the service itself, in either spelling.
    pub(crate) fn validate(&self) -> Result<Vec<ValidService>, Vec<String>> {
        let mut errors = Vec::new();
        let mut valid = Vec::with_capacity(self.services.len());
        // The first declaration of each unit.
        let positions: HashMap<String, usize> = self
            .services
            .iter()
            .enumerate()
            .rev()
            .map(|(i, s)| (unit_name(&s.name).into_owned(), i))
            .collect();

        for (index, service) in self.services.iter().enumerate() {
            let label = format!("service#{}", service.name);
            let name = match ServiceName::parse(&service.name) {
                Ok(name) => Some(name),
                Err(e) => {
                    errors.push(format!("{label}: {e}"));
                    None
                }
            };
            let unit = unit_name(&service.name);
            if let Some(&first) = positions.get(unit.as_ref()).filter(|&&i| i != index) {
                errors.push(format!(
                    "{label} is declared more than once: service#{} (declaration {}) and \
                     {label} (declaration {}) are the same unit, {unit}; declare it once",
                    self.services[first].name,
                    first + 1,
                    index + 1,
                ));
            }
            let mut subscribe = Vec::with_capacity(service.subscribe.len());
            for text in &service.subscribe {
                match ResourceRef::parse(text) {
                    Ok(reference) => {
                        if let Some(e) = check_service_ordering(&reference, index, &positions) {
                            errors.push(format!("{label}: {e}"));
                        }
                        subscribe.push(reference.key());
                    }
                    Err(e) => errors.push(format!("{label}: subscribe: {e}")),
                }
            }
            if let Some(name) = name {
                valid.push(ValidService {
                    name,
                    ensure: service.ensure,
                    enable: service.enable,
                    subscribe,
                });
            }
        }
        for left in &self.left_out {
            let name = left.resource.strip_prefix("service#").unwrap_or("");
            if let Err(e) = ServiceName::parse(name) {
                errors.push(format!("{} (left out): {e}", left.resource));
            }
        }
        if errors.is_empty() {
            Ok(valid)
        } else {
            Err(errors)
        }
    }
}

/// A `service#X` subscription must point at a service applied before this
/// one; `X` is compared by unit name.
fn check_service_ordering(
    reference: &ResourceRef,
    index: usize,
    positions: &HashMap<String, usize>,
) -> Option<String> {
    if reference.kind() != "service" {
        return None;
    }
    match positions.get(unit_name(reference.name()).as_ref()) {
        Some(&target) if target == index => {
            Some(format!("subscribes to {reference}, which is itself"))
        }
        Some(&target) if target > index => Some(format!(
            "subscribes to {reference}, which is declared later; declare {reference} first"
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors_of(policy: Policy) -> Vec<String> {
        policy.validate().expect_err("policy should be rejected")
    }

    #[test]
    fn valid_policy_keeps_declaration_order() {
        let policy = Policy::new()
            .service(Service::new("db"))
            .service(Service::new("web").subscribe("service#db"));
        let valid = policy.validate().unwrap();
        let names: Vec<&str> = valid.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["db", "web"]);
    }

    #[test]
    fn subscription_to_a_later_service_is_rejected() {
        let errors = errors_of(
            Policy::new()
                .service(Service::new("web").subscribe("service#db"))
                .service(Service::new("db")),
        );
        assert_eq!(
            errors,
            ["service#web: subscribes to service#db, which is declared later; declare service#db first"]
        );
    }

    #[test]
    fn self_subscription_duplicates_and_bad_refs_are_all_reported() {
        let errors = errors_of(
            Policy::new()
                .service(Service::new("a").subscribe("service#a").subscribe("nohash"))
                .service(Service::new("a")),
        );
        assert_eq!(errors.len(), 3, "{errors:#?}");
        assert!(errors[0].contains("which is itself"));
        assert!(errors[1].contains("expected TYPE#NAME"));
        assert!(errors[2].contains("declared more than once"));
    }

    #[test]
    fn one_unit_in_two_spellings_is_declared_twice_and_both_are_named() {
        let errors = errors_of(
            Policy::new()
                .service(Service::new("sfx2").running())
                .service(Service::new("web"))
                .service(Service::new("sfx2.service").stopped()),
        );
        assert_eq!(
            errors,
            ["service#sfx2.service is declared more than once: service#sfx2 (declaration 1) \
              and service#sfx2.service (declaration 3) are the same unit, sfx2.service; declare it once"]
        );
        // Other unit types are other units.
        assert!(Policy::new()
            .service(Service::new("web"))
            .service(Service::new("web.socket"))
            .validate()
            .is_ok());
    }

    #[test]
    fn subscriptions_compare_by_unit_name() {
        let valid = Policy::new()
            .service(Service::new("db.service"))
            .service(Service::new("web").subscribe("service#db"))
            .validate()
            .unwrap();
        assert_eq!(valid[1].subscribe, [ResourceRef::service("db.service")]);
        assert_eq!(valid[0].key(), ResourceRef::service("db.service"));
        assert_eq!(valid[1].resource_ref().to_string(), "service#web");

        let errors = errors_of(
            Policy::new()
                .service(Service::new("web").subscribe("service#web.service"))
                .service(Service::new("api.service").subscribe("service#db"))
                .service(Service::new("db")),
        );
        assert_eq!(
            errors,
            [
                "service#web: subscribes to service#web.service, which is itself",
                "service#api.service: subscribes to service#db, which is declared later; declare service#db first",
            ]
        );
    }

    #[test]
    fn invalid_name_is_reported_with_the_quoted_name() {
        let errors = errors_of(Policy::new().service(Service::new("app@instance")));
        assert_eq!(errors.len(), 1);
        assert!(errors[0].contains("\"app@instance\""), "{}", errors[0]);
    }

    #[test]
    fn a_service_left_out_needs_a_valid_name_too() {
        let mut policy = Policy::new().service(Service::new("web"));
        policy.leave_out("db", "only where role = db");
        assert!(policy.validate().is_ok());
        policy.leave_out("bad name", "never");
        let errors = errors_of(policy);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].starts_with("service#bad name (left out): "),
            "{errors:?}"
        );
    }

    #[test]
    fn unknown_non_service_references_are_accepted() {
        let policy = Policy::new().service(
            Service::new("web")
                .subscribe("file#/etc/web.conf")
                .subscribe("service#elsewhere"),
        );
        assert!(policy.validate().is_ok());
    }
}
