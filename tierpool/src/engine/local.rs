//! How a thread finds its cache for a pool: the current-cache slot and the thread's table.
//! All of the crate's thread-local `unsafe` is here.
//!
//! # The current-cache slot
//!
//! `LOCAL.cur` points at the doorbell of the cache this thread used last (the first bytes of a
//! [`Cache`]), or at `NO_CACHE`, a static doorbell that always reads `RUNG`. `LOCAL` is a
//! `const`-initialized thread-local with no destructor, so reaching it takes one `fs`-relative
//! address computation and no lazy-initialization check. The fast path (`fast.rs`) loads
//! `cur`, marks it busy, compares the doorbell with the pool's key, and on a match works on
//! that cache: a ring (trim, close, a reclaimer) or a different pool sends the operation to the
//! slow path with no further test.
//!
//! # The table and the ladder
//!
//! Every cache of this thread is held (by an `Arc`) in a `Table` keyed by pool key. Every slow
//! operation goes down one ladder, [`slow`]: this thread's cache for the pool (from the table,
//! or made on first use), else, when the thread is exiting or the call is re-entrant, the
//! pool without a cache (its depot and the allocator), else (the pool is gone) nothing. A
//! second thread-local (`GUARD`) exists only to run a destructor at thread exit, which retires
//! every cache: its buffers go to the depot, its counts to the pool, the emptied cache to the
//! pool's parked ones and the emptied table to `SPARE_TABLES`, for the next threads.
//!
//! # Soundness
//!
//! - `LOCAL.table` is null or a pointer from `Box::into_raw` on this thread (of a new table,
//!   or an emptied one an exited thread left); only this thread reads it (thread-local), and
//!   only `GUARD`'s destructor takes it back, after resetting it to null (then empties it and
//!   keeps it for another thread, or frees it). A `&mut Table` is made from it only while `busy` is false, and `busy` is true for
//!   as long as that reference lives (a drop guard resets it, also on unwind). A re-entrant
//!   call (a global allocator that uses tierpool, say) sees `busy` and bypasses the caches.
//! - `LOCAL.cur` is `NO_CACHE` or points at a cache held by this thread's table. Every slow
//!   path resets it to `NO_CACHE` when it sets `busy` and before it may remove an entry, and
//!   points it at a cache only while the table holds that cache. So a doorbell read through
//!   `cur` is always live, and one that holds a pool key (never `RUNG`) is a cache's.
//! - An [`Owner`] of a cache is made only here, on the owning thread, while no other owner
//!   operation on it runs: the fast path calls nothing while it holds one, and while a slow
//!   path holds one, `cur` is `NO_CACHE` (re-entrant fast paths miss) and `busy` is set
//!   (re-entrant slow paths bypass the caches).

use std::cell::Cell;
use std::collections::{hash_map, HashMap};
use std::ptr;

use super::cache::block::{Cache, Doorbell};
use super::cache::fast::{self, Pushed};
// What `fast_pop` gives: the buffer and the hint of its tag.
pub(crate) use super::cache::fast::Popped;
use super::cache::owner::Owner;
use super::policy;
use crate::base::key::Key;
use crate::base::sync::Arc;
use crate::engine::state::{closed_pools, PoolState};

/// The doorbell `cur` points at when this thread has no current cache; always `RUNG`. A
/// thread without a current cache stores its busy mark here and clears it at once (the fast
/// path stores before it looks): threads share this line only while they have no cache (the
/// first operation, thread exit, re-entrant calls), never in steady state.
#[cfg(not(loom))]
static NO_CACHE: Doorbell = Doorbell::rung();

#[cfg(not(loom))]
const NONE: *const Doorbell = &NO_CACHE;

// loom's atomics cannot live in a `static`; under loom (whose models drive the components,
// not this table) `cur` is null when there is no current cache, and the fast paths miss.
#[cfg(loom)]
const NONE: *const Doorbell = ptr::null();

/// A cache of this thread, and the pool it belongs to.
struct Entry {
    cache: Arc<Cache>,
    pool: Arc<PoolState>,
}

/// Hashes a pool key with one multiplication (Fibonacci hashing): keys are small sequential
/// numbers chosen by the registry, not by an adversary, and the table is looked up on every
/// slow path, where SipHash cost about a hundred instructions.
#[derive(Default)]
struct KeyHasher(u64);

impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, key: u32) {
        self.0 = u64::from(key).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// This thread's caches, by pool key.
#[derive(Default)]
struct Table {
    entries: HashMap<Key, Entry, std::hash::BuildHasherDefault<KeyHasher>>,
    closed_seen: u64,
}

/// Retires `e`'s cache for an exiting thread (or a closed pool): gives everything back, then,
/// with its refunds settled, detaches it. A cache that no longer counts among the pool's has
/// given back every charge, so the budget's account is exact once none is left.
fn retire(owner: Owner<'_>, e: &Entry) {
    policy::finish(owner, &e.pool, |o| policy::retire(o, &e.pool));
    e.pool.caches.detach(&e.cache);
}

/// The most emptied tables of exited threads kept for the next threads.
const MAX_SPARE_TABLES: usize = 16;

/// Tables of exited threads, emptied (their maps keep their capacity), for the next threads'
/// first operations: with the pools' parked caches (`cache/reclaim.rs`), a thread started
/// after another exited allocates nothing to use the pools the other used. A thread's table
/// is two small allocations (the box and the map's first entries), made again for every
/// thread a program starts for a batch of work (`std::thread::scope`, a blocking pool).
// Boxes, because the box is reused too: a thread's table lives behind a raw pointer.
#[allow(clippy::vec_box)]
static SPARE_TABLES: std::sync::Mutex<Vec<Box<Table>>> = std::sync::Mutex::new(Vec::new());

/// A spare table, or a new one.
fn new_table() -> Box<Table> {
    let spare = SPARE_TABLES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .pop();
    spare.unwrap_or_default()
}

/// Empties an exiting thread's table (dropping its references to caches and pools) and
/// keeps it for the next thread, if there is room.
fn retire_table(mut table: Box<Table>) {
    table.entries.clear();
    table.closed_seen = 0;
    let mut spare = SPARE_TABLES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if spare.len() < MAX_SPARE_TABLES {
        spare.push(table);
    }
}

impl Table {
    /// Retires the caches of pools that closed since the last look.
    fn retire_closed(&mut self) {
        let closed = closed_pools();
        if closed == self.closed_seen {
            return;
        }
        self.closed_seen = closed;
        self.entries.retain(|_, e| {
            if !e.pool.is_closed() {
                return true;
            }
            if !e.cache.is_dead() {
                // SAFETY: this thread owns the caches in its table; the caller holds `busy`
                // and has reset `cur`, so no other operation of this thread on it runs.
                let owner = unsafe { e.cache.enter() };
                retire(owner, e);
            }
            false
        });
    }
}

struct Local {
    /// A doorbell: `NONE`, or the first bytes of a cache held by `table` (module docs).
    cur: Cell<*const Doorbell>,
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
        Local {
            cur: Cell::new(NONE),
            busy: Cell::new(false),
            table: Cell::new(ptr::null_mut()),
            destroyed: Cell::new(false),
        }
    };
    static GUARD: TableGuard = const { TableGuard };
}

/// Marks a slow path: sets `busy` and resets `cur`; `busy` is cleared on drop, also on
/// unwind (`cur` stays `NONE` unless the slow path set it to a live cache).
struct Busy<'a>(&'a Local);

impl<'a> Busy<'a> {
    fn enter(local: &'a Local) -> Self {
        local.busy.set(true);
        local.cur.set(NONE);
        Busy(local)
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.busy.set(false);
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
            let _busy = Busy::enter(local);
            let table = local.table.replace(ptr::null_mut());
            if table.is_null() {
                return;
            }
            // SAFETY: `table` came from `Box::into_raw` on this thread (see `attach`), was just
            // unlinked from `LOCAL` so nothing can reach it again, and `busy` was false, so no
            // reference into it is live. It is freed exactly once, here.
            let table = unsafe { Box::from_raw(table) };
            for e in table.entries.values() {
                // SAFETY: this thread owns its table's caches; `busy` is set and `cur` reset.
                let owner = unsafe { e.cache.enter() };
                retire(owner, e);
            }
            retire_table(table);
        });
    }
}

/// Runs `f` on this thread's `LOCAL`, like `LOCAL.with(f)` but always inlined.
///
/// `LocalKey::with` is only `#[inline]`; when its closure holds the whole fast path, LLVM
/// declines to inline it, and every access becomes an indirect call through the key's accessor.
/// Fetching only the address through `with` keeps that call trivially small.
#[inline(always)]
fn with_this_thread<R>(f: impl FnOnce(&Local) -> R) -> R {
    let local: *const Local = LOCAL.with(|local| local as *const Local);
    // SAFETY: `LOCAL` is a `const`-initialized thread-local with no destructor, so its storage
    // stays valid and in place for as long as this thread runs (also while other thread-locals'
    // destructors run), in particular for the duration of this call, which is the only time the
    // reference exists. We are on the owning thread, as `with` just returned its address.
    f(unsafe { &*local })
}

