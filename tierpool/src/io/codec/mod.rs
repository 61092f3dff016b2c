//! tokio-util's codecs over pooled buffers (feature `tokio-util`): [`FramedRead`] runs any
//! [`Decoder`](tokio_util::codec::Decoder) as it is, over buffers that are taken from the
//! pool when bytes arrive and go back when they are consumed; [`FramedWrite`] runs any
//! [`Encoder`](tokio_util::codec::Encoder) into a pooled buffer held only until it is flushed.
//!
//! # Porting from tokio-util
//!
//! The types mirror `tokio_util::codec`'s, with a pool:
//!
//! ```text
//! - use tokio_util::codec::{FramedRead, FramedWrite};
//! + use tierpool::io::codec::{FramedRead, FramedWrite};
//! - let frames = FramedRead::new(reader, MyCodec);
//! + let frames = FramedRead::new(reader, MyCodec, pool.clone());
//! - let sink = FramedWrite::new(writer, MyCodec);
//! + let sink = FramedWrite::new(writer, MyCodec, pool.clone());
//! ```
//!
//! Everything else (the `Stream` and `Sink` they are, the decoder's and encoder's code,
//! `decode_eof`, errors) is unchanged: `FramedRead`'s loop is `tokio_util`'s, line for line.
//! What changes is the memory. `tokio_util`'s `FramedRead` keeps an 8 KiB `BytesMut` per
//! connection from the start, and after one large frame keeps that frame's size for good;
//! this one holds nothing while no byte is unread, and at most `max(2P, T0)` while `P` bytes
//! of an unfinished frame wait ([`read_buf`](crate::io::ReadBuffer)'s rules). Its reads go
//! through the stream's `poll_read`, which on a tokio socket makes no system call while
//! nothing has arrived, so an idle connection costs neither memory nor receives.
//!
//! # What the bridge costs
//!
//! A decoder works on a `BytesMut`, which cannot be made from a pooled buffer without a
//! `bytes` control block: lending a buffer to the decoder allocates one (24 bytes) and
//! giving it back frees it, once per buffer, not per frame. A decoder that hands out frames
//! sharing the buffer (`LengthDelimitedCodec`, `AnyDelimiterCodec`, `BytesCodec`: their
//! `split_to`) makes `bytes` allocate its shared block (40 bytes) once per buffer, and if such
//! frames are still alive when the buffer is drained, the buffer goes to the allocator with
//! the last of them instead of back to the pool. Decoders that copy (`LinesCodec`, most
//! protocol parsers) return every buffer.

mod bytes_mut_store;
mod framed_read;
mod framed_write;

pub use framed_read::FramedRead;
pub use framed_write::FramedWrite;
