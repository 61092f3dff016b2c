//! The `cross-thread` workload's 1 MiB hand-off against the retained cap: how many buffers
//! the hand-off keeps in circulation, and what a cap below that costs.
//!
//! `cargo run --release -p tierpool-bench --example cross_thread_cap [cap MiB, default 64] [size in bytes, default 1048576]`
//!
//! Runs the workload's hand-off (a producer gets and fills buffers, a consumer on a fresh
//! thread drops them after the 64-slot channel) ten times, busy, and prints for each run the
//! pool's misses (fresh buffers), what it released at the cap, and the buffers of the size's
//! tier it retains afterwards. The channel alone can hold 64 buffers in flight, and the
//! producer's and consumer's caches hold more; when the consumer empties the channel, every
//! buffer in circulation is retained at once. Pools that keep everything (the report's
//! other contenders) keep them all; a pool whose cap is smaller misses and releases a few of
//! them in every run.

use tierpool_bench::contenders::Tierpool;
use tierpool_bench::workloads::cross_thread::hand_off;

fn main() {
    let mut args = std::env::args().skip(1);
    let cap_mib: usize = args.next().map_or(64, |a| a.parse().expect("a cap in MiB"));
    let n: usize = args
        .next()
        .map_or(1 << 20, |a| a.parse().expect("a size in bytes"));
    let pool = tierpool::BufferPool::builder()
        .max_retained_bytes(cap_mib << 20)
        .build()
        .expect("a valid cap");
    let c = Tierpool(pool.clone());
    let tier = pool
        .stats()
        .tiers
        .iter()
        .position(|t| t.size >= n)
        .expect("a size the pool's tiers cover");
    for run in 0..10 {
        let before = pool.stats();
        hand_off(&c, n, 20_000);
        let after = pool.stats();
        println!(
            "cap {cap_mib} MiB, {n} B, run {run}: {:>3} fresh of 20000, released at the cap {:>3} MiB; the tier retains {} buffers",
            after.misses - before.misses,
            (after.released_at_cap - before.released_at_cap) >> 20,
            after.tiers[tier].retained_buffers,
        );
    }
}
