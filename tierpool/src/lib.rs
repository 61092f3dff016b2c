//! A fast, bounded, size-tiered pool of byte buffers for network and storage code.
//!
//! Services that read sockets or disk blocks take and release byte buffers millions of times a
//! second. `tierpool` keeps released `Vec<u8>` buffers sorted into size tiers and hands them out
//! again, so that the hot path neither calls the allocator nor takes a lock, while the memory it
//! keeps stays capped and goes back to the system when it is no longer needed.
//!
//! # Quick start
//!
//! ```
//! use std::io::Write;
//! use tierpool::BufferPool;
//!
//! let pool = BufferPool::builder()
//!     .tiers([1024, 2048, 4096, 8192, 15000]) // or the default: 256 B ..= 16 MiB, 4 per doubling
//!     .max_retained_bytes(64 << 20)
//!     .build()?;
//!
//! let mut buf = pool.get(5000);               // len 0, capacity >= 5000 (here 8192)
//! buf.write_all(b"payload")?;                 // PooledBuf derefs to Vec<u8>
//! std::thread::spawn(move || drop(buf))       // dropped anywhere: back to the pool
//!     .join()
//!     .unwrap();
//!
//! let again = pool.get(6000);                 // served from the retained buffer
//! assert_eq!(again.capacity(), 8192);
//! assert!(again.is_empty());                  // never stale bytes through safe code
//! let stats = pool.stats();
//! assert_eq!((stats.hits, stats.misses), (1, 1));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # What it guarantees
//!
//! - **Tiers with O(1) lookup.** `get(n)` uses the smallest tier `>= n`; the tier is found with
//!   one `leading_zeros`, two shifts and one table load, however many tiers there are
//!   (see the `class` module). Besides explicit sizes, the [`Builder`] makes power-of-two tiers
//!   and geometric tiers with 2, 4, 8 or 16 classes per doubling.
//! - **No false hits.** A buffer handed out is never smaller than asked. A returned buffer
//!   (ours or a foreign `Vec`) is filed under the largest tier not above its capacity; buffers
//!   outside the tiers are freed. Requests above the largest tier are allocated exactly and not
//!   kept.
//! - **No hidden allocations, no locks** on the steady-state path: each thread has its own
//!   cache per pool. A get and a return from it cost 62 instructions together (loop and two
//!   byte writes included), fewer than any allocator or pool crate measured (see
//!   *Performance*).
//! - **Shared across threads.** A buffer taken on one thread and dropped on another is kept:
//!   thread caches exchange batches with a shared depot.
//! - **Bounded.** The depot holds at most `max_retained_bytes`; each thread's cache at most
//!   `thread_cache_bytes` (default 2 MiB) plus one buffer of a tier larger than that (so that
//!   a thread cycling 16 MiB buffers does not take a lock each time): total retained `<=
//!   max_retained_bytes + threads * (thread_cache_bytes + largest tier)`. At the cap, returned
//!   buffers are freed.
//! - **Memory comes back.** Buffers unused for a whole decay interval are released at the next
//!   boundary, so after a burst retained memory falls back within about two intervals;
//!   [`BufferPool::trim`] releases on demand; [`Builder::background_trim`] also covers a pool
//!   that has gone completely idle; dropping the last handle frees the depot. Under glibc,
//!   whose heap returns memory only from its top, the pool follows a release of a megabyte or
//!   more with `malloc_trim(0)` ([`Builder::trim_allocator`]), so the process's RSS falls too.
//! - **A budget on bytes in use** (optional): [`Builder::max_in_use_bytes`] bounds what is
//!   handed out, with waiting, timed, async and refusing ways to ask (see *Budgets and
//!   backpressure*).
//! - **No panics on bad input**: [`Builder::build`] names invalid values in a
//!   [`ConfigError`]; [`BufferPool::try_get`] reports impossible sizes and allocator failure as
//!   an [`AllocError`]; panics and thread exits while buffers are out never wedge a pool.
//!
//! # Sharing a filled buffer: [`PooledBytes`]
//!
//! [`PooledBuf::into_shared`] turns a filled buffer into a [`PooledBytes`]: a read-only view
//! that is cheap to clone and to slice (`slice`, `split_to`, `split_off`), `Send + Sync`, and
//! gives the buffer back to its pool exactly once, when the last view is dropped, on whichever
//! thread that happens (gRPC-Go's reference-counted `mem.Buffer`, in Rust). Its control block is
//! recycled with the buffer, so in steady state it allocates nothing.
//!
//! # Chains of buffers: [`PooledChain`]
//!
//! A message that arrives in several pooled buffers, or is assembled from a header and a body,
//! need not be copied into one: a [`PooledChain`] is an ordered list of [`PooledBytes`] views
//! that reads as one byte sequence (gRPC-Go's `BufferSlice`). It splits at any byte offset
//! without copying payload, writes with one vectored call (`write_to`, `io_slices`, and
//! `bytes::Buf::chunks_vectored`), reads through `std::io::Read`/`BufRead`, and
//! [`materialize`](PooledChain::materialize)s into one pooled buffer when a consumer needs
//! contiguous bytes. And when the last view of a buffer is all that is left,
//! [`PooledBytes::try_into_mut`] makes it a writable [`PooledBuf`] again.
//!
//! # Budgets and backpressure
//!
//! `max_retained_bytes` caps what the pool *keeps*; [`Builder::max_in_use_bytes`] caps what it
//! *hands out*: the total capacity of buffers handed out and not yet returned never exceeds
//! the budget. A server whose 10,000 connections all start a 4 MiB frame at once then waits
//! for memory instead of asking the allocator for 40 GiB. Off by default (and then free: the
//! fast path is the same code, measured at the same instruction count).
//!
//! | way of asking | when the budget has no room |
//! |---|---|
//! | [`get`](BufferPool::get), [`get_zeroed`](BufferPool::get_zeroed) | blocks the thread until it fits (like a bounded channel's `send`) |
//! | [`get_timeout`](BufferPool::get_timeout) | blocks up to a timeout, then [`AllocError::TimedOut`] |
//! | [`acquire`](BufferPool::acquire)`.await` | waits without blocking the thread (any runtime; cancel-safe) |
//! | [`try_get`](BufferPool::try_get) | never waits: [`AllocError::OverBudget`], with the figures |
//!
//! A request whose charge exceeds the whole budget can never be served: the fallible forms
//! return [`AllocError::LargerThanBudget`] at once and `get` panics. Waiters are served in
//! order, so a request for the whole budget is not starved by a stream of small ones.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use tierpool::{AllocError, BufferPool};
//!
//! let pool = BufferPool::builder().max_in_use_bytes(8 << 20).build()?;
//! let frame = pool.acquire(4 << 20).await?;          // waits while 8 MiB are out
//! let refused = pool.try_get(6 << 20).unwrap_err();  // 4 + 6 > 8: refused, never waits
//! assert!(matches!(refused, AllocError::OverBudget { in_use, .. } if in_use == 4 << 20));
//! drop(frame);                                        // every way back returns the bytes
//! let b = pool.stats().budget.expect("budgeted");
//! assert_eq!((b.in_use_bytes, b.refusals), (0, 1));
//! # Ok(()) }
//! ```
//!
//! Every way a buffer comes back returns its charge: drop on any thread,
//! [`PooledBuf::into_vec`] (the bytes leave the pool), the last [`PooledBytes`] view, a
//! `freeze()`d `Bytes`, a thread exiting, the pool dropped. A buffer is charged its tier's
//! size (above the largest tier, its size rounded up to 4 KiB), and a budgeted pool keeps
//! only buffers of exactly a tier's size, so none is handed out with more capacity than it
//! was charged. [`BudgetStats`] (in [`Stats::budget`]) reports bytes in use, the peak, how
//! many waited and for how long, and refusals. The [`frame`] reader waits for room for a
//! whole payload before reading it, so a flood of large frames slows the peers down through
//! TCP instead of growing the heap.
//!
//! **How it stays off the fast path.** Each thread's cache holds a *credit* of the budget:
//! a get takes its charge from the credit with one compare-and-swap on a line only that
//! thread writes, a return adds it back with one `fetch_add`, and only every `credit_max`
//! bytes (`min(max_in_use_bytes / 16, thread_cache_bytes)`) does a thread touch the shared
//! account, under its lock. So up to `threads * credit_max` of the budget can sit idle in
//! threads' credit; it never lets in-use exceed the limit, and it never makes a request wait
//! on an idle thread: a request that would wait first sweeps every thread's credit into the
//! account (an atomic swap each), and while anyone waits, returns give their credit straight
//! back. The `budget` module's docs (in the source) argue why no credit is stranded, and loom
//! models check it with the rest of the protocol (no lost wake-up, no over-grant,
//! cancellation).
//!
//! # Optional integrations
//!
//! - **`bytes`**: [`PooledBuf`] implements `bytes::BufMut` (fill it with anything that writes
//!   into a `BufMut`); `PooledBuf::freeze` gives a `bytes::Bytes` without copying (the buffer
//!   returns when the last clone or slice is dropped; `Bytes::from_owner` costs one small
//!   allocation per call, which `into_shared` avoids); [`PooledBytes`] implements `bytes::Buf`
//!   and converts into `Bytes` without copying.
//! - **`tokio`** (implies `bytes`): the `frame` module reads length-prefixed frames (gRPC's
//!   5-byte header by default, pluggable) from any `AsyncRead` straight into pooled buffers,
//!   checks the length before allocating, grows buffers only as data arrives (a peer claiming
//!   a huge frame cannot make the reader allocate it), reports truncated frames with the number
//!   of missing bytes, and writes frames with one vectored write. Works on the multi-threaded
//!   runtime, where a task's buffer is often taken on one worker and dropped on another. Also
//!   `FrameWriter::write_chain`, `FrameReader::read_frame_chain` and
//!   [`PooledChain::read_all`].
//! - **`compio`**: compio-buf's `IoBuf`/`IoBufMut`/`SetLen` for [`PooledBuf`] and `IoBuf` for
//!   [`PooledBytes`], so pooled buffers go straight into compio's completion-based operations
//!   (io_uring, IOCP); a cancelled operation gives its buffer back once, after the completion.
//!   Note that compio fills a buffer to its capacity (a tier's size): read into
//!   `buf.slice(..n)` for exactly `n` bytes. (compio needs Rust 1.85.)
//! - **`tokio-uring`** (Linux): tokio-uring's unsafe `IoBuf`/`IoBufMut` for [`PooledBuf`] and
//!   `IoBuf` for [`PooledBytes`], each with its `// SAFETY:` argument (a stable heap pointer,
//!   honest lengths); a cancelled operation gives its buffer back once, after the completion.
//! - **`monoio`** (Linux): monoio's unsafe `IoBuf`/`IoBufMut` for [`PooledBuf`] and `IoBuf`
//!   for [`PooledBytes`], with their safety arguments.
//! - **`http-body`** (implies `bytes`): `http_body::Body` for [`PooledBytes`] (one data frame)
//!   and [`PooledChain`] (one frame per view), so hyper, axum and tonic send pooled data as a
//!   body without copying it; the buffers return to their pools as the transport drops the
//!   frames.
//!
//! ```
//! # #[cfg(feature = "bytes")] {
//! use bytes::BufMut;
//!
//! let pool = tierpool::BufferPool::new();
//! let mut buf = pool.get(64);
//! buf.put_u32(7);                       // BufMut
//! buf.put_slice(b"payload");
//! let frozen: bytes::Bytes = buf.freeze(); // zero-copy; back to the pool with the last clone
//! assert_eq!(&frozen[4..], b"payload");
//! # }
//! ```
//!
//! # How it works
//!
//! ```text
//!   thread A                              thread B                       any thread
//!  ┌─────────────────────────────┐       ┌─────────────────────────────┐
//!  │ cur ──► Cache (pool P)      │       │ cur ──► Cache (pool P)      │  PooledBuf {
//!  │   doorbell = P's key        │       │   doorbell = RUNG (trimmed) │    Vec<u8>,
//!  │   tier 0: [p, p, p]         │       │   tier 0: [p]               │    key: u32,
//!  │   tier 1: [p]               │       │   ...                       │    tier: u32 }
//!  │   <= 2 MiB + 1 large buffer │       │                             │   drop: push p on
//!  └────────┬────────────────────┘       └───────────┬─────────────────┘   this thread's
//!   empty: take a batch │  full: give the older half │                   cache if its
//!           ▼                                        ▼                   doorbell holds key
//!  ┌───────────────────────────────────────────────────────────────────┐
//!  │ Depot (pool P): per tier, a lock on its own cache line over a     │
//!  │ stack of exact-size buffers and one of larger ("odd") ones; one   │
//!  │ atomic byte count enforces the cap; low-water marks drive decay   │
//!  └───────────────────────────────────────────────────────────────────┘
//! ```
//!
//! - **Size classes** (`class`): the size is mapped to one of 16 buckets per power of two with
//!   one `bsr` and two shifts; a table gives the bucket's first candidate tier, and for tiers
//!   with at most five significant bits (powers of two and their 2/4/8/16-step subdivisions)
//!   the candidate is always the answer.
//! - **Thread cache** (`cache`, `tls`): per thread and pool, a stack of raw pointers per tier,
//!   every one a buffer of exactly that tier's size. The thread-local `cur` slot points at the
//!   cache used last; its first field, the *doorbell*, holds the pool's key, so one load and
//!   one comparison select the cache. A get pops the pointer at the stack's `head` while it is
//!   above the tier's low-water mark; a return checks that the capacity is the tier's size
//!   (the buffer carries its tier as a hint) and pushes. Other threads ring the doorbell
//!   (trim, close) by overwriting it, which sends the owner's next operation to the slow path
//!   at no cost to the fast one. Counters are written only by the owner, with plain stores,
//!   and hits are derived from the stack's length rather than counted.
//! - **Policy** (`policy`, safe code): what a get or a return does when the fast path cannot
//!   serve it. Tiers reserve room in the thread's budget when first used (so the fast path
//!   checks a limit, not a byte count), batches of half a stack move to and from the depot
//!   under one lock acquisition, odd-capacity buffers go to the depot, housekeeping runs
//!   every 256 returns to a tier.
//! - **Depot** (`depot`): the shared, capped store between thread caches.
//! - **Buffer handle** (`buf`, `registry`): a [`PooledBuf`] carries its pool's 32-bit *key*,
//!   not a reference-counted pointer, so handing it out touches no shared counter, yet it is
//!   `'static + Send` and may outlive the pool: a closed pool's key resolves to nothing, and
//!   every cache of it has been rung, so the buffer is simply freed.
//! - **Decay** (`decay`): time is cut into intervals; each cache and the depot release at every
//!   boundary the buffers that stayed below their low-water mark for the whole interval.
//! - **Thread exit**: a thread-local destructor gives each cache's buffers back to its depot
//!   (within the cap) and folds its counters into the pool's.
//!
//! The modules, bottom-up (each imports only those before it): `sync` (the loom switch),
//! `budget` (the budget on bytes in use: account, waiters, credit), `os` (giving released
//! memory back to the system), `class`, `error`,
//! `stats`, `fresh` (making and cleaning buffers), `depot`, `cache` (a
//! thread cache's layout and fast path), `decay`, `config`, `state` (a pool's shared state),
//! `registry`, `policy`, `tls` (the thread-local table: all thread-local `unsafe`), then the
//! public handles `buf`, `pooled_bytes`, `chain`, `pool`, `global`, and the integrations
//! `bytes_impls`, `compio_impls`, `frame`.
//!
//! # When not to use it
//!
//! - If buffers are allocated once per connection and kept, a pool adds nothing.
//! - Under jemalloc or mimalloc, small buffers (256 B and below) are nearly as cheap to
//!   allocate as to pool; the gain is in the sizes those allocators do not cache per thread
//!   (jemalloc above 32 KiB, mimalloc's large pages) and in cross-thread hand-off.
//! - A pool keeps memory that the allocator might have given to other parts of the program:
//!   size `max_retained_bytes` for the working set, not for peaks.
//! - Do not use tierpool from inside a global allocator: re-entrant calls are sound but bypass
//!   the caches and may block on the pool registry.
//!
//! # Safety and correctness
//!
//! Every `unsafe` block has a `// SAFETY:` argument beside it (enforced by
//! `clippy::undocumented_unsafe_blocks`). They are in these places:
//!
//! - `tls.rs`: reaching this thread's table and current cache through raw pointers held in a
//!   `const` thread-local, and making the `Owner` that proves a thread owns a
//!   cache. The module documentation argues why at most one reference into the table and one
//!   owner of a cache are ever live, also under re-entrancy and thread exit.
//! - `cache.rs`: the stacks of raw pointers (reading and writing slots between the stack's
//!   bounds, rebuilding a `Vec` from a pointer whose capacity the stack guarantees) and the
//!   tier lookup by byte offset.
//! - `class.rs`: indexing the bucket table and the size list without bounds checks, with the
//!   invariant that makes every index valid proved at construction and checked by
//!   `debug_assert!`s.
//! - `pooled_bytes.rs`: [`PooledBytes`] reads the bytes through a raw pointer into a buffer
//!   that nothing mutates while a view exists, with `Arc`'s counting protocol deciding who
//!   hands the buffer back; its control blocks move between threads as raw boxes.
//! - `bytes_impls.rs`: `BufMut` for [`PooledBuf`] (writing into spare capacity).
//! - `os.rs`: the call to glibc's `malloc_trim` (no pointers; not run under Miri or loom).
//! - `pooled_bytes.rs` `try_into_mut` (the view's offset in its buffer) and `buf.rs` (the
//!   handle's `ManuallyDrop<Vec>`, taken exactly once).
//! - `compio_impls.rs`, `tokio_uring_impls.rs`, `monoio_impls.rs`: the runtimes' buffer traits (`set_len`, and
//!   tokio-uring's and monoio's unsafe traits: the pointer stays put while the kernel owns
//!   the buffer).
//!
//! How it is checked (the commands `.ci/run` runs):
//! - **Miri** (strict provenance) runs the unit tests and the integration tests that drive the
//!   thread caches, thread exit, panics, cross-thread hand-off, the budget and the model test:
//!   `MIRIFLAGS="-Zmiri-strict-provenance" cargo +nightly miri test -p tierpool --features bytes --lib --test model --test semantics --test alloc_free --test leak --test threads --test bad_input --test budget`
//!   (`.ci/run` splits these over two processes, one per core).
//! - **loom** explores every interleaving of the depot exchange, the cap under contention,
//!   decay and trim racing with get/put, close racing with returns, the doorbell (a ring is
//!   never lost: loom found a lost ring in a first version that rang with a plain store), and
//!   counter publication vs. `stats()` (a hit is never counted twice), and the budget's
//!   credit and waiter protocol (no lost wake-up, no over-grant, no credit stranded, a
//!   cancelled waiter's bytes passed on):
//!   `RUSTFLAGS="--cfg loom" cargo test -p tierpool --lib --release --target-dir target/loom loom`.
//! - **ThreadSanitizer** runs the threads, stress and soak tests with std rebuilt under TSan:
//!   `RUSTFLAGS="-Zsanitizer=thread" cargo +nightly test -Zbuild-std --target x86_64-unknown-linux-gnu -p tierpool --release --test threads --test stress --test soak`.
//! - **LeakSanitizer** runs the whole test suite; **cargo-fuzz** drives random operations on
//!   two pools against invariants, and the frame reader on arbitrary bytes.
//! - A **model-based** proptest checks long random operation sequences against a reference
//!   model, exactly (every hit, miss and retained byte); a **stress** test runs 8 threads of random
//!   get / hand-off / drop with a concurrent trimmer and checks by address that no buffer is ever
//!   out twice, that contents survive, and that caps and counters hold.
//!
//! # Performance
//!
//! `BENCHMARKS.md` in the repository has the measured figures, from the comparison report
//! (`cargo run --release -p tierpool-bench`). In short, on the project's 2-core VM: a get+put
//! from the thread cache costs 62 instructions (loop and two byte writes included, counted by
//! callgrind) and about 3.8 ns at every size from 256 B to 16 MiB, against 75 instructions and
//! 6.5 ns for `Vec` under jemalloc at 256 B, 8.8 ns at 4 KiB and 235 ns from 64 KiB, and 10-34
//! ns for every pool crate measured. With a budget on bytes in use, 229 instructions and
//! 21.7 ns. Many threads at once do not collapse it (3.7-5.1 ns per
//! operation of all threads, level with jemalloc). A buffer handed from one thread to another
//! costs about 45 ns at 4 and 64 KiB, level with the fastest pool crate (opool) and 3-10x less
//! than the allocators; at 1 MiB about 100-140 ns, where opool's lock-free queue (about 47 ns)
//! is ahead. The tier lookup takes 1.4 ns per get+return pair whatever the number of tiers.
//!
//! `.ci/run` fails if a get+put at 4 KiB costs more than 64 instructions
//! (`cargo run --release -p tierpool-bench -- --count tierpool 4096`).

