//! The process's one tokio runtime for its own I/O: the system bus (the
//! run's connection and the watch's follower) and registries run on it.
//! Built at its first use, never again. (A policy's WASI calls run on
//! wasmtime-wasi's own runtime, which it builds when a guest first needs it.)
//!
//! It is a multi-thread runtime with one worker, not a current-thread one,
//! because several threads use it at once (a run asking systemd while the
//! watch follows units' signals) and its tasks must move while nobody
//! waits on them: zbus reads each connection's socket in a task of its
//! own, and the watch's follower is a task too. On a current-thread
//! runtime those run only inside some thread's `block_on`, and a follower
//! blocking on it would hold the runtime from every other caller; here the
//! worker drives tasks, I/O and timers, and any thread may
//! [`Handle::block_on`] a future of its own beside them. One worker is
//! enough: everything on it waits on sockets and timers, none computes.
//!
//! Never call `block_on` from a task on this runtime (tokio panics): a
//! task awaits instead.

use std::sync::LazyLock;

use tokio::runtime::{Handle, Runtime};

static RUNTIME: LazyLock<Result<Runtime, String>> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("policy-host-io")
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
});

/// The runtime, built at the first call; the error says why it could not
/// be (the same at every call).
pub fn handle() -> std::io::Result<Handle> {
    match &*RUNTIME {
        Ok(runtime) => Ok(runtime.handle().clone()),
        Err(why) => Err(std::io::Error::other(format!("no tokio runtime: {why}"))),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_runtime_answers_every_thread() {
        let handle = super::handle().unwrap();
        let other = std::thread::spawn(|| super::handle().unwrap().id())
            .join()
            .unwrap();
        assert_eq!(handle.id(), other);
        let slept = handle.block_on(async {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            tokio::spawn(async { 7 }).await.unwrap()
        });
        assert_eq!(slept, 7);
    }
}
