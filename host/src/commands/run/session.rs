//! The third phase of a run: under the machine's run lock, each admitted
//! policy is run against the one provider, and the run's report is built.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use anyhow::bail;

use crate::atomic_file;
use crate::contract::types::Fact;
use crate::contract::RunOptions;
use crate::facts::Facts;
use crate::guest::GuestOutcome;
use crate::interrupt;
use crate::left_alone::pause::Pauses;
use crate::left_alone::LeftAlone;
use crate::lock::RunLock;
use crate::provider::{Provider, RunWindows, SystemdConfig, Windows};
use crate::report::result::PolicyResult;
use crate::report::{CompileInfo, ProviderInfo, RunRecord, RunReport};
use crate::resource::UnitName;
use crate::runtime::PolicyRuntime;
use crate::subscriptions::record::{self, Records};
use crate::subscriptions::survey::{Sources, Survey};
use crate::subscriptions::{dpkg, Budget, Caps};

use super::acted::{Acted, Again, Closing, PolicyActed};
use super::admit::{AdmittedRun, ReadyPolicy};
use super::plan::Plan;
use super::{Concern, Sink};

/// The run holding the lock, its versions recorded, its provider built:
/// from here on, the machine may change.
pub(super) struct Session<'a> {
    plan: &'a Plan<'a>,
    run: AdmittedRun,
    lock: Arc<RunLock>,
    provider: Box<dyn Provider>,
    /// The fingerprints of the subscriptions' files and packages.
    records: Records,
    /// The units this run leaves alone (paused, held back).
    left_alone: LeftAlone,
    /// The machine's facts and labels, told to every policy of the run.
    facts: Vec<Fact>,
    /// A watch's run: its share of the watch's settle windows.
    windows: Option<RunWindows>,
}

impl<'a> Session<'a> {
    /// Takes the lock (waiting as the settings say), unless the watch hands
    /// over the one it holds (`held`: an earlier run's windows are still
    /// open), removes what a killed run left behind, and records the
    /// versions about to run.
    pub(super) fn begin(
        plan: &'a Plan<'a>,
        run: AdmittedRun,
        held: Option<Arc<RunLock>>,
    ) -> anyhow::Result<Self> {
        let request = plan.request;
        let settings = &plan.settings;
        let wait = request.lock_wait(settings.lock_timeout);
        let lock = match held {
            Some(lock) => lock,
            None => Arc::new(RunLock::acquire(&settings.lock_file, wait)?),
        };
        if let Some(signal) = interrupt::received() {
            bail!(
                "interrupted by {} before the first change; nothing was changed",
                interrupt::name(signal)
            );
        }
        // What a run killed while writing left behind (only runs holding
        // the lock write these files, so none is in use).
        for path in [
            plan.outputs.report.as_deref(),
            plan.outputs.metrics.as_deref(),
        ]
        .into_iter()
        .flatten()
        .map(std::path::Path::to_path_buf)
        .chain([
            settings.state_dir.join("versions.json"),
            settings.state_dir.join(record::FILE_NAME),
        ]) {
            atomic_file::remove_stale(&path);
        }
        // Under the lock: no other run can record a version between this
        // check and write. A noop run records nothing: trying a new version
        // with --noop must not make the one in service a refused rollback.
        if !request.noop() {
            crate::admission::record_versions(
                &settings.state_dir,
                run.documents(),
                request.allow_rollback,
            )?;
        }
        let records = Records::open(&settings.state_dir)?;
        // The operator's pauses, read under the lock, and the watch's holds.
        let (_, pauses) = Pauses::open(&settings.state_dir)?;
        let mut left_alone = pauses.in_force(SystemTime::now());
        left_alone.extend(request.held.clone());
        let windows = request.windows.as_ref().map(Windows::begin_run);
        let systemctl = crate::provider::systemctl_on_path();
        let provider = Box::new(crate::provider::systemd(SystemdConfig {
            systemctl,
            timeout: settings.systemctl_timeout,
            noop: request.noop(),
            allow: settings.allow.clone(),
            status_via: settings.status_via,
            jobs: settings.jobs,
            settle: settings.settle,
            await_unit_jobs: true,
            left_alone: left_alone.clone(),
            reload_before_change: request.reload_before_change,
            windows: windows.clone(),
        }));
        // Gathered once per run, afresh (a watch's runs see a new hostname).
        let facts = Facts::gather(&settings.labels)
            .entries()
            .iter()
            .map(|(name, value)| Fact {
                name: name.clone(),
                value: value.clone(),
            })
            .collect();
        Ok(Self {
            plan,
            run,
            lock,
            provider,
            records,
            left_alone,
            facts,
            windows,
        })
    }

