//! Multi-thread stress with invariant checks: more threads than cores doing random
//! get / hand-off / drop while another thread trims (reclaiming every thread's cache while
//! its owner works on it), bounded by operation count.
//!
//! Checked at every step: no buffer is ever handed out twice at once (by address, among all
//! outstanding buffers), every buffer is at least as large as asked, and the bytes a thread
//! wrote are still there when it (or the thread it handed the buffer to) drops it. Checked at
//! the end: caps held, counters consistent.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread;

use tierpool::{BufferPool, PooledBuf};

use crate::common;
use crate::common::{Outstanding, Rng};

fn stamp(b: &mut PooledBuf, tag: u8) {
    b.clear();
    let len = b.capacity().min(64);
    b.resize(len, tag);
}

fn verify_and_drop(b: PooledBuf, out: &Outstanding) {
    let tag = b[0];
    assert!(
        b.iter().all(|&x| x == tag),
        "buffer contents changed while held"
    );
    out.release(&b);
    drop(b);
}

fn worker(
    id: u64,
    pool: BufferPool,
    out: Arc<Outstanding>,
    tx: SyncSender<PooledBuf>,
    rx: Arc<Mutex<Receiver<PooledBuf>>>,
    ops: u64,
) {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (id + 1).wrapping_mul(0x2545_F491_4F6C_DD1D));
    let mut held: Vec<PooledBuf> = Vec::new();
    for _ in 0..ops {
        match rng.below(10) {
            0..=4 => {
                let n = match rng.below(4) {
                    0 => rng.below(300) as usize,
                    1 => rng.below(70_000) as usize,
                    2 if !cfg!(miri) => rng.below(2 << 20) as usize,
                    _ => 4096,
                };
                let mut b = pool.get(n);
                assert!(b.capacity() >= n);
                assert!(b.is_empty());
                out.take(&b);
                stamp(
                    &mut b,
                    (id as u8).wrapping_mul(31).wrapping_add(n as u8) | 1,
                );
                held.push(b);
            }
            5 | 6 if !held.is_empty() => {
                let i = rng.below(held.len() as u64) as usize;
                verify_and_drop(held.swap_remove(i), &out);
            }
            7 if !held.is_empty() => {
                // Hand off to whichever thread receives next; never block on a full channel.
                let b = held.pop().unwrap();
                if let Err(e) = tx.try_send(b) {
                    let b = match e {
                        std::sync::mpsc::TrySendError::Full(b) => b,
                        std::sync::mpsc::TrySendError::Disconnected(b) => b,
                    };
                    verify_and_drop(b, &out);
                }
            }
            8 => {
                if let Ok(b) = rx.lock().unwrap().try_recv() {
                    held.push(b);
                }
            }
            _ => {
                if held.len() > 32 {
                    for b in held.drain(..) {
                        verify_and_drop(b, &out);
                    }
                }
            }
        }
    }
    for b in held {
        verify_and_drop(b, &out);
    }
}

#[test]
fn many_threads_random_hand_off_with_concurrent_trim() {
    let cap = 8 << 20;
    let per_thread = 256 << 10;
    let pool = BufferPool::builder()
        .max_retained_bytes(cap)
        .thread_cache_bytes(per_thread)
        .tiers(if cfg!(miri) {
            vec![64, 256, 4096, 65536]
        } else {
            tierpool::BufferPool::new().tier_sizes().to_vec()
        })
        .decay_interval(std::time::Duration::from_millis(5))
        .background_trim(true)
        .build()
        .unwrap();
    let out = Arc::new(Outstanding::default());
    let (tx, rx) = sync_channel(64);
    let rx = Arc::new(Mutex::new(rx));
    let stop = Arc::new(AtomicBool::new(false));
    let trimmer = {
        let pool = pool.clone();
        let stop = stop.clone();
        thread::spawn(move || {
            let mut trims = 0;
            while !stop.load(Ordering::Relaxed) {
                pool.trim();
                let s = pool.stats();
                assert!(s.depot_bytes <= cap, "{s}");
                trims += 1;
                thread::sleep(std::time::Duration::from_micros(if cfg!(miri) {
                    20_000
                } else {
                    200
                }));
            }
            trims
        })
    };
    let threads = if cfg!(miri) { 3 } else { 8 };
    // `tierpool_sanitized`: .ci/run's ThreadSanitizer build (200,000 took 71 s there).
    let ops = if cfg!(debug_assertions) {
        3_000
    } else if cfg!(tierpool_sanitized) {
        60_000
    } else {
        200_000
    };
    let handles: Vec<_> = (0..threads)
        .map(|id| {
            let (pool, out, tx, rx) = (pool.clone(), out.clone(), tx.clone(), rx.clone());
            thread::spawn(move || worker(id, pool, out, tx, rx, ops))
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    assert!(trimmer.join().unwrap() > 0);
    // Drain buffers still in the channel.
    drop(tx);
    for b in rx.lock().unwrap().try_iter() {
        verify_and_drop(b, &out);
    }
    assert!(out.0.lock().unwrap().is_empty(), "every buffer came back");
    let s = pool.stats();
    common::assert_books_balance(&s);
    assert_eq!(
        s.returned, s.gets,
        "every buffer handed out was returned: {s}"
    );
    assert!(s.depot_bytes <= cap);
    // Workers exited; only the main thread (which drained the channel) may still have a cache.
    assert!(s.thread_caches <= 1, "{s}");
    // The depot and every cache together, the large slot included: one number.
    assert!(
        s.retained_bytes <= common::retained_bound(&pool, s.thread_caches),
        "{s}"
    );
    assert!(s.hits > 0);
}
