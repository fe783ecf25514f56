//! Where each gathered fact comes from. Only the host chooses: never a
//! command or a path a guest names. Nothing secret is read (no machine-id,
//! no addresses, no environment): a fact is told to every policy and
//! written in reports, so it must be something any local user may read.
//!
//! | fact | source |
//! | --- | --- |
//! | `hostname` | `/proc/sys/kernel/hostname` (the kernel's; `(none)`, never set, is not known) |
//! | `fqdn` | `/etc/hosts` only, never DNS (a run must not wait on, or leak to, a resolver): the canonical name of the first line listing the host name, when it has a dot; else the host name |
//! | `os.id`, `os.version_id`, `os.version_codename` | `/etc/os-release`, else `/usr/lib/os-release` (`ID`, `VERSION_ID`, `VERSION_CODENAME`) |
//! | `arch` | the kernel's machine (`uname(2)`, as `uname -m`) in Debian's name; the build's target when the kernel cannot be asked |
//! | `kernel.release` | `/proc/sys/kernel/osrelease` |
//! | `cpus` | `/sys/devices/system/cpu/online`, else what the process may use (`available_parallelism`) |
//! | `memory_mib` | `/proc/meminfo`'s `MemTotal` |
//! | `systemd.version` | the running systemd's `Version`, over the system bus |
//! | `host.version` | this binary's version |
//!
//! A value longer than [`MAX_BYTES`] (a damaged file) is not known rather
//! than cut: a fact is either what the machine says or empty.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use contract_words::facts::{
    ARCH, CPUS, FQDN, GATHERED, HOSTNAME, HOST_VERSION, KERNEL_RELEASE, MEMORY_MIB, OS_ID,
    OS_VERSION_CODENAME, OS_VERSION_ID, SYSTEMD_VERSION,
};

use super::labels::MAX_BYTES;
use super::parse;

/// The longest a file the facts come from is read: every one is a line or
/// a page, and /etc/hosts of a blocking list a few MiB at most.
const MAX_FILE: u64 = 16 << 20;

/// How long systemd has to answer for its version, at each step (connect,
/// ask): it answers in milliseconds; one that does not is not known.
const SYSTEMD_ANSWER: Duration = Duration::from_secs(5);

/// Where the facts are read from: the machine's files and systemd, or a
/// test's fixtures.
pub struct Sources {
    /// The kernel's host name: `/proc/sys/kernel/hostname`.
    pub hostname: PathBuf,
    /// `/etc/hosts`.
    pub hosts: PathBuf,
    /// The os-release files, the first that can be read wins:
    /// `/etc/os-release`, `/usr/lib/os-release`.
    pub os_release: Vec<PathBuf>,
    /// `/proc/sys/kernel/osrelease`.
    pub kernel_release: PathBuf,
    /// `/sys/devices/system/cpu/online`.
    pub cpus_online: PathBuf,
    /// `/proc/meminfo`.
    pub meminfo: PathBuf,
    /// The kernel's machine (`x86_64`); `None`: the build's target.
    pub machine: Option<String>,
    /// Asks systemd for its version (`252.22-1~deb12u1`); `None`: no answer.
    pub systemd_version: Box<dyn Fn() -> Option<String> + Send + Sync>,
}

impl Sources {
    /// This machine: its files, its kernel, its systemd.
    pub fn system() -> Self {
        Self {
            machine: kernel_machine(),
            systemd_version: Box::new(|| crate::provider::systemd_version(SYSTEMD_ANSWER)),
            ..Self::under(Path::new("/"))
        }
    }

    /// The same files below `root` (a test's directory: `root/etc/hosts`),
    /// no kernel machine (the build's target is taken) and no systemd.
    pub fn under(root: &Path) -> Self {
        Self {
            hostname: root.join("proc/sys/kernel/hostname"),
            hosts: root.join("etc/hosts"),
            os_release: vec![root.join("etc/os-release"), root.join("usr/lib/os-release")],
            kernel_release: root.join("proc/sys/kernel/osrelease"),
            cpus_online: root.join("sys/devices/system/cpu/online"),
            meminfo: root.join("proc/meminfo"),
            machine: None,
            systemd_version: Box::new(|| None),
        }
    }
}

