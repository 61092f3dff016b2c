//! The `mixed` workload's random sizes (log-uniform to 16 MiB, two threads) against the
//! retained cap: tierpool and a `Mutex<Vec>` pool per power-of-two class (which keeps
//! everything) in alternating samples, as the report interleaves its contenders, with a
//! pause between rounds (the report's other cases run there).
//!
//! `cargo run --release -p tierpool-bench --example mixed_cap [pause ms, default 700] [passes per sample, default 3] [cap MiB, default 64] [thread cache KiB, default 8192]`
//!
//! Prints, per round: each pool's time per packet and their ratio, the process's minor page
//! faults during each sample (a buffer the pool released and allocated again costs the
//! allocator fresh pages; the `Mutex<Vec>` pool's samples fault only while it grows), and
//! tierpool's misses (fresh buffers), bytes released at the cap and retained bytes after the
//! sample. A pool that holds the working set under the cap misses nothing and faults nothing
//! after its first rounds.

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use tierpool_bench::contenders::{Contender, MutexPool, Tierpool};
use tierpool_bench::workloads::mixed::{read_packets, Dist, Stream};
use tierpool_bench::workloads::parallel;

/// Packets per random stream (the report's full shape).
const PACKETS: u64 = 64;

/// One sample: `passes` passes over each thread's stream on two fresh threads (the report's
/// shape); nanoseconds per packet and the minor faults taken meanwhile.
fn sample<C: Contender>(c: &C, s: &[Stream; 2], passes: u64, hits: &AtomicU64) -> (f64, i64) {
    let before = minor_faults();
    let t = parallel(2, |i| {
        read_packets(c, &s[i], 0, passes * PACKETS, hits);
    });
    let ns = t.as_nanos() as f64 / (passes * 2 * PACKETS) as f64;
    (ns, minor_faults() - before)
}

/// The process's minor page faults so far.
fn minor_faults() -> i64 {
    // SAFETY: `getrusage` writes one `rusage`, which lives on this stack for the call.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u.ru_minflt
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut next = |what: &str, default: u64| {
        args.next().map_or(default, |a| {
            a.parse().unwrap_or_else(|_| panic!("{what}: {a:?}"))
        })
    };
    let pause = next("pause in ms", 700);
    let passes = next("passes per sample", 3).max(1);
    let cap_mib = next("cap in MiB", 64) as usize;
    let cache_kib = next("thread cache in KiB", 8192) as usize;
    let pool = tierpool::BufferPool::builder()
        .max_retained_bytes(cap_mib << 20)
        .thread_cache_bytes(cache_kib << 10)
        .build()
        .expect("a valid configuration");
    let (tp, mp) = (Tierpool(pool.clone()), MutexPool::new());
    // The report's random streams (seeds 5 and 6).
    let streams = [
        Stream::new(Dist::Random, PACKETS as usize, 5),
        Stream::new(Dist::Random, PACKETS as usize, 6),
    ];
    let hits = AtomicU64::new(0);
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    println!("cap {cap_mib} MiB, thread caches {cache_kib} KiB, {passes} passes per sample, {pause} ms between rounds");
    for round in 0..25 {
        let before = pool.stats();
        let (t_ns, t_faults) = sample(&tp, &streams, passes, &hits);
        let (m_ns, m_faults) = sample(&mp, &streams, passes, &hits);
        // Read after the other pool's sample: by then tierpool's threads have handed their
        // caches back (they do so after `parallel`'s scope returns, and a snapshot taken
        // meanwhile can count a buffer twice: `Stats`).
        let after = pool.stats();
        println!(
            "round {round:2}: tierpool {t_ns:7.0} ns/packet ({t_faults:5} faults), Mutex<Vec> {m_ns:7.0} ({m_faults:5}): {:.3}x | tierpool missed {:2}, released at the cap {:5.1} MiB, retains {:.1} MiB",
            t_ns / m_ns,
            after.misses - before.misses,
            mib(after.released_at_cap - before.released_at_cap),
            mib(after.retained_bytes as u64),
        );
        std::thread::sleep(Duration::from_millis(pause));
    }
}
