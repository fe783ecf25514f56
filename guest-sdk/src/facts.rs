//! What the host tells a policy about the machine it runs on: the facts it
//! gathers (host name, operating system, architecture, CPUs, memory, the
//! versions of systemd and the host) and the labels its operator gave the
//! machine in host.toml (`role = "web"`). One signed policy can then serve a
//! whole fleet, each machine taking its part.
//!
//! ```
//! use guest_sdk::prelude::*;
//!
//! fn fleet(ctx: &Context) -> Result<Policy, PolicyError> {
//!     let facts = ctx.facts();
//!     let mut policy = Policy::new().service(Service::new("ssh").running());
//!     if facts.label("role") == Some("web") {
//!         // Debian 12 and 13 name the PHP service after its version.
//!         let php = if facts.os_version_id() == "12" { "php8.2-fpm" } else { "php8.4-fpm" };
//!         policy.add(Service::new(php).running().enable(true));
//!     }
//!     Ok(policy)
//! }
//!
//! // Natively, on each kind of machine:
//! let mut web12 = SimulatedSystem::new()
//!     .with_fact("role", "web")
//!     .with_unit("ssh", UnitState::running())
//!     .with_unit("php8.2-fpm", UnitState::stopped());
//! guest_sdk::run(fleet, &mut web12, &RunOptions::default()).assert_converged();
//! web12.assert_mutating_calls(&["start php8.2-fpm", "enable php8.2-fpm"]);
//!
//! let mut db = SimulatedSystem::new()
//!     .with_fact("role", "db")
//!     .with_unit("ssh", UnitState::running());
//! guest_sdk::run(fleet, &mut db, &RunOptions::default()).assert_converged();
//! db.assert_mutating_calls(&[]);
//! ```

pub use crate::contract::Fact;
pub use contract_words::facts::GATHERED;
use contract_words::facts::{
    ARCH, CPUS, FQDN, HOSTNAME, HOST_VERSION, KERNEL_RELEASE, MEMORY_MIB, OS_ID,
    OS_VERSION_CODENAME, OS_VERSION_ID, SYSTEMD_VERSION,
};

/// The facts of one run, as the host gave them: every gathered fact (empty
/// when the host could not tell), then the operator's labels.
#[derive(Debug, Clone, Copy, Default)]
pub struct Facts<'a> {
    list: &'a [Fact],
}

impl<'a> Facts<'a> {
    /// The facts in `list` (the run's, from [`crate::RunOptions`]).
    pub fn new(list: &'a [Fact]) -> Self {
        Self { list }
    }

