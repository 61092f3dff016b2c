//! Soak and fault tests: bounded by operation count, meant for release mode
//! (`cargo test -p tierpool --release --test soak`; the debug run uses fewer operations).
//!
//! Many threads (more than cores) take, hand off and drop buffers of random sizes while one
//! thread trims and the background trimmer runs; some threads panic while holding buffers,
//! some exit with full caches; pools are dropped while their buffers are still out on other
//! threads. After each round: no buffer was ever out twice at once (checked by address among
//! outstanding buffers), the retained bytes stayed within the documented bound, the counters
//! add up, and — after the pools are gone — the live bytes counted by the global allocator are
//! back at the baseline.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use tierpool::{BufferPool, PooledBuf, Stats};

mod common;
use common::{Outstanding, Rng};

#[global_allocator]
static GLOBAL: common::Counting = common::Counting;

/// Operations per worker thread (`tierpool_sanitized`: .ci/run's ThreadSanitizer build, about
/// ten times slower per operation).
const OPS: u64 = if cfg!(debug_assertions) {
    5_000
} else if cfg!(tierpool_sanitized) {
    15_000
} else {
    60_000
};
const THREADS: usize = 12;
const CAP: usize = 4 << 20;
const THREAD_CACHE: usize = 256 << 10;

/// A buffer with its owner's stamp in its first and last byte. However it is dropped (by its
/// holder, with a channel, or while a panicking thread unwinds), it checks its contents and
/// leaves the set of outstanding buffers just before going back to the pool.
struct Held {
    buf: Option<PooledBuf>,
    stamp: u8,
    out: Arc<Outstanding>,
}

impl Drop for Held {
    fn drop(&mut self) {
        let buf = self.buf.take().expect("dropped once");
        let (first, last) = (buf[0], buf[buf.len() - 1]);
        assert!(
            first == self.stamp && last == self.stamp,
            "contents changed while held"
        );
        self.out.release(&buf);
        drop(buf);
    }
}

fn take(pool: &BufferPool, out: &Arc<Outstanding>, rng: &mut Rng, stamp: u8) -> Held {
    let n = 1 + rng.below(200_000) as usize;
    let mut buf = pool.get(n);
    assert!(buf.capacity() >= n, "asked {n}, got {}", buf.capacity());
    out.take(&buf);
    // Stamp a prefix (writing all of a 200 KB buffer is what makes the run slow, most of all
    // under ThreadSanitizer, and the first and last byte of a prefix show corruption as well).
    buf.resize(n.min(512), stamp);
    Held {
        buf: Some(buf),
        stamp,
        out: out.clone(),
    }
}

fn release(h: Held) {
    drop(h);
}

/// The counters add up, and retained bytes are within the cap (plus a margin: read while
/// other threads work, a buffer moving between a cache and the depot can be counted in
/// both). Only the identity that `stats()` guarantees by construction (the returns identity
/// holds once they stop; `common::assert_books_balance`).
fn check(s: &Stats, threads_with_caches: usize) {
    assert_eq!(s.gets, s.hits + s.misses + s.oversize, "{s}");
    assert!(
        s.retained_bytes <= CAP + threads_with_caches * THREAD_CACHE,
        "retained {} above the bound",
        s.retained_bytes
    );
    assert!(
        s.depot_bytes <= CAP,
        "depot {} above its cap",
        s.depot_bytes
    );
}

enum Fate {
    /// Runs to the end and drops what it holds.
    Finish,
    /// Exits holding a full cache (returns many buffers just before exiting).
    ExitFull,
    /// Panics while holding buffers.
    Panic,
}

