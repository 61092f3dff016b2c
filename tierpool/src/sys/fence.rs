//! An asymmetric fence: the frequent side (a thread using its own cache) pays nothing, the
//! rare side (another thread reclaiming that cache) pays for both.
//!
//! Reclaiming an idle thread's cache is a store-buffering (Dekker) problem. The owner marks
//! itself busy and then reads the doorbell; a reclaimer rings the doorbell and then reads the
//! mark. Each side must see the other's store, or both may touch the cache at once. Both sides
//! need a full fence between their store and their load, and on the owner's side that fence
//! (`mfence`, or a locked instruction: several times a whole get+put) is what the fast path
//! cannot afford.
//!
//! So the owner's side is only a compiler fence ([`light`]), and the reclaimer's side
//! ([`heavy`]) makes every running thread of the process execute a full memory barrier:
//! Linux's `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`, which interrupts each CPU that runs
//! one of our threads: microseconds per call, paid once per batch of caches. After it returns, every
//! owner either had its mark visible (the reclaimer waits for it to clear) or will see the
//! doorbell rung at its next look (it steps aside). A thread that is not running has passed
//! through the kernel's own barrier when it was switched out. This is folly's
//! `asymmetricLightBarrier`/`asymmetricHeavyBarrier` and the barrier that hazard pointers and
//! the JVM's biased-lock revocation use.
//!
//! On Windows the heavy fence is `FlushProcessWriteBuffers` (the same inter-processor barrier,
//! which .NET's garbage collector and folly use there). Where the heavy fence is not available
//! (macOS and the other systems, a Linux before 4.14, a seccomp filter that refuses the call,
//! or `TIERPOOL_NO_MEMBARRIER` set in the environment for testing),
//! [`heavy`] returns `false` and nobody reclaims another thread's cache: caches are rung and
//! give their buffers up at their owner's next operation or exit; since an idle thread would
//! then keep its cache's room for good, caches reserve it apart from `max_retained_bytes` (a
//! per-cache bound, with a smaller default cache), and budgeted pools do without thread
//! caches (see `state.rs`).
//!
//! Under loom and Miri both sides are `fence(SeqCst)`, which the memory model specifies: two
//! threads each storing, fencing `SeqCst`, then loading cannot both miss the other's store.
//! That is the property the pair above provides, so the models check the protocols built on
//! it. ThreadSanitizer does not model either fence; it sees the happens-before edges the
//! protocol builds from release stores and acquire loads of the mark (see `cache/mod.rs`).

#[cfg(not(any(loom, miri)))]
use std::sync::atomic::compiler_fence;

use crate::base::sync::{fence, Ordering};

/// The owner's side: orders its store of the busy mark before its load of the doorbell,
/// against [`heavy`] on other threads. Free at run time (a compiler fence) natively.
#[inline(always)]
pub(crate) fn light() {
    #[cfg(any(loom, miri))]
    fence(Ordering::SeqCst);
    #[cfg(not(any(loom, miri)))]
    compiler_fence(Ordering::SeqCst);
}

/// The reclaimer's side: a full fence on this thread and on every thread of the process
/// that is running. Returns false (having fenced only this thread) where that is not
/// available; the caller must then not touch other threads' caches.
pub(crate) fn heavy() -> bool {
    fence(Ordering::SeqCst);
    #[cfg(any(loom, miri))]
    {
        true
    }
    #[cfg(not(any(loom, miri)))]
    {
        os::heavy()
    }
}

/// True if [`heavy`] works here (it is set up on the first call).
pub(crate) fn available() -> bool {
    #[cfg(any(loom, miri))]
    {
        true
    }
    #[cfg(not(any(loom, miri)))]
    {
        os::available()
    }
}

#[cfg(all(target_os = "linux", not(any(loom, miri))))]
mod os {
    use std::sync::OnceLock;

    /// From `<linux/membarrier.h>`.
    const MEMBARRIER_CMD_QUERY: libc::c_long = 0;
    const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
    const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

    fn membarrier(cmd: libc::c_long) -> libc::c_long {
        // SAFETY: `membarrier` takes two integers (command and flags; the third argument,
        // a CPU id, is ignored without `MEMBARRIER_CMD_FLAG_CPU`) and touches no memory of
        // ours; an unknown command or an old kernel makes it fail with an error code.
        unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                cmd,
                0 as libc::c_long,
                0 as libc::c_long,
            )
        }
    }

    /// Registers this process for private expedited barriers, once. Registration is needed
    /// before the first barrier (Linux 4.14+).
    pub(super) fn available() -> bool {
        static READY: OnceLock<bool> = OnceLock::new();
        *READY.get_or_init(|| {
            if std::env::var_os("TIERPOOL_NO_MEMBARRIER").is_some() {
                return false;
            }
            let supported = membarrier(MEMBARRIER_CMD_QUERY);
            supported >= 0
                && supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED != 0
                && membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0
        })
    }

    pub(super) fn heavy() -> bool {
        if !available() {
            return false;
        }
        if membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0 {
            return true;
        }
        // A child made by `fork` inherits the memo of the registration, not the registration
        // itself (the kernel keeps it per process): register once more and retry.
        membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0
            && membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0
    }
}

#[cfg(all(windows, not(any(loom, miri))))]
mod os {
    #[link(name = "kernel32")]
    extern "system" {
        /// Flushes the write queue of every processor that runs a thread of this process
        /// (an inter-processor interrupt each, as `membarrier`), Windows Vista and later:
        /// the heavy barrier .NET's garbage collector and folly use on Windows.
        fn FlushProcessWriteBuffers();
    }

    pub(super) fn available() -> bool {
        std::env::var_os("TIERPOOL_NO_MEMBARRIER").is_none()
    }

    pub(super) fn heavy() -> bool {
        if !available() {
            return false;
        }
        // SAFETY: no arguments, no memory of ours; it cannot fail.
        unsafe { FlushProcessWriteBuffers() };
        true
    }
}

#[cfg(all(not(target_os = "linux"), not(windows), not(any(loom, miri))))]
mod os {
    pub(super) fn available() -> bool {
        false
    }

    pub(super) fn heavy() -> bool {
        false
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    /// On the project's machines the heavy fence works; the reclaim tests depend on it, so a
    /// system that refuses it must fail here rather than let them pass on the fallback path
    /// (`TIERPOOL_REQUIRE_MEMBARRIER`, set by CI for the Linux runs and the Windows one).
    #[test]
    fn the_heavy_fence_works_where_required() {
        let required = std::env::var_os("TIERPOOL_REQUIRE_MEMBARRIER").is_some();
        let works = super::heavy();
        assert_eq!(works, super::available());
        if required {
            assert!(
                works,
                "the heavy fence was refused (membarrier on Linux, FlushProcessWriteBuffers on Windows)"
            );
        }
    }
}
