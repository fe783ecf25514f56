//! The report for people: one line per resource, then a summary line.
//!
//! Every string that came from a policy or a policy file is made safe for
//! the terminal (`text::one_line`, `text::lines`): one field stays one line,
//! and no control character or bidirectional override reaches the screen.
//!
//! Bounded as the JSON report is: the lines of each of a run's lists (its
//! resources, the resources left out, its errors, its log, its calls) take
//! at most what the list takes in the JSON report and [`SLACK`] bytes (an
//! escape can be longer than JSON's, a name column pads); past that, one
//! line says how many entries were not shown. `--report-limit` bounds the
//! JSON, and so this.

use std::fmt::Write as _;

use crate::text::{json_len, one_line, thousands, truncate, Untrusted};

use super::{Report, RunReport, Summary};
use crate::guest::{Done, ResourceEvent, ResourceOutcome, WatchReport};
use crate::provider::Call;

/// How much to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verbosity {
    /// `-q`: only failures.
    Quiet,
    Normal,
    /// `-v`: also every provider call with its duration.
    Verbose,
}

/// Colours, only on a terminal and never when `NO_COLOR` is set.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub color: bool,
}

impl Style {
    /// Colour when stdout is a terminal and `NO_COLOR` is unset or empty
    /// (<https://no-color.org>).
    pub fn detect() -> Self {
        use std::io::IsTerminal;
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Self {
            color: std::io::stdout().is_terminal() && !no_color,
        }
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    fn red(&self, text: &str) -> String {
        self.paint("31", text)
    }

    fn green(&self, text: &str) -> String {
        self.paint("32", text)
    }

    fn yellow(&self, text: &str) -> String {
        self.paint("33", text)
    }

    fn dim(&self, text: &str) -> String {
        self.paint("2", text)
    }
}

/// Renders the whole report; with several policies, a combined summary line ends it.
pub fn render_human(report: &Report, verbosity: Verbosity, style: Style) -> String {
    let mut out = String::new();
    for run in report.runs() {
        render_run(&mut out, run, verbosity, style);
    }
    if let Some(i) = report.interruption() {
        let _ = writeln!(
            out,
            "{}",
            style.red(&format!(
                "interrupted by {}: done: {}; not reached: {}",
                i.signal,
                if i.done.is_empty() {
                    "nothing".to_owned()
                } else {
                    one_line(&i.done.join(", ")).into_owned()
                },
                if i.not_reached.is_empty() {
                    "nothing".to_owned()
                } else {
                    one_line(&i.not_reached.join(", ")).into_owned()
                }
            ))
        );
    }
    if let Report::Several {
        policies, summary, ..
    } = report
    {
        if verbosity != Verbosity::Quiet {
            let failed_policies = match summary.policies_failed {
                0 => String::new(),
                n => format!(" ({n} failed)"),
            };
            let _ = writeln!(
                out,
                "{} policies{failed_policies}: {} in {:.2}s",
                policies.len(),
                resource_counts(summary, "changed"),
                summary.duration_ms / 1000.0
            );
        }
    }
    out
}

fn render_run(out: &mut String, run: &RunReport, verbosity: Verbosity, style: Style) {
    let quiet = verbosity == Verbosity::Quiet;
    render_sources(out, run, quiet, style);
    if !quiet {
        render_signature(out, run, style);
    }
    if let Some(detail) = unavailable(run) {
        let _ = writeln!(
            out,
            "{}",
            style.red(&format!(
                "provider {} unavailable: {}",
                run.provider.name,
                one_line(detail)
            ))
        );
    }
    let width = render_resources(out, run, quiet, style);
    if !quiet {
        render_left_out(out, run, width, style);
    }
    render_problems(out, run, quiet, style);
    if verbosity == Verbosity::Verbose {
        render_calls(out, run, width, style);
    }
    if !quiet {
        render_summary(out, run, style);
    }
}

/// Where the policy and its settings came from, when a line is worth it:
/// a stale copy always; a registry's digest unless quiet.
fn render_sources(out: &mut String, run: &RunReport, quiet: bool, style: Style) {
    for (what, source) in std::iter::once(("policy", &run.source))
        .chain(run.settings_source.as_ref().map(|s| ("settings", s)))
    {
        if source.stale {
            let _ = writeln!(
                out,
                "{}",
                style.yellow(&format!(
                    "stale {what}: {} could not be pulled; ran the last verified copy {}",
                    one_line(&source.location),
                    one_line(&source.digest)
                ))
            );
        } else if !quiet && source.location.starts_with("oci://") {
            // A file's name and digest are in the signature line already; a
            // reference's digest says which version the tag meant.
            let _ = writeln!(
                out,
                "{}",
                style.dim(&format!(
                    "{what} {} ({})",
                    one_line(&source.location),
                    one_line(&source.digest)
                ))
            );
        }
    }
}

/// Who signed the policy.
fn render_signature(out: &mut String, run: &RunReport, style: Style) {
    if let Some(key_id) = &run.signature.key_id {
        let comment = run
            .signature
            .trusted_comment
            .as_ref()
            .map(Untrusted::to_string)
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "{}",
            style.dim(&format!("signed by key {key_id} ({comment})"))
        );
    }
}

