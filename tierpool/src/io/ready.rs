//! Readiness-first reads on tokio (feature `tokio`): a connection that waits for data holds no
//! pooled buffer.
//!
//! The usual receive loop takes a buffer per connection and then waits in `read`, so 10,000
//! mostly idle connections hold 10,000 buffers. On tokio (epoll) the same density needs no
//! kernel feature: wait until the socket is readable, and only then take a buffer and read
//! what is there without blocking. [`read_ready`] does that for one read, and
//! [`read_ready_exact`] for a message of known size (once its first bytes arrive, the buffer
//! is the message's and stays until it is complete). Spurious readiness (tokio's readiness is
//! a hint: the read may still find nothing) gives the buffer straight back to this thread's
//! cache and waits again.
//!
//! With the `holders` feature, buffers taken here are tracked at this module's line, not the
//! caller's (an `async fn` cannot be `#[track_caller]`), as for the frame reader.
//!
//! [`FrameReader`](crate::io::frame::FrameReader) already works this way between frames: it reads
//! each header into a 16-byte array on its own stack and takes a pooled buffer only once a
//! header has said how long the payload is, so a connection idle between frames holds no
//! pooled buffer either.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! use tokio::io::AsyncWriteExt;
//!
//! let pool = tierpool::BufferPool::new();
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let mut client = tokio::net::TcpStream::connect(listener.local_addr()?).await?;
//! let (server, _) = listener.accept().await?;
//! client.write_all(b"ping").await?;
//! // Waits for readability holding nothing; then one pooled buffer, filled without blocking.
//! let mut server = server;
//! let buf = tierpool::io::read_ready(&mut server, &pool, 16 << 10).await?.expect("data");
//! assert_eq!(&buf[..], b"ping");
//! drop(client);
//! drop(buf);
//! assert!(tierpool::io::read_ready(&mut server, &pool, 16 << 10).await?.is_none()); // end of stream
//! # Ok(()) }
//! ```

use std::future::Future;
use std::io;

use std::future::poll_fn;
use std::pin::Pin;
use std::task::Poll;

use bytes::BufMut;
use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};

use crate::io::parts::{Core, VecStore};
use crate::{BufferPool, PooledBuf};

/// A socket that can wait until it is readable without reading: tokio's TCP and Unix streams
/// and their read halves.
pub trait ReadReady {
    /// Waits until the socket may be readable (possibly spuriously).
    fn readable(&self) -> impl Future<Output = io::Result<()>> + Send + '_;
}

macro_rules! read_ready_for {
    ($($(#[$m:meta])* $t:ty),* $(,)?) => {$(
        $(#[$m])*
        impl ReadReady for $t {
            fn readable(&self) -> impl Future<Output = io::Result<()>> + Send + '_ {
                <$t>::readable(self)
            }
        }
    )*};
}

read_ready_for!(
    tokio::net::TcpStream,
    tokio::net::tcp::OwnedReadHalf,
    tokio::net::tcp::ReadHalf<'_>,
    #[cfg(unix)]
    tokio::net::UnixStream,
    #[cfg(unix)]
    tokio::net::unix::OwnedReadHalf,
    #[cfg(unix)]
    tokio::net::unix::ReadHalf<'_>,
);

/// Waits until `io` is readable, then takes a buffer for `n` bytes from `pool` and reads what
/// is there into it, at most `n` bytes: `Some(buffer)` with 1 to `n` bytes, or `None` at the
/// end of the stream. While it waits it holds no buffer. With a budget on bytes in use the
/// buffer is taken with [`BufferPool::acquire`] (the task waits for room, not the thread).
///
/// The read is the socket's `poll_read`, which, when it finds less than it was offered,
/// tells tokio the socket is drained: the next call waits for readiness without a system
/// call (one receive per message that arrives in one piece).
///
/// The buffer is `n` bytes whatever arrived: to gather short reads into a
/// [`PooledChain`](crate::PooledChain) without holding a buffer per read, append them with
/// [`push_compact`](crate::PooledChain::push_compact); to parse a byte stream, a
/// [`ReadBuffer`](crate::io::ReadBuffer) keeps what arrived in one contiguous buffer that
/// follows traffic.
///
/// # Errors
/// The socket's error, the pool's [`AllocError`](crate::AllocError) (kind
/// [`io::ErrorKind::OutOfMemory`]: a size the pool cannot serve), or
/// [`io::ErrorKind::InvalidInput`] for `n == 0` (a read that could never return data).
/// Cancel safe: dropping the future loses no data (a read either completed, and its buffer
/// is returned, or did not happen).
pub async fn read_ready<R>(io: &mut R, pool: &BufferPool, n: usize) -> io::Result<Option<PooledBuf>>
where
    R: ReadReady + AsyncRead + Unpin,
{
    if n == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "read_ready of 0 bytes: it could never return data",
        ));
    }
    loop {
        io.readable().await?;
        let mut buf = take(pool, n).await?;
        let got = poll_fn(|cx| {
            let mut rb = ReadBuf::uninit(&mut buf.spare_capacity_mut()[..n]);
            match Pin::new(&mut *io).poll_read(cx, &mut rb) {
                Poll::Pending => Poll::Ready(None),
                Poll::Ready(r) => Poll::Ready(Some(r.map(|()| rb.filled().len()))),
            }
        })
        .await;
        match got {
            // Spurious readiness: the buffer goes back (to this thread's cache), and we wait.
            None => continue,
            Some(Ok(0)) => return Ok(None),
            Some(Ok(k)) => {
                // SAFETY: `poll_read` initialized the first `k` bytes of the spare capacity.
                unsafe { buf.set_len(k) };
                return Ok(Some(buf));
            }
            Some(Err(e)) => return Err(e),
        }
    }
}

