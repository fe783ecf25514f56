//! `--allow-unit PATTERN`: which units a run may touch at all.
//!
//! The allowlist means services unless a pattern says otherwise:
//!
//! - A pattern that ends in a unit type (`.service`, `.socket`, `.target`,
//!   ... : systemd's eleven) matches units of that type only:
//!   `web-*.socket` allows `web-api.socket` and nothing else.
//! - A pattern without a unit type matches `.service` units only, as if
//!   `.service` were written after it: `web-*` is `web-*.service`, so it
//!   allows `web-api` and `web-api.service` but not `web-x.target` or
//!   `web-api.socket`; `*` allows every service and nothing else.
//! - A pattern whose last `.`-part holds a wildcard (`*.*`, `web.*`,
//!   `app-1.2*`) could mean a unit type or part of a name, so it is refused:
//!   write the type out (`*.service`, `app-1.2*.service`), one pattern per
//!   type. There is no pattern for "any type".
//!
//! A name is matched as systemctl reads it: a name without a unit type is a
//! service (`web` is `web.service`; `web.foo` is `web.foo.service`), so the
//! policy's `web` and `web.service` are one unit and allowed alike.

use globset::{Glob, GlobSet, GlobSetBuilder};

/// Glob patterns on unit names, each bound to one unit type (see the module
/// documentation).
#[derive(Debug, Clone)]
pub struct UnitAllowlist {
    patterns: Vec<String>,
    set: GlobSet,
}

/// The characters that make a glob more than a literal (globset's syntax).
const GLOB_CHARS: [char; 7] = ['*', '?', '[', ']', '{', '}', '\\'];

/// Whether `name` ends in one of systemd's unit types.
fn has_unit_type(name: &str) -> bool {
    contract_words::unit_type(name).is_some()
}

/// The unit systemctl acts on for `name`: the name itself when it ends in a
/// unit type, else `NAME.service` (systemctl appends `.service`).
fn unit_name(name: &str) -> String {
    if has_unit_type(name) {
        name.to_owned()
    } else {
        format!("{name}.service")
    }
}

/// The glob a pattern stands for: itself when it ends in a unit type, else
/// `PATTERN.service`. A pattern whose type could be read either way is an
/// error that says what to write instead.
fn pattern_glob(pattern: &str) -> anyhow::Result<Glob> {
    let invalid = |reason: String| anyhow::anyhow!("pattern {pattern:?}: {reason}");
    // First the pattern as written, so a syntax error names what was typed
    // (and a dangling `\` cannot escape the `.service` added below).
    Glob::new(pattern).map_err(|e| invalid(e.to_string()))?;
    if has_unit_type(pattern) {
        return Glob::new(pattern).map_err(|e| invalid(e.to_string()));
    }
    if let Some((stem, last)) = pattern.rsplit_once('.') {
        if last.contains(GLOB_CHARS) {
            return Err(invalid(format!(
                "a wildcard after the last '.' could match the unit type; write the type out, \
                 one pattern per type (e.g. \"{stem}.service\", \"{stem}.socket\"; or \
                 \"{pattern}.service\" if the wildcard is part of a service's name); the \
                 types: {}",
                contract_words::UNIT_TYPES
                    .map(|t| format!(".{t}"))
                    .join(" ")
            )));
        }
    }
    Glob::new(&format!("{pattern}.service")).map_err(|e| invalid(e.to_string()))
}

impl UnitAllowlist {
    /// Compiles the patterns; an invalid or ambiguous one is an error naming it.
    pub fn new(patterns: &[String]) -> anyhow::Result<Self> {
        let mut builder = GlobSetBuilder::new();
        for pattern in patterns {
            builder.add(pattern_glob(pattern)?);
        }
        Ok(Self {
            patterns: patterns.to_vec(),
            set: builder.build()?,
        })
    }

    /// Whether the unit systemctl would act on for `name` is allowed.
    pub fn allows(&self, name: &str) -> bool {
        self.set.is_match(unit_name(name))
    }

