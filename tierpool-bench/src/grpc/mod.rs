//! grpc's own benchmark service, `grpc.testing.BenchmarkService`, on tonic in two modes: the
//! `grpc_server` binary and the `grpc` workload's server.
//!
//! - **stock**: plain tonic, generated with tonic's own prost codec (`tonic_prost::ProstCodec`);
//! - **pooled**: every method through tierpool-tonic: the generated service with
//!   `PooledCodec` for the unary and server-streaming methods, and `PooledMethods` (the pooled
//!   reader and body) for the client-streaming and bidi ones; with `--unary reader`, the unary
//!   method through `PooledMethods::unary` as well.
//!
//! Both answer as grpc's benchmark servers do: a `SimpleResponse` whose payload is
//! `response_size` zero bytes (a view of one static block: no allocation per response, in
//! either mode), and both keep tonic's default limits (4 MiB received).

mod cli;
mod messages;
mod service;

pub use cli::server_main;

pub use messages::{Payload, SimpleRequest, SimpleResponse};
pub use service::{serve, Mode, Served, Unary, MAX_RESPONSE};

/// The service tonic-build generated with tonic's own prost codec.
#[allow(missing_docs, missing_debug_implementations, clippy::all)]
pub mod stock {
    include!(concat!(
        env!("OUT_DIR"),
        "/stock/grpc.testing.BenchmarkService.rs"
    ));
}

/// The service tonic-build generated with `tierpool_tonic::PooledCodec`.
#[allow(missing_docs, missing_debug_implementations, clippy::all)]
pub mod pooled {
    include!(concat!(
        env!("OUT_DIR"),
        "/pooled/grpc.testing.BenchmarkService.rs"
    ));
}

/// A method's path.
pub const UNARY: &str = "/grpc.testing.BenchmarkService/UnaryCall";
/// The bidi ping-pong method's path.
pub const STREAMING: &str = "/grpc.testing.BenchmarkService/StreamingCall";
/// The client-streaming method's path.
pub const FROM_CLIENT: &str = "/grpc.testing.BenchmarkService/StreamingFromClient";
/// The server-streaming method's path.
pub const FROM_SERVER: &str = "/grpc.testing.BenchmarkService/StreamingFromServer";
/// The bidi method whose two directions run independently.
pub const BOTH_WAYS: &str = "/grpc.testing.BenchmarkService/StreamingBothWays";
