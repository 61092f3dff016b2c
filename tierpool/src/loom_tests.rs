//! loom models of every place where threads meet: the depot exchange, decay and trim racing
//! with get/put, pool close racing with returns, and counter publication vs. `stats()`.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p tierpool --lib --release loom`.
//! Each model is small (two or three threads, a handful of buffers) so that loom explores every
//! interleaving in seconds.

use loom::thread;

use crate::config::Builder;
use crate::depot::Depot;
use crate::pool::Shared;
use crate::stats::{bump, LocalCounters};
use crate::sync::Ordering;
use loom::sync::Arc;

fn bufs(caps: &[usize]) -> Vec<Vec<u8>> {
    caps.iter().map(|&c| Vec::with_capacity(c)).collect()
}

/// Drains the depot's tier `t` and returns the sorted capacities found there.
fn drain(d: &Depot, t: usize) -> Vec<usize> {
    let mut out = Vec::new();
    while let Some(b) = d.take_one(t) {
        out.push(b.capacity());
    }
    out.sort_unstable();
    out
}

/// Two thread caches exchange batches through one tier: nothing is lost or duplicated,
/// the byte count matches what is present, and the cap holds.
#[test]
fn loom_depot_batch_exchange_conserves_buffers() {
    loom::model(|| {
        let d = Arc::new(Depot::new(1, 100));
        d.put_one(0, Vec::with_capacity(10)).unwrap();
        let d1 = d.clone();
        let producer = thread::spawn(move || {
            let mut src = bufs(&[11, 12]);
            let (n, bytes) = d1.put_from(0, &mut src, 2);
            assert_eq!(bytes, src_caps_moved(&[11, 12], n));
            src.into_iter().map(|b| b.capacity()).collect::<Vec<_>>()
        });
        let d2 = d.clone();
        let consumer = thread::spawn(move || {
            let mut dst = Vec::with_capacity(2);
            d2.take_into(0, &mut dst, 2, usize::MAX);
            dst.into_iter().map(|b| b.capacity()).collect::<Vec<_>>()
        });
        let left = producer.join().unwrap();
        let taken = consumer.join().unwrap();
        assert!(d.bytes() <= 100);
        let present_bytes = d.bytes();
        let mut all = drain(&d, 0);
        assert_eq!(present_bytes, all.iter().sum::<usize>());
        all.extend(left);
        all.extend(taken);
        all.sort_unstable();
        assert_eq!(all, vec![10, 11, 12], "every buffer exactly once");
    });
}

fn src_caps_moved(caps: &[usize], n: usize) -> usize {
    caps[..n].iter().sum()
}

/// Two threads push into a depot that can hold only one of their buffers: the cap holds.
#[test]
fn loom_depot_cap_holds_under_contention() {
    loom::model(|| {
        let d = Arc::new(Depot::new(2, 15));
        let handles: Vec<_> = (0..2)
            .map(|t| {
                let d = d.clone();
                thread::spawn(move || d.put_one(t, Vec::with_capacity(10)).is_ok())
            })
            .collect();
        let kept: usize = handles
            .into_iter()
            .map(|h| h.join().unwrap() as usize)
            .sum();
        assert_eq!(kept, 1);
        assert_eq!(d.bytes(), 10);
    });
}

/// Decay and trim race with a take-and-return cycle: the count stays exact.
#[test]
fn loom_decay_and_trim_race_with_get_put() {
    loom::model(|| {
        let d = Arc::new(Depot::new(1, 1000));
        d.put_from(0, &mut bufs(&[10, 20]), 2);
        d.decay(); // starts an interval with low water 2
        let d1 = d.clone();
        let user = thread::spawn(move || {
            if let Some(b) = d1.take_one(0) {
                let _ = d1.put_one(0, b);
            }
        });
        let d2 = d.clone();
        let trimmer = thread::spawn(move || {
            d2.decay();
            d2.trim();
        });
        user.join().unwrap();
        trimmer.join().unwrap();
        let bytes = d.bytes();
        let present = drain(&d, 0);
        assert_eq!(bytes, present.iter().sum::<usize>());
        assert!(
            present.len() <= 1,
            "trim ran; at most the buffer returned after it remains"
        );
    });
}

