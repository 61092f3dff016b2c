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
//!   cache per pool, and a get and a return from it take no lock and no locked instruction
//!   (two plain stores mark the thread busy so that others can reclaim its cache); fewer
//!   instructions than any allocator or pool crate measured (see *Performance*).
//! - **Shared across threads.** A buffer taken on one thread and dropped on another is kept:
//!   thread caches exchange batches with a shared depot.
//! - **Bounded by one number.** The depot and every thread cache together never retain more
//!   than `max_retained_bytes`, whether one thread uses the pool or a thousand: a thread cache
//!   reserves room for the buffers it may hold from the same allowance as the depot's
//!   contents. Each thread's cache holds at most `thread_cache_bytes` (default 8 MiB) plus one
//!   buffer of a tier larger than that (so that a thread cycling 16 MiB buffers does not take a
//!   lock each time), and all of that counts against `max_retained_bytes` too. At the cap,
//!   returned buffers are freed, and a thread that needs room takes it from caches whose
//!   threads have gone quiet.
//! - **Memory comes back, also from idle threads.** Buffers unused for a whole decay interval
//!   are released at the next boundary, so after a burst retained memory falls back within
//!   about two intervals. A thread that stops using the pool does not keep its cache: once it
//!   has done nothing for an interval, the pool's next tick *reclaims* its cache from another
//!   thread and empties it (see *How it works*). [`BufferPool::trim`] empties every cache and
//!   the depot at once, idle threads' included; [`Builder::background_trim`] ticks a pool that
//!   is used rarely or not at all; dropping the last handle frees everything. Under glibc,
//!   whose heap returns memory only from its top, the pool follows a release of a megabyte or
//!   more with `malloc_trim(0)`, so the process's RSS falls too; under jemalloc or mimalloc it
//!   asks them instead ([`Builder::trim_allocator`], [`TrimAllocator`], features `jemalloc`
//!   and `mimalloc`).
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
//! for memory instead of asking the allocator for 40 GiB. Off by default; on, it costs the
//! fast path nothing either: a budgeted pool's get and return are the same instructions as
//! an unbudgeted one's (see *How it stays off the fast path* below).
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
//! **How it stays off the fast path.** Buffers a thread cache holds count as charged, so a
//! get from a cache and a return to it move a buffer between "held by a cache" and "in use"
//! without any accounting: the budget's fast path *is* the pool's fast path. Charges are taken
//! where a buffer leaves the shared side (a refill of a batch from the depot, a fresh
//! allocation) and refunded where it goes back (a flush to the depot, a release), under the
//! account's lock, once per batch. A thread cache holds at most `min(max_in_use_bytes / 16,
//! thread_cache_bytes)`, and a request that would wait takes every cache's buffers back first:
//! it *sweeps* them, reclaiming each cache from its owner (the same machinery that empties
//! idle threads' caches, see *How it works*), busy or idle, so that no idle thread can hold
//! budget a waiter needs and the waiter waits on no thread's cooperation. While anyone waits,
//! caches keep nothing. The `budget` module's docs (in the source) argue why nothing is
//! stranded, and loom models check it with the rest of the protocol (no lost wake-up, no
//! over-grant, cancellation, the sweep).
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
//!   [`PooledChain::read_all`]. And readiness-first reads: `read_ready(&socket, &pool, n)`
//!   waits until a tokio socket is readable and only then takes a pooled buffer and reads
//!   without blocking (`read_ready_exact` for a message of known size), so a connection that
//!   waits for data holds no buffer; the frame reader holds none between frames either.
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
//!   and [`PooledChain`] (the whole chain as one frame, whose `Buf` hands every view to one
//!   vectored write), so hyper sends pooled data as a body without copying it; for axum and
//!   tonic, whose bodies need `Data = Bytes`, `PooledChain::into_view_frames` gives one frame
//!   per view, each a `Bytes` without a copy. The buffers return to their pools as the
//!   transport drops the frames.
//! - **`metrics`**: the pool's figures (retained in depot and caches, in use and its peak,
//!   hits and misses, bytes released by decay, trim and cap, budget waits and refusals, per
//!   tier) through the `metrics` facade to whatever exporter the program installs, labelled
//!   by [`Builder::name`]: at every tick and on `BufferPool::publish_metrics`; the fast
//!   path is untouched. The README lists the metrics.
//! - **`holders`**: `Builder::track_holders(n)` tracks one get in `n` per thread by its call
//!   site, `BufferPool::holders()` lists the outstanding tracked buffers by site (count,
//!   bytes, oldest age), and a budget wait longer than `Builder::report_waits_after` names
//!   the top holders in a `tracing` warning. A tracked buffer carries a tag that no cache
//!   takes, so its return finds its entry on the slow path; the others cost nothing more on
//!   return.
//! - **`buf-ring`** (Linux 5.19): the `buf_ring` module, an io_uring provided-buffer ring
//!   stocked from the pool (below, "The network path").
//! - **`jemalloc`**, **`mimalloc`**: [`TrimAllocator`]'s `Jemalloc` and `Mimalloc`, so the
//!   pool asks those allocators (as linked by `tikv-jemallocator` and `mimalloc`) to give
//!   back what it released, as it asks glibc by default.
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
//! # The network path: no buffer held by a waiting connection
//!
//! A server that takes a buffer per connection and reads into it holds that buffer while the
//! connection waits, so its memory follows connections, not traffic (10,000 idle connections
//! with 16 KiB each: 157 MiB). Two ways out, both measured by the report's `connections`
//! workload (BENCHMARKS.md):
//!
//! - **On tokio (epoll)**, readiness first: `tierpool::io::read_ready(&socket, &pool, n)` (feature
//!   `tokio`) waits until the socket is readable, holding nothing, and only then takes a
//!   pooled buffer and reads what is there without blocking; `read_ready_exact` reads a
//!   message of known size; the `frame` reader holds no buffer between frames.
//! - **On io_uring**, a provided-buffer ring: `buf_ring::BufRing` (feature `buf-ring`)
//!   registers a ring of pooled buffers with an io_uring instance; a receive names the ring's
//!   group instead of a buffer, and the kernel takes a buffer only when data arrives. Each
//!   completion becomes a [`PooledBytes`] of exactly the bytes received; dropping it gives the
//!   buffer back to the pool, and `BufRing::replenish` refills the ring from the pool after a
//!   batch of completions. A budget on bytes in use bounds the ring and the buffers handed
//!   out together (a dry ring, `ENOBUFS`, is retried once buffers come back); with
//!   incremental consumption (Linux 6.12) small receives share one large buffer as views.
//!
//! ```no_run
//! # #[cfg(all(target_os = "linux", feature = "buf-ring"))]
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let socket = std::net::TcpStream::connect("127.0.0.1:1")?;
//! use std::os::fd::AsRawFd;
//! use tierpool::io::buf_ring::BufRing;
//!
//! let pool = tierpool::BufferPool::new();
//! let mut uring = io_uring::IoUring::new(1024)?;
//! let mut ring = BufRing::builder(&pool).entries(256).buf_size(16 << 10).build(&uring)?;
//! let recv = ring.recv_multishot(socket.as_raw_fd()).user_data(7);
//! unsafe { uring.submission().push(&recv)? }; // SAFETY: only the ring's buffers are named
//! uring.submit_and_wait(1)?;
//! let completions: Vec<_> = uring.completion().collect();
//! for cqe in completions {
//!     // SAFETY: a completion of this ring's receive, passed once.
//!     if let Some(bytes) = unsafe { ring.complete(&cqe) }? {
//!         println!("{} bytes from connection {}", bytes.len(), cqe.user_data());
//!     }
//! }
//! ring.replenish();
//! # Ok(()) }
//! # #[cfg(not(all(target_os = "linux", feature = "buf-ring")))] fn main() {}
//! ```
//!
//! **What each runtime offers.** None of the io_uring runtimes lets a program stock a
//! provided-buffer ring from its own pool, so `BufRing` works with the `io-uring` crate's
//! loop (the tests and the workload each have one of about 60 lines). compio 0.19
//! (compio-driver 0.12) has one ring per driver for `read_managed`/`recv_managed`: its
//! buffers, all of one length, come from a `BufferAllocator` type (two static functions, no
//! state, called when the driver starts and stops) and go back to the ring only when the
//! program drops them, so a buffer held for long holds a ring slot, and the ring's memory is
//! fixed for the driver's life. To be stocked from tierpool it would need an allocator with
//! state, called per refill, and a buffer that returns to the allocator rather than the ring
//! (or a way to register a ring of the program's own and read the buffer id of a
//! completion). tokio-uring 0.5 has no provided buffers (the experimental `BufRing` and
//! `recv_provbuf` of its unreleased main branch allocate their own, one size per ring);
//! monoio 0.2 has none either (its multishot receive is unmerged). Each would also need to say
//! when a receive's last completion has been seen, which is how `BufRing` knows that tearing
//! it down is safe.
//!
//! # Direct I/O: [`AlignedPool`]
//!
//! Reads and writes that bypass the page cache (`O_DIRECT`) need buffers whose address, and
//! whose length and file offset, are multiples of the device's alignment (512 B or 4 KiB). A
//! `Vec<u8>` cannot promise one, so an [`AlignedPool`] hands out [`AlignedBuf`]s: their start
//! and capacity are multiples of the pool's alignment (a power of two up to
//! [`MAX_ALIGNMENT`]), from the same machinery as a [`BufferPool`] (thread caches, depot, cap,
//! decay, budget, stats, thread exit). [`direct_io_alignment`] (Linux) tells what a file needs,
//! from `statx` (`STATX_DIOALIGN`) or the device's logical block size, and refuses a
//! filesystem without direct I/O (tmpfs) with [`DirectIoError::Unsupported`].
//!
//! ```no_run
//! # #[cfg(target_os = "linux")]
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::os::unix::fs::{FileExt, OpenOptionsExt};
//!
//! let path = "/var/lib/app/blocks.dat";
//! let align = tierpool::direct_io_alignment(path)?.pool_alignment();
//! let pool = tierpool::AlignedPool::new(align.max(4096))?;
//! let file = std::fs::OpenOptions::new()
//!     .read(true)
//!     .custom_flags(libc::O_DIRECT)
//!     .open(path)?;
//! let mut block = pool.get_zeroed(64 << 10); // 64 KiB, 4 KiB-aligned, len 64 KiB
//! file.read_exact_at(&mut block, 0)?; // an offset that is a multiple of the alignment
//! let shared = block.into_shared(); // views start at the aligned address
//! # drop(shared); Ok(()) }
//! # #[cfg(not(target_os = "linux"))] fn main() {}
//! ```
//!
//! With compio, tokio-uring or monoio (the features), an `AlignedBuf` goes into `read_at` and
//! `write_at` as a `PooledBuf` does; a read fills it from its start up to its capacity (whole
//! blocks) and sets its length to what was read. The kernel's refusal of an offset or length that is not a
//! multiple of the alignment (`EINVAL`) comes back as the operation's error, with the buffer
//! and its contents intact.
//!
//! What it costs: an aligned buffer is a pooled `Vec<u8>` of its tier's size plus the
//! alignment, and an `AlignedBuf` is a window into it that starts at the first aligned
//! address. So every place that frees a buffer frees it with the layout it was allocated with,
//! and the pool's fast path is the one a `BufferPool` takes, plus computing the window (see
//! BENCHMARKS.md, *direct-read*); the price is `align` bytes of address space per buffer
//! (counted in the pool's figures; slack pages never written cost no memory). An `AlignedBuf`
//! cannot grow: appending past its capacity panics ([`std::io::Write`] writes what fits), as
//! it would otherwise lose its alignment. [`AlignedBuf::into_shared`] gives [`PooledBytes`]
//! views that start at the buffer's aligned start; a slice starting `k` bytes in is aligned as
//! far as `k` is. As io_uring registered buffers (`IORING_REGISTER_BUFFERS`), aligned pooled
//! buffers work in tokio-uring's `FixedBufRegistry` (they implement its `IoBufMut`; tested),
//! and return to the pool once unregistered; the pool does not manage a registered set of
//! its own (pinned buffers could not be released at decay or the cap: BENCHMARKS.md, issue
//! 17).
//!
//! # How it works
//!
//! ```text
//!   thread A (busy)                       thread B (idle for an interval)     any thread
//!  ┌──────────────────────────────┐     ┌──────────────────────────────┐
//!  │ cur ──► Cache (pool P)       │     │ cur ──► Cache (pool P)       │    PooledBuf {
//!  │   doorbell = P's key         │     │   doorbell = RUNG ◄──────────┼─┐    Vec<u8>,
//!  │   using = 1 during an op     │     │   using = 0                  │ │    key: u32,
//!  │   tier 0: [p, p, p]          │     │   tier 0: [] (reclaimed)     │ │    tag: u32 }
//!  │   tier 1: [p]                │     │                              │ │   drop: push p
//!  └────────┬─────────────────────┘     └──────────────────────────────┘ │   on this thread's
//!   empty: take a batch │  full: give the older half            a reclaimer: lock, ring,
//!           ▼                                                   membarrier, wait for
//!  ┌──────────────────────────────────────────────────────────┐ using == 0, empty the cache
//!  │ Depot (pool P): per tier, a lock on its own cache line    │
//!  │ over a stack of exact-size buffers and one of larger ones │
//!  │ Allowance: depot contents + every cache's reserved room   │
//!  │            <= max_retained_bytes                          │
//!  └──────────────────────────────────────────────────────────┘
//! ```
//!
//! - **Size classes** (`class`): the size is mapped to one of 16 buckets per power of two with
//!   one `bsr` and two shifts; a table gives the bucket's first candidate tier, and for tiers
//!   with at most five significant bits (powers of two and their 2/4/8/16-step subdivisions)
//!   the candidate is always the answer.
//! - **Thread cache** (the `cache` folder): per thread and pool, one allocation holding the
//!   doorbell, the lookup table and a 64-byte line per tier, each tier a stack of raw pointers
//!   to buffers of exactly its size. The thread-local `cur` slot points at the cache used
//!   last, so everything a get needs is at a constant offset from one pointer. A get marks the
//!   thread busy (`using = 1`, a plain store), compares the doorbell with the pool's key, pops
//!   the pointer at the stack's `head` while it is above the tier's low-water mark, and clears
//!   the mark; a return checks that the capacity is the tier's size (the buffer carries its
//!   tier as a hint) and pushes. Other threads ring the doorbell (trim, close, reclaim) by
//!   overwriting it, which sends the owner's next operation to the slow path at no cost to the
//!   fast one. Counters are written only by the cache's current owner, with plain stores, and
//!   hits are derived from the stack's length rather than counted.
//! - **Reclaim** (`cache/reclaim.rs`, `fence.rs`): another thread may take a cache over and
//!   empty it. It takes the cache's lock, rings the doorbell, issues Linux's
//!   `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)` (one for a whole batch of caches: a full
//!   memory barrier on every running thread of the process) and waits until it reads
//!   `using == 0`. This is Dekker's protocol with both fences on the rare side: after the
//!   barrier, either the owner's busy mark is visible (and the reclaimer waits for the
//!   operation to end, seeing everything it did), or the owner's next look at its doorbell
//!   sees it rung, and it steps aside to the lock until the reclaimer is done. The owner pays
//!   two plain stores and a compiler fence per operation; no locked instruction. The pool's
//!   tick reclaims caches whose activity did not change since the previous tick (idle for an
//!   interval), `trim()` and closing reclaim all, a budget waiter sweeps all, and a thread
//!   that finds the allowance spent takes room from idle ones. Where `membarrier` is not
//!   available (other systems, old kernels), nothing is reclaimed: caches are rung and give
//!   up their buffers at their owner's next operation, their room counts apart from
//!   `max_retained_bytes` (with a smaller default [`FALLBACK_THREAD_CACHE_BYTES`]: the bound
//!   is then the cap plus each cache's own), and a budgeted pool uses no thread caches.
//! - **Policy** (`cache/policy.rs`, safe code): what a get or a return does when the fast path
//!   cannot serve it. Tiers reserve room when first used and grow with use (so the fast path
//!   checks a limit, not a byte count), batches of half a stack move to and from the depot
//!   under one lock acquisition, odd-capacity buffers go to the depot, housekeeping runs every
//!   256 returns to a tier.
//! - **Depot and allowance** (`depot`): the shared store between thread caches, and the one
//!   count of what the pool may retain.
//! - **Buffer handle** (`buf`, `registry`, `key`): a [`PooledBuf`] carries its pool's 32-bit
//!   *key*, not a reference-counted pointer, so handing it out touches no shared counter, yet
//!   it is `'static + Send` and may outlive the pool: a closed pool's key resolves to nothing,
//!   and every cache of it has been emptied, so the buffer is simply freed.
//! - **Decay** (`clock`): time is cut into intervals; each cache and the depot release at every
//!   boundary the buffers that stayed below their low-water mark for the whole interval, and
//!   the pool's tick reclaims idle caches.
//! - **Thread exit**: a thread-local destructor gives each cache's buffers to its depot, with
//!   the room they had (so the depot takes all of them), and folds its counters into the
//!   pool's.
//!
//! The modules, bottom-up (each imports only those before it; the order of the crate root's
//! `mod` list): `sync` (the loom switch), `key` (what a key and a tag hold), `fence` (the
//! asymmetric fence), `class`, `stats`, `os` (giving released memory back to the system),
//! `budget` (the account and its waiters), `error`, `clock`, `fresh` (making and cleaning
//! buffers), `depot` (and the allowance), `config`, then the lower half of the `cache` folder
//! (`stack`, `block`: the layout, `counters`, `fast`, `owner`: who may touch a cache,
//! `reserve`, `reclaim`), `state` (a pool's shared state), the upper half of `cache`
//! (`policy`, `tls`: the thread-local table and the one fallback ladder), `registry`, the
//! public handles
//! `buf`, `pooled_bytes`, `pool`, `global`, `chain`, and the integrations `bytes_impls`,
//! `compio_impls`, `tokio_uring_impls`, `monoio_impls`, `http_body_impls`, `frame`.
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
//! - `cache/tls.rs`: reaching this thread's table and current cache through raw pointers held
//!   in a `const` thread-local. The module documentation argues why at most one reference into
//!   the table is ever live and why this thread enters a cache only once at a time, also under
//!   re-entrancy and thread exit.
//! - `cache/mod.rs`: building a cache's single allocation (a custom unsized layout: the head,
//!   then the tiers), and the two ways to become a cache's `Owner` (the owner's
//!   busy mark, a reclaimer's lock, ring and heavy fence); the module documentation argues why
//!   they exclude each other.
//! - `cache/fast.rs`: the fast path, from the doorbell's address to the table and the tier at
//!   constant offsets; `cache/stack.rs`: reading and writing slots between a stack's bounds,
//!   rebuilding a `Vec` from a pointer whose capacity the stack guarantees.
//! - `fence.rs`: the `membarrier` system call (two integers, no memory of ours).
//! - `class.rs`: indexing the bucket table and the size list without bounds checks, with the
//!   invariant that makes every index valid proved at construction and checked by
//!   `debug_assert!`s.
//! - `pooled_bytes.rs`: [`PooledBytes`] reads the bytes through a raw pointer into a buffer
//!   that nothing mutates while a view exists, with `Arc`'s counting protocol deciding who
//!   hands the buffer back; its control blocks move between threads as raw boxes; and
//!   `try_into_mut` (the view's offset in its buffer).
//! - `buf.rs` (the handle's `ManuallyDrop<Vec>`, taken exactly once), `bytes_impls.rs`
//!   (`BufMut` for [`PooledBuf`]: writing into spare capacity), `os.rs` (the calls to glibc's
//!   `malloc_trim`, jemalloc's `mallctl` and mimalloc's `mi_collect`).
//! - `compio_impls.rs`, `tokio_uring_impls.rs`, `monoio_impls.rs`: the runtimes' buffer traits
//!   (`set_len`, and tokio-uring's and monoio's unsafe traits: the pointer stays put while
//!   the kernel owns the buffer).
//!
//! How it is checked (the commands `.ci/run` runs):
//! - **loom** explores every interleaving of the depot exchange, the cap under contention,
//!   decay and trim racing with get/put, close racing with returns, the doorbell (a ring is
//!   never lost: loom found a lost ring in a first version that rang with a plain store),
//!   counter publication vs. `stats()`, a reclaimer taking a cache over while its owner gets
//!   and returns a buffer (with the owner's fence removed, loom finds the execution where both
//!   work on the stack at once), an owner coming back to a cache being reclaimed, and the
//!   budget's protocol (no lost wake-up, cancellation, and the sweep: with the sweep skipping
//!   caches that looked empty, loom finds a stranded charge). Both sides of the asymmetric
//!   fence are modelled as `SeqCst` fences, which give the same guarantee:
//!   `RUSTFLAGS="--cfg loom" cargo test -p tierpool --lib --release --target-dir target/loom loom`.
//! - **Miri** (strict provenance) runs the unit tests and the integration tests that drive the
//!   thread caches, reclaiming, thread exit, panics, cross-thread hand-off, the budget and the
//!   model test, with the fences as `SeqCst` fences:
//!   `MIRIFLAGS="-Zmiri-strict-provenance" cargo +nightly miri test -p tierpool --features bytes --lib --test model --test semantics --test alloc_free --test leak --test threads --test bad_input --test budget --test reclaim`
//!   (`.ci/run` splits these over two processes, one per core).
//! - **ThreadSanitizer** runs the threads, stress, soak, budget and reclaim tests with std
//!   rebuilt under TSan. It does not model `membarrier` or the compiler fence; what it checks
//!   is that every access a reclaimer makes is ordered after the owner's by the release store
//!   and acquire load of the busy mark (or the cache's lock), which is how the protocol hands
//!   a cache over:
//!   `RUSTFLAGS="-Zsanitizer=thread" cargo +nightly test -Zbuild-std --target x86_64-unknown-linux-gnu -p tierpool --release --test threads --test stress --test soak --test budget --test reclaim`.
//! - **LeakSanitizer** runs the whole test suite; **cargo-fuzz** drives random operations on
//!   two pools against invariants, the frame reader on arbitrary bytes, and chains.
//! - A **model-based** proptest checks long random operation sequences against a reference
//!   model, exactly (every hit, miss and retained byte); **stress** tests run threads of random
//!   get / hand-off / drop while another thread reclaims every cache over and over, and check
//!   by address that no buffer is ever out twice, that contents survive, and that the bound
//!   holds; the whole suite runs once more without `membarrier` (`TIERPOOL_NO_MEMBARRIER=1`)
//!   to check the fallback.
//!
//! # Performance
//!
//! `BENCHMARKS.md` in the repository has every measured figure, each with the command that
//! produced it, from the comparison report (`cargo run --release -p tierpool-bench`): the
//! thread-cache fast path against allocators and pool crates at every size, many threads,
//! hand-off between threads, memory after bursts and with idle threads, the budget under a
//! flood, block reads through io_uring. `.ci/run` fails if a tierpool get+put at 4 KiB, with
//! or without a budget, costs more than 64 instructions
//! (`cargo run --release -p tierpool-bench -- --count tierpool 4096`, and `tierpool-budget`).

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

