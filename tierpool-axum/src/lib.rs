//! axum extractors and a tower layer that read request bodies into a
//! [tierpool](https://docs.rs/tierpool) pool: every upload of a router under one memory
//! budget.
//!
//! # Porting an axum service
//!
//! The extractors change type and the router's state carries the pool:
//!
//! ```text
//! - async fn upload(body: Bytes) -> ...
//! + async fn upload(PooledBody(body): PooledBody) -> ...
//! - async fn order(Json(order): Json<Order>) -> ...
//! + async fn order(PooledJson(order): PooledJson<Order>) -> ...
//!
//! + let pool = tierpool::BufferPool::builder().max_in_use_bytes(64 << 20).build()?;
//!   let app = Router::new()
//!       .route("/upload", post(upload))
//!       .route("/order", post(order))
//!       .layer(DefaultBodyLimit::max(16 << 20))
//! +     .with_state(pool);
//! ```
//!
//! A service whose handlers keep axum's extractors adds [`PooledBodyLayer`] instead.
//!
//! # What it changes
//!
//! axum's `Bytes`, `String` and `Json` extractors collect a body into a fresh allocation
//! before the handler runs, each under `DefaultBodyLimit`, and nothing bounds them together:
//! the heap in use is the requests in flight times their sizes, so a burst of large uploads
//! can run the process out of memory. The chunks hyper hands over are views of its connection
//! buffers, which they keep alive while the body is collected.
//!
//! Here each body is read by [`collect_body`](tierpool::io::collect_body): each chunk is
//! copied out of hyper's buffers as it arrives, into pooled buffers that follow what arrived
//! (at most twice it while a peer is slow). With a budget on the pool
//! ([`Builder::max_in_use_bytes`](tierpool::Builder::max_in_use_bytes)) a body is admitted by
//! the length it declares (else by the limit) before any of it is read, waiting in the
//! budget's queue; while it waits its body is not polled, so hyper stops reading the
//! connection (HTTP/1.1: TCP's flow control; HTTP/2: the stream's window) and the peer slows
//! down. A body the budget has admitted always finishes, so more uploads than the budget
//! holds all complete, in turn; none is refused for want of room.
//!
//! | extractor | axum's | gives |
//! |---|---|---|
//! | [`PooledBody`] | `Bytes` | the body as a [`PooledChain`](tierpool::PooledChain) of pooled buffers; also a response sent from them |
//! | [`PooledJson<T>`] | `Json<T>` | `T` deserialized from the pooled buffers (415, 400, 422 as axum's) |
//!
//! A body over the limit is answered with 413 before anything is read when it declares its
//! length, and as soon as it passes the limit otherwise; every buffer goes back.
//!
//! # HTTP/2: windows
//!
//! A waiting stream's frames stay queued in h2, at most its stream window, and count against
//! the connection's window too. So that waiting streams never hold the window that admitted
//! ones need, a server that takes uploads over HTTP/2 under a budget sets a connection window
//! at least its concurrent streams' windows together, and a stream window that bounds what a
//! waiting stream may queue outside the budget (hyper-util's
//! `auto::Builder::http2().initial_stream_window_size(..).initial_connection_window_size(..)`;
//! the crate's `examples/upload_server.rs` sets 256 KiB and 64 MiB for 200 streams).
//!
//! # Versions
//!
//! This crate follows axum's releases (0.8 now, `axum-core` 0.5); tierpool 0.1; Rust 1.83.
//! It is built only on tierpool's public API.

#![warn(missing_docs, missing_debug_implementations)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod limit;
mod body;
mod json;
mod layer;

pub use body::{BodyRejection, PooledBody, Unread};
pub use json::{JsonRejection, PooledJson};
pub use layer::{PooledBodies, PooledBodyLayer};
