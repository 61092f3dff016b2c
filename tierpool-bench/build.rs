//! Generates grpc's `grpc.testing.BenchmarkService` twice with tonic-build's manual builder (no
//! protoc): with tonic's own prost codec (`fixtures::grpc::stock`) and with tierpool's pooled codec
//! (`fixtures::grpc::pooled`). The messages are written out in `src/fixtures/grpc/messages.rs`.

use std::path::PathBuf;

use tonic_build::manual::{Builder, Method, Service};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    for (dir, codec) in [
        ("stock", "tonic_prost::ProstCodec"),
        ("pooled", "tierpool_tonic::PooledCodec"),
    ] {
        let method = |name: &str, route: &str, from_client: bool, from_server: bool| {
            let mut m = Method::builder()
                .name(name)
                .route_name(route)
                .input_type("crate::fixtures::grpc::SimpleRequest")
                .output_type("crate::fixtures::grpc::SimpleResponse")
                .codec_path(codec);
            if from_client {
                m = m.client_streaming();
            }
            if from_server {
                m = m.server_streaming();
            }
            m.build()
        };
        let service = Service::builder()
            .name("BenchmarkService")
            .package("grpc.testing")
            .method(method("unary_call", "UnaryCall", false, false))
            .method(method("streaming_call", "StreamingCall", true, true))
            .method(method(
                "streaming_from_client",
                "StreamingFromClient",
                true,
                false,
            ))
            .method(method(
                "streaming_from_server",
                "StreamingFromServer",
                false,
                true,
            ))
            .method(method(
                "streaming_both_ways",
                "StreamingBothWays",
                true,
                true,
            ))
            .build();
        let dir = out.join(dir);
        std::fs::create_dir_all(&dir).expect("OUT_DIR is writable");
        Builder::new().out_dir(&dir).compile(&[service]);
    }
}