#[cfg(all(test, loom))]
mod loom_tests;

pub use buf::aligned::AlignedBuf;
pub use buf::pooled::PooledBuf;
pub use buf::shared::PooledBytes;
#[cfg(feature = "http-body")]
pub use compat::http_body::ViewFrames;
pub use engine::budget::MAX_BUDGET;
pub use engine::class::MAX_TIERS;
pub use engine::config::{
    Builder, DEFAULT_DECAY_INTERVAL, DEFAULT_MAX_RETAINED_BYTES, DEFAULT_MAX_TIER,
    DEFAULT_MIN_TIER, DEFAULT_STEPS_PER_DOUBLING, DEFAULT_THREAD_CACHE_BYTES,
    FALLBACK_THREAD_CACHE_BYTES, MAX_ALIGNMENT,
};
pub use engine::error::{AllocError, ConfigError};
pub use io::chain::{ChainWriter, PooledChain};
#[cfg(feature = "holders")]
#[cfg_attr(docsrs, doc(cfg(feature = "holders")))]
pub use observe::holders::Holder;
pub use observe::stats::{BudgetStats, Stats, TierStats};
pub use pool::aligned::{AcquireAligned, AlignedPool};
pub use pool::buffer_pool::{Acquire, BufferPool};
pub use pool::global::{default_pool, set_default_pool};
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
    /// `membarrier`, unless `TIERPOOL_NO_MEMBARRIER` is set). Tests and examples that expect
    /// an idle thread's cache to be emptied at once ask this.
    pub fn reclaims_other_threads() -> bool {
        crate::sys::fence::available()
    }
}
