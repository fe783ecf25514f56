//! The names of the facts the host gathers about its machine and gives
//! every policy, in the order it gives them. Both sides name a fact through
//! these constants, so a policy asking for `os.version_id` and the host
//! answering it cannot disagree on the spelling.
//!
//! Every gathered fact is always present; a value the host cannot tell is
//! the empty string (never a guess). The operator's labels (host.toml's
//! `[labels]`) follow the gathered facts, sorted by name; no label may take
//! one of these names.

/// The kernel's host name (`/proc/sys/kernel/hostname`).
pub const HOSTNAME: &str = "hostname";
/// The fully qualified name, from local resolution only (`/etc/hosts`),
/// never DNS; the host name when it has none.
pub const FQDN: &str = "fqdn";
/// os-release's `ID` (`debian`).
pub const OS_ID: &str = "os.id";
/// os-release's `VERSION_ID` (`12`).
pub const OS_VERSION_ID: &str = "os.version_id";
/// os-release's `VERSION_CODENAME` (`bookworm`).
pub const OS_VERSION_CODENAME: &str = "os.version_codename";
/// The machine's architecture as Debian names it (`amd64`, `arm64`).
pub const ARCH: &str = "arch";
/// The running kernel's release (`6.1.0-18-amd64`).
pub const KERNEL_RELEASE: &str = "kernel.release";
/// The logical CPUs online (`4`).
pub const CPUS: &str = "cpus";
/// The memory the kernel manages, in MiB (`MemTotal`).
pub const MEMORY_MIB: &str = "memory_mib";
/// The running systemd's version number (`252`).
pub const SYSTEMD_VERSION: &str = "systemd.version";
/// The policy host's own version (`0.1.0`).
pub const HOST_VERSION: &str = "host.version";

/// Every gathered fact, in the order the host gives them.
pub const GATHERED: [&str; 11] = [
    HOSTNAME,
    FQDN,
    OS_ID,
    OS_VERSION_ID,
    OS_VERSION_CODENAME,
    ARCH,
    KERNEL_RELEASE,
    CPUS,
    MEMORY_MIB,
    SYSTEMD_VERSION,
    HOST_VERSION,
];

/// True when `name` is one of the gathered facts' names.
pub fn is_gathered(name: &str) -> bool {
    GATHERED.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gathered_names_are_distinct() {
        for (i, a) in GATHERED.iter().enumerate() {
            assert!(!GATHERED[i + 1..].contains(a), "{a} twice");
        }
        assert!(is_gathered("os.id"));
        assert!(!is_gathered("role"));
    }
}
