//! Length-prefixed frames over tokio I/O, read straight into pooled buffers (feature `tokio`).
//!
//! [`FrameReader`] reads a frame's header, checks the length against a maximum *before*
//! allocating anything, then reads the payload directly into a [`PooledBuf`] from its pool: no
//! intermediate buffer, no copy. [`FrameWriter`] writes frames (header and payload in one
//! vectored write where the transport supports it).
//!
//! The header format is pluggable ([`FrameFormat`]); [`Grpc`] is gRPC's: one flag byte and a
//! 4-byte big-endian payload length.
//!
//! # Hostile peers
//!
//! - A length above [`FrameReader::max_frame_size`] is [`FrameError::TooLarge`], returned
//!   before anything is allocated.
//! - A connection that closes mid-frame is [`FrameError::UnexpectedEof`], which says how many
//!   bytes were missing.
//! - A peer that claims a large frame and then trickles bytes does not get the claimed size
//!   allocated up front (gRPC-Go allocated the claimed length up front and had to revert it):
//!   the payload's buffer follows what arrived, as a [`ReadBuffer`](crate::io::ReadBuffer)'s
//!   does. Each read offers 8 KiB to 256 KiB (more after reads that filled their offer), the
//!   buffer grows geometrically, and before the reader waits for more it holds at most
//!   `max(2P, T0)` for the `P` bytes of the frame that arrived (`T0` the pool's smallest
//!   tier). A frame that arrives fast costs a copy per doubling of what arrived beyond the
//!   first read (a 1 MiB frame in 256 KiB reads: one 256 KiB copy).
//! - On every error path every buffer goes back to its pool (they are `PooledBuf`s, dropped).
//!
//! # Under a budget
//!
//! With a pool that has a budget on bytes in use
//! ([`Builder::max_in_use_bytes`](crate::Builder::max_in_use_bytes)), the reader waits for
//! room for a frame's whole payload ([`BufferPool::acquire`]) after reading its header and
//! before reading any of the payload. While it waits it reads nothing more from that
//! connection, so the peer's sends back up through TCP's flow control: many connections
//! sending large frames at once slow down instead of growing the heap past the budget. The
//! payload buffer is taken at its full length at once (the initial limit and the growth do not
//! apply: a reader that held part of a frame's budget while waiting for the rest could
//! deadlock with others doing the same), so a peer that claims a large frame and trickles it
//! holds that much of the budget, never more than `max_frame_size`. A frame larger than the
//! whole budget is [`FrameError::Alloc`] with [`AllocError::LargerThanBudget`].
//!
//! # Why there is no `tokio_util::codec` `Decoder`
//!
//! A `Decoder` is handed frames inside `Framed`'s own read buffer (a `BytesMut`); returning a
//! pooled buffer from it means copying every payload out of that buffer, which is exactly the
//! copy this module exists to avoid (and `Framed` keeps its own buffer growing besides). An
//! `Encoder` has the mirror problem: it must copy the payload into `Framed`'s write buffer. So
//! tierpool offers the reader and writer here instead; users of `Framed` lose nothing by
//! keeping `LengthDelimitedCodec`, which already does that copying well.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tierpool::io::frame::FrameError> {
//! use tierpool::io::frame::{FrameReader, FrameWriter};
//!
//! let pool = tierpool::BufferPool::new();
//! let (client, server) = tokio::io::duplex(64 * 1024);
//! let mut writer = FrameWriter::new(client);
//! writer.write_frame(0, b"hello").await?;
//! writer.flush().await?;
//! drop(writer); // closes the stream
//!
//! let mut reader = FrameReader::new(server, pool.clone());
//! let (flags, payload) = reader.read_frame().await?.expect("one frame");
//! assert_eq!((flags, &payload[..]), (0, &b"hello"[..]));
//! assert!(reader.read_frame().await?.is_none()); // clean end of stream
//! # Ok(()) }
//! ```

