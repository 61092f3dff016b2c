//! The streaming client for `echo_server`: N connections, C concurrent streams, each sending a
//! request of R bytes and awaiting a response of S bytes, for D seconds. Prints QPS and
//! latency.
//!
//! ```sh
//! cargo run --release -p tierpool-bench --example echo_server &
//! cargo run --release -p tierpool-bench --example echo_client -- [ADDR] [STRATEGY] [N] [C] [R] [S] [D]
//! # defaults: 127.0.0.1:7878 pooled 1 150 1048576 1048576 10
//! ```

use std::time::Duration;

use tierpool::BufferPool;
use tierpool_bench::fixtures::streaming::{run_client, Strategy};
use tierpool_bench::harness::choice::Choice as _;

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:7878".into());
    let addr = match tokio::net::lookup_host(&addr)
        .await
        .ok()
        .and_then(|mut a| a.next())
    {
        Some(a) => a,
        None => {
            eprintln!("cannot resolve {addr}");
            std::process::exit(2);
        }
    };
    let strategy = args.next().unwrap_or_else(|| "pooled".into());
    let Some(strategy) = Strategy::from_id(&strategy) else {
        eprintln!("unknown strategy {strategy:?}: no-pool, bytesmut, pooled or shared");
        std::process::exit(2);
    };
    let mut num = |default: usize| {
        args.next()
            .map_or(default, |s| s.parse().expect("a number"))
    };
    let (n, c, r, s, d) = (num(1), num(150), num(1 << 20), num(1 << 20), num(10));
    if n == 0 || c == 0 || r < 8 || s < 8 {
        eprintln!("need N >= 1, C >= 1, R >= 8 and S >= 8");
        std::process::exit(2);
    }
    let pool = BufferPool::new();
    let result = run_client(
        addr,
        strategy,
        pool.clone(),
        n,
        c,
        r,
        s,
        Duration::from_secs(1),
        Duration::from_secs(d as u64),
        |_| {},
    )
    .await;
    let h = &result.latency_us;
    println!(
        "{}: {} round trips in {:.1} s = {:.0} QPS; latency mean {:.2} ms, p50 {:.2} ms, p99 {:.2} ms",
        strategy.label(),
        result.round_trips,
        result.elapsed.as_secs_f64(),
        result.round_trips as f64 / result.elapsed.as_secs_f64(),
        h.mean() / 1e3,
        h.value_at_quantile(0.5) as f64 / 1e3,
        h.value_at_quantile(0.99) as f64 / 1e3,
    );
    println!("client pool: {}", pool.stats());
}
