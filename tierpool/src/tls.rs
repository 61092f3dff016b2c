//! How a thread finds its cache for a pool: the current-cache slot and the thread's table.
//! All of the crate's thread-local `unsafe` is here.
//!
//! # The current-cache slot
//!
//! `LOCAL.cur` points at the doorbell of the cache this thread used last (the first field of a
//! [`Cache`], which is `repr(C)`), or at `NO_CACHE`, a static doorbell that always reads
//! `RUNG`. `LOCAL` is a `const`-initialized thread-local with no destructor, so reaching it
//! takes one `fs`-relative address computation and no lazy-initialization check. The fast
//! path loads `cur`, compares the doorbell with the pool's key, and on a match works on that
//! cache: one load and one comparison select the cache, and a ring (trim, close) or a different
//! pool sends the operation to the slow path with no further test.
//!
//! # The table
//!
//! Every cache of this thread is held (by an `Arc`) in a `Table` keyed by pool key. The slow
//! path looks the pool up there (creating the cache on first use), runs the policy, and makes
//! that cache the current one. A second thread-local (`GUARD`) exists only to run a destructor
//! at thread exit, which retires every cache: its buffers go to the depot, its counts to the
//! pool.
//!
//! # Soundness
//!
//! - `LOCAL.table` is null or a pointer from `Box::into_raw` on this thread; only this thread
//!   reads it (thread-local), and only `GUARD`'s destructor frees it, after resetting it to
//!   null. A `&mut Table` is made from it only while `busy` is false, and `busy` is true for
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

use crate::cache::{Cache, Owner, Popped, Pushed, RUNG};
use crate::policy;
use crate::state::{closed_pools, PoolState};
use crate::sync::{Arc, AtomicU32, Ordering};

/// The doorbell `cur` points at when this thread has no current cache; always `RUNG`.
#[cfg(not(loom))]
static NO_CACHE: AtomicU32 = AtomicU32::new(RUNG);

#[cfg(not(loom))]
const NONE: *const AtomicU32 = &NO_CACHE;

// loom's atomics cannot live in a `static`; under loom (whose models drive the components,
// not this table) `cur` is null when there is no current cache, and the fast paths miss.
#[cfg(loom)]
const NONE: *const AtomicU32 = ptr::null();

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
    entries: HashMap<u32, Entry, std::hash::BuildHasherDefault<KeyHasher>>,
    closed_seen: u64,
}

impl Table {
    /// Retires the caches of pools that closed since the last look.
    fn sweep(&mut self) {
        let closed = closed_pools();
        if closed == self.closed_seen {
            return;
        }
        self.closed_seen = closed;
        self.entries.retain(|_, e| {
            if !e.pool.is_closed() {
                return true;
            }
            // SAFETY: this thread owns the caches in its table; the caller holds `busy` and
            // has reset `cur`, so no other owner operation runs (module docs).
            let owner = unsafe { Owner::new(&e.cache) };
            policy::retire(&owner, &e.pool);
            false
        });
    }
}

struct Local {
    /// A doorbell: `NONE`, or the first field of a cache held by `table` (module docs).
    cur: Cell<*const AtomicU32>,
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
                let owner = unsafe { Owner::new(&e.cache) };
                policy::retire(&owner, &e.pool);
            }
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

/// This thread's current cache, if its doorbell holds `key`.
#[inline(always)]
fn current(local: &Local, key: u32) -> Option<Owner<'_>> {
    debug_assert_ne!(key, RUNG);
    let cur = local.cur.get();
    #[cfg(loom)]
    if cur.is_null() {
        return None;
    }
    // SAFETY: `cur` is `NO_CACHE` or the doorbell of a cache held by this thread's table
    // (module docs), alive for this call.
    if unsafe { &*cur }.load(Ordering::Relaxed) != key {
        return None;
    }
    // SAFETY: the doorbell holds a pool key, not `RUNG`, so it is a cache's first field, and
    // `cur` was made from the whole cache (`Arc::as_ptr`), so it may be read as the cache.
    let cache = unsafe { &*cur.cast::<Cache>() };
    // SAFETY: this thread owns the cache (it is in this thread's table), and no other owner
    // operation is in progress: slow paths reset `cur` while they hold one (module docs).
    Some(unsafe { Owner::new(cache) })
}

/// The fast path of a get on the pool with key `key`: a retained buffer for `n` bytes and
/// its tier, or `None` for the slow path.
#[inline(always)]
pub(crate) fn fast_pop(key: u32, n: usize) -> Option<Popped> {
    with_this_thread(|local| current(local, key)?.pop_fast(n))
}

/// The fast path of a return to the pool with key `key`: takes the buffer (leaving `v`
/// empty) unless the slow path must run.
#[inline(always)]
pub(crate) fn fast_push(key: u32, tier: u32, v: &mut Vec<u8>) -> Pushed {
    with_this_thread(|local| match current(local, key) {
        Some(owner) => owner.push_fast(tier, v),
        None => Pushed::Refused,
    })
}

