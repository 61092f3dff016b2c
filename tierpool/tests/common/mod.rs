//! Helpers shared by the integration tests (each test file uses a subset).

#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::HashSet;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Mutex;

use tierpool::{BufferPool, PooledBuf, Stats};

/// Runtimes and a scripted peer, for the I/O tests.
#[cfg(all(feature = "tokio", not(any(miri, loom))))]
pub mod io;

/// A pool whose account of bytes in use is exact: a budget that never binds.
pub fn exact_pool() -> BufferPool {
    BufferPool::builder()
        .max_in_use_bytes(1 << 30)
        .build()
        .unwrap()
}

/// The bytes `pool` has handed out and not had back (it has a budget).
pub fn in_use(pool: &BufferPool) -> usize {
    pool.stats()
        .budget
        .expect("a pool with a budget")
        .in_use_bytes
}

/// The two identities `Stats` documents, exact once no other thread uses the pool:
/// every get was a hit, a miss or oversize; every buffer handed back is still retained, was
/// released, or was handed out again.
#[track_caller]
pub fn assert_books_balance(s: &Stats) {
    assert_eq!(s.gets, s.hits + s.misses + s.oversize, "gets: {s}");
    assert_eq!(
        s.returned,
        s.retained_buffers as u64 + s.discarded + s.hits,
        "returns: {s}"
    );
}

/// A small deterministic generator (SplitMix64), so the tests need no dependency and repeat.
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Addresses of buffers currently handed out: taking one that is already out is a double
/// hand-out.
#[derive(Default)]
pub struct Outstanding(pub Mutex<HashSet<usize>>);

impl Outstanding {
    /// Records `b` as out; panics if it already was.
    pub fn take(&self, b: &PooledBuf) {
        let fresh = self.0.lock().unwrap().insert(b.as_ptr() as usize);
        assert!(fresh, "buffer {:p} handed out twice at once", b.as_ptr());
    }

    /// Records `b` as back; panics if it was not out.
    pub fn release(&self, b: &PooledBuf) {
        let was = self.0.lock().unwrap().remove(&(b.as_ptr() as usize));
        assert!(was, "released a buffer that was not out");
    }

    /// True when no buffer is out.
    pub fn is_empty(&self) -> bool {
        self.0.lock().unwrap().is_empty()
    }
}

/// A global allocator that counts: allocations per thread ([`allocs_here`]) and live bytes
/// across the process ([`LIVE_BYTES`]). A test binary that counts declares it:
/// `#[global_allocator] static GLOBAL: common::Counting = common::Counting;`.
pub struct Counting;

thread_local! {
    /// Allocations made by this thread (a `const` thread-local with no destructor: usable
    /// inside an allocator, also while the thread exits).
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

/// Live heap bytes of the whole process.
pub static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);

/// Allocations (and reallocations) this thread has made so far.
pub fn allocs_here() -> u64 {
    ALLOCS.with(Cell::get)
}

/// Live heap bytes of the whole process now.
pub fn live_bytes() -> isize {
    LIVE_BYTES.load(Ordering::Relaxed)
}

fn counted(bytes: isize) {
    let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
    LIVE_BYTES.fetch_add(bytes, Ordering::Relaxed);
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; the counting
// touches only a const thread-local `Cell` and an atomic, neither of which allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        counted(l.size() as isize);
        // SAFETY: forwarded contract.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        counted(l.size() as isize);
        // SAFETY: forwarded contract.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        counted(new as isize - l.size() as isize);
        // SAFETY: forwarded contract.
        unsafe { System.realloc(p, l, new) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE_BYTES.fetch_sub(l.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(p, l) }
    }
}

/// `n` pseudo-random bytes from `seed` (the same every run).
pub fn random_bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut r = Rng(seed);
    (0..n).map(|_| r.next() as u8).collect()
}

/// A path in the temporary directory, unique to this call: the process, `name` and a count
/// (tests of one binary run side by side, and two may ask for the same name).
pub fn temp_path(name: &str) -> std::path::PathBuf {
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("tierpool-{}-{call}-{name}", std::process::id()))
}

/// What the io_uring tests do when the kernel refuses io_uring (`why`): fail if
/// `TIERPOOL_REQUIRE_IO_URING` is set (as `.ci/run` sets it, so CI cannot pass with the tests
/// skipped), else say so; the caller then returns without testing.
pub fn io_uring_refused(why: impl std::fmt::Display) {
    if std::env::var_os("TIERPOOL_REQUIRE_IO_URING").is_some() {
        panic!("io_uring required (TIERPOOL_REQUIRE_IO_URING) but refused: {why}");
    }
    eprintln!("io_uring refused by this kernel ({why}): test skipped");
}

/// True if this process reclaims other threads' caches (the library's own answer: Linux
/// `membarrier`, unless `TIERPOOL_NO_MEMBARRIER` is set to test the fallback; under Miri
/// always). Tests that expect an idle thread's cache to be emptied at once check this:
/// without it, caches give their buffers up at their owner's next operation instead.
#[allow(dead_code)]
pub fn reclaim_available() -> bool {
    tierpool::__bench::reclaims_other_threads()
}

