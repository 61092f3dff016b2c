//! What `Builder::trim_allocator` costs: the time of a `trim()` that releases a burst of
//! buffers, with and without the `malloc_trim(0)` it makes, and the RSS after it; then the time
//! to take the burst again (the returned pages fault back in). Medians of interleaved rounds.
//!
//! `cargo run --release -p tierpool-bench --example malloc_trim_cost [ROUNDS]`

use std::time::Instant;

use tierpool::BufferPool;

const BUFFERS: usize = 4_000;
const SIZE: usize = 16 << 10;

fn round(trim_allocator: bool) -> (f64, f64, f64) {
    let pool = BufferPool::builder()
        .max_retained_bytes(1 << 30)
        .trim_allocator(trim_allocator)
        .build()
        .unwrap();
    let fill = |pool: &BufferPool| {
        let mut held = Vec::with_capacity(BUFFERS);
        for i in 0..BUFFERS {
            let mut b = pool.get(SIZE);
            b.resize(SIZE, i as u8);
            held.push(b);
        }
        held
    };
    // A long-lived buffer above the burst, as in a server: it pins glibc's heap top.
    let held = fill(&pool);
    let pin = vec![1u8; SIZE];
    drop(held);
    let t = Instant::now();
    let released = pool.trim();
    let trim_ms = t.elapsed().as_secs_f64() * 1e3;
    assert!(released >= BUFFERS * SIZE);
    let rss = tierpool_bench::harness::procfs::Proc::Me.rss() as f64 / (1 << 20) as f64;
    let t = Instant::now();
    let again = fill(&pool);
    let refill_ms = t.elapsed().as_secs_f64() * 1e3;
    drop((again, pin));
    pool.trim();
    (trim_ms, rss, refill_ms)
}

/// The report's median (`measure::Summary`), so the examples and the report agree.
fn median(v: Vec<f64>) -> f64 {
    tierpool_bench::harness::measure::Summary::of(v).median
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(9);
    let mut on = Vec::new();
    let mut off = Vec::new();
    for _ in 0..rounds {
        on.push(round(true));
        off.push(round(false));
    }
    for (name, r) in [
        ("trim_allocator(true)", &on),
        ("trim_allocator(false)", &off),
    ] {
        println!(
            "{name:>22}: trim() of {} MiB {:.2} ms, RSS after {:.1} MiB, taking the burst again {:.2} ms (medians of {rounds})",
            (BUFFERS * SIZE) >> 20,
            median(r.iter().map(|x| x.0).collect()),
            median(r.iter().map(|x| x.1).collect()),
            median(r.iter().map(|x| x.2).collect()),
        );
    }
}
