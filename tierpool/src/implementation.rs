//! How tierpool works: the design behind the API, for readers of the source and users who
//! want to know what a call costs. Nothing here is code; the crate root has the quick start.
//!
//! # Sharing a filled buffer: `PooledBytes`
//!
//! [`PooledBuf::into_shared`] turns a filled buffer into a [`PooledBytes`]: a read-only view
//! that is cheap to clone and to slice (`slice`, `split_to`, `split_off`), `Send + Sync`, and
//! gives the buffer back to its pool exactly once, when the last view is dropped, on whichever
//! thread that happens (gRPC-Go's reference-counted `mem.Buffer`, in Rust). Its control block is
//! recycled with the buffer, so in steady state it allocates nothing.
//!
//! # Chains of buffers: `PooledChain`
//!
//! A message that arrives in several pooled buffers, or is assembled from a header and a body,
//! need not be copied into one: a [`PooledChain`] is an ordered list of [`PooledBytes`] views
//! that reads as one byte sequence (gRPC-Go's `BufferSlice`). It splits at any byte offset
//! without copying payload, writes with one vectored call (`write_to`, `io_slices`, and
//! `bytes::Buf::chunks_vectored`), reads through `std::io::Read`/`BufRead`, and
//! [`materialize`](PooledChain::materialize)s into one pooled buffer when a consumer needs
//! contiguous bytes. And when the last view of a buffer is all that is left,
//! [`PooledBytes::try_into_mut`] makes it a writable [`PooledBuf`] again (not a view of an
//! aligned pool's buffer, which cannot grow).
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
//! let refused = pool.try_get(6 << 20).unwrap_err();  // 4 + 8 (its tier) > 8: refused
//! assert!(matches!(refused, AllocError::OverBudget { in_use, .. } if in_use == 4 << 20));
//! drop(frame);                                        // every way back returns the bytes
//! let b = pool.stats().budget.expect("budgeted");
//! assert_eq!((b.in_use_bytes, b.refusals), (0, 1));
//! # Ok(()) }
//! ```
//!
//! Every way a buffer comes back returns its charge: drop on any thread,
//! [`PooledBuf::into_vec`] (the bytes leave the pool), the last [`PooledBytes`] view, a
//! `Bytes` from `into_bytes()`, a thread exiting, the pool dropped. A buffer is charged its tier's
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
//! thread_cache_bytes)`, and in its large slot one buffer of at most `max_in_use_bytes / 16`; a request that would wait takes every cache's buffers back first:
//! it *sweeps* them, reclaiming each cache from its owner (the same machinery that empties
//! idle threads' caches, see *How it works*), busy or idle, so that no idle thread can hold
//! budget a waiter needs and the waiter waits on no thread's cooperation. While anyone waits,
//! caches keep nothing. The `budget` module's docs (in the source) argue why nothing is
//! stranded, and loom models check it with the rest of the protocol (no lost wake-up, no
//! over-grant, cancellation, the sweep).
//!
//! # The network path: no buffer held by a waiting connection
//!
//! A server that takes a buffer per connection and reads into it holds that buffer while the
//! connection waits, so its memory follows connections, not traffic. Two ways out, both
//! measured by the report's `connections` workload (BENCHMARKS.md):
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
//! # Direct I/O: `AlignedPool`
//!
//! Reads and writes that bypass the page cache (`O_DIRECT`) need buffers whose address, and
//! whose length and file offset, are multiples of the device's alignment (512 B or 4 KiB). A
//! `Vec<u8>` cannot promise one, so an [`AlignedPool`] hands out [`AlignedBuf`]s: their start
//! and capacity are multiples of the pool's alignment (a power of two up to
//! [`Builder::MAX_ALIGNMENT`]), from the same machinery as a [`BufferPool`] (thread caches, depot, cap,
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
//! let pool = tierpool::AlignedPool::with_alignment(align.max(4096))?;
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
//! What it costs: nothing beyond a plain pool's. An aligned buffer is allocated with the
//! pool's alignment and its tier's size (`Layout::from_size_align`), so it has no bytes beyond
//! its tier, and an `AlignedBuf` is a `PooledBuf` that cannot grow: the same 32-byte handle and
//! the same get and return (the same instructions per get+put as a plain pool's; BENCHMARKS.md). The machinery
//! frees every one of its buffers with the pool's alignment (`sys/alloc.rs`; a buffer that
//! outlives its pool finds it in its key), which Miri checks on every way a buffer goes back
//! (`tests/aligned_layouts.rs`). An `AlignedBuf`
//! cannot grow: appending past its capacity panics ([`std::io::Write`] writes what fits), as
//! a buffer allocated with its alignment cannot be reallocated as a `Vec`. [`AlignedBuf::into_shared`] gives [`PooledBytes`]
//! views that start at the buffer's aligned start; a slice starting `k` bytes in is aligned as
//! far as `k` is. As io_uring registered buffers (`IORING_REGISTER_BUFFERS`), aligned pooled
//! buffers work in tokio-uring's `FixedBufRegistry` (they implement its `IoBufMut`; tested),
//! and return to the pool once unregistered; the pool does not manage a registered set of
//! its own (pinned buffers could not be released at decay or the cap).
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
//!  │ Allowance: depot contents + every cache's booked room     │
//!  │            <= max_retained_bytes                          │
//!  └──────────────────────────────────────────────────────────┘
//! ```
//!
//! - **Size classes** (`engine/class.rs`): the size is mapped to one of 16 buckets per power of two with
//!   one `bsr` and two shifts; a table gives the bucket's first candidate tier, and for tiers
//!   with at most five significant bits (powers of two and their 2/4/8/16-step subdivisions)
//!   the candidate is always the answer.
//! - **Thread cache** (`engine/cache/`): per thread and pool, one allocation holding the
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
//! - **Reclaim** (`engine/cache/reclaim.rs`, `sys/fence.rs`): another thread may take a cache over and
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
//!   that finds the allowance spent takes room from idle ones. Where no heavy fence is
//!   available (systems other than Linux and Windows, Linux without `membarrier`), nothing is reclaimed: caches are rung and give
//!   up their buffers at their owner's next operation, their room counts apart from
//!   `max_retained_bytes` (with a smaller default [`Builder::FALLBACK_THREAD_CACHE_BYTES`]: the bound
//!   is then the cap plus each cache's own), and a budgeted pool's caches have no room, so its
//!   gets and returns go to the depot.
//! - **Policy** (`engine/policy/`, safe code, one rule per file, listed in *The slow path's
//!   rules* below): what a get or a return does when the fast path cannot serve it. Tiers
//!   book room when first used and grow with use (so the fast path checks a limit, not a
//!   byte count), batches move to and from the depot under one lock
//!   acquisition (half a stack to it; from it, one buffer first and twice as many each
//!   refill after, up to half a stack), odd-capacity buffers go to the depot, housekeeping
//!   runs every 256 returns to a tier (down to 8 for a thread whose returns are far apart in
//!   time, so that it looks at the clock a few times an interval).
//! - **Depot and allowance** (`engine/depot.rs`): the shared store between thread caches, and the one
//!   count of what the pool may retain.
//! - **Buffer handle** (`buf/pooled.rs`, `engine/registry.rs`, `base/key.rs`): a [`PooledBuf`] carries its pool's 32-bit
//!   *key*, not a reference-counted pointer, so handing it out touches no shared counter, yet
//!   it is `'static + Send` and may outlive the pool: a closed pool's key resolves to nothing,
//!   and every cache of it has been emptied, so the buffer is simply freed.
//! - **Decay** (`engine/clock.rs`): time is cut into intervals; each cache and the depot release at every
//!   boundary the buffers that stayed below their low-water mark for the whole interval, and
//!   the pool's tick reclaims idle caches.
//! - **Thread exit**: a thread-local destructor gives each cache's buffers to its depot, with
//!   the room they had (so the depot takes all of them; without the heavy fence, what does not
//!   fit is released), and folds its counters into the
//!   pool's. The emptied cache is parked (up to 8 per pool, freed after a whole interval
//!   unused) and the thread's emptied table kept: the next thread to start takes both over,
//!   and allocates nothing to use the pool.
//!
//! # Metrics
//!
//! With the feature `metrics`, the pool publishes its figures through the `metrics` facade at
//! every tick (once per decay interval while it is used, or by the background trimmer) and on
//! [`BufferPool::publish_metrics`](crate::BufferPool::publish_metrics). Every metric has the
//! label `pool` ([`Builder::name`](crate::Builder::name)):
//!
//! | metric (feature `metrics`) | kind | labels besides `pool` | what |
//! |---|---|---|---|
//! | `tierpool_retained_bytes` | gauge | `place` = `depot` / `caches` | bytes retained |
//! | `tierpool_retained_buffers`, `tierpool_thread_caches` | gauge | | buffers retained; thread caches attached |
//! | `tierpool_in_use_buffers` | gauge | | buffers handed out and not returned |
//! | `tierpool_in_use_bytes`, `tierpool_in_use_bytes_peak` | gauge | | their bytes, and the most seen: exact under a budget; without one, estimated from the tiers (oversize buffers not counted) and the peak is the most seen at a publication |
//! | `tierpool_gets_total` | counter | `result` = `hit` / `miss` / `oversize` | gets |
//! | `tierpool_returned_total`, `tierpool_discarded_total` | counter | | buffers handed back; of those, released |
//! | `tierpool_released_bytes_total` | counter | `reason` = `decay` / `trim` / `cap` | bytes released to the allocator, by why (also in `Stats`) |
//! | `tierpool_allocator_trims_total` | counter | | times the allocator was asked to give memory back |
//! | `tierpool_budget_limit_bytes`, `tierpool_budget_waiting`, `tierpool_budget_wait_longest_seconds` | gauge | | budgeted pools: the limit, requests waiting now, the longest wait |
//! | `tierpool_budget_waits_total`, `tierpool_budget_wait_microseconds_total`, `tierpool_budget_refusals_total` | counter | | budgeted pools: waits, time waited, `try_get` refusals |
//! | `tierpool_tier_retained_bytes` | gauge | `tier` (its size) | per tier that has seen traffic |
//! | `tierpool_tier_gets_total`, `tierpool_tier_discarded_total` | counter | `tier`; `result` = `hit` / `miss` | per tier that has seen traffic |
//!
//! # Where each part lives
//!
//! The library is in layers, one folder each; a folder imports only the folders before it
//! (`scripts/check_layers.py` checks it in CI), and each folder's `mod.rs` lists its files in
//! the same bottom-up order.
//!
//! | folder | layer | what it holds |
//! |---|---|---|
//! | `base/` | 0 | the switch between `std` and loom (`sync.rs`); the two words a buffer carries, its pool's key and its tag (`key.rs`) |
//! | `sys/` | 1 | the operating system and the allocator: the asymmetric fence (`fence.rs`), giving memory back (`trim.rs`), `statx` for direct I/O (`direct_io.rs`) |
//! | `observe/` | 2 | what the pool reports: `Stats` and its counters, `metrics` publication, holder tracking |
//! | `engine/` | 3 | the machinery: size classes, the budget, errors, decay clock, the depot, configuration, the thread caches (`cache/`), a pool's state, the slow path (`policy/`), the thread-local table (`local.rs`), the registry, the background trimmer; the layers above enter through `ops.rs` alone |
//! | `buf/` | 4 | the buffers a user holds: `PooledBuf`, `PooledBytes`, `AlignedBuf`, and their `bytes` traits |
//! | `pool/` | 5 | what hands them out: `BufferPool` (get, acquire), `Builder`, `AlignedPool`, the default pool |
//! | `io/` | 6 | reading and writing: what the pooled readers and writers are made of (`parts/`: the read rules (`rule.rs`, public as `ReadRule`), the stores, the core that applies the rules to a read loop, the write loop), `ReadBuffer` (`read_buf.rs`), `BufWriter` (`write_buf.rs`), tokio-util's codecs (`codec/`: `framed_read.rs`, `framed_write.rs`, and `bytes_mut_store.rs`, the buffer handed to a codec as a `BytesMut`), `PooledChain` (`chain.rs`), readiness-first reads (`ready.rs`), frames (`frame.rs`), provided-buffer rings (`buf_ring/`) |
//! | `compat/` | 7 | other crates' traits: compio, tokio-uring, monoio, `http_body` |
//!
//! ## The slow path's rules
//!
//! Everything a get or a return does beyond the fast path is one of these rules or one of the
//! *Special cases* below, each written once, in `engine/policy/` unless named otherwise:
//!
//! | rule | what it answers | function |
//! |---|---|---|
//! | refill | a get's stack is empty: a batch from the depot, its room with it, starting at one buffer and doubling with use | `exchange::refill` |
//! | flush | a return's stack is full: its oldest buffers to the depot, half the stack (all of a stack of one or two) | `exchange::flush` |
//! | give up | a stack and its room to the depot at once (room-making, the large slot, a sweep, thread exit) | `exchange::give_up` |
//! | release | buffers to the allocator, their pages first when idle or refused at the cap | `exchange::release`, `DepotTier::release`, `PoolState::file_in_depot` |
//! | first room | a tier's first booking: one buffer, or the large slot | `room::book` |
//! | the room ladder | where more room comes from, by purpose (refill, miss, return): free room, unused bookings, other stacks, the allowance, eviction, quiet caches | `room::grow` |
//! | the large slot | one tier above `cache_bytes` may hold one buffer | `room::take_large_slot` |
//! | eviction | at the cap, the depot's oldest buffers of other sizes make way for a buffer in use | `room::evict`, `Depot::evict` |
//! | retrieval | a get its stack and a refill cannot serve: a larger buffer filed under its tier, or a loan of a larger tier's | `retrieve::retrieve` |
//! | housekeeping | every 16th slow operation, a rung doorbell, or a tier's due return count looks at the pool | `housekeeping::after_slow_op`, `Owner::pace`; a due return count through `ops.rs`'s `look_due` |
//! | the look | what the pool asks of a cache: closed, trimmed, budget pressure, a new interval | `housekeeping::look` |
//! | the idle rule | what stayed unused through an interval is released: cache stacks, the depot, spare storage, parked caches | `housekeeping::decay`, `IdleStack::decay` (`engine/idle.rs`) |
//! | the tick | once per interval, by one thread: the depot's, spare storage's and parked caches' decay (`PoolState::claim_tick`), idle caches reclaimed, the allocator trimmed, overdue budget waits reported, metrics | `tick::tick` |
//! | reclaim for room | the allowance is spent: caches quiet since the last tick are emptied | `tick::reclaim_quiet` |
//! | after the operation | refunds, the tick, reclaiming for room run once the owner is gone | `tick::finish` |
//! | pool-wide | `trim()`, closing, a budget waiter's sweep: every cache reclaimed and acted on | `pool_wide::reclaim_all` |
//! | thread exit | a cache gives everything to the depot, then, its refunds settled, is detached and parked for the next thread | `local::retire` (`housekeeping::retire`, `Caches::detach`) |
//! | the budget's charges | a refill charges its batch, everything leaving a stack refunds | `PoolState::pay`, `Owner::defer_refund` |
//!
//! ## Special cases
//!
//! The core design is the first four parts of *How it works*: size classes, a thread cache of
//! stacks per tier, the depot between caches with batches both ways, one allowance, decay of
//! what stayed idle, reclaim of idle caches, and the budget. Every mechanism beyond it is a
//! special case, kept by a workload (or a platform, or the API) and held by a guard test that
//! fails without it. A new special case needs a row; a row without a guard or a reason is a
//! candidate for removal. Rows are in the order a get, then a return, meets them; then
//! threads, the whole pool and the platform. Workloads are the report's (`tierpool-bench`);
//! `mixed_cap`, `mixed_random` and `idle_budget` are its examples. The figures are in
//! `BENCHMARKS.md` and `docs/benchmarks-history.md`.
//!
//! | special case | where | kept by | guard |
//! |---|---|---|---|
//! | housekeeping paced by the time between looks: a tier's return countdown from 256 down to 8, and a look every 16 slow operations | `Owner::pace`, `Owner::count_slow_op`, `SLOW_CHECK_EVERY` | `idle-threads`: a thread returning a buffer a millisecond looked at the clock every 256 ms | `housekeeping_is_paced_by_the_time_between_looks_and_counts_stay_exact` (`src/engine/policy/tests.rs`) |
//! | a closed pool's caches are rung, free everything, keep nothing | `housekeeping::kill`, `pool_wide::close_all`, `Owner::mark_dead` | the API: a pool dropped while buffers are out | `a_buffer_outliving_its_pool_is_freed_on_a_thread_that_still_has_a_cache` (`tests/leak.rs`), `loom_close_is_never_missed_by_a_cache` |
//! | budget pressure: a waiter sweeps every cache before it queues and after; while it waits caches keep nothing, and a cache made meanwhile is born rung | `PoolRef::take_swept`, `pool_wide::sweep`, `housekeeping::look`, `PoolState::new_cache` | `budget`, `soak` (each half hung about one run in ten without it) | `loom_budget_sweep_strands_nothing`, `buffers_idle_in_another_threads_cache_never_block_a_request_for_the_whole_budget` (`tests/pool/budget.rs`) |
//! | a cache's share of a budget: `min(thread_cache_bytes, limit / 16)`, plus a large slot of at most `limit / 16` | `CACHE_SHARE`, `PoolState::make_cache` | `instructions` at 16 MiB under a budget (63 instructions with the slot, 1,389 without) | the callgrind count under a budget in `.ci/run`; none for the share itself |
//! | an idle tier gives back its room and its slots at decay; refills count as use | `housekeeping::decay`, `Owner::idle_since_last_look` | `cross-thread` (a producer only gets) | `decay_keeps_a_getting_tier_and_frees_an_idle_one` (`src/engine/policy/tests.rs`) |
//! | the allocator asked to trim or purge once 1 MiB was released | `AllocatorTrim::maybe_run`, from `tick::tick` | `burst` (glibc, jemalloc, mimalloc) | `trim_allocator_is_called_after_a_megabyte_and_can_be_turned_off` (`tests/pool/decay.rs`), `tests/purge_jemalloc.rs`, `tests/purge_mimalloc.rs` |
//! | sizes outside the tiers: a get above the largest is exact and never kept (charged in pages under a budget); returns outside the tiers are freed | `get::oversize`, `put::put_slow` | the API (Vitess' no false hits) | `oversize_requests_are_exact_and_not_kept` (`tests/pool/semantics.rs`), `oversize_buffers_are_charged_their_size_in_pages` (`tests/pool/budget.rs`) |
//! | the large slot: one tier above `cache_bytes` may hold one buffer | `stack_cap`, `Owner::booking`, `room::take_large_slot` | `get-put` and `instructions` at 16 MiB | `a_tier_above_the_thread_budget_keeps_one_buffer_in_the_thread_cache` (`tests/pool/semantics.rs`), the callgrind count at 16 MiB |
//! | room grows with use (one buffer, then doubling); unused bookings of other tiers are lowered first | `room::grow`, `room::lower_unused_limits`, `Owner::raise_limit` | `cross-thread` at 1 MiB | `steady_state_get_put_allocates_nothing` (`tests/alloc_free.rs`) |
//! | other tiers' stacks make way, with their room | `room::make_room`, `exchange::give_up` | `cross-thread` at 64 KiB (`idle_budget`) | `a_full_cache_makes_room_and_its_idle_buffers_reach_other_threads` (`tests/pool/threads.rs`) |
//! | a refill spares the stacks of its lenders while the depot has none of its tier | `room::grow` (`Purpose::Refill`), `PoolState::lenders_of` | `mixed_cap` | `a_tier_and_its_lender_that_do_not_fit_one_cache_together_keep_hitting` (`tests/pool/semantics.rs`) |
//! | slow start: a refill asks for one buffer, then twice as many each time; decay halves it | `Owner::fill`, `Owner::double_fill`, `Owner::halve_fill` | `mixed` with random sizes (`mixed_random`) | `refills_start_at_one_buffer_and_double_with_use` (`src/engine/policy/tests.rs`) |
//! | a stack of one or two moves whole | `exchange::batch_size` | none measured (half of two sends every buffer through the depot's lock) | none |
//! | a refill brings its room from the depot, so it never evicts (`give_up` is the reverse) | `exchange::refill`, `Owner::transfer_in`, `Owner::transfer_out` | `mixed_random` (nothing released at the cap after, up to 26 MiB a pass before) | `a_refill_at_the_cap_takes_the_room_its_buffers_held_in_the_depot` (`src/engine/policy/tests.rs`) |
//! | odd capacities: a second depot stack per tier, tried first by a get of its tier | `Depot::put_one`, `Depot::take_odd`, `PoolState::take_direct` | the API (an adopted or grown buffer) | `never_hands_out_a_buffer_smaller_than_asked`, `a_buffer_grown_past_its_tier_is_refiled_by_its_new_capacity` (`tests/pool/semantics.rs`) |
//! | a loan below the cap: once per tier and interval, a lender at most twice the size | `retrieve::lend`, `Classes::lenders` | `mixed` with random sizes (fewer fresh buffers per round) | `a_tier_is_lent_once_an_interval_then_gets_buffers_of_its_own` (`tests/pool/semantics.rs`) |
//! | a loan at the cap: up to 16 per interval, from the depot; a look that finds nothing does not count | `retrieve::lend`, `MAX_LOANS_AT_CAP` | `mixed_cap` (misses 88-92 to 22-26, nothing released at the cap) | `at_the_cap_a_get_without_room_is_lent_the_depots_buffers`, `at_the_cap_a_look_that_finds_no_lender_is_not_a_loan`, `at_the_cap_a_get_in_a_loop_is_lent_a_bounded_number_of_times` (`src/engine/policy/tests.rs`) |
//! | no loans under a budget, in an aligned pool, or for exact gets | `PoolState::lends`, `Fresh::lends` | `budget`, `direct-read`, the readers' bound of twice what arrived | `pools_with_a_budget_or_an_alignment_hand_out_exactly_their_tiers` (`tests/pool/semantics.rs`) |
//! | eviction at the cap: the depot's oldest buffers of other tiers make room for the one buffer in hand, never the lenders' | `room::evict`, `Depot::evict` | `mixed` at medium sizes (0.24 to 0.002-0.007 allocations per packet) | `eviction_makes_room_for_one_buffer_but_not_less_and_not_more` (`src/engine/policy/tests.rs`), `a_depot_full_of_other_sizes_makes_way_for_a_thread_at_work` (`tests/alloc_free.rs`) |
//! | reclaim for room: the allowance spent, caches quiet since the last tick are emptied after the operation | `tick::reclaim_quiet`, `Owner::defer_reclaim_quiet` | none measured | none |
//! | placement: a fresh buffer of 128 KiB or more that lands 16 bytes into a page is made again (glibc) | `fresh::alloc_fresh`, `badly_placed` | `file-read` (1 MiB reads at half speed before) | `the_first_large_buffer_of_a_process_is_not_placed_16_bytes_into_a_page` (`src/engine/fresh.rs`) |
//! | pools that wipe: every return takes the slow path | `Owner::apply_limit`, `fresh::scrub` | the API (`zero_on_return`) | `zero_on_return_wipes_the_whole_capacity` (`tests/pool/semantics.rs`) |
//! | a budgeted pool keeps exact sizes only | `put::put_slow` (`stackable`), `PoolState::file_in_depot` | the budget's charge (capacity is the charge) | `an_adopted_buffer_of_odd_capacity_is_not_kept_by_a_budgeted_pool` (`tests/pool/budget.rs`) |
//! | a flush lowers the low-water mark by what it drained | `Owner::drain_oldest` | `cross-thread`'s consumer (decay released its circulating buffers each interval) | none |
//! | a return refused at the cap, and an idle release, give their pages back first (64 KiB or more); evicted buffers do not | `PoolState::file_in_depot`, `exchange::release`, `DepotTier::release`, `free_released` | `idle-threads` at 16 threads (73-153 MiB to 1.2-1.6 MiB above start); `mixed_random` (70% more faults if evictions did) | `buffers_refused_at_the_cap_leave_the_process` (`tests/rss_cap.rs`), `released_buffers_leave_the_process_from_idle_threads_arenas` (`tests/rss.rs`) |
//! | emptied stacks free their storage | `IdleStack::take_oldest`, `Owner::free_storage` | `burst` (160 MiB of stack storage stayed resident) | `trim_frees_the_stacks_as_well_as_the_buffers` (`tests/leak.rs`) |
//! | the background trimmer ticks when the next interval begins | `trimmer::spawn` | `idle-threads` with `background_trim` | `the_background_trimmer_empties_idle_caches_within_a_few_intervals` (`tests/pool/reclaim.rs`) |
//! | thread exit: stacks to the depot with their room, then detach once refunds are settled | `local::retire`, `housekeeping::retire`, `Caches::detach` | `mixed` (fresh threads per sample), `cross-thread` | `thread_exit_hands_its_cache_to_the_depot` (`tests/pool/threads.rs`), `an_exited_thread_settles_its_charges_before_it_stops_counting` (`tests/pool/budget.rs`) |
//! | parked caches: up to 8 per pool, taken over by the next thread, freed after an interval unused | `Caches::unpark`, `Caches::decay_parked`, `MAX_PARKED` | `mixed_random` (2 allocations per new thread instead of 6) | `a_new_thread_takes_over_the_cache_an_exited_one_left` (`tests/alloc_free.rs`) |
//! | spare stack storage (at most 8,192 slots, decayed) | `SpareSlots::take`, `SpareSlots::give`, `SpareSlots::decay` | `mixed` (stacks cost 0.5 allocations per packet) | `a_new_thread_takes_the_stack_storage_an_exited_one_left` (`tests/alloc_free.rs`) |
//! | spare thread tables (at most 16 per process, never decayed: a table is a few hundred bytes) | `local::new_table`, `local::retire_table`, `MAX_SPARE_TABLES` | `mixed_random` (0 allocations per new thread) | `a_new_thread_takes_over_the_cache_an_exited_one_left` (`tests/alloc_free.rs`) |
//! | the cacheless path, for an exiting thread or a re-entrant call | `get::get_direct` (through `retrieve::retrieve_direct` and the oversize rule of `get_slow`), `put::put_direct`, `SlowOp::without_cache` | the platform: thread-local destructor order, allocators that use the pool | `thread_exit_while_holding_buffers_in_thread_locals`, `a_get_after_the_threads_cache_is_gone_is_served_and_counted` (`tests/pool/threads.rs`) |
//! | no asymmetric fence: reclaimers only ring, and each cache acts at its owner's next operation; `trim()` empties the caller's own cache at once | `Reclaimer::reclaim`, `fence::available`, `TrimOwn` | the platform: macOS, Linux without `membarrier` | `trim_reaches_other_threads_caches_when_they_next_use_the_pool` (`tests/pool/decay.rs`); the suite with `TIERPOOL_NO_MEMBARRIER=1` in `.ci/run` |
//! | no asymmetric fence: caches' room counted apart (2 MiB by default), `give_up` releases what does not fit, no eviction; under a budget caches have no room | `PoolState::caches_share_allowance`, `exchange::give_up`, `room::evict`, `FALLBACK_THREAD_CACHE_BYTES` | the platform: an idle thread would keep its room for good; a waiter could not take buffers back | `try_get_reports_allocator_failure_and_the_pool_recovers` (`tests/alloc_failure.rs`, under `TIERPOOL_NO_MEMBARRIER=1`) |
//! | after a `fork`, `membarrier` registered again when a call fails | `fence::heavy` | the platform | none |
//! | the depot read for stats under every tier's lock at once | `Depot::lock_all` | `soak` (read 4,736 bytes above a 4 MiB cap) | `loom_depot_bytes_never_read_above_the_cap` |
//!
//! ## Words
//!
//! | word | meaning |
//! |---|---|
//! | *tier* | a size class: buffers of exactly one size |
//! | *bucket* | one sixteenth of a power of two of sizes; the lookup table maps each to its first tier |
//! | *thread cache* | one thread's stacks for one pool, one stack per tier |
//! | *stack* | a tier's buffers in a thread cache, newest on top, as raw pointers |
//! | *depot* | the pool's shared store: per tier, a stack of exact-size buffers and one of larger (*odd*) ones, each behind its own lock |
//! | *exact*, *odd* | a buffer of exactly its tier's size (thread caches hold only these), or larger (foreign or grown, filed under the largest tier it covers) |
//! | *allowance* | the one count of what the pool retains: the depot's bytes plus every cache's room, never above `max_retained_bytes` |
//! | *room*, *limit* | how many buffers of a tier a cache may hold now, drawn from the allowance and from `cache_bytes` |
//! | *cache_bytes* | what one thread cache may book in all |
//! | *cap* (of a stack) | the most a tier's limit may be: `min(64, cache_bytes / size)`; 1 for a tier above `cache_bytes` (the large slot), 0 when `cache_bytes` is 0 |
//! | *large slot* | room for one buffer of one tier above `cache_bytes` |
//! | *at the cap* | a tier has no room and the allowance has less than one of its buffers free |
//! | *batch*, *fill* | buffers moved per exchange with the depot; how many the next refill asks for (slow start) |
//! | *purpose* | why a tier asks for room (refill, miss, return): which rungs of the ladder it may climb |
//! | *evict* | release the depot's oldest buffers of other tiers to make room |
//! | *loan*, *lender* | a get served by a buffer of a larger tier (up to twice its size): the *lender* |
//! | *owner* | the one thread that may touch a cache's stacks now: its own thread (busy mark) or a reclaimer (lock, ring, heavy fence) |
//! | *doorbell*, *ring* | a cache's copy of its pool's key; overwriting it sends the owner's next operation to the slow path |
//! | *busy mark* | `using`: set while the owner works on its stacks |
//! | *heavy fence*, *light fence* | `membarrier` (or `FlushProcessWriteBuffers`) on the reclaimer's side; a compiler fence on the owner's |
//! | *reclaim* | take a cache over from its thread (ring, fence, wait for the busy mark to clear) and empty it |
//! | *sweep* | reclaim every cache of a pool, busy or idle, so a budget waiter waits on no thread |
//! | *refill*, *flush* | move a batch of buffers from the depot to a cache, or from a cache to the depot |
//! | *give up* | hand a whole stack and its room to the depot |
//! | *book*, *booking* | draw room for a tier from the pool's allowance before the cache may hold buffers there; the room drawn (a *reservation* is the public [`Reservation`](crate::Reservation): budget set aside) |
//! | *interval*, *epoch* | the decay period (`Builder::decay_interval`), and its number |
//! | *low-water mark* | the fewest items a stack held since the last decay: those below it stayed idle |
//! | *decay* | at an interval boundary, release what stayed below its low-water mark for a whole interval |
//! | *tick* | the pool's once-per-interval work: depot decay, reclaiming idle caches, publishing metrics |
//! | *release* | free buffers to the allocator (decay, trim, the cap); counted by reason. A buffer going back to its pool is a *return* (`ops::put`); a charge going back to the budget, a *refund* |
//! | *housekeeping*, *look* | what a cache does beside gets and returns; the look at the pool it runs when due (closed, trimmed, budget pressure, a new interval: `housekeeping::look`) |
//! | *trim* | release everything retained now (`BufferPool::trim`) |
//! | *spares* | stack storage caches gave up, kept for the next cache's stacks |
//! | *parked cache* | an exited thread's empty cache, kept for the next thread |
//! | *retire* | an exiting thread's cache gives everything back: its stacks to the depot, its room and storage freed |
//! | *detach* | take a cache off the pool's list once its refunds are settled, folding its counts into the pool's (an empty one is parked) |
//! | *close* | the last pool handle went away: every cache releases its buffers and keeps none from then on |
//! | *key*, *tag* | the two words a buffer carries: its pool (resolved through the registry), and its tier or charge |
//! | *budget*, *charge*, *refund* | the cap on bytes in use; what a buffer counts against it; giving that back |
//! | *pressure* | a budget waiter is queued: caches keep nothing until it is served |
//!
//! # Safety and correctness
//!
//! Every `unsafe` block has a `// SAFETY:` argument beside it (enforced by
//! `clippy::undocumented_unsafe_blocks`). The files that hold `unsafe` code, what it relies
//! on, and what checks it:
//!
//! | file | what the `unsafe` does | relies on | checked by |
//! |---|---|---|---|
//! | `engine/local.rs` | reaches this thread's table and current cache through raw pointers in a `const` thread-local | at most one reference into the table is live; a thread enters a cache once at a time, also under re-entrancy and at thread exit (module docs) | Miri (lib, semantics, threads, alloc_free, leak), loom (`reclaim::loom_an_owner_coming_back_waits_for_its_reclaimer`) |
//! | `engine/ops.rs` | a return past the fast path rebuilds its `Vec` from the parts the fast path gave up | the parts of one `Vec` whose owner let go of it (`ManuallyDrop`), passed once | Miri (every test whose returns reach the slow path: a full stack, another pool, thread exit) |
//! | `engine/cache/block.rs` | builds a cache's one allocation (head, then the tiers) with a custom layout, and frees it as a `Box` | the layout computed once; every slot written once | Miri (every test that makes a cache) |
//! | `engine/cache/fast.rs` | the fast path: from the doorbell's address to the table and the tier at constant offsets | the block's layout; the owner's busy mark | Miri, loom, the callgrind guard |
//! | `engine/cache/stack.rs`, `tier_ops.rs`, `owner.rs` | reading and writing a stack's slots between its bounds; rebuilding a `Vec` from a slot's pointer (`tier_ops.rs`); the two ways to become a cache's owner (`owner.rs`) | `head <= len <= cap`; a slot holds a buffer of exactly its tier; Dekker's protocol with both fences on the rare side (`owner.rs` docs) | Miri, loom (with the owner's fence removed, loom finds both sides on one stack), stress and soak under TSan |
//! | `engine/cache/spare.rs` | keeps slot arrays that stacks gave up (raw pointers from `alloc_slots`), nulls them, hands them to the next stack of the same length, frees them | `give` is `unsafe`: an array of that length, given once, with every pointer to it cleared first (`Owner::free_storage`, a cache's drop) | Miri (lib: its unit test, and every test that makes caches), `tests/alloc_free.rs` |
//! | `engine/cache/reclaim.rs`, `engine/policy/tests.rs` | taking a seized cache's `Owner` after the heavy fence; a cache nothing else reaches | the fence ran after every seize; the caller is inside no operation | loom, Miri (reclaim), TSan (reclaim) |
//! | `engine/class.rs` | indexing the bucket table and the size list without bounds checks | every index proved valid at construction (`debug_assert!`s) | Miri, the exhaustive lookup tests |
//! | `sys/fence.rs` | the heavy fence: Linux's `membarrier` system call, Windows' `FlushProcessWriteBuffers` | two integers (no arguments on Windows), no memory of ours | `fence::tests`, the whole suite once without it; on Windows the library's tests under Wine, whose `FlushProcessWriteBuffers` returns without a barrier (RELIABILITY.md) |
//! | `sys/trim.rs` | `malloc_trim`, jemalloc's `mallctl`, mimalloc's `mi_collect`; `madvise(MADV_DONTNEED)` on a buffer the pool frees as idle or refuses at the cap (`free_released`) | their C contracts (a NUL-terminated name, no arguments); for `madvise`, only whole pages inside the buffer's own allocation, which it owns until it is freed right after, and an allocator that keeps no bookkeeping inside a live allocation | the purge tests under each allocator; `tests/rss.rs` and `tests/rss_cap.rs` (the pages leave the process), the whole suite under LeakSanitizer (which would see a corrupted heap) |
//! | `sys/direct_io.rs` | `statx` and `statfs` into zeroed structs | a NUL-terminated path; the kernel fills the struct or fails | `tests/runtimes/direct_io.rs` on ext4 and tmpfs |
//! | `buf/pooled.rs` | the handle's `ManuallyDrop<Vec>`, taken exactly once | `Drop`, `into_parts` and `into_vec` are the only takers, and the last two skip `Drop` | Miri (every test) |
//! | `buf/shared.rs` | `PooledBytes` reads through a raw pointer into a buffer nothing mutates while a view exists; control blocks move between threads as raw boxes; `try_into_mut` | `Arc`'s counting protocol decides who hands the buffer back | Miri, loom (`loom_shared_views_hand_the_buffer_back_exactly_once`), `tests/io/chain.rs` |
//! | `sys/alloc.rs` | an aligned pool's buffers: allocated with its alignment and carried as `Vec<u8>`s that never free or grow themselves; freed with the same layout | every free of such a buffer passes the pool's alignment (the key's, once the pool is gone); no such `Vec` reaches a user (an `AlignedBuf` cannot grow, its views are never made writable) | Miri (unit tests, `tests/aligned_layouts.rs`: its allocator compares each free's layout with the allocation's), `tests/aligned_ways_back.rs` (live heap back where it was) |
//! | `buf/block.rs` | a `PooledBytes` control block boxed and unboxed through its pointer | a block is given back once, by the last view | Miri, loom (`loom_shared_views_hand_the_buffer_back_exactly_once`) |
//! | `buf/aligned.rs` | `AlignedBuf::set_len` (public, `unsafe`) | the caller's: the bytes up to `new_len` are initialized, within the capacity | Miri (its unit tests) |
//! | `buf/bytes.rs` | `BufMut` for `PooledBuf` (forwarded to `Vec`'s) and `AlignedBuf` (within the capacity) | `BufMut`'s contract | Miri (`--features bytes`) |
//! | `io/parts/core.rs`, `io/parts/store.rs`, `io/codec/bytes_mut_store.rs`, `io/ready.rs` | a read into a buffer's spare capacity, then its length raised by what the read initialized | `AsyncRead` (`ReadBuf`) reports only bytes it initialized; the length stays within the capacity | Miri (the read buffer's unit tests), the fuzz targets `read_buffer` and `framed_read` (under AddressSanitizer) |
//! | `sys/uring.rs` | io_uring's `register` system call for a provided-buffer ring | the ring's memory outlives its registration (`io/buf_ring/ring.rs`) | `tests/runtimes/buf_ring.rs` on a real io_uring |
//! | `io/buf_ring/ring.rs` | registers a ring with io_uring, writes its entries, turns completions into views | the ring outlives its registration; a completion is passed once (`complete` is `unsafe` for it) | `tests/runtimes/buf_ring.rs` on a real io_uring, under LSan |
//! | `compat/compio.rs`, `tokio_uring.rs`, `monoio.rs` | the runtimes' buffer traits (`set_len`, stable pointers) | the heap pointer stays put while the kernel owns the buffer; lengths are honest | `tests/runtimes/compio.rs`, `tokio_uring.rs`, `monoio.rs`, `direct_io.rs` on a real io_uring |
//!
//! How it is checked (the commands `.ci/run` runs):
//! - **loom** explores every interleaving of the depot exchange, the cap under contention,
//!   decay and trim racing with get/put, close racing with returns, the doorbell, counter
//!   publication vs. `stats()`, a reclaimer taking a cache over while its owner gets and
//!   returns a buffer, an owner coming back to a cache being reclaimed, the shared views'
//!   count, and the budget's protocol (no lost wake-up, cancellation, the sweep). Both sides
//!   of the asymmetric fence are modelled as `SeqCst` fences, which give the same guarantee:
//!   `RUSTFLAGS="--cfg loom" cargo test -p tierpool --lib --release --target-dir target/loom loom`.
//! - **Miri** (strict provenance) runs the unit tests and the integration tests that drive the
//!   thread caches, reclaiming, thread exit, panics, cross-thread hand-off, the budget, the
//!   aligned buffers and the model test, with the fences as `SeqCst` fences (`.ci/run` lists
//!   the tests).
//! - **ThreadSanitizer** runs the threads, stress, soak, budget and reclaim tests with std
//!   rebuilt under TSan. It does not model `membarrier` or the compiler fence; it checks that
//!   every access a reclaimer makes is ordered after the owner's by the release store and
//!   acquire load of the busy mark (or the cache's lock).
//! - **LeakSanitizer** runs the whole test suite; **cargo-fuzz** drives random operations on
//!   two pools against invariants, chains, and every receive path (the frame reader, the read
//!   buffer, tokio-util's decoders, the gRPC message reader, TLS records) under peers that cut
//!   their bytes anywhere, checking the bound at every wait and that every buffer comes back.
//! - A **model-based** proptest checks long random operation sequences against a reference
//!   model, exactly (every hit, miss and retained byte); **stress** tests run threads of random
//!   get / hand-off / drop while another thread reclaims every cache over and over, and check
//!   by address that no buffer is ever out twice, that contents survive, and that the bound
//!   holds; the whole suite runs once more without `membarrier` (`TIERPOOL_NO_MEMBARRIER=1`)
//!   to check the fallback.
//!
//! # Performance
//!
//! The repository's `BENCHMARKS.md` has every measured figure, each with the command that
//! produced it, from the comparison report (`cargo run --release -p tierpool-bench`). `.ci/run`
//! fails if a tierpool get+put at 4 KiB or 16 MiB, with or without a budget, costs more than 64
//! instructions (callgrind on `examples/hot_loop.rs`, whose loop is the report's; one figure:
//! `cargo run --release -p tierpool-bench -- --count tierpool 4096`).

// The names the docs above link to.
#[allow(unused_imports)]
#[cfg(feature = "tokio")]
use crate::io::frame;
#[allow(unused_imports)]
#[cfg(target_os = "linux")]
use crate::{direct_io_alignment, DirectIoError};
#[allow(unused_imports)]
use crate::{
    AlignedBuf, AlignedPool, AllocError, BudgetStats, BufferPool, Builder, PooledBuf, PooledBytes,
    PooledChain, Stats,
};
