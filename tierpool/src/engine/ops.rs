//! The engine's one door: every operation the layers above perform on a pool's machinery,
//! and the types they need for it. `buf/`, `pool/` and `io/` import from the engine only this
//! file, `config.rs` and `error.rs` (`scripts/check_layers.py` holds them to it); the thread
//! caches, their owners, the policy and the pool's state behind [`PoolState`]'s methods stay
//! inside.
//!
//! | operation | what it does |
//! |---|---|
//! | [`open`] / [`close`] | a pool's state registered under a key (and its trimmer started); the last handle's close |
//! | [`pop`] / [`get`] | a get: this thread's cache's fast path, and everything beyond it (the ladder of `local.rs`) |
//! | [`put`] | a return, fast path, housekeeping and slow path |
//! | [`refund`] | a buffer that leaves the pool gives its charge (and its holder entry) back |
//! | [`trim`] | `trim()`: every cache, the depot, the spare stacks, the allocator |
//! | [`sweep`] | a budget waiter's sweep of every cache's buffers back into the account |
//!
//! Every slow operation is a [`SlowOp`] written here, so what one does with a cache and
//! without one reads in one place.

use std::mem;

use super::cache::{Owner, Pushed};
use super::config::Config;
use super::error::AllocError;
use super::fresh::prepare_hit;
use super::local::{self, SlowOp};
use super::{policy, registry, trimmer};
use crate::base::key::{Key, Tag};
use crate::base::sync::{lock, Arc};
use crate::observe::holders::is_tracked;
use crate::sys::alloc::free;
use crate::sys::trim::Why;

pub(crate) use super::budget::{Budget, Ticket, Wake};
pub(crate) use super::fresh::Fresh;
pub(crate) use super::state::{Got, PoolState};

/// A new pool's state for `config`, registered under a new key, its background trimmer
/// started if the configuration asks for one.
pub(crate) fn open(config: Config) -> (Key, Arc<PoolState>) {
    let background = config.background_trim;
    let state = Arc::new(PoolState::new(config));
    let key = registry::register(&state);
    if background {
        *lock(&state.trimmer) = trimmer::spawn(&state);
    }
    (key, state)
}

/// Closes the pool `key` when its last handle goes: every thread cache gives up its buffers
/// now (reclaimed), or, where caches cannot be reclaimed, at its owner's next operation or
/// exit; this thread's own at once. The trimmer wakes to exit.
pub(crate) fn close(key: Key, state: &PoolState) {
    policy::close_all(state);
    registry::unregister(key);
    local::slow(key, LookAtClose);
    if let Some(trimmer) = lock(&state.trimmer).take() {
        trimmer.unpark();
    }
}

/// [`close`]'s operation: this thread's cache looks at the pool, sees the ring and gives its
/// buffers up.
struct LookAtClose;

impl SlowOp for LookAtClose {
    type Out = ();
    fn find_pool(&self) -> Option<Arc<PoolState>> {
        None
    }
    fn with_cache(self, o: &Owner<'_>, pool: &PoolState) {
        policy::look(o, pool);
    }
    fn without_cache(self, _: Option<&PoolState>) {}
}

/// The fast path of a get of `n` bytes from the pool `key`: a buffer this thread's cache
/// holds, readied as `how` asks, and its tag; `None` sends the get to [`get`].
#[inline(always)]
pub(crate) fn pop(key: Key, n: usize, how: Fresh) -> Option<(Vec<u8>, Tag)> {
    let hit = local::fast_pop(key, n)?;
    let tag = Tag::from_hint(hit.hint);
    let mut v = hit.into_vec();
    prepare_hit(&mut v, n, how);
    Some((v, tag))
}

/// A get of `n` bytes beyond the fast path, from the pool `key` with state `state`: through
/// this thread's cache's slow path, or without a cache (down the ladder), with `prepaid`
/// bytes of its charge already paid. [`Got::Wait`]: a budget with no room now.
pub(crate) fn get(
    key: Key,
    state: &Arc<PoolState>,
    n: usize,
    how: Fresh,
    prepaid: usize,
) -> Result<Got, AllocError> {
    local::slow(
        key,
        Get {
            n,
            how,
            prepaid,
            state,
        },
    )
}

/// [`get`]'s operation.
struct Get<'a> {
    n: usize,
    how: Fresh,
    prepaid: usize,
    state: &'a Arc<PoolState>,
}

impl SlowOp for Get<'_> {
    type Out = Result<Got, AllocError>;
    fn find_pool(&self) -> Option<Arc<PoolState>> {
        Some(Arc::clone(self.state))
    }
    fn with_cache(self, o: &Owner<'_>, pool: &PoolState) -> Self::Out {
        policy::get_slow(o, pool, self.n, self.how, self.prepaid)
    }
    fn without_cache(self, pool: Option<&PoolState>) -> Self::Out {
        let pool = pool.unwrap_or(self.state);
        policy::get_direct(pool, self.n, self.how, self.prepaid)
    }
}

