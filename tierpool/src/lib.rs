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
//!     .tiers([1024, 2048, 4096, 8192, 15000]) // or the default: 256 B ..= 16 MiB (56 tiers)
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
//! - **Tiers with O(1) lookup**: `get(n)` uses the smallest tier `>= n`, found with one
//!   `leading_zeros`, two shifts and a table load however many tiers there are.
//! - **No false hits**: a buffer is never smaller than asked; sizes above the largest tier come
//!   from the heap and are not kept. A get whose tier has nothing retained may be lent a
//!   retained buffer of a larger tier, up to twice its size, rather than allocate.
//! - **No locks, no allocation** on the steady-state get and return: each thread has a cache
//!   per pool, and taking or returning a buffer there takes no locked instruction.
//! - **Shared across threads**: a buffer taken on one thread and dropped on another is kept.
//! - **Bounded by one number**: the pool retains at most `max_retained_bytes`, however many
//!   threads use it; buffers idle for a decay interval are released, idle threads' caches
//!   included, and the allocator is asked to give the pages back.
//! - **A budget on bytes in use** (optional): [`Builder::max_in_use_bytes`] makes gets wait
//!   (blocking or async) instead of growing the heap.
//! - **Clear errors, no panics on bad input**: [`ConfigError`] names an invalid setting,
//!   [`AllocError`] an impossible size, a failed allocation or a full budget.
//!
//! # The types
//!
//! | type | what it is |
//! |---|---|
//! | [`BufferPool`] | the pool: `get`, `try_get`, `acquire(n).await`, `stats`, `trim`; cheap to clone |
//! | [`PooledBuf`] | a `Vec<u8>` on loan; dropped anywhere, it goes back |
//! | [`PooledBytes`] | a shared, sliceable, read-only view; the buffer goes back with the last view |
//! | [`PooledChain`] | a message made of several views, read and written as one |
//! | [`AlignedPool`], [`AlignedBuf`] | buffers aligned for direct I/O (`O_DIRECT`) |
//! | [`io`] | reading and writing with pooled buffers: readiness-first reads, frames, io_uring rings |
//! | [`Builder`], [`Stats`] | configuration; what the pool reports |
//!
//! A process-wide pool is [`default_pool`], settable once with [`set_default_pool`].
//!
//! # Features
//!
//! | feature | adds |
//! |---|---|
//! | `bytes` | `bytes::BufMut` for [`PooledBuf`] and [`AlignedBuf`], `bytes::Buf` for [`PooledBytes`] and [`PooledChain`], zero-copy conversions into `bytes::Bytes` |
//! | `tokio` | [`io::ReadBuffer`], [`io::BufWriter`], [`io::read_ready`], [`io::frame`] and the other tokio helpers of [`io`] (implies `bytes`) |
//! | `tokio-util` | [`io::codec`]: tokio-util's `Decoder`s and `Encoder`s, unchanged, over pooled buffers (implies `tokio`) |
//! | `http-body` | `http_body::Body` for [`PooledBytes`] and [`PooledChain`] (hyper, axum, tonic) |
//! | `compio`, `tokio-uring`, `monoio` | those runtimes' buffer traits, for io_uring reads and writes into pooled buffers |
//! | `buf-ring` | [`io::buf_ring`]: an io_uring provided-buffer ring stocked from the pool (Linux) |
//! | `jemalloc`, `mimalloc` | give released memory back under those allocators ([`TrimAllocator`]) |
//! | `metrics` | the pool's figures through the `metrics` facade |
//! | `holders` | which call sites hold the buffers ([`Builder::track_holders`]) |
//!
//! Integrations whose types move faster than this crate's live in crates of their own, each
//! following its stack's releases: `tierpool-rustls` (TLS over rustls 0.23 with record
//! buffers from the pool: an idle TLS connection holds none) and `tierpool-tonic` (gRPC under
//! tonic: messages read into pooled buffers, one budget across streams). They are built on
//! the public API below and nothing else.
//!
//! # Building a protocol crate
//!
//! A crate that brings the pool to another protocol (QUIC, h2, a database's wire format)
//! needs a few pieces beyond `get`, each public with its contract:
//!
//! | piece | contract |
//! |---|---|
//! | [`BufferPool::get_exact`], [`try_get_exact`](BufferPool::try_get_exact), [`Acquire::exact`] | a buffer served by its size's own tier, never a larger tier's lent: its capacity is [`capacity_for(n)`](BufferPool::capacity_for), what bounds on held memory are counted in |
//! | [`BufferPool::capacity_for`], [`capacity_within`](BufferPool::capacity_within) | the tier arithmetic: the capacity a size gets, the largest capacity between two sizes |
//! | [`io::ReadRule`] | the read rules as arithmetic, with no I/O: how much a reader offers, what it remembers of sizes that repeat, how it grows, and the bound on what it holds while it waits (`max(2P, T0)`) with the buffer that meets it |
//! | [`PollAcquire`] | a get that waits for room in a budget from a `poll` function (an `AsyncRead`, a `Body`), in order with every other waiter |
//! | [`io::ReadBuffer::unread_mut`] | in-place access to a read buffer's unread bytes (records decrypted where they lie) |
//! | [`io::poll_write_all`] | the write loop: a pooled buffer written out from a `poll` function, then given back |
//! | `From<AllocError> for io::Error` | a pool's refusal as the `OutOfMemory` error a read or write returns |
//!
//! `tierpool-rustls` and `tierpool-tonic` are two such crates; CI checks that they use
//! nothing of this crate that is not public and documented.
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
//! # More
//!
//! [`implementation`] explains the design: how a get and a return work, the bounds, the
//! budget, the network path, direct I/O, where the `unsafe` code is and what checks it. The
//! repository's `BENCHMARKS.md` has every measured figure with the command that produced it.