/// Why the provider could not work, when it could not.
fn unavailable(run: &RunReport) -> Option<&str> {
    run.provider
        .detail
        .as_deref()
        .filter(|_| !run.provider.available)
}

/// One line per resource (only the failed ones when quiet), with the
/// unit's journal lines and the subscriptions' warnings under it. Returns
/// the width of the name column.
fn render_resources(out: &mut String, run: &RunReport, quiet: bool, style: Style) -> usize {
    let width = name_column(run.resources.iter().map(|r| &r.resource));
    let unavailable = unavailable(run);
    let mut lines = Lines::new(out, json_len(&run.resources));
    for r in run.resources.iter().filter(|r| !quiet || r.failed) {
        let mut out = String::new();
        let line = match unavailable {
            // Said once, above; each resource only says that it was not checked.
            Some(detail)
                if r.failed
                    && !r.errors.is_empty()
                    && r.errors.iter().all(|e| e.as_raw().contains(detail)) =>
            {
                style.red(&format!(
                    "FAILED: not checked (provider {} unavailable, above)",
                    run.provider.name
                ))
            }
            _ => describe(r, run.noop, style),
        };
        let _ = writeln!(out, "{:<width$}  {line}", one_line(&r.resource.to_string()));
        // What the unit itself last said (escaped: it is the unit's text).
        for line in &r.journal {
            let _ = writeln!(
                out,
                "{:<width$}    {}",
                "",
                style.dim(&format!("journal: {line}"))
            );
        }
        if !quiet {
            warnings(&mut out, r, style);
        }
        lines.add(&out);
    }
    lines.finish("resources", style);
    width
}

/// The resources declared for other machines, and why not this one; an
/// entry whose unit another entry applied (its line is above) says it is
/// the other entry that was not applied.
fn render_left_out(out: &mut String, run: &RunReport, width: usize, style: Style) {
    let width = name_column(run.left_out.iter().map(|l| &l.resource)).max(width);
    let mut lines = Lines::new(out, json_len(&run.left_out));
    for entry in &run.left_out {
        let what = if entry.unit_applied {
            "other entry not applied"
        } else {
            "not applied"
        };
        lines.add(&format!(
            "{:<width$}  {}\n",
            one_line(&entry.resource.to_string()),
            style.dim(&format!("{what}: {}", entry.why))
        ));
    }
    lines.finish("resources left out", style);
}

/// The run's own errors, a policy's failure, and the policy's log.
fn render_problems(out: &mut String, run: &RunReport, quiet: bool, style: Style) {
    let mut lines = Lines::new(out, json_len(&run.errors));
    for e in &run.errors {
        lines.add(&format!("{}\n", style.red(&format!("error: {e}"))));
    }
    lines.finish("errors", style);
    if let Some(failure) = &run.failure {
        let _ = writeln!(
            out,
            "{}",
            style.red(&format!(
                "policy failed ({}): {}",
                failure.class, failure.message
            ))
        );
    }
    if !run.log.as_raw().trim().is_empty() && (!quiet || !run.summary.success) {
        let _ = writeln!(out, "policy log:");
        let mut lines = Lines::new(out, json_len(&run.log));
        for line in run.log.lines() {
            lines.add(&format!("  | {line}\n"));
        }
        lines.finish("lines of the log", style);
    }
}

/// Every provider call, with its duration (`-v`).
fn render_calls(out: &mut String, run: &RunReport, width: usize, style: Style) {
    let mut lines = Lines::new(out, json_len(&run.calls));
    for call in &run.calls {
        let service = call
            .service
            .as_ref()
            .map(Untrusted::to_string)
            .unwrap_or_default();
        let outcome = match &call.error {
            None => style.green("ok"),
            Some(e) => style.red(&format!("{}: {e}", call.outcome)),
        };
        let ms = call.duration.as_secs_f64() * 1000.0;
        lines.add(&format!(
            "  call {:<13} {service:<width$}  {ms:>8.1} ms  {outcome}\n",
            call.operation.verb()
        ));
    }
    lines.finish("calls", style);
}

