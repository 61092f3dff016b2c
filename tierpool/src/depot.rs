//! The shared depot: where thread caches exchange batches of buffers.
//!
//! One stack of buffers per tier, each behind its own lock on its own cache line, plus one
//! atomic byte count for the whole depot that enforces `max_retained_bytes`.
//!
//! # Invariants
//! - `bytes` is the sum of the capacities of all buffers in all tier stacks, except transiently
//!   inside an operation: a byte count is *reserved* (added) before buffers are pushed and
//!   *released* (subtracted) after they are popped, so `bytes <= cap` at every instant and the
//!   buffers actually present never exceed `bytes`.
//! - Every buffer in tier `t`'s stack has capacity `>= sizes[t]` (callers file buffers with
//!   [`Classes::for_put`](crate::class::Classes::for_put)), so handing one out never makes a
//!   false hit.
//! - Once `closed` is set, no buffer stays in the depot: [`Depot::close`] empties every tier
//!   after setting the flag, and every push checks the flag under the tier's lock, so a push
//!   either sees the flag (and refuses) or lands before `close` empties that tier.
//!
//! # Working-set decay
//! Each tier remembers the lowest its stack has been since the last interval boundary
//! (`low_water`). Those buffers were not needed during the whole interval, so at the boundary
//! they are released (Bonwick's depot working set, or Go's `sync.Pool` victim cache, with the
//! same effect: memory unused for one interval is gone by the end of the next).

use crate::stats::Stats;
use crate::sync::{lock, AtomicBool, AtomicUsize, CachePadded, Mutex, Ordering};

#[derive(Debug, Default)]
struct DepotTier {
    /// Oldest at the bottom, most recently returned at the top.
    bufs: Vec<Vec<u8>>,
    /// Sum of capacities in `bufs`.
    bytes: usize,
    /// Lowest `bufs.len()` since the last decay.
    low_water: usize,
    /// Buffers released by decay and trim.
    discarded: u64,
}

impl DepotTier {
    /// Removes the `n` oldest buffers and returns their total capacity. They are dropped here,
    /// under the tier's lock; decay and trim are rare, and dropping in place needs no scratch
    /// allocation.
    fn release_oldest(&mut self, n: usize) -> usize {
        let n = n.min(self.bufs.len());
        let freed: usize = self.bufs.drain(..n).map(|b| b.capacity()).sum();
        if n > 0 && self.bufs.is_empty() {
            // Free the stack's own storage too: it was allocated while the buffers came in,
            // so it often sits above them in the heap, and a malloc that returns memory only
            // from the top of its heap (glibc) could give none of them back while it lived.
            self.bufs = Vec::new();
        }
        self.bytes -= freed;
        self.discarded += n as u64;
        self.low_water = self.low_water.min(self.bufs.len());
        freed
    }
}

/// The shared, bounded store of retained buffers, one stack per tier.
#[derive(Debug)]
pub(crate) struct Depot {
    tiers: Box<[CachePadded<Mutex<DepotTier>>]>,
    bytes: CachePadded<AtomicUsize>,
    cap: usize,
    closed: AtomicBool,
}

impl Depot {
    pub(crate) fn new(tiers: usize, cap: usize) -> Self {
        Depot {
            tiers: (0..tiers)
                .map(|_| CachePadded(Mutex::new(DepotTier::default())))
                .collect(),
            bytes: CachePadded(AtomicUsize::new(0)),
            cap,
            closed: AtomicBool::new(false),
        }
    }

