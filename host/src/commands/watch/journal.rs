//! Where a watch's lines go: under systemd, to the journal as entries with
//! fields of their own (`POLICY=`, `UNIT=`, `ACTION=`, `CAUSE=`), so that
//! `journalctl -u policy-host-watch UNIT=web.service` finds a unit's
//! repairs; elsewhere, to stdout. Through `tracing-journald`'s layer, on a
//! subscriber of its own: the host's diagnostics keep their own route.

use std::io::Write as _;

use tracing::dispatcher::{with_default, Dispatch};
use tracing_subscriber::layer::SubscriberExt as _;

/// One line about a resource: what was done to it, and why.
pub(crate) struct Line<'a> {
    pub(crate) policy: &'a str,
    /// The unit as systemd names it, when the resource is one.
    pub(crate) unit: Option<&'a str>,
    /// `started`, `enabled, started`, `failed`, ...
    pub(crate) action: &'a str,
    pub(crate) cause: &'a str,
    /// The whole line, as printed.
    pub(crate) text: &'a str,
}

/// The route of the lines, chosen once.
pub(crate) enum Lines {
    /// A dispatcher of its own, so that the host's diagnostics keep theirs.
    Journal(Dispatch),
    Stdout,
}

impl Lines {
    /// The journal when systemd connected stdout to it (`JOURNAL_STREAM`,
    /// systemd.exec(5)) and its socket takes entries; stdout otherwise.
    pub(crate) fn choose() -> Self {
        if std::env::var_os("JOURNAL_STREAM").is_none() {
            return Lines::Stdout;
        }
        match tracing_journald::layer() {
            Ok(layer) => Lines::Journal(Dispatch::new(
                tracing_subscriber::registry().with(
                    layer
                        .with_field_prefix(None)
                        .with_syslog_identifier("policy-host".to_owned()),
                ),
            )),
            Err(e) => {
                tracing::debug!("the journal's socket is not there ({e}): lines go to stdout");
                Lines::Stdout
            }
        }
    }

    /// Says `line`: a failure or a refusal at the journal's error
    /// priority, the rest at info.
    pub(crate) fn say(&self, line: &Line<'_>) {
        macro_rules! entry {
            ($level:expr) => {
                match line.unit {
                    Some(unit) => tracing::event!(
                        $level,
                        policy = line.policy,
                        unit,
                        action = line.action,
                        cause = line.cause,
                        "{}",
                        line.text
                    ),
                    None => tracing::event!(
                        $level,
                        policy = line.policy,
                        action = line.action,
                        cause = line.cause,
                        "{}",
                        line.text
                    ),
                }
            };
        }
        match self {
            Lines::Stdout => plain(line.text),
            Lines::Journal(subscriber) => with_default(subscriber, || {
                if matches!(line.action, "failed" | "refused") {
                    entry!(tracing::Level::ERROR)
                } else {
                    entry!(tracing::Level::INFO)
                }
            }),
        }
    }

    /// Says a line that concerns no resource (the watch itself).
    pub(crate) fn note(&self, text: &str) {
        match self {
            Lines::Stdout => plain(text),
            Lines::Journal(subscriber) => with_default(subscriber, || tracing::info!("{text}")),
        }
    }
}

fn plain(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{text}");
    let _ = stdout.flush();
}
