//! Pool configuration: the [`Builder`] and its validated result.

use std::time::Duration;

use crate::engine::class::{self, Classes, MAX_ALIGNMENT, MAX_TIERS};
use crate::engine::error::ConfigError;
use crate::sys::trim::TrimAllocator;

/// Smallest tier of the default configuration.
pub const DEFAULT_MIN_TIER: usize = 256;
/// Largest tier of the default configuration (16 MiB).
pub const DEFAULT_MAX_TIER: usize = 16 << 20;
/// Classes per doubling in the default configuration (256, 320, 384, 448, 512, 640, ...).
pub const DEFAULT_STEPS_PER_DOUBLING: usize = 4;
/// Default cap on the bytes the pool retains, depot and thread caches together (64 MiB).
pub const DEFAULT_MAX_RETAINED_BYTES: usize = 64 << 20;
/// Default most that each thread's cache may hold, per pool (8 MiB), when the cap allows it
/// and caches can be reclaimed from other threads (Linux `membarrier`); elsewhere
/// [`FALLBACK_THREAD_CACHE_BYTES`].
///
/// Large because it can be: every cache's room counts against `max_retained_bytes`, so it no
/// longer multiplies with the number of threads. At 2 MiB (the default before caches could be
/// reclaimed) a cache held two 1 MiB buffers, and a 1 MiB hand-off between threads took the
/// depot's lock every second buffer on each side; `BENCHMARKS.md` in the repository has the
/// hand-off figures (*cross-thread*).
pub const DEFAULT_THREAD_CACHE_BYTES: usize = 8 << 20;
/// Default most that each thread's cache may hold where caches cannot be reclaimed from other
/// threads (no Linux `membarrier`: other systems, old kernels). Their room then counts apart
/// from `max_retained_bytes`, as a per-thread bound, so it is kept small.
pub const FALLBACK_THREAD_CACHE_BYTES: usize = 2 << 20;

/// Default decay interval: a buffer idle this long becomes eligible for release.
pub const DEFAULT_DECAY_INTERVAL: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
enum TierSpec {
    /// Not set: the default geometric tiers (an aligned pool rounds them to its alignment).
    Default,
    Explicit(Vec<usize>),
    Geometric {
        min: usize,
        max: usize,
        steps: usize,
    },
}

impl TierSpec {
    /// The sorted, distinct tier sizes this spec names, or the first invalid value.
    fn sizes(self) -> Result<Vec<usize>, ConfigError> {
        Ok(match self {
            TierSpec::Default => class::geometric(
                DEFAULT_MIN_TIER,
                DEFAULT_MAX_TIER,
                DEFAULT_STEPS_PER_DOUBLING,
            ),
            TierSpec::Explicit(mut sizes) => {
                if sizes.is_empty() {
                    return Err(ConfigError::NoTiers);
                }
                if sizes.contains(&0) {
                    return Err(ConfigError::ZeroTierSize);
                }
                sizes.sort_unstable();
                sizes.dedup();
                sizes
            }
            TierSpec::Geometric { min, max, steps } => {
                if !steps.is_power_of_two() || steps > 16 {
                    return Err(ConfigError::InvalidSteps { steps });
                }
                if min == 0 || min > max {
                    return Err(ConfigError::InvalidRange { min, max });
                }
                if max > isize::MAX as usize {
                    return Err(ConfigError::TierTooLarge { size: max });
                }
                class::geometric(min, max, steps)
            }
        })
    }
}

