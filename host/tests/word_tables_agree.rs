//! The SDK's simulator stands in for the host in policy authors' native
//! tests, so it must read systemd's words exactly as the host's provider
//! does: the same words, each counted as running or enabled the same way.
//! (The two tables are separate on purpose: the host never depends on the
//! SDK. This test is what ties them.)

use std::collections::BTreeMap;

#[test]
fn the_simulator_reads_is_active_words_as_the_host_does() {
    let host: BTreeMap<_, _> = policy_host::provider::parse::IS_ACTIVE_WORDS
        .into_iter()
        .collect();
    let sdk: BTreeMap<_, _> = guest_sdk::sim::ACTIVE_WORDS.into_iter().collect();
    assert_eq!(sdk, host);
}

#[test]
fn the_simulator_reads_is_enabled_words_as_the_host_does() {
    let host: BTreeMap<_, _> = policy_host::provider::parse::IS_ENABLED_WORDS
        .into_iter()
        .collect();
    let sdk: BTreeMap<_, _> = guest_sdk::sim::ENABLED_WORDS.into_iter().collect();
    assert_eq!(sdk, host);
}
