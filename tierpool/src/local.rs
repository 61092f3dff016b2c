//! Per-thread caches: the fast path.
//!
//! Every thread that touches a pool gets a private [`ThreadCache`] for it: one small stack of
//! buffers per tier, a byte budget, and a block of counters that only this thread writes. A get
//! that finds a buffer in its stack and a return that finds room take no lock, make no atomic
//! read-modify-write, allocate nothing and write only lines this thread owns. When a stack runs
//! empty it takes a batch (half its limit) from the shared [`Depot`](crate::depot::Depot); when it
//! is full it hands its older half to the depot. So a buffer taken on one thread and dropped on
//! another costs one lock acquisition per batch on each side, not a malloc and a free.
//!
//! # The thread-local table
//!
//! A thread's caches live in a `Table` indexed by the pool's slot ([`PoolId::idx`]). The table
//! is reached through a `const`-initialized thread-local with no destructor (`LOCAL`), whose
//! access compiles to a single `fs`-relative load with no lazy-initialization check; a second
//! thread-local (`GUARD`) exists only to run a destructor at thread exit, which gives every
//! cache back to its pool. Dropping a [`PooledBuf`](crate::PooledBuf) needs only its `PoolId` to
//! find the cache: if the entry at `idx` carries the same generation, the buffer goes there.
//!
//! # Soundness of the raw table pointer
//!
//! `LOCAL.table` is either null or a pointer obtained from `Box::into_raw` on this thread. Only
//! this thread reads it (it is thread-local), and it is freed only by `GUARD`'s destructor on
//! this thread, which first resets it to null. A `&mut Table` is created from it only while
//! `LOCAL.busy` is false, and `busy` stays true for as long as that reference lives (a drop guard
//! resets it, also on unwind). If tierpool is re-entered while the reference lives (a global
//! allocator that itself uses tierpool, say), the inner call sees `busy` and bypasses the
//! thread cache instead of creating a second `&mut`. So there is never more than one live
//! reference into the table, and never one into freed memory.

use std::cell::Cell;
use std::ptr;

use crate::error::AllocError;
use crate::pool::Shared;
use crate::registry::PoolId;
use crate::stats::{bump, drop_by, LocalCounters};
use crate::sync::{Arc, Ordering};

/// Gets between two checks of the clock and the pool's trim/close flags. A check costs one
/// clock read (about 20 ns here), so at 64 the amortized cost stays well under a nanosecond.
const CHECK_EVERY: u32 = 64;

/// The most buffers a thread cache keeps per tier (fewer for large tiers: see `limit_for`).
pub(crate) const MAX_LOCAL_PER_TIER: usize = 64;

/// How a fresh buffer is made on a miss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fresh {
    /// `Vec::with_capacity`; aborts or panics on failure like `Vec`.
    Plain,
    /// Zeroed (`calloc`), `len` set to the request.
    Zeroed,
    /// `try_reserve_exact`; failure is an error.
    Fallible,
}

/// Allocates a buffer of capacity `cap` for a request of `n` bytes.
pub(crate) fn alloc_fresh(cap: usize, n: usize, how: Fresh) -> Result<Vec<u8>, AllocError> {
    match how {
        Fresh::Plain => Ok(Vec::with_capacity(cap)),
        Fresh::Zeroed => {
            let mut v = vec![0u8; cap];
            v.truncate(n);
            Ok(v)
        }
        Fresh::Fallible => {
            if cap > isize::MAX as usize {
                return Err(AllocError::CapacityOverflow { requested: n });
            }
            let mut v = Vec::new();
            v.try_reserve_exact(cap)
                .map_err(|_| AllocError::AllocFailed {
                    requested: n,
                    capacity: cap,
                })?;
            Ok(v)
        }
    }
}

/// Makes a buffer that was just taken from retention ready to hand out for `n` bytes.
#[inline(always)]
pub(crate) fn prepare_hit(v: &mut Vec<u8>, n: usize, how: Fresh) {
    if how == Fresh::Zeroed {
        v.resize(n, 0);
    }
}

/// Clears a returned buffer; with `wipe`, overwrites its whole capacity with zeros first.
#[inline(always)]
pub(crate) fn scrub(v: &mut Vec<u8>, wipe: bool) {
    v.clear();
    if wipe {
        wipe_capacity(v);
    }
}

