//! One policy's subscriptions, looked at before it runs: for each service,
//! which of its `file#` and `package#` references changed since the
//! service's last successful apply, which are seen for the first time
//! (recorded, nothing triggered), which cannot be read (the service is
//! applied, then fails), and which the host does not watch (a warning: they
//! fire only on `--refresh`). After the run, what a service's apply made
//! good is recorded ([`Survey::record`]).

use std::collections::BTreeSet;
use std::path::Path;

use serde::Serialize;

use super::record::{Key, Records};
use super::reference::{Look, Reader};
use super::{Budget, Change, Fingerprint, WatchPaths};
use crate::resource::ResourceRef;
use crate::text::{truncate, Untrusted};

/// The most references one policy may subscribe to, in all.
pub const MAX_REFERENCES: usize = 10_000;
/// The longest reference read from a guest.
pub const MAX_REFERENCE_LEN: usize = 4096;

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
    /// It could not be read: the service is applied, then fails with this.
    Unreadable {
        error: String,
    },
}

/// One `file#` or `package#` reference of a service that the host watches.
#[derive(Debug, Clone, Serialize)]
pub struct Watched {
    pub reference: String,
    #[serde(flatten)]
    pub seen: Seen,
    /// What it is recorded under (kept apart: the reference's text may be
    /// lent to the guest while the policy runs).
    #[serde(skip)]
    key: Key,
    /// What it looks like now, recorded if the apply succeeds.
    #[serde(skip)]
    fingerprint: Option<Fingerprint>,
}

impl Watched {
    /// A reference in state `seen`, with nothing to record: for tests of
    /// what reports make of a survey.
    #[cfg(test)]
    pub(crate) fn seen(reference: impl Into<String>, seen: Seen) -> Self {
        let reference = reference.into();
        Self {
            key: Key::of(&reference),
            reference,
            seen,
            fingerprint: None,
        }
    }
}

/// A service's references, as the host found them.
#[derive(Debug, Clone)]
pub struct ServiceWatch {
    /// `service#NAME`.
    pub resource: String,
    pub service: String,
    /// The references the host watches.
    pub references: Vec<Watched>,
    /// The references it does not watch: a warning each, naming the
    /// reference and why (they fire only on `--refresh`).
    pub not_watched: Vec<String>,
}

impl ServiceWatch {
    /// The references that changed.
    pub fn changed(&self) -> impl Iterator<Item = &Watched> {
        self.references
            .iter()
            .filter(|w| matches!(w.seen, Seen::Changed { .. }))
    }

    /// Takes the text of the references that changed out of the survey,
    /// in order, to be handed to the guest and then back
    /// ([`ServiceWatch::give_back`]): lent rather than copied, so that the
    /// host never holds two copies of what a policy declared.
    pub fn lend_changed(&mut self) -> Vec<String> {
        self.references
            .iter_mut()
            .filter(|w| matches!(w.seen, Seen::Changed { .. }))
            .map(|w| std::mem::take(&mut w.reference))
            .collect()
    }

