//! The report for people: one line per resource, then a summary line.
//!
//! Every string that came from a policy or a policy file is made safe for
//! the terminal (`text::one_line`, `text::lines`): one field stays one line,
//! and no control character or bidirectional override reaches the screen.

use std::fmt::Write as _;

use crate::text::{lines, one_line, Untrusted};

use super::{Report, RunReport};
use crate::guest::ResourceEvent;
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
            let _ = writeln!(
                out,
                "{} policies: {} resources, {} changed, {} failed, {} unchanged in {:.2}s",
                policies.len(),
                summary.resources,
                summary.changed,
                summary.failed,
                summary.unchanged,
                summary.duration_ms / 1000.0
            );
        }
    }
    out
}

fn render_run(out: &mut String, run: &RunReport, verbosity: Verbosity, style: Style) {
    let quiet = verbosity == Verbosity::Quiet;
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
    if !quiet {
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
    if let Some(detail) = run
        .provider
        .detail
        .as_deref()
        .filter(|_| !run.provider.available)
    {
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
    let width = run
        .resources
        .iter()
        .map(|r| one_line(&r.resource).len())
        .max()
        .unwrap_or(0);
    for r in run.resources.iter().filter(|r| !quiet || r.failed) {
        let _ = writeln!(
            out,
            "{:<width$}  {}",
            one_line(&r.resource),
            describe(r, style)
        );
        // What the unit itself last said (escaped: it is the unit's text).
        for line in &r.journal {
            let _ = writeln!(
                out,
                "{:<width$}    {}",
                "",
                style.dim(&format!("journal: {line}"))
            );
        }
    }
    for e in &run.errors {
        let _ = writeln!(out, "{}", style.red(&format!("error: {e}")));
    }
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
    if !run.log.trim().is_empty() && (!quiet || !run.summary.success) {
        let _ = writeln!(out, "policy log:");
        for line in lines(&run.log) {
            let _ = writeln!(out, "  | {line}");
        }
    }
    if verbosity == Verbosity::Verbose {
        for call in &run.calls {
            let service = one_line(call.service.as_deref().unwrap_or(""));
            let outcome = match &call.error {
                None => style.green("ok"),
                Some(e) => style.red(&format!("{}: {}", call.outcome, one_line(e))),
            };
            let ms = call.duration.as_secs_f64() * 1000.0;
            let _ = writeln!(
                out,
                "  call {:<13} {service:<width$}  {ms:>8.1} ms  {outcome}",
                call.operation.verb()
            );
        }
    }
    if quiet {
        return;
    }
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
    let _ = writeln!(
        out,
        "{}{mode}: {} resources, {} {}, {} failed, {} unchanged; {made} changes made, {reloads} daemon-reload, in {:.2}s",
        one_line(&run.policy),
        s.resources,
        s.changed,
        if run.noop { "would change" } else { "changed" },
        s.failed,
        s.unchanged,
        s.duration_ms / 1000.0
    );
    if run.noop && s.changed > 0 {
        let _ = writeln!(
            out,
            "{}",
            style.dim(
                "(what would change is the policy's own account: a noop run executes nothing)"
            )
        );
    }
}

fn describe(r: &ResourceEvent, style: Style) -> String {
    if r.failed {
        let done = if r.actions.is_empty() {
            String::new()
        } else {
            format!(" (after {})", r.actions.join(", "))
        };
        let errors: Vec<String> = r.errors.iter().map(Untrusted::to_string).collect();
        return style.red(&format!("FAILED{done}: {}", errors.join("; ")));
    }
    // Why it restarted (`file#/etc/app.conf changed`), or why a watched
    // reference did nothing yet (first seen: recorded).
    let because = if r.triggered_by.is_empty() {
        String::new()
    } else {
        let causes: Vec<String> = r
            .triggered_by
            .iter()
            .map(|t| one_line(&format!("{} {}", t.reference, t.change)).into_owned())
            .collect();
        format!(" ({})", causes.join(", "))
    };
    let recorded: Vec<String> = r
        .watched
        .iter()
        .filter(|w| w.seen == crate::watch::survey::Seen::Recorded)
        .map(|w| one_line(&w.reference).into_owned())
        .collect();
    let recorded = if recorded.is_empty() {
        String::new()
    } else {
        format!(
            " ({} first seen: recorded, nothing to restart)",
            recorded.join(", ")
        )
    };
    // Said only where nothing happened: that is when an operator asks why.
    if let Some(message) = &r.noop_message {
        return style.yellow(&format!("{message}{because}"));
    }
    if r.actions.is_empty() {
        style.dim(&format!("unchanged{recorded}"))
    } else {
        style.green(&format!("{}{because}", r.actions.join(", ")))
    }
}
