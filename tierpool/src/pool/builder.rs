//! [`Builder`]: configures and builds a [`BufferPool`] or an [`AlignedPool`]. What it collects,
//! and how that is validated, is the engine's (`engine/config.rs`).

use std::time::Duration;

use crate::engine::config::{self, Settings, TierSpec, MAX_ALIGNMENT, MAX_BUDGET, MAX_TIERS};
use crate::engine::error::ConfigError;
use crate::pool::buffer_pool::{AlignedPool, BufferPool};
use crate::pool::kind::Aligned;
use crate::sys::trim::TrimAllocator;

/// Configures and builds a [`BufferPool`].
///
/// Every setting has a documented default; [`build`](Builder::build) validates the whole
/// configuration and names the first offending value in a [`ConfigError`].
///
/// ```
/// use std::time::Duration;
/// use tierpool::BufferPool;
///
/// let pool = BufferPool::builder()
///     .tiers([1024, 2048, 4096, 8192, 15000]) // any order; duplicates merged
///     .max_retained_bytes(64 << 20)
///     .thread_cache_bytes(1 << 20)
///     .decay_interval(Duration::from_millis(500))
///     .build()?;
/// assert_eq!(pool.tier_sizes(), &[1024, 2048, 4096, 8192, 15000]);
/// # Ok::<(), tierpool::ConfigError>(())
/// ```
#[derive(Debug, Clone, Default)]
#[must_use = "a builder does nothing until build() is called"]
pub struct Builder {
    s: Settings,
}

impl Builder {
    /// The smallest tier of the default configuration: 256 B.
    pub const DEFAULT_MIN_TIER: usize = config::DEFAULT_MIN_TIER;
    /// The largest tier of the default configuration: 16 MiB.
    pub const DEFAULT_MAX_TIER: usize = config::DEFAULT_MAX_TIER;
    /// Classes per doubling in the default configuration up to
    /// [`DEFAULT_FINE_TIERS_UP_TO`](Self::DEFAULT_FINE_TIERS_UP_TO): 4 (256, 320, 384, 448,
    /// 512, 640, ...).
    pub const DEFAULT_STEPS_PER_DOUBLING: usize = config::DEFAULT_STEPS_PER_DOUBLING;
    /// The size up to which the default tiers are
    /// [`DEFAULT_STEPS_PER_DOUBLING`](Self::DEFAULT_STEPS_PER_DOUBLING) per doubling: 2 MiB.
    /// Above it they are powers of two (4, 8 and 16 MiB), 56 tiers in all.
    ///
    /// Fine classes bound the space a buffer wastes (20% at most) where the cap holds many
    /// buffers of each tier. Above 2 MiB it holds a few, and every tier more is one more buffer
    /// a load of varied sizes needs kept to hit: with four per doubling all the way (65 tiers),
    /// one buffer of each tier from 2 to 16 MiB was 93 MiB against the 64 MiB default cap, and
    /// a load of sizes spread over them made fresh buffers of several MiB as the large tiers
    /// evicted one another. A load of large buffers of a few known sizes names them
    /// ([`tiers`](Self::tiers)) or asks for finer ones
    /// ([`geometric_tiers`](Self::geometric_tiers)).
    ///
    /// ```
    /// use tierpool::{BufferPool, Builder};
    ///
    /// let pool = BufferPool::new();
    /// let large: Vec<usize> = pool
    ///     .tier_sizes()
    ///     .iter()
    ///     .copied()
    ///     .filter(|&t| t >= Builder::DEFAULT_FINE_TIERS_UP_TO)
    ///     .collect();
    /// assert_eq!(large, [2 << 20, 4 << 20, 8 << 20, 16 << 20]);
    /// ```
    pub const DEFAULT_FINE_TIERS_UP_TO: usize = config::DEFAULT_FINE_TIERS_UP_TO;
    /// The default cap on what the pool retains, depot and thread caches together: 64 MiB.
    pub const DEFAULT_MAX_RETAINED_BYTES: usize = config::DEFAULT_MAX_RETAINED_BYTES;
    /// The default most each thread's cache may hold, per pool, where caches can be
    /// reclaimed from other threads (an asymmetric fence: Linux `membarrier`, Windows
    /// `FlushProcessWriteBuffers`): 8 MiB, or a quarter of the cap if that is less. Large
    /// because it can be: every cache's room counts against
    /// `max_retained_bytes`, so it does not multiply with the number of threads.
    pub const DEFAULT_THREAD_CACHE_BYTES: usize = config::DEFAULT_THREAD_CACHE_BYTES;
    /// The default most each thread's cache may hold where caches cannot be reclaimed (no
    /// asymmetric fence: macOS, Linux kernels without `membarrier`): 2 MiB. Their room then
    /// counts apart from `max_retained_bytes`, as a per-thread bound, so it is kept small.
    pub const FALLBACK_THREAD_CACHE_BYTES: usize = config::FALLBACK_THREAD_CACHE_BYTES;
    /// The default decay interval: a buffer idle this long becomes eligible for release (1 s).
    pub const DEFAULT_DECAY_INTERVAL: Duration = config::DEFAULT_DECAY_INTERVAL;
    /// The most tiers a pool can have: 4096.
    pub const MAX_TIERS: usize = MAX_TIERS;
    /// The largest budget on bytes in use ([`max_in_use_bytes`](Self::max_in_use_bytes)).
    pub const MAX_IN_USE_BYTES: usize = MAX_BUDGET;
    /// The largest alignment an [`AlignedPool`] takes: 2 MiB (a huge page).
    pub const MAX_ALIGNMENT: usize = MAX_ALIGNMENT;

