//! The messages of `grpc/testing/messages.proto` the benchmark service uses, written out for
//! prost (same field numbers and types: any gRPC stack built from that file talks to them).
//! Payloads are `bytes::Bytes`, as `prost_build::Config::bytes` generates them.

use bytes::Bytes;

/// `grpc.testing.Payload`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Payload {
    /// `PayloadType type = 1` (only `COMPRESSABLE`, 0, exists).
    #[prost(int32, tag = "1")]
    pub r#type: i32,
    /// `bytes body = 2`.
    #[prost(bytes = "bytes", tag = "2")]
    pub body: Bytes,
}

/// `grpc.testing.SimpleRequest` (the fields the benchmark reads).
#[derive(Clone, PartialEq, prost::Message)]
pub struct SimpleRequest {
    /// `PayloadType response_type = 1`.
    #[prost(int32, tag = "1")]
    pub response_type: i32,
    /// `int32 response_size = 2`: the answer's payload size.
    #[prost(int32, tag = "2")]
    pub response_size: i32,
    /// `Payload payload = 3`.
    #[prost(message, optional, tag = "3")]
    pub payload: Option<Payload>,
}

/// `grpc.testing.SimpleResponse` (its payload).
#[derive(Clone, PartialEq, prost::Message)]
pub struct SimpleResponse {
    /// `Payload payload = 1`.
    #[prost(message, optional, tag = "1")]
    pub payload: Option<Payload>,
}

impl SimpleRequest {
    /// A request carrying `size` bytes of `fill` and asking for `response_size` back.
    pub fn new(size: usize, response_size: usize, fill: u8) -> Self {
        SimpleRequest {
            response_type: 0,
            response_size: response_size as i32,
            payload: Some(Payload {
                r#type: 0,
                body: Bytes::from(vec![fill; size]),
            }),
        }
    }
}
