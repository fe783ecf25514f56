//! An example policy for a small web host.
//!
//! - `httpd` must run, start at boot, and restart when its configuration
//!   file or package changed: `host run` sees either change by itself
//!   (`host run --refresh file#/etc/httpd/conf/httpd.conf` restarts it
//!   without one).
//! - `legacy-ftpd` has been retired: stopped and kept from starting at boot.
//! - `metrics-agent` must run, but its boot setting belongs to another team,
//!   so the policy leaves it alone.

use guest_sdk::prelude::*;

/// The web server's configuration; a change to it restarts `httpd`.
pub const HTTPD_CONFIG: &str = "file#/etc/httpd/conf/httpd.conf";

pub fn web_host(_ctx: &Context) -> Result<Policy, PolicyError> {
    Ok(Policy::new()
        .service(
            Service::new("httpd")
                .running()
                .enable(true)
                .subscribe(HTTPD_CONFIG)
                .subscribe("package#httpd"),
        )
        .service(Service::new("legacy-ftpd").stopped().enable(false))
        .service(Service::new("metrics-agent").running()))
}

guest_sdk::export_policy!(web_host);

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh_machine() -> SimulatedSystem {
        SimulatedSystem::new()
            .with_unit("httpd", UnitState::stopped().disabled())
            .with_unit("legacy-ftpd", UnitState::running().enabled())
            .with_unit("metrics-agent", UnitState::stopped().disabled())
    }

    #[test]
    fn converges_a_fresh_machine() {
        let mut system = fresh_machine();
        let report = guest_sdk::run(web_host, &mut system, &RunOptions::default());
        assert!(report.succeeded(), "{report:#?}");
        // httpd's start counts once it stayed up (the host's settle
        // window): its enable comes after the other services were begun.
        assert_eq!(
            system.mutating_calls(),
            [
                "start httpd",
                "stop legacy-ftpd",
                "disable legacy-ftpd",
                "start metrics-agent",
                "enable httpd"
            ]
        );
        assert_eq!(system.unit("httpd"), Some(UnitState::running().enabled()));
        assert_eq!(
            system.unit("legacy-ftpd"),
            Some(UnitState::stopped().disabled())
        );
        assert_eq!(
            system.unit("metrics-agent"),
            Some(UnitState::running().disabled()),
            "the boot setting of metrics-agent is left alone"
        );
    }

    #[test]
    fn second_run_changes_nothing() {
        let mut system = fresh_machine();
        guest_sdk::run(web_host, &mut system, &RunOptions::default());
        system.clear_calls();
        let report = guest_sdk::run(web_host, &mut system, &RunOptions::default());
        assert!(
            system.mutating_calls().is_empty(),
            "{:?}",
            system.call_log()
        );
        assert_eq!(report.changed_count(), 0);
    }

    #[test]
    fn config_change_restarts_httpd_only() {
        let mut system = fresh_machine();
        guest_sdk::run(web_host, &mut system, &RunOptions::default());
        system.clear_calls();
        let options = RunOptions::default().with_refreshed(HTTPD_CONFIG);
        let report = guest_sdk::run(web_host, &mut system, &options);
        assert_eq!(system.mutating_calls(), ["restart httpd"]);
        assert!(report.event("service#httpd").unwrap().refreshed);
    }

    #[test]
    fn noop_reports_without_changing_anything() {
        let mut system = fresh_machine();
        let report = guest_sdk::run(web_host, &mut system, &RunOptions::noop());
        assert!(system.mutating_calls().is_empty());
        let httpd = report.event("service#httpd").unwrap();
        assert_eq!(
            httpd.noop_message.as_deref(),
            Some("Would have started, would have enabled")
        );
        assert_eq!(system.unit("httpd"), Some(UnitState::stopped().disabled()));
    }
}