    /// A builder with the default configuration (see [`BufferPool::new`](crate::BufferPool::new)).
    pub fn new() -> Self {
        Self::default()
    }

    /// Uses exactly these tier sizes, in any order; duplicates are merged.
    ///
    /// Lookup stays O(1) for any sizes; sizes with at most five significant bits (powers of two
    /// and their quarter/eighth/sixteenth steps) need a single comparison.
    pub fn tiers<I: IntoIterator<Item = usize>>(mut self, sizes: I) -> Self {
        self.s.tiers = TierSpec::Explicit(sizes.into_iter().collect());
        self
    }

    /// Power-of-two tiers: every power of two in `[min, max]`, plus `min` and `max`.
    ///
    /// ```
    /// let pool = tierpool::BufferPool::builder().power_of_two_tiers(256, 4096).build()?;
    /// assert_eq!(pool.tier_sizes(), &[256, 512, 1024, 2048, 4096]);
    /// # Ok::<(), tierpool::ConfigError>(())
    /// ```
    pub fn power_of_two_tiers(self, min: usize, max: usize) -> Self {
        self.geometric_tiers(min, max, 1)
    }

    /// Geometric tiers with `steps_per_doubling` classes between consecutive powers of two
    /// (1, 2, 4, 8 or 16), plus `min` and `max`. Four steps bound the space a buffer can waste
    /// to 20% of its capacity (jemalloc's spacing); one step is plain powers of two.
    ///
    /// ```
    /// let pool = tierpool::BufferPool::builder()
    ///     .geometric_tiers(1 << 20, 2 << 20, 4)
    ///     .build()?;
    /// assert_eq!(
    ///     pool.tier_sizes(),
    ///     &[1 << 20, 1_310_720, 1_572_864, 1_835_008, 2 << 20] // 1, 1.25, 1.5, 1.75, 2 MiB
    /// );
    /// # Ok::<(), tierpool::ConfigError>(())
    /// ```
    pub fn geometric_tiers(mut self, min: usize, max: usize, steps_per_doubling: usize) -> Self {
        self.s.tiers = TierSpec::Geometric {
            min,
            max,
            steps: steps_per_doubling,
        };
        self
    }