/// The fast path of a get on the pool with key `key`: a retained buffer for `n` bytes, or
/// `None` for the slow path.
#[inline(always)]
pub(crate) fn fast_pop(key: Key, n: usize) -> Option<Popped> {
    with_this_thread(|local| {
        let cur = local.cur.get();
        #[cfg(loom)]
        if cur.is_null() {
            return None;
        }
        // SAFETY: `cur` is `NO_CACHE` or the doorbell of a cache held by this thread's table,
        // derived from the whole cache (`Cache::doorbell`), alive for this call (module docs);
        // no other operation of this thread on it runs (a slow path resets `cur`).
        unsafe { fast::pop(cur, key, n) }
    })
}

/// The fast path of a return to the pool with key `key`: takes the buffer (leaving `v`
/// empty) unless the slow path must run.
#[inline(always)]
pub(crate) fn fast_push(key: Key, hint: u32, v: &mut Vec<u8>) -> Pushed {
    with_this_thread(|local| {
        let cur = local.cur.get();
        #[cfg(loom)]
        if cur.is_null() {
            return Pushed::Refused;
        }
        // SAFETY: as in `fast_pop`.
        unsafe { fast::push(cur, key, hint, v) }
    })
}

/// Runs `f` with the pool with key `key`, entering and making no cache: the pool from this
/// thread's table if it has a cache for it, else `find()`'s (`None`: the pool is gone). For
/// what needs only the pool (a refund).
pub(crate) fn with_pool<R>(
    key: Key,
    find: impl FnOnce() -> Option<Arc<PoolState>>,
    f: impl FnOnce(Option<&PoolState>) -> R,
) -> R {
    let known = with_this_thread(|local| {
        let table = local.table.get();
        if table.is_null() || local.busy.get() {
            return None;
        }
        // `busy` for the lookup alone (a re-entrant call would bypass the table), without
        // resetting `cur`: nothing in the table changes.
        local.busy.set(true);
        // SAFETY: non-null `table` is this thread's live table and `busy` was false, so this
        // is the only reference into it until `busy` is cleared below (module docs).
        let pool = unsafe { &*table }
            .entries
            .get(&key)
            .map(|e| Arc::clone(&e.pool));
        local.busy.set(false);
        pool
    });
    let pool = known.or_else(find);
    f(pool.as_deref())
}

