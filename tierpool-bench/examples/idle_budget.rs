//! A producer whose thread cache is full of idle buffers of another size: does it still hand
//! off 64 KiB buffers at full speed? (Before the thread cache learned to make room, two idle
//! 1 MiB buffers in the producer's 2 MiB budget sent every 64 KiB get down the slow path.)
//!
//! `cargo run --release -p tierpool-bench --example idle_budget [rounds]`
//!
//! Prints, per round, ns per buffer with and without the idle 1 MiB buffers (interleaved, so
//! that the VM's slow spells hit both), then the medians.

use tierpool_bench::contenders::Tierpool;
use tierpool_bench::harness::measure::Summary;
use tierpool_bench::workloads::cross_thread::hand_off;

fn run(idle_big: bool) -> f64 {
    let pool = tierpool::BufferPool::new();
    if idle_big {
        let (a, b) = (pool.get(1 << 20), pool.get(1 << 20));
        drop((a, b)); // this thread's whole 2 MiB budget, idle from now on
    }
    let c = Tierpool(pool);
    hand_off(&c, 64 << 10, 20_000); // warm
    let n = 200_000;
    hand_off(&c, 64 << 10, n).as_nanos() as f64 / n as f64
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .map_or(8, |s| s.parse().expect("rounds"));
    let (mut plain, mut idle) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        plain.push(run(false));
        idle.push(run(true));
        println!(
            "round {r}: {:.1} ns without, {:.1} ns with idle 1 MiB buffers",
            plain[r], idle[r]
        );
    }
    let (p, i) = (Summary::of(plain), Summary::of(idle));
    println!(
        "median: {:.1} ns without (min {:.1}), {:.1} ns with idle 1 MiB buffers (min {:.1})",
        p.median, p.min, i.median, i.min
    );
}
