//! The pool's list of its thread caches, and taking caches over from their owners.
//!
//! A pool keeps every thread cache made for it in [`Caches`], so that `stats()` can read them
//! and a *reclaimer* can take them over: the pool's tick (caches idle since the previous
//! tick), `trim()` (all), closing the pool (all), a budget waiter's sweep (all), and a thread
//! that needs room the allowance cannot give (idle ones). [`Caches::reclaim`] does it in
//! three steps, for a whole batch at once:
//!
//! 1. lock and ring every selected cache ([`Cache::seize`]);
//! 2. one heavy fence ([`fence::heavy`], a `membarrier`) for all of them;
//! 3. for each, wait for its owner's current operation to end ([`Seized::take`]) and run the
//!    action with the [`Owner`] that gives.
//!
//! The doorbells stay rung: each owner's next operation takes its cache's lock, re-arms, and
//! finds what the reclaimer left (an empty cache, a dead one, budget pressure).
//!
//! # Deadlock freedom
//!
//! Reclaimers run one at a time per pool (`reclaim`, a mutex). A reclaimer may hold many
//! cache locks; an owner holds at most its own, and only when it found its doorbell rung.
//! Nobody waits for a cache lock while holding the list's lock, and an owner whose busy mark
//! is set never waits for a cache lock at all (it may reclaim others only with `try_lock` on
//! `reclaim`, skipping its own cache). So every wait ends: a reclaimer waiting for an owner's
//! mark waits for an operation that cannot block, and one waiting for a cache's lock waits for
//! an owner's slow path or for a reclaimer that holds no lock it needs.
//!
//! Without a heavy fence (`fence.rs`), nothing is reclaimed: the caches are only rung, and
//! give their buffers up at their owner's next operation.

use super::block::Cache;
use super::owner::{Owner, Seized};
use crate::fence;
use crate::stats::Stats;
use crate::sync::{lock, try_lock, Arc, Mutex};

/// How a reclaimer waits for its turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    /// Waits for another reclaimer to finish (callers outside any cache operation).
    Wait,
    /// Gives up if another reclaimer is at work (callers inside their own cache's
    /// operation, which must not wait).
    Try,
}

/// Registered thread caches, and the counts of threads that have gone.
#[derive(Debug)]
struct Attached {
    caches: Vec<Arc<Cache>>,
    /// Counts folded in from exited threads, and from operations that ran without a thread
    /// cache (during thread exit, or re-entrant calls). Never holds retained figures.
    retired: Stats,
}

/// A pool's thread caches (module docs).
#[derive(Debug)]
pub(crate) struct Caches {
    attached: Mutex<Attached>,
    /// Held by the one reclaimer at work.
    reclaim: Mutex<()>,
}

impl Caches {
    /// No caches yet, for a pool with tiers of these sizes.
    pub(crate) fn new(sizes: &[usize]) -> Self {
        Caches {
            attached: Mutex::new(Attached {
                caches: Vec::new(),
                retired: Stats::empty(sizes),
            }),
            reclaim: Mutex::new(()),
        }
    }

    /// Registers a new cache. `born_rung` (the pool closed, a budget waiter is queued) is
    /// read under the lock that every reclaimer and [`Self::ring_all`] lists the caches under:
    /// either that reclaimer reaches this cache later, or what it stored before it took the
    /// lock is visible here and the cache is born rung, so that its owner's first operation
    /// takes the cache's lock and finds out why.
    pub(crate) fn attach(&self, cache: &Arc<Cache>, born_rung: impl FnOnce() -> bool) {
        let mut a = lock(&self.attached);
        if born_rung() {
            cache.ring();
        }
        a.caches.push(Arc::clone(cache));
    }

    /// Unregisters a cache, folding its counts into the retired totals in the same critical
    /// section so that `stats()` never sees them twice or not at all.
    pub(crate) fn detach(&self, cache: &Cache) {
        let mut a = lock(&self.attached);
        if let Some(i) = a.caches.iter().position(|c| std::ptr::eq(&**c, cache)) {
            a.caches.swap_remove(i);
            cache.add_to(&mut a.retired, false);
        }
    }

    /// Adds to the counts of operations that ran without a thread cache.
    pub(crate) fn with_retired(&self, f: impl FnOnce(&mut Stats)) {
        f(&mut lock(&self.attached).retired);
    }

    /// Adds every cache's counts and what it holds, and the retired counts, to `into`.
    pub(crate) fn add_to(&self, into: &mut Stats) {
        let a = lock(&self.attached);
        for c in &a.caches {
            c.add_to(into, true);
        }
        into.thread_caches = a.caches.len();
        for (t, r) in into.tiers.iter_mut().zip(&a.retired.tiers) {
            t.hits += r.hits;
            t.misses += r.misses;
            t.returned += r.returned;
            t.discarded += r.discarded;
        }
        into.oversize += a.retired.oversize;
        into.untiered_returned += a.retired.untiered_returned;
    }

    /// Bytes on every cache's stacks now.
    pub(crate) fn held_bytes(&self) -> usize {
        lock(&self.attached)
            .caches
            .iter()
            .map(|c| c.held_bytes())
            .sum()
    }

    /// Rings every cache's doorbell: each owner takes the slow path at its next operation and
    /// looks at the pool's flags.
    pub(crate) fn ring_all(&self) {
        for c in &lock(&self.attached).caches {
            c.ring();
        }
    }

    /// Takes over every cache that `pick` selects (except `skip`, the calling thread's own
    /// cache if it is inside an operation on it) and runs `act` on each (module docs).
    /// Returns how many were reclaimed, or `None` if nothing could be: another reclaimer was
    /// at work (with [`Turn::Try`]) or there is no heavy fence here (the selected caches are
    /// then only rung).
    pub(crate) fn reclaim(
        &self,
        turn: Turn,
        skip: Option<&Cache>,
        mut pick: impl FnMut(&Cache) -> bool,
        mut act: impl FnMut(&Owner<'_>),
    ) -> Option<usize> {
        let _turn = match turn {
            Turn::Wait => lock(&self.reclaim),
            Turn::Try => try_lock(&self.reclaim)?,
        };
        let picked: Vec<Arc<Cache>> = lock(&self.attached)
            .caches
            .iter()
            .filter(|c| !skip.is_some_and(|s| std::ptr::eq(&***c, s)) && pick(c))
            .cloned()
            .collect();
        if picked.is_empty() {
            return Some(0);
        }
        let seized: Vec<Seized<'_>> = picked.iter().map(|c| c.seize()).collect();
        if !fence::heavy() {
            return None; // rung; their owners give up what they hold at their next operation
        }
        let n = seized.len();
        for s in seized {
            // SAFETY: the heavy fence ran after every seize, and this thread is inside no
            // operation on any of these caches: its own, if it is inside one, is `skip`.
            let owner = unsafe { s.take() };
            act(&owner);
        }
        Some(n)
    }
}