    /// Caps the bytes (sum of capacities) the pool retains: in its shared depot and in every
    /// thread's cache together, however many threads use it. A thread cache reserves the room
    /// it may fill from this same allowance (at most
    /// [`thread_cache_bytes`](Self::thread_cache_bytes) each, plus one buffer of a larger
    /// tier), so a thread that finds it spent works with what it has, and takes room from
    /// caches whose threads went quiet. Default 64 MiB. (Where caches cannot be reclaimed
    /// from other threads, the bound is larger: see
    /// [`thread_cache_bytes`](Self::thread_cache_bytes).)
    ///
    /// ```
    /// let pool = tierpool::BufferPool::builder().max_retained_bytes(1 << 20).build()?;
    /// let (done, go_on) = (std::sync::Barrier::new(9), std::sync::Barrier::new(9));
    /// let retained = std::thread::scope(|s| {
    ///     for _ in 0..8 {
    ///         s.spawn(|| {
    ///             let held: Vec<_> = (0..16).map(|_| pool.get(64 << 10)).collect();
    ///             drop(held); // 1 MiB per thread handed back, kept in its cache if it may
    ///             done.wait();
    ///             go_on.wait();
    ///         });
    ///     }
    ///     done.wait(); // eight threads alive, each with its cache
    ///     let retained = pool.stats().retained_bytes;
    ///     go_on.wait();
    ///     retained
    /// });
    /// # if tierpool::__bench::reclaims_other_threads() {
    /// assert!(retained <= 1 << 20); // all of them together
    /// # }
    /// # Ok::<(), tierpool::ConfigError>(())
    /// ```
    pub fn max_retained_bytes(mut self, bytes: usize) -> Self {
        self.s.max_retained_bytes = bytes;
        self
    }

    /// The most each thread's private cache for this pool may hold, in bytes of capacity (it
    /// holds less while the pool's allowance is spent: see
    /// [`max_retained_bytes`](Self::max_retained_bytes)). A cache may also keep one buffer of a
    /// tier larger than this (under [`max_in_use_bytes`](Self::max_in_use_bytes), of at most a
    /// sixteenth of the budget); other buffers of such tiers go to the shared depot. Default:
    /// 8 MiB ([`DEFAULT_THREAD_CACHE_BYTES`](Self::DEFAULT_THREAD_CACHE_BYTES); 2 MiB, [`FALLBACK_THREAD_CACHE_BYTES`](Self::FALLBACK_THREAD_CACHE_BYTES), where
    /// caches cannot be reclaimed from other threads), or a quarter of `max_retained_bytes` if
    /// that is smaller. Zero disables the thread caches (every operation then takes the depot's
    /// lock).
    ///
    /// Where caches cannot be reclaimed (no asymmetric fence: macOS, Linux without `membarrier`), their room does not count
    /// against `max_retained_bytes` (an idle thread would keep it for good), and the bound is
    /// `max_retained_bytes + threads * (thread_cache_bytes + largest tier)`.
    pub fn thread_cache_bytes(mut self, bytes: usize) -> Self {
        self.s.thread_cache_bytes = Some(bytes);
        self
    }

    /// How long a retained buffer may stay unused before it becomes eligible for release.
    /// Buffers idle for a whole interval are released at the next interval boundary, so after a
    /// burst retained memory falls back within about two intervals. Default 1 s.
    pub fn decay_interval(mut self, interval: Duration) -> Self {
        self.s.decay_interval = interval;
        self
    }

    /// Starts a background thread that ticks the pool every interval: the depot's decay, and
    /// reclaiming every thread cache that was not used for an interval. Without it the pool
    /// ticks when a thread using it looks at the clock (every 256 returns to a tier of its
    /// cache, down to every 8 for a thread whose returns are far apart in time, or every 16
    /// slow operations), so a pool that is used rarely, or not at all, gives back what it
    /// holds late or never; with it, within about two intervals, whatever the rest of
    /// the program does. The thread holds only a weak reference and exits when the pool is
    /// dropped. Default off.
    pub fn background_trim(mut self, enabled: bool) -> Self {
        self.s.background_trim = enabled;
        self
    }

    /// Overwrites every returned buffer's whole capacity with zeros before it is kept or
    /// released, for pools that carry secrets. Default off.
    pub fn zero_on_return(mut self, enabled: bool) -> Self {
        self.s.zero_on_return = enabled;
        self
    }

