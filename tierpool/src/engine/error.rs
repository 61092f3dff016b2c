//! The crate's error types: [`ConfigError`] from [`Builder::build`](crate::Builder::build) and
//! [`AllocError`] from [`BufferPool::try_get`](crate::BufferPool::try_get).

use std::fmt;
use std::time::Duration;

/// Why [`Builder::build`](crate::Builder::build) rejected a configuration.
///
/// Every variant names the offending value, so the message alone says what to fix.
///
/// ```
/// use tierpool::{BufferPool, ConfigError};
///
/// let err = BufferPool::builder().tiers([4096, 0]).build().unwrap_err();
/// assert_eq!(err, ConfigError::ZeroTierSize);
/// assert_eq!(err.to_string(), "a tier size is zero: tier sizes must be at least 1 byte");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// The tier list is empty.
    NoTiers,
    /// A tier size is zero.
    ZeroTierSize,
    /// A tier size is above `isize::MAX`, the most any `Vec<u8>` can hold.
    TierTooLarge {
        /// The offending size.
        size: usize,
    },
    /// More tiers than [`Builder::MAX_TIERS`](crate::Builder::MAX_TIERS).
    TooManyTiers {
        /// How many distinct tiers were given.
        count: usize,
    },
    /// A range of generated tiers has `min > max` or `min == 0`.
    InvalidRange {
        /// The smallest tier asked for.
        min: usize,
        /// The largest tier asked for.
        max: usize,
    },
    /// Steps per doubling for geometric tiers must be a power of two from 1 to 16.
    InvalidSteps {
        /// The offending value.
        steps: usize,
    },
    /// `max_retained_bytes` cannot hold even one buffer of the smallest tier.
    CapTooSmall {
        /// The configured cap.
        max_retained_bytes: usize,
        /// The smallest tier size.
        smallest_tier: usize,
    },
    /// The per-thread cache budget is larger than the pool's whole cap.
    ThreadCacheTooLarge {
        /// The configured per-thread budget.
        thread_cache_bytes: usize,
        /// The configured cap.
        max_retained_bytes: usize,
    },
    /// The decay interval is zero.
    ZeroInterval,
    /// `max_in_use_bytes` cannot cover even one buffer of the smallest tier.
    BudgetTooSmall {
        /// The configured budget.
        max_in_use_bytes: usize,
        /// The smallest tier size.
        smallest_tier: usize,
    },
    /// `max_in_use_bytes` is above [`Builder::MAX_IN_USE_BYTES`](crate::Builder::MAX_IN_USE_BYTES).
    BudgetTooLarge {
        /// The configured budget.
        max_in_use_bytes: usize,
    },
    /// The decay interval is too long to be represented (above about 584 years).
    IntervalTooLong {
        /// The offending interval.
        interval: Duration,
    },
    /// An [`AlignedPool`](crate::AlignedPool)'s alignment is not a power of two, or is above
    /// [`Builder::MAX_ALIGNMENT`](crate::Builder::MAX_ALIGNMENT).
    InvalidAlignment {
        /// The offending alignment.
        align: usize,
    },
    /// An explicit tier of an [`AlignedPool`](crate::AlignedPool) is not a multiple of its
    /// alignment (generated tiers are rounded up instead).
    TierNotAligned {
        /// The offending tier size.
        tier: usize,
        /// The pool's alignment.
        align: usize,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::NoTiers => f.write_str("no tiers: a pool needs at least one tier size"),
            ConfigError::ZeroTierSize => {
                f.write_str("a tier size is zero: tier sizes must be at least 1 byte")
            }
            ConfigError::TierTooLarge { size } => write!(
                f,
                "tier size {size} is above isize::MAX ({}), the largest possible Vec<u8>",
                isize::MAX
            ),
            ConfigError::TooManyTiers { count } => write!(
                f,
                "{count} tiers given; at most {} are supported",
                crate::engine::class::MAX_TIERS
            ),
            ConfigError::InvalidRange { min, max } => write!(
                f,
                "invalid tier range {min}..={max}: need 1 <= min <= max"
            ),
            ConfigError::InvalidSteps { steps } => write!(
                f,
                "{steps} steps per doubling: must be 1, 2, 4, 8 or 16"
            ),
            ConfigError::CapTooSmall {
                max_retained_bytes,
                smallest_tier,
            } => write!(
                f,
                "max_retained_bytes {max_retained_bytes} cannot hold one buffer of the smallest tier ({smallest_tier} bytes)"
            ),
            ConfigError::ThreadCacheTooLarge {
                thread_cache_bytes,
                max_retained_bytes,
            } => write!(
                f,
                "thread_cache_bytes {thread_cache_bytes} is larger than max_retained_bytes {max_retained_bytes}"
            ),
            ConfigError::ZeroInterval => {
                f.write_str("decay interval is zero: it must be a positive duration")
            }
            ConfigError::IntervalTooLong { interval } => {
                write!(f, "decay interval {interval:?} is too long to represent")
            }
            ConfigError::BudgetTooSmall {
                max_in_use_bytes,
                smallest_tier,
            } => write!(
                f,
                "max_in_use_bytes {max_in_use_bytes} cannot cover one buffer of the smallest tier ({smallest_tier} bytes)"
            ),
            ConfigError::InvalidAlignment { align } => write!(
                f,
                "alignment {align} is not a power of two from 1 to {} bytes",
                crate::engine::class::MAX_ALIGNMENT
            ),
            ConfigError::TierNotAligned { tier, align } => write!(
                f,
                "tier size {tier} is not a multiple of the pool's alignment, {align} bytes"
            ),
            ConfigError::BudgetTooLarge { max_in_use_bytes } => write!(
                f,
                "max_in_use_bytes {max_in_use_bytes} is above the largest supported budget, {}",
                crate::engine::budget::MAX_BUDGET
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Why [`BufferPool::try_get`](crate::BufferPool::try_get) (or another fallible way of getting
/// a buffer) could not produce one.
///
/// ```
/// use tierpool::{AllocError, BufferPool};
///
/// let pool = BufferPool::new();
/// let err = pool.try_get(usize::MAX).unwrap_err();
/// assert_eq!(err, AllocError::CapacityOverflow { requested: usize::MAX });
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AllocError {
    /// The requested size is above `isize::MAX`: no `Vec<u8>` can be that large.
    CapacityOverflow {
        /// The size asked for.
        requested: usize,
    },
    /// The allocator reported failure for this many bytes.
    AllocFailed {
        /// The size asked for.
        requested: usize,
        /// The capacity the pool tried to allocate (the tier size, or `requested` above the
        /// largest tier).
        capacity: usize,
    },
    /// The pool's budget on bytes in use
    /// ([`max_in_use_bytes`](crate::Builder::max_in_use_bytes)) has no room for this buffer
    /// now (from [`try_get`](crate::BufferPool::try_get), which never waits).
    OverBudget {
        /// The size asked for.
        requested: usize,
        /// Bytes in use when the request was refused (a snapshot: other threads may have
        /// returned some since).
        in_use: usize,
        /// The budget.
        limit: usize,
    },
    /// The budget had no room for this buffer before the timeout of
    /// [`get_timeout`](crate::BufferPool::get_timeout) passed.
    TimedOut {
        /// The size asked for.
        requested: usize,
        /// Bytes in use when the wait gave up.
        in_use: usize,
        /// The budget.
        limit: usize,
        /// How long it waited.
        waited: Duration,
    },
    /// The buffer's charge is larger than the whole budget: it can never be served.
    LargerThanBudget {
        /// The size asked for.
        requested: usize,
        /// What it would be charged: its tier's size, or above the largest tier the size
        /// rounded up to 4 KiB.
        charge: usize,
        /// The budget.
        limit: usize,
    },
}

impl fmt::Display for AllocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AllocError::CapacityOverflow { requested } => write!(
                f,
                "cannot allocate {requested} bytes: above isize::MAX, the largest possible Vec<u8>"
            ),
            AllocError::AllocFailed {
                requested,
                capacity,
            } => write!(
                f,
                "the allocator failed to provide {capacity} bytes (for a request of {requested})"
            ),
            AllocError::OverBudget {
                requested,
                in_use,
                limit,
            } => write!(
                f,
                "over budget: {requested} bytes requested with {in_use} of {limit} bytes in use"
            ),
            AllocError::TimedOut {
                requested,
                in_use,
                limit,
                waited,
            } => write!(
                f,
                "timed out after {waited:?} waiting for {requested} bytes of budget ({in_use} of {limit} bytes in use)"
            ),
            AllocError::LargerThanBudget {
                requested,
                charge,
                limit,
            } => write!(
                f,
                "a request of {requested} bytes (charged {charge}) can never fit the budget of {limit} bytes"
            ),
        }
    }
}

impl std::error::Error for AllocError {}

/// An `AllocError` as the `io::Error` a read or write that could not take a buffer returns:
/// kind [`OutOfMemory`](std::io::ErrorKind::OutOfMemory), the `AllocError` its source (so
/// `err.get_ref()` downcasts to it).
impl From<AllocError> for std::io::Error {
    fn from(e: AllocError) -> Self {
        std::io::Error::new(std::io::ErrorKind::OutOfMemory, e)
    }
}