#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]
#![warn(clippy::undocumented_unsafe_blocks)]
#![cfg_attr(docsrs, feature(doc_cfg))]

// The layers, bottom-up: each folder imports only the folders above it in this list (its
// `mod.rs` says what it holds). `implementation` is documentation only.
mod base;
mod sys;
mod observe;
mod engine;
mod buf;
mod pool;
pub mod io;
mod compat;
pub mod implementation;

pub use buf::aligned::AlignedBuf;
pub use buf::pooled::PooledBuf;
pub use buf::shared::PooledBytes;
#[cfg(feature = "http-body")]
pub use compat::http_body::ViewFrames;
pub use engine::error::{AllocError, ConfigError};
pub use io::chain::{ChainWriter, PooledChain};
#[cfg(feature = "holders")]
#[cfg_attr(docsrs, doc(cfg(feature = "holders")))]
pub use observe::holders::Holder;
pub use observe::stats::{BudgetStats, Stats, TierStats};
pub use pool::acquire::Acquire;
pub use pool::buffer_pool::{AlignedPool, BufferPool};
pub use pool::builder::Builder;
pub use pool::global::{default_pool, set_default_pool};
pub use pool::kind::{Aligned, Kind, Plain};
pub use pool::poll_acquire::PollAcquire;
pub use pool::reserve::{Reservation, Reserve};
#[cfg(target_os = "linux")]
pub use sys::direct_io::{direct_io_alignment, AlignmentSource, DirectIoAlignment, DirectIoError};
pub use sys::trim::TrimAllocator;

// Compile-time promises the docs make: the handles and the pool are `Send + Sync`.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<PooledBuf>();
    send_sync::<BufferPool>();
    send_sync::<PooledBytes>();
    send_sync::<PooledChain>();
    send_sync::<AlignedBuf>();
    send_sync::<AlignedPool>();
};

#[doc(hidden)]
pub mod __bench {
    //! Internal hooks for the crate's own benchmarks; not part of the public API.

    /// Tier lookup pair (get and return) through the same code the pool uses.
    #[derive(Debug)]
    pub struct Lookup(crate::engine::class::Classes);

    impl Lookup {
        /// Builds the lookup for these sorted, distinct sizes.
        pub fn new(sizes: &[usize]) -> Self {
            Lookup(crate::engine::class::Classes::new(sizes.to_vec()))
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

    /// True if this process reclaims other threads' caches (the heavy fence works: Linux
    /// `membarrier`, Windows `FlushProcessWriteBuffers`, unless `TIERPOOL_NO_MEMBARRIER` is
    /// set). Tests and examples that expect
    /// an idle thread's cache to be emptied at once ask this.
    pub fn reclaims_other_threads() -> bool {
        crate::sys::fence::available()
    }
}

/// The examples of the README that crates.io shows (`tierpool/README.md`), run as doctests so
/// that they keep compiling.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
