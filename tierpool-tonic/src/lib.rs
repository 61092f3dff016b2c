//! gRPC under [tonic](https://docs.rs/tonic) with receive and send buffers from a
//! [tierpool](https://docs.rs/tierpool) pool: gRPC-Go's shared receive buffers for Rust
//! services.
//!
//! # Porting a tonic service
//!
//! Unary and server-streaming methods need only the codec, chosen in the build script:
//!
//! ```text
//!   tonic_prost_build::configure()
//! +     .codec_path("tierpool_tonic::PooledCodec")
//! +     .bytes(["."])                          // bytes fields as views of pooled memory
//!       .compile_protos(&["proto/echo.proto"], &["proto"])?;
//! ```
//!
//! A client-streaming or bidi method is served by a handler of yours through
//! [`PooledMethods`], which wraps the generated server; the trait method stays (tonic's
//! generated trait requires it) but is no longer called:
//!
//! ```text
//! - Server::builder().add_service(EchoServer::new(echo))
//! + let echo = PooledMethods::new(EchoServer::new(echo), pool.clone())
//! +     .streaming("/echo.Echo/Chat", chat)?;  // async fn chat(PooledStreaming<Ping>) -> Result<Response<impl Stream>, Status>
//! + Server::builder().add_service(echo)
//! ```
//!
//! A handler reads its requests as it did tonic's `Streaming<Ping>` (`message().await?`, or as
//! a `Stream`) and returns its responses as a stream, as a generated method's would. A path
//! outside the wrapped service is refused when it is registered ([`MethodPathError`]).
//!
//! The codec copies a unary request twice: h2's frames into tonic's buffer, then that into
//! pooled memory. A unary method with large requests can skip tonic's buffer the same way,
//! its handler unchanged but for being a function of your own:
//!
//! ```text
//! +     .unary("/echo.Echo/Say", say)?;        // async fn say(Request<Ping>) -> Result<Response<Pong>, Status>
//! ```
//!
//! A client that reads long streams calls through [`PooledClient`] instead of the generated
//! client's method:
//!
//! ```text
//! - let mut pongs = client.chat(pings).await?.into_inner();
//! + let mut pongs = PooledClient::new(channel, pool.clone())
//! +     .streaming::<Ping, Pong, _>("/echo.Echo/Chat", Request::new(pings)).await?.into_inner();
//!   while let Some(pong) = pongs.message().await? { ... }
//! ```
//!
//! Responses are sent uncompressed; compressed requests and responses (gzip) are read.
//!
//! # What it changes
//!
//! tonic copies every HTTP/2 data frame of a stream into a per-stream `BytesMut` that grows to
//! the largest message and is kept until the stream ends, and a message decoded with prost's
//! `Bytes` fields pins all of it. This crate reads and writes the same wire format through
//! the pool instead:
//!
//! | what | for |
//! |---|---|
//! | [`MessageReader`] | messages out of any HTTP/2 body into pooled buffers: nothing held between messages, the length checked before memory is taken, a message copied once when its stream's last two were at least as long (it then holds its own length while it waits), otherwise a wait holding at most twice what arrived, gzip |
//! | [`Decoded`] | those messages decoded with prost (tonic's `Streaming<T>` methods): `Bytes` fields are views of pooled memory |
//! | [`EncodeBody`] | a stream of messages as a request or response body, each batch in a pooled buffer until h2 has written it; `grpc-status` trailers |
//! | [`PooledCodec`] | tonic's generated services as they are (`codec_path`): decoded messages refer to pooled memory, not tonic's buffer |
//! | [`PooledMethods`] | a generated service's client-streaming, bidi and (if you choose) unary methods served through the reader and body, the other methods unchanged |
//! | [`PooledClient`] | a client whose calls send and read through the pooled path |
//!
//! # Under a budget
//!
//! With a budget on the pool's bytes in use
//! ([`Builder::max_in_use_bytes`](tierpool::Builder::max_in_use_bytes)), one budget covers
//! every stream: a stream whose next message finds no room stops reading its body, so
//! HTTP/2's flow control slows that peer down instead of the heap growing. Where the
//! pooled path cannot wait, it does what this table says:
//!
//! | where | with no room | why |
//! |---|---|---|
//! | [`MessageReader`] (and so [`Decoded`], [`PooledMethods`], [`PooledClient`]'s responses) | waits: the message's whole buffer is taken, in the budget's queue, before more of the body is read | the one place that can: it is polled, and not polling the body is what slows the peer |
//! | the same, a message of at most 16 KiB on a stream that has received one | reads it into the heap, which the budget does not count | a handler that keeps its stream's last message while it reads the next holds that message: were every admitted stream to wait for room for a small next one, behind streams not yet admitted, none would let go. At most one such message per stream is beyond the budget |
//! | [`PooledCodec`]'s decoder | `RESOURCE_EXHAUSTED` | tonic calls a decoder synchronously: it cannot wait |
//! | decompressing a gzip message | `RESOURCE_EXHAUSTED` | the compressed message holds its buffer already; waiting for a second while holding the first could wait for ever |
//! | [`EncodeBody`] (responses and requests sent) | encodes into a heap buffer the budget does not count | the messages in hand may be views of pooled buffers that only sending them lets go; the budget bounds what is received |
//!
//! **HTTP/2's windows.** A stream that waits leaves its DATA frames queued in h2, at most its
//! stream window, and they count against the connection's window too. With hyper's defaults
//! (1 MiB for each), one waiting stream can hold the whole connection's window, and the
//! streams the budget has admitted then never receive the rest of their messages: nothing
//! progresses. A server under a budget sets a connection window at least its streams'
//! windows together (`Server::builder().max_concurrent_streams(200)
//! .initial_stream_window_size(256 << 10).initial_connection_window_size(64 << 20)`), so
//! waiting streams can never fill it; what they queue (at most 256 KiB each there) is the
//! memory outside the budget.
//!
//! # Bad input
//!
//! | input | status |
//! |---|---|
//! | a declared length over the limit (4 MiB by default) | `RESOURCE_EXHAUSTED`, before any memory is taken |
//! | a compressed message without `grpc-encoding` | `INTERNAL` |
//! | an encoding other than `gzip` or `identity` | `UNIMPLEMENTED` (a server lists what it accepts) |
//! | a stream that ends inside a message | `INTERNAL`, with how much arrived |
//! | compressed data that expands past the limit | `RESOURCE_EXHAUSTED` once its output passes it |
//! | data that does not decode as the message | `INTERNAL` |
//!
//! Every buffer goes back to the pool whatever the outcome.
//!
//! # Versions
//!
//! This crate follows tonic's releases (0.14 now) and needs what tonic needs (Rust 1.88);
//! tierpool itself does not depend on tonic. It is built only on tierpool's public API: the
//! read rules ([`tierpool::io::ReadRule`]), exact gets and [`tierpool::PollAcquire`] (the
//! crate docs of tierpool, *Building a protocol crate*).

#![warn(missing_docs, missing_debug_implementations)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod status;
mod compression;
mod reader;
mod decoded;
mod body;
mod codec;
mod server;
mod client;

pub use body::{EncodeBody, BATCH_BYTES};
pub use client::PooledClient;
pub use codec::{PooledCodec, PooledDecoder, PooledEncoder, CODEC_BUFFER_SIZE};
pub use compression::Encoding;
pub use decoded::Decoded;
pub use reader::{MessageReader, DEFAULT_MAX_MESSAGE_SIZE};
pub use server::{MethodPathError, PooledMethods, PooledStreaming};