/// The most `pool` may retain with `caches` thread caches attached: `max_retained_bytes`
/// where caches are reclaimed (they reserve their room from the same allowance as the depot),
/// and each cache's own room beyond it where they cannot be (`TIERPOOL_NO_MEMBARRIER`).
#[allow(dead_code)]
pub fn retained_bound(pool: &tierpool::BufferPool, caches: usize) -> usize {
    let cap = pool.max_retained_bytes();
    if reclaim_available() {
        cap
    } else {
        let largest = *pool.tier_sizes().last().expect("tiers");
        cap + caches * (pool.thread_cache_bytes() + largest)
    }
}

/// The process's resident set in bytes (`/proc/self/statm`), or None off Linux.
#[allow(dead_code)]
pub fn rss_bytes() -> Option<usize> {
    if !cfg!(target_os = "linux") {
        return None;
    }
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: usize = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// Threads that took and filled buffers, returned them all, and went idle (the RSS tests,
/// tests/rss*.rs): made by [`fill_return_and_idle`], ended by [`IdleThreads::finish`].
#[allow(dead_code)]
pub struct IdleThreads {
    /// Released by `finish` when the threads stay parked; `None` when they have exited.
    done: Option<std::sync::Arc<std::sync::Barrier>>,
    handles: Vec<std::thread::JoinHandle<()>>,
}

/// `threads` threads each take two buffers of each size in `sizes` from `pool` and fill
/// them; once all hold theirs (so no buffer was returned, and taken by another thread,
/// before all were handed out), each returns them. Returns when all have. With `park` the
/// threads then stay alive and idle, never touching the pool again, until
/// [`IdleThreads::finish`]; without, they exit.
#[allow(dead_code)]
pub fn fill_return_and_idle(
    pool: &tierpool::BufferPool,
    threads: usize,
    sizes: &[usize],
    park: bool,
) -> IdleThreads {
    use std::sync::{Arc, Barrier};
    let got = Arc::new(Barrier::new(threads));
    let ready = Arc::new(Barrier::new(threads + 1));
    let done = park.then(|| Arc::new(Barrier::new(threads + 1)));
    let handles = (0..threads)
        .map(|i| {
            let (pool, got, ready, done) = (pool.clone(), got.clone(), ready.clone(), done.clone());
            let sizes = sizes.to_vec();
            std::thread::spawn(move || {
                let mut held = Vec::new();
                for n in sizes {
                    for _ in 0..2 {
                        let mut b = pool.get(n);
                        let cap = b.capacity();
                        b.resize(cap, i as u8 + 1);
                        held.push(b);
                    }
                }
                got.wait();
                drop(held);
                ready.wait();
                if let Some(done) = done {
                    done.wait();
                }
            })
        })
        .collect();
    ready.wait();
    IdleThreads { done, handles }
}

#[allow(dead_code)]
impl IdleThreads {
    /// Releases parked threads and joins all.
    pub fn finish(self) {
        if let Some(done) = self.done {
            done.wait();
        }
        self.handles.into_iter().for_each(|t| t.join().unwrap());
    }
}

/// The purge tests' burst (tests/purge_*.rs, each under the allocator it purges): a pool
/// that may retain 1 MiB takes `total` bytes in 32 KiB buffers, writes them all, gets them
/// all back (nearly all are released to the allocator, over the cap) and is trimmed. Returns
/// the RSS growth over `base` once the trim has returned, in bytes.
///
/// 32 KiB: below the size from which the pool gives a released buffer's pages back itself
/// (64 KiB, `sys/trim.rs`), so only the allocator, asked or not, decides what leaves.
#[allow(dead_code)]
pub fn burst_then_trim(how: tierpool::TrimAllocator, total: usize, base: usize) -> isize {
    const SIZE: usize = 32 << 10;
    let pool = tierpool::BufferPool::builder()
        .max_retained_bytes(1 << 20)
        .thread_cache_bytes(256 << 10)
        .trim_allocator(how)
        .build()
        .unwrap();
    let mut held = Vec::with_capacity(total / SIZE);
    for i in 0..total / SIZE {
        let mut b = pool.get(SIZE);
        b.resize(SIZE, i as u8);
        held.push(b);
    }
    drop(held);
    pool.trim();
    let s = pool.stats();
    assert!(s.retained_bytes <= 1 << 20, "{s}");
    let asked = !matches!(how, tierpool::TrimAllocator::Off);
    assert_eq!(s.allocator_trims, u64::from(asked), "{s}");
    rss_bytes().unwrap() as isize - base as isize
}

/// The purge tests' check (tests/purge_*.rs, each under the allocator `how` asks): the burst
/// left resident when the pool does not ask (the control: without it the check could pass
/// for another reason), then the same burst (reusing those pages) with `how`, which must give
/// them back.
#[allow(dead_code)]
pub fn assert_the_allocator_gives_the_burst_back(how: tierpool::TrimAllocator, allocator: &str) {
    const MIB: isize = 1 << 20;
    let base = rss_bytes().unwrap();
    let kept = burst_then_trim(tierpool::TrimAllocator::Off, 128 << 20, base);
    // Usually all 128 MiB stay; mimalloc also purges freed pages by itself after its purge
    // delay, and a CI run once saw 51 MiB kept: enough to tell the two cases apart.
    assert!(kept > 32 * MIB, "{allocator} kept only {} MiB", kept / MIB);
    let left = burst_then_trim(how, 128 << 20, base);
    eprintln!(
        "{allocator}, above the start: {} MiB not asked, {} MiB asked",
        kept / MIB,
        left / MIB
    );
    assert!(
        left < 16 * MIB,
        "{allocator}: {} MiB above the start after asking (kept {} MiB without)",
        left / MIB,
        kept / MIB
    );
}
