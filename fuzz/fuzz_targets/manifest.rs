//! `parse_manifest` on arbitrary UTF-8 never panics, and any policy it accepts
//! can be validated and applied in noop mode without a panic or a mutating call.

#![no_main]

use guest_sdk::sim::SimulatedSystem;
use guest_sdk::{apply, parse_manifest, RunOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(policy) = parse_manifest(text) else {
        return;
    };
    let mut system = SimulatedSystem::new();
    let report = apply(&policy, &mut system, &RunOptions::noop());
    assert!(
        system.mutating_calls().is_empty(),
        "{:?}",
        system.mutating_calls()
    );
    if report.errors.is_empty() {
        // Nothing exists on an empty system: every service fails its status query.
        assert_eq!(report.events.len(), policy.services().len());
        assert!(
            report.events.iter().all(|e| e.failed && !e.changed),
            "{report:?}"
        );
    } else {
        assert!(report.events.is_empty(), "{report:?}");
    }
});