#[cold]
fn wipe_capacity(v: &mut Vec<u8>) {
    v.spare_capacity_mut().fill(std::mem::MaybeUninit::new(0));
    // Keep the compiler from treating the zeros as dead stores before a free.
    std::hint::black_box(v.spare_capacity_mut().as_ptr());
}

/// Bumped whenever any pool closes, so tables know when to look for dead caches.
static CLOSED_POOLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

pub(crate) fn note_pool_closed() {
    CLOSED_POOLS.fetch_add(1, Ordering::Relaxed);
}

#[derive(Debug)]
struct Slot {
    /// Oldest at the bottom. Its capacity is reserved (to `limit`) on first use, so pushes
    /// below capacity never allocate.
    stack: Vec<Vec<u8>>,
    /// The most buffers this tier keeps here; 0 means the tier bypasses the thread cache.
    limit: u32,
    /// Lowest `stack.len()` since the last decay.
    low_water: u32,
}

/// One thread's private cache for one pool. Only its thread ever touches it (its `counters`
/// are read by others).
#[derive(Debug)]
pub(crate) struct ThreadCache {
    id: PoolId,
    slots: Box<[Slot]>,
    /// Sum of capacities of the buffers in `slots`; never above `budget`.
    bytes: usize,
    budget: usize,
    countdown: u32,
    epoch: u64,
    trim_gen: u64,
    wipe: bool,
    /// The pool closed: keep nothing.
    dead: bool,
    counters: Arc<LocalCounters>,
    shared: Arc<Shared>,
}

impl ThreadCache {
    fn new(id: PoolId, shared: Arc<Shared>) -> Box<Self> {
        let budget = shared.thread_cache_bytes;
        let slots = shared
            .classes
            .sizes()
            .iter()
            .map(|&size| Slot {
                stack: Vec::new(),
                limit: (budget / size).min(MAX_LOCAL_PER_TIER) as u32,
                low_water: 0,
            })
            .collect();
        let counters = Arc::new(LocalCounters::new(shared.classes.len()));
        shared.attach(counters.clone());
        Box::new(ThreadCache {
            id,
            slots,
            bytes: 0,
            budget,
            countdown: CHECK_EVERY,
            epoch: shared.clock.epoch(),
            trim_gen: shared.trim_gen.load(Ordering::Relaxed),
            wipe: shared.zero_on_return,
            dead: false,
            counters,
            shared,
        })
    }

    /// Hands out a buffer for `n` bytes.
    #[inline(always)]
    pub(crate) fn get(&mut self, n: usize, how: Fresh) -> Result<Vec<u8>, AllocError> {
        let Some(t) = self.shared.classes.for_get(n) else {
            return self.get_oversize(n, how);
        };
        self.countdown -= 1;
        if self.countdown == 0 {
            self.maintain();
        }
        match self.pop(t) {
            Some(mut v) => {
                prepare_hit(&mut v, n, how);
                Ok(v)
            }
            None => self.get_slow(t, n, how),
        }
    }

    /// Pops the newest buffer of tier `t`, counting a hit.
    #[inline(always)]
    fn pop(&mut self, t: usize) -> Option<Vec<u8>> {
        let slot = &mut self.slots[t];
        let v = slot.stack.pop()?;
        let len = slot.stack.len() as u32;
        if len < slot.low_water {
            slot.low_water = len;
        }
        let cap = v.capacity();
        self.bytes -= cap;
        let c = &self.counters.tiers[t];
        bump(&c.hits, 1);
        c.retained_buffers.store(len as u64, Ordering::Relaxed);
        drop_by(&c.retained_bytes, cap as u64);
        Some(v)
    }