    /// Bytes currently retained in the depot.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Reserves `n` bytes of the cap; false if they do not fit.
    fn reserve(&self, n: usize) -> bool {
        // Relaxed is enough: the count is only a budget. The buffers themselves are published
        // by the tier's lock, and no reader infers the presence of a buffer from this count.
        self.bytes
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |cur| {
                cur.checked_add(n).filter(|&total| total <= self.cap)
            })
            .is_ok()
    }

    fn unreserve(&self, n: usize) {
        if n > 0 {
            self.bytes.fetch_sub(n, Ordering::Relaxed);
        }
    }

    /// Moves up to `max` of the oldest buffers of `src` (a thread cache's stack for tier `t`)
    /// into the depot, as far as the cap allows. Returns `(moved, moved_bytes)`; buffers that did
    /// not fit stay in `src`.
    pub(crate) fn put_from(&self, t: usize, src: &mut Vec<Vec<u8>>, max: usize) -> (usize, usize) {
        let want = max.min(src.len());
        if want == 0 {
            return (0, 0);
        }
        let mut tier = lock(&self.tiers[t]);
        if self.closed.load(Ordering::Relaxed) {
            return (0, 0);
        }
        // Reserve the whole batch at once; near the cap, fall back to one buffer at a time.
        let total: usize = src[..want].iter().map(Vec::capacity).sum();
        let (n, bytes) = if self.reserve(total) {
            (want, total)
        } else {
            let mut n = 0;
            let mut bytes = 0;
            while n < want && self.reserve(src[n].capacity()) {
                bytes += src[n].capacity();
                n += 1;
            }
            (n, bytes)
        };
        tier.bufs.extend(src.drain(..n));
        tier.bytes += bytes;
        (n, bytes)
    }

    /// Puts one buffer into tier `t`; gives it back if the cap is reached or the pool closed.
    pub(crate) fn put_one(&self, t: usize, buf: Vec<u8>) -> Result<(), Vec<u8>> {
        let mut tier = lock(&self.tiers[t]);
        if self.closed.load(Ordering::Relaxed) || !self.reserve(buf.capacity()) {
            return Err(buf);
        }
        tier.bytes += buf.capacity();
        tier.bufs.push(buf);
        Ok(())
    }

    /// Moves up to `max` buffers of tier `t` (the most recently returned, warmest in cache),
    /// of total capacity at most `max_bytes`, to the end of `dst`, never growing `dst` beyond its
    /// capacity. Returns `(moved, moved_bytes)`.
    pub(crate) fn take_into(
        &self,
        t: usize,
        dst: &mut Vec<Vec<u8>>,
        max: usize,
        max_bytes: usize,
    ) -> (usize, usize) {
        let room = max.min(dst.capacity() - dst.len());
        let mut tier = lock(&self.tiers[t]);
        let mut n = 0;
        let mut bytes = 0;
        for b in tier.bufs.iter().rev().take(room) {
            if bytes + b.capacity() > max_bytes {
                break;
            }
            bytes += b.capacity();
            n += 1;
        }
        if n == 0 {
            return (0, 0);
        }
        let from = tier.bufs.len() - n;
        dst.extend(tier.bufs.drain(from..));
        tier.bytes -= bytes;
        tier.low_water = tier.low_water.min(tier.bufs.len());
        drop(tier);
        self.unreserve(bytes);
        (n, bytes)
    }

    /// Takes the most recently returned buffer of tier `t`, if any.
    pub(crate) fn take_one(&self, t: usize) -> Option<Vec<u8>> {
        let mut tier = lock(&self.tiers[t]);
        let buf = tier.bufs.pop()?;
        tier.bytes -= buf.capacity();
        tier.low_water = tier.low_water.min(tier.bufs.len());
        drop(tier);
        self.unreserve(buf.capacity());
        Some(buf)
    }

    /// Releases, in every tier, the buffers that stayed unused since the previous call
    /// (the tier's low-water mark), and starts a new interval. Returns the bytes released.
    pub(crate) fn decay(&self) -> usize {
        self.release(|tier| tier.low_water)
    }

    /// Releases every buffer in the depot. Returns the bytes released.
    pub(crate) fn trim(&self) -> usize {
        self.release(|tier| tier.bufs.len())
    }

    fn release(&self, how_many: impl Fn(&DepotTier) -> usize) -> usize {
        let mut total = 0;
        for tier in self.tiers.iter() {
            let mut tier = lock(tier);
            let n = how_many(&tier);
            let freed = tier.release_oldest(n);
            tier.low_water = tier.bufs.len();
            drop(tier);
            self.unreserve(freed);
            total += freed;
        }
        total
    }

    /// Refuses every later push and releases everything retained.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
        // Each tier's lock orders this flag against pushes: a push that takes the lock after
        // `trim` has emptied the tier sees the flag; one that took it before is emptied here.
        self.trim();
    }

    /// Adds the depot's counters and retained buffers to `into`.
    pub(crate) fn add_to(&self, into: &mut Stats) {
        for (tier, t) in self.tiers.iter().zip(into.tiers.iter_mut()) {
            let tier = lock(tier);
            t.discarded += tier.discarded;
            t.retained_buffers += tier.bufs.len();
            t.retained_bytes += tier.bytes;
        }
        into.depot_bytes += self.bytes();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn bufs(caps: &[usize]) -> Vec<Vec<u8>> {
        caps.iter().map(|&c| Vec::with_capacity(c)).collect()
    }

    #[test]
    fn put_respects_cap_and_take_returns_newest() {
        let d = Depot::new(2, 100);
        let mut src = bufs(&[40, 40, 40]);
        assert_eq!(d.put_from(0, &mut src, 3), (2, 80));
        assert_eq!(
            src.len(),
            1,
            "the buffer that did not fit stays with the caller"
        );
        assert_eq!(d.bytes(), 80);
        assert!(d.put_one(1, Vec::with_capacity(30)).is_err());
        assert!(d.put_one(1, Vec::with_capacity(20)).is_ok());
        assert_eq!(d.bytes(), 100);

        let mut dst = Vec::with_capacity(1);
        assert_eq!(d.take_into(0, &mut dst, 5, 39), (0, 0), "bounded by bytes");
        assert_eq!(
            d.take_into(0, &mut dst, 5, 1000),
            (1, 40),
            "bounded by dst's spare capacity"
        );
        assert_eq!(d.take_one(1).map(|b| b.capacity()), Some(20));
        assert_eq!(d.take_one(1), None);
        assert_eq!(d.bytes(), 40);
    }

    #[test]
    fn decay_releases_only_what_stayed_idle() {
        let d = Depot::new(1, 1000);
        let mut src = bufs(&[10; 6]);
        d.put_from(0, &mut src, 6);
        assert_eq!(
            d.decay(),
            0,
            "low water starts at zero: nothing was idle a whole interval"
        );
        // During this interval the stack never goes below 4 buffers.
        let a = d.take_one(0).unwrap();
        let b = d.take_one(0).unwrap();
        d.put_one(0, a).unwrap();
        d.put_one(0, b).unwrap();
        assert_eq!(d.decay(), 40, "four buffers were never used");
        assert_eq!(d.bytes(), 20);
        assert_eq!(d.decay(), 20, "the rest idled through the next interval");
        assert_eq!(d.bytes(), 0);
        let mut s = Stats::empty(&[10]);
        d.add_to(&mut s);
        assert_eq!(s.tiers[0].discarded, 6);
    }

    #[test]
    fn close_empties_and_refuses() {
        let d = Depot::new(1, 1000);
        d.put_one(0, Vec::with_capacity(10)).unwrap();
        d.close();
        assert_eq!(d.bytes(), 0);
        assert!(d.put_one(0, Vec::with_capacity(10)).is_err());
        let mut src = bufs(&[10]);
        assert_eq!(d.put_from(0, &mut src, 1), (0, 0));
        assert_eq!(d.take_one(0), None);
    }
}
