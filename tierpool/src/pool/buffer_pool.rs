//! [`BufferPool`], the handle users hold, written once for both kinds of pool ([`Kind`]):
//! plain (`BufferPool`) and aligned ([`AlignedPool`]). The state behind it is `PoolState`
//! (`engine/state.rs`); its gets go through this thread's cache (`engine/cache/`), and what
//! the fast path cannot serve through `acquire.rs`.

use std::fmt;
use std::time::Duration;

use crate::base::key::Tag;
use crate::engine::config::Config;
use crate::engine::error::{AllocError, ConfigError};
use crate::engine::ops::{self, Fresh};
use crate::observe::stats::Stats;
use crate::pool::acquire::Acquire;
use crate::pool::handle::{PoolRef, Wait};
use crate::pool::kind::{Aligned, Kind, Plain};
// check_layers: allow pool::builder (a pool and its builder name each other)
use crate::pool::builder::Builder;

/// A size-tiered pool of byte buffers, shared across threads.
///
/// `BufferPool` is a cheap handle: cloning it clones an `Arc`, and every clone serves the same
/// buffers. It is `Send + Sync`. Several pools can live in one process (one per component or
/// connection) without slowing each other down: each thread keeps a separate cache per pool.
/// When the last handle is dropped, the pool's depot is freed at once and buffers still out are
/// freed when they are dropped.
///
/// Its [`Kind`] says what it hands out: [`PooledBuf`](crate::PooledBuf)s (the default, [`Plain`]), or for
/// direct I/O aligned [`AlignedBuf`](crate::AlignedBuf)s ([`AlignedPool`], made by
/// [`Builder::build_aligned`]). Everything else is the same for both.
///
/// ```
/// use tierpool::BufferPool;
///
/// let pool = BufferPool::new();
/// let mut buf = pool.get(5000);           // len 0, capacity >= 5000
/// assert!(buf.capacity() >= 5000);
/// buf.extend_from_slice(b"hello");
/// let worker = {
///     let pool = pool.clone();
///     std::thread::spawn(move || {
///         drop(buf);                      // returned to the pool from another thread
///         pool.stats().returned
///     })
/// };
/// assert_eq!(worker.join().unwrap(), 1);
/// ```
#[derive(Clone)]
pub struct BufferPool<K: Kind = Plain> {
    pub(crate) core: PoolRef,
    pub(crate) kind: K,
}

/// A pool of buffers whose start address and capacity are multiples of an alignment (512 B
/// or 4 KiB for direct I/O, up to [`Builder::MAX_ALIGNMENT`]), with the same thread caches,
/// shared depot, cap, decay, budget and statistics as any [`BufferPool`]: its gets give
/// [`AlignedBuf`](crate::AlignedBuf)s.
///
/// Made by [`AlignedPool::with_alignment`] or, to configure it,
/// [`Builder::build_aligned`]. [`direct_io_alignment`](crate::direct_io_alignment) tells
/// the alignment a file needs.
///
/// ```
/// let pool = tierpool::AlignedPool::with_alignment(4096)?;
/// let mut block = pool.get(10_000);
/// assert_eq!(block.as_ptr() as usize % 4096, 0);
/// assert_eq!(block.capacity(), 12_288); // a multiple of 4096, at least what was asked
/// block.resize(block.capacity(), 0); // e.g. for `FileExt::read_exact_at`
/// assert_eq!(pool.tier_sizes()[..3], [4096, 8192, 12_288]);
/// # Ok::<(), tierpool::ConfigError>(())
/// ```
pub type AlignedPool = BufferPool<Aligned>;