/// Configures and builds a [`BufferPool`](crate::BufferPool).
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
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until build() is called"]
pub struct Builder {
    tiers: TierSpec,
    max_retained_bytes: usize,
    thread_cache_bytes: Option<usize>,
    decay_interval: Duration,
    background_trim: bool,
    zero_on_return: bool,
    max_in_use_bytes: Option<usize>,
    trim_allocator: TrimAllocator,
    name: Option<String>,
    #[cfg(feature = "holders")]
    track_every: u32,
    #[cfg(feature = "holders")]
    report_waits_after: Option<Duration>,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            tiers: TierSpec::Default,
            max_retained_bytes: DEFAULT_MAX_RETAINED_BYTES,
            thread_cache_bytes: None,
            decay_interval: DEFAULT_DECAY_INTERVAL,
            background_trim: false,
            zero_on_return: false,
            max_in_use_bytes: None,
            trim_allocator: TrimAllocator::Glibc,
            name: None,
            #[cfg(feature = "holders")]
            track_every: 0,
            #[cfg(feature = "holders")]
            report_waits_after: Some(Duration::from_secs(1)),
        }
    }
}

impl Builder {
    /// A builder with the default configuration (see [`BufferPool::new`](crate::BufferPool::new)).
    pub fn new() -> Self {
        Self::default()
    }

