//! A description of the machine the numbers were measured on.

use std::fs;
use std::process::Command;

use super::tools::version_of;

#[derive(Debug, Clone)]
pub(super) struct Machine {
    pub date: String,
    pub cpus: usize,
    pub cpu_model: String,
    pub memory: String,
    pub kernel: String,
    pub os: String,
    pub systemd: String,
    pub rustc: String,
    pub host: String,
    pub commit: String,
    pub load_at_start: String,
}

impl Machine {
    pub(super) fn describe(host_binary: &std::path::Path) -> Machine {
        let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .map(|v| v.trim_start_matches([' ', '\t', ':']).trim().to_owned())
            .unwrap_or_else(|| "unknown".into());
        let memory = fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines()
                    .find_map(|l| l.strip_prefix("MemTotal:"))
                    .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            })
            .map(|kb| format!("{:.1} GiB", kb / 1024.0 / 1024.0))
            .unwrap_or_else(|| "unknown".into());
        let os = fs::read_to_string("/etc/os-release")
            .ok()
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                    .map(|v| v.trim_matches('"').to_owned())
            })
            .unwrap_or_else(|| "unknown".into());
        let dirty = Command::new("git")
            .args(["status", "--porcelain", "--untracked-files=no"])
            .current_dir(policy_host_e2e::build::workspace_root())
            .output()
            .map(|o| !o.stdout.is_empty())
            .unwrap_or(false);
        let commit = Command::new("git")
            .args(["rev-parse", "--short", "HEAD"])
            .current_dir(policy_host_e2e::build::workspace_root())
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .filter(|c| !c.is_empty())
            .map(|c| {
                if dirty {
                    format!("{c} + uncommitted changes")
                } else {
                    c
                }
            })
            .unwrap_or_else(|| "unknown".into());
        Machine {
            date: version_of("date", &["-u", "+%Y-%m-%d %H:%M UTC"]).unwrap_or_default(),
            cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            cpu_model,
            memory,
            kernel: fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|k| k.trim().to_owned())
                .unwrap_or_else(|_| "unknown".into()),
            os,
            systemd: version_of("systemctl", &["--version"]).unwrap_or_else(|| "unknown".into()),
            rustc: version_of("rustc", &["--version"]).unwrap_or_else(|| "unknown".into()),
            host: version_of(&host_binary.to_string_lossy(), &["--version"])
                .map(|v| format!("{v} (release build)"))
                .unwrap_or_else(|| "unknown".into()),
            commit,
            load_at_start: load_average(),
        }
    }
}

/// `/proc/loadavg`'s three averages.
pub(super) fn load_average() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}