/// Returns `v` (handed out with tag `tag`) to the pool with key `key`, which may be gone: the
/// drop path of every pooled buffer and [`BufferPool::put`](crate::BufferPool::put). A pool
/// with a budget takes the same path: a buffer on a stack stays charged (`budget.rs`).
#[inline(always)]
pub(crate) fn put(key: Key, tag: Tag, mut v: Vec<u8>) {
    match local::fast_push(key, tag.hint(), &mut v) {
        // Taken: `v` is an empty `Vec` now, with nothing to free.
        Pushed::Kept => mem::forget(v),
        Pushed::Due => {
            mem::forget(v);
            look_due(key, tag.hint());
        }
        Pushed::Refused => {
            // The `Vec` goes to the slow path as its parts, in registers: passed whole (by
            // reference to a copy, the ABI's way for 24 bytes), it can make the compiler keep
            // `v` in memory on the fast path too.
            let mut v = mem::ManuallyDrop::new(v);
            put_slow(v.as_mut_ptr(), v.len(), v.capacity(), key, tag)
        }
    }
}

/// A return the fast path could not take: through this thread's cache's slow path, or
/// without one. The buffer comes as the parts of a `Vec` whose ownership passes here.
#[cold]
#[inline(never)]
fn put_slow(ptr: *mut u8, len: usize, cap: usize, key: Key, tag: Tag) {
    // SAFETY: the parts of a `Vec<u8>` the caller gave up (`ManuallyDrop`), so this is its
    // only owner.
    let v = unsafe { Vec::from_raw_parts(ptr, len, cap) };
    local::slow(key, Return { v, key, tag });
}

/// [`put`]'s slow operation: a buffer coming back to the pool with key `key`.
struct Return {
    v: Vec<u8>,
    key: Key,
    tag: Tag,
}

impl SlowOp for Return {
    type Out = ();
    fn find_pool(&self) -> Option<Arc<PoolState>> {
        registry::lookup(self.key)
    }
    fn with_cache(self, o: &Owner<'_>, pool: &PoolState) {
        policy::put_slow(o, pool, self.v, pool.untrack(self.tag));
    }
    fn without_cache(self, pool: Option<&PoolState>) {
        match pool {
            Some(pool) => policy::put_direct(pool, self.v, pool.untrack(self.tag)),
            None => free(self.v, self.key.align()), // the pool is gone
        }
    }
}

/// Housekeeping on this thread's cache for `key`: the return countdown of the tier with hint
/// `hint` ran out, so the cache looks at the pool.
#[cold]
#[inline(never)]
fn look_due(key: Key, hint: u32) {
    local::slow(key, DueLook { hint });
}

/// [`look_due`]'s operation, on a cache only.
struct DueLook {
    hint: u32,
}

impl SlowOp for DueLook {
    type Out = ();
    fn find_pool(&self) -> Option<Arc<PoolState>> {
        None
    }
    fn with_cache(self, o: &Owner<'_>, pool: &PoolState) {
        // The look first, then the next countdown, at the length the look just chose
        // (`Owner::pace`): the other way round, a thread that went from busy to sparse ran
        // two more countdowns of 256 before its looks came closer. The finished countdown
        // reads as 0 meanwhile, so the count the look reads is exact.
        policy::look(o, pool);
        o.fold_countdown(self.hint);
    }
    fn without_cache(self, _: Option<&PoolState>) {}
}

/// Gives the charge recorded in `tag` back to the budget of the pool with key `key`, and its
/// holder entry (feature `holders`): a buffer left the pool (`into_vec`, `into_bytes`).
#[cold]
pub(crate) fn refund(key: Key, tag: Tag) {
    if (!key.budgeted() && !is_tracked(tag)) || tag == Tag::NONE {
        return;
    }
    local::with_pool(
        key,
        || registry::lookup(key),
        |pool| {
            if let Some(pool) = pool {
                let tag = pool.untrack(tag);
                if key.budgeted() {
                    pool.refund(pool.charge_of(tag));
                }
            }
        },
    );
}

/// Releases everything the pool `key` retains (`trim()`): every thread cache's buffers, the
/// depot's, the spare stacks; then trims the allocator. Returns the bytes released.
pub(crate) fn trim(key: Key, state: &PoolState) -> usize {
    let caches = match policy::trim_all(state) {
        Some(bytes) => bytes,
        // Caches cannot be reclaimed here: this thread's own releases now, the others at
        // their owners' next operation.
        None => local::slow(key, TrimOwn),
    };
    let bytes = caches + state.depot.trim();
    state.trim_spares();
    state.allocator_trim.released(bytes, Why::Trim);
    state.allocator_trim.run_now();
    bytes
}

/// Where caches cannot be reclaimed: [`trim`] releases this thread's cache now (the others
/// see the trim at their next operation).
struct TrimOwn;

impl SlowOp for TrimOwn {
    type Out = usize;
    fn find_pool(&self) -> Option<Arc<PoolState>> {
        None
    }
    fn with_cache(self, o: &Owner<'_>, pool: &PoolState) -> usize {
        o.set_trim_gen(pool.trim_gen.load(std::sync::atomic::Ordering::Relaxed));
        policy::release_all(o, pool)
    }
    fn without_cache(self, _: Option<&PoolState>) -> usize {
        0
    }
}

/// A budget waiter's sweep: every thread cache's buffers back into the account, and the
/// caches rung so that they keep nothing while it waits.
pub(crate) fn sweep(state: &PoolState) {
    policy::sweep(state);
}
