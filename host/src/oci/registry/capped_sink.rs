//! A blob's bytes, capped at what its manifest declared.

use std::pin::Pin;
use std::task::{Context, Poll};

/// Collects a blob, refusing to hold more than its manifest declared: a
/// registry that sends more is not trusted with memory.
pub(super) struct CappedSink {
    pub(super) bytes: Vec<u8>,
    max: u64,
    pub(super) overflowed: bool,
}

impl CappedSink {
    pub(super) fn new(max: u64) -> Self {
        Self {
            bytes: Vec::with_capacity(usize::try_from(max.min(1 << 20)).unwrap_or(0)),
            max,
            overflowed: false,
        }
    }
}

impl tokio::io::AsyncWrite for CappedSink {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        if (this.bytes.len() + buf.len()) as u64 > this.max {
            this.overflowed = true;
            return Poll::Ready(Err(std::io::Error::other(format!(
                "the registry sent more than the {} bytes declared",
                this.max
            ))));
        }
        this.bytes.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
