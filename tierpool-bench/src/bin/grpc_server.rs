//! grpc's own benchmark service (`grpc.testing.BenchmarkService`) on tonic, stock or pooled.
//!
//! ```text
//! cargo build --release -p tierpool-bench --bin grpc_server
//! target/release/grpc_server --addr 127.0.0.1:50051 --mode pooled
//! ```
//!
//! Plain HTTP/2 (h2c), tonic's default limits in both modes. It prints `listening on ADDR`
//! once it accepts connections; SIGUSR1 prints `stats requests=R allocs=A bytes=B
//! pool_hits=H pool_misses=M pool_released_at_cap=C` (request messages received, the
//! allocations the process made, and the process-wide pool's figures, so far); SIGINT or
//! SIGTERM stop it cleanly (in-flight calls finish) and it prints the same line last.

use std::process::ExitCode;

fn main() -> ExitCode {
    tierpool_bench::fixtures::grpc::server_main(std::env::args())
}
