//! [`AlignedPool`]: a pool of buffers aligned for direct I/O, made of a [`BufferPool`] whose
//! tiers are the aligned tiers plus the alignment (`buf/aligned.rs` has how a buffer is kept).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::buf::aligned::AlignedBuf;
use crate::buf::pooled::PooledBuf;
use crate::engine::error::{AllocError, ConfigError};
use crate::observe::stats::Stats;
use crate::pool::{Acquire, BufferPool, Builder};

/// A pool of buffers whose start address and capacity are multiples of an alignment (512 B
/// or 4 KiB for direct I/O, up to [`MAX_ALIGNMENT`](crate::MAX_ALIGNMENT)), with the same thread caches, shared
/// depot, cap, decay, budget and statistics as a [`BufferPool`].
///
/// Made by [`AlignedPool::new`] or, to configure it, [`Builder::build_aligned`]. Cloning it
/// clones a handle to the same pool. [`direct_io_alignment`](crate::direct_io_alignment)
/// tells the alignment a file needs.
///
/// ```
/// let pool = tierpool::AlignedPool::new(4096)?;
/// let mut block = pool.get(10_000);
/// assert_eq!(block.as_ptr() as usize % 4096, 0);
/// assert_eq!(block.capacity(), 12_288); // a multiple of 4096, at least what was asked
/// block.resize(block.capacity(), 0); // e.g. for `FileExt::read_exact_at`
/// assert_eq!(pool.tier_sizes()[..3], [4096, 8192, 12_288]);
/// # Ok::<(), tierpool::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct AlignedPool {
    inner: BufferPool,
    align: usize,
    /// The aligned tier sizes (each tier of `inner` is one of these plus `align`).
    tiers: Arc<[usize]>,
}

impl Builder {
    /// Validates the configuration and builds an [`AlignedPool`] whose buffers start at a
    /// multiple of `align` and whose capacities are multiples of it.
    ///
    /// Generated tiers (the default, [`power_of_two_tiers`](Builder::power_of_two_tiers),
    /// [`geometric_tiers`](Builder::geometric_tiers)) are rounded up to multiples of `align`;
    /// the default then runs from `max(256, align)` to 16 MiB. Explicit
    /// [`tiers`](Builder::tiers) must be multiples already. Every other setting means what it
    /// means for a [`BufferPool`], counted in the bytes the pool allocates: a buffer of tier
    /// `t` takes `t + align` (see [`AlignedPool`]).
    ///
    /// # Errors
    /// As [`build`](Builder::build), and [`ConfigError::InvalidAlignment`] for an alignment
    /// that is not a power of two or is above [`MAX_ALIGNMENT`](crate::MAX_ALIGNMENT),
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
        let (inner, tiers) = self.aligned_to(align)?;
        Ok(AlignedPool {
            inner: inner.build()?,
            align,
            tiers: tiers.into(),
        })
    }
}

impl AlignedPool {
    /// A new pool of buffers aligned to `align`, with the default configuration (tiers
    /// rounded to the alignment; see [`Builder::build_aligned`]).
    ///
    /// # Errors
    /// [`ConfigError::InvalidAlignment`] if `align` is not a power of two from 1 to
    /// [`MAX_ALIGNMENT`](crate::MAX_ALIGNMENT).
    pub fn new(align: usize) -> Result<AlignedPool, ConfigError> {
        Builder::new().build_aligned(align)
    }

    /// The size asked of the pool behind for `n` aligned bytes: `n` rounded up to the
    /// alignment, plus the alignment (an add and a mask: no division on the fast path).
    ///
    /// # Errors
    /// [`AllocError::CapacityOverflow`] if that is above `isize::MAX`.
    #[inline(always)]
    fn inner_size(&self, n: usize) -> Result<usize, AllocError> {
        let mask = self.align - 1;
        match n.checked_add(mask + self.align) {
            Some(m) if m & !mask <= isize::MAX as usize => Ok(m & !mask),
            _ => Err(AllocError::CapacityOverflow { requested: n }),
        }
    }