fn worker(
    pool: BufferPool,
    out: Arc<Outstanding>,
    seed: u64,
    fate: Fate,
    tx: SyncSender<Held>,
    rx: Receiver<Held>,
) {
    let mut rng = Rng(seed);
    let mut mine: Vec<Held> = Vec::new();
    for op in 0..OPS {
        match rng.below(10) {
            0..=3 => mine.push(take(&pool, &out, &mut rng, seed as u8)),
            4..=5 if !mine.is_empty() => {
                let i = rng.below(mine.len() as u64) as usize;
                release(mine.swap_remove(i));
            }
            6 if !mine.is_empty() => {
                let h = mine.pop().unwrap();
                if let Err(e) = tx.try_send(h) {
                    let h = match e {
                        std::sync::mpsc::TrySendError::Full(h)
                        | std::sync::mpsc::TrySendError::Disconnected(h) => h,
                    };
                    release(h);
                }
            }
            _ => {
                while let Ok(h) = rx.try_recv() {
                    release(h);
                }
            }
        }
        if mine.len() > 64 {
            release(mine.swap_remove(0));
        }
        if matches!(fate, Fate::Panic) && op == OPS / 2 {
            // The buffers it holds (and those queued for it) go back while it unwinds.
            panic!("worker {seed} panics while holding {} buffers", mine.len());
        }
    }
    if matches!(fate, Fate::ExitFull) {
        // Return many small buffers at once: the thread exits with its cache full.
        let small: Vec<PooledBuf> = (0..500).map(|_| pool.get(512)).collect();
        drop(small);
    }
    drop(mine);
    while let Ok(h) = rx.try_recv() {
        release(h);
    }
}

fn round(seed: u64) {
    let out = Arc::new(Outstanding::default());
    let pool = BufferPool::builder()
        .max_retained_bytes(CAP)
        .thread_cache_bytes(THREAD_CACHE)
        .decay_interval(Duration::from_millis(20))
        .background_trim(true)
        .build()
        .unwrap();
    // A ring of channels: each worker sends to the next.
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..THREADS).map(|_| sync_channel::<Held>(32)).unzip();
    let stop = Arc::new(AtomicBool::new(false));
    let trimmer = {
        let (pool, stop) = (pool.clone(), stop.clone());
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                pool.trim();
                check(&pool.stats(), THREADS + 2);
                thread::sleep(Duration::from_millis(3));
            }
        })
    };
    let mut handles = Vec::new();
    for (i, rx) in rxs.into_iter().enumerate() {
        let tx = txs[(i + 1) % THREADS].clone();
        let fate = match i % 4 {
            0 => Fate::Panic,
            1 => Fate::ExitFull,
            _ => Fate::Finish,
        };
        let (pool, out) = (pool.clone(), out.clone());
        let seed = seed * 100 + i as u64;
        handles.push(thread::spawn(move || worker(pool, out, seed, fate, tx, rx)));
    }
    drop(txs);
    let mut panicked = 0;
    for h in handles {
        if h.join().is_err() {
            panicked += 1;
        }
    }
    assert_eq!(
        panicked,
        THREADS.div_ceil(4),
        "the panicking workers panicked, no others"
    );
    stop.store(true, Ordering::Relaxed);
    trimmer.join().unwrap();
    let s = pool.stats();
    check(&s, THREADS + 2);
    assert!(s.hits > 0, "{s}");
    assert!(
        out.0.lock().unwrap().is_empty(),
        "buffers still registered as out"
    );
}

#[test]
fn soak_many_threads_faults_trims_and_the_memory_comes_back() {
    // Warm whatever the runtime allocates once (thread spawning, panic machinery).
    let _ = thread::spawn(|| std::panic::catch_unwind(|| panic!("warm-up"))).join();
    let baseline = common::live_bytes();
    for seed in 1..=3 {
        round(seed);
    }
    // A pool dropped while its buffers are out on other threads.
    let out = Arc::new(Outstanding::default());
    let pool = BufferPool::new();
    let mut rng = Rng(99);
    let held: Vec<Held> = (0..200).map(|_| take(&pool, &out, &mut rng, 7)).collect();
    let (tx, rx) = sync_channel::<Vec<Held>>(1);
    let holder = {
        thread::spawn(move || {
            let held = rx.recv().unwrap();
            thread::sleep(Duration::from_millis(20)); // the pool is dropped meanwhile
            drop(held);
        })
    };
    tx.send(held).unwrap();
    drop(pool);
    holder.join().unwrap();
    drop(out);
    let after = common::live_bytes();
    // The pool registry keeps a slot per pool alive at once; panics keep a little state.
    assert!(
        after - baseline < 64 << 10,
        "{} bytes still live after every pool and thread is gone",
        after - baseline
    );
}
