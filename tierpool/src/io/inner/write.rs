//! The write loop of the pooled writers.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::AsyncWrite;

/// Writes `bytes[*written..]` to `io`, advancing `written` as it goes: `Ready(Ok)` once all
/// of it is written. A writer that takes nothing is a `WriteZero` error.
pub(crate) fn poll_write_from<W: AsyncWrite + Unpin + ?Sized>(
    cx: &mut Context<'_>,
    io: &mut W,
    bytes: &[u8],
    written: &mut usize,
) -> Poll<io::Result<()>> {
    while *written < bytes.len() {
        let n = ready!(Pin::new(&mut *io).poll_write(cx, &bytes[*written..]))?;
        if n == 0 {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "failed to write the buffered data",
            )));
        }
        *written += n;
    }
    Poll::Ready(Ok(()))
}