#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]
#![warn(clippy::undocumented_unsafe_blocks)]
#![cfg_attr(docsrs, feature(doc_cfg))]

// Bottom-up: each module imports only those above it in this list. The `cache` folder is
// split by that rule too: its files up to `reclaim` come before `state`, `policy` and `tls`
// after it (see the crate docs, "How it works").
mod budget;
mod buf;
mod cache;
mod chain;
mod class;
mod clock;
mod config;
mod depot;
mod error;
mod fence;
mod fresh;
mod global;
mod key;
mod os;
mod pool;
mod pooled_bytes;
mod registry;
mod state;
mod stats;
mod sync;

#[cfg(feature = "bytes")]
mod bytes_impls;
#[cfg(feature = "compio")]
mod compio_impls;
#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub mod frame;
#[cfg(feature = "http-body")]
mod http_body_impls;
#[cfg(all(feature = "monoio", target_os = "linux"))]
mod monoio_impls;
#[cfg(all(feature = "tokio-uring", target_os = "linux"))]
mod tokio_uring_impls;

#[cfg(all(test, loom))]
mod loom_tests;

pub use budget::MAX_BUDGET;
pub use buf::PooledBuf;
pub use chain::PooledChain;
pub use class::MAX_TIERS;
pub use config::{
    Builder, DEFAULT_DECAY_INTERVAL, DEFAULT_MAX_RETAINED_BYTES, DEFAULT_MAX_TIER,
    DEFAULT_MIN_TIER, DEFAULT_STEPS_PER_DOUBLING, DEFAULT_THREAD_CACHE_BYTES,
};
pub use error::{AllocError, ConfigError};
pub use global::{default_pool, set_default_pool};
pub use pool::Acquire;
pub use pool::BufferPool;
pub use pooled_bytes::PooledBytes;
pub use stats::{BudgetStats, Stats, TierStats};

#[doc(hidden)]
pub mod __bench {
    //! Internal hooks for the crate's own benchmarks; not part of the public API.

    /// Tier lookup pair (get and return) through the same code the pool uses.
    #[derive(Debug)]
    pub struct Lookup(crate::class::Classes);

    impl Lookup {
        /// Builds the lookup for these sorted, distinct sizes.
        pub fn new(sizes: &[usize]) -> Self {
            Lookup(crate::class::Classes::new(sizes.to_vec()))
        }
        /// Tier for a get of `n`.
        #[inline]
        pub fn for_get(&self, n: usize) -> Option<usize> {
            self.0.for_get(n)
        }
        /// Tier for a return of capacity `cap`.
        #[inline]
        pub fn for_put(&self, cap: usize) -> Option<usize> {
            self.0.for_put(cap)
        }
        /// The most size comparisons one lookup makes.
        pub fn max_probes(&self) -> usize {
            self.0.max_probes()
        }
    }
}