    /// Runs each policy in order; what one changed counts as changed for
    /// those after it. A signal stops the run between policies. The run's
    /// one reload after enablement changes follows the last policy run, and
    /// is reported with it. The lock is handed back: it is held until the
    /// outputs are written. The reports wait for the run's settle windows
    /// ([`Acted::report`]).
    pub(super) fn converge(self, sink: &mut dyn Sink) -> anyhow::Result<Converged> {
        let Session {
            plan,
            run,
            lock,
            mut provider,
            records,
            left_alone,
            facts,
            windows,
        } = self;
        let names: BTreeSet<String> = run
            .policies
            .iter()
            .map(|p| p.admitted.name.clone())
            .collect();
        // What the host remembers of subscriptions, and what the run's
        // policies may make it read, all together.
        let mut watching = Watching {
            records,
            budget: Budget::new(Caps::DEFAULT, None),
        };
        let mut refreshed = plan.request.refresh.clone();
        let mut policies = Vec::with_capacity(run.policies.len());
        let mut concerns = Vec::with_capacity(run.policies.len());
        let mut not_started = Vec::new();
        let mut taken = 0;
        for (index, policy) in run.policies.into_iter().enumerate() {
            if interrupt::received().is_some() {
                not_started.push(format!("policy {} (not started)", policy.admitted.name));
                continue;
            }
            let started = if index == 0 {
                plan.started
            } else {
                Instant::now()
            };
            let options = options_for(plan, &policy, &refreshed, &facts);
            let key = policy.key.clone();
            let shared = Shared {
                plan,
                runtime: &run.runtime,
                left_alone: &left_alone,
                windows: windows.as_ref(),
            };
            let (mut acted, references);
            (acted, references, provider) =
                run_one(shared, policy, options, provider, started, &mut watching)?;
            acted.first = taken;
            taken += acted.report.calls.len();
            // What it changed counts as changed for the policies after it.
            refreshed.extend(
                acted
                    .report
                    .resources
                    .iter()
                    .filter(|r| r.changed)
                    .map(|r| r.resource.to_string()),
            );
            let result = PolicyResult::of(&key, &acted.report);
            sink.acted(&result);
            concerns.push(Concern::of(key.clone(), result, references));
            policies.push(acted);
        }
        let closing = close(plan, provider.as_mut(), watching, &names);
        Ok(Converged {
            lock,
            concerns,
            acted: Acted {
                policies,
                closing,
                windows,
                provider: Some(provider),
                not_started,
                labels: plan.settings.labels.clone(),
            },
        })
    }
}

impl Concern {
    /// What the policy of `result` concerns: the units it touched and the
    /// references its services subscribe to.
    fn of(key: String, result: PolicyResult<'_>, references: BTreeSet<String>) -> Self {
        Self {
            policy: result.report.policy.clone(),
            units: result
                .units
                .into_iter()
                .map(UnitName::into_string)
                .collect(),
            references,
            key,
        }
    }
}

/// What a policy is told of its run: noop or not, what changed before it,
/// its settings, the machine's facts (its subscriptions' changes are filled
/// in by the runtime, once it declared them and the host looked at them).
fn options_for(
    plan: &Plan<'_>,
    policy: &ReadyPolicy,
    refreshed: &[String],
    facts: &[Fact],
) -> RunOptions {
    RunOptions {
        noop: plan.request.noop(),
        refreshed: refreshed.to_vec(),
        watched: Vec::new(),
        settings: policy.settings.as_ref().map(|doc| doc.text.clone()),
        facts: facts.to_vec(),
    }
}

