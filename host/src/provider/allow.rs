//! `--allow-unit PATTERN`: which units a run may touch at all.

use globset::{Glob, GlobSet, GlobSetBuilder};

/// Glob patterns on unit names. A name without a unit-type suffix also
/// matches as `NAME.service`, because that is the unit systemctl acts on, so
/// `nginx.service` allows a policy's `nginx` and `web-*` allows `web-api`.
#[derive(Debug, Clone)]
pub struct UnitAllowlist {
    patterns: Vec<String>,
    set: GlobSet,
}

/// The unit types systemctl recognises as a suffix.
const UNIT_SUFFIXES: [&str; 11] = [
    ".service",
    ".socket",
    ".target",
    ".timer",
    ".mount",
    ".automount",
    ".swap",
    ".path",
    ".slice",
    ".scope",
    ".device",
];

impl UnitAllowlist {
    /// Compiles the patterns; an invalid one is an error naming it.
    pub fn new(patterns: &[String]) -> anyhow::Result<Self> {
        let mut builder = GlobSetBuilder::new();
        for pattern in patterns {
            let glob =
                Glob::new(pattern).map_err(|e| anyhow::anyhow!("--allow-unit {pattern:?}: {e}"))?;
            builder.add(glob);
        }
        Ok(Self {
            patterns: patterns.to_vec(),
            set: builder.build()?,
        })
    }

    pub fn allows(&self, name: &str) -> bool {
        if self.set.is_match(name) {
            return true;
        }
        !UNIT_SUFFIXES.iter().any(|s| name.ends_with(s))
            && self.set.is_match(format!("{name}.service"))
    }

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

    #[test]
    fn globs_match_names_with_and_without_the_service_suffix() {
        let allow = list(&["web-*", "nginx.service"]);
        assert!(allow.allows("web-api"));
        assert!(allow.allows("web-api.service"));
        assert!(allow.allows("nginx"));
        assert!(allow.allows("nginx.service"));
        assert!(!allow.allows("sshd"));
        assert!(!allow.allows("nginx.socket"));
        assert!(!allow.allows("webapi"));
    }

    #[test]
    fn invalid_pattern_is_named() {
        let err = UnitAllowlist::new(&["web-[".to_string()]).unwrap_err();
        assert!(err.to_string().contains("web-["), "{err}");
    }
}