/// The summary line, and what a noop run's counts are.
fn render_summary(out: &mut String, run: &RunReport, style: Style) {
    let s = &run.summary;
    let mode = if run.noop { " (noop)" } else { "" };
    let made = run
        .calls
        .iter()
        .filter(|c| c.operation.is_mutating() && c.outcome.is_ok())
        .count();
    let reloads = run
        .calls
        .iter()
        .filter(|c| c.operation == Call::DaemonReload)
        .count();
    let counts = if s.policies_failed > 0 && s.counts.resources == 0 {
        "the policy failed before applying anything".to_owned()
    } else {
        resource_counts(s, if run.noop { "would change" } else { "changed" })
    };
    let _ = writeln!(
        out,
        "{}{mode}: {counts}; {made} changes made, {reloads} daemon-reload, in {:.2}s",
        one_line(&run.policy),
        s.duration_ms / 1000.0
    );
    if run.noop && s.counts.changed > 0 {
        let _ = writeln!(
            out,
            "{}",
            style.dim(
                "(what would change is the policy's own account: a noop run executes nothing)"
            )
        );
    }
}

/// One resource's line; `noop`: of a `--noop` run, which records nothing.
fn describe(r: &ResourceEvent, noop: bool, style: Style) -> String {
    match r.outcome() {
        ResourceOutcome::Failed { .. } => {
            let done = if r.actions.is_empty() {
                String::new()
            } else {
                format!(" (after {})", joined_words(&r.actions))
            };
            let errors: Vec<String> = r.errors.iter().map(Untrusted::to_string).collect();
            style.red(&format!("FAILED{done}: {}", errors.join("; ")))
        }
        ResourceOutcome::LeftAlone => left_alone(r, style),
        ResourceOutcome::Changed | ResourceOutcome::Unchanged => {
            // Said only where nothing happened: that is when an operator
            // asks why.
            if let Some(message) = &r.noop_message {
                return style.yellow(&format!("{message}{}", because(&r.watch)));
            }
            if r.actions.is_empty() {
                style.dim(&format!("unchanged{}", first_seen(&r.watch, noop)))
            } else {
                style.green(&format!(
                    "{}{}",
                    joined_words(&r.actions),
                    because(&r.watch)
                ))
            }
        }
    }
}

/// Why it restarted (`file#/etc/app.conf changed`), in parentheses; empty
/// when nothing triggered it.
fn because(watch: &WatchReport) -> String {
    if watch.triggered_by.is_empty() {
        return String::new();
    }
    let shown: Vec<String> = watch
        .triggered_by
        .iter()
        .take(LISTED)
        .map(|t| format!("{} {}", reference(&t.reference), one_line(&t.change)))
        .collect();
    let changed = watch.counts.as_ref().map_or(0, |c| c.changed);
    format!(" ({})", listed(shown, changed))
}

/// A unit left alone: how and why, what was refused, what was done anyway
/// (a held unit may still be enabled).
fn left_alone(r: &ResourceEvent, style: Style) -> String {
    let Some(alone) = &r.left_alone else {
        return String::new();
    };
    let refused: Vec<&str> = alone.would.iter().map(|op| op.verb()).collect();
    let refused = match &refused[..] {
        [] => String::new(),
        ops => format!("; refused: {}", ops.join(", ")),
    };
    let done = if r.actions.is_empty() {
        String::new()
    } else {
        format!("; {}", joined_words(&r.actions))
    };
    style.yellow(&format!(
        "{}: {}{refused}{done}",
        alone.kind,
        one_line(&alone.why)
    ))
}

/// What a run did with references seen for the first time: recorded (or,
/// in a noop run, to be recorded by a real one), nothing restarted.
fn first_seen(watch: &WatchReport, noop: bool) -> String {
    let recorded: Vec<&str> = watch
        .watched
        .iter()
        .filter(|w| w.seen == crate::subscriptions::survey::Seen::Recorded)
        .map(|w| w.reference.as_str())
        .collect();
    let all_recorded = watch.counts.as_ref().map_or(0, |c| c.recorded);
    // A noop run records nothing: the next real run does.
    let kept = if noop {
        "recorded by a run without --noop"
    } else {
        "recorded"
    };
    if all_recorded == 0 {
        String::new()
    } else if all_recorded <= LISTED && recorded.len() == all_recorded {
        let names: Vec<String> = recorded.iter().map(|r| reference(r)).collect();
        format!(
            " ({} first seen: {kept}, nothing to restart)",
            names.join(", ")
        )
    } else {
        format!(
            " ({} references first seen: {kept}, nothing to restart)",
            thousands(all_recorded)
        )
    }
}