    /// After releasing a megabyte or more (decay, [`trim`](crate::BufferPool::trim), buffers
    /// refused at the cap), ask the global allocator to give free pages back to the system,
    /// at most once per decay interval (and at once on an explicit `trim()`). `true` (the
    /// default) is glibc's `malloc_trim(0)` ([`TrimAllocator::Glibc`]), `false` asks nothing;
    /// jemalloc and mimalloc are asked with `TrimAllocator::Jemalloc` and
    /// `TrimAllocator::Mimalloc` (features `jemalloc`, `mimalloc`), any other allocator with
    /// [`TrimAllocator::Custom`].
    ///
    /// Why: glibc returns memory only from the top of its heap, so one long-lived buffer high
    /// in the heap keeps every freed chunk below it in the process; jemalloc keeps freed pages
    /// for ten seconds, mimalloc until their owning thread allocates again. Asked, the report's
    /// `burst` workload falls back near the RSS of plain `Vec` under glibc after a burst under
    /// each of them; not asked, it stays near its peak (see BENCHMARKS.md). The cost is one
    /// walk over the allocator's free memory, once per interval in which a megabyte was
    /// released, and page faults when the returned pages are used again. Turn it off if the
    /// program does this itself or tunes the allocator otherwise (`M_TRIM_THRESHOLD`,
    /// `dirty_decay_ms`, `mi_option_purge_delay`).
    ///
    /// ```
    /// let pool = tierpool::BufferPool::builder().trim_allocator(false).build()?;
    /// # let _ = pool;
    /// # Ok::<(), tierpool::ConfigError>(())
    /// ```
    pub fn trim_allocator(mut self, how: impl Into<TrimAllocator>) -> Self {
        self.s.trim_allocator = how.into();
        self
    }

