//! Counters: the public [`Stats`] snapshot, and how threads count without sharing a line.
//!
//! Counting must not put a shared write on the fast path, so every thread cache keeps counters
//! that only its current owner writes (with plain `load` + `store`, no read-modify-write
//! instruction; see `cache/counters.rs` for which ones, and how hits are derived from the
//! stack's length)
//! and that [`BufferPool::stats`](crate::BufferPool::stats) reads from any thread. The depot
//! keeps its own counts under its per-tier locks. When a thread exits, its counts are folded
//! into the pool's `retired` totals, so nothing is lost. The figures are exact whenever no other
//! thread is using the pool at that moment (and the reader has synchronized with the threads
//! that did, e.g. by joining them); while other threads run they are a close approximation.

use std::fmt;

use crate::base::sync::{AtomicU64, Ordering};

/// Adds `by` to a counter that only the calling thread ever writes.
///
/// A `fetch_add` would be a locked instruction; since no other thread writes the counter, a
/// relaxed load and store are enough and cost about a cycle.
#[inline(always)]
pub(crate) fn bump(counter: &AtomicU64, by: u64) {
    counter.store(
        counter.load(Ordering::Relaxed).wrapping_add(by),
        Ordering::Relaxed,
    );
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
/// A thread that exits hands its cache back to the pool in its thread-local destructors,
/// which run after its closure has returned: `std::thread::scope` can return before they
/// have, and a snapshot then may count a buffer both in that cache and in the depot it is
/// moving to. `JoinHandle::join` waits for them.
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
    /// Of `retained_bytes`, how many sit in the shared depot: read at one instant (every
    /// tier's lock held at once), so never above `max_retained_bytes`, even while other
    /// threads move buffers.
    pub depot_bytes: usize,
    /// Thread caches currently attached to the pool.
    pub thread_caches: usize,
    /// Of `returned` and `discarded`: buffers that fit no tier.
    pub untiered_returned: u64,
    /// Times the pool asked glibc to return free pages to the system after releasing memory
    /// ([`Builder::trim_allocator`](crate::Builder::trim_allocator)).
    pub allocator_trims: u64,
    /// Bytes released to the allocator since the pool was made because they stayed idle for
    /// a whole decay interval (the depot's and caches' decay, idle threads' caches reclaimed).
    pub released_by_decay: u64,
    /// Bytes released by [`BufferPool::trim`](crate::BufferPool::trim).
    pub released_by_trim: u64,
    /// Bytes released for lack of room under `max_retained_bytes` (returns the depot refused,
    /// older buffers evicted for a cache at work), or kept by no tier of a budgeted pool.
    pub released_at_cap: u64,
    /// Per-tier breakdown, ascending by size.
    pub tiers: Vec<TierStats>,
    /// The budget on bytes in use, if the pool has one
    /// ([`Builder::max_in_use_bytes`](crate::Builder::max_in_use_bytes)).
    pub budget: Option<BudgetStats>,
}

/// The budget on bytes in use, part of [`Stats`].
///
/// `in_use_bytes` is exact whenever no other thread is using the pool. Buffers kept in thread
/// caches count as charged (so that the fast path does no accounting), so the peak is that of
/// bytes taken out of the shared account: in use plus the buffers thread caches held at that
/// moment, an upper bound of the true peak in use, and never above `limit`.
///
/// ```
/// let pool = tierpool::BufferPool::builder().max_in_use_bytes(1 << 20).build()?;
/// let a = pool.get(4096);
/// let b = pool.stats().budget.expect("a budget");
/// assert_eq!((b.limit, b.in_use_bytes), (1 << 20, 4096));
/// drop(a);
/// assert_eq!(pool.stats().budget.unwrap().in_use_bytes, 0);
/// # Ok::<(), tierpool::ConfigError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BudgetStats {
    /// The budget (`max_in_use_bytes`).
    pub limit: usize,
    /// Bytes charged to buffers handed out and not returned, and set aside by reservations
    /// ([`BufferPool::reserve`](crate::BufferPool::reserve)), now.
    pub in_use_bytes: usize,
    /// Of `in_use_bytes`, those set aside by reservations and not yet spent on buffers.
    pub reserved_bytes: usize,
    /// The most bytes ever out of the shared account (in use plus held by thread caches).
    pub peak_in_use_bytes: usize,
    /// Of the budget, bytes of the buffers thread caches hold now (charged, not in use; a
    /// waiter takes them back at once).
    pub cached_bytes: usize,
    /// Requests waiting now.
    pub waiting: usize,
    /// Requests that had to wait (by `get`, `get_timeout` or `acquire`).
    pub waits: u64,
    /// Total time requests spent waiting (served, timed out or cancelled).
    pub wait_total: std::time::Duration,
    /// The longest a request waited.
    pub wait_longest: std::time::Duration,
    /// `try_get` calls refused for lack of room.
    pub refusals: u64,
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
