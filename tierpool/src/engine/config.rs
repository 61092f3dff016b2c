//! A pool's configuration: the settings a [`Builder`](crate::Builder) collects, their defaults,
//! and their validation into a [`Config`] the engine runs on.

use std::time::Duration;

use crate::engine::class::{self, Classes};
// The limits a configuration is validated against, for the builder's constants.
pub(crate) use crate::engine::budget::MAX_BUDGET;
pub(crate) use crate::engine::class::{MAX_ALIGNMENT, MAX_TIERS};
use crate::engine::error::ConfigError;
use crate::sys::trim::TrimAllocator;

/// Smallest tier of the default configuration.
pub(crate) const DEFAULT_MIN_TIER: usize = 256;
/// Largest tier of the default configuration (16 MiB).
pub(crate) const DEFAULT_MAX_TIER: usize = 16 << 20;
/// Classes per doubling in the default configuration up to [`DEFAULT_FINE_TIERS_UP_TO`] (256,
/// 320, 384, 448, 512, 640, ...).
pub(crate) const DEFAULT_STEPS_PER_DOUBLING: usize = 4;
/// The default configuration's tiers are [`DEFAULT_STEPS_PER_DOUBLING`] per doubling up to
/// this size (2 MiB) and powers of two above it (4, 8, 16 MiB).
///
/// Fine classes bound the space a buffer wastes where buffers are many and the cap holds
/// dozens of each; above 2 MiB the cap holds a few buffers of each tier, and every tier more is
/// one more buffer a load of varied sizes needs retained to hit: four per doubling all the
/// way would make one buffer of each tier from 2 to 16 MiB more than the default cap, and
/// with sizes spread over them the large tiers would evict one another, each miss a fresh
/// buffer of several MiB.
pub(crate) const DEFAULT_FINE_TIERS_UP_TO: usize = 2 << 20;
/// Default cap on the bytes the pool retains, depot and thread caches together (64 MiB).
pub(crate) const DEFAULT_MAX_RETAINED_BYTES: usize = 64 << 20;
/// Default most that each thread's cache may hold, per pool (8 MiB), when the cap allows it
/// and caches can be reclaimed from other threads (an asymmetric fence: Linux `membarrier`,
/// Windows `FlushProcessWriteBuffers`); elsewhere [`FALLBACK_THREAD_CACHE_BYTES`].
///
/// Large because it can be: every cache's room counts against `max_retained_bytes`, so it
/// does not multiply with the number of threads, and a cache holds several 1 MiB buffers,
/// so that a 1 MiB hand-off between threads takes the depot's lock once per batch.
pub(crate) const DEFAULT_THREAD_CACHE_BYTES: usize = 8 << 20;
/// Default most that each thread's cache may hold where caches cannot be reclaimed from other
/// threads (no asymmetric fence: macOS, Linux kernels without `membarrier`). Their room then
/// counts apart from `max_retained_bytes`, as a per-thread bound, so it is kept small.
pub(crate) const FALLBACK_THREAD_CACHE_BYTES: usize = 2 << 20;

