//! The control block the views of one buffer share ([`Inner`]: the count of views, the
//! buffer, its pool's key and its tag), and its recycling.
//!
//! Allocating a block per `into_shared` would put an allocation back on the path a pool exists
//! to keep clean, so blocks are recycled: the thread that drops the last view keeps the empty
//! block in a thread-local stack (up to 64), and a full stack hands half to a process-wide
//! stack (up to 4096) from which an empty one takes a batch, as the thread caches do with
//! buffers. In steady state, including when buffers are shared on one thread and released on
//! another, `into_shared` allocates nothing. Under loom, blocks are plain boxes.

use std::ptr::NonNull;

use crate::base::key::{Key, Tag};
use crate::base::sync::AtomicUsize;

/// Empty control blocks a thread keeps for reuse.
#[cfg_attr(loom, allow(dead_code))]
const LOCAL_BLOCKS: usize = 64;
/// Empty control blocks kept process-wide for threads whose own stack is empty.
#[cfg_attr(loom, allow(dead_code))]
const GLOBAL_BLOCKS: usize = 4096;

/// What the views of one buffer share (`buf/shared.rs` has the counting protocol).
pub(crate) struct Inner {
    /// Live views.
    pub(crate) refs: AtomicUsize,
    pub(crate) buf: Vec<u8>,
    /// The pool's key ([`Key::NOBODY`] for a `Vec` of no pool).
    pub(crate) pool: Key,
    /// The buffer's tag ([`Tag::FOREIGN`] for a `Vec` of no pool, made with `From<Vec<u8>>`).
    pub(crate) tag: Tag,
}

/// A block holding `inner`, recycled if one is available.
#[cfg(not(loom))]
pub(crate) fn take(inner: Inner) -> NonNull<Inner> {
    match recycle::pop() {
        Some(mut block) => {
            *block = inner;
            NonNull::from(Box::leak(block))
        }
        None => NonNull::from(Box::leak(Box::new(inner))),
    }
}

/// Gives an empty block back for reuse.
///
/// # Safety
/// `inner` came from [`take`], its `buf` is empty, and nothing uses it afterwards.
#[cfg(not(loom))]
pub(crate) unsafe fn give(inner: NonNull<Inner>) {
    // SAFETY: `take` made it with `Box::leak`; the caller hands over the only use.
    let block = unsafe { Box::from_raw(inner.as_ptr()) };
    recycle::push(block);
}

// Under loom, blocks are plain boxes (loom models the count, not the recycling).
#[cfg(loom)]
pub(crate) fn take(inner: Inner) -> NonNull<Inner> {
    NonNull::from(Box::leak(Box::new(inner)))
}

#[cfg(loom)]
pub(crate) unsafe fn give(inner: NonNull<Inner>) {
    // SAFETY: as in the non-loom version.
    drop(unsafe { Box::from_raw(inner.as_ptr()) });
}

// The stacks hold the heap blocks themselves (views point at them), so `Vec<Box<_>>` is the
// point, not an accident.
#[cfg(not(loom))]
#[allow(clippy::vec_box)]
mod recycle {
    use std::cell::RefCell;
    use std::sync::Mutex;

    use super::{Inner, GLOBAL_BLOCKS, LOCAL_BLOCKS};

    /// A thread's empty blocks; flushed to `GLOBAL` when the thread exits.
    struct Local(RefCell<Vec<Box<Inner>>>);

    impl Drop for Local {
        fn drop(&mut self) {
            let mut blocks = std::mem::take(self.0.get_mut());
            let mut global = GLOBAL.lock().unwrap_or_else(|e| e.into_inner());
            let room = GLOBAL_BLOCKS.saturating_sub(global.len());
            global.extend(blocks.drain(..room.min(blocks.len())));
        }
    }

    thread_local! {
        static LOCAL: Local = const { Local(RefCell::new(Vec::new())) };
    }

    static GLOBAL: Mutex<Vec<Box<Inner>>> = Mutex::new(Vec::new());

    pub(super) fn pop() -> Option<Box<Inner>> {
        LOCAL
            .try_with(|local| {
                let mut stack = local.0.try_borrow_mut().ok()?;
                if let Some(b) = stack.pop() {
                    return Some(b);
                }
                // Empty: take a batch from the process-wide stack.
                let mut global = GLOBAL.lock().unwrap_or_else(|e| e.into_inner());
                let n = global.len().min(LOCAL_BLOCKS / 2);
                let at = global.len() - n;
                stack.extend(global.drain(at..));
                drop(global);
                stack.pop()
            })
            .ok()
            .flatten()
    }

    pub(super) fn push(block: Box<Inner>) {
        let kept = LOCAL.try_with(|local| {
            let Ok(mut stack) = local.0.try_borrow_mut() else {
                return Some(block);
            };
            if stack.len() >= LOCAL_BLOCKS {
                // Full: hand the older half to the process-wide stack.
                let mut global = GLOBAL.lock().unwrap_or_else(|e| e.into_inner());
                let room = GLOBAL_BLOCKS.saturating_sub(global.len());
                let n = (LOCAL_BLOCKS / 2).min(room);
                global.extend(stack.drain(..n));
                drop(global);
                if stack.len() >= LOCAL_BLOCKS {
                    stack.drain(..LOCAL_BLOCKS / 2); // the global stack is full: free some
                }
            }
            if stack.capacity() == 0 {
                stack.reserve_exact(LOCAL_BLOCKS);
            }
            stack.push(block);
            None
        });
        // The thread is exiting (or this is a re-entrant call): just free the block.
        drop(kept);
    }
}