    /// Names the pool: [`BufferPool::name`](crate::BufferPool::name), its `Debug` output, and
    /// the `pool` label of its metrics (feature `metrics`). Unnamed pools are `pool-1`,
    /// `pool-2`, ... in the order they were built; [`default_pool`](crate::default_pool) is
    /// `default`.
    ///
    /// ```
    /// let pool = tierpool::BufferPool::builder().name("rx").build()?;
    /// assert_eq!(pool.name(), "rx");
    /// # Ok::<(), tierpool::ConfigError>(())
    /// ```
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.s.name = Some(name.into());
        self
    }

    /// Remembers where buffers were taken (feature `holders`): one get in `every` on each
    /// thread is tracked (1: every get; 0, the default: none), and
    /// [`BufferPool::holders`](crate::BufferPool::holders) lists the outstanding tracked
    /// buffers by call site. A tracked buffer costs a lock on its get and on its return (the
    /// others nothing more; BENCHMARKS.md measures both).
    ///
    /// ```
    /// let pool = tierpool::BufferPool::builder().track_holders(1).build()?;
    /// let forgotten = pool.get(4096); let line = line!();
    /// let h = &pool.holders()[0];
    /// assert_eq!((h.buffers, h.bytes, h.location.line()), (1, 4096, line));
    /// # drop(forgotten);
    /// # Ok::<(), tierpool::ConfigError>(())
    /// ```
    #[cfg(feature = "holders")]
    #[cfg_attr(docsrs, doc(cfg(feature = "holders")))]
    pub fn track_holders(mut self, every: u32) -> Self {
        self.s.track_every = every;
        self
    }

    /// With holders tracked ([`track_holders`](Self::track_holders)) and a budget on bytes
    /// in use, a `get` or `get_timeout` that has waited `after` for the budget emits a
    /// `tracing` warning (target `tierpool::holders`) naming the call sites that hold the
    /// most tracked bytes, once per wait, and goes on waiting. Default 1 s; `None`: never.
    /// An `acquire(n).await` is polled only when woken, so its wait is reported by the
    /// pool's tick while it lasts (one warning per tick for all the async waits found
    /// overdue): the background trimmer's ([`background_trim`](Self::background_trim)), or
    /// another thread's use of the pool after an interval ends. Without either, an async
    /// wait is not reported (once it is served its holders have let go, so there would be
    /// nothing to name); the budget's statistics count it all the same. A tick can run on
    /// any thread that uses the pool, in the middle of a `get` or a drop: a `tracing`
    /// subscriber must not take buffers from the same budgeted pool (it would wait behind
    /// the waits it reports).
    #[cfg(feature = "holders")]
    #[cfg_attr(docsrs, doc(cfg(feature = "holders")))]
    pub fn report_waits_after(mut self, after: Option<Duration>) -> Self {
        self.s.report_waits_after = after;
        self
    }

    /// Caps the bytes **in use**: the total capacity of the buffers handed out and not yet
    /// returned never exceeds `bytes`. Off by default. See the crate docs, "Budgets and
    /// backpressure", for what each way of getting a buffer does when the budget is spent
    /// ([`get`](crate::BufferPool::get) waits, [`try_get`](crate::BufferPool::try_get) refuses,
    /// [`acquire`](crate::BufferPool::acquire) waits asynchronously,
    /// [`get_timeout`](crate::BufferPool::get_timeout) waits up to a timeout).
    ///
    /// A buffer is charged its tier's size, or above the largest tier its size rounded up to
    /// 4 KiB. With a budget the pool keeps only buffers of exactly a tier's size (a grown or
    /// adopted buffer of another capacity is freed when returned), so no buffer is handed out
    /// with more capacity than it was charged. Buffers a thread cache holds count as charged
    /// (so the fast path does no accounting): each thread cache holds at most
    /// `min(bytes / 16, thread_cache_bytes)` plus one buffer of a larger tier of at most
    /// `bytes / 16` (so that a thread cycling such buffers does not take a lock each time),
    /// and a request that would wait takes every
    /// cache's buffers back first, from busy and idle threads alike. Where caches cannot be
    /// reclaimed from other threads (no asymmetric fence), a budgeted pool uses no thread
    /// caches.
    ///
    /// ```
    /// let pool = tierpool::BufferPool::builder().max_in_use_bytes(64 << 10).build()?;
    /// let a = pool.get(32 << 10);
    /// let b = pool.get(32 << 10);
    /// assert!(pool.try_get(1).is_err()); // 64 KiB in use: the budget is spent
    /// drop(a);
    /// assert!(pool.try_get(1).is_ok());
    /// # Ok::<(), tierpool::ConfigError>(())
    /// ```
    pub fn max_in_use_bytes(mut self, bytes: usize) -> Self {
        self.s.max_in_use_bytes = Some(bytes);
        self
    }

    /// Validates the configuration and builds the pool.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the first invalid value: no tiers, a zero tier, a tier above
    /// `isize::MAX`, too many tiers, an invalid range or step count, a cap that cannot hold one
    /// buffer of the smallest tier, a thread cache larger than the cap, a zero interval, or a
    /// budget on bytes in use below the smallest tier or above
    /// [`MAX_IN_USE_BYTES`](Self::MAX_IN_USE_BYTES).
    pub fn build(self) -> Result<BufferPool, ConfigError> {
        Ok(BufferPool::from_config(self.validate()?))
    }

    /// The validated configuration (the engine's view of these settings).
    pub(crate) fn validate(self) -> Result<config::Config, ConfigError> {
        self.s.validate()
    }

    /// Validates the configuration and builds an [`AlignedPool`] whose buffers start at a
    /// multiple of `align` and whose capacities are multiples of it.
    ///
    /// Generated tiers (the default, [`power_of_two_tiers`](Builder::power_of_two_tiers),
    /// [`geometric_tiers`](Builder::geometric_tiers)) are rounded up to multiples of `align`;
    /// the default then runs from `max(256, align)` to 16 MiB. Explicit
    /// [`tiers`](Builder::tiers) must be multiples already. Every other setting means what it
    /// means for a [`BufferPool`]: a buffer of tier `t` is `t` bytes, allocated with the
    /// alignment (see [`AlignedPool`]).
    ///
    /// # Errors
    /// As [`build`](Builder::build), and [`ConfigError::InvalidAlignment`] for an alignment
    /// that is not a power of two or is above [`Builder::MAX_ALIGNMENT`](crate::Builder::MAX_ALIGNMENT),
    /// [`ConfigError::TierNotAligned`] for an explicit tier that is not a multiple of it.
    ///
    /// ```
    /// use tierpool::{BufferPool, ConfigError};
    ///
    /// let pool = BufferPool::builder()
    ///     .tiers([4096, 64 << 10, 1 << 20])
    ///     .max_retained_bytes(256 << 20)
    ///     .build_aligned(4096)?;
    /// assert_eq!(pool.get(5000).capacity(), 64 << 10);
    ///
    /// let err = BufferPool::builder().tiers([1000]).build_aligned(512).unwrap_err();
    /// assert_eq!(err, ConfigError::TierNotAligned { tier: 1000, align: 512 });
    /// let err = BufferPool::builder().build_aligned(1000).unwrap_err();
    /// assert_eq!(err, ConfigError::InvalidAlignment { align: 1000 });
    /// # Ok::<(), ConfigError>(())
    /// ```
    pub fn build_aligned(self, align: usize) -> Result<AlignedPool, ConfigError> {
        let settings = self.s.aligned_to(align)?;
        Ok(AlignedPool::from_config_aligned(
            settings.validate()?,
            Aligned::new(align),
        ))
    }
}
