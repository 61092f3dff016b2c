//! Getting released memory out of the process, not only back to the allocator.
//!
//! When tierpool releases a buffer it hands it to the global allocator, which decides whether
//! the pages leave the process. glibc's `malloc` gives memory back to the system only from the
//! top of its heap (and from chunks above `M_MMAP_THRESHOLD`, which have their own mappings).
//! A pool's buffers are long-lived: after a burst, one buffer still in use high in the heap
//! pins every freed chunk below it, and the process stays near its peak although the pool
//! retains almost nothing (the report's `burst` workload measures it).
//!
//! So after tierpool has released a megabyte or more (decay, `trim()`, buffers refused at the
//! cap), it calls glibc's `malloc_trim(0)`, which returns the free pages in the middle of the
//! heap too (`madvise(MADV_DONTNEED)`), at most once per decay interval (and at once on an
//! explicit [`BufferPool::trim`](crate::BufferPool::trim)). Only where glibc is the C library
//! (`target_env = "gnu"`); elsewhere, and with
//! [`Builder::trim_allocator(false)`](crate::Builder::trim_allocator), nothing is called.
//!
//! Under another global allocator (jemalloc, mimalloc) that call only trims glibc's own
//! heap, which then holds little. Those allocators return freed pages on their own schedules
//! (jemalloc after `dirty_decay_ms`, 10 s by default; mimalloc when the thread that owns a
//! page next allocates), so [`TrimAllocator`] lets the pool ask *them* instead, at the same
//! moments and no more often: jemalloc purges every arena (`arena.<all>.purge`, feature
//! `jemalloc`), mimalloc collects the releasing thread's heap (`mi_collect(true)`, feature
//! `mimalloc`), or a function of the user's runs.

use crate::base::sync::{AtomicU64, AtomicUsize, Ordering};

/// Released bytes that make a `malloc_trim` worth its cost (a walk over glibc's free chunks,
/// under each arena's lock; the pages given back fault in again when reused).
pub(crate) const TRIM_AFTER_BYTES: usize = 1 << 20;

/// How a pool asks the global allocator to give the memory it released back to the system
/// ([`Builder::trim_allocator`](crate::Builder::trim_allocator)): after it has released a
/// megabyte or more (decay, [`trim`](crate::BufferPool::trim), buffers refused at the cap),
/// at most once per decay interval, and at once on an explicit `trim()`.
///
/// The allocator is the one the program installed with `#[global_allocator]`; tierpool
/// cannot tell which it is, so the choice is the user's. The default, [`Glibc`](Self::Glibc),
/// is right for the system allocator on Linux and harmless under another one.
///
/// ```
/// use tierpool::{BufferPool, TrimAllocator};
///
/// // With `#[global_allocator] static A: tikv_jemallocator::Jemalloc = ...;` and tierpool's
/// // `jemalloc` feature, `TrimAllocator::Jemalloc`; here, the program's own function:
/// fn purge() { /* e.g. an allocator's statistics, or its purge */ }
/// let pool = BufferPool::builder()
///     .trim_allocator(TrimAllocator::Custom(purge))
///     .build()?;
/// # let _ = pool;
/// # Ok::<(), tierpool::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
#[non_exhaustive]
pub enum TrimAllocator {
    /// Never ask (`Builder::trim_allocator(false)`).
    Off,
    /// glibc's `malloc_trim(0)`: returns the free pages in the middle of glibc's heap, which
    /// glibc alone keeps (it gives back only from the top). The default; does nothing where
    /// glibc is not the C library (other targets than Linux `gnu`).
    #[default]
    Glibc,
    /// jemalloc, as linked by `tikv-jemallocator` (feature `jemalloc`): flushes the calling
    /// thread's cache of small blocks and purges every arena's unused dirty pages
    /// (`thread.tcache.flush`, `arena.<MALLCTL_ARENAS_ALL>.purge`), whichever thread freed
    /// them. Without it jemalloc keeps them for `dirty_decay_ms` (10 s by default).
    #[cfg(feature = "jemalloc")]
    #[cfg_attr(docsrs, doc(cfg(feature = "jemalloc")))]
    Jemalloc,
    /// mimalloc, as linked by the `mimalloc` crate (feature `mimalloc`): `mi_collect(true)`
    /// on the thread that released the buffers. mimalloc can purge only the calling thread's
    /// heap: blocks that thread freed into pages of other threads' heaps wait for those
    /// threads (mimalloc's design; see the README's feature table). Where one thread takes
    /// and releases (or the background trimmer is off and each thread's own returns tick the
    /// pool) it returns what the pool released.
    #[cfg(feature = "mimalloc")]
    #[cfg_attr(docsrs, doc(cfg(feature = "mimalloc")))]
    Mimalloc,
    /// A function of the program's, for another allocator (or to count the calls). It runs
    /// on the thread that released the memory, outside every lock of the pool's; it must
    /// not panic.
    Custom(fn()),
}

