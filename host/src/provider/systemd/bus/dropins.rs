//! Drop-ins on disk that systemd has not loaded. systemd 252's
//! `NeedDaemonReload` sees a unit file or drop-in edited, added to or
//! removed from a drop-in directory it read, but not a drop-in directory
//! created since it loaded the unit (`/etc/systemd/system/web.service.d/`
//! made after the last reload): it looks for directories in a cache made at
//! the reload. Before the host lets a status of a unit go without the run's
//! reload, it looks in that unit's drop-in directories itself and compares
//! with the unit's `DropInPaths`.
//!
//! Only directories systemd 252 reads for the unit are looked in (its own
//! `NAME.d`, a template's `foo@.service.d`, the dash prefixes
//! `foo-.service.d`, the type's `service.d`), in the search paths an
//! administrator or a package writes to; a drop-in found there that systemd
//! did not list, and that is not masked or overridden by one of the same
//! name, means the unit's files changed.

use std::path::{Path, PathBuf};

/// The system manager's unit search paths that hold drop-ins written by
/// administrators and packages, highest priority first (generators' output
/// is rewritten by the reload itself).
pub(crate) const SEARCH_PATHS: [&str; 8] = [
    "/etc/systemd/system.control",
    "/run/systemd/system.control",
    "/run/systemd/transient",
    "/etc/systemd/system",
    "/run/systemd/system",
    "/usr/local/lib/systemd/system",
    "/usr/lib/systemd/system",
    "/lib/systemd/system",
];

/// The drop-in directory names systemd reads for `unit` (mangled, with its
/// type suffix), most specific first.
fn directory_names(unit: &str) -> Vec<String> {
    let Some((base, kind)) = unit.rsplit_once('.') else {
        return Vec::new();
    };
    let mut names = vec![format!("{unit}.d")];
    if let Some((template, instance)) = base.split_once('@') {
        if !instance.is_empty() {
            names.push(format!("{template}@.{kind}.d"));
        }
    } else {
        // "a-b-c.service" is also configured by "a-b-.service.d" and
        // "a-.service.d".
        for (at, _) in base
            .match_indices('-')
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
        {
            if at + 1 < base.len() {
                names.push(format!("{}.{kind}.d", &base[..=at]));
            }
        }
    }
    names.push(format!("{kind}.d"));
    names
}

/// Whether systemd reads `path` as a masked drop-in: a link to /dev/null
/// or an empty file.
fn masked(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| {
        use std::os::unix::fs::FileTypeExt;
        m.file_type().is_char_device() || (m.is_file() && m.len() == 0)
    })
}

/// The first drop-in of `unit` (mangled) on disk under `roots` that is not
/// among `listed` (the unit's `DropInPaths`), not masked and not
/// overridden by a listed one of the same name: a sign that systemd's copy
/// of the unit is older than its files. `roots` are the search paths, in
/// priority order (the host passes [`SEARCH_PATHS`]).
pub(crate) fn unloaded_dropin(unit: &str, listed: &[String], roots: &[&Path]) -> Option<PathBuf> {
    let listed_names: Vec<&str> = listed
        .iter()
        .filter_map(|p| Path::new(p).file_name()?.to_str())
        .collect();
    let mut seen: Vec<String> = Vec::new();
    for root in roots {
        for dir in directory_names(unit) {
            let Ok(entries) = std::fs::read_dir(root.join(&dir)) else {
                continue;
            };
            let mut names: Vec<String> = entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|name| name.ends_with(".conf"))
                .collect();
            names.sort();
            for name in names {
                // The first of a name, in priority order, is the one systemd reads.
                if seen.contains(&name) {
                    continue;
                }
                seen.push(name.clone());
                let path = root.join(&dir).join(&name);
                if listed_names.contains(&name.as_str()) || masked(&path) {
                    continue;
                }
                return Some(path);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_are_the_units_its_templates_its_prefixes_and_its_types() {
        assert_eq!(
            directory_names("web.service"),
            ["web.service.d", "service.d"]
        );
        assert_eq!(
            directory_names("a-b-c.service"),
            [
                "a-b-c.service.d",
                "a-b-.service.d",
                "a-.service.d",
                "service.d"
            ]
        );
        assert_eq!(
            directory_names("getty@tty1.service"),
            ["getty@tty1.service.d", "getty@.service.d", "service.d"]
        );
        assert_eq!(directory_names("noext"), Vec::<String>::new());
    }

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn a_dropin_systemd_did_not_list_is_found_and_listed_masked_or_overridden_ones_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let etc = dir.path().join("etc");
        let lib = dir.path().join("lib");
        let roots = [etc.as_path(), lib.as_path()];
        let listed = |paths: &[&Path]| -> Vec<String> {
            paths.iter().map(|p| p.display().to_string()).collect()
        };
        assert_eq!(unloaded_dropin("web.service", &[], &roots), None);

        let ours = etc.join("web.service.d/override.conf");
        write(&ours, "[Service]\nEnvironment=A=1\n");
        assert_eq!(
            unloaded_dropin("web.service", &[], &roots),
            Some(ours.clone())
        );
        assert_eq!(
            unloaded_dropin("web.service", &listed(&[&ours]), &roots),
            None
        );
        // Not a drop-in: only `*.conf` files are.
        write(&etc.join("web.service.d/notes.txt"), "x");
        assert_eq!(
            unloaded_dropin("web.service", &listed(&[&ours]), &roots),
            None
        );

        // The same name lower down is overridden by the listed one.
        write(&lib.join("web.service.d/override.conf"), "[Service]\n");
        assert_eq!(
            unloaded_dropin("web.service", &listed(&[&ours]), &roots),
            None
        );

        // An empty file masks a drop-in of its name: systemd lists neither.
        let mask = etc.join("service.d/hardening.conf");
        write(&mask, "");
        write(&lib.join("service.d/hardening.conf"), "[Service]\nX=1\n");
        assert_eq!(
            unloaded_dropin("web.service", &listed(&[&ours]), &roots),
            None
        );

        // A new prefix directory counts for the units it configures only.
        let prefix = lib.join("web-.service.d/limits.conf");
        write(&prefix, "[Service]\nLimitNOFILE=1024\n");
        assert_eq!(
            unloaded_dropin("web-api.service", &[], &roots),
            Some(prefix)
        );
        assert_eq!(
            unloaded_dropin("web.service", &listed(&[&ours]), &roots),
            None
        );
    }
}