/// Waits until `io` is readable, then reads a message of exactly `n` bytes into one pooled
/// buffer: `Some(buffer)` with `len() == n`, or `None` if the stream ended before the
/// message's first byte. Until that byte arrives it holds no buffer; from then on it holds a
/// buffer that follows what arrived, as a [`ReadBuffer`](crate::io::ReadBuffer)'s does: the
/// first read offers the message's length (up to 256 KiB), and while it waits for the rest it
/// holds at most twice what arrived (or the pool's smallest tier), so a peer that sends the
/// first bytes of a large message and stalls does not pin the whole message's size.
///
/// A message of 0 bytes is complete without reading: `Some` of an empty buffer at once.
///
/// # Errors
/// As [`read_ready`] (but not for `n == 0`), and [`io::ErrorKind::UnexpectedEof`] if the
/// stream ends within the message. Not cancel safe once the message has begun (its bytes read
/// so far are lost with the future).
pub async fn read_ready_exact<R>(
    io: &mut R,
    pool: &BufferPool,
    n: usize,
) -> io::Result<Option<PooledBuf>>
where
    R: ReadReady + tokio::io::AsyncRead + Unpin,
{
    if n == 0 {
        return Ok(Some(take(pool, 0).await?));
    }
    io.readable().await?;
    let mut reading = Core::<VecStore>::with_first_offer(pool.clone(), n);
    match reading.read_chunk(io, n).await? {
        (None, _) => Ok(None),
        (Some(buf), true) => Ok(Some(buf)),
        (Some(buf), false) => {
            let missing = n - buf.len();
            Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the stream ended {missing} bytes before the end of a {n}-byte message"),
            ))
        }
    }
}

/// Reads from `io` into `buf` until it holds `want` bytes (never more): `true` once it does,
/// `false` if the stream ended first (`buf` then holds what arrived).
pub(crate) async fn fill<R>(io: &mut R, buf: &mut PooledBuf, want: usize) -> io::Result<bool>
where
    R: tokio::io::AsyncRead + Unpin + ?Sized,
{
    while buf.len() < want {
        let room = want - buf.len();
        if io.read_buf(&mut (&mut *buf).limit(room)).await? == 0 {
            return Ok(false);
        }
    }
    Ok(true)
}

/// A buffer for `n` bytes, waiting for room under a budget.
async fn take(pool: &BufferPool, n: usize) -> io::Result<PooledBuf> {
    pool.acquire(n)
        .exact()
        .await
        .map_err(|e| io::Error::new(io::ErrorKind::OutOfMemory, e))
}
