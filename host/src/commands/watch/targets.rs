//! What a watch follows, and which policies each thing concerns, learned
//! from the last runs: the units each policy read or changed, the files
//! its services subscribe to, the documents it is made of, and what every
//! policy reads (host.toml, the trusted keys).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::commands::run::{Concern, Inputs, PlannedPolicy};
use crate::resource::{Kind, ResourceRef};
use crate::subscriptions::dpkg;

use super::wake::Wake;

/// Whom a watched path concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Interest {
    /// These policies (by key).
    Policies(BTreeSet<String>),
    /// Every policy: what they all read.
    All,
}

impl Interest {
    fn add(&mut self, key: &str) {
        if let Interest::Policies(keys) = self {
            keys.insert(key.to_owned());
        }
    }
}

/// A path to follow: a file (its directory is watched, filtered by its
/// name, so that a replacement by rename is seen), or a directory and
/// everything below it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Followed {
    pub(crate) path: PathBuf,
    /// A directory: every entry below it counts.
    pub(crate) tree: bool,
}

/// Everything a watch follows.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Targets {
    /// Unit → the policies that read or changed it.
    units: BTreeMap<String, BTreeSet<String>>,
    paths: BTreeMap<PathBuf, (bool, Interest)>,
    /// Key → the policy's name in reports.
    names: BTreeMap<String, String>,
}

impl Targets {
    /// Learns from a run: the concerns of the policies that ran replace
    /// what was known of them; policies no longer listed are forgotten;
    /// the documents and inputs are taken afresh.
    pub(crate) fn learn(
        &mut self,
        planned: &[PlannedPolicy],
        concerns: &[Concern],
        inputs: &Inputs,
    ) {
        let listed: BTreeSet<&str> = planned.iter().map(|p| p.key.as_str()).collect();
        let ran: BTreeSet<&str> = concerns.iter().map(|c| c.key.as_str()).collect();
        self.learn_units(&listed, &ran, concerns);
        self.paths = self.learn_paths(&listed, &ran, (planned, concerns), inputs);
    }

    /// The units of the policies that ran now; those of the others as
    /// they were; none of policies no longer listed.
    fn learn_units(&mut self, listed: &BTreeSet<&str>, ran: &BTreeSet<&str>, concerns: &[Concern]) {
        for keys in self.units.values_mut() {
            keys.retain(|k| listed.contains(k.as_str()) && !ran.contains(k.as_str()));
        }
        for concern in concerns {
            for unit in &concern.units {
                self.units
                    .entry(unit.clone())
                    .or_default()
                    .insert(concern.key.clone());
            }
            self.names
                .insert(concern.key.clone(), concern.policy.clone());
        }
        self.units.retain(|_, keys| !keys.is_empty());
        self.names.retain(|key, _| listed.contains(key.as_str()));
    }

    /// The paths to follow: subscriptions of the policies that ran now,
    /// those of the others as they were, every policy's documents, and what
    /// every run reads (host.toml, the pauses, the trusted keys, the policy
    /// directories).
    fn learn_paths(
        &self,
        listed: &BTreeSet<&str>,
        ran: &BTreeSet<&str>,
        (planned, concerns): (&[PlannedPolicy], &[Concern]),
        inputs: &Inputs,
    ) -> BTreeMap<PathBuf, (bool, Interest)> {
        let mut paths: BTreeMap<PathBuf, (bool, Interest)> = BTreeMap::new();
        for (path, (tree, interest)) in &self.paths {
            if let Interest::Policies(keys) = interest {
                let kept: BTreeSet<String> = keys
                    .iter()
                    .filter(|k| listed.contains(k.as_str()) && !ran.contains(k.as_str()))
                    .cloned()
                    .collect();
                if !kept.is_empty() {
                    paths.insert(path.clone(), (*tree, Interest::Policies(kept)));
                }
            }
        }
        let mut follow = |path: PathBuf, tree: bool, key: Option<&str>| {
            let entry = paths
                .entry(path)
                .or_insert_with(|| (tree, Interest::Policies(BTreeSet::new())));
            entry.0 |= tree;
            match key {
                Some(key) => entry.1.add(key),
                None => entry.1 = Interest::All,
            }
        };
        for concern in concerns {
            for reference in &concern.references {
                let Ok(reference) = ResourceRef::parse(reference) else {
                    continue;
                };
                match reference.kind() {
                    Kind::File => {
                        let path = Path::new(reference.name());
                        if path.is_absolute() && inputs.watch_paths.allows(path) {
                            follow(path.to_path_buf(), path.is_dir(), Some(&concern.key));
                        }
                    }
                    Kind::Package => {
                        follow(PathBuf::from(dpkg::STATUS_FILE), false, Some(&concern.key))
                    }
                    Kind::Service => {}
                }
            }
        }
        for policy in planned {
            for document in &policy.documents {
                follow(document.clone(), false, Some(&policy.key));
            }
        }
        follow(inputs.config.clone(), false, None);
        follow(inputs.pauses.clone(), false, None);
        for key in &inputs.trusted_keys {
            follow(key.clone(), false, None);
        }
        follow(inputs.trusted_keys_dir.clone(), true, None);
        for dir in &inputs.policy_dirs {
            follow(dir.clone(), true, None);
        }
        paths
    }