use std::fmt;
use std::io;

use bytes::{Buf, BufMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::io::parts::{Core, VecStore};
use crate::{AllocError, BufferPool, PooledBuf, PooledBytes, PooledChain};

/// The longest header a [`FrameFormat`] may have.
pub const MAX_HEADER_LEN: usize = 16;

/// Default [`FrameReader::max_frame_size`]: 4 MiB, gRPC's default receive limit.
pub const DEFAULT_MAX_FRAME_SIZE: usize = 4 << 20;

/// A frame header format: a fixed-length header carrying a flag byte and the payload length.
///
/// To adapt another protocol, implement this for a unit struct. A format whose header carries
/// more than a flag byte (a stream id, say) can put it in the payload instead, or extend this
/// trait in a fork: the reader only needs the payload length.
pub trait FrameFormat {
    /// Header length in bytes (at most [`MAX_HEADER_LEN`]).
    const HEADER_LEN: usize;

    /// Parses a header (`HEADER_LEN` bytes) into `(flags, payload length)`.
    ///
    /// # Errors
    /// [`FrameError::BadHeader`] if the header is not valid for this format.
    fn decode(&self, header: &[u8]) -> Result<(u8, u64), FrameError>;

    /// Writes the header for a payload of `len` bytes into `header` (`HEADER_LEN` bytes).
    ///
    /// # Errors
    /// [`FrameError::TooLarge`] if the format cannot express `len`.
    fn encode(&self, flags: u8, len: usize, header: &mut [u8]) -> Result<(), FrameError>;
}

/// gRPC's length-prefixed message header: 1 flag byte (compressed or not) and a 4-byte
/// big-endian payload length.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Grpc;

impl FrameFormat for Grpc {
    const HEADER_LEN: usize = 5;

    fn decode(&self, header: &[u8]) -> Result<(u8, u64), FrameError> {
        let mut h = header;
        let flags = h.get_u8();
        Ok((flags, u64::from(h.get_u32())))
    }

    fn encode(&self, flags: u8, len: usize, mut header: &mut [u8]) -> Result<(), FrameError> {
        let len32 = u32::try_from(len).map_err(|_| FrameError::TooLarge {
            len: len as u64,
            max: u32::MAX as usize,
        })?;
        header.put_u8(flags);
        header.put_u32(len32);
        Ok(())
    }
}

/// The part of a frame a stream ended in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FramePart {
    /// The header.
    Header,
    /// The payload.
    Payload,
}

/// Why a frame could not be read or written.
#[derive(Debug)]
#[non_exhaustive]
pub enum FrameError {
    /// The transport failed.
    Io(io::Error),
    /// The frame's length is above the maximum (checked before anything is allocated).
    TooLarge {
        /// The length the header claimed (or the payload had, when writing).
        len: u64,
        /// The maximum allowed.
        max: usize,
    },
    /// The stream ended inside a frame.
    UnexpectedEof {
        /// Where it ended.
        part: FramePart,
        /// Bytes that part should have had.
        expected: u64,
        /// Bytes of it that arrived.
        received: u64,
    },
    /// The header is invalid for the frame format.
    BadHeader(String),
    /// A buffer for the payload could not be allocated.
    Alloc(AllocError),
}

impl FrameError {
    /// For [`FrameError::UnexpectedEof`]: how many bytes were missing.
    pub fn missing(&self) -> Option<u64> {
        match self {
            FrameError::UnexpectedEof {
                expected, received, ..
            } => Some(expected - received),
            _ => None,
        }
    }
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::Io(e) => write!(f, "frame I/O failed: {e}"),
            FrameError::TooLarge { len, max } => {
                write!(f, "frame of {len} bytes exceeds the maximum of {max} bytes")
            }
            FrameError::UnexpectedEof {
                part,
                expected,
                received,
            } => write!(
                f,
                "stream ended {} bytes before the end of the frame {} ({received} of {expected} bytes received)",
                expected - received,
                match part {
                    FramePart::Header => "header",
                    FramePart::Payload => "payload",
                }
            ),
            FrameError::BadHeader(why) => write!(f, "invalid frame header: {why}"),
            FrameError::Alloc(e) => write!(f, "no buffer for the frame: {e}"),
        }
    }
}

