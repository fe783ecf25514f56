//! The second phase of a run: every policy and settings document read,
//! verified and compiled before any is run, so that a bad one stops the
//! whole run with nothing applied.

use std::collections::HashMap;
use std::rc::Rc;
use std::time::Instant;

use anyhow::Context as _;

use crate::admission::{self, Admitted, Location};
use crate::oci::Kind;
use crate::report::machine::Refusal;
use crate::runtime::{CompileCache, LoadedPolicy, PolicyRuntime};
use crate::text::millis;

use super::plan::{Job, Plan};

/// A settings document admitted, with its text. Shared by every policy that
/// names it: it is read and verified once.
pub(super) struct SettingsDoc {
    pub(super) location: Location,
    pub(super) admitted: Admitted,
    pub(super) text: String,
}

/// A policy admitted and compiled, with the settings it runs with.
pub(super) struct ReadyPolicy {
    /// Where it comes from, as configured, with its settings document:
    /// what events and the machine's state name it by.
    pub(super) key: String,
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
        let mut kept = Kept::default();
        let mut run = Self::empty(plan, &mut kept)?;
        let mut admitter = Admitter::new(plan);
        for job in &plan.jobs {
            let policy = admitter
                .admit(job, &run.runtime, &mut kept)
                .map_err(|e| RefusedDocument::new(job, e))?;
            run.policies.push(policy);
        }
        run.settings = admitter.settings;
        Ok(run)
    }

    /// [`Self::admit`], each policy on its own (`host watch`): a refused
    /// document refuses only the policies made of it, each said with its
    /// key. The engine and the components of the watch's earlier runs are
    /// taken from `kept`, and this run's are left there. An `Err` means none
    /// could be tried (no runtime).
    pub(super) fn admit_each(
        plan: &Plan<'_>,
        kept: &mut Kept,
    ) -> anyhow::Result<(Self, Vec<Refusal>)> {
        let mut run = Self::empty(plan, kept)?;
        let mut refused = Vec::new();
        let mut admitter = Admitter::new(plan);
        for job in &plan.jobs {
            match admitter.admit(job, &run.runtime, kept) {
                Ok(policy) => run.policies.push(policy),
                Err(e) => refused.push(RefusedDocument::new(job, e).refusal),
            }
        }
        run.settings = admitter.settings;
        Ok((run, refused))
    }

    fn empty(plan: &Plan<'_>, kept: &mut Kept) -> anyhow::Result<Self> {
        Ok(Self {
            runtime: kept.runtime(plan)?,
            policies: Vec::with_capacity(plan.jobs.len()),
            settings: Vec::new(),
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

/// What `host watch` keeps from one run to the next: wasmtime's engine and
/// linker, and each configured policy's component as compiled and linked
/// for its last run. A repair then starts with its guest instead of with
/// building them again (about 4 ms of a stop's repair, most of it reading
/// and linking the compiled code from the disk cache).
///
/// No check is kept: every run reads and verifies each document again. Only
/// the same bytes (the sha256 digest admission computed of what it just
/// verified) take the kept component; a policy replaced on disk is
/// compiled (or loaded from the cache) anew, and its old code let go.
#[derive(Default)]
pub(crate) struct Kept {
    runtime: Option<PolicyRuntime>,
    /// By the policy's key: its bytes' digest and its component.
    policies: HashMap<String, (String, LoadedPolicy)>,
}

impl Kept {
    /// The kept engine and linker with the limits of `plan` (host.toml may
    /// have changed them), built at the first run.
    fn runtime(&mut self, plan: &Plan<'_>) -> anyhow::Result<PolicyRuntime> {
        let limits = plan.settings.limits;
        if let Some(runtime) = &self.runtime {
            return Ok(runtime.with_limits(limits));
        }
        let runtime = PolicyRuntime::new(limits)?;
        self.runtime = Some(runtime.with_limits(limits));
        Ok(runtime)
    }

    /// `key`'s component when it was built from bytes of `digest`.
    fn component(&self, key: &str, digest: &str) -> Option<&LoadedPolicy> {
        self.policies
            .get(key)
            .filter(|(kept, _)| kept == digest)
            .map(|(_, policy)| policy)
    }

    fn keep(&mut self, key: &str, digest: &str, policy: &LoadedPolicy) {
        self.policies
            .insert(key.to_owned(), (digest.to_owned(), policy.clone()));
    }

    /// Lets go of the components of policies no longer configured.
    pub(crate) fn retain(&mut self, configured: &[String]) {
        self.policies.retain(|key, _| configured.contains(key));
    }
}

/// A policy or settings document refused: the run stops, and the policy's
/// outcome in the machine's state is this refusal. Says exactly what the
/// admission's error says.
#[derive(Debug)]
pub(super) struct RefusedDocument {
    pub(super) refusal: Refusal,
}

impl RefusedDocument {
    fn new(job: &Job, error: anyhow::Error) -> Self {
        let source = job.policy.to_string();
        Self {
            refusal: Refusal::new(job.state_key(), &source, format!("{error:#}")),
        }
    }
}

impl std::fmt::Display for RefusedDocument {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.refusal.why)
    }
}

impl std::error::Error for RefusedDocument {}

/// The gate and cache one admission uses, and the settings documents
/// admitted so far (each read and verified once).
struct Admitter<'p> {
    gate: crate::admission::Gate<'p>,
    cache: Option<CompileCache>,
    settings: Vec<Rc<SettingsDoc>>,
}