impl From<bool> for TrimAllocator {
    /// `true` is the default ([`Glibc`](Self::Glibc)), `false` is [`Off`](Self::Off).
    fn from(on: bool) -> Self {
        if on {
            TrimAllocator::Glibc
        } else {
            TrimAllocator::Off
        }
    }
}

impl TrimAllocator {
    /// True if asking does something here.
    fn effective(self) -> bool {
        match self {
            TrimAllocator::Off => false,
            TrimAllocator::Glibc => GLIBC,
            #[cfg(feature = "jemalloc")]
            TrimAllocator::Jemalloc => FFI,
            #[cfg(feature = "mimalloc")]
            TrimAllocator::Mimalloc => FFI,
            TrimAllocator::Custom(_) => true,
        }
    }

    fn run(self) {
        match self {
            TrimAllocator::Off => {}
            TrimAllocator::Glibc => trim_glibc(),
            #[cfg(feature = "jemalloc")]
            TrimAllocator::Jemalloc => purge_jemalloc(),
            #[cfg(feature = "mimalloc")]
            TrimAllocator::Mimalloc => collect_mimalloc(),
            TrimAllocator::Custom(f) => f(),
        }
    }
}

/// Why a pool released buffers to the allocator (counted per reason in [`Stats`](crate::Stats)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Why {
    /// Idle for a whole decay interval: the depot's or a cache's working-set decay, or an idle
    /// thread's cache reclaimed by the tick.
    Decay = 0,
    /// An explicit [`trim`](crate::BufferPool::trim) (or a cache acting on one).
    Trim = 1,
    /// No room under `max_retained_bytes`: a return the depot refused, the depot's oldest
    /// buffers evicted to make room for a cache at work, or a buffer of another size than
    /// its tier's in a budgeted pool. (What a closing pool frees, and returns that fit no
    /// tier, are not counted by reason.)
    Cap = 2,
}

/// Tracks what a pool released since the allocator was last asked to give memory back, and
/// in total by reason.
#[derive(Debug)]
pub(crate) struct AllocatorTrim {
    how: TrimAllocator,
    /// Bytes released since the pool was made, by [`Why`].
    by_reason: [AtomicU64; 3],
    enabled: bool,
    pending: AtomicUsize,
    /// The decay epoch of the last trim, plus one (0: never).
    last: AtomicU64,
    /// Trims done.
    done: AtomicU64,
}

impl AllocatorTrim {
    pub(crate) fn new(how: TrimAllocator) -> Self {
        AllocatorTrim {
            how,
            by_reason: Default::default(),
            enabled: how.effective(),
            pending: AtomicUsize::new(0),
            last: AtomicU64::new(0),
            done: AtomicU64::new(0),
        }
    }

    /// Notes `bytes` released to the allocator, for the reason `why` (slow paths only: a
    /// read-modify-write of the pool's shared counters).
    #[inline]
    pub(crate) fn released(&self, bytes: usize, why: Why) {
        if bytes > 0 {
            self.by_reason[why as usize].fetch_add(bytes as u64, Ordering::Relaxed);
            if self.enabled {
                self.pending.fetch_add(bytes, Ordering::Relaxed);
            }
        }
    }