/// Every gathered fact, in [`GATHERED`]'s order, each read once.
pub(super) fn gathered(sources: &Sources) -> Vec<(String, String)> {
    let hostname = read(&sources.hostname)
        .map(|h| h.trim().to_owned())
        .filter(|h| h != "(none)")
        .unwrap_or_default();
    let os = sources
        .os_release
        .iter()
        .find_map(|path| read(path))
        .map(|text| parse::os_release(&text))
        .unwrap_or_default();
    let os_value = |key: &str| os.get(key).cloned().unwrap_or_default();
    GATHERED
        .iter()
        .map(|&name| {
            let value = match name {
                HOSTNAME => hostname.clone(),
                FQDN => read(&sources.hosts)
                    .and_then(|hosts| parse::fqdn_from_hosts(&hosts, &hostname))
                    .unwrap_or_else(|| hostname.clone()),
                OS_ID => os_value("ID"),
                OS_VERSION_ID => os_value("VERSION_ID"),
                OS_VERSION_CODENAME => os_value("VERSION_CODENAME"),
                ARCH => {
                    parse::debian_arch(sources.machine.as_deref().unwrap_or(std::env::consts::ARCH))
                }
                KERNEL_RELEASE => read(&sources.kernel_release)
                    .map(|r| r.trim().to_owned())
                    .unwrap_or_default(),
                CPUS => cpus(&sources.cpus_online).to_string(),
                MEMORY_MIB => read(&sources.meminfo)
                    .and_then(|m| parse::memory_mib(&m))
                    .map(|mib| mib.to_string())
                    .unwrap_or_default(),
                SYSTEMD_VERSION => (sources.systemd_version)()
                    .and_then(|v| parse::first_number(&v))
                    .unwrap_or_default(),
                HOST_VERSION => env!("CARGO_PKG_VERSION").to_owned(),
                // A name added to the contract's list but not here: not
                // known (a test gathers every one).
                _ => String::new(),
            };
            let value = if value.len() > MAX_BYTES {
                String::new()
            } else {
                value
            };
            (name.to_owned(), value)
        })
        .collect()
}