    /// The value of the fact `name` (`os.id`, `role`), or `None` when the
    /// host gave no fact of that name.
    pub fn get(&self, name: &str) -> Option<&'a str> {
        self.list
            .iter()
            .rev()
            .find(|f| f.name == name)
            .map(|f| f.value.as_str())
    }

    /// Every fact given, in the host's order: what a policy passes on
    /// whole (the declaration engine gives them to a policy written in
    /// another language).
    pub fn as_slice(&self) -> &'a [Fact] {
        self.list
    }

    /// The names of every fact given, in the host's order.
    pub fn names(&self) -> impl Iterator<Item = &'a str> {
        self.list.iter().map(|f| f.name.as_str())
    }

    /// The operator's label `name` (host.toml `[labels]`): any fact that is
    /// not one the host gathers.
    pub fn label(&self, name: &str) -> Option<&'a str> {
        if GATHERED.contains(&name) {
            return None;
        }
        self.get(name)
    }

    /// The operator's labels, in the host's order (by name).
    pub fn labels(&self) -> impl Iterator<Item = (&'a str, &'a str)> {
        self.list
            .iter()
            .filter(|f| !GATHERED.contains(&f.name.as_str()))
            .map(|f| (f.name.as_str(), f.value.as_str()))
    }

    fn text(&self, name: &str) -> &'a str {
        self.get(name).unwrap_or("")
    }

    /// The kernel's host name.
    pub fn hostname(&self) -> &'a str {
        self.text(HOSTNAME)
    }

    /// The fully qualified name when the machine resolves it locally,
    /// else the host name.
    pub fn fqdn(&self) -> &'a str {
        self.text(FQDN)
    }

    /// os-release's `ID` (`debian`).
    pub fn os_id(&self) -> &'a str {
        self.text(OS_ID)
    }

    /// os-release's `VERSION_ID` (`12`; empty on Debian testing).
    pub fn os_version_id(&self) -> &'a str {
        self.text(OS_VERSION_ID)
    }

    /// os-release's `VERSION_CODENAME` (`bookworm`).
    pub fn os_version_codename(&self) -> &'a str {
        self.text(OS_VERSION_CODENAME)
    }

    /// The architecture by Debian's name (`amd64`, `arm64`).
    pub fn arch(&self) -> &'a str {
        self.text(ARCH)
    }

    /// The running kernel's release.
    pub fn kernel_release(&self) -> &'a str {
        self.text(KERNEL_RELEASE)
    }

    /// Online logical CPUs; `None` when the host could not tell.
    pub fn cpus(&self) -> Option<u32> {
        self.text(CPUS).parse().ok()
    }

    /// Total memory in MiB; `None` when the host could not tell.
    pub fn memory_mib(&self) -> Option<u64> {
        self.text(MEMORY_MIB).parse().ok()
    }

    /// systemd's version number (`252`); `None` when systemd did not say.
    pub fn systemd_version(&self) -> Option<u32> {
        self.text(SYSTEMD_VERSION).parse().ok()
    }

    /// The policy host's version.
    pub fn host_version(&self) -> &'a str {
        self.text(HOST_VERSION)
    }
}

/// A fact, for [`crate::RunOptions::with_fact`] and the simulated system.
pub(crate) fn fact(name: impl Into<String>, value: impl Into<String>) -> Fact {
    Fact {
        name: name.into(),
        value: value.into(),
    }
}

/// Sets `name` to `value` in `list`, in place when it is there.
pub(crate) fn set(list: &mut Vec<Fact>, name: impl Into<String>, value: impl Into<String>) {
    let name = name.into();
    match list.iter_mut().find(|f| f.name == name) {
        Some(existing) => existing.value = value.into(),
        None => list.push(fact(name, value)),
    }
}

/// The facts of the simulated machine before a test sets any: what a
/// Debian 12 host on amd64 would give, so that a policy reads every
/// gathered fact in native tests as it would on a machine.
pub(crate) fn simulated() -> Vec<Fact> {
    [
        (HOSTNAME, "sim"),
        (FQDN, "sim"),
        (OS_ID, "debian"),
        (OS_VERSION_ID, "12"),
        (OS_VERSION_CODENAME, "bookworm"),
        (ARCH, "amd64"),
        (KERNEL_RELEASE, "6.1.0-sim-amd64"),
        (CPUS, "2"),
        (MEMORY_MIB, "2048"),
        (SYSTEMD_VERSION, "252"),
        (HOST_VERSION, env!("CARGO_PKG_VERSION")),
    ]
    .into_iter()
    .map(|(name, value)| fact(name, value))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_helpers_read_the_hosts_words() {
        let mut list = simulated();
        set(&mut list, "role", "web");
        set(&mut list, CPUS, "16");
        set(&mut list, SYSTEMD_VERSION, "");
        let facts = Facts::new(&list);
        assert_eq!(facts.os_id(), "debian");
        assert_eq!(facts.cpus(), Some(16));
        assert_eq!(facts.memory_mib(), Some(2048));
        assert_eq!(facts.systemd_version(), None, "not told: not a number");
        assert_eq!(facts.label("role"), Some("web"));
        assert_eq!(facts.label("os.id"), None, "a gathered fact is no label");
        assert_eq!(facts.labels().collect::<Vec<_>>(), [("role", "web")]);
        assert_eq!(facts.get("nothing"), None);
        assert_eq!(facts.names().count(), GATHERED.len() + 1);
    }
}
