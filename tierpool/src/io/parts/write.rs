//! [`poll_write_all`]: the write loop of the pooled writers.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::AsyncWrite;

/// Writes `bytes[*written..]` to `io`, advancing `*written` as it goes: `Ready(Ok(()))` once
/// all of `bytes` is written, `Pending` (with `*written` counting what went out) while `io`
/// takes no more. The loop of every pooled writer here, and what a protocol crate's writer
/// polls to send the buffer it holds, then gives back: a writer that keeps `written` beside
/// its buffer can be polled again after `Pending`, from any `poll_*` function.
///
/// # Errors
/// `io`'s; a writer that takes nothing (`Ok(0)`) is an [`io::ErrorKind::WriteZero`] error.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// use std::future::poll_fn;
///
/// let pool = tierpool::BufferPool::new();
/// let mut buf = pool.get(64);
/// buf.extend_from_slice(b"hello");
/// let mut out = Vec::new();
/// let mut written = 0;
/// poll_fn(|cx| tierpool::io::poll_write_all(cx, &mut out, &buf, &mut written)).await?;
/// assert_eq!((&out[..], written), (&b"hello"[..], 5));
/// # Ok(()) }
/// ```
pub fn poll_write_all<W: AsyncWrite + Unpin + ?Sized>(
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
