//! The pool's list of its thread caches, and taking caches over from their owners.
//!
//! A pool keeps every thread cache made for it in [`Caches`], so that `stats()` can read them
//! and a *reclaimer* can take them over: the pool's tick (caches idle since the previous
//! tick), `trim()` (all), closing the pool (all), a budget waiter's sweep (all), and a thread
//! that needs room the allowance cannot give (idle ones). [`Reclaimer::reclaim`] does it in
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
//! Every reclaim runs outside any operation on a cache: callers are user calls (`trim()`,
//! dropping the pool, a budget wait), the background trimmer, or what an operation left to do
//! after its owner was dropped (`owner.rs`, [`After`](super::owner::After)). Reclaimers run one
//! at a time per pool (the turn, a mutex). A reclaimer may hold many cache locks; an owner
//! holds at most its own, and only while it works with its doorbell rung, which never waits
//! for anything a reclaimer holds (an operation takes no other cache's lock and no turn, and
//! nobody waits for a cache lock while holding the list's lock). So a reclaimer waiting for an
//! owner's busy mark waits for an operation that cannot block, one waiting for a cache's lock
//! waits for an owner's slow path, and one waiting for the turn waits for another reclaimer
//! that needs nothing it holds. With [`Turn::Try`] (a tick or a reclaim for room, on behalf of a thread
//! that came to get or return a buffer) a reclaimer waits for neither the turn nor a cache
//! lock: it gives up, or skips a cache whose lock is held (its owner is at work: not idle).
//!
//! Without a heavy fence (`fence.rs`), nothing is reclaimed: the caches are only rung, and
//! give their buffers up at their owner's next operation.
//!
//! # Parked caches
//!
//! A thread that exits gives its cache's buffers, bookings and stack storage back and
//! then detaches it (`local.rs`, `retire`, which says in what order and why). Rather than
//! free it, the list keeps up to [`MAX_PARKED`] such empty caches, and the pool's next new
//! thread takes one ([`Caches::unpark`]) instead of allocating its own: a program that starts
//! threads for batches of work (`std::thread::scope`, a runtime's blocking pool) would
//! otherwise pay four allocations per thread and pool (the cache's block, its cold state and,
//! in building them, a vector and a copy). A parked
//! cache is taken only through `Arc::get_mut`: when nothing else refers to it (the exited
//! thread's table has dropped it, and no reclaimer that listed it before it left still holds
//! it), so that [`Cache::reset`] races with nothing. Parked caches that stay so a whole
//! interval are freed at the pool's tick (the pool's one idle rule, `engine/idle.rs`); `trim`
//! frees them all, and a closed pool keeps none.

use super::block::Cache;
use super::owner::{Owner, Seized};
use crate::base::key::Key;
use crate::base::sync::{lock, try_lock, Arc, Mutex, MutexGuard};
use crate::engine::idle::IdleStack;
use crate::observe::stats::Stats;
use crate::sys::fence;

/// How a reclaimer waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    /// For its turn and for every cache's lock (user calls, the background trimmer).
    Wait,
    /// For nothing: gives up if another reclaimer is at work, and skips caches whose lock
    /// is held (work a thread does for the pool on its way through a get or a return).
    Try,
}

/// The most empty caches of exited threads a pool keeps for the next threads: 8, about
/// 94 KiB with the default 56 tiers (a cache is 4 KiB of lookup table, a 64-byte line and
/// 72 bytes of cold state per tier, and holds no buffer, booking or stack storage).
#[cfg(not(loom))]
pub(crate) const MAX_PARKED: usize = 8;

/// Under loom, none: taking a parked cache over relies on `Arc::get_mut`, whose reference
/// counts loom does not model (`base/sync.rs`).
#[cfg(loom)]
pub(crate) const MAX_PARKED: usize = 0;