    /// Bytes released since the pool was made for the reason `why`.
    pub(crate) fn released_for(&self, why: Why) -> u64 {
        self.by_reason[why as usize].load(Ordering::Relaxed)
    }

    /// Asks the allocator if a megabyte or more was released, and not yet in this epoch.
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

    /// Asks the allocator now if a megabyte or more was released (an explicit `trim()`).
    pub(crate) fn run_now(&self) -> bool {
        if !self.enabled || self.pending.swap(0, Ordering::Relaxed) < TRIM_AFTER_BYTES {
            return false;
        }
        self.trim_heap();
        true
    }

    /// How many times this pool asked the allocator.
    pub(crate) fn count(&self) -> u64 {
        self.done.load(Ordering::Relaxed)
    }

    fn trim_heap(&self) {
        self.done.fetch_add(1, Ordering::Relaxed);
        self.how.run();
    }
}

/// True where a foreign function can be called (not under Miri or loom).
const FFI: bool = cfg!(not(any(miri, loom)));

/// True where [`trim_glibc`] does something.
const GLIBC: bool = FFI && cfg!(all(target_os = "linux", target_env = "gnu"));

/// glibc's `malloc_trim(0)`: gives every free page of every arena back to the system.
fn trim_glibc() {
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

/// jemalloc's name for every arena in an `arena.<i>` control (`MALLCTL_ARENAS_ALL`).
#[cfg(feature = "jemalloc")]
const JEMALLOC_PURGE_ALL: &std::ffi::CStr = c"arena.4096.purge";

/// Flushes this thread's jemalloc cache, then purges every arena's unused dirty pages.
#[cfg(feature = "jemalloc")]
fn purge_jemalloc() {
    #[cfg(not(any(miri, loom)))]
    for name in [c"thread.tcache.flush", JEMALLOC_PURGE_ALL] {
        // SAFETY: both controls are "void" ones: they read and write nothing through the
        // (null) pointers, as jemalloc's manual specifies for `thread.tcache.flush` and
        // `arena.<i>.purge`; the name is NUL-terminated. Called from any thread at any time
        // (jemalloc takes the arenas' locks). A failure (an error code: tcache disabled, an
        // old jemalloc) only means nothing was purged.
        let _ = unsafe {
            tikv_jemalloc_sys::mallctl(
                name.as_ptr(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
            )
        };
    }
}

/// mimalloc's `mi_collect(true)`: frees the calling thread's heap's free pages back to the
/// system and processes the frees other threads left for it.
#[cfg(feature = "mimalloc")]
fn collect_mimalloc() {
    #[cfg(not(any(miri, loom)))]
    // SAFETY: `mi_collect` takes no pointer; any thread may call it for its own heap at any
    // time. It frees only memory that holds no live block.
    unsafe {
        libmimalloc_sys::mi_collect(true);
    }
}

/// Buffers at least this large have their whole pages given back to the kernel when the
/// pool lets them go ([`free_released`]).
#[cfg_attr(not(all(target_os = "linux", not(any(loom, miri)))), allow(dead_code))]
pub(crate) const RETURN_PAGES_FROM: usize = 64 << 10;

/// Frees a buffer the pool lets go of, first telling the kernel that its whole pages are not
/// needed (`madvise(MADV_DONTNEED)`, on Linux, for buffers of [`RETURN_PAGES_FROM`] or
/// more): a buffer that went idle (decay, `trim()`, a closed pool), and a return refused for
/// want of room under the cap (`PoolState::file_in_depot`; not a budgeted pool's refusal of
/// a buffer of another size than its tier's, which happens on every return of a grown
/// buffer). Not the depot's oldest buffers evicted to make room for a cache at work: the
/// allocator makes that cache's next fresh buffer from their memory at once, and giving
/// their pages back first made the `mixed_random` example fault 70% more (refused returns
/// alone: no more faults, 98-120 thousand per run either way).
///
/// Freed alone, such a buffer's pages leave the process only if the allocator gives them
/// back, and glibc's does not always: a chunk freed into the arena of another thread (the
/// thread that allocated it, now idle, whose cache was reclaimed), or into the arena of the
/// thread that returns it and then goes idle, merges into that arena's top, which
/// `malloc_trim` does not release for the arenas of other threads, and which glibc trims on
/// a free only beyond its trim threshold (raised with its mmap threshold, to twice the
/// largest chunk it freed); the report's `idle-threads` workload shows both. After this call
/// the bytes are gone
/// from the process whatever the allocator does; it writes its bookkeeping into the first
/// bytes when the buffer is freed, which costs a page again.
///
/// Sound for any allocator that keeps no bookkeeping inside a live allocation (glibc,
/// jemalloc, mimalloc): only whole pages inside `[ptr, ptr + capacity)`, which the buffer
/// owns until it is freed below, are touched, and their contents are never read again.
/// `align` is the pool's alignment, which the free needs (`alloc.rs`).
pub(crate) fn free_released(v: Vec<u8>, align: usize) {
    #[cfg(all(target_os = "linux", not(any(loom, miri))))]
    if v.capacity() >= RETURN_PAGES_FROM {
        // SAFETY: `sysconf` has no preconditions.
        let page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
            p if p > 0 => p as usize,
            _ => 4096,
        };
        let from = v.as_ptr() as usize;
        let start = from.next_multiple_of(page);
        let end = (from + v.capacity()) / page * page;
        if end > start {
            // SAFETY: `[start, end)` lies inside `v`'s allocation (`from <= start`, `end <=
            // from + capacity`), which `v` owns and nothing else refers to; its contents
            // are not read again (`v` is freed next). An error (an allocator whose memory
            // is not anonymous private pages, say) leaves the pages as they were.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
            }
        }
    }
    crate::sys::alloc::free(v, align);
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn trims_once_per_epoch_and_only_after_a_megabyte() {
        const SUPPORTED: bool = GLIBC;
        let t = AllocatorTrim::new(TrimAllocator::Glibc);
        t.released(TRIM_AFTER_BYTES - 1, Why::Decay);
        assert!(!t.maybe_run(1), "not enough released");
        t.released(1, Why::Cap);
        assert_eq!(t.maybe_run(1), SUPPORTED);
        t.released(TRIM_AFTER_BYTES, Why::Trim);
        assert!(!t.maybe_run(1), "once per epoch");
        assert_eq!(t.maybe_run(2), SUPPORTED);
        t.released(TRIM_AFTER_BYTES, Why::Trim);
        assert_eq!(t.run_now(), SUPPORTED);
        let off = AllocatorTrim::new(TrimAllocator::Off);
        off.released(usize::MAX / 2, Why::Cap);
        assert!(!off.maybe_run(1) && !off.run_now());
        assert_eq!(
            off.released_for(Why::Cap),
            (usize::MAX / 2) as u64,
            "counted when off too"
        );
        assert_eq!(
            (t.released_for(Why::Decay), t.released_for(Why::Cap)),
            ((TRIM_AFTER_BYTES - 1) as u64, 1)
        );
    }

    #[test]
    fn a_custom_function_runs_at_the_same_moments() {
        use std::sync::atomic::AtomicUsize;
        static CALLS: AtomicUsize = AtomicUsize::new(0);
        fn count() {
            CALLS.fetch_add(1, Ordering::Relaxed);
        }
        let t = AllocatorTrim::new(TrimAllocator::Custom(count));
        t.released(TRIM_AFTER_BYTES, Why::Trim);
        assert!(t.maybe_run(1));
        t.released(TRIM_AFTER_BYTES, Why::Trim);
        assert!(!t.maybe_run(1), "once per epoch");
        assert!(
            t.run_now(),
            "an explicit trim does not wait for the next epoch"
        );
        assert!(!t.run_now(), "nothing released since");
        assert_eq!((CALLS.load(Ordering::Relaxed), t.count()), (2, 2));
    }

    #[test]
    fn a_bool_is_the_default_or_off() {
        assert!(matches!(TrimAllocator::from(true), TrimAllocator::Glibc));
        assert!(matches!(TrimAllocator::default(), TrimAllocator::Glibc));
        assert!(matches!(TrimAllocator::from(false), TrimAllocator::Off));
        assert!(!TrimAllocator::Off.effective());
    }
}
