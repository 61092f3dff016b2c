//! Reading and writing with pooled buffers, so that a connection's memory follows its traffic.
//!
//! | what | for |
//! |---|---|
//! | [`ReadBuffer`] (feature `tokio`) | any protocol: a contiguous read buffer held only while bytes are unread, frames split off as views |
//! | [`codec::FramedRead`], [`codec::FramedWrite`] (feature `tokio-util`) | tokio-util `Decoder`s and `Encoder`s, unchanged, over pooled buffers |
//! | [`BufWriter`] (feature `tokio`) | tokio's `BufWriter`, holding its buffer only while bytes wait to be written |
//! | [`frame`] (feature `tokio`) | length-prefixed frames (gRPC's header, or your own) into pooled buffers |
//! | [`read_ready`] (feature `tokio`) | one read into a pooled buffer taken once a tokio socket is readable |
//! | [`PooledChain`](crate::PooledChain) | a message that spans several buffers, read and written as one |
//! | [`collect_body`] (feature `http-body`) | an HTTP body (hyper's, axum's) read into pooled buffers under a limit, and under a budget without deadlock |
//! | [`buf_ring`] (feature `buf-ring`) | io_uring provided-buffer rings stocked from the pool |
//!
//! # Porting a protocol server
//!
//! A server written against tokio-util's codecs changes its imports and passes a pool; its
//! decoder and encoder stay as they are (the [`codec`] module's docs list the lines). One
//! with a parser over a `BytesMut` (mini-redis's `Connection`, say) keeps its parser and reads
//! into a [`ReadBuffer`] instead, and writes through a [`BufWriter`]:
//!
//! ```text
//! - buffer: BytesMut::with_capacity(4 * 1024),        // 4 KiB per connection, for good
//! - stream: tokio::io::BufWriter::new(socket),         // 8 KiB per connection, for good
//! + buffer: tierpool::io::ReadBuffer::new(pool.clone()),           // held while bytes are unread
//! + stream: tierpool::io::BufWriter::new(socket, pool.clone()),    // held while bytes are unwritten
//!   ...
//! - if 0 == self.stream.read_buf(&mut self.buffer).await? { ... }
//! + if 0 == self.buffer.read_from(&mut self.stream).await? { ... }
//! - parse(&self.buffer[..]) ...; self.buffer.advance(len);
//! + parse(self.buffer.unread()) ...; self.buffer.advance(len);
//! ```
//!
//! A process that uses only [`default_pool`](crate::default_pool) needs no more: it runs the
//! background trimmer, so a server that goes quiet gives its buffers back within a few
//! seconds. A pool of your own wants
//! [`background_trim(true)`](crate::Builder::background_trim) for the same.
//!
//! The repository's `examples/framed_port.rs` is a tokio-util codec server ported this way;
//! the report's `kv_server` (a Redis-protocol server) runs one decoder in both framings.
//!
//! (Layer 6 of the crate: imports the pools and buffers below it.)

mod parts;
#[cfg(feature = "tokio")]
pub(crate) mod read_buf;
pub(crate) mod chain;
#[cfg(feature = "http-body")]
mod collect;
#[cfg(feature = "tokio")]
mod ready;
#[cfg(feature = "tokio")]
mod write_buf;
#[cfg(feature = "tokio-util")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio-util")))]
pub mod codec;
#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub mod frame;
#[cfg(all(feature = "buf-ring", target_os = "linux", not(loom)))]
#[cfg_attr(docsrs, doc(cfg(all(feature = "buf-ring", target_os = "linux"))))]
pub mod buf_ring;

#[cfg(feature = "http-body")]
#[cfg_attr(docsrs, doc(cfg(feature = "http-body")))]
pub use collect::{collect_body, CollectBody, CollectError};
#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub use parts::poll_write_all;
pub use parts::ReadRule;
#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub use read_buf::ReadBuffer;
#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub use ready::{read_ready, read_ready_exact, ReadReady};
#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub use write_buf::BufWriter;
