//! A minimal get + drop loop, for counting the instructions of the fast path:
//!
//! ```sh
//! CARGO_PROFILE_RELEASE_DEBUG=1 cargo build --release -p tierpool --example hot_loop
//! gdb -q -batch -x scripts/count_instructions.py target/release/examples/hot_loop
//! ```
//!
//! Run directly it prints the time per get+drop: `hot_loop [size] [iterations]`.

use std::hint::black_box;
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(4096, |s| s.parse().expect("size"));
    let iters: usize = args
        .next()
        .map_or(10_000_000, |s| s.parse().expect("iterations"));
    let pool = tierpool::BufferPool::new();
    drop(pool.get(n)); // the first get allocates
    let start = Instant::now();
    for _ in 0..iters {
        let mut buf = pool.get(black_box(n));
        buf.spare_capacity_mut()[0].write(1);
        black_box(&mut buf);
    }
    let elapsed = start.elapsed();
    println!(
        "{:.2} ns per get+drop of {n} bytes ({} hits)",
        elapsed.as_nanos() as f64 / iters as f64,
        pool.stats().hits
    );
}