/// Default decay interval: a buffer idle this long becomes eligible for release.
pub(crate) const DEFAULT_DECAY_INTERVAL: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
pub(crate) enum TierSpec {
    /// Not set: the default tiers ([`default_tiers`]; an aligned pool rounds them to its
    /// alignment).
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
            TierSpec::Default => default_tiers(DEFAULT_MIN_TIER),
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

// An aligned pool's default tiers start at its alignment (`Settings::aligned_to`), which must
// be within the fine tiers' range.
const _: () = assert!(MAX_ALIGNMENT <= DEFAULT_FINE_TIERS_UP_TO);

/// The default tiers from `min` (at most [`DEFAULT_FINE_TIERS_UP_TO`]) to
/// [`DEFAULT_MAX_TIER`]: [`DEFAULT_STEPS_PER_DOUBLING`] per doubling up to
/// [`DEFAULT_FINE_TIERS_UP_TO`], powers of two above it.
fn default_tiers(min: usize) -> Vec<usize> {
    debug_assert!(min <= DEFAULT_FINE_TIERS_UP_TO);
    let mut sizes = class::geometric(min, DEFAULT_FINE_TIERS_UP_TO, DEFAULT_STEPS_PER_DOUBLING);
    sizes.extend(class::geometric(
        DEFAULT_FINE_TIERS_UP_TO,
        DEFAULT_MAX_TIER,
        1,
    ));
    sizes.dedup();
    sizes
}

/// What a [`Builder`](crate::Builder) has been told, before validation: every setting with
/// its default.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) tiers: TierSpec,
    pub(crate) max_retained_bytes: usize,
    pub(crate) thread_cache_bytes: Option<usize>,
    pub(crate) decay_interval: Duration,
    pub(crate) background_trim: bool,
    pub(crate) zero_on_return: bool,
    pub(crate) max_in_use_bytes: Option<usize>,
    pub(crate) trim_allocator: TrimAllocator,
    pub(crate) name: Option<String>,
    /// One get in this many is tracked (feature `holders`; 0: none).
    pub(crate) track_every: u32,
    /// How long a budget wait lasts before it names the holders (feature `holders`).
    pub(crate) report_waits_after: Option<Duration>,
    /// An [`AlignedPool`](crate::AlignedPool)'s alignment, the alignment of every buffer's
    /// allocation (`sys/alloc.rs`); 0 for a plain pool (whose allocations have alignment 1).
    /// An aligned pool (of any alignment, 1 too) lends no larger tier's buffer (`PoolState::lends`: its buffers have their tier's
    /// capacity, a whole number of blocks, as its docs promise), and rounds a buffer above its
    /// largest tier up to a multiple of the alignment (`PoolState::oversize_capacity`).
    pub(crate) align: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            tiers: TierSpec::Default,
            max_retained_bytes: DEFAULT_MAX_RETAINED_BYTES,
            thread_cache_bytes: None,
            decay_interval: DEFAULT_DECAY_INTERVAL,
            background_trim: false,
            zero_on_return: false,
            max_in_use_bytes: None,
            trim_allocator: TrimAllocator::Glibc,
            name: None,
            track_every: 0,
            report_waits_after: Some(Duration::from_secs(1)),
            align: 0,
        }
    }
}

impl Settings {
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
            track_every: self.track_every,
            report_waits_after: self.report_waits_after,
            trim_allocator: self.trim_allocator,
            classes: Classes::new(sizes),
            max_retained_bytes: self.max_retained_bytes,
            thread_cache_bytes,
            interval_nanos,
            background_trim: self.background_trim,
            zero_on_return: self.zero_on_return,
            align: self.align,
        })
    }
}

