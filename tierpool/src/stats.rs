//! Counters: the public [`Stats`] snapshot and the per-thread counters it is summed from.
//!
//! Counting must not put a shared write on the fast path, so every thread cache owns a
//! [`LocalCounters`] block that only its own thread writes (with plain `load` + `store`, no
//! read-modify-write instruction) and that [`BufferPool::stats`](crate::BufferPool::stats) reads
//! from any thread. The depot keeps its own counts under its per-tier locks. When a thread exits,
//! its counts are folded into the pool's `retired` totals, so nothing is lost. The figures are
//! exact whenever no other thread is using the pool at that moment (and the reader has
//! synchronized with the threads that did, e.g. by joining them); while other threads run they
//! are a close approximation.

use std::fmt;

use crate::sync::{AtomicU64, Ordering};

/// Adds `by` to a counter that only the calling thread ever writes.
///
/// A `fetch_add` would be a locked instruction (>= 13 ns here); since no other thread writes
/// the counter, a relaxed load and store are enough and cost about a cycle.
#[inline(always)]
pub(crate) fn bump(counter: &AtomicU64, by: u64) {
    counter.store(
        counter.load(Ordering::Relaxed).wrapping_add(by),
        Ordering::Relaxed,
    );
}

/// One tier's counters in one thread cache. Only the owning thread writes them.
///
/// The fast path touches exactly one of them per operation (`pops` on a get, `pushes` on a
/// return); every other figure changes only on slow paths. What the cache retains is derived:
/// `pushes + refilled - pops - flushed - released` buffers, of `size` bytes each plus
/// `odd_bytes` for buffers whose capacity is not exactly the tier size (foreign or grown ones).
///
/// Aligned to 128 bytes (x86-64 prefetches line pairs) so that no other allocation, possibly
/// written by another thread, shares a line with a counter this thread writes on every call.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct LocalTier {
    /// Buffers popped from the thread's stack and handed out (hits).
    pub(crate) pops: AtomicU64,
    /// Buffers handed back and pushed on the thread's stack.
    pub(crate) pushes: AtomicU64,
    /// Hits served straight from the depot, bypassing the stack.
    pub(crate) direct_hits: AtomicU64,
    pub(crate) misses: AtomicU64,
    /// Returns that did not land on the stack (went to the depot directly, or were released).
    pub(crate) other_returns: AtomicU64,
    /// Buffers this thread released to the allocator (cap reached, decay, trim).
    pub(crate) discarded: AtomicU64,
    /// Buffers moved from the depot onto the stack.
    pub(crate) refilled: AtomicU64,
    /// Buffers moved from the stack to the depot.
    pub(crate) flushed: AtomicU64,
    /// Buffers released from the stack to the allocator (also counted in `discarded`).
    pub(crate) released: AtomicU64,
    /// Sum over the stack's buffers of `capacity - size` (wrapping arithmetic).
    pub(crate) odd_bytes: AtomicU64,
}

impl LocalTier {
    /// Buffers on the stack now.
    ///
    /// Read by other threads while the owner works, the counters are not a consistent set (a
    /// pop may be seen without the push before it), so the difference can come out below
    /// zero for an instant: it is clamped at zero rather than wrapping to a huge count.
    pub(crate) fn retained(&self) -> u64 {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let n = r(&self.pushes)
            .wrapping_add(r(&self.refilled))
            .wrapping_sub(r(&self.pops))
            .wrapping_sub(r(&self.flushed))
            .wrapping_sub(r(&self.released));
        (n as i64).max(0) as u64
    }

    /// Bytes on the stack now, for a tier of `size` bytes holding `n` buffers (see
    /// [`Self::retained`]); clamped at zero for the same reason.
    pub(crate) fn retained_bytes(&self, n: u64, size: usize) -> usize {
        // `odd_bytes` accumulates signed differences in two's complement.
        let odd = self.odd_bytes.load(Ordering::Relaxed) as i64;
        ((n as i64).saturating_mul(size as i64).saturating_add(odd)).max(0) as usize
    }
}

/// The counters one thread keeps for one pool. Only the owning thread writes them.
#[derive(Debug)]
pub(crate) struct LocalCounters {
    pub(crate) tiers: Box<[LocalTier]>,
    /// Gets above the largest tier.
    pub(crate) oversize: AtomicU64,
    /// Buffers handed back that fit no tier (below the smallest, above the largest): always
    /// released. Counted as both returned and discarded.
    pub(crate) untiered_returned: AtomicU64,
}

impl LocalCounters {
    pub(crate) fn new(tiers: usize) -> Self {
        LocalCounters {
            tiers: (0..tiers).map(|_| LocalTier::default()).collect(),
            oversize: AtomicU64::new(0),
            untiered_returned: AtomicU64::new(0),
        }
    }

    /// Adds this block's counts into `into`; with `with_retained`, also what the cache holds.
    pub(crate) fn add_to(&self, into: &mut Stats, with_retained: bool) {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        for (l, t) in self.tiers.iter().zip(into.tiers.iter_mut()) {
            t.hits += r(&l.pops) + r(&l.direct_hits);
            t.misses += r(&l.misses);
            t.returned += r(&l.pushes) + r(&l.other_returns);
            t.discarded += r(&l.discarded);
            if with_retained {
                let n = l.retained();
                t.retained_buffers = t.retained_buffers.saturating_add(n as usize);
                t.retained_bytes = t.retained_bytes.saturating_add(l.retained_bytes(n, t.size));
            }
        }
        into.oversize += r(&self.oversize);
        into.untiered_returned += r(&self.untiered_returned);
    }
}