    #[cold]
    #[inline(never)]
    fn get_slow(&mut self, t: usize, n: usize, how: Fresh) -> Result<Vec<u8>, AllocError> {
        let depot = &self.shared.depot;
        let slot = &mut self.slots[t];
        if slot.limit > 0 {
            if slot.stack.capacity() == 0 {
                slot.stack.reserve_exact(slot.limit as usize);
            }
            let batch = (slot.limit as usize).div_ceil(2);
            let room = self.budget - self.bytes;
            let (moved, bytes) = depot.take_into(t, &mut slot.stack, batch, room);
            if moved > 0 {
                self.took(t, bytes);
                let mut v = self.pop(t).expect("just refilled");
                prepare_hit(&mut v, n, how);
                return Ok(v);
            }
        }
        // Tier bypasses the cache, or the budget is full: hand one out directly.
        if let Some(mut v) = depot.take_one(t) {
            bump(&self.counters.tiers[t].hits, 1);
            prepare_hit(&mut v, n, how);
            return Ok(v);
        }
        let v = alloc_fresh(self.shared.classes.size(t), n, how)?;
        bump(&self.counters.tiers[t].misses, 1);
        Ok(v)
    }

    #[cold]
    #[inline(never)]
    fn get_oversize(&mut self, n: usize, how: Fresh) -> Result<Vec<u8>, AllocError> {
        let v = alloc_fresh(n, n, how)?;
        bump(&self.counters.oversize, 1);
        Ok(v)
    }

    /// Takes a buffer back.
    #[inline(always)]
    pub(crate) fn put(&mut self, mut v: Vec<u8>) {
        scrub(&mut v, self.wipe);
        let cap = v.capacity();
        let Some(t) = self.shared.classes.for_put(cap) else {
            return self.put_untiered(v);
        };
        let slot = &mut self.slots[t];
        if slot.stack.len() < slot.stack.capacity() && self.bytes + cap <= self.budget {
            slot.stack.push(v);
            let len = slot.stack.len() as u64;
            self.bytes += cap;
            let c = &self.counters.tiers[t];
            bump(&c.returned, 1);
            c.retained_buffers.store(len, Ordering::Relaxed);
            bump(&c.retained_bytes, cap as u64);
            return;
        }
        self.put_slow(t, v);
    }

    #[cold]
    #[inline(never)]
    fn put_untiered(&mut self, v: Vec<u8>) {
        if !self.dead {
            bump(&self.counters.untiered_returned, 1);
        }
        drop(v);
    }

    #[cold]
    #[inline(never)]
    fn put_slow(&mut self, t: usize, v: Vec<u8>) {
        if self.dead {
            return; // the pool is gone: free the buffer, count nothing
        }
        bump(&self.counters.tiers[t].returned, 1);
        let cap = v.capacity();
        let slot = &mut self.slots[t];
        if slot.limit > 0 {
            if slot.stack.capacity() == 0 {
                slot.stack.reserve_exact(slot.limit as usize);
            }
            if slot.stack.len() == slot.stack.capacity() || self.bytes + cap > self.budget {
                // Hand the older half of this tier to the depot.
                let batch = (slot.limit as usize).div_ceil(2);
                let (_, bytes) = self.shared.depot.put_from(t, &mut slot.stack, batch);
                self.gave(t, bytes);
            }
            let slot = &mut self.slots[t];
            if slot.stack.len() < slot.stack.capacity() && self.bytes + cap <= self.budget {
                slot.stack.push(v);
                self.took(t, cap);
                return;
            }
        }
        if self.shared.depot.put_one(t, v).is_err() {
            bump(&self.counters.tiers[t].discarded, 1);
        }
    }

    /// Records that `bytes` more are retained in tier `t` (the stack already holds them).
    fn took(&mut self, t: usize, bytes: usize) {
        self.bytes += bytes;
        let c = &self.counters.tiers[t];
        c.retained_buffers
            .store(self.slots[t].stack.len() as u64, Ordering::Relaxed);
        bump(&c.retained_bytes, bytes as u64);
    }

    /// Records that `bytes` fewer are retained in tier `t` (the stack no longer holds them).
    fn gave(&mut self, t: usize, bytes: usize) {
        self.bytes -= bytes;
        let slot = &mut self.slots[t];
        slot.low_water = slot.low_water.min(slot.stack.len() as u32);
        let c = &self.counters.tiers[t];
        c.retained_buffers
            .store(slot.stack.len() as u64, Ordering::Relaxed);
        drop_by(&c.retained_bytes, bytes as u64);
    }

