//! The one place where tierpool chooses its synchronization primitives.
//!
//! Every module that shares state between threads imports `Mutex` and the atomics from
//! here, never from `std` directly. Under `--cfg loom` they are loom's model-checked versions, so
//! the depot and the published counters can be explored exhaustively by the loom models in
//! `src/engine/loom_tests.rs` without `cfg` attributes scattered through the logic.
//!
//! Two things deliberately stay on `std` even under loom: the thread-local table of thread
//! caches (`engine/local.rs`, one OS thread owns it, nothing to interleave) and the process-wide
//! pool registry (`registry.rs`, a plain mutex taken only on cold paths).

#[cfg(loom)]
pub(crate) use loom::sync::{
    atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering},
    Mutex, MutexGuard,
};

#[cfg(not(loom))]
pub(crate) use std::sync::{
    atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering},
    Mutex, MutexGuard,
};

// Reference counts are not modelled (loom has no `Weak`), so `Arc` is always std's. One
// place depends on them: a parked thread cache is taken over only when `Arc::get_mut` says
// nothing else refers to it (`engine/cache/reclaim.rs`); under loom nothing is parked.
pub(crate) use std::sync::{Arc, Weak};

/// Locks `m`, ignoring poisoning.
///
/// tierpool never runs user code while it holds one of its locks, so a poisoned lock can only
/// mean a panic inside tierpool's own bookkeeping (for example an allocation failure turned into
/// a panic by a custom allocator). The data behind every lock stays consistent at every
/// instruction boundary (each critical section moves whole buffers between vectors), so carrying
/// on is sound and better than wedging every thread that shares the pool.
#[inline]
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    #[cfg(loom)]
    {
        m.lock().unwrap()
    }
    #[cfg(not(loom))]
    {
        m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Locks `m` if it is free now, ignoring poisoning (see [`lock`]); `None` if it is held.
#[inline]
pub(crate) fn try_lock<T>(m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    #[cfg(loom)]
    {
        m.try_lock().ok()
    }
    #[cfg(not(loom))]
    {
        match m.try_lock() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }
}

/// One round of waiting for another thread to finish a short operation (a reclaimer
/// waiting for an owner's busy mark to clear): a spin hint, and every 64th round a yield, so
/// that an owner preempted in the middle of its operation gets the CPU back.
#[inline]
pub(crate) fn spin_wait(round: &mut u32) {
    *round = round.wrapping_add(1);
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    if *round % 64 == 0 {
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

/// Pads and aligns a value to 128 bytes, the unit in which x86-64 prefetches cache lines in
/// pairs, so that data written by one thread never shares a line with data written by another.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct CachePadded<T>(pub(crate) T);

impl<T> std::ops::Deref for CachePadded<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.0
    }
}