impl BufferPool {
    /// A new pool with the default configuration (a private pool; for the process-wide one,
    /// see [`default_pool`](crate::default_pool)): 56 tiers, four classes per doubling from
    /// 256 B to 2 MiB (256, 320, 384, 448, 512, 640, ..., 1 MiB, 1.25 MiB, ..., 2 MiB; at most
    /// 20% of a buffer is slack) and powers of two above it (4, 8, 16 MiB), a 64 MiB cap on
    /// what the depot and all thread caches retain together, 8 MiB per thread cache, and a
    /// 1 s decay interval.
    ///
    /// Above 2 MiB the cap holds only a few buffers of each tier, and each tier more is one
    /// more buffer a load of varied sizes needs kept to hit
    /// ([`Builder::DEFAULT_FINE_TIERS_UP_TO`]); a load of large buffers of a few known sizes
    /// names them ([`Builder::tiers`]).
    ///
    /// ```
    /// let pool = tierpool::BufferPool::new();
    /// // A 1 MiB message plus a 5-byte header does not jump to 2 MiB.
    /// assert_eq!(pool.get((1 << 20) + 5).capacity(), 1_310_720);
    /// // Above 2 MiB, the tiers are powers of two.
    /// assert_eq!(pool.get((2 << 20) + 5).capacity(), 4 << 20);
    /// assert_eq!(pool.tier_sizes().len(), 56);
    /// ```
    pub fn new() -> Self {
        Builder::new()
            .build()
            .expect("the default configuration is valid")
    }

    /// A [`Builder`] to configure tiers, caps and decay.
    pub fn builder() -> Builder {
        Builder::new()
    }

    pub(crate) fn from_config(config: Config) -> Self {
        BufferPool {
            core: PoolRef::new(config),
            kind: Plain,
        }
    }

    /// Adopts any `Vec<u8>`, from this pool or not: it is filed under the largest tier whose
    /// size is `<=` its capacity, or released if it fits no tier or the pool is at its cap.
    /// Its contents are discarded.
    ///
    /// ```
    /// let pool = tierpool::BufferPool::builder().tiers([1024, 4096]).build()?;
    /// pool.put(Vec::with_capacity(3000)); // kept in the 1024 tier
    /// let b = pool.get(1000);
    /// assert_eq!(b.capacity(), 3000); // never smaller than asked
    /// # Ok::<(), tierpool::ConfigError>(())
    /// ```
    #[inline]
    pub fn put(&self, buf: Vec<u8>) {
        ops::put(self.core.key, Tag::NONE, buf);
    }
}

impl AlignedPool {
    /// A new pool of buffers aligned to `align`, with the default configuration (tiers
    /// rounded to the alignment; see [`Builder::build_aligned`]).
    ///
    /// # Errors
    /// [`ConfigError::InvalidAlignment`] if `align` is not a power of two from 1 to
    /// [`Builder::MAX_ALIGNMENT`].
    pub fn with_alignment(align: usize) -> Result<AlignedPool, ConfigError> {
        Builder::new().build_aligned(align)
    }

    pub(crate) fn from_config_aligned(config: Config, kind: Aligned) -> Self {
        BufferPool {
            core: PoolRef::new(config),
            kind,
        }
    }

    /// The alignment of every buffer's start and capacity.
    pub fn alignment(&self) -> usize {
        self.kind.align()
    }
}

impl<K: Kind> BufferPool<K> {
    /// A buffer with `len() == 0` and `capacity() >= n`, from the smallest tier that fits `n`
    /// (a fresh buffer has exactly that tier's capacity). When that tier has no buffer
    /// retained, a retained one of a larger tier up to twice its size is lent instead of
    /// allocating (it goes back to its own tier when dropped); not in a pool with a budget,
    /// nor in an aligned pool. Above the largest tier, a buffer of capacity exactly `n` from
    /// the heap (an aligned pool's: `n` rounded up to the alignment), not kept when dropped.
    /// `get(0)` serves the smallest tier. An aligned pool's buffer starts at a multiple of the
    /// alignment, and its capacity is one.
    ///
    /// With a budget on bytes in use ([`Builder::max_in_use_bytes`]), waits (blocking the
    /// thread, like a bounded channel's `send`) until the buffer fits the budget; waiters are
    /// served in order. In async code use [`acquire`](Self::acquire) instead, which waits
    /// without blocking the thread.
    ///
    /// # Panics
    /// Like `Vec::with_capacity`: if `n` is above `isize::MAX` (and the allocation aborts the
    /// process if memory is exhausted). With a budget, if the buffer's charge is larger than
    /// the whole budget (it could never be served). Use [`try_get`](Self::try_get) or
    /// [`get_timeout`](Self::get_timeout) to get an error instead.
    ///
    /// ```
    /// let pool = tierpool::BufferPool::builder().tiers([1024, 4096]).build()?;
    /// assert_eq!(pool.get(1000).capacity(), 1024);
    /// assert_eq!(pool.get(1025).capacity(), 4096);
    /// assert_eq!(pool.get(5000).capacity(), 5000); // oversize: exact, not kept
    /// # Ok::<(), tierpool::ConfigError>(())
    /// ```
    #[must_use = "the buffer goes straight back to the pool if unused"]
    #[inline(always)]
    #[cfg_attr(feature = "holders", track_caller)]
    pub fn get(&self, n: usize) -> K::Buf {
        self.get_as(n, Fresh::Infallible)
    }

