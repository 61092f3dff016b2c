//! The cross-thread hand-off of `benches/cross_thread.rs`, measured the way this noisy VM
//! needs: contenders interleaved round by round, so that a switch between the VM's fast and
//! slow cross-core modes hits all of them alike, and the minimum and median over the rounds
//! reported for each.
//!
//! `cargo run --release -p tierpool --example cross_thread_interleaved [rounds] [buffers]`

#[path = "../benches/common/mod.rs"]
mod common;

use common::*;

/// Nanoseconds per buffer for `count` hand-offs of `n`-byte buffers.
fn ns_per_buffer<C: Contender>(c: &C, n: usize, count: u64) -> f64 {
    hand_off(c, n, count).as_nanos() as f64 / count as f64
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().map_or(30, |s| s.parse().expect("rounds"));
    let count: u64 = args.next().map_or(50_000, |s| s.parse().expect("buffers"));
    let pool = Tierpool(tierpool::BufferPool::new());
    let queue = QueuePool::new(1024);
    let (mi, je) = (mimalloc_vec(), jemalloc_vec());
    let names = [
        "tierpool",
        "ArrayQueue pool",
        "Vec (glibc)",
        "Vec (mimalloc)",
        "Vec (jemalloc)",
    ];
    for n in [4096usize, 65536] {
        let mut samples: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
        for _ in 0..rounds {
            samples[0].push(ns_per_buffer(&pool, n, count));
            samples[1].push(ns_per_buffer(&queue, n, count));
            samples[2].push(ns_per_buffer(&SystemVec, n, count));
            samples[3].push(ns_per_buffer(&mi, n, count));
            samples[4].push(ns_per_buffer(&je, n, count));
        }
        for s in &mut samples {
            s.sort_by(f64::total_cmp);
        }
        let (base_min, base_med) = (samples[0][0], samples[0][rounds / 2]);
        println!("\n{n} B, {rounds} interleaved rounds of {count} buffers (ns per buffer)\n");
        println!("| contender | min | median | max | min vs tierpool | median vs tierpool |");
        println!("|---|---:|---:|---:|---:|---:|");
        for (name, s) in names.iter().zip(&samples) {
            let (min, med, max) = (s[0], s[rounds / 2], s[rounds - 1]);
            println!(
                "| {name} | {min:.1} | {med:.1} | {max:.1} | {:.2}x | {:.2}x |",
                min / base_min,
                med / base_med
            );
        }
    }
}