    /// The patterns as given, for messages.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(patterns: &[&str]) -> UnitAllowlist {
        UnitAllowlist::new(&patterns.iter().map(|p| p.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[track_caller]
    fn check(allow: &UnitAllowlist, allowed: &[&str], denied: &[&str]) {
        for name in allowed {
            assert!(
                allow.allows(name),
                "{:?} should allow {name}",
                allow.patterns()
            );
        }
        for name in denied {
            assert!(
                !allow.allows(name),
                "{:?} should deny {name}",
                allow.patterns()
            );
        }
    }

    #[test]
    fn a_pattern_without_a_type_means_services_only() {
        check(
            &list(&["web-*"]),
            &["web-api", "web-api.service", "web-x", "web-a.b.service"],
            &[
                "web-x.target",
                "web-api.socket",
                "web-api.timer",
                "web-api.mount",
                "web-api.slice",
                "webapi",
                "sshd",
            ],
        );
    }

    #[test]
    fn a_pattern_with_a_type_means_that_type_only() {
        check(
            &list(&["web-*.socket"]),
            &["web-api.socket"],
            &[
                "web-api",
                "web-api.service",
                "web-api.target",
                "web-api.socket.service",
            ],
        );
        check(
            &list(&["nginx.service"]),
            &["nginx", "nginx.service"],
            &["nginx.socket", "nginx.target", "nginx-x", "sshd"],
        );
        check(
            &list(&["*.timer", "backup.target"]),
            &["a.timer", "backup.timer", "backup.target"],
            &["backup", "backup.service", "other.target"],
        );
    }

    #[test]
    fn star_allows_every_service_and_nothing_else() {
        let allow = list(&["*"]);
        check(
            &allow,
            &["sshd", "sshd.service", "a.b.service", "web.foo"],
            &[],
        );
        for unit_type in contract_words::UNIT_TYPES
            .iter()
            .filter(|t| **t != "service")
        {
            assert!(
                !allow.allows(&format!("x.{unit_type}")),
                "* allowed x.{unit_type}"
            );
        }
        check(
            &list(&["*.service"]),
            &["sshd", "sshd.service"],
            &["sshd.socket"],
        );
    }

    #[test]
    fn a_glob_cannot_reach_into_the_type() {
        // `web*` must not match `web.target` by letting `*` take `.target`.
        check(
            &list(&["web*"]),
            &["web", "web.service", "webapp", "web.target.service"],
            &["web.target", "web.socket", "webapp.socket", "web.scope"],
        );
        check(&list(&["web?socket"]), &["web-socket"], &["web.socket"]);
    }

    #[test]
    fn web_and_web_service_are_one_unit() {
        for pattern in ["web", "web.service"] {
            check(
                &list(&[pattern]),
                &["web", "web.service"],
                &["web.socket", "web.target", "web-x", "web.service.socket"],
            );
        }
    }

    #[test]
    fn an_unknown_suffix_is_part_of_a_service_name() {
        // systemctl reads `web.foo` as `web.foo.service`.
        check(
            &list(&["web.foo"]),
            &["web.foo", "web.foo.service"],
            &["web", "web.service", "web.foo.socket"],
        );
        check(
            &list(&["app-1.2"]),
            &["app-1.2", "app-1.2.service"],
            &["app-1.3"],
        );
    }

    #[test]
    fn template_instances_and_escapes() {
        check(
            &list(&["foo@*"]),
            &["foo@bar", "foo@bar.service", "foo@", "foo@a\\x2db.service"],
            &["foo@bar.socket", "foo@bar.target", "foobar"],
        );
        check(
            &list(&["foo@bar.service"]),
            &["foo@bar", "foo@bar.service"],
            &["foo@baz", "foo@bar.socket", "foo@.service"],
        );
        check(
            &list(&["getty@*.socket"]),
            &["getty@tty1.socket"],
            &["getty@tty1", "getty@tty1.service"],
        );
        // A backslash in a pattern escapes: `\\` matches systemd's `\x2d` escapes.
        check(
            &list(&["home\\\\x2d*.mount"]),
            &["home\\x2duser.mount"],
            &["home-user.mount", "home\\x2duser", "home\\x2duser.service"],
        );
    }

    #[test]
    fn a_wildcard_type_is_refused_as_ambiguous() {
        for pattern in [
            "*.*",
            "web.*",
            "web.s*",
            "app-1.2*",
            "web.{service,socket}",
            "*.?",
        ] {
            let err = UnitAllowlist::new(&[pattern.to_string()]).unwrap_err();
            let message = err.to_string();
            assert!(
                message.contains(&format!("{pattern:?}")) && message.contains(".service"),
                "{message}"
            );
        }
        // A wildcard before a written-out type is fine.
        list(&["*.service", "web.*.socket", "app-1.2*.service"]);
    }

    #[test]
    fn invalid_pattern_is_named() {
        for pattern in ["web-[", "web\\"] {
            let err = UnitAllowlist::new(&[pattern.to_string()]).unwrap_err();
            assert!(err.to_string().contains(pattern), "{err}");
        }
    }
}
