//! Peak resident memory of the host at the largest N.

use super::*;

impl Bench {
    /// Peak resident memory of the host at the largest N: GNU time's maximum
    /// RSS from the timed runs (the host or its largest child, whichever is
    /// larger), and the host's own `VmHWM`, sampled every millisecond in
    /// separate no-op runs (converging runs at this size take minutes).
    pub(super) fn memory(&self, scale: &Scale, settings: &Path) -> anyhow::Result<Memory> {
        let n = scale.n;
        step(&format!("Peak memory at N = {n}"));
        let rss =
            |pair: &Pair| -> Vec<u64> { pair.host.iter().filter_map(|r| r.maxrss_kb).collect() };
        let mut memory = Memory {
            n,
            noop_time_kb: rss(&scale.noop),
            converge_time_kb: rss(&scale.converge),
            ..Memory::default()
        };
        let host = self.host_argv(&self.manifest_policy, Some(settings), WARM_CACHE);
        for rep in 0..self.plan.memory_reps {
            let sampled = self.measure(&Spec {
                argv: host.clone(),
                poll_hwm: true,
                ..Spec::default()
            })?;
            ensure!(
                sampled.code == Some(0),
                "host run failed: {}",
                sampled.stderr.trim()
            );
            let hwm = sampled.vmhwm_kb.unwrap_or(0);
            memory.noop_hwm_kb.push(hwm);
            progress(&format!(
                "memory {}: no-op: sampled VmHWM {hwm} KiB",
                rep + 1
            ));
        }
        Ok(memory)
    }
}
