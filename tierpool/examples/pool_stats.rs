//! Exercises a pool the way a server's receive path does and prints what it did.
//!
//! Three phases, each followed by the pool's statistics:
//! 1. one thread: a mixed stream of message sizes, each read into a pooled buffer and released;
//! 2. shared receive buffers: reader threads take buffers, worker threads drop them;
//! 3. a burst of 2,000 x 16 KiB, then a quiet phase in which retained memory decays.
//!
//! `cargo run --release -p tierpool --example pool_stats`

use std::sync::mpsc::sync_channel;
use std::thread;
use std::time::{Duration, Instant};

use tierpool::{BufferPool, PooledBuf};

/// A small deterministic generator of message sizes: mostly small, some medium, a few large.
struct Sizes(u64);

impl Sizes {
    fn next(&mut self) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        match self.0 % 100 {
            0..=59 => 16 + (self.0 >> 8) as usize % 240, // short: < 256 B
            60..=94 => 1024 + (self.0 >> 8) as usize % 63_000, // medium: 1 KiB - 64 KiB
            _ => (1 << 20) + (self.0 >> 8) as usize % 64, // 1 MiB + a header
        }
    }
}

fn fill(buf: &mut PooledBuf, n: usize, byte: u8) {
    buf.resize(n, byte);
}

fn main() {
    let pool = BufferPool::builder()
        .decay_interval(Duration::from_millis(200))
        .build()
        .expect("valid configuration");
    println!(
        "pool: {} tiers from {} B to {} B, depot cap {} MiB, {} KiB per thread cache\n",
        pool.tier_sizes().len(),
        pool.tier_sizes()[0],
        pool.tier_sizes().last().unwrap(),
        pool.max_retained_bytes() >> 20,
        pool.thread_cache_bytes() >> 10
    );

    // Phase 1: one thread, mixed sizes.
    let mut sizes = Sizes(0x2545_F491_4F6C_DD1D);
    let start = Instant::now();
    let messages = 200_000;
    let mut checksum = 0u64;
    for i in 0..messages {
        let n = sizes.next();
        let mut buf = pool.get(n);
        fill(&mut buf, n, i as u8);
        checksum = checksum.wrapping_add(buf[n - 1] as u64);
    }
    println!(
        "phase 1: {messages} messages on one thread in {:?} (checksum {checksum})\n{}",
        start.elapsed(),
        pool.stats()
    );

    // Phase 2: readers take buffers, workers release them on other threads.
    let start = Instant::now();
    let (tx, rx) = sync_channel::<PooledBuf>(256);
    let rx = std::sync::Arc::new(std::sync::Mutex::new(rx));
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let rx = rx.clone();
            thread::spawn(move || {
                let mut n = 0u64;
                while let Ok(buf) = rx.lock().unwrap().recv() {
                    n += buf.len() as u64;
                }
                n
            })
        })
        .collect();
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (pool, tx) = (pool.clone(), tx.clone());
            thread::spawn(move || {
                let mut sizes = Sizes(0x9E37_79B9_7F4A_7C15 + r);
                for i in 0..50_000 {
                    let n = sizes.next().min(64 << 10);
                    let mut buf = pool.get(n);
                    fill(&mut buf, n, i as u8);
                    tx.send(buf).unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    for r in readers {
        r.join().unwrap();
    }
    let bytes: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    println!(
        "phase 2: 100000 buffers handed between threads ({} MiB) in {:?}\n{}",
        bytes >> 20,
        start.elapsed(),
        pool.stats()
    );

    // Phase 3: a burst, then a quiet phase.
    let burst: Vec<_> = (0..2000).map(|_| pool.get(16 << 10)).collect();
    drop(burst);
    println!(
        "phase 3: after a burst of 2000 x 16 KiB: {} KiB retained",
        pool.stats().retained_bytes >> 10
    );
    let quiet = Instant::now();
    while quiet.elapsed() < Duration::from_millis(800) {
        drop(pool.get(16 << 10));
        thread::sleep(Duration::from_millis(1));
    }
    println!(
        "         after 800 ms at ~1 get/ms (decay interval 200 ms): {} KiB retained\n",
        pool.stats().retained_bytes >> 10
    );
    pool.trim();
    println!("after trim():\n{}", pool.stats());
}
