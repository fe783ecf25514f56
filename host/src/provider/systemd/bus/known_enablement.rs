//! Enablement read in this run, kept while nothing says a unit file moved.
//!
//! `GetUnitFileState` is systemd's dearest question: for a disabled unit it
//! looks for links in every `.wants`/`.requires` directory of the search
//! path (about 3 ms a unit with a hundred units installed; BENCHMARKS.md,
//! issue 46). A converging run asks it twice of every unit it starts: in
//! phase one, and in phase two's status after the start's job. A job
//! does not move links, so the second answer is the first one, unless
//! something moved them meanwhile. What can:
//!
//! - this run's own `EnableUnitFiles`/`DisableUnitFiles`: systemd answers
//!   with every link it made or removed, and the units those links name are
//!   forgotten; systemd also signals `UnitFilesChanged` for such a call
//!   (before its reply), which is then expected, not a stranger's;
//! - another client's enable or disable (`systemctl enable` by hand, another
//!   tool): systemd signals `UnitFilesChanged`, and everything is forgotten;
//! - a daemon-reload, anyone's (`Reloading`): everything is forgotten;
//! - this run's daemon-reload or a change made with systemctl: everything.
//!
//! A status is then as fresh as a read at the call for every change the
//! host made or systemd told of (issue 46's rule). A link made or removed
//! by hand (`ln -s`, `rm`), which systemd is not told of, is seen by the
//! next run, as systemd itself sees it at its next reload. Kept only while
//! the run follows systemd's signals (it subscribed at its first job):
//! before that, nothing would say that a link moved.

use std::collections::HashMap;

use super::unit_files::UnitFileChange;
use crate::provider::runner::CommandOutput;

/// A manager signal that says unit files may have moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FilesMoved {
    /// `UnitFilesChanged`: an enable, disable, mask, ... with links changed.
    UnitFilesChanged,
    /// `Reloading`: a daemon-reload began or ended.
    Reloading,
}

/// The `is-enabled` answers of this run, by unit (mangled).
#[derive(Debug, Default)]
pub(crate) struct KnownEnablement {
    known: HashMap<String, CommandOutput>,
    /// `UnitFilesChanged` signals this run's own calls will cause, not yet
    /// read: each of its enable and disable calls that changed links.
    own_signals_due: usize,
}

/// Whether systemd signals `UnitFilesChanged` for a call that answered
/// `changes`: when one of them made or removed a link.
fn signalled(changes: &[UnitFileChange]) -> bool {
    changes.iter().any(UnitFileChange::moved_a_link)
}

/// The last component of a path: a link's or a unit file's name.
fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

impl KnownEnablement {
    /// What `unit`'s enablement was read as, while nothing moved since.
    pub(crate) fn recall(&self, unit: &str) -> Option<&CommandOutput> {
        self.known.get(unit)
    }

    /// `unit`'s enablement, as a status read it.
    pub(crate) fn remember(&mut self, unit: &str, answer: &CommandOutput) {
        self.known.insert(unit.to_owned(), answer.clone());
    }

    /// A signal read from systemd: a `UnitFilesChanged` this run's own call
    /// explains is only counted off; any other forgets everything.
    pub(crate) fn signal(&mut self, signal: FilesMoved) {
        match signal {
            FilesMoved::UnitFilesChanged if self.own_signals_due > 0 => {
                self.own_signals_due -= 1;
            }
            FilesMoved::UnitFilesChanged | FilesMoved::Reloading => self.known.clear(),
        }
    }

    /// This run's own enable or disable calls answered `calls` (each call's
    /// changes): every unit a changed link names, or points to, is
    /// forgotten, and the signals those calls cause are expected.
    /// `followed`: whether systemd sends this run its signals (without,
    /// nothing is kept).
    pub(crate) fn own_calls(&mut self, unit: &str, calls: &[Vec<UnitFileChange>], followed: bool) {
        self.known.remove(unit);
        for changes in calls {
            for change in changes {
                self.known.remove(file_name(&change.path));
                if !change.destination.is_empty() {
                    self.known.remove(file_name(&change.destination));
                }
            }
            if followed && signalled(changes) {
                self.own_signals_due += 1;
            }
        }
    }

