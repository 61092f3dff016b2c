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
//! With a budget on the pool's bytes in use
//! ([`Builder::max_in_use_bytes`](tierpool::Builder::max_in_use_bytes)), one budget covers
//! every stream: a stream whose next message finds no room stops reading its body, so
//! HTTP/2's flow control slows that peer down instead of the heap growing.
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
