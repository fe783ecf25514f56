//! The second phase of a run: every policy and settings document read,
//! verified and compiled before any is run, so that a bad one stops the
//! whole run with nothing applied.

use std::rc::Rc;

use anyhow::Context as _;

use crate::admission::{self, Admitted, Location};
use crate::oci::Kind;
use crate::runtime::{CompileCache, LoadedPolicy, PolicyRuntime};
use crate::text::millis;

use super::plan::Plan;

/// A settings document admitted, with its text. Shared by every policy that
/// names it: it is read and verified once.
pub(super) struct SettingsDoc {
    pub(super) location: Location,
    pub(super) admitted: Admitted,
    pub(super) text: String,
}

/// A policy admitted and compiled, with the settings it runs with.
pub(super) struct ReadyPolicy {
    pub(super) admitted: Admitted,
    pub(super) compiled: LoadedPolicy,
    pub(super) settings: Option<Rc<SettingsDoc>>,
}

/// Everything the run will apply, checked.
pub(super) struct AdmittedRun {
    pub(super) runtime: PolicyRuntime,
    pub(super) policies: Vec<ReadyPolicy>,
    /// Each settings document once, in the order first named.
    pub(super) settings: Vec<Rc<SettingsDoc>>,
}

impl AdmittedRun {
    /// Admits the plan's documents: the settings are the desired state as
    /// much as the code, so they pass the same gate before any policy starts.
    pub(super) fn admit(plan: &Plan<'_>) -> anyhow::Result<Self> {
        let gate = plan.gate();
        let runtime = PolicyRuntime::new(plan.settings.limits)?;
        let cache = if !plan.request.use_cache {
            None
        } else {
            CompileCache::open(&plan.settings.cache_dir)
        };
        let mut settings: Vec<Rc<SettingsDoc>> = Vec::new();
        let mut policies = Vec::with_capacity(plan.jobs.len());
        for job in &plan.jobs {
            let doc = match &job.settings {
                None => None,
                Some(location) => Some(match settings.iter().find(|d| &d.location == location) {
                    Some(doc) => Rc::clone(doc),
                    None => {
                        let admitted = gate.admit(Kind::Settings, location)?;
                        let text = admission::settings_text(&admitted)?;
                        let doc = Rc::new(SettingsDoc {
                            location: location.clone(),
                            admitted,
                            text,
                        });
                        settings.push(Rc::clone(&doc));
                        doc
                    }
                }),
            };
            let mut admitted = gate.admit(Kind::Policy, &job.policy)?;
            if let Some(doc) = &doc {
                admitted.signature.settings = Some(Box::new(doc.admitted.signature.clone()));
            }
            if let Some(warning) = &admitted.signature.warning {
                tracing::warn!("{warning}");
            }
            if let Some(key_id) = &admitted.signature.key_id {
                tracing::info!(policy = %admitted.origin, key_id = %key_id, "signature verified");
            }
            let compiled = runtime
                .load(&admitted.bytes, cache.as_ref())
                .with_context(|| format!("loading policy {}", admitted.origin))?;
            tracing::info!(
                policy = %admitted.origin,
                cache = ?compiled.cache,
                ms = millis(compiled.load_time),
                "policy compiled and linked"
            );
            policies.push(ReadyPolicy {
                admitted,
                compiled,
                settings: doc,
            });
        }
        Ok(Self {
            runtime,
            policies,
            settings,
        })
    }

    /// Every document whose signed version the run records: each policy,
    /// and each settings document once.
    pub(super) fn documents(&self) -> impl Iterator<Item = &Admitted> {
        self.policies
            .iter()
            .map(|p| &p.admitted)
            .chain(self.settings.iter().map(|d| &d.admitted))
    }
}
