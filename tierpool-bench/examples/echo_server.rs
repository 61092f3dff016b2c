//! A loopback streaming server on tierpool's frame reader (the `streaming` workload's server).
//! Each request (`[stream id: u64][pattern]`, gRPC-framed) is answered with a response of
//! RESP bytes carrying the same id.
//!
//! ```sh
//! cargo run --release -p tierpool-bench --example echo_server -- [ADDR] [STRATEGY] [REQ] [RESP]
//! # defaults: 127.0.0.1:7878 pooled 1048576 1048576
//! # STRATEGY: no-pool | bytesmut | pooled | shared (how received frames are stored)
//! ```

use tierpool::BufferPool;
use tierpool_bench::fixtures::streaming::{serve, Strategy};
use tierpool_bench::harness::choice::Choice as _;

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:7878".into());
    let strategy = args.next().unwrap_or_else(|| "pooled".into());
    let Some(strategy) = Strategy::from_id(&strategy) else {
        eprintln!("unknown strategy {strategy:?}: no-pool, bytesmut, pooled or shared");
        std::process::exit(2);
    };
    let req: usize = args
        .next()
        .map_or(1 << 20, |s| s.parse().expect("REQ bytes"));
    let resp: usize = args
        .next()
        .map_or(1 << 20, |s| s.parse().expect("RESP bytes"));
    if req < 8 || resp < 8 {
        eprintln!("messages carry an 8-byte stream id: REQ and RESP must be at least 8");
        std::process::exit(2);
    }
    let listener = match tokio::net::TcpListener::bind(&addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("cannot listen on {addr}: {e}");
            std::process::exit(1);
        }
    };
    eprintln!("serving {} on {addr}", strategy.label());
    serve(listener, strategy, BufferPool::new(), req, resp).await;
}
