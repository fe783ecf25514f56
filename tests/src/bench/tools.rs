//! What the host is compared with: the shell scripts, the Ansible playbook
//! and the Puppet manifest of `bench/` (compiled in, so the bench runs from
//! any directory), and the installation of Ansible, Puppet and GNU time on
//! this machine (the sandbox's root is an overlay of `/`, so what is
//! installed here before it boots is there inside too).

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context};

pub(super) const NOOP_SCRIPT: &str = include_str!("../../../bench/systemctl-noop.sh");
pub(super) const CONVERGE_SCRIPT: &str = include_str!("../../../bench/systemctl-converge.sh");
pub(super) const WHAT_IF_BATCHED_NOOP: &str =
    include_str!("../../../bench/what-if-batched-noop.sh");
pub(super) const WHAT_IF_CONVERGE_NO_RELOAD: &str =
    include_str!("../../../bench/what-if-converge-no-reload.sh");
pub(super) const WHAT_IF_BATCHED_CONVERGE: &str =
    include_str!("../../../bench/what-if-batched-converge.sh");
const PLAYBOOK: &str = include_str!("../../../bench/ansible-playbook.yml");
const PUPPET_MANIFEST: &str = include_str!("../../../bench/puppet-manifest.pp");

/// The playbook with Ansible's systemd module name filled in.
pub(super) fn playbook(module: &str) -> String {
    PLAYBOOK.replace("@MODULE@", module)
}

/// `{"units": [...]}`, the playbook's variables.
pub(super) fn ansible_vars(units: &[String]) -> String {
    serde_json::json!({ "units": units }).to_string()
}

/// The Puppet manifest for `units`.
pub(super) fn puppet_manifest(units: &[String]) -> String {
    let quoted: Vec<String> = units.iter().map(|u| format!("'{u}'")).collect();
    PUPPET_MANIFEST.replace("@UNITS@", &quoted.join(", "))
}

/// The first line a command prints (its version), or `None` when it cannot run.
pub(super) fn version_of(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().next().map(|l| l.trim().to_owned())
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// Installs with apt-get, saying so, the Debian packages whose program is
/// missing. `wanted` is (program, package).
pub(super) fn ensure_installed(wanted: &[(&str, &str)]) -> anyhow::Result<()> {
    let missing: Vec<&str> = wanted
        .iter()
        .filter(|(program, _)| !on_path(program) && !Path::new(program).is_file())
        .map(|(_, package)| *package)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    eprintln!(
        "bench: installing on this machine: apt-get install -y {}",
        missing.join(" ")
    );
    let status = Command::new("apt-get")
        .args(["install", "-y", "--no-install-recommends"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()
        .context("running apt-get")?;
    if !status.success() {
        eprintln!("bench: apt-get install failed ({status}); trying apt-get update first");
        let _ = Command::new("apt-get").arg("update").status();
        let status = Command::new("apt-get")
            .args(["install", "-y", "--no-install-recommends"])
            .args(&missing)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .context("running apt-get")?;
        if !status.success() {
            bail!("apt-get install -y {} failed ({status})", missing.join(" "));
        }
    }
    Ok(())
}

/// `ansible.builtin.systemd_service` (ansible-core 2.14 and later), else
/// `ansible.builtin.systemd`.
pub(super) fn ansible_systemd_module() -> &'static str {
    let new_enough = Command::new("ansible-doc")
        .args(["-t", "module", "--json", "ansible.builtin.systemd_service"])
        .output()
        .is_ok_and(|o| {
            o.status.success()
                && String::from_utf8_lossy(&o.stdout)
                    .contains("\"ansible.builtin.systemd_service\"")
        });
    if new_enough {
        "ansible.builtin.systemd_service"
    } else {
        "ansible.builtin.systemd"
    }
}
