//! The I/O layer over real and scripted peers, one module per reader or writer: the read
//! buffer, tokio-util's codecs, frames, chains (and gRPC's framing over them),
//! `http_body`, readiness.
//!
//! One test binary: the modules share the runtimes and scripted peers of `common::io`.

#[path = "../common/mod.rs"]
mod common;

mod chain;
mod chain_grpc;
mod codec;
mod collect;
mod frame;
mod http_body;
mod read_buf;
mod ready;
