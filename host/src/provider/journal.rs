//! The last lines a unit wrote to the journal, for a failed start,
//! restart or settle window: what an operator would read first with
//! `journalctl -u UNIT`. Read by the host (never given to a guest), only
//! for units the run managed, and bounded: at most [`MAX_LINES`] lines of
//! [`MAX_LINE_CHARS`] characters. The text is the unit's, so untrusted:
//! reports escape it like every untrusted string.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::text::{Untrusted, TRUNCATED};

/// The most lines kept.
pub(crate) const MAX_LINES: usize = 5;
/// The longest line kept, in characters.
pub(crate) const MAX_LINE_CHARS: usize = 200;

/// `journalctl`'s arguments for the last lines `unit` (mangled) wrote
/// since `since` (the start that failed; whole seconds, as journalctl
/// reads `@` times): only its own processes' (`_SYSTEMD_UNIT=`), message
/// text only. Not by `_SYSTEMD_INVOCATION_ID`: journald cannot add it to
/// the lines of a process that died before it read them, exactly the lines
/// wanted here.
pub(crate) fn arguments(unit: &str, since: SystemTime) -> Vec<String> {
    let since = since.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    vec![
        "--system".to_owned(),
        "--no-pager".to_owned(),
        "--quiet".to_owned(),
        "--output=cat".to_owned(),
        // Lines with control characters in full, not as "[blob data]":
        // they are escaped when shown.
        "--all".to_owned(),
        format!("--lines={MAX_LINES}"),
        format!("--since=@{since}"),
        format!("_SYSTEMD_UNIT={unit}"),
    ]
}

/// The lines of `journalctl`'s output, bounded: the last [`MAX_LINES`]
/// non-empty lines, each cut to [`MAX_LINE_CHARS`] characters.
pub(crate) fn lines(stdout: &str) -> Vec<Untrusted> {
    let all: Vec<&str> = stdout
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty())
        .collect();
    all[all.len().saturating_sub(MAX_LINES)..]
        .iter()
        .map(|line| {
            let cut: String = line.chars().take(MAX_LINE_CHARS).collect();
            let text = if cut.len() < line.len() {
                cut + TRUNCATED
            } else {
                cut
            };
            Untrusted::new(text)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_units_own_lines_since_its_start_are_asked_for() {
        let since = UNIX_EPOCH + std::time::Duration::from_millis(1_700_000_000_900);
        let args = arguments("web.service", since);
        assert!(args.contains(&"_SYSTEMD_UNIT=web.service".to_owned()));
        assert!(args.contains(&"--since=@1700000000".to_owned()));
        assert!(args.contains(&"--lines=5".to_owned()));
    }

    #[test]
    fn lines_are_bounded_in_number_and_length() {
        let long = "é".repeat(500);
        let out = format!("one\n\ntwo\nthree\nfour\nfive\nsix\n{long}\n");
        let kept = lines(&out);
        assert_eq!(kept.len(), MAX_LINES);
        assert_eq!(kept[0].as_raw(), "three");
        let last = kept[4].as_raw();
        assert!(last.ends_with(TRUNCATED), "{last}");
        assert_eq!(
            last.trim_end_matches(TRUNCATED).chars().count(),
            MAX_LINE_CHARS
        );
    }
}
