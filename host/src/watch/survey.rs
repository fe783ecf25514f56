//! One policy's subscriptions, looked at before it runs: for each service,
//! which of its `file#` and `package#` references changed since the
//! service's last successful apply, which are seen for the first time
//! (recorded, nothing triggered), and which cannot be read (the service
//! fails, the others still apply). After the run, what a service's apply
//! made good is recorded ([`Survey::record`]).

use std::collections::BTreeSet;
use std::path::Path;

use serde::Serialize;

use super::dpkg::Database;
use super::files;
use super::record::Records;
use super::{Budget, Change, Fingerprint, WatchError, WatchPaths};
use crate::service_name::CheckedName;
use crate::text::Untrusted;

/// The most references one policy may subscribe to, in all.
pub const MAX_REFERENCES: usize = 10_000;
/// The longest reference read from a guest.
const MAX_REFERENCE_LEN: usize = 4096;

/// What became of one watched reference this run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum Seen {
    /// First seen: its fingerprint is recorded, nothing is triggered.
    Recorded,
    Unchanged,
    /// Changed since the service's last successful apply: a trigger.
    Changed {
        #[serde(flatten)]
        change: Change,
    },
    /// It could not be read: the service fails with this.
    Unreadable {
        error: String,
    },
}

/// One `file#` or `package#` reference of a service.
#[derive(Debug, Clone, Serialize)]
pub struct Watched {
    pub reference: String,
    #[serde(flatten)]
    pub seen: Seen,
    /// What it looks like now, recorded if the apply succeeds.
    #[serde(skip)]
    fingerprint: Option<Fingerprint>,
}

/// A service's watched references.
#[derive(Debug, Clone)]
pub struct ServiceWatch {
    /// `service#NAME`.
    pub resource: String,
    pub service: String,
    pub references: Vec<Watched>,
}

impl ServiceWatch {
    /// The references that changed.
    pub fn changed(&self) -> impl Iterator<Item = &Watched> {
        self.references
            .iter()
            .filter(|w| matches!(w.seen, Seen::Changed { .. }))
    }

    /// Why references could not be read.
    pub fn errors(&self) -> impl Iterator<Item = &str> {
        self.references.iter().filter_map(|w| match &w.seen {
            Seen::Unreadable { error } => Some(error.as_str()),
            _ => None,
        })
    }
}

/// Everything one policy watches.
#[derive(Debug, Default)]
pub struct Survey {
    pub services: Vec<ServiceWatch>,
}

/// Where to read, and what of it.
pub struct Sources<'a> {
    pub watch_paths: &'a WatchPaths,
    /// dpkg's status file ([`super::dpkg::STATUS_FILE`]).
    pub dpkg_status: &'a Path,
}

impl Survey {
    /// Looks at every `file#` and `package#` reference of `subscriptions`
    /// (what the guest declared: `service#NAME` and its references, checked
    /// here again) against what `records` holds for `policy`. Other types
    /// (`service#`) are not watched: they fire within the run. A malformed
    /// declaration is an error for the whole policy.
    pub fn take(
        policy: &str,
        subscriptions: &[(String, Vec<String>)],
        records: &Records,
        sources: &Sources<'_>,
        budget: &mut Budget,
    ) -> Result<Self, Untrusted> {
        let total: usize = subscriptions.iter().map(|(_, r)| r.len()).sum();
        if total > MAX_REFERENCES {
            return Err(Untrusted::new(format!(
                "the policy subscribes to {total} references; at most {MAX_REFERENCES} are watched"
            )));
        }
        let mut dpkg: Option<Result<Database, WatchError>> = None;
        let mut services = Vec::new();
        for (resource, references) in subscriptions {
            let service = resource
                .strip_prefix("service#")
                .filter(|name| CheckedName::check(name).is_ok())
                .ok_or_else(|| {
                    Untrusted::new(format!(
                        "the policy declared subscriptions of {resource:?}, which is not service#NAME with a valid service name"
                    ))
                })?;
            let mut watched = Vec::new();
            for reference in references {
                if reference.len() > MAX_REFERENCE_LEN {
                    return Err(Untrusted::new(format!(
                        "the policy declared a reference of {} bytes; at most {MAX_REFERENCE_LEN}",
                        reference.len()
                    )));
                }
                let now = if let Some(path) = reference.strip_prefix("file#") {
                    sources
                        .watch_paths
                        .check(path)
                        .and_then(|path| files::fingerprint(&path, sources.watch_paths, budget))
                } else if let Some(package) = reference.strip_prefix("package#") {
                    let db =
                        dpkg.get_or_insert_with(|| Database::read(sources.dpkg_status, budget));
                    match db {
                        Ok(db) => db.fingerprint(package),
                        Err(e) => Err(WatchError(
                            e.0.replace("package#:", &format!("package#{package}:")),
                        )),
                    }
                } else {
                    continue;
                };
                let (seen, fingerprint) = match now {
                    Err(e) => (Seen::Unreadable { error: e.0 }, None),
                    Ok(now) => match records.get(policy, service, reference) {
                        None => (Seen::Recorded, Some(now)),
                        Some(old) => match now.change_from(old) {
                            None => (Seen::Unchanged, Some(now)),
                            Some(change) => (Seen::Changed { change }, Some(now)),
                        },
                    },
                };
                watched.push(Watched {
                    reference: reference.clone(),
                    seen,
                    fingerprint,
                });
            }
            if !watched.is_empty() {
                services.push(ServiceWatch {
                    resource: resource.clone(),
                    service: service.to_owned(),
                    references: watched,
                });
            }
        }
        Ok(Self { services })
    }

