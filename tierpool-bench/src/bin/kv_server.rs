//! A Redis-protocol key-value server in two modes, tokio-util's framing or tierpool's: the
//! `redis` and `soak` workloads' server (`tierpool_bench::fixtures::kv`).
//!
//! ```text
//! cargo build --release -p tierpool-bench --bin kv_server
//! target/release/kv_server --addr 127.0.0.1:6379 --mode pooled
//! ```

use std::process::ExitCode;

fn main() -> ExitCode {
    tierpool_bench::fixtures::kv::server_main(std::env::args().skip(1))
}