impl std::error::Error for FrameError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FrameError::Io(e) => Some(e),
            FrameError::Alloc(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for FrameError {
    fn from(e: io::Error) -> Self {
        FrameError::Io(e)
    }
}

impl From<AllocError> for FrameError {
    fn from(e: AllocError) -> Self {
        FrameError::Alloc(e)
    }
}

impl From<FrameError> for io::Error {
    fn from(e: FrameError) -> Self {
        match e {
            FrameError::Io(e) => e,
            FrameError::UnexpectedEof { .. } => io::Error::new(io::ErrorKind::UnexpectedEof, e),
            other => io::Error::new(io::ErrorKind::InvalidData, other),
        }
    }
}

/// Reads length-prefixed frames from an [`AsyncRead`] into pooled buffers.
///
/// Each header is read with its own read call and each payload straight into its buffer, so a
/// frame costs at least two reads; wrap `R` in a `tokio::io::BufReader` if frames are tiny and
/// system calls dominate (payload bytes then pass through its buffer: one copy).
#[derive(Debug)]
pub struct FrameReader<R, F = Grpc> {
    io: R,
    pool: BufferPool,
    format: F,
    max_frame: usize,
    /// A payload being read (its read sizes carry over from frame to frame).
    payload: Core<VecStore>,
}

impl<R: AsyncRead + Unpin> FrameReader<R, Grpc> {
    /// A reader of gRPC-format frames from `io`, taking buffers from `pool`.
    pub fn new(io: R, pool: BufferPool) -> Self {
        FrameReader::with_format(io, pool, Grpc)
    }
}

impl<R: AsyncRead + Unpin, F: FrameFormat> FrameReader<R, F> {
    /// A reader of `format` frames.
    pub fn with_format(io: R, pool: BufferPool, format: F) -> Self {
        const { assert!(F::HEADER_LEN <= MAX_HEADER_LEN, "frame header too long") };
        FrameReader {
            io,
            payload: Core::new(pool.clone()),
            pool,
            format,
            max_frame: DEFAULT_MAX_FRAME_SIZE,
        }
    }

    /// Sets the largest payload accepted (default [`DEFAULT_MAX_FRAME_SIZE`]).
    pub fn max_frame_size(mut self, max: usize) -> Self {
        self.max_frame = max;
        self
    }

    /// The transport.
    pub fn get_ref(&self) -> &R {
        &self.io
    }

    /// The transport, mutably (reading from it directly desynchronizes the frames).
    pub fn get_mut(&mut self) -> &mut R {
        &mut self.io
    }

    /// The transport back.
    pub fn into_inner(self) -> R {
        self.io
    }

    /// Reads and checks a header: `(flags, payload length)`, or `None` at a clean end.
    async fn read_header(&mut self) -> Result<Option<(u8, usize)>, FrameError> {
        let mut header = [0u8; MAX_HEADER_LEN];
        let header = &mut header[..F::HEADER_LEN];
        let mut got = 0;
        while got < header.len() {
            let n = self.io.read(&mut header[got..]).await?;
            if n == 0 {
                if got == 0 {
                    return Ok(None);
                }
                return Err(FrameError::UnexpectedEof {
                    part: FramePart::Header,
                    expected: F::HEADER_LEN as u64,
                    received: got as u64,
                });
            }
            got += n;
        }
        let (flags, len) = self.format.decode(header)?;
        if len > self.max_frame as u64 {
            return Err(FrameError::TooLarge {
                len,
                max: self.max_frame,
            });
        }
        let len = len as usize; // <= max_frame, a usize
        Ok(Some((flags, len)))
    }

    /// Reads the next frame: `Some((flags, payload))`, or `None` if the stream ended cleanly
    /// between frames.
    ///
    /// Cancel safety: not cancel safe (a frame partly read when the future is dropped is lost,
    /// and the stream is then out of step).
    ///
    /// # Errors
    /// See [`FrameError`]; after an error the stream is out of step and should be closed.
    pub async fn read_frame(&mut self) -> Result<Option<(u8, PooledBuf)>, FrameError> {
        let Some((flags, len)) = self.read_header().await? else {
            return Ok(None);
        };
        let buf = if self.pool.max_in_use_bytes().is_some() {
            // Under a budget: wait for room for the whole payload before reading any of it,
            // so a flood of frames slows the peers down (through TCP) instead of growing the
            // heap. All at once, never grown: a reader holding part of the budget while it
            // waits for more could deadlock with others doing the same.
            let mut buf = self.pool.acquire(len).exact().await?;
            if !crate::io::ready::fill(&mut self.io, &mut buf, len).await? {
                return Err(FrameError::UnexpectedEof {
                    part: FramePart::Payload,
                    expected: len as u64,
                    received: buf.len() as u64,
                });
            }
            buf
        } else {
            // Reads of the payload alone (never into the next frame), into a buffer that
            // follows what arrived (module docs).
            let (buf, complete) =
                self.payload
                    .read_chunk(&mut self.io, len)
                    .await
                    .map_err(|e| {
                        self.payload.clear();
                        payload_error(e)
                    })?;
            if !complete {
                return Err(FrameError::UnexpectedEof {
                    part: FramePart::Payload,
                    expected: len as u64,
                    received: buf.map_or(0, |b| b.len()) as u64,
                });
            }
            match buf {
                Some(buf) => buf,
                None => self.pool.try_get_exact(0)?,
            }
        };
        Ok(Some((flags, buf)))
    }

    /// [`read_frame`](Self::read_frame), delivering the payload as a [`PooledChain`] of
    /// pooled chunks of `chunk` bytes each (the last may be shorter), for consumers that can
    /// take a chain: a large frame is read without growth copies and without a tier's slack
    /// beyond its last chunk. Each chunk is taken as its bytes are due, so a peer that claims a
    /// large frame and trickles it holds chunks only for what it sent (plus one). With a
    /// budget, each chunk waits for room in turn; keep `chunk` well below the budget divided
    /// by the number of readers, or a reader holding part of a frame can wait on others doing
    /// the same (use [`read_frame`](Self::read_frame), which waits for the whole payload at
    /// once, to rule that out).
    ///
    /// # Errors
    /// As [`read_frame`](Self::read_frame).
    pub async fn read_frame_chain(
        &mut self,
        chunk: usize,
    ) -> Result<Option<(u8, PooledChain)>, FrameError> {
        let Some((flags, len)) = self.read_header().await? else {
            return Ok(None);
        };
        let chunk = chunk.max(1);
        let mut chain = PooledChain::new();
        while chain.len() < len {
            let want = chunk.min(len - chain.len());
            let (buf, complete) =
                self.payload
                    .read_chunk(&mut self.io, want)
                    .await
                    .map_err(|e| {
                        self.payload.clear();
                        payload_error(e)
                    })?;
            if let Some(b) = buf {
                chain.push(b.into_shared());
            }
            if !complete {
                return Err(FrameError::UnexpectedEof {
                    part: FramePart::Payload,
                    expected: len as u64,
                    received: chain.len() as u64,
                });
            }
        }
        Ok(Some((flags, chain)))
    }

    /// [`read_frame`](Self::read_frame), returning the payload as a shared [`PooledBytes`].
    ///
    /// # Errors
    /// As [`read_frame`](Self::read_frame).
    pub async fn read_frame_shared(&mut self) -> Result<Option<(u8, PooledBytes)>, FrameError> {
        Ok(self
            .read_frame()
            .await?
            .map(|(flags, buf)| (flags, buf.into_shared())))
    }
}

/// A payload read's error: the pool's [`AllocError`] as itself, anything else as I/O.
fn payload_error(e: io::Error) -> FrameError {
    match e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<AllocError>())
    {
        Some(alloc) => FrameError::Alloc(alloc.clone()),
        None => FrameError::Io(e),
    }
}