    /// A buffer whose start is a multiple of the alignment and whose capacity is a multiple
    /// of it, at least `n` (the smallest tier that fits, or above the largest tier `n`
    /// rounded up, from the heap and not kept). Its length is 0. With a budget, waits like
    /// [`BufferPool::get`].
    ///
    /// # Panics
    /// As [`BufferPool::get`]: if `n` is above `isize::MAX` (or, with a budget, its charge
    /// above the whole budget). [`try_get`](Self::try_get) returns an error instead.
    #[must_use = "the buffer goes straight back to the pool if unused"]
    #[inline]
    #[cfg_attr(feature = "holders", track_caller)]
    pub fn get(&self, n: usize) -> AlignedBuf {
        match self.inner_size(n) {
            Ok(m) => self.window(self.inner.get(m), 0),
            Err(_) => capacity_overflow(n),
        }
    }

    /// A buffer like [`get`](Self::get)'s with `len() == n`, all zeros (fresh ones come
    /// zeroed from the allocator).
    ///
    /// # Panics
    /// As [`get`](Self::get).
    #[must_use = "the buffer goes straight back to the pool if unused"]
    #[cfg_attr(feature = "holders", track_caller)]
    pub fn get_zeroed(&self, n: usize) -> AlignedBuf {
        match self.inner_size(n) {
            // The whole buffer behind is zeroed (`m >= n + align`), the window's first `n`
            // bytes with it.
            Ok(m) => self.window(self.inner.get_zeroed(m), n),
            Err(_) => capacity_overflow(n),
        }
    }

    /// Like [`get`](Self::get), but never waits and never panics.
    ///
    /// # Errors
    /// As [`BufferPool::try_get`], with `requested` the size asked here.
    ///
    /// ```
    /// let pool = tierpool::AlignedPool::new(512)?;
    /// assert!(pool.try_get(usize::MAX).is_err());
    /// assert_eq!(pool.try_get(1)?.capacity(), 512);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "the buffer goes straight back to the pool if unused"]
    #[cfg_attr(feature = "holders", track_caller)]
    pub fn try_get(&self, n: usize) -> Result<AlignedBuf, AllocError> {
        let m = self.inner_size(n)?;
        match self.inner.try_get(m) {
            Ok(b) => Ok(self.window(b, 0)),
            Err(e) => Err(asked(e, n)),
        }
    }

    /// Like [`get`](Self::get), but waits at most `timeout` for room in the budget.
    ///
    /// # Errors
    /// As [`BufferPool::get_timeout`], with `requested` the size asked here.
    #[must_use = "the buffer goes straight back to the pool if unused"]
    #[cfg_attr(feature = "holders", track_caller)]
    pub fn get_timeout(&self, n: usize, timeout: Duration) -> Result<AlignedBuf, AllocError> {
        let m = self.inner_size(n)?;
        match self.inner.get_timeout(m, timeout) {
            Ok(b) => Ok(self.window(b, 0)),
            Err(e) => Err(asked(e, n)),
        }
    }

