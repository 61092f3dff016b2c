//! The benchmark's global allocator: one of glibc malloc, mimalloc or jemalloc, chosen per
//! process by the `TIERPOOL_BENCH_ALLOC` environment variable, wrapped in an allocation counter.
//!
//! The parent process runs with the system allocator and re-runs this same binary as a child
//! with `TIERPOOL_BENCH_ALLOC=mimalloc` or `=jemalloc` for the contenders that need a different
//! global allocator, so one command still produces one report.
//!
//! The choice is made at the first allocation of the process (before `main`) by reading the
//! environment through libc's `getenv`, which does not allocate, and never changes afterwards,
//! so every block is freed by the allocator that made it. Counting is off during timed samples
//! (one relaxed load of a read-mostly flag) and on during a separate counting pass, so the
//! shared atomic counters never distort a timing.

use std::alloc::{GlobalAlloc, Layout, System};
use std::ffi::{c_char, CStr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering::Relaxed};

/// The environment variable that selects the allocator of a process.
pub const ALLOC_ENV: &str = "TIERPOOL_BENCH_ALLOC";

/// A global allocator a process can run under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Allocator {
    /// The platform allocator (glibc malloc on Linux).
    System,
    /// mimalloc (the `mimalloc` crate).
    Mimalloc,
    /// jemalloc (the `tikv-jemallocator` crate).
    Jemalloc,
}

impl Allocator {
    /// Every allocator, the parent's first.
    pub const ALL: [Allocator; 3] = [Allocator::System, Allocator::Mimalloc, Allocator::Jemalloc];

    /// The name used in the environment variable and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Allocator::System => "glibc",
            Allocator::Mimalloc => "mimalloc",
            Allocator::Jemalloc => "jemalloc",
        }
    }

    /// Parses a name written by [`Allocator::name`].
    pub fn from_name(name: &str) -> Option<Allocator> {
        Allocator::ALL.into_iter().find(|a| a.name() == name)
    }

    fn from_code(code: u8) -> Allocator {
        match code {
            2 => Allocator::Mimalloc,
            3 => Allocator::Jemalloc,
            _ => Allocator::System,
        }
    }
}

const UNSET: u8 = 0;
static MODE: AtomicU8 = AtomicU8::new(UNSET);
static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

extern "C" {
    fn getenv(name: *const c_char) -> *const c_char;
}

#[cold]
fn choose() -> u8 {
    // SAFETY: the name is a NUL-terminated literal; glibc's `getenv` only reads the
    // environment block, which is set up before any Rust code runs and which this program
    // never modifies.
    let value = unsafe { getenv(c"TIERPOOL_BENCH_ALLOC".as_ptr()) };
    let code = if value.is_null() {
        1
    } else {
        // SAFETY: a non-null `getenv` result is a NUL-terminated string.
        match unsafe { CStr::from_ptr(value) }.to_bytes() {
            b"mimalloc" => 2,
            b"jemalloc" => 3,
            _ => 1,
        }
    };
    // Two threads racing here compute the same answer from the same environment.
    MODE.store(code, Relaxed);
    code
}

#[inline(always)]
fn mode() -> u8 {
    match MODE.load(Relaxed) {
        UNSET => choose(),
        m => m,
    }
}

/// The allocator this process runs under.
pub fn current() -> Allocator {
    Allocator::from_code(mode())
}

/// The global allocator of the benchmark binary.
#[derive(Debug)]
pub struct BenchAlloc;

/// mimalloc, callable directly (bypassing the switch and the counter).
pub static MIMALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;
/// jemalloc, callable directly (bypassing the switch and the counter).
pub static JEMALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[inline(always)]
fn count(size: usize) {
    if COUNTING.load(Relaxed) {
        ALLOCS.fetch_add(1, Relaxed);
        BYTES.fetch_add(size as u64, Relaxed);
    }
}

// SAFETY: every method forwards to one of three sound allocators; which one is fixed for the
// life of the process (see `choose`), so a block is always freed or resized by the allocator
// that made it.
unsafe impl GlobalAlloc for BenchAlloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: forwarded with the caller's guarantees.
        unsafe {
            match mode() {
                2 => MIMALLOC.alloc(layout),
                3 => JEMALLOC.alloc(layout),
                _ => System.alloc(layout),
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: forwarded with the caller's guarantees.
        unsafe {
            match mode() {
                2 => MIMALLOC.alloc_zeroed(layout),
                3 => JEMALLOC.alloc_zeroed(layout),
                _ => System.alloc_zeroed(layout),
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from the same allocator (the mode never changes).
        unsafe {
            match mode() {
                2 => MIMALLOC.dealloc(ptr, layout),
                3 => JEMALLOC.dealloc(ptr, layout),
                _ => System.dealloc(ptr, layout),
            }
        }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        // SAFETY: `ptr` came from the same allocator (the mode never changes).
        unsafe {
            match mode() {
                2 => MIMALLOC.realloc(ptr, layout, new_size),
                3 => JEMALLOC.realloc(ptr, layout, new_size),
                _ => System.realloc(ptr, layout, new_size),
            }
        }
    }
}

/// Allocations (and reallocations) and the bytes they asked for, counted while
/// [`counting`] runs.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AllocCount {
    /// Calls to `alloc`, `alloc_zeroed` and `realloc`.
    pub allocs: u64,
    /// Bytes those calls asked for.
    pub bytes: u64,
}

/// Runs `f` with allocation counting on (process-wide, every thread) and returns what it
/// allocated. Not reentrant; the benchmark runs one counting pass at a time.
pub fn counting<R>(f: impl FnOnce() -> R) -> (R, AllocCount) {
    let a0 = ALLOCS.load(Relaxed);
    let b0 = BYTES.load(Relaxed);
    COUNTING.store(true, Relaxed);
    let r = f();
    COUNTING.store(false, Relaxed);
    let count = AllocCount {
        allocs: ALLOCS.load(Relaxed) - a0,
        bytes: BYTES.load(Relaxed) - b0,
    };
    (r, count)
}

/// Turns process-wide allocation counting on or off (for measurements that cannot be
/// wrapped in [`counting`], such as an async run); read the totals with [`counted`].
pub fn set_counting(on: bool) {
    COUNTING.store(on, Relaxed);
}

/// Allocations counted so far in this process (while counting was on).
pub fn counted() -> AllocCount {
    AllocCount {
        allocs: ALLOCS.load(Relaxed),
        bytes: BYTES.load(Relaxed),
    }
}