/// What a session leaves: its policies acted (their report to come), the
/// lock (held until the outputs are written) and what each policy that ran
/// concerns.
pub(super) struct Converged {
    pub(super) acted: Acted,
    pub(super) lock: Arc<RunLock>,
    pub(super) concerns: Vec<Concern>,
}

/// The run's end: the one reload after enablement changes (reported with
/// the last policy), and what the subscriptions look like now for the
/// next run (not in a noop run; an interrupted run forgets no policy it
/// did not reach).
fn close(
    plan: &Plan<'_>,
    provider: &mut dyn Provider,
    mut watching: Watching,
    names: &BTreeSet<String>,
) -> Vec<Closing> {
    let mut closing = Vec::new();
    let reload_started = Instant::now();
    let reloaded = provider.finish().map_err(|e| {
        format!(
            "daemon-reload after the enablement changes failed: {}",
            e.message()
        )
    });
    let calls = provider.take_calls();
    if !plan.request.noop() {
        if interrupt::received().is_none() && plan.whole {
            watching.records.keep_policies(names);
        }
        if let Err(e) = watching.records.save() {
            closing.push(Closing {
                calls: Vec::new(),
                error: Some(format!("{e:#}; the next run sees the same changes again")),
                took: Default::default(),
            });
        }
    }
    closing.push(Closing {
        calls,
        error: reloaded.err(),
        took: reload_started.elapsed(),
    });
    closing
}

/// What every policy of a run shares.
struct Shared<'r> {
    plan: &'r Plan<'r>,
    runtime: &'r PolicyRuntime,
    /// The units the run leaves alone (paused, held back).
    left_alone: &'r LeftAlone,
    windows: Option<&'r RunWindows>,
}

/// Runs one policy and builds its report from the host's own record; the
/// provider, shared by the run's policies, is handed back. Before the policy
/// applies anything, its subscriptions' files and packages are compared with
/// what `watching` recorded; afterwards, what its apply made good is
/// recorded there (in a watch's run, before its windows are judged: a start
/// whose unit then dies is the next run's to repair, as a unit down, with
/// the subscription's change in its files). Also hands back the references
/// its services subscribe to.
fn run_one(
    shared: Shared<'_>,
    policy: ReadyPolicy,
    options: RunOptions,
    provider: Box<dyn Provider>,
    started: Instant,
    watching: &mut Watching,
) -> anyhow::Result<(PolicyActed, BTreeSet<String>, Box<dyn Provider>)> {
    let Shared {
        plan,
        runtime,
        left_alone,
        windows,
    } = shared;
    let ReadyPolicy {
        key,
        admitted,
        compiled,
        settings,
    } = policy;
    let mut survey = Survey::default();
    let watch = |declared: Result<Vec<crate::contract::Subscription>, String>, deadline| {
        // A declaration that cannot be built: `run` reports it.
        let Ok(declared) = declared else {
            return Ok(Vec::new());
        };
        survey = watching.survey(plan, &admitted.name, declared, deadline)?;
        Ok(lend_to_guest(&mut survey))
    };
    let run = runtime.run(&compiled, options, provider, watch)?;
    give_back(&mut survey, run.watched);
    let mut provider = run.provider;
    if let Err(failure) = &run.outcome {
        tracing::error!(policy = %admitted.origin, class = failure.class, "policy failed: {}", failure.message);
    }
    let calls = provider.take_calls();
    let provider_info = provider_info(provider.as_mut());
    let record = RunRecord {
        key: key.clone(),
        policy: admitted.name,
        source: admitted.source,
        settings_source: settings.map(|doc| doc.admitted.source.clone()),
        noop: plan.request.noop(),
        signature: admitted.signature,
        compile: CompileInfo::of(&compiled),
        provider: provider_info,
        outcome: GuestOutcome::default(),
        calls: Vec::new(),
        log: run.log,
        duration: started.elapsed(),
    };
    let again = Again {
        record,
        outcome: run.outcome,
        survey,
        left_alone: left_alone.clone(),
        report_bytes: plan.settings.limits.report_bytes,
    };
    let report = again.report(calls);
    if !plan.request.noop() {
        record_subscriptions(&again.survey, &report, watching);
    }
    let references = again
        .survey
        .services
        .iter()
        .flat_map(|service| &service.references)
        .map(|watched| watched.reference.clone())
        .collect();
    // Kept only while a window of the run is open: its verdict may change
    // what the report says.
    let again = windows.is_some_and(RunWindows::open).then_some(again);
    Ok((
        PolicyActed {
            key,
            report,
            first: 0,
            again,
        },
        references,
        provider,
    ))
}

