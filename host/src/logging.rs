//! Diagnostics on stderr with `tracing`: a terse human format (`host:
//! warning: ...`) by default, or one JSON object per line with
//! `--log-format json` for log collectors. The report itself goes to stdout
//! and is not a log.

use std::fmt;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::EnvFilter;

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Human,
    Json,
}

/// Installs the subscriber. `level` applies to the host's own diagnostics
/// (`--log-level`); `RUST_LOG` overrides it.
///
/// Libraries are silent unless `level` is `debug` or `trace`: the host turns
/// their failures into one error that names the cause (a TLS verifier's
/// "invalid peer certificate" becomes the registry, the certificate problem
/// and the setting that fixes it), and a library's own `error` line would be
/// a second, contextless one.
pub fn init(format: LogFormat, level: &str) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(directives(level)));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| QuietStderr);
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Human => builder.event_format(Terse).try_init(),
    };
}

/// The filter for `--log-level LEVEL`: the host's own targets at `level`,
/// libraries off, or at `warn` when debugging.
fn directives(level: &str) -> String {
    let libraries = match level.trim().to_ascii_lowercase().as_str() {
        "debug" | "trace" => "warn",
        _ => "off",
    };
    format!("{libraries},policy_host={level},host={level}")
}

/// The most of one diagnostic shown: messages can quote a policy (a trap
/// message, a refused import name), and a policy can make those enormous.
const MAX_EVENT_TEXT: usize = 16 * 1024;

/// `host: warning: message key=value ...`, like a classic Unix tool. Every
/// line of a multi-line message gets the prefix, and each line is made safe
/// (`text::lines`): a message may quote a policy, and a policy must not be
/// able to drive the terminal or forge a `host: ...` line.
struct Terse;

impl<S, N> FormatEvent<S, N> for Terse
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let level = match *event.metadata().level() {
            Level::ERROR => "error",
            Level::WARN => "warning",
            Level::INFO => "info",
            Level::DEBUG => "debug",
            Level::TRACE => "trace",
        };
        let mut text = String::new();
        ctx.field_format()
            .format_fields(Writer::new(&mut text), event)?;
        let text = crate::text::truncate(text, MAX_EVENT_TEXT, crate::text::TRUNCATED);
        let mut any = false;
        for line in crate::text::lines(&text) {
            writeln!(writer, "{}: {level}: {line}", crate::program::name())?;
            any = true;
        }
        if !any {
            writeln!(writer, "{}: {level}:", crate::program::name())?;
        }
        Ok(())
    }
}

/// stderr that swallows write errors. tracing-subscriber reports a failed
/// write with `eprintln!`, which panics when stderr is a closed pipe
/// (`host run ... 2>&1 | head`); a diagnostic that cannot be shown must not
/// abort a run.
struct QuietStderr;

impl std::io::Write for QuietStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let _ = std::io::stderr().write_all(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let _ = std::io::stderr().flush();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::directives;

    #[test]
    fn libraries_speak_only_when_debugging() {
        assert_eq!(directives("warn"), "off,policy_host=warn,host=warn");
        assert_eq!(directives("error"), "off,policy_host=error,host=error");
        assert_eq!(directives("debug"), "warn,policy_host=debug,host=debug");
        assert_eq!(directives("TRACE"), "warn,policy_host=TRACE,host=TRACE");
    }
}
