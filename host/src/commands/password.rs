//! Where a secret key's password comes from: a file, or the terminal.

use std::io::IsTerminal;
use std::path::Path;

use anyhow::{bail, Context as _};

/// The password from the first line of `file`, or `None` to let minisign ask
/// on the terminal. Without a terminal and without a file, asking would hang
/// or fail obscurely, so that is an error naming the options.
///
/// The line ends at the first `\n` or `\r`, as the `minisign` tool reads a
/// password from its standard input, so one password file serves both
/// `host sign --password-file FILE` and `minisign -S ... < FILE`.
pub(super) fn password(file: Option<&Path>, what: &str) -> anyhow::Result<Option<String>> {
    if let Some(file) = file {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("reading password file {}", file.display()))?;
        let line = first_line(&text);
        if line.is_empty() {
            bail!("password file {} is empty", file.display());
        }
        return Ok(Some(line.to_owned()));
    }
    if !std::io::stdin().is_terminal() {
        bail!(
            "{what} needs a password and there is no terminal to ask on: pass --password-file FILE"
        );
    }
    Ok(None)
}

/// `text` up to its first line break, `\r` included.
fn first_line(text: &str) -> &str {
    text.split(['\n', '\r']).next().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_is_the_first_line_as_minisign_reads_it() {
        assert_eq!(first_line("s3cret phrase\n"), "s3cret phrase");
        assert_eq!(first_line("s3cret\r\nsecond\n"), "s3cret");
        assert_eq!(first_line("no newline"), "no newline");
        assert_eq!(first_line("a\rb\n"), "a");
        assert_eq!(first_line(""), "");
        assert_eq!(first_line("\nsecond"), "");
    }
}