/// Records what the policy's apply made good of its subscriptions. A
/// service whose restart was refused (paused, held back) has not taken its
/// subscriptions' changes yet: the next run fires them.
fn record_subscriptions(survey: &Survey, report: &RunReport, watching: &mut Watching) {
    let resources = &report.resources;
    survey.record(&report.policy, &mut watching.records, |resource| {
        resources.iter().any(|r| {
            r.resource == *resource
                && !r.failed
                && r.left_alone.as_ref().is_none_or(|a| a.would.is_empty())
        })
    });
}

/// What the report says of the provider: whether it could work, and how
/// it read status.
fn provider_info(provider: &mut dyn Provider) -> ProviderInfo {
    let (status_reader, status_note) = provider.status_reader();
    let status_note = status_note.map(str::to_owned);
    ProviderInfo {
        name: provider.name(),
        available: provider.unavailable_reason().is_none(),
        detail: provider.unavailable_reason().map(str::to_owned),
        status_reader,
        status_note,
    }
}

/// What the policy is told of its subscriptions: per service, the
/// references that changed and why others could not be read. The changed
/// references are lent, not copied ([`give_back`]): a policy may declare
/// 10,000 of 4,096 bytes each.
fn lend_to_guest(survey: &mut Survey) -> Vec<crate::contract::Watched> {
    survey
        .services
        .iter_mut()
        .map(|service| crate::contract::Watched {
            resource: service.resource.clone(),
            changed: service.lend_changed(),
            errors: service.errors().map(str::to_owned).collect(),
        })
        .filter(|w| !w.changed.is_empty() || !w.errors.is_empty())
        .collect()
}

/// Takes back the references [`lend_to_guest`] lent: `told` is in the
/// survey's order, less the services with nothing to tell.
fn give_back(survey: &mut Survey, told: Vec<crate::contract::Watched>) {
    let mut services = survey.services.iter_mut();
    for told in told {
        if let Some(service) = services.find(|s| s.resource == told.resource) {
            service.give_back(told.changed);
        }
    }
}

/// What the host remembers of the subscriptions' files and packages, and
/// what the run's policies may still make it read (the caps hold for the
/// whole run, not for each policy).
struct Watching {
    records: Records,
    budget: Budget,
}

impl Watching {
    /// Looks at what `policy` declared (its services' references, moved,
    /// not copied: the host holds one copy of them) against what is
    /// recorded, within the run's caps and `deadline`.
    fn survey(
        &mut self,
        plan: &Plan<'_>,
        policy: &str,
        declared: Vec<crate::contract::Subscription>,
        deadline: Instant,
    ) -> Result<Survey, crate::text::Untrusted> {
        let declared: Vec<(String, Vec<String>)> = declared
            .into_iter()
            .map(|s| (s.resource, s.references))
            .collect();
        let sources = Sources {
            watch_paths: &plan.settings.watch_paths,
            dpkg_status: Path::new(dpkg::STATUS_FILE),
        };
        self.budget.set_deadline(deadline);
        Survey::take(policy, declared, &self.records, &sources, &mut self.budget)
    }
}
