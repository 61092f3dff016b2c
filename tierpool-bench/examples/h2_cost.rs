//! What the `http` workload's server does per HTTP/2 request for one body type, counted where
//! time is noise: run it under callgrind twice, with two request counts, and divide the
//! difference in instructions by the difference in requests (start-up cancels out).
//!
//! ```text
//! cargo build --release -p tierpool-bench --example h2_cost
//! for n in 100 400; do
//!   valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!     target/release/examples/h2_cost pooled 1048576 $n 2>&1 | grep Collected
//! done
//! ```
//!
//! Arguments: the body (`full`, `pooled`, `chain`, `chain-per-view`: the workload's URL ids),
//! its size in bytes (at most 1 MiB), and the number of requests. h2load (one thread, 8
//! connections of one stream each, as in the workload) makes them; it is a child process,
//! which callgrind does not follow, so the count is the server's (and this process's waiting).

use std::process::Command;

use tierpool::BufferPool;
use tierpool_bench::workloads::http::{parse_h2load, start_server};

fn main() {
    let mut args = std::env::args().skip(1);
    let usage = "usage: h2_cost <full|pooled|chain|chain-per-view> <size> <requests>";
    let body = args.next().expect(usage);
    let size: usize = args.next().and_then(|s| s.parse().ok()).expect(usage);
    let requests: usize = args.next().and_then(|s| s.parse().ok()).expect(usage);
    let pool = BufferPool::new();
    let (rt, addr) = start_server(&pool).expect("the server starts");
    let url = format!("http://{addr}/{body}/{size}");
    let out = Command::new("h2load")
        .args(["-t1", "-c8", "-m1", "-n", &requests.to_string(), &url])
        .output()
        .expect("h2load runs (apt-get install nghttp2-client)");
    let text = String::from_utf8_lossy(&out.stdout);
    let (rps, done) = parse_h2load(&text).expect("every request succeeded");
    println!("{body} {size} B x {requests}: h2load {done} succeeded, {rps} req/s");
    assert_eq!(done, requests as f64, "every request made: {text}");
    drop(rt);
    let s = pool.stats();
    println!("pool: {} gets, {} hits", s.gets, s.hits);
}