/// Writes length-prefixed frames to an [`AsyncWrite`].
#[derive(Debug)]
pub struct FrameWriter<W, F = Grpc> {
    io: W,
    format: F,
}

impl<W: AsyncWrite + Unpin> FrameWriter<W, Grpc> {
    /// A writer of gRPC-format frames to `io`.
    pub fn new(io: W) -> Self {
        FrameWriter::with_format(io, Grpc)
    }
}

impl<W: AsyncWrite + Unpin, F: FrameFormat> FrameWriter<W, F> {
    /// A writer of `format` frames.
    pub fn with_format(io: W, format: F) -> Self {
        const { assert!(F::HEADER_LEN <= MAX_HEADER_LEN, "frame header too long") };
        FrameWriter { io, format }
    }

    /// Writes one frame: the header, then `payload`, in one vectored write where the transport
    /// supports it. Does not flush.
    ///
    /// # Errors
    /// [`FrameError::TooLarge`] if the format cannot express the length (nothing is written);
    /// [`FrameError::Io`] if the transport fails.
    pub async fn write_frame(&mut self, flags: u8, payload: &[u8]) -> Result<(), FrameError> {
        let mut header = [0u8; MAX_HEADER_LEN];
        self.format
            .encode(flags, payload.len(), &mut header[..F::HEADER_LEN])?;
        let mut both = Buf::chain(&header[..F::HEADER_LEN], payload);
        self.io.write_all_buf(&mut both).await?;
        Ok(())
    }

