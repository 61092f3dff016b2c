//! Where the `cross-thread` workload's allocations per buffer come from: the report measures
//! its cases interleaved (every contender's sizes in turn), so a pool's buffers of one size sit
//! idle for longer than tierpool's decay interval (1 s) between that size's samples and before
//! its counting pass. Decay gives them back, and the pass starts by allocating the hand-off's
//! working set again. Pools that keep everything (opool, zeropool) do not.
//!
//! `cargo run --release -p tierpool-bench --example cross_thread_idle [cap MiB, default 64]`
//!
//! Prints, per size, the pool's misses (fresh allocations) in one 1,000-buffer hand-off right
//! after busy hand-offs of every size, and again after 2.5 s idle, with what decay and the
//! retained cap released during it.

use std::time::Duration;

use tierpool_bench::contenders::Tierpool;
use tierpool_bench::workloads::cross_thread::{hand_off, SIZES};

fn main() {
    let cap_mib: usize = std::env::args()
        .nth(1)
        .map_or(64, |a| a.parse().expect("the retained cap in MiB"));
    for idle in [Duration::ZERO, Duration::from_millis(2500)] {
        let pool = tierpool::BufferPool::builder()
            .max_retained_bytes(cap_mib << 20)
            .build()
            .expect("a valid cap");
        let c = Tierpool(pool.clone());
        // The timed rounds: every size in turn, busy.
        for _ in 0..5 {
            for n in SIZES {
                hand_off(&c, n, 20_000);
            }
        }
        for n in SIZES {
            std::thread::sleep(idle);
            let before = pool.stats();
            hand_off(&c, n, 1000);
            let after = pool.stats();
            let misses = after.misses - before.misses;
            let mib = |b: u64| b as f64 / (1 << 20) as f64;
            println!(
                "cap {cap_mib} MiB, after {:>4} ms idle: {:>7} B x 1000: {misses:>3} fresh allocations ({:.3} per buffer); released by decay {:.1} MiB, at the cap {:.1} MiB",
                idle.as_millis(),
                n,
                misses as f64 / 1000.0,
                mib(after.released_by_decay - before.released_by_decay),
                mib(after.released_at_cap - before.released_at_cap),
            );
        }
    }
}