/// One slow operation on a pool: what it does with this thread's cache for the pool, and
/// what it does without one. [`slow`] picks which, down the ladder (module docs).
pub(crate) trait SlowOp: Sized {
    /// What the operation gives back.
    type Out;
    /// The pool's state, looked up only when this thread has no cache for the pool yet;
    /// `None` if the caller cannot tell (then the operation does without a cache).
    fn find_pool(&self) -> Option<Arc<PoolState>>;
    /// The operation with this thread's cache `o` of `pool`, which then becomes the current
    /// cache.
    fn with_cache(self, o: &Owner<'_>, pool: &PoolState) -> Self::Out;
    /// The operation where this thread cannot use a cache (it is exiting, or the call is
    /// re-entrant, or it has none and `find_pool` gave none): with the pool if it is alive.
    fn without_cache(self, pool: Option<&PoolState>) -> Self::Out;
}

/// The ladder every slow operation on the pool `key` goes down (module docs): `op` with this
/// thread's cache for it (made on first use, with the pool from `op.find_pool()`), or, if
/// this thread cannot use a cache now, without one.
pub(crate) fn slow<O: SlowOp>(key: Key, op: O) -> O::Out {
    let tried = with_this_thread(|local| {
        if local.busy.get() {
            return Err((op, None));
        }
        let table = local.table.get();
        if !table.is_null() {
            let _busy = Busy::enter(local);
            // SAFETY: non-null `table` is this thread's live table (module docs); `busy` was
            // false, so this is the only reference into it until `_busy` drops.
            let table = unsafe { &mut *table };
            if table.entries.contains_key(&key) {
                return Ok(run(local, table, key, op));
            }
        }
        attach(local, key, op)
    });
    match tried {
        Ok(r) => r,
        Err((op, Some(pool))) => op.without_cache(pool.as_deref()),
        Err((op, None)) => {
            let pool = op.find_pool();
            op.without_cache(pool.as_deref())
        }
    }
}

/// The rest of [`slow`]: makes this thread's table and its cache for `key` if need be, then
/// runs `op` on it. Gives `op` back, with the pool if it was looked up, if the thread is
/// exiting or there is no live pool.
#[cold]
#[inline(never)]
#[allow(clippy::type_complexity)]
fn attach<O: SlowOp>(
    local: &Local,
    key: Key,
    op: O,
) -> Result<O::Out, (O, Option<Option<Arc<PoolState>>>)> {
    if local.busy.get() || local.destroyed.get() {
        return Err((op, None));
    }
    let _busy = Busy::enter(local);
    if local.table.get().is_null() {
        // Register the exit hook first; if the thread is already exiting, keep no table.
        if GUARD.try_with(|_| ()).is_err() {
            local.destroyed.set(true);
            return Err((op, None));
        }
        local.table.set(Box::into_raw(new_table()));
    }
    // SAFETY: this thread's live table, and `busy` makes this the only reference into it.
    let table = unsafe { &mut *local.table.get() };
    table.retire_closed();
    if let hash_map::Entry::Vacant(slot) = table.entries.entry(key) {
        let Some(pool) = op.find_pool() else {
            return Err((op, Some(None)));
        };
        if pool.is_closed() {
            return Err((op, Some(Some(pool))));
        }
        let cache = pool.new_cache(key);
        slot.insert(Entry { cache, pool });
    }
    Ok(run(local, table, key, op))
}

/// Runs `op` on the table's cache for `key` (`busy` is set, `cur` reset); then makes it the
/// current cache, or drops it if it died (its pool closed).
fn run<O: SlowOp>(local: &Local, table: &mut Table, key: Key, op: O) -> O::Out {
    let entry = table
        .entries
        .get(&key)
        .expect("the caller checked or made it");
    // SAFETY: this thread owns its table's caches; `busy` is set and `cur` reset, so no other
    // operation of this thread on it runs while this owner lives (module docs).
    let owner = unsafe { entry.cache.enter() };
    // What the operation leaves to do runs once the owner is gone (`policy::finish`).
    let r = policy::finish(owner, &entry.pool, |o| op.with_cache(o, &entry.pool));
    if entry.cache.is_dead() {
        table.entries.remove(&key);
    } else {
        local.cur.set(Cache::doorbell(&entry.cache));
    }
    r
}

/// The owner's side of a get and a return for the loom models, on a given cache instead of
/// this thread's table (loom's models drive the components, not the thread-local table): the
/// fast path, and the slow path when the fast one refuses, as `ops.rs` does.
#[cfg(all(test, loom))]
pub(crate) mod for_models {
    use crate::base::key::Tag;
    use crate::base::sync::Arc;
    use crate::engine::cache::block::Cache;
    use crate::engine::cache::fast::{self, Pushed};
    use crate::engine::fresh::Fresh;
    use crate::engine::policy;
    use crate::engine::state::{Got, PoolState};

    /// A get of `n` bytes on `cache`'s thread (which must not have to wait).
    pub(crate) fn get(cache: &Arc<Cache>, pool: &PoolState, n: usize) -> (Vec<u8>, Tag) {
        try_get(cache, pool, n).expect("the model's get does not wait")
    }

    /// A get of `n` bytes on `cache`'s thread; `None` where it would have to wait for budget.
    pub(crate) fn try_get(
        cache: &Arc<Cache>,
        pool: &PoolState,
        n: usize,
    ) -> Option<(Vec<u8>, Tag)> {
        let key = cache.head.own_key;
        // SAFETY: the calling model thread is the cache's owner, in no other operation on it.
        if let Some(hit) = unsafe { fast::pop(Cache::doorbell(cache), key, n) } {
            let tag = Tag::from_hint(hit.hint);
            return Some((hit.into_vec(), tag));
        }
        // SAFETY: as above.
        let o = unsafe { cache.enter() };
        let got = policy::finish(o, pool, |o| {
            policy::get_slow(o, pool, n, Fresh::Infallible, 0)
        });
        match got.expect("no allocation failure") {
            Got::Buf(v, tag) => Some((v.into_vec(), tag)),
            Got::Wait(_) => None,
        }
    }

    /// A return of `v` (tag `tag`) on `cache`'s thread.
    pub(crate) fn put(cache: &Arc<Cache>, pool: &PoolState, mut v: Vec<u8>, tag: Tag) {
        let key = cache.head.own_key;
        // SAFETY: as in `get`.
        match unsafe { fast::push(Cache::doorbell(cache), key, tag.hint(), &mut v) } {
            Pushed::Kept | Pushed::Due => {} // taken: `v` is empty
            Pushed::Refused => {
                // SAFETY: as in `get`.
                let o = unsafe { cache.enter() };
                policy::finish(o, pool, |o| policy::put_slow(o, pool, v, tag));
            }
        }
    }
}
