//! What an end-to-end test may require of the machine, and how each is
//! detected. Shared (by `#[path]`) between the `#[e2e_test]` macro, which
//! asks at compile time whether to mark a test ignored, and the harness,
//! which asks again when the test runs (so that a test run anyway with
//! `--include-ignored` fails naming what is missing).

use std::path::Path;

/// Each requirement, and how to get it on Debian.
pub(crate) const KNOWN: &[(&str, &str)] = &[
    ("root", "run the tests as root"),
    (
        "systemd",
        "systemd 252 to boot in a sandbox: root, apt-get install systemd util-linux",
    ),
    ("systemctl", "apt-get install systemd"),
    ("minisign", "apt-get install minisign"),
    ("docker-registry", "apt-get install docker-registry"),
    ("promtool", "apt-get install prometheus"),
    ("cargo-deb", "cargo install cargo-deb --locked"),
    ("lintian", "apt-get install lintian"),
    ("bind9-host", "apt-get install bind9-host"),
    ("componentize-py", "pip install componentize-py==0.25.1"),
    ("pytest", "pip install pytest"),
    ("node", "apt-get install nodejs"),
    ("componentize-qjs", "npm install -g componentize-qjs@0.4.5"),
];

/// `None` when the machine has `name`; otherwise how to get it. An unknown
/// name is an `Err` naming the known ones.
pub(crate) fn missing(name: &str) -> Result<Option<&'static str>, String> {
    missing_in(name, std::env::var_os("PATH").as_deref())
}

/// [`missing`], with programs looked for in `path` (a `PATH` value).
pub(crate) fn missing_in(
    name: &str,
    path: Option<&std::ffi::OsStr>,
) -> Result<Option<&'static str>, String> {
    let on_path = |program: &str| on_path(program, path);
    let Some((_, how)) = KNOWN.iter().find(|(known, _)| *known == name) else {
        let known: Vec<&str> = KNOWN.iter().map(|(k, _)| *k).collect();
        return Err(format!(
            "unknown requirement {name:?}; the known ones are: {}",
            known.join(", ")
        ));
    };
    let present = match name {
        "root" => is_root(),
        "systemd" => {
            is_root()
                && Path::new("/lib/systemd/systemd").is_file()
                && ["unshare", "nsenter", "setpriv"].iter().all(|p| on_path(p))
        }
        "systemctl" => on_path("systemctl"),
        "minisign" => on_path("minisign"),
        "docker-registry" => Path::new("/usr/bin/docker-registry").is_file(),
        "promtool" => on_path("promtool"),
        "cargo-deb" => on_path("cargo-deb"),
        "lintian" => on_path("lintian"),
        "bind9-host" => Path::new("/usr/bin/host").is_file(),
        "componentize-py" => on_path("componentize-py"),
        "pytest" => on_path("pytest"),
        "node" => on_path("node"),
        "componentize-qjs" => on_path("componentize-qjs"),
        _ => unreachable!("every known requirement is detected"),
    };
    Ok((!present).then_some(*how))
}

/// Whether this process runs as root (its effective user id is 0).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().nth(1).map(|e| e == "0"))
            .unwrap_or(false)
    })
}

/// Whether `program` is an executable file in a directory of `path`.
fn on_path(program: &str, path: Option<&std::ffi::OsStr>) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.is_some_and(|path| {
        std::env::split_paths(path).any(|dir| {
            std::fs::metadata(dir.join(program))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}
