//! Where a secret key's password comes from: a file, or the terminal.

use std::io::IsTerminal;
use std::path::Path;

use anyhow::{bail, Context as _};

/// The password from the first line of `file`, or `None` to let minisign ask
/// on the terminal. Without a terminal and without a file, asking would hang
/// or fail obscurely, so that is an error naming the options.
pub fn password(file: Option<&Path>, what: &str) -> anyhow::Result<Option<String>> {
    if let Some(file) = file {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("reading password file {}", file.display()))?;
        let line = text.lines().next().unwrap_or("");
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