    /// [`get`](Self::get) with fresh buffers made as `how` says (`Plain`, or `PlainExact`).
    #[inline(always)]
    #[cfg_attr(feature = "holders", track_caller)]
    fn get_as(&self, n: usize, how: Fresh) -> K::Buf {
        self.kind.wrap(self.core.obtain_or_panic(n, how))
    }

    /// Like [`get`](Self::get), but never waits and never panics: an impossible size, an
    /// allocator failure or (with a budget) no room in the budget now is an error.
    ///
    /// # Errors
    /// [`AllocError::CapacityOverflow`] above `isize::MAX` (for an aligned pool, when the size
    /// rounded up to the alignment is), [`AllocError::AllocFailed`] when the
    /// allocator refuses; with a budget, [`AllocError::OverBudget`] (with how much is in use)
    /// when the buffer does not fit now, and [`AllocError::LargerThanBudget`] when it never
    /// can.
    ///
    /// ```
    /// let pool = tierpool::BufferPool::new();
    /// assert!(pool.try_get(4096).is_ok());
    /// assert!(pool.try_get(usize::MAX).is_err());
    ///
    /// let bounded = tierpool::BufferPool::builder().max_in_use_bytes(1 << 20).build()?;
    /// let held = bounded.get(1 << 20);
    /// match bounded.try_get(4096) {
    ///     Err(tierpool::AllocError::OverBudget { requested, in_use, limit }) => {
    ///         assert_eq!((requested, in_use, limit), (4096, 1 << 20, 1 << 20));
    ///     }
    ///     other => panic!("{other:?}"),
    /// }
    /// # Ok::<(), tierpool::ConfigError>(())
    /// ```
    #[must_use = "the buffer goes straight back to the pool if unused"]
    #[inline]
    #[cfg_attr(feature = "holders", track_caller)]
    pub fn try_get(&self, n: usize) -> Result<K::Buf, AllocError> {
        self.obtain(n, Fresh::Fallible, Wait::Never)
    }