/// `3 resources, 0 changed, 2 failed (1 after changes), 1 unchanged`: the
/// parts add up to the whole, and a failed resource that changed something
/// first says so inside its count, not a second time.
fn resource_counts(s: &Summary, changed: &str) -> String {
    let after = match s.counts.failed_after_changes {
        0 => String::new(),
        n => format!(" ({n} after changes)"),
    };
    let resources = if s.counts.resources == 1 {
        "resource"
    } else {
        "resources"
    };
    let left_alone = match s.counts.left_alone {
        0 => String::new(),
        n => format!(", {n} left alone"),
    };
    let left_out = match s.counts.left_out {
        0 => String::new(),
        n => format!(" ({n} not applied on this machine)"),
    };
    format!(
        "{} {resources}, {} {changed}, {} failed{after}{left_alone}, {} unchanged{left_out}",
        s.counts.resources, s.counts.changed, s.counts.failed, s.counts.unchanged
    )
}

/// How many references, triggers or warnings a line names before it counts
/// the rest: a policy may declare 10,000 references, and the JSON report
/// holds every one the report limit allows.
const LISTED: usize = 3;

/// The longest reference the human report shows whole.
const SHOWN_REFERENCE: usize = 200;

/// A reference as one safe line, cut to [`SHOWN_REFERENCE`] bytes.
fn reference(text: &str) -> String {
    let shown: String = text.chars().take(SHOWN_REFERENCE + 1).collect();
    truncate(one_line(&shown).into_owned(), SHOWN_REFERENCE, "...")
}

/// `shown` joined, and, when `total` is more, how many more there are.
fn listed(shown: Vec<String>, total: usize) -> String {
    let more = total.saturating_sub(shown.len());
    let mut text = shown.join(", ");
    if more > 0 {
        text.push_str(&format!(" and {} more", thousands(more)));
    }
    text
}

/// The warnings of `r`'s event, under its line: the references the host
/// does not watch, at most [`LISTED`], then how many more.
fn warnings(out: &mut String, r: &ResourceEvent, style: Style) {
    let watch = &r.watch;
    for warning in watch.warnings.iter().take(LISTED) {
        let shown: String = warning.as_raw().chars().take(2 * SHOWN_REFERENCE).collect();
        let shown = truncate(one_line(&shown).into_owned(), 2 * SHOWN_REFERENCE, "...");
        let _ = writeln!(out, "    {}", style.yellow(&format!("warning: {shown}")));
    }
    let all = watch.counts.as_ref().map_or(0, |c| c.not_watched);
    let more = all.saturating_sub(watch.warnings.len().min(LISTED));
    if more > 0 {
        let _ = writeln!(
            out,
            "    {}",
            style.yellow(&format!(
                "warning: {} more references not watched; they fire only on --refresh",
                thousands(more)
            ))
        );
    }
}

/// The longest name the column of resource names is padded to: a longer
/// name is written whole, and pads no other line.
const NAME_COLUMN: usize = 40;

/// The width of the column of `names`: the longest, at most
/// [`NAME_COLUMN`].
fn name_column<'r>(names: impl Iterator<Item = &'r crate::resource::ResourceRef>) -> usize {
    names
        .map(|name| one_line(&name.to_string()).len())
        .max()
        .unwrap_or(0)
        .min(NAME_COLUMN)
}

/// What the lines of one list may take beyond what the list takes in the
/// JSON report.
const SLACK: usize = 4096;

/// The lines of one of a run's lists, held to `json` (what the list takes
/// in the JSON report) and [`SLACK`]: an entry whose lines do not fit ends
/// the list, and one line says how many entries were not shown.
struct Lines<'o> {
    out: &'o mut String,
    room: usize,
    not_shown: usize,
}

impl<'o> Lines<'o> {
    fn new(out: &'o mut String, json: usize) -> Self {
        Self {
            out,
            room: json + SLACK,
            not_shown: 0,
        }
    }

    /// Writes one entry's `lines` when they fit, and nothing was cut before.
    fn add(&mut self, lines: &str) {
        if self.not_shown == 0 && lines.len() <= self.room {
            self.room -= lines.len();
            self.out.push_str(lines);
        } else {
            self.not_shown += 1;
        }
    }

    /// Says how many `what` were not shown, when some were not.
    fn finish(self, what: &str, style: Style) {
        if self.not_shown > 0 {
            let _ = writeln!(
                self.out,
                "{}",
                style.yellow(&format!(
                    "({} more {what} not shown here: the report for people is held \
                     to the size of the JSON report; see --json)",
                    thousands(self.not_shown)
                ))
            );
        }
    }
}

/// Actions as a report line writes them: `started, enabled`.
fn joined_words(actions: &[Done]) -> String {
    let words: Vec<&str> = actions.iter().map(|d| d.as_str()).collect();
    words.join(", ")
}

#[cfg(test)]
#[path = "human_tests.rs"]
mod tests;