    /// The watch of `resource` (`service#NAME`), if it has one.
    pub fn of(&self, resource: &str) -> Option<&ServiceWatch> {
        self.services.iter().find(|s| s.resource == resource)
    }

    /// Records what this run made good in `records`: a first-seen
    /// reference always (it triggered nothing); a changed one only when
    /// `succeeded(resource)` (its apply ended without error: a failed
    /// restart is retried next run). References the policy no longer
    /// declares are forgotten.
    pub fn record(&self, policy: &str, records: &mut Records, succeeded: impl Fn(&str) -> bool) {
        let mut current = BTreeSet::new();
        for service in &self.services {
            let ok = succeeded(&service.resource);
            for watched in &service.references {
                current.insert((service.service.clone(), watched.reference.clone()));
                let keep = match watched.seen {
                    Seen::Recorded => true,
                    Seen::Changed { .. } => ok,
                    Seen::Unchanged | Seen::Unreadable { .. } => false,
                };
                if let (true, Some(fingerprint)) = (keep, &watched.fingerprint) {
                    records.set(
                        policy,
                        &service.service,
                        &watched.reference,
                        fingerprint.clone(),
                    );
                }
            }
        }
        records.keep_only(policy, &current);
    }
}

#[cfg(test)]
mod tests {
    use super::super::Caps;
    use super::*;

    struct Machine {
        dir: tempfile::TempDir,
        watch: WatchPaths,
        records: Records,
    }

    impl Machine {
        fn new() -> Self {
            let dir = tempfile::tempdir().unwrap();
            std::fs::create_dir(dir.path().join("etc")).unwrap();
            let watch = WatchPaths::new(&[dir.path().join("etc").display().to_string()]).unwrap();
            let records = Records::open(&dir.path().join("state")).unwrap();
            Self {
                dir,
                watch,
                records,
            }
        }

        fn conf(&self) -> String {
            format!("file#{}/etc/app.conf", self.dir.path().display())
        }

        fn survey(&self, subscriptions: &[(&str, &[&str])]) -> Survey {
            let subscriptions: Vec<(String, Vec<String>)> = subscriptions
                .iter()
                .map(|(s, r)| (s.to_string(), r.iter().map(|r| r.to_string()).collect()))
                .collect();
            let dpkg = self.dir.path().join("status");
            let sources = Sources {
                watch_paths: &self.watch,
                dpkg_status: &dpkg,
            };
            Survey::take(
                "p.wasm",
                &subscriptions,
                &self.records,
                &sources,
                &mut Budget::new(Caps::DEFAULT, None),
            )
            .unwrap()
        }
    }

    fn states(survey: &Survey) -> Vec<(String, Seen)> {
        survey
            .services
            .iter()
            .flat_map(|s| {
                s.references
                    .iter()
                    .map(|w| (s.service.clone(), w.seen.clone()))
            })
            .collect()
    }

    #[test]
    fn first_seen_is_recorded_then_a_change_triggers_until_an_apply_succeeds() {
        let mut m = Machine::new();
        let conf = m.conf();
        std::fs::write(&conf["file#".len()..], "a").unwrap();
        let refs: &[&str] = &[&conf, "service#db"];
        let survey = m.survey(&[("service#web", refs), ("service#proxy", refs)]);
        assert_eq!(
            states(&survey),
            [
                ("web".into(), Seen::Recorded),
                ("proxy".into(), Seen::Recorded)
            ]
        );
        survey.record("p.wasm", &mut m.records, |_| false);

        std::fs::write(&conf["file#".len()..], "b").unwrap();
        let survey = m.survey(&[("service#web", refs), ("service#proxy", refs)]);
        let changed = Seen::Changed {
            change: Change::Content,
        };
        assert_eq!(
            states(&survey),
            [
                ("web".into(), changed.clone()),
                ("proxy".into(), changed.clone())
            ]
        );
        // web restarted; proxy's restart failed: only web's record advances.
        survey.record("p.wasm", &mut m.records, |r| r == "service#web");
        let survey = m.survey(&[("service#web", refs), ("service#proxy", refs)]);
        assert_eq!(
            states(&survey),
            [("web".into(), Seen::Unchanged), ("proxy".into(), changed)]
        );
    }

    #[test]
    fn unreadable_references_fail_only_their_service() {
        let m = Machine::new();
        let survey = m.survey(&[
            ("service#web", &["file#/root/.ssh/id_rsa"]),
            ("service#db", &["package#postgresql"]),
            ("service#ok", &[&m.conf()]),
        ]);
        let web = survey.of("service#web").unwrap();
        assert!(web.errors().next().unwrap().contains("outside watch_paths"));
        let db = survey.of("service#db").unwrap();
        assert!(db
            .errors()
            .next()
            .unwrap()
            .starts_with("package#postgresql: this machine has no dpkg database"));
        assert_eq!(
            survey.of("service#ok").unwrap().references[0].seen,
            Seen::Recorded
        );
    }

    #[test]
    fn a_malformed_declaration_is_refused() {
        let m = Machine::new();
        let subscriptions = vec![("service#-H evil".to_string(), vec![m.conf()])];
        let dpkg = m.dir.path().join("status");
        let sources = Sources {
            watch_paths: &m.watch,
            dpkg_status: &dpkg,
        };
        let error = Survey::take(
            "p.wasm",
            &subscriptions,
            &m.records,
            &sources,
            &mut Budget::new(Caps::DEFAULT, None),
        )
        .unwrap_err();
        assert!(error.as_raw().contains("not service#NAME"), "{error}");
    }
}
