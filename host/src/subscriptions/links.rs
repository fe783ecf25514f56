//! Resolving a subscribed path the way the kernel's `fs.protected_symlinks`
//! would let root follow it: a symbolic link is followed only when root owns
//! it, or when its owner also owns what it points to.
//!
//! The host reads subscribed files as root. Where a directory on the way is
//! writable by another user, that user could point `file#/etc/demo/app.conf`
//! at a file only root can read (`ln -sf /etc/shadow /etc/demo/app.conf`):
//! following it, the host would restart the subscriber whenever that file
//! changed, telling the user when it changed and letting them guess its
//! content at the cost of restarts. Such a link is refused, naming it.

use std::fs;
use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Component, Path, PathBuf};

/// Links followed in one resolution at most, as the kernel's `ELOOP` (40).
const MAX_LINKS: usize = 40;

/// A path resolved through the links the rule lets root follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The path with every link replaced by what it points to.
    pub path: PathBuf,
    /// False when a component is missing (the path is absent; a link to
    /// nothing is absent too).
    pub exists: bool,
}

/// Why a path is not followed: words that follow the reference
/// (`file#/etc/demo/app.conf is not followed: ...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub String);

/// Whether root follows a link owned by `link_owner` to something owned by
/// `target_owner` (`None`: it points to nothing): the kernel's
/// `fs.protected_symlinks`, as it applies to root following a link another
/// user could have planted.
pub fn may_follow(link_owner: u32, target_owner: Option<u32>) -> bool {
    link_owner == 0 || target_owner == Some(link_owner)
}

/// Resolves `path` (absolute and normalised, as `WatchPaths::check` gives
/// it) component by component, following each link only when
/// [`may_follow`] allows it.
pub fn resolve(path: &Path) -> Result<Resolved, Refused> {
    let mut pending: Vec<PathBuf> = components(path);
    pending.reverse();
    let mut resolved = PathBuf::from("/");
    let mut links = 0;
    while let Some(name) = pending.pop() {
        if name.as_os_str() == ".." {
            resolved.pop();
            continue;
        }
        let next = resolved.join(&name);
        let meta = match fs::symlink_metadata(&next) {
            Ok(meta) => meta,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                // Missing from here on: the rest is named as written.
                let mut rest = next;
                while let Some(name) = pending.pop() {
                    rest.push(name);
                }
                return Ok(Resolved {
                    path: rest,
                    exists: false,
                });
            }
            Err(e) => return Err(Refused(format!("{} cannot be read: {e}", next.display()))),
        };
        if !meta.file_type().is_symlink() {
            resolved = next;
            continue;
        }
        links += 1;
        if links > MAX_LINKS {
            return Err(Refused(format!(
                "{} leads through more than {MAX_LINKS} symbolic links",
                path.display()
            )));
        }
        let target_owner = fs::metadata(&next).ok().map(|m| m.uid());
        if !may_follow(meta.uid(), target_owner) {
            let target = fs::read_link(&next)
                .map(|t| t.display().to_string())
                .unwrap_or_else(|_| "?".to_owned());
            return Err(Refused(format!(
                "{} is a symbolic link owned by uid {} to {target}, {}; the host follows a link \
                 only when root owns it or its owner owns what it points to (as the kernel's \
                 fs.protected_symlinks does)",
                next.display(),
                meta.uid(),
                match target_owner {
                    Some(uid) => format!("which uid {uid} owns"),
                    None => "which does not exist".to_owned(),
                }
            )));
        }
        let target = fs::read_link(&next)
            .map_err(|e| Refused(format!("{} cannot be read: {e}", next.display())))?;
        let mut expanded = components(&target);
        expanded.reverse();
        pending.extend(expanded);
        if target.is_absolute() {
            resolved = PathBuf::from("/");
        }
    }
    Ok(Resolved {
        path: resolved,
        exists: true,
    })
}

/// The names of `path`'s components (`..` kept, `.` and the root dropped).
fn components(path: &Path) -> Vec<PathBuf> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(PathBuf::from(name)),
            Component::ParentDir => Some(PathBuf::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    #[test]
    fn root_follows_a_link_only_root_or_the_targets_owner_made() {
        assert!(may_follow(0, Some(0)), "root's link to root's file");
        assert!(may_follow(0, Some(1000)), "root's link to a user's file");
        assert!(may_follow(0, None), "root's link to nothing");
        assert!(
            may_follow(1000, Some(1000)),
            "a user's link to their own file"
        );
        assert!(!may_follow(1000, Some(0)), "a user's link to root's file");
        assert!(
            !may_follow(1000, Some(1001)),
            "a user's link to another's file"
        );
        assert!(!may_follow(1000, None), "a user's link to nothing");
    }

    #[test]
    fn links_this_process_owns_resolve_like_the_kernel_resolves_them() {
        // Every link here is owned by whoever runs the test, pointing to
        // what they own: followed, as `canonicalize` follows it.
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        fs::create_dir(root.join("real")).unwrap();
        fs::write(root.join("real/app.conf"), "x").unwrap();
        symlink("real", root.join("dir-link")).unwrap();
        symlink("../real/app.conf", root.join("real/relative")).unwrap();
        symlink(root.join("dir-link/app.conf"), root.join("absolute")).unwrap();
        for path in ["dir-link/app.conf", "real/relative", "absolute"] {
            let resolved = resolve(&root.join(path)).unwrap();
            assert_eq!(
                resolved,
                Resolved {
                    path: root.join("real/app.conf"),
                    exists: true
                },
                "{path}"
            );
            assert_eq!(resolved.path, fs::canonicalize(root.join(path)).unwrap());
        }
        let missing = resolve(&root.join("dir-link/new.conf")).unwrap();
        assert_eq!(missing.path, root.join("real/new.conf"));
        assert!(!missing.exists);
        symlink("loop-b", root.join("loop-a")).unwrap();
        symlink("loop-a", root.join("loop-b")).unwrap();
        // Refused either way: as root, after 40 links; as another user, at
        // the first (its target cannot be looked at, so nobody owns it).
        let err = resolve(&root.join("loop-a")).unwrap_err().0;
        assert!(
            err.contains("more than 40 symbolic links") || err.contains("which does not exist"),
            "{err}"
        );
    }
}