/// Closing races with a thread cache handing buffers back: after both, nothing is retained,
/// whichever went first.
#[test]
fn loom_close_races_with_returns() {
    loom::model(|| {
        let d = Arc::new(Depot::new(1, 1000));
        let d1 = d.clone();
        let returner = thread::spawn(move || {
            let _ = d1.put_one(0, Vec::with_capacity(10));
            let mut src = bufs(&[20]);
            d1.put_from(0, &mut src, 1);
        });
        d.close();
        returner.join().unwrap();
        assert_eq!(d.bytes(), 0);
        assert!(d.take_one(0).is_none());
    });
}

/// A thread's counters are read by `stats()` while the thread counts and then detaches
/// (thread exit): each count is seen exactly once, never twice, never lost after the join.
#[test]
fn loom_counters_publish_and_detach_exactly_once() {
    loom::model(|| {
        let config = Builder::new().tiers([64]).validate().unwrap();
        let shared = Arc::new(Shared::new(config));
        let counters = std::sync::Arc::new(LocalCounters::new(1));
        shared.attach(counters.clone());
        let s1 = shared.clone();
        let worker = thread::spawn(move || {
            // Two returns onto the stack, one hit from it: one buffer stays retained.
            bump(&counters.tiers[0].pushes, 1);
            bump(&counters.tiers[0].pushes, 1);
            bump(&counters.tiers[0].pops, 1);
            s1.detach(&counters);
        });
        let seen = shared.stats();
        assert!(seen.tiers[0].hits <= 1, "never double-counted: {seen:?}");
        assert!(
            seen.tiers[0].returned <= 2,
            "never double-counted: {seen:?}"
        );
        worker.join().unwrap();
        let after = shared.stats();
        assert_eq!(after.tiers[0].hits, 1);
        assert_eq!(after.tiers[0].returned, 2);
        assert_eq!(after.thread_caches, 0);
    });
}

/// Two threads notice the same new epoch at once: whichever wins the epoch CAS releases the
/// idle buffer, the other does nothing, and the depot's count stays exact.
#[test]
fn loom_concurrent_ticks_release_idle_buffers() {
    loom::model(|| {
        let config = Builder::new().tiers([64]).validate().unwrap();
        let shared = Arc::new(Shared::new(config));
        shared.depot.put_one(0, Vec::with_capacity(64)).unwrap();
        shared.depot.decay(); // low water = 1: the buffer is idle from here on
        let s1 = shared.clone();
        let t = thread::spawn(move || s1.tick(1));
        shared.tick(1);
        t.join().unwrap();
        assert_eq!(shared.depot.bytes(), 0, "the idle buffer was released");
        assert!(!shared.closed.load(Ordering::Relaxed));
    });
}

/// Views of one shared buffer cloned, sliced and dropped on three threads: exactly one of
/// them, the last, hands the buffer back, in every interleaving.
#[test]
fn loom_shared_views_hand_the_buffer_back_exactly_once() {
    use crate::shared::LAST_VIEWS;
    use crate::PooledBytes;
    use std::sync::atomic::Ordering::Relaxed;
    loom::model(|| {
        LAST_VIEWS.store(0, Relaxed);
        let all = PooledBytes::from(vec![1u8, 2, 3, 4]);
        let a = all.slice(..2);
        let mut b = all.clone();
        let t1 = thread::spawn(move || {
            assert_eq!(&a[..], &[1, 2]);
            drop(a);
        });
        let t2 = thread::spawn(move || {
            let tail = b.split_off(2);
            assert_eq!(&tail[..], &[3, 4]);
            drop((b, tail));
        });
        drop(all);
        t1.join().unwrap();
        t2.join().unwrap();
        assert_eq!(LAST_VIEWS.load(Relaxed), 1);
    });
}