    /// Forgets everything: links may have moved in ways no answer listed
    /// (a reload, a change made with systemctl, a call that failed half
    /// way, a lost bus).
    pub(crate) fn forget_all(&mut self) {
        self.known.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WANTS: &str = "/etc/systemd/system/multi-user.target.wants";

    fn word(word: &str) -> CommandOutput {
        CommandOutput {
            code: Some(1),
            stdout: format!("{word}\n"),
            stderr: String::new(),
        }
    }

    fn link(kind: &str, name: &str, destination: &str) -> UnitFileChange {
        UnitFileChange {
            kind: kind.into(),
            path: format!("{WANTS}/{name}"),
            destination: destination.into(),
        }
    }

    fn knowing(units: &[&str]) -> KnownEnablement {
        let mut known = KnownEnablement::default();
        for unit in units {
            known.remember(unit, &word("disabled"));
        }
        known
    }

    #[test]
    fn an_answer_is_recalled_until_something_moves() {
        let known = knowing(&["web.service"]);
        assert_eq!(
            known.recall("web.service").map(|o| o.stdout.as_str()),
            Some("disabled\n")
        );
        assert!(known.recall("db.service").is_none(), "never read");
    }

    #[test]
    fn a_strangers_enable_or_any_reload_forgets_everything() {
        for signal in [FilesMoved::UnitFilesChanged, FilesMoved::Reloading] {
            let mut known = knowing(&["web.service", "db.service"]);
            known.signal(signal);
            assert!(known.recall("web.service").is_none(), "{signal:?}");
            assert!(known.recall("db.service").is_none(), "{signal:?}");
        }
    }

    #[test]
    fn the_runs_own_enable_forgets_only_the_units_its_links_name() {
        let mut known = knowing(&["web.service", "db.service", "log.service"]);
        // web's link, and the Also= unit log's.
        let calls = vec![vec![
            link("symlink", "web.service", "/etc/systemd/system/web.service"),
            link("symlink", "log.service", "/etc/systemd/system/log.service"),
        ]];
        known.own_calls("web.service", &calls, true);
        assert!(known.recall("web.service").is_none());
        assert!(known.recall("log.service").is_none(), "Also=");
        assert!(known.recall("db.service").is_some(), "not moved");
        // Its own signal is expected: it forgets nothing more.
        known.signal(FilesMoved::UnitFilesChanged);
        assert!(known.recall("db.service").is_some());
        // The next one is a stranger's.
        known.signal(FilesMoved::UnitFilesChanged);
        assert!(known.recall("db.service").is_none());
    }

    #[test]
    fn an_alias_link_forgets_both_names() {
        let mut known = knowing(&["web.service", "www.service"]);
        let alias = UnitFileChange {
            kind: "symlink".into(),
            path: "/etc/systemd/system/www.service".into(),
            destination: "/lib/systemd/system/web.service".into(),
        };
        known.own_calls("other.service", &[vec![alias]], true);
        assert!(known.recall("web.service").is_none());
        assert!(known.recall("www.service").is_none());
    }

    #[test]
    fn a_call_that_moved_no_link_expects_no_signal() {
        // systemd signals only when a link was made or removed: a call that
        // found the unit already enabled (no change) or masked causes none,
        // so a stranger's signal after it still forgets everything.
        let mut known = knowing(&["web.service", "db.service"]);
        let calls = vec![
            Vec::new(),
            vec![UnitFileChange {
                kind: "is-masked".into(),
                path: "/etc/systemd/system/web.service".into(),
                destination: String::new(),
            }],
        ];
        known.own_calls("web.service", &calls, true);
        assert!(known.recall("db.service").is_some());
        known.signal(FilesMoved::UnitFilesChanged);
        assert!(known.recall("db.service").is_none());
    }

    #[test]
    fn unfollowed_calls_expect_no_signal() {
        // Without the run's subscription systemd sends it no signal: none
        // may be counted off, or a stranger's would be taken for it.
        let mut known = knowing(&["db.service"]);
        let calls = vec![vec![link("unlink", "web.service", "")]];
        known.own_calls("web.service", &calls, false);
        known.signal(FilesMoved::UnitFilesChanged);
        assert!(known.recall("db.service").is_none());
    }

    #[test]
    fn forgetting_all_forgets_all() {
        let mut known = knowing(&["web.service", "db.service"]);
        known.forget_all();
        assert!(known.recall("web.service").is_none());
        assert!(known.recall("db.service").is_none());
    }
}