    /// Writes one frame whose payload is a [`PooledChain`], header and every view in one
    /// vectored write where the transport supports it (no copy of the payload into one
    /// buffer). The chain's buffers go back to their pools as it is written.
    ///
    /// # Errors
    /// As [`write_frame`](Self::write_frame).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), tierpool::io::frame::FrameError> {
    /// use tierpool::io::frame::{FrameReader, FrameWriter};
    ///
    /// let pool = tierpool::BufferPool::new();
    /// let mut chain = tierpool::PooledChain::new();
    /// for part in [&b"header|"[..], b"body"] {
    ///     let mut b = pool.get(part.len());
    ///     b.extend_from_slice(part);
    ///     chain.push(b.into_shared());
    /// }
    /// let (client, server) = tokio::io::duplex(1024);
    /// let mut w = FrameWriter::new(client);
    /// w.write_chain(0, chain).await?;
    /// drop(w);
    /// let mut r = FrameReader::new(server, pool);
    /// let (_, payload) = r.read_frame().await?.unwrap();
    /// assert_eq!(&payload[..], b"header|body");
    /// # Ok(()) }
    /// ```
    pub async fn write_chain(&mut self, flags: u8, chain: PooledChain) -> Result<(), FrameError> {
        let mut header = [0u8; MAX_HEADER_LEN];
        self.format
            .encode(flags, chain.len(), &mut header[..F::HEADER_LEN])?;
        let mut both = Buf::chain(&header[..F::HEADER_LEN], chain);
        self.io.write_all_buf(&mut both).await?;
        Ok(())
    }

    /// Flushes the transport.
    ///
    /// # Errors
    /// [`FrameError::Io`] if the transport fails.
    pub async fn flush(&mut self) -> Result<(), FrameError> {
        self.io.flush().await?;
        Ok(())
    }

    /// The transport.
    pub fn get_ref(&self) -> &W {
        &self.io
    }

    /// The transport, mutably.
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.io
    }

    /// The transport back.
    pub fn into_inner(self) -> W {
        self.io
    }
}
