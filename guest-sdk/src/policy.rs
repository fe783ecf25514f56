//! A policy: an ordered list of resources, validated as a whole before any is applied.

use std::collections::HashMap;

use crate::name::ServiceName;
use crate::resource_ref::ResourceRef;
use crate::service::{Ensure, Service};

/// The desired state a policy declares, in application order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    services: Vec<Service>,
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
    pub fn resource_ref(&self) -> ResourceRef {
        ResourceRef::service(self.name.as_str())
    }
}

impl Policy {
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

    pub fn services(&self) -> &[Service] {
        &self.services
    }

    /// Checks the whole policy; returns every problem found, not just the first.
    ///
    /// Rules: every service name is valid; no service is declared twice; every
    /// subscription is a `type#name` reference; a `service#X` subscription
    /// names a service declared *earlier* (resources apply in order, so a later
    /// one cannot have changed yet), and never the service itself.
    pub(crate) fn validate(&self) -> Result<Vec<ValidService>, Vec<String>> {
        let mut errors = Vec::new();
        let mut valid = Vec::with_capacity(self.services.len());
        let positions: HashMap<&str, usize> = self
            .services
            .iter()
            .enumerate()
            .rev()
            .map(|(i, s)| (s.name.as_str(), i))
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
            if positions.get(service.name.as_str()) != Some(&index) {
                errors.push(format!("{label} is declared more than once"));
            }
            let mut subscribe = Vec::with_capacity(service.subscribe.len());
            for text in &service.subscribe {
                match ResourceRef::parse(text) {
                    Ok(reference) => {
                        if let Some(e) = check_service_ordering(&reference, index, &positions) {
                            errors.push(format!("{label}: {e}"));
                        }
                        subscribe.push(reference);
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
        if errors.is_empty() {
            Ok(valid)
        } else {
            Err(errors)
        }
    }
}

/// A `service#X` subscription must point at a service applied before this one.
fn check_service_ordering(
    reference: &ResourceRef,
    index: usize,
    positions: &HashMap<&str, usize>,
) -> Option<String> {
    if reference.kind() != "service" {
        return None;
    }
    match positions.get(reference.name()) {
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
    fn invalid_name_is_reported_with_the_quoted_name() {
        let errors = errors_of(Policy::new().service(Service::new("app@instance")));
        assert_eq!(errors.len(), 1);
        assert!(errors[0].contains("\"app@instance\""), "{}", errors[0]);
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
