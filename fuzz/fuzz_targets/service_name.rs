//! The SDK's and the host's service-name validators agree on every string, and
//! what they accept is what docs/service-type.md ("Service names") allows: `a-zA-Z0-9 . _ + : ~ -` only,
//! 1 to 255 bytes, no leading `-`.

#![no_main]

use guest_sdk::ServiceName;
use libfuzzer_sys::fuzz_target;
use policy_host::service_name::CheckedName;

fn check(name: &str) {
    let sdk = ServiceName::parse(name);
    let host = CheckedName::check(name);
    assert_eq!(
        sdk.is_ok(),
        host.is_ok(),
        "{name:?}: SDK {sdk:?}, host {host:?}"
    );
    if sdk.is_ok() {
        assert!((1..=255).contains(&name.len()), "{name:?}");
        assert!(!name.starts_with('-'), "{name:?}");
        assert!(
            name.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._+:~-".contains(&b)),
            "{name:?}"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    match std::str::from_utf8(data) {
        Ok(name) => check(name),
        // Names reach both validators as strings; check what a lossy reading makes of the bytes.
        Err(_) => check(&String::from_utf8_lossy(data)),
    }
});
