//! Writes executables that tests run, without "Text file busy".
//!
//! Tests run in parallel threads of one process. If this process opens a
//! file for writing while another thread forks a child (every
//! `Command::spawn` does), the child inherits the open descriptor until it
//! calls `exec`, and during that window the kernel refuses to execute the
//! file (`ETXTBSY`). Writing through a short-lived `install` process keeps
//! the write descriptor out of this process altogether, so no sibling can
//! inherit it.

use std::fs;
use std::path::Path;
use std::process::Command;

/// Copies `source` to `target` with mode 0755 through `install(1)`.
pub fn install_executable(source: &Path, target: &Path) {
    let output = Command::new("install")
        .arg("-m")
        .arg("0755")
        .arg("--")
        .arg(source)
        .arg(target)
        .output()
        .unwrap_or_else(|e| panic!("cannot run install: {e}"));
    assert!(
        output.status.success(),
        "cannot install {} as {}: {}",
        source.display(),
        target.display(),
        String::from_utf8_lossy(&output.stderr).trim()
    );
}

/// Writes `contents` to `target` as an executable (mode 0755). The text is
/// first written next to it under a `.source` name that is never executed.
pub fn write_executable(target: &Path, contents: &str) {
    let mut source = target.as_os_str().to_owned();
    source.push(".source");
    let source = std::path::PathBuf::from(source);
    fs::write(&source, contents)
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", source.display()));
    install_executable(&source, target);
    fs::remove_file(&source).unwrap_or_else(|e| panic!("cannot remove {}: {e}", source.display()));
}
