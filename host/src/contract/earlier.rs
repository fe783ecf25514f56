//! The earlier contracts this host still runs policies of: one set of
//! bindings per version, generated from its WIT as released
//! (`wit/released/X.Y.Z.wit`, never edited), and the conversions between its
//! types and the current ones.
//!
//! Everything past the runtime speaks the current contract only: a provider
//! answer is converted down to the policy's version on its way in, and a
//! policy's report and subscriptions are converted up on their way out. What
//! an earlier version has no field for is dropped on the way down (facts, a
//! restart systemd is making); what it cannot say is empty on the way up
//! (units left out). The conversions are total: every earlier type is a
//! subset of the current one.

/// Enums with the same cases in both versions.
macro_rules! same_cases {
    ($from:ident :: $ty:ident => $to:ident, $($case:ident),+) => {
        impl From<$from::$ty> for $to::$ty {
            fn from(value: $from::$ty) -> Self {
                match value {
                    $($from::$ty::$case => $to::$ty::$case,)+
                }
            }
        }
    };
}

/// Conversions shared by every earlier version, between `old` (the
/// version's generated types) and `new` (the current ones). Expanded inside
/// each version's module, where `old` is that version's `types`.
macro_rules! shared_conversions {
    () => {
        use crate::contract::types as new;
        use self::policy_host::policy::types as old;

        same_cases!(new::Progress => old, Finished, Queued);
        same_cases!(new::Operation => old, Status, Start, Stop, Restart, Enable, Disable);
        same_cases!(old::Action => new, Started, Stopped, Restarted, Enabled, Disabled);
        same_cases!(old::Ensure => new, Running, Stopped);

        impl From<new::ProviderError> for old::ProviderError {
            fn from(error: new::ProviderError) -> Self {
                use new::ProviderError as E;
                match error {
                    E::InvalidName(m) => Self::InvalidName(m),
                    E::NotFound(m) => Self::NotFound(m),
                    E::CommandFailed(m) => Self::CommandFailed(m),
                    E::TimedOut(m) => Self::TimedOut(m),
                    E::Unavailable(m) => Self::Unavailable(m),
                    E::Denied(m) => Self::Denied(m),
                    E::LimitExceeded(m) => Self::LimitExceeded(m),
                }
            }
        }

        impl From<new::JobOutcome> for old::JobOutcome {
            fn from(outcome: new::JobOutcome) -> Self {
                Self {
                    operation: outcome.operation.into(),
                    error: outcome.error.map(Into::into),
                }
            }
        }

        impl From<new::Watched> for old::Watched {
            fn from(watched: new::Watched) -> Self {
                Self {
                    resource: watched.resource,
                    changed: watched.changed,
                    errors: watched.errors,
                }
            }
        }

        impl From<old::Watched> for new::Watched {
            fn from(watched: old::Watched) -> Self {
                Self {
                    resource: watched.resource,
                    changed: watched.changed,
                    errors: watched.errors,
                }
            }
        }

        /// Facts are not told: the version has no field for them.
        impl From<&new::RunOptions> for old::RunOptions {
            fn from(options: &new::RunOptions) -> Self {
                Self {
                    noop: options.noop,
                    refreshed: options.refreshed.clone(),
                    watched: options.watched.iter().cloned().map(Into::into).collect(),
                    settings: options.settings.clone(),
                }
            }
        }

        impl From<old::Subscription> for new::Subscription {
            fn from(subscription: old::Subscription) -> Self {
                Self {
                    resource: subscription.resource,
                    references: subscription.references,
                }
            }
        }

        impl From<old::Event> for new::Event {
            fn from(event: old::Event) -> Self {
                Self {
                    resource: event.resource,
                    changed: event.changed,
                    refreshed: event.refreshed,
                    noop: event.noop,
                    noop_message: event.noop_message,
                    actions: event.actions.into_iter().map(Into::into).collect(),
                    failed: event.failed,
                    errors: event.errors,
                    requested: new::RequestedState {
                        ensure: event.requested.ensure.into(),
                        enable: event.requested.enable,
                    },
                    final_state: event.final_state.map(|state| new::FinalState {
                        ensure: state.ensure.into(),
                        enabled: state.enabled,
                    }),
                }
            }
        }

        /// Units left out: the version cannot say any.
        impl From<old::Report> for new::Report {
            fn from(report: old::Report) -> Self {
                Self {
                    events: report.events.into_iter().map(Into::into).collect(),
                    errors: report.errors,
                    left_out: Vec::new(),
                }
            }
        }
    };
}

