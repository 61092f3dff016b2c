//! The process-wide registry of live pools, and the [`PoolId`] that names one.
//!
//! A [`PooledBuf`](crate::PooledBuf) must be `'static` and `Send`, yet taking a reference count
//! on its pool for every buffer handed out would put a write to one shared cache line on every
//! get and every drop. So a buffer carries no pointer to its pool at all, only a `PoolId`: a
//! slot index and the generation of the pool that held the slot when the buffer was handed out.
//!
//! - On the fast path the id is resolved against the current thread's own table of caches
//!   (`local.rs`), which stores the same pair; nothing shared is read.
//! - On the cold path (first use of a pool on a thread, or a thread whose table is already gone)
//!   the id is resolved here, under a mutex, into an `Arc<Shared>` if and only if the slot still
//!   holds that generation.
//! - When a pool is dropped its slot's generation is bumped before the slot can be reused, so a
//!   buffer that outlives its pool resolves to nothing and is simply freed.
//!
//! No id can ever resolve to freed memory: the registry holds only `Weak` references and
//! upgrades them under its lock. This is the whole soundness argument for `PooledBuf` outliving
//! its pool, and it needs no `unsafe`.

use std::sync::Mutex;

use crate::pool::Shared;
use crate::sync::{Arc, Weak};

/// Names a pool for as long as it lives; never names a later pool in the same slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct PoolId {
    pub(crate) idx: u32,
    pub(crate) gen: u16,
}

#[derive(Debug)]
struct Slot {
    gen: u16,
    pool: Option<Weak<Shared>>,
}

#[derive(Debug)]
struct Registry {
    slots: Vec<Slot>,
    free: Vec<u32>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    slots: Vec::new(),
    free: Vec::new(),
});

fn registry() -> std::sync::MutexGuard<'static, Registry> {
    // Nothing under this lock can panic halfway through an update; see `sync::lock`.
    REGISTRY
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Gives `pool` a slot and returns its id.
///
/// # Panics
/// If more than `u32::MAX` pools are alive at once.
pub(crate) fn register(pool: &Arc<Shared>) -> PoolId {
    let mut reg = registry();
    let weak = Arc::downgrade(pool);
    if let Some(idx) = reg.free.pop() {
        let slot = &mut reg.slots[idx as usize];
        slot.pool = Some(weak);
        return PoolId { idx, gen: slot.gen };
    }
    let idx = u32::try_from(reg.slots.len()).expect("more than u32::MAX live pools");
    reg.slots.push(Slot {
        gen: 0,
        pool: Some(weak),
    });
    PoolId { idx, gen: 0 }
}

/// The live pool named by `id`, if it is still alive.
pub(crate) fn lookup(id: PoolId) -> Option<Arc<Shared>> {
    let reg = registry();
    let slot = reg.slots.get(id.idx as usize)?;
    if slot.gen != id.gen {
        return None;
    }
    slot.pool.as_ref()?.upgrade()
}

/// Retires `id`: later lookups of it fail, and its slot may serve a new pool under a new
/// generation.
pub(crate) fn unregister(id: PoolId) {
    let mut reg = registry();
    let slot = &mut reg.slots[id.idx as usize];
    debug_assert_eq!(slot.gen, id.gen);
    // Wrapping: a stale id can be confused with a live one only after 65,536 pools have come
    // and gone in the same slot while a buffer of the first was still out. That buffer would
    // then be adopted by the new pool like any foreign `Vec` (filed by its capacity), which is
    // always safe; the generation only keeps buffers from wandering into unrelated pools.
    slot.gen = slot.gen.wrapping_add(1);
    slot.pool = None;
    reg.free.push(id.idx);
}
