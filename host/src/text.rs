//! How the host writes values as text: cut to a bound, hex, milliseconds.
//! One implementation of each, so every report and message agrees.

use std::fmt::Write as _;
use std::time::Duration;

/// Appended where the host cut text short.
pub const TRUNCATED: &str = "... [truncated by the host]";

/// Cuts `text` to at most `max` bytes at a character boundary, then appends
/// `marker`; text within the bound is returned unchanged.
pub fn truncate(mut text: String, max: usize, marker: &str) -> String {
    if text.len() > max {
        text.truncate(floor_char_boundary(&text, max));
        text.push_str(marker);
    }
    text
}

/// The largest index `<= max` that is a character boundary of `text`.
fn floor_char_boundary(text: &str, max: usize) -> usize {
    (0..=max.min(text.len()))
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0)
}

/// Lower-case hex, as digests are shown.
pub fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// Milliseconds with microsecond precision, as reports show durations.
pub fn millis(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncate_keeps_short_text_and_cuts_at_a_character_boundary() {
        assert_eq!(truncate("abc".into(), 3, "!"), "abc");
        assert_eq!(truncate("abcd".into(), 3, "!"), "abc!");
        // 'é' is two bytes: a cut inside it moves back to before it.
        assert_eq!(truncate("aé".into(), 2, "!"), "a!");
        assert_eq!(truncate("éé".into(), 0, "!"), "!");
    }

    #[test]
    fn hex_and_millis() {
        assert_eq!(hex(&[0, 0xab, 0xff]), "00abff");
        assert_eq!(millis(Duration::from_micros(1500)), 1.5);
        assert_eq!(millis(Duration::from_nanos(1_234_567)), 1.235);
    }
}