    /// The units to follow on the bus.
    pub(crate) fn units(&self) -> BTreeSet<String> {
        self.units.keys().cloned().collect()
    }

    /// The paths to follow with inotify.
    pub(crate) fn followed(&self) -> Vec<Followed> {
        self.paths
            .iter()
            .map(|(path, (tree, _))| Followed {
                path: path.clone(),
                tree: *tree,
            })
            .collect()
    }

    /// The policies a wake concerns: `Some(keys)` (maybe none), or `None`
    /// for all of them. With the cause, in words.
    pub(crate) fn concerned(&self, wake: &Wake) -> (Option<BTreeSet<String>>, String) {
        match wake {
            Wake::Unit(unit) => (
                Some(self.units.get(unit).cloned().unwrap_or_default()),
                format!("{unit} changed"),
            ),
            // A reload: the files systemd read may differ, for every policy
            // with units (the bus watcher asks nothing then, see
            // `BusEvent::Reloaded`).
            Wake::Reloaded => (
                Some(self.units.values().flatten().cloned().collect()),
                "systemd reloaded".to_owned(),
            ),
            Wake::Path(path) => (self.of_path(path), format!("{} changed", path.display())),
            Wake::Missed(why) => (None, (*why).to_owned()),
            Wake::Hangup => (None, "SIGHUP".to_owned()),
            Wake::Stop(_) => (Some(BTreeSet::new()), String::new()),
        }
    }

    /// The policies a change at `path` concerns: those following it, or a
    /// directory it lies in.
    fn of_path(&self, path: &Path) -> Option<BTreeSet<String>> {
        let mut keys = BTreeSet::new();
        for (followed, (tree, interest)) in &self.paths {
            let hit = path == followed || (*tree && path.starts_with(followed));
            if !hit {
                continue;
            }
            match interest {
                Interest::All => return None,
                Interest::Policies(of) => keys.extend(of.iter().cloned()),
            }
        }
        Some(keys)
    }