/// Counters of one tier, part of [`Stats`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TierStats {
    /// The tier's size in bytes.
    pub size: usize,
    /// Gets served from a retained buffer of this tier.
    pub hits: u64,
    /// Gets for this tier that allocated a fresh buffer.
    pub misses: u64,
    /// Buffers handed back and filed under this tier.
    pub returned: u64,
    /// Buffers of this tier released to the allocator: at the cap, by decay, by `trim`.
    pub discarded: u64,
    /// Buffers of this tier retained now (depot and thread caches).
    pub retained_buffers: usize,
    /// Sum of their capacities.
    pub retained_bytes: usize,
}

/// A snapshot of a pool's counters, from [`BufferPool::stats`](crate::BufferPool::stats).
///
/// Invariants, exact whenever no other thread is using the pool:
/// `gets == hits + misses + oversize` and
/// `returned == retained_buffers + discarded + hits` (every buffer handed back is still
/// retained, was released, or was handed out again).
///
/// ```
/// let pool = tierpool::BufferPool::new();
/// drop(pool.get(1000)); // miss, then returned and retained
/// drop(pool.get(1000)); // hit
/// let s = pool.stats();
/// assert_eq!((s.gets, s.hits, s.misses, s.returned), (2, 1, 1, 2));
/// assert_eq!(s.retained_buffers, 1);
/// println!("{s}");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Buffers handed out by `get`, `try_get` and `get_zeroed`.
    pub gets: u64,
    /// Gets served from retained buffers.
    pub hits: u64,
    /// Gets within the tiers that allocated a fresh buffer.
    pub misses: u64,
    /// Gets above the largest tier (allocated exactly, never kept).
    pub oversize: u64,
    /// Buffers handed back by drop or `put`.
    pub returned: u64,
    /// Buffers handed back but released to the allocator (cap reached, no matching tier,
    /// decay, `trim`, pool dropped).
    pub discarded: u64,
    /// Bytes (sum of capacities) retained now, in the depot and every thread cache.
    pub retained_bytes: usize,
    /// Buffers retained now.
    pub retained_buffers: usize,
    /// Of `retained_bytes`, how many sit in the shared depot (bounded by `max_retained_bytes`).
    pub depot_bytes: usize,
    /// Thread caches currently attached to the pool.
    pub thread_caches: usize,
    /// Of `returned` and `discarded`: buffers that fit no tier.
    pub untiered_returned: u64,
    /// Per-tier breakdown, ascending by size.
    pub tiers: Vec<TierStats>,
}

impl Stats {
    pub(crate) fn empty(sizes: &[usize]) -> Self {
        Stats {
            tiers: sizes
                .iter()
                .map(|&size| TierStats {
                    size,
                    ..TierStats::default()
                })
                .collect(),
            ..Stats::default()
        }
    }

    /// Computes the totals from the per-tier breakdown.
    pub(crate) fn finish(mut self) -> Self {
        let t = &self.tiers;
        self.hits = t.iter().map(|t| t.hits).sum();
        self.misses = t.iter().map(|t| t.misses).sum();
        self.gets = self.hits + self.misses + self.oversize;
        self.returned = t.iter().map(|t| t.returned).sum::<u64>() + self.untiered_returned;
        self.discarded = t.iter().map(|t| t.discarded).sum::<u64>() + self.untiered_returned;
        // Saturating: a snapshot taken while other threads work is only approximately
        // consistent, and must never overflow (a panic in debug builds).
        self.retained_buffers = t
            .iter()
            .fold(0, |a, t| a.saturating_add(t.retained_buffers));
        self.retained_bytes = t.iter().fold(0, |a, t| a.saturating_add(t.retained_bytes));
        self
    }

    /// Fraction of gets served from retained buffers (0 when there were no gets).
    pub fn hit_rate(&self) -> f64 {
        if self.gets == 0 {
            0.0
        } else {
            self.hits as f64 / self.gets as f64
        }
    }
}

impl fmt::Display for Stats {
    /// A one-line summary, then one line per tier that has seen any traffic or holds buffers.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "gets {} (hits {}, misses {}, oversize {}; hit rate {:.1}%), returned {}, discarded {}, \
             retained {} buffers / {} bytes ({} in depot), {} thread caches",
            self.gets,
            self.hits,
            self.misses,
            self.oversize,
            self.hit_rate() * 100.0,
            self.returned,
            self.discarded,
            self.retained_buffers,
            self.retained_bytes,
            self.depot_bytes,
            self.thread_caches
        )?;
        writeln!(
            f,
            "{:>10} {:>10} {:>10} {:>10} {:>10} {:>9} {:>12}",
            "tier", "hits", "misses", "returned", "discarded", "retained", "bytes"
        )?;
        for t in &self.tiers {
            if t.hits + t.misses + t.returned + t.discarded == 0 && t.retained_buffers == 0 {
                continue;
            }
            writeln!(
                f,
                "{:>10} {:>10} {:>10} {:>10} {:>10} {:>9} {:>12}",
                t.size,
                t.hits,
                t.misses,
                t.returned,
                t.discarded,
                t.retained_buffers,
                t.retained_bytes
            )?;
        }
        Ok(())
    }
}
