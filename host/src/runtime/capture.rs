//! Bounded capture of a guest's stdout and stderr.
//!
//! wasmtime-wasi's `MemoryOutputPipe` traps the guest when its buffer is full;
//! a policy that logs too much should instead lose the excess, with a marker,
//! and keep running. Both streams share one buffer so the log keeps the order
//! in which the guest wrote.

use std::sync::{Arc, Mutex};

use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// Appended to the log when output was dropped.
pub const TRUNCATION_MARKER: &str = "\n[policy output truncated: log limit reached]\n";

#[derive(Debug, Default)]
struct Buffer {
    bytes: Vec<u8>,
    truncated: bool,
}

/// The shared log of one guest; clone it to give both streams the same buffer.
#[derive(Debug, Clone)]
pub struct GuestLog {
    buffer: Arc<Mutex<Buffer>>,
    capacity: usize,
}

impl GuestLog {
    pub fn new(capacity: usize) -> Self {
        Self {
            buffer: Arc::default(),
            capacity,
        }
    }

    fn append(&self, bytes: &[u8]) {
        let mut buffer = self.buffer.lock().unwrap_or_else(|p| p.into_inner());
        let room = self.capacity.saturating_sub(buffer.bytes.len());
        if bytes.len() > room {
            buffer.truncated = true;
        }
        buffer
            .bytes
            .extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    /// The captured text, with the truncation marker when output was dropped.
    pub fn contents(&self) -> String {
        let buffer = self.buffer.lock().unwrap_or_else(|p| p.into_inner());
        let mut text = String::from_utf8_lossy(&buffer.bytes).into_owned();
        if buffer.truncated {
            text.push_str(TRUNCATION_MARKER);
        }
        text
    }

    pub fn truncated(&self) -> bool {
        self.buffer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .truncated
    }
}

impl IsTerminal for GuestLog {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestLog {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for GuestLog {
    async fn ready(&mut self) {}
}

impl OutputStream for GuestLog {
    fn write(&mut self, bytes: bytes::Bytes) -> StreamResult<()> {
        self.append(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        // Always accept: excess is dropped in `append`, never blocks or traps.
        Ok(64 * 1024)
    }
}

impl tokio::io::AsyncWrite for GuestLog {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.append(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excess_output_is_dropped_with_a_marker() {
        let log = GuestLog::new(5);
        log.append(b"abc");
        log.append(b"defg");
        assert!(log.truncated());
        assert_eq!(log.contents(), format!("abcde{TRUNCATION_MARKER}"));
    }

    #[test]
    fn output_within_capacity_is_kept_whole() {
        let log = GuestLog::new(100);
        log.append(b"hello ");
        log.clone().append(b"world");
        assert_eq!(log.contents(), "hello world");
        assert!(!log.truncated());
    }
}