    /// Uses exactly these tier sizes, in any order; duplicates are merged.
    ///
    /// Lookup stays O(1) for any sizes; sizes with at most five significant bits (powers of two
    /// and their quarter/eighth/sixteenth steps) need a single comparison.
    pub fn tiers<I: IntoIterator<Item = usize>>(mut self, sizes: I) -> Self {
        self.tiers = TierSpec::Explicit(sizes.into_iter().collect());
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
        self.tiers = TierSpec::Geometric {
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
    /// caches whose threads went quiet. Default 64 MiB.
    ///
    /// ```
    /// let pool = tierpool::BufferPool::builder().max_retained_bytes(1 << 20).build()?;
    /// let (done, go_on) = (std::sync::Barrier::new(9), std::sync::Barrier::new(9));
    /// std::thread::scope(|s| {
    ///     for _ in 0..8 {
    ///         s.spawn(|| {
    ///             let held: Vec<_> = (0..16).map(|_| pool.get(64 << 10)).collect();
    ///             drop(held); // 1 MiB per thread handed back, kept in its cache if it may
    ///             done.wait();
    ///             go_on.wait();
    ///         });
    ///     }
    ///     done.wait(); // eight threads alive, each with its cache
    ///     assert!(pool.stats().retained_bytes <= 1 << 20); // all of them together
    ///     go_on.wait();
    /// });
    /// # Ok::<(), tierpool::ConfigError>(())
    /// ```
    pub fn max_retained_bytes(mut self, bytes: usize) -> Self {
        self.max_retained_bytes = bytes;
        self
    }

    /// The most each thread's private cache for this pool may hold, in bytes of capacity (it
    /// holds less while the pool's allowance is spent: see
    /// [`max_retained_bytes`](Self::max_retained_bytes)). A cache may also keep one buffer of a
    /// tier larger than this (under [`max_in_use_bytes`](Self::max_in_use_bytes), of at most a
    /// sixteenth of the budget); other buffers of such tiers go to the shared depot. Default:
    /// 8 MiB ([`DEFAULT_THREAD_CACHE_BYTES`]; 2 MiB, [`FALLBACK_THREAD_CACHE_BYTES`], where
    /// caches cannot be reclaimed from other threads), or a quarter of `max_retained_bytes` if
    /// that is smaller. Zero disables the thread caches (every operation then takes the depot's
    /// lock).
    ///
    /// Where caches cannot be reclaimed (no Linux `membarrier`), their room does not count
    /// against `max_retained_bytes` (an idle thread would keep it for good), and the bound is
    /// `max_retained_bytes + threads * (thread_cache_bytes + largest tier)`.
    pub fn thread_cache_bytes(mut self, bytes: usize) -> Self {
        self.thread_cache_bytes = Some(bytes);
        self
    }

    /// How long a retained buffer may stay unused before it becomes eligible for release.
    /// Buffers idle for a whole interval are released at the next interval boundary, so after a
    /// burst retained memory falls back within about two intervals. Default 1 s.
    pub fn decay_interval(mut self, interval: Duration) -> Self {
        self.decay_interval = interval;
        self
    }

    /// Starts a background thread that ticks the pool every interval: the depot's decay, and
    /// reclaiming every thread cache that was not used for an interval. Without it the pool
    /// ticks when a thread using it looks at the clock (every 256 returns to a tier of its
    /// cache, or 16 slow operations), so a pool that is used rarely, or not at all, gives back
    /// what it holds late or never; with it, within about two intervals, whatever the rest of
    /// the program does. The thread holds only a weak reference and exits when the pool is
    /// dropped. Default off.
    pub fn background_trim(mut self, enabled: bool) -> Self {
        self.background_trim = enabled;
        self
    }

    /// Overwrites every returned buffer's whole capacity with zeros before it is kept or
    /// released, for pools that carry secrets. Default off.
    pub fn zero_on_return(mut self, enabled: bool) -> Self {
        self.zero_on_return = enabled;
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
        self.trim_allocator = how.into();
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
        self.name = Some(name.into());
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
        self.track_every = every;
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
        self.report_waits_after = after;
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
    /// reclaimed from other threads (no Linux `membarrier`), a budgeted pool uses no thread
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
        self.max_in_use_bytes = Some(bytes);
        self
    }

    pub(crate) fn validate(self) -> Result<Config, ConfigError> {
        let sizes = self.tiers.sizes()?;
        let largest = *sizes.last().expect("non-empty");
        if largest > isize::MAX as usize {
            return Err(ConfigError::TierTooLarge { size: largest });
        }
        if sizes.len() > MAX_TIERS {
            return Err(ConfigError::TooManyTiers { count: sizes.len() });
        }
        if self.max_retained_bytes < sizes[0] {
            return Err(ConfigError::CapTooSmall {
                max_retained_bytes: self.max_retained_bytes,
                smallest_tier: sizes[0],
            });
        }
        let thread_cache_bytes = match self.thread_cache_bytes {
            Some(b) if b > self.max_retained_bytes => {
                return Err(ConfigError::ThreadCacheTooLarge {
                    thread_cache_bytes: b,
                    max_retained_bytes: self.max_retained_bytes,
                })
            }
            Some(b) => b,
            None if crate::sys::fence::available() => {
                DEFAULT_THREAD_CACHE_BYTES.min(self.max_retained_bytes / 4)
            }
            None => FALLBACK_THREAD_CACHE_BYTES.min(self.max_retained_bytes / 4),
        };
        if self.decay_interval.is_zero() {
            return Err(ConfigError::ZeroInterval);
        }
        let interval_nanos = u64::try_from(self.decay_interval.as_nanos()).map_err(|_| {
            ConfigError::IntervalTooLong {
                interval: self.decay_interval,
            }
        })?;
        if let Some(limit) = self.max_in_use_bytes {
            if limit < sizes[0] {
                return Err(ConfigError::BudgetTooSmall {
                    max_in_use_bytes: limit,
                    smallest_tier: sizes[0],
                });
            }
            if limit > crate::engine::budget::MAX_BUDGET {
                return Err(ConfigError::BudgetTooLarge {
                    max_in_use_bytes: limit,
                });
            }
        }
        Ok(Config {
            name: self.name.unwrap_or_else(|| {
                static UNNAMED: std::sync::atomic::AtomicUsize =
                    std::sync::atomic::AtomicUsize::new(0);
                let n = UNNAMED.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                format!("pool-{n}")
            }),
            max_in_use_bytes: self.max_in_use_bytes,
            #[cfg(feature = "holders")]
            track_every: self.track_every,
            #[cfg(feature = "holders")]
            report_waits_after: self.report_waits_after,
            trim_allocator: self.trim_allocator,
            classes: Classes::new(sizes),
            max_retained_bytes: self.max_retained_bytes,
            thread_cache_bytes,
            interval_nanos,
            background_trim: self.background_trim,
            zero_on_return: self.zero_on_return,
        })
    }
}

impl Builder {
    /// This builder for the pool behind an [`AlignedPool`](crate::AlignedPool) of alignment
    /// `align`, and the aligned pool's tier sizes: generated tiers (the default, power-of-two
    /// and geometric ones) rounded up to multiples of `align`, explicit ones checked to be
    /// multiples; the pool behind it gets each tier plus `align` bytes (the slack that lets a
    /// buffer of alignment 1 hold an aligned window of the tier's size, `aligned.rs`).
    pub(crate) fn aligned_to(mut self, align: usize) -> Result<(Builder, Vec<usize>), ConfigError> {
        if !align.is_power_of_two() || align > MAX_ALIGNMENT {
            return Err(ConfigError::InvalidAlignment { align });
        }
        let spec = std::mem::replace(&mut self.tiers, TierSpec::Default);
        let explicit = matches!(spec, TierSpec::Explicit(_));
        let spec = match spec {
            // Nothing below the alignment: a smaller tier would be rounded up to it anyway.
            TierSpec::Default => TierSpec::Geometric {
                min: DEFAULT_MIN_TIER.max(align),
                max: DEFAULT_MAX_TIER.max(align),
                steps: DEFAULT_STEPS_PER_DOUBLING,
            },
            other => other,
        };
        let mut sizes = spec.sizes()?;
        if explicit {
            if let Some(&tier) = sizes.iter().find(|&&t| t % align != 0) {
                return Err(ConfigError::TierNotAligned { tier, align });
            }
        } else {
            for t in &mut sizes {
                *t = t
                    .checked_next_multiple_of(align)
                    .ok_or(ConfigError::TierTooLarge { size: *t })?;
            }
            sizes.dedup();
        }
        let inner = sizes
            .iter()
            .map(|&t| match t.checked_add(align) {
                Some(s) if s <= isize::MAX as usize => Ok(s),
                _ => Err(ConfigError::TierTooLarge { size: t }),
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.tiers = TierSpec::Explicit(inner);
        Ok((self, sizes))
    }
}

/// A validated configuration.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) classes: Classes,
    pub(crate) max_retained_bytes: usize,
    pub(crate) thread_cache_bytes: usize,
    pub(crate) interval_nanos: u64,
    pub(crate) background_trim: bool,
    pub(crate) zero_on_return: bool,
    pub(crate) max_in_use_bytes: Option<usize>,
    pub(crate) trim_allocator: TrimAllocator,
    pub(crate) name: String,
    #[cfg(feature = "holders")]
    pub(crate) track_every: u32,
    #[cfg(feature = "holders")]
    pub(crate) report_waits_after: Option<Duration>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_config_shape() {
        let c = Builder::new().validate().unwrap();
        let sizes = c.classes.sizes();
        assert_eq!(sizes[0], 256);
        assert_eq!(*sizes.last().unwrap(), 16 << 20);
        assert_eq!(sizes.len(), 65);
        // A 1 MiB message plus a small header must not jump to 2 MiB.
        let t = c.classes.for_get((1 << 20) + 5).unwrap();
        assert_eq!(sizes[t], 1_310_720);
        // 32 KiB + 1 lands in 40 KiB, not 1 MiB.
        assert_eq!(sizes[c.classes.for_get(32 * 1024 + 1).unwrap()], 40 * 1024);
        let default = if crate::sys::fence::available() {
            8 << 20
        } else {
            FALLBACK_THREAD_CACHE_BYTES
        };
        assert_eq!(c.thread_cache_bytes, default);
        assert_eq!(c.classes.max_probes(), 1);
    }

    #[test]
    fn every_invalid_value_is_named() {
        let e = |b: Builder| b.validate().unwrap_err();
        assert_eq!(e(Builder::new().tiers([])), ConfigError::NoTiers);
        assert_eq!(e(Builder::new().tiers([1, 0])), ConfigError::ZeroTierSize);
        let huge = isize::MAX as usize + 1;
        assert_eq!(
            e(Builder::new().tiers([1, huge])),
            ConfigError::TierTooLarge { size: huge }
        );
        assert_eq!(
            e(Builder::new().tiers(1..=(MAX_TIERS + 1))),
            ConfigError::TooManyTiers {
                count: MAX_TIERS + 1
            }
        );
        assert_eq!(
            e(Builder::new().geometric_tiers(10, 5, 2)),
            ConfigError::InvalidRange { min: 10, max: 5 }
        );
        assert_eq!(
            e(Builder::new().power_of_two_tiers(0, 5)),
            ConfigError::InvalidRange { min: 0, max: 5 }
        );
        assert_eq!(
            e(Builder::new().geometric_tiers(1, 5, 3)),
            ConfigError::InvalidSteps { steps: 3 }
        );
        assert_eq!(
            e(Builder::new().geometric_tiers(1, 5, 32)),
            ConfigError::InvalidSteps { steps: 32 }
        );
        assert_eq!(
            e(Builder::new().power_of_two_tiers(1, huge)),
            ConfigError::TierTooLarge { size: huge }
        );
        assert_eq!(
            e(Builder::new().tiers([4096]).max_retained_bytes(4095)),
            ConfigError::CapTooSmall {
                max_retained_bytes: 4095,
                smallest_tier: 4096
            }
        );
        assert_eq!(
            e(Builder::new()
                .max_retained_bytes(1 << 20)
                .thread_cache_bytes(2 << 20)),
            ConfigError::ThreadCacheTooLarge {
                thread_cache_bytes: 2 << 20,
                max_retained_bytes: 1 << 20
            }
        );
        assert_eq!(
            e(Builder::new().decay_interval(Duration::ZERO)),
            ConfigError::ZeroInterval
        );
        assert!(matches!(
            e(Builder::new().decay_interval(Duration::MAX)),
            ConfigError::IntervalTooLong { .. }
        ));
        // Messages name the value.
        assert!(e(Builder::new().geometric_tiers(1, 5, 3))
            .to_string()
            .contains('3'));
    }

    #[test]
    fn small_cap_shrinks_default_thread_cache() {
        let c = Builder::new()
            .tiers([64])
            .max_retained_bytes(1000)
            .validate()
            .unwrap();
        assert_eq!(c.thread_cache_bytes, 250);
        let c = Builder::new()
            .max_retained_bytes(usize::MAX)
            .validate()
            .unwrap();
        let default = if crate::sys::fence::available() {
            DEFAULT_THREAD_CACHE_BYTES
        } else {
            FALLBACK_THREAD_CACHE_BYTES
        };
        assert_eq!(c.thread_cache_bytes, default);
    }

    #[test]
    fn budget_limits_are_validated() {
        let e = |b: Builder| b.validate().unwrap_err();
        assert_eq!(
            e(Builder::new().tiers([4096]).max_in_use_bytes(4095)),
            ConfigError::BudgetTooSmall {
                max_in_use_bytes: 4095,
                smallest_tier: 4096
            }
        );
        let too_big = crate::MAX_BUDGET + 1;
        assert_eq!(
            e(Builder::new().max_in_use_bytes(too_big)),
            ConfigError::BudgetTooLarge {
                max_in_use_bytes: too_big
            }
        );
        assert!(e(Builder::new().max_in_use_bytes(too_big))
            .to_string()
            .contains(&too_big.to_string()));
        let c = Builder::new()
            .tiers([4096])
            .max_in_use_bytes(4096)
            .validate()
            .unwrap();
        assert_eq!(c.max_in_use_bytes, Some(4096));
        assert_eq!(Builder::new().validate().unwrap().max_in_use_bytes, None);
    }
}