    /// How many policies and units are followed, for the status line.
    pub(crate) fn counts(&self) -> (usize, usize) {
        (self.names.len(), self.units.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subscriptions::paths::WatchPaths;

    fn inputs() -> Inputs {
        Inputs {
            config: "/etc/policy-host/host.toml".into(),
            trusted_keys: vec![],
            trusted_keys_dir: "/etc/policy-host/trusted-keys".into(),
            watch_paths: WatchPaths::new(&["/etc".to_owned()]).unwrap(),
            policy_dirs: vec![],
            pauses: "/var/lib/policy-host/paused.json".into(),
        }
    }

    fn planned(key: &str) -> PlannedPolicy {
        PlannedPolicy {
            key: key.into(),
            documents: vec![key.into(), format!("{key}.minisig").into()],
        }
    }

    fn concern(key: &str, units: &[&str], references: &[&str]) -> Concern {
        Concern {
            key: key.into(),
            policy: key.rsplit('/').next().unwrap().into(),
            units: units.iter().map(|u| (*u).to_owned()).collect(),
            references: references.iter().map(|r| (*r).to_owned()).collect(),
        }
    }

    fn set(keys: &[&str]) -> Option<BTreeSet<String>> {
        Some(keys.iter().map(|k| (*k).to_owned()).collect())
    }

    #[test]
    fn each_thing_wakes_the_policies_it_concerns() {
        let mut targets = Targets::default();
        let (a, b) = ("/p/a.wasm", "/p/b.wasm");
        targets.learn(
            &[planned(a), planned(b)],
            &[
                concern(
                    a,
                    &["web.service", "db.service"],
                    &["file#/etc/web.conf", "package#nginx"],
                ),
                concern(b, &["db.service"], &["file#/home/x.conf"]),
            ],
            &inputs(),
        );
        assert_eq!(
            targets.units(),
            ["db.service".to_owned(), "web.service".to_owned()].into()
        );
        assert_eq!(
            targets.concerned(&Wake::Unit("web.service".into())).0,
            set(&[a])
        );
        assert_eq!(
            targets.concerned(&Wake::Unit("db.service".into())).0,
            set(&[a, b])
        );
        // A unit no policy manages wakes nothing.
        assert_eq!(
            targets.concerned(&Wake::Unit("other.service".into())).0,
            set(&[])
        );
        assert_eq!(
            targets.concerned(&Wake::Path("/etc/web.conf".into())).0,
            set(&[a])
        );
        assert_eq!(
            targets.concerned(&Wake::Path(dpkg::STATUS_FILE.into())).0,
            set(&[a])
        );
        // Outside the watch paths: not followed (the run reports it).
        assert!(!targets
            .followed()
            .iter()
            .any(|f| f.path == Path::new("/home/x.conf")));
        assert_eq!(
            targets.concerned(&Wake::Path("/home/x.conf".into())).0,
            set(&[])
        );
        // A policy's own file and signature wake it alone.
        assert_eq!(targets.concerned(&Wake::Path(b.into())).0, set(&[b]));
        assert_eq!(
            targets.concerned(&Wake::Path("/p/b.wasm.minisig".into())).0,
            set(&[b])
        );
        // What every policy reads wakes them all, and so does a new key.
        assert_eq!(
            targets
                .concerned(&Wake::Path("/etc/policy-host/host.toml".into()))
                .0,
            None
        );
        assert_eq!(
            targets
                .concerned(&Wake::Path("/etc/policy-host/trusted-keys/new.pub".into()))
                .0,
            None
        );
        assert_eq!(targets.counts(), (2, 2));
    }

    #[test]
    fn a_run_of_some_policies_keeps_what_the_others_follow() {
        let mut targets = Targets::default();
        let (a, b) = ("/p/a.wasm", "/p/b.wasm");
        targets.learn(
            &[planned(a), planned(b)],
            &[
                concern(a, &["web.service"], &["file#/etc/web.conf"]),
                concern(b, &["db.service"], &[]),
            ],
            &inputs(),
        );
        // `a` ran again and no longer manages web.service.
        targets.learn(
            &[planned(a), planned(b)],
            &[concern(a, &["api.service"], &[])],
            &inputs(),
        );
        assert_eq!(
            targets.concerned(&Wake::Unit("web.service".into())).0,
            set(&[])
        );
        assert_eq!(
            targets.concerned(&Wake::Unit("api.service".into())).0,
            set(&[a])
        );
        assert_eq!(
            targets.concerned(&Wake::Unit("db.service".into())).0,
            set(&[b])
        );
        assert_eq!(
            targets.concerned(&Wake::Path("/etc/web.conf".into())).0,
            set(&[])
        );
        // `b` is no longer listed: forgotten.
        targets.learn(&[planned(a)], &[], &inputs());
        assert_eq!(
            targets.concerned(&Wake::Unit("db.service".into())).0,
            set(&[])
        );
        assert_eq!(targets.counts(), (1, 1));
    }
}
