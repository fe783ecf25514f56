//! A run whose policies acted: what is left is the verdicts of its starts'
//! settle windows, then its report. `host run`'s windows were judged within
//! it; a watch's may outlive it ([`crate::provider::Windows`]), and its
//! report waits for them.

use crate::guest::GuestOutcome;
use crate::interrupt;
use crate::left_alone::LeftAlone;
use crate::provider::{CallRecord, Provider, RunWindows};
use crate::report::result::PolicyResult;
use crate::report::{Report, RunRecord, RunReport};
use crate::runtime::RunFailure;
use crate::subscriptions::survey::Survey;

use super::Sink;

/// A run whose policies all acted, its reload made and its subscriptions
/// recorded: what is left is each start's settle window. A `host run`'s
/// are judged already; a watch's may still be open (the watch judges them
/// with [`Provider::settle`] while it goes on), and the run's report waits
/// for them: nothing is reported before its window is judged.
pub(crate) struct Acted {
    pub(super) policies: Vec<PolicyActed>,
    /// What the run's end adds to its last policy's report.
    pub(super) closing: Vec<Closing>,
    pub(super) windows: Option<RunWindows>,
    /// Kept to judge the watch's windows with; let go of when a newer run
    /// can ([`Acted::let_go`]).
    pub(super) provider: Option<Box<dyn Provider>>,
    pub(super) not_started: Vec<String>,
    pub(super) labels: crate::facts::Labels,
}

/// One policy of a run that acted.
pub(super) struct PolicyActed {
    pub(super) key: String,
    /// Its report from the records as they were when it returned: its
    /// report, unless a settle window then open fails.
    pub(super) report: RunReport,
    /// The place of its first record among the run's.
    pub(super) first: usize,
    /// What its report is built from again when a window fails (a
    /// watch's run with windows open).
    pub(super) again: Option<Again>,
}

/// What a policy's report is built from.
pub(super) struct Again {
    pub(super) record: RunRecord,
    pub(super) outcome: Result<crate::contract::Report, RunFailure>,
    pub(super) survey: Survey,
    pub(super) left_alone: LeftAlone,
    pub(super) report_bytes: usize,
}

impl Again {
    pub(super) fn report(&self, calls: Vec<CallRecord>) -> RunReport {
        let record = &self.record;
        let mut outcome =
            GuestOutcome::new(self.outcome.clone(), &calls, record.noop, self.report_bytes);
        outcome.watch(&self.survey);
        outcome.left_alone(&self.left_alone);
        RunReport::new(RunRecord {
            outcome,
            calls,
            ..record.clone()
        })
    }
}

/// What the run's end adds to its last report: calls (its reload), an
/// error, the time it took.
pub(super) struct Closing {
    pub(super) calls: Vec<CallRecord>,
    pub(super) error: Option<String>,
    pub(super) took: std::time::Duration,
}

impl Acted {
    /// Whether a settle window this run opened is still open.
    pub(crate) fn settling(&self) -> bool {
        self.windows.as_ref().is_some_and(RunWindows::open)
    }

    /// The run's provider, which can judge any of the watch's windows
    /// still open, unless it was let go of.
    pub(crate) fn provider(&mut self) -> Option<&mut (dyn Provider + 'static)> {
        self.provider.as_deref_mut()
    }

    /// Lets go of the provider (its connection to systemd): a newer run's
    /// judges the windows.
    pub(crate) fn let_go(&mut self) {
        self.provider = None;
    }

    /// The run's report, its windows judged: a policy a failed window
    /// concerns is reported again from its records, amended; each policy's
    /// result then goes to `sink`. Said interrupted when a signal came.
    pub(crate) fn report(self, sink: &mut dyn Sink) -> Report {
        let verdicts = self
            .windows
            .as_ref()
            .map(RunWindows::take_verdicts)
            .unwrap_or_default();
        let mut reports = Vec::with_capacity(self.policies.len());
        for policy in self.policies {
            let PolicyActed {
                key,
                mut report,
                first,
                again,
            } = policy;
            let end = first + report.calls.len();
            let mine: Vec<_> = verdicts
                .iter()
                .filter(|v| (first..end).contains(&v.record))
                .collect();
            if let (Some(again), false) = (&again, mine.is_empty()) {
                let mut calls = std::mem::take(&mut report.calls);
                for verdict in mine {
                    let call = &mut calls[verdict.record - first];
                    call.outcome = crate::provider::Outcome::of(&verdict.error);
                    call.error = Some(crate::text::Untrusted::new(verdict.error.message()));
                    call.journal.clone_from(&verdict.journal);
                }
                report = again.report(calls);
            }
            reports.push((key, report));
        }
        for closing in self.closing {
            match reports.last_mut() {
                Some((_, last)) => last.close(closing.calls, closing.error, closing.took),
                None => {
                    if let Some(error) = closing.error {
                        tracing::error!("{error}");
                    }
                }
            }
        }
        for (key, report) in &reports {
            sink.finished(&PolicyResult::of(key, report));
        }
        let mut report = Report::new(reports.into_iter().map(|(_, r)| r).collect());
        report.set_labels(self.labels.iter());
        if let Some(signal) = interrupt::received() {
            report.interrupt(interrupt::name(signal), self.not_started);
        }
        report
    }
}