    /// A future that resolves to a buffer for `n` bytes once it fits the budget, as
    /// [`BufferPool::acquire`] (ready at once without a budget; cancel-safe).
    ///
    /// # Errors
    /// As [`BufferPool::acquire`], with `requested` the size asked here.
    #[cfg_attr(feature = "holders", track_caller)]
    pub fn acquire(&self, n: usize) -> AcquireAligned<'_> {
        AcquireAligned {
            state: match self.inner_size(n) {
                Ok(m) => AcquireAlignedState::Waiting(self.inner.acquire(m)),
                Err(e) => AcquireAlignedState::Failed(Some(e)),
            },
            pool: self,
            n,
        }
    }

    /// The aligned window of `buf`, a buffer of the pool behind, with `len` initialized
    /// bytes.
    #[inline(always)]
    fn window(&self, buf: PooledBuf, len: usize) -> AlignedBuf {
        AlignedBuf::new(buf, self.align, len)
    }

    /// The alignment of every buffer's start and capacity.
    pub fn alignment(&self) -> usize {
        self.align
    }

    /// The aligned tier sizes, ascending (each a multiple of the alignment).
    pub fn tier_sizes(&self) -> &[usize] {
        &self.tiers
    }

    /// A snapshot of the pool's counters ([`BufferPool::stats`]). Byte figures count what the
    /// pool allocates, a tier's size plus the alignment per buffer; each
    /// [`TierStats::size`](crate::TierStats::size) is the aligned tier's size.
    #[must_use]
    pub fn stats(&self) -> Stats {
        let mut stats = self.inner.stats();
        for t in &mut stats.tiers {
            t.size -= self.align;
        }
        stats
    }

    /// Releases retained memory now, as [`BufferPool::trim`]; returns the bytes released.
    pub fn trim(&self) -> usize {
        self.inner.trim()
    }

    /// The pool's name ([`Builder::name`]).
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// The cap on retained bytes ([`Builder::max_retained_bytes`]).
    pub fn max_retained_bytes(&self) -> usize {
        self.inner.max_retained_bytes()
    }

    /// The budget on bytes in use ([`Builder::max_in_use_bytes`]), if the pool has one.
    pub fn max_in_use_bytes(&self) -> Option<usize> {
        self.inner.max_in_use_bytes()
    }

    /// Publishes the pool's figures to the `metrics` facade now, as
    /// [`BufferPool::publish_metrics`] (feature `metrics`; tier labels are the sizes of the
    /// pool behind, each tier plus the alignment).
    #[cfg(feature = "metrics")]
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub fn publish_metrics(&self) {
        self.inner.publish_metrics();
    }

    /// The tracked buffers out, by call site, as [`BufferPool::holders`] (feature `holders`;
    /// bytes count a tier plus the alignment per buffer).
    #[cfg(feature = "holders")]
    #[cfg_attr(docsrs, doc(cfg(feature = "holders")))]
    pub fn holders(&self) -> Vec<crate::Holder> {
        self.inner.holders()
    }

    /// True if both handles refer to the same pool.
    pub fn same_pool(&self, other: &AlignedPool) -> bool {
        self.inner.same_pool(&other.inner)
    }
}

impl fmt::Debug for AlignedPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AlignedPool")
            .field("align", &self.align)
            .field("tiers", &self.tiers.len())
            .field("inner", &self.inner)
            .finish()
    }
}

/// `requested` in `e` made the size the user asked, not the one asked of the pool behind.
fn asked(e: AllocError, n: usize) -> AllocError {
    match e {
        AllocError::CapacityOverflow { .. } => AllocError::CapacityOverflow { requested: n },
        AllocError::AllocFailed { capacity, .. } => AllocError::AllocFailed {
            requested: n,
            capacity,
        },
        AllocError::OverBudget { in_use, limit, .. } => AllocError::OverBudget {
            requested: n,
            in_use,
            limit,
        },
        AllocError::TimedOut {
            in_use,
            limit,
            waited,
            ..
        } => AllocError::TimedOut {
            requested: n,
            in_use,
            limit,
            waited,
        },
        AllocError::LargerThanBudget { charge, limit, .. } => AllocError::LargerThanBudget {
            requested: n,
            charge,
            limit,
        },
    }
}

#[cold]
#[inline(never)]
#[track_caller]
fn capacity_overflow(n: usize) -> ! {
    panic!(
        "tierpool: {}",
        AllocError::CapacityOverflow { requested: n }
    )
}

/// The future returned by [`AlignedPool::acquire`].
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct AcquireAligned<'a> {
    pool: &'a AlignedPool,
    n: usize,
    state: AcquireAlignedState<'a>,
}

#[derive(Debug)]
enum AcquireAlignedState<'a> {
    Waiting(Acquire<'a>),
    /// The size cannot be served; the error, until polled.
    Failed(Option<AllocError>),
}

impl Future for AcquireAligned<'_> {
    type Output = Result<AlignedBuf, AllocError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        match &mut this.state {
            AcquireAlignedState::Waiting(inner) => Pin::new(inner).poll(cx).map(|r| match r {
                Ok(b) => Ok(this.pool.window(b, 0)),
                Err(e) => Err(asked(e, this.n)),
            }),
            AcquireAlignedState::Failed(e) => Poll::Ready(Err(e
                .take()
                .expect("`AcquireAligned` polled after it completed"))),
        }
    }
}
