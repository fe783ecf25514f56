//! The host's own check of every service name a guest sends.
//!
//! The guest SDK validates names too, but a guest is untrusted: it may not use
//! the SDK at all. This is an independent implementation of the same rules
//! (docs/service-type.md, "Service names": `a-zA-Z0-9 . _ + : ~ -`, 1 to 255
//! characters, no leading `-`), so that a bug on one side is not silently shared by the other.
//! The end-to-end tests check that both sides agree.

use std::fmt;
use std::sync::LazyLock;

use regex::Regex;

/// The longest name accepted, in bytes.
pub const MAX_LEN: usize = 255;

static ALLOWED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[A-Za-z0-9._+:~-]+$").expect("static regex"));

/// A name the host has checked and may pass to `systemctl` (after `--`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CheckedName(String);

impl CheckedName {
    /// Checks `name`; the error quotes it (escaped, so control characters show).
    pub fn check(name: &str) -> Result<Self, String> {
        let reason = if name.is_empty() {
            Some("the name is empty".to_owned())
        } else if name.len() > MAX_LEN {
            Some(format!(
                "{} bytes is longer than the limit of {MAX_LEN}",
                name.len()
            ))
        } else if !ALLOWED.is_match(name) {
            Some("only a-z A-Z 0-9 . _ + : ~ - are allowed".to_owned())
        } else if name.starts_with('-') {
            Some("it starts with '-', which systemctl would read as an option".to_owned())
        } else {
            None
        };
        match reason {
            None => Ok(Self(name.to_owned())),
            Some(reason) => Err(format!("invalid service name {}: {reason}", quote(name))),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for CheckedName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Quotes untrusted text for a message, escaping control characters and
/// cutting it short so a hostile name cannot flood the report.
pub fn quote(text: &str) -> String {
    const SHOWN: usize = 64;
    let mut shown: String = text.chars().take(SHOWN).collect();
    if text.chars().count() > SHOWN {
        shown.push_str("...");
    }
    format!("{shown:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_documented_examples_and_every_allowed_character() {
        for name in [
            "httpd",
            "nginx.service",
            "my-app_v2",
            "a.b_c+d:e~f-g",
            &"x".repeat(255),
        ] {
            assert!(CheckedName::check(name).is_ok(), "{name}");
        }
    }

    #[test]
    fn rejects_hostile_names_quoting_them() {
        for name in [
            "app@instance",
            "app; rm -rf /",
            "$(reboot)",
            "-H evil",
            "--root=/",
            "--help",
            "-h",
            "a b",
            "../../x",
            "x\ny",
            "",
            "a\0b",
            "café",
            &"x".repeat(256),
        ] {
            let err = CheckedName::check(name).expect_err(name);
            assert!(err.starts_with("invalid service name "), "{err}");
        }
        let err = CheckedName::check("x\ny").unwrap_err();
        assert!(
            err.contains(r#""x\ny""#),
            "control characters are escaped: {err}"
        );
        let err = CheckedName::check(&"y".repeat(300)).unwrap_err();
        assert!(
            err.len() < 200,
            "long names are shortened in messages: {err}"
        );
    }
}