    /// Releases the `n` oldest buffers of tier `t` to the allocator.
    fn release(&mut self, t: usize, n: usize) {
        let slot = &mut self.slots[t];
        let n = n.min(slot.stack.len());
        if n == 0 {
            return;
        }
        let bytes: usize = slot.stack.drain(..n).map(|b| b.capacity()).sum();
        bump(&self.counters.tiers[t].discarded, n as u64);
        self.gave(t, bytes);
    }

    /// Periodic housekeeping, every `CHECK_EVERY` gets: notice a closed pool, a `trim()` on
    /// another thread, or an interval boundary (decay this cache, and maybe the depot).
    #[cold]
    #[inline(never)]
    fn maintain(&mut self) {
        self.countdown = CHECK_EVERY;
        let shared = Arc::clone(&self.shared);
        if shared.closed.load(Ordering::Acquire) {
            self.kill();
            return;
        }
        let trim_gen = shared.trim_gen.load(Ordering::Relaxed);
        if trim_gen != self.trim_gen {
            self.trim_gen = trim_gen;
            self.release_all();
        }
        let epoch = shared.clock.epoch();
        if epoch != self.epoch {
            self.epoch = epoch;
            for t in 0..self.slots.len() {
                let idle = self.slots[t].low_water as usize;
                self.release(t, idle);
                self.slots[t].low_water = self.slots[t].stack.len() as u32;
            }
            shared.tick(epoch);
        }
    }

    /// Releases every buffer this cache holds.
    fn release_all(&mut self) {
        for t in 0..self.slots.len() {
            self.release(t, usize::MAX);
        }
    }

    /// This thread just called `trim()`, which bumped the trim generation to `generation`:
    /// release everything now, and do not do it again when `maintain` sees that generation.
    pub(crate) fn trimmed(&mut self, generation: u64) {
        self.trim_gen = generation;
        self.release_all();
    }

    /// The pool closed: free everything, keep nothing from now on.
    fn kill(&mut self) {
        self.release_all();
        self.dead = true;
        for slot in self.slots.iter_mut() {
            slot.stack = Vec::new();
            slot.limit = 0;
        }
    }
}

impl Drop for ThreadCache {
    /// Thread exit (or replacement of a dead pool's cache): hand everything to the depot, as
    /// far as its cap allows, free the rest, and fold this thread's counts into the pool's.
    fn drop(&mut self) {
        if !self.dead && !self.shared.closed.load(Ordering::Acquire) {
            for t in 0..self.slots.len() {
                let len = self.slots[t].stack.len();
                let (_, bytes) = self.shared.depot.put_from(t, &mut self.slots[t].stack, len);
                self.gave(t, bytes);
                self.release(t, usize::MAX);
            }
        }
        self.shared.detach(&self.counters);
    }
}

/// A thread's caches, indexed by pool slot.
#[derive(Debug, Default)]
struct Table {
    caches: Vec<Option<Box<ThreadCache>>>,
    closed_seen: u64,
}

impl Table {
    /// Drops the caches of pools that closed since the last look.
    fn sweep(&mut self) {
        let closed = CLOSED_POOLS.load(Ordering::Relaxed);
        if closed != self.closed_seen {
            self.closed_seen = closed;
            for entry in self.caches.iter_mut() {
                if entry
                    .as_ref()
                    .is_some_and(|c| c.shared.closed.load(Ordering::Acquire))
                {
                    *entry = None;
                }
            }
        }
    }
}

struct Local {
    /// True while a `&mut Table` derived from `table` is live.
    busy: Cell<bool>,
    /// Null, or this thread's table (from `Box::into_raw`).
    table: Cell<*mut Table>,
    /// The thread is exiting and its table is gone: no new one may be made.
    destroyed: Cell<bool>,
}

struct TableGuard;

thread_local! {
    static LOCAL: Local = const {
        Local { busy: Cell::new(false), table: Cell::new(ptr::null_mut()), destroyed: Cell::new(false) }
    };
    static GUARD: TableGuard = const { TableGuard };
}

/// Resets `busy` when the `&mut Table` it protects goes out of scope, also on unwind.
struct BusyGuard<'a>(&'a Cell<bool>);

impl Drop for BusyGuard<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        self.0.set(false);
    }
}

