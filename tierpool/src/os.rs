//! Getting released memory out of the process, not only back to the allocator.
//!
//! When tierpool releases a buffer it hands it to the global allocator, which decides whether
//! the pages leave the process. glibc's `malloc` gives memory back to the system only from the
//! top of its heap (and from chunks above `M_MMAP_THRESHOLD`, which have their own mappings).
//! A pool's buffers are long-lived: after a burst, one buffer still in use high in the heap
//! pins every freed chunk below it, and the process stays near its peak although the pool
//! retains almost nothing (the report's `burst` workload, two intervals after a 160 MiB
//! burst: 69 MiB against 3.9 MiB for plain `Vec`, with 16 KiB retained; with the trim below,
//! 4.0 MiB against 4.0).
//!
//! So after tierpool has released a megabyte or more (decay, `trim()`, buffers refused at the
//! cap), it calls glibc's `malloc_trim(0)`, which returns the free pages in the middle of the
//! heap too (`madvise(MADV_DONTNEED)`), at most once per decay interval (and at once on an
//! explicit [`BufferPool::trim`](crate::BufferPool::trim)). Only where glibc is the C library
//! (`target_env = "gnu"`); elsewhere, and with
//! [`Builder::trim_allocator(false)`](crate::Builder::trim_allocator), nothing is called.
//!
//! Under another global allocator (jemalloc, mimalloc) the call only trims glibc's own heap,
//! which then holds little: harmless and cheap. Those allocators return freed pages on their
//! own schedules (jemalloc after `dirty_decay_ms`, 10 s by default; mimalloc after its purge
//! delay), which no library can shorten for the whole process without linking to them.

use crate::sync::{AtomicU64, AtomicUsize, Ordering};

/// Released bytes that make a `malloc_trim` worth its cost (a walk over glibc's free chunks,
/// under each arena's lock; the pages given back fault in again when reused).
pub(crate) const TRIM_AFTER_BYTES: usize = 1 << 20;

/// Tracks what a pool released since glibc's heap was last trimmed.
#[derive(Debug)]
pub(crate) struct AllocatorTrim {
    enabled: bool,
    pending: AtomicUsize,
    /// The decay epoch of the last trim, plus one (0: never).
    last: AtomicU64,
    /// Trims done.
    done: AtomicU64,
}

impl AllocatorTrim {
    pub(crate) fn new(enabled: bool) -> Self {
        AllocatorTrim {
            enabled: enabled && SUPPORTED,
            pending: AtomicUsize::new(0),
            last: AtomicU64::new(0),
            done: AtomicU64::new(0),
        }
    }

    /// Notes `bytes` released to the allocator.
    #[inline]
    pub(crate) fn released(&self, bytes: usize) {
        if self.enabled && bytes > 0 {
            self.pending.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    /// Trims glibc's heap if a megabyte or more was released, and not yet in this epoch.
    /// Returns true if it did.
    pub(crate) fn maybe_run(&self, epoch: u64) -> bool {
        if !self.enabled || self.pending.load(Ordering::Relaxed) < TRIM_AFTER_BYTES {
            return false;
        }
        // One thread per epoch (a read-modify-write elects it); the others' releases wait
        // for the next epoch.
        if self.last.swap(epoch + 1, Ordering::Relaxed) == epoch + 1 {
            return false;
        }
        self.pending.store(0, Ordering::Relaxed);
        self.trim_heap();
        true
    }

    /// Trims glibc's heap now if a megabyte or more was released (an explicit `trim()`).
    pub(crate) fn run_now(&self) -> bool {
        if !self.enabled || self.pending.swap(0, Ordering::Relaxed) < TRIM_AFTER_BYTES {
            return false;
        }
        self.trim_heap();
        true
    }

    /// How many times this pool trimmed glibc's heap.
    pub(crate) fn count(&self) -> u64 {
        self.done.load(Ordering::Relaxed)
    }

    fn trim_heap(&self) {
        self.done.fetch_add(1, Ordering::Relaxed);
        trim_heap();
    }
}

/// True where [`trim_heap`] does something.
const SUPPORTED: bool = cfg!(all(
    target_os = "linux",
    target_env = "gnu",
    not(miri),
    not(loom)
));

/// glibc's `malloc_trim(0)`: gives every free page of every arena back to the system.
fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu", not(miri), not(loom)))]
    {
        extern "C" {
            fn malloc_trim(pad: usize) -> std::ffi::c_int;
        }
        // SAFETY: `malloc_trim` takes no pointer and may be called from any thread at any
        // time (it takes each arena's lock); glibc is the C library of this target, so the
        // symbol exists. It frees nothing that is in use: only pages inside free chunks.
        unsafe {
            malloc_trim(0);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn trims_once_per_epoch_and_only_after_a_megabyte() {
        let t = AllocatorTrim::new(true);
        t.released(TRIM_AFTER_BYTES - 1);
        assert!(!t.maybe_run(1), "not enough released");
        t.released(1);
        assert_eq!(t.maybe_run(1), SUPPORTED);
        t.released(TRIM_AFTER_BYTES);
        assert!(!t.maybe_run(1), "once per epoch");
        assert_eq!(t.maybe_run(2), SUPPORTED);
        t.released(TRIM_AFTER_BYTES);
        assert_eq!(t.run_now(), SUPPORTED);
        let off = AllocatorTrim::new(false);
        off.released(usize::MAX);
        assert!(!off.maybe_run(1) && !off.run_now());
    }
}
