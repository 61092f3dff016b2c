//! The process-wide registry of live pools, and the key that names one.
//!
//! A [`PooledBuf`](crate::PooledBuf) must be `'static` and `Send`, yet taking a reference count
//! on its pool for every buffer handed out would put a write to one shared cache line on every
//! get and every drop. So a buffer carries no pointer to its pool at all, only the pool's
//! *key*: a 32-bit number given to no other live pool (and to no other pool at all until 67
//! million more have been made).
//!
//! - On the fast path the key is compared with the doorbell of the current thread's current
//!   cache (`engine/local.rs`, `engine/cache/mod.rs`); nothing shared is read.
//! - On the cold path (first use of a pool on a thread, or a thread whose table is already gone)
//!   the key is resolved here, under a mutex, into the pool's state if and only if the pool is
//!   still alive.
//! - When a pool is dropped its key is removed, so a buffer that outlives its pool resolves to
//!   nothing and is simply freed.
//!
//! No key can ever resolve to freed memory: the registry holds only `Weak` references and
//! upgrades them under its lock. A pool with a budget on bytes in use has the top bit of its
//! key set, and the key holds the alignment of the pool's allocations (`key.rs`). After 2^26
//! pools the counter wraps (skipping keys still in use); a buffer that outlived its pool by
//! that many pools would then be adopted by a new pool with the same key, so the same
//! alignment, like any foreign `Vec` (filed by its capacity, its tier hint checked), which is
//! safe.

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::base::key::{Key, RUNG};
use crate::base::sync::{Arc, Weak};
use crate::engine::state::PoolState;

#[derive(Debug)]
struct Registry {
    /// By the key's slot (its low 26 bits), unique among live pools; the whole key alongside.
    pools: BTreeMap<u32, (Key, Weak<PoolState>)>,
    last: u32,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    pools: BTreeMap::new(),
    last: 0,
});

fn registry() -> std::sync::MutexGuard<'static, Registry> {
    // Nothing under this lock can panic halfway through an update; see `sync::lock`.
    REGISTRY
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Gives `pool` a key: a slot that is non-zero and not that of any live pool, marked
/// budgeted if the pool has a budget on bytes in use.
///
/// # Panics
/// If 2^26 - 1 pools are alive at once (the registry alone would need several GiB).
pub(crate) fn register(pool: &Arc<PoolState>) -> Key {
    let mut reg = registry();
    assert!(reg.pools.len() < Key::SLOTS, "too many live pools");
    let mut slot = reg.last;
    loop {
        slot = slot.wrapping_add(1) % (Key::SLOTS as u32 + 1);
        if slot != RUNG && !reg.pools.contains_key(&slot) {
            break;
        }
    }
    reg.last = slot;
    let key = Key::new(slot, pool.budget.is_some(), pool.align());
    reg.pools.insert(slot, (key, Arc::downgrade(pool)));
    key
}

/// The live pool with key `key`, if it is still alive.
pub(crate) fn lookup(key: Key) -> Option<Arc<PoolState>> {
    match registry().pools.get(&key.slot()) {
        Some((k, pool)) if *k == key => pool.upgrade(),
        _ => None,
    }
}

/// Retires `key`: later lookups of it fail.
pub(crate) fn unregister(key: Key) {
    let mut reg = registry();
    if reg.pools.get(&key.slot()).is_some_and(|(k, _)| *k == key) {
        reg.pools.remove(&key.slot());
    }
}