    /// Puts back, in order, what [`ServiceWatch::lend_changed`] took.
    pub fn give_back(&mut self, changed: Vec<String>) {
        let lent = self
            .references
            .iter_mut()
            .filter(|w| matches!(w.seen, Seen::Changed { .. }));
        for (watched, reference) in lent.zip(changed) {
            watched.reference = reference;
        }
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
    /// Looks at every reference of `subscriptions` (what the guest
    /// declared: `service#NAME` and its references, checked here again,
    /// taken whole so that the host holds one copy of them) against what
    /// `records` holds for `policy`: `file#` and `package#` references the
    /// host watches are read, `service#` ones fire within the run, and any
    /// other is not watched (a warning). A malformed declaration, or one
    /// over the caps, is an error for the whole policy: it is not run.
    pub fn take(
        policy: &str,
        subscriptions: Vec<(String, Vec<String>)>,
        records: &Records,
        sources: &Sources<'_>,
        budget: &mut Budget,
    ) -> Result<Self, Untrusted> {
        let subscriptions = check_declaration(subscriptions)?;
        let mut reader = Reader::new(sources.watch_paths, sources.dpkg_status);
        let mut services = Vec::new();
        for (parsed, references) in subscriptions {
            let resource = parsed.to_string();
            let service = parsed.name().to_owned();
            let mut watched = Vec::new();
            let mut not_watched = Vec::new();
            for reference in references {
                let now = match reader.look(&reference, budget) {
                    Look::InRun => continue,
                    Look::NotWatched(warning) => {
                        not_watched.push(warning);
                        continue;
                    }
                    Look::Read(now) => now,
                };
                let key = Key::of(&reference);
                let (seen, fingerprint) = match now {
                    Err(e) => (Seen::Unreadable { error: e.0 }, None),
                    Ok(now) => match records.get(policy, &service, &key) {
                        None => (Seen::Recorded, Some(now)),
                        Some(old) => match now.change_from(old) {
                            None => (Seen::Unchanged, Some(now)),
                            Some(change) => (Seen::Changed { change }, Some(now)),
                        },
                    },
                };
                watched.push(Watched {
                    reference,
                    seen,
                    key,
                    fingerprint,
                });
            }
            if !watched.is_empty() || !not_watched.is_empty() {
                services.push(ServiceWatch {
                    resource,
                    service,
                    references: watched,
                    not_watched,
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
    /// declares are forgotten. References not watched are never recorded.
    pub fn record(&self, policy: &str, records: &mut Records, succeeded: impl Fn(&str) -> bool) {
        let mut current = BTreeSet::new();
        for service in &self.services {
            let ok = succeeded(&service.resource);
            for watched in &service.references {
                current.insert((service.service.clone(), watched.key.clone()));
                let keep = match watched.seen {
                    Seen::Recorded => true,
                    Seen::Changed { .. } => ok,
                    Seen::Unchanged | Seen::Unreadable { .. } => false,
                };
                if let (true, Some(fingerprint)) = (keep, &watched.fingerprint) {
                    records.set(policy, &service.service, &watched.key, fingerprint.clone());
                }
            }
        }
        records.keep_only(policy, &current);
    }
}

/// Refuses a declaration the host will not look at: more than
/// [`MAX_REFERENCES`] references in all, one longer than
/// [`MAX_REFERENCE_LEN`], or a resource that is not `service#NAME`.
fn check_declaration(
    subscriptions: Vec<(String, Vec<String>)>,
) -> Result<Vec<(ResourceRef, Vec<String>)>, Untrusted> {
    let total: usize = subscriptions.iter().map(|(_, r)| r.len()).sum();
    if total > MAX_REFERENCES {
        return Err(Untrusted::new(format!(
            "the policy subscribes to {total} references; at most {MAX_REFERENCES} are watched"
        )));
    }
    let mut checked = Vec::with_capacity(subscriptions.len());
    for (resource, references) in subscriptions {
        let Ok(parsed) = ResourceRef::parse_service(&resource) else {
            // A guest's text, of any length: quoted, and cut.
            let shown: String = resource.chars().take(257).collect();
            return Err(Untrusted::new(format!(
                "the policy declared subscriptions of {:?}, which is not service#NAME with a valid service name",
                truncate(shown, 256, "...")
            )));
        };
        if let Some(long) = references.iter().find(|r| r.len() > MAX_REFERENCE_LEN) {
            return Err(Untrusted::new(format!(
                "the policy declared a reference of {} bytes; at most {MAX_REFERENCE_LEN}",
                long.len()
            )));
        }
        checked.push((parsed, references));
    }
    Ok(checked)
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
            self.take(subscriptions).unwrap()
        }

        fn take(&self, subscriptions: Vec<(String, Vec<String>)>) -> Result<Survey, Untrusted> {
            let dpkg = self.dir.path().join("status");
            let sources = Sources {
                watch_paths: &self.watch,
                dpkg_status: &dpkg,
            };
            Survey::take(
                "p.wasm",
                subscriptions,
                &self.records,
                &sources,
                &mut Budget::new(Caps::DEFAULT, None),
            )
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
    fn changed_references_are_lent_and_given_back_in_order() {
        let mut m = Machine::new();
        let conf = m.conf();
        let other = format!("file#{}/etc/other.conf", m.dir.path().display());
        std::fs::write(&conf["file#".len()..], "a").unwrap();
        let refs: &[&str] = &[&conf, &other];
        m.survey(&[("service#web", refs)])
            .record("p.wasm", &mut m.records, |_| true);
        std::fs::write(&conf["file#".len()..], "b").unwrap();
        let mut survey = m.survey(&[("service#web", refs)]);
        let web = &mut survey.services[0];
        let lent = web.lend_changed();
        assert_eq!(lent, std::slice::from_ref(&conf));
        assert_eq!(web.references[0].reference, "", "taken, not copied");
        web.give_back(lent);
        assert_eq!(web.references[0].reference, conf);
        assert_eq!(web.references[1].reference, other);
        // Recorded under its key even while lent.
        let lent = survey.services[0].lend_changed();
        survey.record("p.wasm", &mut m.records, |_| true);
        survey.services[0].give_back(lent);
        let survey = m.survey(&[("service#web", refs)]);
        assert_eq!(
            states(&survey),
            [
                ("web".into(), Seen::Unchanged),
                ("web".into(), Seen::Unchanged)
            ]
        );
    }

    #[test]
    fn unreadable_references_fail_only_their_service() {
        let m = Machine::new();
        let fifo = m.dir.path().join("etc/pipe");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: `c` is a valid NUL-terminated path for the call's duration.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        std::fs::write(m.dir.path().join("status"), "").unwrap();
        let pipe = format!("file#{}", fifo.display());
        let survey = m.survey(&[
            ("service#web", &[&pipe]),
            ("service#db", &["package#"]),
            ("service#ok", &[&m.conf()]),
        ]);
        let web = survey.of("service#web").unwrap();
        assert!(web.errors().next().unwrap().contains("is a FIFO"));
        assert!(web.not_watched.is_empty());
        let db = survey.of("service#db").unwrap();
        assert!(db
            .errors()
            .next()
            .unwrap()
            .starts_with("package#: expected package#NAME"));
        assert_eq!(
            survey.of("service#ok").unwrap().references[0].seen,
            Seen::Recorded
        );
    }

    #[test]
    fn references_not_watched_are_warnings_and_never_recorded() {
        let mut m = Machine::new();
        // No dpkg database here: package# is not watched either.
        let refs: &[&str] = &[
            "file#/root/.ssh/id_rsa",
            "file#/run/app.sock",
            "foo#bar",
            "package#postgresql",
            "service#db",
        ];
        let survey = m.survey(&[("service#web", refs)]);
        let web = survey.of("service#web").unwrap();
        assert!(web.references.is_empty(), "{:?}", web.references);
        assert_eq!(web.errors().count(), 0);
        assert_eq!(web.not_watched.len(), 4, "{:?}", web.not_watched);
        assert!(web.not_watched[0].starts_with("file#/root/.ssh/id_rsa is outside watch_paths ("));
        assert!(web
            .not_watched
            .iter()
            .all(|w| w.ends_with(": not watched; it fires only on --refresh")));
        survey.record("p.wasm", &mut m.records, |_| true);
        for reference in refs {
            assert_eq!(
                m.records.get("p.wasm", "web", &Key::of(reference)),
                None,
                "{reference}"
            );
        }
    }

    #[test]
    fn a_malformed_declaration_is_refused() {
        let m = Machine::new();
        let error = m
            .take(vec![("service#-H evil".to_string(), vec![m.conf()])])
            .unwrap_err();
        assert!(error.as_raw().contains("not service#NAME"), "{error}");
        let error = m
            .take(vec![("x".repeat(1 << 20), vec![m.conf()])])
            .unwrap_err();
        assert!(
            error.len() < 1024,
            "the guest's text is cut: {}",
            error.len()
        );
    }

    #[test]
    fn a_declaration_over_the_caps_is_refused_whole() {
        let m = Machine::new();
        let many = vec![m.conf(); MAX_REFERENCES / 2 + 1];
        let error = m
            .take(vec![
                ("service#web".into(), many.clone()),
                ("service#db".into(), many),
            ])
            .unwrap_err();
        assert!(
            error.as_raw().contains("10002 references; at most 10000"),
            "{error}"
        );
        let long = format!("file#/etc/{}", "a".repeat(MAX_REFERENCE_LEN));
        let error = m
            .take(vec![("service#web".into(), vec![long])])
            .unwrap_err();
        assert!(error.as_raw().contains("at most 4096"), "{error}");
        let just_inside = vec![m.conf(); MAX_REFERENCES];
        assert!(m.take(vec![("service#web".into(), just_inside)]).is_ok());
    }
}