impl Drop for TableGuard {
    fn drop(&mut self) {
        // LOCAL has no destructor, so it is still accessible here.
        let _ = LOCAL.try_with(|local| {
            local.destroyed.set(true);
            if local.busy.get() {
                // Cannot happen (destructors do not run inside a tierpool call); if it did,
                // leaking the table is the only sound choice.
                return;
            }
            let table = local.table.replace(ptr::null_mut());
            if !table.is_null() {
                local.busy.set(true);
                let _busy = BusyGuard(&local.busy);
                // SAFETY: `table` came from `Box::into_raw` on this thread (see `attach`), was
                // just unlinked from `LOCAL` so nothing can reach it again, and `busy` was false,
                // so no reference into it is live. It is freed exactly once, here.
                drop(unsafe { Box::from_raw(table) });
            }
        });
    }
}

/// Runs `f` on this thread's cache for pool `id`, if it exists and may be used now.
/// Otherwise gives `arg` back.
#[inline(always)]
pub(crate) fn with_cache<A, R>(
    id: PoolId,
    arg: A,
    f: impl FnOnce(&mut ThreadCache, A) -> R,
) -> Result<R, A> {
    LOCAL.with(|local| {
        let table = local.table.get();
        if table.is_null() || local.busy.get() {
            return Err(arg);
        }
        local.busy.set(true);
        let _busy = BusyGuard(&local.busy);
        // SAFETY: non-null `table` points to this thread's live table (module docs); `busy`
        // was false, so this is the only reference into it until `_busy` drops.
        let table = unsafe { &mut *table };
        match table.caches.get_mut(id.idx as usize) {
            Some(Some(cache)) if cache.id == id => Ok(f(cache, arg)),
            _ => Err(arg),
        }
    })
}

/// Like [`with_cache`], but first creates this thread's table and its cache for `id` if
/// needed, using `shared` to find the pool. Gives `arg` back if the thread is exiting, the
/// call is re-entrant, or `shared` finds no live pool.
#[cold]
#[inline(never)]
pub(crate) fn attach<A, R>(
    id: PoolId,
    arg: A,
    shared: impl FnOnce() -> Option<Arc<Shared>>,
    f: impl FnOnce(&mut ThreadCache, A) -> R,
) -> Result<R, A> {
    LOCAL.with(|local| {
        if local.busy.get() || local.destroyed.get() {
            return Err(arg);
        }
        local.busy.set(true);
        let _busy = BusyGuard(&local.busy);
        if local.table.get().is_null() {
            // Register the exit hook first; if the thread is already exiting, keep no table.
            if GUARD.try_with(|_| ()).is_err() {
                local.destroyed.set(true);
                return Err(arg);
            }
            local.table.set(Box::into_raw(Box::default()));
        }
        // SAFETY: as in `with_cache`: the pointer is this thread's live table and `busy`
        // guarantees this is the only reference into it.
        let table = unsafe { &mut *local.table.get() };
        table.sweep();
        let idx = id.idx as usize;
        if table.caches.len() <= idx {
            table.caches.resize_with(idx + 1, || None);
        }
        let entry = &mut table.caches[idx];
        if !entry.as_ref().is_some_and(|c| c.id == id) {
            let Some(shared) = shared() else {
                return Err(arg);
            };
            // Replacing a dead pool's cache drops it here, freeing what it held.
            *entry = Some(ThreadCache::new(id, shared));
        }
        let cache = entry.as_mut().expect("just attached");
        Ok(f(cache, arg))
    })
}

/// Drops this thread's cache for pool `id` (the pool is closing), if it can be reached now.
pub(crate) fn detach(id: PoolId) {
    let cache = LOCAL.with(|local| {
        let table = local.table.get();
        if table.is_null() || local.busy.get() {
            return None;
        }
        local.busy.set(true);
        let _busy = BusyGuard(&local.busy);
        // SAFETY: as in `with_cache`.
        let table = unsafe { &mut *table };
        table
            .caches
            .get_mut(id.idx as usize)
            .filter(|e| e.as_ref().is_some_and(|c| c.id == id))
            .and_then(Option::take)
    });
    // Dropped outside the table borrow; the pool is closed, so it just frees its buffers.
    drop(cache);
}