    /// [`try_get`](Self::try_get), served by the size's own tier only: the buffer's capacity
    /// is exactly [`capacity_for(n)`](Self::capacity_for), never a larger tier's buffer lent.
    /// What a reader or writer that bounds the memory it holds asks for: its bounds are counted
    /// in the capacities it asked for ("Building a protocol crate" in the crate docs).
    ///
    /// # Errors
    /// As [`try_get`](Self::try_get).
    ///
    /// ```
    /// let pool = tierpool::BufferPool::builder().tiers([1024, 2048]).build()?;
    /// let buf = pool.try_get_exact(1000)?;
    /// assert_eq!(buf.capacity(), pool.capacity_for(1000)); // 1024, whatever is retained
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "the buffer goes straight back to the pool if unused"]
    #[cfg_attr(feature = "holders", track_caller)]
    pub fn try_get_exact(&self, n: usize) -> Result<K::Buf, AllocError> {
        self.obtain(n, Fresh::FallibleExact, Wait::Never)
    }

    /// [`get`](Self::get), served by the size's own tier only (as
    /// [`try_get_exact`](Self::try_get_exact)). With a budget it blocks the thread while it
    /// waits, as `get` does: in a `poll` function use [`PollAcquire`](crate::PollAcquire).
    ///
    /// # Panics
    /// As [`get`](Self::get).
    #[must_use = "the buffer goes straight back to the pool if unused"]
    #[cfg_attr(feature = "holders", track_caller)]
    pub fn get_exact(&self, n: usize) -> K::Buf {
        self.get_as(n, Fresh::InfallibleExact)
    }

    /// Like [`get`](Self::get), but waits at most `timeout` for room in the budget, and
    /// reports failures as errors. Without a budget it never waits (it is then
    /// [`try_get`](Self::try_get)).
    ///
    /// # Errors
    /// As [`try_get`](Self::try_get), with [`AllocError::TimedOut`] instead of `OverBudget`.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let pool = tierpool::BufferPool::builder().max_in_use_bytes(1 << 20).build()?;
    /// let held = pool.get(1 << 20);
    /// let err = pool.get_timeout(4096, Duration::from_millis(10)).unwrap_err();
    /// assert!(matches!(err, tierpool::AllocError::TimedOut { .. }));
    /// std::thread::scope(|s| {
    ///     s.spawn(|| {
    ///         std::thread::sleep(Duration::from_millis(10));
    ///         drop(held); // frees the budget: the waiting get below is served
    ///     });
    ///     assert!(pool.get_timeout(4096, Duration::from_secs(10)).is_ok());
    /// });
    /// # Ok::<(), tierpool::ConfigError>(())
    /// ```
    #[must_use = "the buffer goes straight back to the pool if unused"]
    #[cfg_attr(feature = "holders", track_caller)]
    pub fn get_timeout(&self, n: usize, timeout: Duration) -> Result<K::Buf, AllocError> {
        self.obtain(n, Fresh::Fallible, Wait::For(Some(timeout)))
    }

    /// [`try_get`](Self::try_get) and [`get_timeout`](Self::get_timeout): the size asked of
    /// the machinery, the get, the handle, and errors that name the size the caller asked.
    #[inline(always)]
    #[cfg_attr(feature = "holders", track_caller)]
    fn obtain(&self, n: usize, how: Fresh, wait: Wait) -> Result<K::Buf, AllocError> {
        self.core.obtain(n, how, wait).map(|b| self.kind.wrap(b))
    }

    /// A future that resolves to a buffer for `n` bytes once it fits the budget on bytes in
    /// use ([`Builder::max_in_use_bytes`]); without a budget it is ready at once. It works
    /// with any async runtime (it only uses the task's waker).
    ///
    /// Waiters are served in order (a large request is not overtaken by a stream of small
    /// ones). Cancel-safe: dropping the future before it resolves gives back whatever it had
    /// gathered, and the next waiter is served.
    ///
    /// # Errors
    /// As [`try_get`](Self::try_get), except that it waits instead of returning
    /// `OverBudget`; [`AllocError::LargerThanBudget`] at once for a buffer that can never fit.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let pool = tierpool::BufferPool::builder().max_in_use_bytes(1 << 20).build()?;
    /// let held = pool.acquire(1 << 20).await?;
    /// let waiting = pool.acquire(4096);            // no room yet
    /// tokio::spawn(async move { drop(held) });      // returned elsewhere: the waiter wakes
    /// let buf = waiting.await?;
    /// assert!(buf.capacity() >= 4096);
    /// # Ok(()) }
    /// ```
    #[cfg_attr(feature = "holders", track_caller)]
    pub fn acquire(&self, n: usize) -> Acquire<'_, K> {
        Acquire::new(&self.core, &self.kind, n)
    }

    /// [`acquire`](Self::acquire), as a `'static` future that holds a handle to the pool
    /// (like tokio's `Semaphore::acquire_owned`): for code that keeps the wait in a struct of
    /// its own, such as a `Stream` or a `poll` function, or spawns it.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let pool = tierpool::BufferPool::builder().max_in_use_bytes(1 << 20).build()?;
    /// let waiting = tokio::spawn(pool.acquire_owned(4096)); // 'static: can be spawned
    /// assert!(waiting.await??.capacity() >= 4096);
    /// # Ok(()) }
    /// ```
    #[cfg_attr(feature = "holders", track_caller)]
    pub fn acquire_owned(&self, n: usize) -> Acquire<'static, K> {
        Acquire::new_owned(self.core.clone(), self.kind.clone(), n)
    }

    /// A buffer with `len() == n`, all zeros. Fresh buffers come zeroed from the allocator
    /// (`calloc`, which is free for pages fresh from the OS); reused ones are zeroed up to `n`.
    /// With a budget, waits like [`get`](Self::get).
    ///
    /// # Panics
    /// Like [`get`](Self::get).
    ///
    /// ```
    /// let pool = tierpool::BufferPool::new();
    /// let z = pool.get_zeroed(100);
    /// assert_eq!(&z[..], &[0u8; 100][..]);
    /// ```
    #[must_use = "the buffer goes straight back to the pool if unused"]
    #[inline]
    #[cfg_attr(feature = "holders", track_caller)]
    pub fn get_zeroed(&self, n: usize) -> K::Buf {
        self.kind.wrap(self.core.obtain_or_panic(n, Fresh::Zeroed))
    }

    /// The buffers handed out and not yet returned, among those tracked
    /// ([`Builder::track_holders`]; feature `holders`), grouped by the call site of the get
    /// that took them, most bytes first: who holds the memory, and for how long. With a
    /// sample of one get in N, the counts are a sample.
    ///
    /// ```
    /// let pool = tierpool::BufferPool::builder().track_holders(1).build()?;
    /// let kept: Vec<_> = (0..3).map(|_| pool.get(4096)).collect(); let line = line!();
    /// drop(pool.get(100)); // returned: not listed
    /// let h = pool.holders(); // `kept`'s line holds three buffers
    /// assert_eq!(h.len(), 1);
    /// assert_eq!((h[0].buffers, h[0].bytes, h[0].location.line()), (3, 3 * 4096, line));
    /// # drop(kept);
    /// # Ok::<(), tierpool::ConfigError>(())
    /// ```
    #[cfg(feature = "holders")]
    #[cfg_attr(docsrs, doc(cfg(feature = "holders")))]
    pub fn holders(&self) -> Vec<crate::Holder> {
        self.core.state().holders().holders()
    }

    /// A snapshot of the pool's counters. See [`Stats`] for what is exact when.
    #[must_use]
    pub fn stats(&self) -> Stats {
        self.core.state().stats()
    }

    /// Releases retained memory now: everything in the shared depot and in every thread's
    /// cache, idle threads' included (each is reclaimed: see
    /// [`implementation`](crate::implementation), *How it works*), and returns how many bytes
    /// that was. A thread in the middle of an operation on its cache is waited for (one get
    /// or return); no thread is interrupted. Where caches cannot be reclaimed (no Linux
    /// `membarrier`), only the calling thread's cache and the depot are released now, and
    /// every other cache at its owner's next operation.
    ///
    /// ```
    /// use std::sync::mpsc::channel;
    ///
    /// let pool = tierpool::BufferPool::new();
    /// drop(pool.get(4096)); // kept in this thread's cache
    /// let (idle, wake) = (channel(), channel::<()>());
    /// let other = {
    ///     let pool = pool.clone();
    ///     std::thread::spawn(move || {
    ///         drop(pool.get(8192)); // kept in that thread's cache
    ///         idle.0.send(()).unwrap();
    ///         wake.1.recv().unwrap(); // idle: never touches the pool again
    ///     })
    /// };
    /// idle.1.recv().unwrap();
    /// # if tierpool::__bench::reclaims_other_threads() {
    /// assert_eq!(pool.trim(), 4096 + 8192); // both caches, the idle thread's too
    /// assert_eq!(pool.stats().retained_bytes, 0);
    /// # }
    /// wake.0.send(()).unwrap();
    /// other.join().unwrap();
    /// ```
    pub fn trim(&self) -> usize {
        ops::trim(self.core.key, self.core.state())
    }

    /// The tier sizes, ascending (an aligned pool's: each a multiple of the alignment).
    pub fn tier_sizes(&self) -> &[usize] {
        self.core.state().tier_sizes()
    }

    /// The capacity a get of `n` bytes gives when it takes a fresh buffer, and what
    /// [`get_exact`](Self::get_exact) always gives: the smallest tier that holds `n`, or, above
    /// the largest tier, `n` (an aligned pool's: `n` rounded up to its alignment).
    ///
    /// ```
    /// let pool = tierpool::BufferPool::builder().tiers([1024, 4096]).build()?;
    /// assert_eq!(pool.capacity_for(0), 1024);
    /// assert_eq!(pool.capacity_for(1025), 4096);
    /// assert_eq!(pool.capacity_for(5000), 5000);
    /// # Ok::<(), tierpool::ConfigError>(())
    /// ```
    pub fn capacity_for(&self, n: usize) -> usize {
        let tiers = self.tier_sizes();
        match tiers.get(tiers.partition_point(|&t| t < n)) {
            Some(&t) => t,
            None => self.kind.oversize_capacity(n),
        }
    }

    /// The largest capacity from `lo` to `hi` bytes that [`get_exact`](Self::get_exact) serves:
    /// the largest tier in that range, or, when `lo` is above the largest tier, `hi` (an
    /// aligned pool's: rounded down to its alignment, if that still holds `lo`); `None` if no
    /// capacity lies in the range. What a buffer that must hold `lo` bytes and should hold at
    /// most `hi` is asked for: growing a read buffer (`hi` twice `lo`) or shrinking one to a
    /// bound.
    ///
    /// ```
    /// let pool = tierpool::BufferPool::builder().tiers([1024, 2048, 4096]).build()?;
    /// assert_eq!(pool.capacity_within(1500, 3000), Some(2048));
    /// assert_eq!(pool.capacity_within(2500, 3000), None);
    /// assert_eq!(pool.capacity_within(5000, 10000), Some(10000));
    /// # Ok::<(), tierpool::ConfigError>(())
    /// ```
    pub fn capacity_within(&self, lo: usize, hi: usize) -> Option<usize> {
        let tiers = self.tier_sizes();
        let largest = *tiers.last()?;
        if lo > largest {
            let c = self.kind.oversize_floor(hi);
            return (c >= lo).then_some(c);
        }
        let i = tiers.partition_point(|&t| t <= hi);
        let t = *tiers.get(i.checked_sub(1)?)?;
        (t >= lo).then_some(t)
    }

    /// The pool's name ([`Builder::name`]; `pool-1`, `pool-2`, ... for unnamed pools).
    pub fn name(&self) -> &str {
        self.core.state().name()
    }

    /// Publishes the pool's figures to the [`metrics`](https://docs.rs/metrics) facade now
    /// (feature `metrics`; the names and labels are listed in [`implementation`](crate::implementation), *Metrics*). The pool also
    /// publishes them at each tick, once per decay interval while it is used or with
    /// [`Builder::background_trim`]; call this for a pool used rarely, or before a scrape.
    ///
    /// ```
    /// let pool = tierpool::BufferPool::builder().name("rx").build()?;
    /// drop(pool.get(4096));
    /// pool.publish_metrics(); // e.g. tierpool_gets_total{pool="rx",result="miss"} 1
    /// # Ok::<(), tierpool::ConfigError>(())
    /// ```
    #[cfg(feature = "metrics")]
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub fn publish_metrics(&self) {
        self.core.state().publish_metrics();
    }

    /// The cap on the bytes the pool retains: the depot and every thread cache together (see
    /// [`Builder::max_retained_bytes`]).
    pub fn max_retained_bytes(&self) -> usize {
        self.core.state().max_retained_bytes()
    }

    /// The most each thread's cache for this pool may hold (under a budget on bytes in use,
    /// caches hold at most `min(thread_cache_bytes, max_in_use_bytes / 16)`). Whatever the
    /// number of threads, the depot and all thread caches together retain at most
    /// [`max_retained_bytes`](Self::max_retained_bytes).
    pub fn thread_cache_bytes(&self) -> usize {
        self.core.state().thread_cache_bytes()
    }

    /// The budget on bytes in use ([`Builder::max_in_use_bytes`]), if the pool has one.
    pub fn max_in_use_bytes(&self) -> Option<usize> {
        self.core.state().budget().map(|b| b.limit())
    }

    /// True if both handles refer to the same pool.
    pub fn same_pool(&self, other: &BufferPool<K>) -> bool {
        self.core.key == other.core.key
    }
}

impl Default for BufferPool {
    /// A **new, private** pool with the default configuration, like [`BufferPool::new`]. For the
    /// process-wide shared pool, use [`default_pool`](crate::default_pool).
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Kind> fmt::Debug for BufferPool<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.core.state();
        let tiers = s.tier_sizes();
        f.debug_struct("BufferPool")
            .field("name", &s.name())
            .field("key", &self.core.key)
            .field("kind", &self.kind)
            .field("tiers", &tiers.len())
            .field("smallest", &tiers[0])
            .field("largest", &tiers[tiers.len() - 1])
            .field("max_retained_bytes", &s.max_retained_bytes())
            .field("thread_cache_bytes", &s.thread_cache_bytes())
            .field("depot_bytes", &s.depot_bytes())
            .finish()
    }
}