/// Contract 0.5.0: no facts, no units left out.
pub mod v0_5 {
    wasmtime::component::bindgen!({
        path: "../wit/released/0.5.0.wit",
        world: "policy",
        imports: { default: trappable },
        additional_derives: [PartialEq, Eq],
    });

    pub use self::policy_host::policy::{service_provider, types};

    shared_conversions!();

    impl From<new::ServiceStatus> for old::ServiceStatus {
        fn from(status: new::ServiceStatus) -> Self {
            Self {
                name: status.name,
                provider: status.provider,
                enabled: status.enabled,
                running: status.running,
                active_word: status.active_word,
                enabled_word: status.enabled_word,
                job: status.job.map(Into::into),
                restarting: status.restarting.map(|r| old::Restarting {
                    restarts: r.restarts,
                    last_exit: r.last_exit,
                }),
            }
        }
    }
}

/// Contract 0.4.0: as 0.5.0, and a status does not say when systemd is
/// restarting the unit itself (such a unit is `activating`, not running).
pub mod v0_4 {
    wasmtime::component::bindgen!({
        path: "../wit/released/0.4.0.wit",
        world: "policy",
        imports: { default: trappable },
        additional_derives: [PartialEq, Eq],
    });

    pub use self::policy_host::policy::{service_provider, types};

    shared_conversions!();

    impl From<new::ServiceStatus> for old::ServiceStatus {
        fn from(status: new::ServiceStatus) -> Self {
            Self {
                name: status.name,
                provider: status.provider,
                enabled: status.enabled,
                running: status.running,
                active_word: status.active_word,
                enabled_word: status.enabled_word,
                job: status.job.map(Into::into),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::contract::{self, v0_4, v0_5};

    fn current_status() -> contract::ServiceStatus {
        contract::ServiceStatus {
            name: "web.service".into(),
            provider: "systemd".into(),
            enabled: true,
            running: false,
            active_word: "activating".into(),
            enabled_word: "enabled".into(),
            job: Some(contract::JobOutcome {
                operation: contract::Operation::Start,
                error: Some(contract::ProviderError::CommandFailed("exit 1".into())),
            }),
            restarting: Some(contract::Restarting {
                restarts: 3,
                last_exit: "exit-code".into(),
            }),
        }
    }

    #[test]
    fn a_status_goes_down_with_what_the_version_has_a_field_for() {
        let v5: v0_5::types::ServiceStatus = current_status().into();
        assert_eq!(v5.restarting.as_ref().map(|r| r.restarts), Some(3));
        assert_eq!(
            v5.job.as_ref().and_then(|j| j.error.clone()),
            Some(v0_5::types::ProviderError::CommandFailed("exit 1".into()))
        );
        let v4: v0_4::types::ServiceStatus = current_status().into();
        assert_eq!(v4.active_word, "activating");
        assert!(!v4.running);
        assert_eq!(
            v4.job.map(|j| j.operation),
            Some(v0_4::types::Operation::Start)
        );
    }

    #[test]
    fn facts_are_not_told_and_a_report_comes_up_with_nothing_left_out() {
        let options = contract::RunOptions {
            noop: true,
            refreshed: vec!["service#web".into()],
            watched: vec![contract::Watched {
                resource: "service#web".into(),
                changed: vec!["file#/etc/web.conf".into()],
                errors: vec![],
            }],
            settings: Some("role: web".into()),
            facts: vec![contract::types::Fact {
                name: "hostname".into(),
                value: "web-1".into(),
            }],
        };
        let old: v0_4::types::RunOptions = (&options).into();
        assert!(old.noop);
        assert_eq!(old.refreshed, options.refreshed);
        assert_eq!(old.watched[0].changed, ["file#/etc/web.conf"]);
        assert_eq!(old.settings.as_deref(), Some("role: web"));

        let report = v0_5::types::Report {
            events: vec![v0_5::types::Event {
                resource: "service#web".into(),
                changed: true,
                refreshed: false,
                noop: false,
                noop_message: None,
                actions: vec![v0_5::types::Action::Started],
                failed: false,
                errors: vec![],
                requested: v0_5::types::RequestedState {
                    ensure: v0_5::types::Ensure::Running,
                    enable: Some(true),
                },
                final_state: Some(v0_5::types::FinalState {
                    ensure: v0_5::types::Ensure::Running,
                    enabled: true,
                }),
            }],
            errors: vec!["one".into()],
        };
        let report: contract::Report = report.into();
        assert!(report.left_out.is_empty());
        assert_eq!(report.errors, ["one"]);
        assert_eq!(report.events[0].actions, [contract::Action::Started]);
        assert_eq!(
            report.events[0].final_state,
            Some(contract::FinalState {
                ensure: contract::Ensure::Running,
                enabled: true
            })
        );
    }
}