impl<'p> Admitter<'p> {
    fn new(plan: &'p Plan<'_>) -> Self {
        let cache = if !plan.request.use_cache {
            None
        } else {
            CompileCache::open(&plan.settings.cache_dir)
        };
        Self {
            gate: plan.gate(),
            cache,
            settings: Vec::new(),
        }
    }

    /// The job's settings document (once per run), then its policy,
    /// verified and compiled.
    fn admit(
        &mut self,
        job: &Job,
        runtime: &PolicyRuntime,
        kept: &mut Kept,
    ) -> anyhow::Result<ReadyPolicy> {
        let doc = match &job.settings {
            None => None,
            Some(location) => Some(self.settings_doc(location)?),
        };
        let mut admitted = self.gate.admit(Kind::Policy, &job.policy)?;
        if let Some(doc) = &doc {
            admitted.signature.settings = Some(Box::new(doc.admitted.signature.clone()));
        }
        if let Some(warning) = &admitted.signature.warning {
            tracing::warn!("{warning}");
        }
        if let Some(key_id) = &admitted.signature.key_id {
            tracing::info!(policy = %admitted.origin, key_id = %key_id, "signature verified");
        }
        let key = job.state_key();
        let digest = &admitted.source.digest;
        let looked = Instant::now();
        let compiled = match kept.component(&key, digest) {
            Some(policy) => policy.kept(looked.elapsed()),
            None => {
                let loaded = runtime
                    .load(&admitted.bytes, self.cache.as_ref())
                    .with_context(|| format!("loading policy {}", admitted.origin))?;
                kept.keep(&key, digest, &loaded);
                loaded
            }
        }
        .with_memory_limit(job.memory_bytes);
        tracing::info!(
            policy = %admitted.origin,
            cache = ?compiled.cache,
            ms = millis(compiled.load_time),
            "policy compiled and linked"
        );
        Ok(ReadyPolicy {
            key,
            admitted,
            compiled,
            settings: doc,
        })
    }

    fn settings_doc(&mut self, location: &Location) -> anyhow::Result<Rc<SettingsDoc>> {
        if let Some(doc) = self.settings.iter().find(|d| &d.location == location) {
            return Ok(Rc::clone(doc));
        }
        let admitted = self.gate.admit(Kind::Settings, location)?;
        let text = admission::settings_text(&admitted)?;
        let doc = Rc::new(SettingsDoc {
            location: location.clone(),
            admitted,
            text,
        });
        self.settings.push(Rc::clone(&doc));
        Ok(doc)
    }
}
