//! How the host writes values as text: made safe for a terminal, cut to a
//! bound, hex, milliseconds. One implementation of each, so every report and
//! message agrees.
//!
//! Text from a guest (errors, noop messages, logs, trap messages with the
//! module's function names) or from a policy file (import names, signature
//! comments) is the attacker's. Before it reaches a terminal, stderr or a log
//! line it goes through [`one_line`] or [`lines`]: control characters (C0,
//! including CR and LF inside a one-line field, DEL and C1) and the
//! bidirectional overrides and isolates are shown escaped, so a policy can
//! neither drive the terminal (clear it, set its title, write the clipboard)
//! nor forge a line of the host's own output. JSON needs none of this: its
//! encoder escapes control characters, and it keeps the text lossless.

use std::borrow::Cow;
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

/// True for the characters that must never reach a terminal as they are:
/// C0 and C1 controls and DEL (Unicode `Cc`), the bidirectional embeddings,
/// overrides, isolates and marks, and the line and paragraph separators.
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}'
                | '\u{200E}'
                | '\u{200F}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2066}'..='\u{2069}'
        )
}

/// `text` as one safe line: every unsafe character (newlines included)
/// escaped, `\n` and `\x1b` and `\u{202e}` style. Borrowed when there was
/// nothing to escape.
pub fn one_line(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if !is_unsafe(c) {
            out.push(c);
            continue;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
    Cow::Owned(out)
}

/// `text` split at its newlines, each line made safe with [`one_line`]
/// (a CR inside a line is escaped, not obeyed): for multi-line text such as
/// a policy's log, where each line gets the host's prefix.
pub fn lines(text: &str) -> impl Iterator<Item = Cow<'_, str>> {
    text.lines().map(one_line)
}

/// Text a policy file or a guest wrote (an import name, an export list, a
/// compiler's message quoting them): safe by type. Its `Display` is
/// [`one_line`] of it, so whoever prints it, and however (a log line, an
/// error chain, a report), it can never start a line of its own or drive
/// the terminal. Made only where such text enters the host.
///
/// Reports hold a guest's free text (its errors, its noop messages, the
/// reason it stopped) as `Untrusted`: JSON gets it as it was, exactly; a
/// terminal only ever through this `Display`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Untrusted(String);

impl Untrusted {
    pub(crate) fn new(text: impl Into<String>) -> Self {
        Self(text.into())
    }

    /// The text as it was given, for the code that reads it (a search, a
    /// length), never for a terminal.
    pub fn as_raw(&self) -> &str {
        &self.0
    }

    /// Its length in bytes, as given.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Its lines, each shown as [`Display`](std::fmt::Display) shows the
    /// whole: for text that is several lines (a policy's log).
    pub fn lines(&self) -> impl Iterator<Item = Cow<'_, str>> {
        lines(&self.0)
    }
}

impl PartialEq<&str> for Untrusted {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl std::fmt::Display for Untrusted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&one_line(&self.0))
    }
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

/// `n` with a comma between groups of three digits: `10,000`.
pub fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// The bytes `value` takes written as JSON (compact), counted without
/// building the text.
pub fn json_len<T: serde::Serialize + ?Sized>(value: &T) -> usize {
    let mut count = Count::default();
    // Only a Serialize impl that fails could fail; the host's never do.
    let _ = serde_json::to_writer(&mut count, value);
    count.bytes
}

/// The bytes `value` takes in a pretty-printed JSON report (two spaces an
/// indent, as reports are written) as an element of a list `depth` levels
/// deep: its lines indented, the line break before it and the comma after
/// it.
pub fn json_len_at<T: serde::Serialize + ?Sized>(value: &T, depth: usize) -> usize {
    let mut count = Count::default();
    let _ = serde_json::to_writer_pretty(&mut count, value);
    count.bytes + (count.lines + 1) * 2 * depth + 2
}

/// Counts what a writer is given: bytes, and line breaks.
#[derive(Default)]
struct Count {
    bytes: usize,
    lines: usize,
}

impl std::io::Write for Count {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.bytes += bytes.len();
        self.lines += bytes.iter().filter(|b| **b == b'\n').count();
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod untrusted_tests {
    use super::Untrusted;

    #[test]
    fn untrusted_text_is_shown_on_one_line() {
        let name = Untrusted::new("url=<a\nhost: error: forged>\x1b[2J");
        assert_eq!(name.to_string(), "url=<a\\nhost: error: forged>\\x1b[2J");
        assert_eq!(format!("`{name}`").lines().count(), 1);
    }
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
    fn unsafe_characters_are_escaped_and_safe_text_is_borrowed() {
        assert!(matches!(one_line("web.service: ok é"), Cow::Borrowed(_)));
        assert_eq!(
            one_line("a\x1b[2Jb\rc\nd\u{7f}e\u{9b}f\u{202e}g\u{2066}h"),
            "a\\x1b[2Jb\\rc\\nd\\x7fe\\u{9b}f\\u{202e}g\\u{2066}h"
        );
        let split: Vec<_> = lines("one\ntwo\rthree\n").collect();
        assert_eq!(split, ["one", "two\\rthree"]);
    }

    proptest::proptest! {
        /// Whatever a guest sends, the result holds no unsafe character and
        /// no line break, and escaping loses nothing: safe characters stay
        /// in order.
        #[test]
        fn one_line_output_is_always_safe(text in "\\PC*|[\\x00-\\x{a0}\\u{2028}-\\u{206f}]*") {
            let safe = one_line(&text);
            proptest::prop_assert!(!safe.chars().any(is_unsafe));
            proptest::prop_assert!(!safe.contains('\n') && !safe.contains('\r'));
            let kept: String = text.chars().filter(|c| !is_unsafe(*c)).collect();
            let mut rest = safe.as_ref();
            for c in kept.chars() {
                let at = rest.find(c);
                proptest::prop_assert!(at.is_some(), "{:?} lost {:?}", safe, c);
                rest = &rest[at.unwrap() + c.len_utf8()..];
            }
        }
    }

    #[test]
    fn hex_and_millis() {
        assert_eq!(hex(&[0, 0xab, 0xff]), "00abff");
        assert_eq!(millis(Duration::from_micros(1500)), 1.5);
        assert_eq!(millis(Duration::from_nanos(1_234_567)), 1.235);
    }

    #[test]
    fn thousands_and_json_len() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(199_873), "199,873");
        assert_eq!(thousands(1_048_576), "1,048,576");
        let text = Untrusted::new("a\n\u{1}\u{85}");
        assert_eq!(
            json_len(&text),
            serde_json::to_vec(&text).unwrap().len(),
            "counted as written"
        );
        assert_eq!(json_len(&[1, 22]), "[1,22]".len());
        // In a list two levels deep: "\n    {\n      \"a\": 1\n    }," is
        // what the element adds.
        let element = serde_json::json!({ "a": 1 });
        assert_eq!(
            json_len_at(&element, 2),
            "\n    {\n      \"a\": 1\n    },".len()
        );
    }
}