/// The fast path of a get on a pool with a budget (its caches' doorbells hold `armed`): see
/// [`Owner::pop_charged`]; `Err(None)` also when this thread has no current cache for it.
#[inline(always)]
pub(crate) fn pop_charged(armed: u32, n: usize) -> Result<Popped, Option<u32>> {
    with_this_thread(|local| match current(local, armed) {
        Some(owner) => owner.pop_charged(n),
        None => Err(None),
    })
}

/// The fast path of a return to a pool with a budget: see [`Owner::push_charged`]; `None`
/// also when this thread has no current cache for it.
#[inline(always)]
pub(crate) fn push_charged(armed: u32, tag: u32, v: &mut Vec<u8>) -> Option<(Pushed, usize)> {
    with_this_thread(|local| current(local, armed)?.push_charged(tag, v))
}

/// Runs `f` on this thread's current cache if its doorbell holds `armed` (a budgeted pool's
/// [`arm`](crate::budget::arm)ed key), like the fast paths; `None` otherwise. `f` must not
/// call anything that may re-enter tierpool (the fast path's rule: see the module docs).
#[inline]
pub(crate) fn with_current<R>(armed: u32, f: impl FnOnce(&Owner<'_>) -> R) -> Option<R> {
    with_this_thread(|local| current(local, armed).map(|o| f(&o)))
}

/// Housekeeping on this thread's cache for `key`: the return countdown of the tier with hint
/// `hint` ran out.
#[cold]
#[inline(never)]
pub(crate) fn service(key: u32, hint: u32) {
    let _ = with_owner(key, (), |o, pool, ()| {
        o.fold_countdown(hint);
        policy::service(o, pool);
    });
}

/// Runs `f` with this thread's cache for the pool `key`, if it exists and may be used now, and
/// makes it the current cache. Otherwise gives `arg` back.
pub(crate) fn with_owner<A, R>(
    key: u32,
    arg: A,
    f: impl FnOnce(&Owner<'_>, &PoolState, A) -> R,
) -> Result<R, A> {
    with_this_thread(|local| {
        let table = local.table.get();
        if table.is_null() || local.busy.get() {
            return Err(arg);
        }
        let _busy = Busy::enter(local);
        // SAFETY: non-null `table` is this thread's live table (module docs); `busy` was false,
        // so this is the only reference into it until `_busy` drops.
        let table = unsafe { &mut *table };
        run(local, table, key, arg, f)
    })
}

/// Like [`with_owner`], but first creates this thread's table and its cache for `key` if
/// needed, using `pool` to find the pool. Gives `arg` back if the thread is exiting, the
/// call is re-entrant, or there is no live pool.
#[cold]
#[inline(never)]
pub(crate) fn attach<A, R>(
    key: u32,
    arg: A,
    pool: impl FnOnce() -> Option<Arc<PoolState>>,
    f: impl FnOnce(&Owner<'_>, &PoolState, A) -> R,
) -> Result<R, A> {
    with_this_thread(|local| {
        if local.busy.get() || local.destroyed.get() {
            return Err(arg);
        }
        let _busy = Busy::enter(local);
        if local.table.get().is_null() {
            // Register the exit hook first; if the thread is already exiting, keep no table.
            if GUARD.try_with(|_| ()).is_err() {
                local.destroyed.set(true);
                return Err(arg);
            }
            local.table.set(Box::into_raw(Box::default()));
        }
        // SAFETY: as in `with_owner`: this thread's live table, and `busy` makes this the only
        // reference into it.
        let table = unsafe { &mut *local.table.get() };
        table.sweep();
        if let hash_map::Entry::Vacant(slot) = table.entries.entry(key) {
            let Some(pool) = pool() else {
                return Err(arg);
            };
            if pool.is_closed() {
                return Err(arg);
            }
            let cache = pool.new_cache(key);
            slot.insert(Entry { cache, pool });
        }
        run(local, table, key, arg, f)
    })
}

/// Runs `f` on the table's cache for `key` (`busy` is set, `cur` reset); then makes it the
/// current cache, or drops it if it died (its pool closed).
fn run<A, R>(
    local: &Local,
    table: &mut Table,
    key: u32,
    arg: A,
    f: impl FnOnce(&Owner<'_>, &PoolState, A) -> R,
) -> Result<R, A> {
    let Some(entry) = table.entries.get(&key) else {
        return Err(arg);
    };
    // SAFETY: this thread owns its table's caches; `busy` is set and `cur` reset, so no other
    // owner operation runs while this one lives (module docs).
    let owner = unsafe { Owner::new(&entry.cache) };
    let r = f(&owner, &entry.pool, arg);
    if entry.cache.is_dead() {
        table.entries.remove(&key);
    } else {
        local.cur.set(Arc::as_ptr(&entry.cache).cast::<AtomicU32>());
    }
    Ok(r)
}