/// The CPUs online, else those this process may run on; at least 1.
fn cpus(online: &Path) -> usize {
    read(online)
        .and_then(|list| parse::cpu_count(&list))
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The text of `path`, at most [`MAX_FILE`] bytes of it; `None` when it
/// cannot be read.
fn read(path: &Path) -> Option<String> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(MAX_FILE)
        .read_to_end(&mut bytes)
        .ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// What the kernel calls the machine (`uname -m`): `uname(2)` answers on
/// every Linux (`/proc/sys/kernel/arch` only since 6.1).
fn kernel_machine() -> Option<String> {
    // SAFETY: utsname is plain C arrays, for which all zeroes is valid.
    let mut names: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `names` is a valid, writable utsname for the call's duration.
    if unsafe { libc::uname(&mut names) } != 0 {
        return None;
    }
    let machine: Vec<u8> = names
        .machine
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c.to_ne_bytes()[0])
        .collect();
    String::from_utf8(machine).ok().filter(|m| !m.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes `text` at `relative` below `root`.
    fn put(root: &Path, relative: &str, text: &str) {
        let path = root.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// A machine with every source there.
    fn machine(root: &Path) -> Sources {
        put(root, "proc/sys/kernel/hostname", "web1\n");
        put(
            root,
            "etc/hosts",
            "127.0.0.1 localhost\n127.0.1.1 web1.example.com web1\n",
        );
        put(
            root,
            "etc/os-release",
            "ID=debian\nVERSION_ID=\"12\"\nVERSION_CODENAME=bookworm\n",
        );
        put(root, "proc/sys/kernel/osrelease", "6.1.0-18-amd64\n");
        put(root, "sys/devices/system/cpu/online", "0-3,8\n");
        put(root, "proc/meminfo", "MemTotal:        4194304 kB\n");
        Sources {
            machine: Some("aarch64".into()),
            systemd_version: Box::new(|| Some("252.22-1~deb12u1".into())),
            ..Sources::under(root)
        }
    }

    fn facts(sources: &Sources) -> std::collections::BTreeMap<String, String> {
        gathered(sources).into_iter().collect()
    }

    #[test]
    fn every_gathered_fact_is_read_from_its_source() {
        let dir = tempfile::tempdir().unwrap();
        let gathered = gathered(&machine(dir.path()));
        let expected = [
            ("hostname", "web1"),
            ("fqdn", "web1.example.com"),
            ("os.id", "debian"),
            ("os.version_id", "12"),
            ("os.version_codename", "bookworm"),
            ("arch", "arm64"),
            ("kernel.release", "6.1.0-18-amd64"),
            ("cpus", "5"),
            ("memory_mib", "4096"),
            ("systemd.version", "252"),
            ("host.version", env!("CARGO_PKG_VERSION")),
        ];
        let got: Vec<(&str, &str)> = gathered
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        assert_eq!(got, expected);
        assert_eq!(
            got.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
            GATHERED,
            "in the contract's order"
        );
    }

    #[test]
    fn os_release_falls_back_to_usr_lib() {
        let dir = tempfile::tempdir().unwrap();
        let sources = machine(dir.path());
        std::fs::remove_file(dir.path().join("etc/os-release")).unwrap();
        put(
            dir.path(),
            "usr/lib/os-release",
            "ID='ubuntu'\nVERSION_ID=\"24.04\"\n",
        );
        let facts = facts(&sources);
        assert_eq!(facts["os.id"], "ubuntu");
        assert_eq!(facts["os.version_id"], "24.04");
        assert_eq!(facts["os.version_codename"], "", "a key missing is empty");
        // /etc wins when both are there.
        put(dir.path(), "etc/os-release", "ID=debian\n");
        assert_eq!(self::facts(&sources)["os.id"], "debian");
    }

    #[test]
    fn what_cannot_be_read_is_empty_and_every_fact_is_still_there() {
        let dir = tempfile::tempdir().unwrap();
        let facts = facts(&Sources::under(dir.path()));
        assert_eq!(facts.len(), GATHERED.len());
        for name in [
            "hostname",
            "fqdn",
            "os.id",
            "os.version_id",
            "os.version_codename",
            "kernel.release",
            "memory_mib",
            "systemd.version",
        ] {
            assert_eq!(facts[name], "", "{name}");
        }
        // The fallbacks: the build's target, the CPUs this process may use.
        assert!(!facts["arch"].is_empty());
        assert!(facts["cpus"].parse::<usize>().unwrap() >= 1);
    }

    #[test]
    fn the_fqdn_is_the_host_name_without_a_hosts_line_for_it() {
        let dir = tempfile::tempdir().unwrap();
        let sources = machine(dir.path());
        put(dir.path(), "etc/hosts", "127.0.0.1 localhost\n");
        assert_eq!(facts(&sources)["fqdn"], "web1");
        std::fs::remove_file(dir.path().join("etc/hosts")).unwrap();
        assert_eq!(facts(&sources)["fqdn"], "web1");
        // A kernel whose name was never set says "(none)": not known.
        put(dir.path(), "proc/sys/kernel/hostname", "(none)\n");
        let facts = facts(&sources);
        assert_eq!(
            (facts["hostname"].as_str(), facts["fqdn"].as_str()),
            ("", "")
        );
    }

    #[test]
    fn a_value_too_long_or_a_cpu_list_unread_is_not_guessed() {
        let dir = tempfile::tempdir().unwrap();
        let sources = machine(dir.path());
        put(
            dir.path(),
            "etc/os-release",
            &format!("ID=debian\nVERSION_CODENAME={}\n", "x".repeat(300)),
        );
        put(dir.path(), "sys/devices/system/cpu/online", "garbage\n");
        let facts = facts(&sources);
        assert_eq!(facts["os.version_codename"], "");
        assert_eq!(facts["os.id"], "debian");
        assert_eq!(
            facts["cpus"],
            std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .to_string()
        );
    }

    #[test]
    fn no_answer_from_systemd_is_an_empty_version() {
        let dir = tempfile::tempdir().unwrap();
        let sources = Sources {
            systemd_version: Box::new(|| Some("unknown".into())),
            ..machine(dir.path())
        };
        assert_eq!(facts(&sources)["systemd.version"], "");
    }

    #[test]
    fn this_machine_has_a_kernel_machine_name() {
        let machine = kernel_machine().expect("uname answers");
        assert!(machine.is_ascii() && !machine.is_empty(), "{machine:?}");
    }
}
