//! Guest text made safe for a terminal (`policy_host::text`): whatever the
//! bytes, the one-line form holds no control character, no bidirectional
//! override and no line break; every line of the multi-line form is safe;
//! the bounded form stays within its bound; and escaping drops nothing.

#![no_main]

use libfuzzer_sys::fuzz_target;
use policy_host::text::{is_unsafe, lines, one_line, truncate, TRUNCATED};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let safe = one_line(&text);
    assert!(!safe.chars().any(is_unsafe), "{safe:?}");
    // Nothing safe is dropped: escaping only ever adds.
    assert!(safe.len() >= text.len(), "{text:?} -> {safe:?}");
    for line in lines(&text) {
        assert!(!line.chars().any(is_unsafe), "{line:?}");
    }
    let max = data.first().copied().unwrap_or(0) as usize;
    let cut = truncate(text.clone().into_owned(), max, TRUNCATED);
    assert!(cut.len() <= max + TRUNCATED.len(), "{} > {max}", cut.len());
});
