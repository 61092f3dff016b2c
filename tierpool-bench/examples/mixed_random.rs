//! Where the `mixed` workload's allocations for random sizes (log-uniform to 16 MiB) come
//! from: the sizes its two streams touch, and what one pass of each thread allocates when
//! the pool's other sizes (the short and medium cases) ran in between, as the report
//! interleaves them.
//!
//! `cargo run --release -p tierpool-bench --example mixed_random [cap MiB, default 64] [pause ms, default 1100]`
//!
//! Prints the working set (the tiers each thread's stream touches, and what one buffer of
//! each takes), then ten rounds: the short and medium streams once, a pause, and one pass
//! over each random stream on two fresh threads (one pass is what the report's counting pass
//! measures). For each round: allocations per packet (every allocation the process made
//! during the pass, thread start-up included), fresh buffers (the pool's misses) and their
//! bytes, and what was released at the retained cap. With `MIXED_VERBOSE=1`, also each tier
//! that allocated in the pass: its size, fresh buffers, buffers the pool kept of it before the
//! pass, those it released between the passes and during this one, and its hits. With
//! `MIXED_CACHE=<KiB>`, the pool's `thread_cache_bytes`.

use std::collections::BTreeSet;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use tierpool_bench::contenders::Tierpool;
use tierpool_bench::harness::alloc::counting;
use tierpool_bench::workloads::mixed::{read_packets, Dist, Stream};
use tierpool_bench::workloads::parallel;

/// Packets per random stream (the report's full shape).
const PACKETS: usize = 64;

fn mib(b: u64) -> f64 {
    b as f64 / (1 << 20) as f64
}

fn main() {
    let mut args = std::env::args().skip(1);
    let cap_mib: usize = args.next().map_or(64, |a| a.parse().expect("a cap in MiB"));
    let pause_ms: u64 = args
        .next()
        .map_or(1100, |a| a.parse().expect("a pause in ms"));
    let mut builder = tierpool::BufferPool::builder().max_retained_bytes(cap_mib << 20);
    if let Ok(kib) = std::env::var("MIXED_CACHE") {
        builder = builder.thread_cache_bytes(kib.parse::<usize>().unwrap() << 10);
    }
    if std::env::var_os("MIXED_POW2").is_some() {
        builder = builder.power_of_two_tiers(256, 16 << 20);
    }
    if let Some(split) = std::env::var_os("MIXED_SPLIT") {
        // Four tiers per doubling below `split` KiB, `MIXED_STEPS` (default 1) above.
        let split: usize = split.to_str().unwrap().parse::<usize>().unwrap() << 10;
        let steps: usize = std::env::var("MIXED_STEPS").map_or(1, |s| s.parse().unwrap());
        let low = tierpool::BufferPool::builder()
            .geometric_tiers(256, split, 4)
            .build()
            .unwrap();
        let high = tierpool::BufferPool::builder()
            .geometric_tiers(split, 16 << 20, steps)
            .build()
            .unwrap();
        let mut sizes: Vec<usize> = low.tier_sizes().to_vec();
        sizes.extend(high.tier_sizes().iter().filter(|&&s| s > split));
        println!("tiers: {}", sizes.len());
        builder = builder.tiers(sizes);
    }
    let pool = builder.build().expect("a valid cap");
    // The report's streams: seeds 2d + 1 and 2d + 2 for distribution d.
    let random = [
        Stream::new(Dist::Random, PACKETS, 5),
        Stream::new(Dist::Random, PACKETS, 6),
    ];
    let others = [
        [
            Stream::new(Dist::Short, 20_000, 1),
            Stream::new(Dist::Short, 20_000, 2),
        ],
        [
            Stream::new(Dist::Medium, 2_000, 3),
            Stream::new(Dist::Medium, 2_000, 4),
        ],
    ];
    working_set(pool.tier_sizes(), &random);
    let c = Tierpool(pool.clone());
    let hits = AtomicU64::new(0);
    let mut prev: Option<tierpool::Stats> = None;
    for round in 0..10 {
        for s in &others {
            parallel(2, |i| {
                read_packets(&c, &s[i], 0, s[i].len() as u64, &hits);
            });
        }
        std::thread::sleep(Duration::from_millis(pause_ms));
        let before = pool.stats();
        let (_, count) = counting(|| {
            parallel(2, |i| {
                read_packets(&c, &random[i], 0, PACKETS as u64, &hits);
            })
        });
        let after = pool.stats();
        let fresh: u64 = after
            .tiers
            .iter()
            .zip(&before.tiers)
            .map(|(a, b)| (a.misses - b.misses) * a.size as u64)
            .sum();
        if std::env::var_os("MIXED_VERBOSE").is_some() {
            let list: Vec<String> = after
                .tiers
                .iter()
                .zip(&before.tiers)
                .enumerate()
                .filter(|(_, (a, b))| a.misses > b.misses)
                .map(|(t, (a, b))| {
                    let p = prev.as_ref().map_or(b, |p: &tierpool::Stats| &p.tiers[t]);
                    format!(
                        "{}K x{} (kept {}, discarded {}/{} between, {} in)",
                        a.size >> 10,
                        a.misses - b.misses,
                        b.retained_buffers,
                        b.discarded - p.discarded,
                        a.discarded - b.discarded,
                        a.hits - b.hits
                    )
                })
                .collect();
            println!("  fresh: {}", list.join(", "));
            println!(
                "  before: retained {:.1} MiB in {} caches",
                mib(before.retained_bytes as u64),
                before.thread_caches
            );
        }
        let packets = (2 * PACKETS) as f64;
        prev = Some(after.clone());
        println!(
            "cap {cap_mib} MiB, round {round}: {:.3} allocations per packet; {} fresh buffers ({:.1} MiB); released at the cap {:.1} MiB; retained after {:.1} MiB",
            count.allocs as f64 / packets,
            after.misses - before.misses,
            mib(fresh),
            mib(after.released_at_cap - before.released_at_cap),
            mib(after.retained_bytes as u64),
        );
        if std::env::var_os("MIXED_VERBOSE").is_some() {
            println!(
                "  after: depot {:.1} MiB, {} caches",
                mib(after.depot_bytes as u64),
                after.thread_caches
            );
        }
    }
}

/// Prints the tiers each stream touches and one buffer of each: what the pool must retain
/// for a pass to allocate nothing, by exact tier and by power of two.
fn working_set(tiers: &[usize], streams: &[Stream; 2]) {
    let mut exact = [BTreeSet::new(), BTreeSet::new()];
    let mut pow2 = [BTreeSet::new(), BTreeSet::new()];
    for (i, s) in streams.iter().enumerate() {
        for k in 0..s.len() {
            let n = s.packet(k).len();
            if let Some(&t) = tiers.iter().find(|&&t| t >= n) {
                exact[i].insert(t);
            }
            pow2[i].insert(n.max(256).next_power_of_two());
        }
    }
    let sum = |s: &BTreeSet<usize>| mib(s.iter().sum::<usize>() as u64);
    for (name, sets) in [("tiers", &exact), ("powers of two", &pow2)] {
        let union: BTreeSet<usize> = sets[0].union(&sets[1]).copied().collect();
        println!(
            "working set by {name}: thread 0 {} sizes ({:.1} MiB), thread 1 {} ({:.1} MiB), both {} ({:.1} MiB)",
            sets[0].len(),
            sum(&sets[0]),
            sets[1].len(),
            sum(&sets[1]),
            union.len(),
            sum(&union)
        );
    }
}