/// Registered thread caches, and the counts of threads that have gone.
#[derive(Debug)]
struct Attached {
    caches: Vec<Arc<Cache>>,
    /// Empty caches of exited threads (module docs, *Parked caches*).
    parked: IdleStack<Arc<Cache>>,
    /// Set when the pool closes: no cache is parked from then on.
    closed: bool,
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
                // Parking and unparking allocate nothing (`tests/alloc_free.rs`).
                parked: IdleStack::with_capacity(MAX_PARKED),
                closed: false,
                retired: Stats::empty(sizes),
            }),
            reclaim: Mutex::new(()),
        }
    }

    /// Registers a new cache. `born_rung` (the pool closed, a budget waiter is queued) is
    /// read under the lock that every reclaimer lists the caches under:
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
    /// section so that `stats()` never sees them twice or not at all. An empty cache
    /// ([`Cache::is_empty`]: an exiting thread's, once it gave everything back) is parked for
    /// the next thread, if there is room and the pool is open. Called by the cache's owner
    /// when the pool closes (`kill`), or by its exiting thread once that owner is gone and
    /// its refunds are settled (`local.rs`).
    pub(crate) fn detach(&self, cache: &Cache) {
        let mut a = lock(&self.attached);
        if let Some(i) = a.caches.iter().position(|c| std::ptr::eq(&**c, cache)) {
            let c = a.caches.swap_remove(i);
            cache.add_to(&mut a.retired, false);
            if !a.closed && a.parked.len() < MAX_PARKED && cache.is_empty() {
                a.parked.push(c);
            }
        }
    }

    /// A parked cache made new for the pool with key `key` ([`Cache::reset`]), if one is
    /// referred to by nothing else any more (its thread's table has let go, and no reclaimer
    /// that listed it before it left still holds it); the newest first.
    pub(crate) fn unpark(&self, key: Key, epoch: u64, trim_gen: u64) -> Option<Arc<Cache>> {
        let mut a = lock(&self.attached);
        a.parked
            .take_newest(|c| Arc::get_mut(c).is_some_and(|c| c.reset(key, epoch, trim_gen)))
    }

    /// Frees the parked caches that stayed parked since the previous call (a pool tick);
    /// with `all`, every one (`trim`).
    pub(crate) fn decay_parked(&self, all: bool) {
        // Freed after the lock is let go, from an array on the stack: this runs at a tick,
        // inside operations that must not allocate.
        let mut gone: [Option<Arc<Cache>>; MAX_PARKED] = [const { None }; MAX_PARKED];
        let mut slots = gone.iter_mut();
        lock(&self.attached).parked.decay(all, false, |c| {
            *slots.next().expect("at most MAX_PARKED are parked") = Some(c);
        });
        drop(gone);
    }

    /// How many caches are parked.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn parked(&self) -> usize {
        lock(&self.attached).parked.len()
    }

    /// The pool closed: frees the parked caches and parks none from now on.
    pub(crate) fn close_parked(&self) {
        lock(&self.attached).closed = true;
        self.decay_parked(true);
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

    /// The reclaimer's turn: `None` if another reclaimer is at work and `turn` is
    /// [`Turn::Try`].
    pub(crate) fn turn(&self, turn: Turn) -> Option<Reclaimer<'_>> {
        let guard = match turn {
            Turn::Wait => lock(&self.reclaim),
            Turn::Try => try_lock(&self.reclaim)?,
        };
        Some(Reclaimer {
            caches: self,
            turn,
            _guard: guard,
        })
    }

    /// Takes over every cache that `pick` selects and runs `act` on each: [`Self::turn`],
    /// then [`Reclaimer::reclaim`].
    pub(crate) fn reclaim(
        &self,
        turn: Turn,
        pick: impl FnMut(&Cache) -> bool,
        act: impl FnMut(&Owner<'_>),
    ) -> Option<usize> {
        self.turn(turn)?.reclaim(pick, act)
    }
}

/// The one reclaimer at work for a pool (see [`Caches::turn`]).
pub(crate) struct Reclaimer<'a> {
    caches: &'a Caches,
    turn: Turn,
    _guard: MutexGuard<'a, ()>,
}

impl Reclaimer<'_> {
    /// Takes over every cache that `pick` selects (module docs) and runs `act` on each, then
    /// lets them go. Returns how many were reclaimed, or `None` if none could be: there is no
    /// heavy fence here (the selected caches are then only rung). With [`Turn::Try`], caches
    /// whose lock is held are skipped. Must not be called inside an operation on a cache.
    pub(crate) fn reclaim(
        &self,
        mut pick: impl FnMut(&Cache) -> bool,
        mut act: impl FnMut(&Owner<'_>),
    ) -> Option<usize> {
        let picked: Vec<Arc<Cache>> = lock(&self.caches.attached)
            .caches
            .iter()
            .filter(|c| pick(c))
            .cloned()
            .collect();
        if picked.is_empty() {
            return Some(0);
        }
        let seized: Vec<Seized<'_>> = match self.turn {
            Turn::Wait => picked.iter().map(|c| c.seize()).collect(),
            Turn::Try => picked.iter().filter_map(|c| c.try_seize()).collect(),
        };
        if !fence::heavy() {
            return None; // rung; their owners give up what they hold at their next operation
        }
        let n = seized.len();
        for s in seized {
            // SAFETY: the heavy fence ran after every seize, and this thread is inside no
            // operation on any cache (this method's contract).
            let owner = unsafe { s.take() };
            act(&owner);
        }
        Some(n)
    }
}

impl std::fmt::Debug for Reclaimer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reclaimer")
            .field("turn", &self.turn)
            .finish()
    }
}