impl Settings {
    /// These settings for an [`AlignedPool`](crate::AlignedPool) of alignment `align`:
    /// generated tiers (the default, power-of-two and geometric ones) rounded up to multiples
    /// of `align`, explicit ones checked to be multiples; the buffers are allocated with the
    /// alignment (`sys/alloc.rs`), so each tier's buffers have exactly its size.
    pub(crate) fn aligned_to(mut self, align: usize) -> Result<Settings, ConfigError> {
        if !align.is_power_of_two() || align > MAX_ALIGNMENT {
            return Err(ConfigError::InvalidAlignment { align });
        }
        let spec = std::mem::replace(&mut self.tiers, TierSpec::Default);
        let explicit = matches!(spec, TierSpec::Explicit(_));
        let mut sizes = match spec {
            // Nothing below the alignment: a smaller tier would be rounded up to it anyway
            // (within the fine tiers' range: the `const` assert above `default_tiers`).
            TierSpec::Default => default_tiers(DEFAULT_MIN_TIER.max(align)),
            other => other.sizes()?,
        };
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
        if let Some(&size) = sizes.iter().find(|&&t| t > isize::MAX as usize) {
            return Err(ConfigError::TierTooLarge { size });
        }
        self.tiers = TierSpec::Explicit(sizes);
        self.align = align;
        Ok(self)
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
    /// See [`Settings::align`].
    pub(crate) align: usize,
    pub(crate) max_in_use_bytes: Option<usize>,
    pub(crate) trim_allocator: TrimAllocator,
    pub(crate) name: String,
    pub(crate) track_every: u32,
    pub(crate) report_waits_after: Option<Duration>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Builder;

    #[test]
    #[cfg_attr(
        miri,
        ignore = "configuration arithmetic, no unsafe code: run natively"
    )]
    fn default_config_shape() {
        let c = Builder::new().validate().unwrap();
        let sizes = c.classes.sizes();
        assert_eq!(sizes[0], 256);
        assert_eq!(*sizes.last().unwrap(), 16 << 20);
        assert_eq!(sizes.len(), 56);
        // A 1 MiB message plus a small header must not jump to 2 MiB.
        let t = c.classes.for_get((1 << 20) + 5).unwrap();
        assert_eq!(sizes[t], 1_310_720);
        // Four per doubling up to 2 MiB, powers of two above.
        let fine = sizes
            .iter()
            .filter(|&&t| t <= DEFAULT_FINE_TIERS_UP_TO)
            .count();
        assert_eq!(fine, 1 + 13 * 4); // 256 B, then 13 doublings to 2 MiB
        assert_eq!(
            sizes[fine - 2..],
            [1_835_008, 2 << 20, 4 << 20, 8 << 20, 16 << 20]
        );
        assert_eq!(sizes[c.classes.for_get((2 << 20) + 1).unwrap()], 4 << 20);
        assert_eq!(sizes[c.classes.for_get(5 << 20).unwrap()], 8 << 20);
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
    #[cfg_attr(
        miri,
        ignore = "configuration arithmetic, no unsafe code: run natively"
    )]
    fn aligned_default_tiers_are_the_default_ones_rounded_up_to_the_alignment() {
        // 4 KiB: from 4 KiB, four per doubling (multiples of 4 KiB) up to 2 MiB, then powers
        // of two.
        let sizes = |align| match Settings::default().aligned_to(align).unwrap().tiers {
            TierSpec::Explicit(sizes) => sizes,
            other => panic!("an aligned pool's tiers are explicit: {other:?}"),
        };
        let sizes_4k = sizes(4096);
        let (sizes_2m, sizes) = (sizes(MAX_ALIGNMENT), sizes_4k);
        assert_eq!(sizes[..6], [4096, 8192, 12_288, 16_384, 20_480, 24_576]);
        assert!(sizes.iter().all(|t| t % 4096 == 0));
        assert!(sizes.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(
            sizes[sizes.len() - 4..],
            [2 << 20, 4 << 20, 8 << 20, 16 << 20]
        );
        // The largest alignment (2 MiB): the tiers from it, powers of two.
        assert_eq!(sizes_2m, [2 << 20, 4 << 20, 8 << 20, 16 << 20]);
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "configuration arithmetic, no unsafe code: run natively"
    )]
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
    #[cfg_attr(
        miri,
        ignore = "configuration arithmetic, no unsafe code: run natively"
    )]
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
    #[cfg_attr(
        miri,
        ignore = "configuration arithmetic, no unsafe code: run natively"
    )]
    fn budget_limits_are_validated() {
        let e = |b: Builder| b.validate().unwrap_err();
        assert_eq!(
            e(Builder::new().tiers([4096]).max_in_use_bytes(4095)),
            ConfigError::BudgetTooSmall {
                max_in_use_bytes: 4095,
                smallest_tier: 4096
            }
        );
        let too_big = crate::engine::budget::MAX_BUDGET + 1;
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
