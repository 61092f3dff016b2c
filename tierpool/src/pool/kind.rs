//! What a pool hands out: plain buffers ([`Plain`], the default) or aligned windows
//! ([`Aligned`]). A [`BufferPool`](crate::BufferPool) is generic over its [`Kind`], so every
//! way to get a buffer, and every figure and control, is written once for both.
//!
//! An aligned pool is a pool whose tiers are the aligned tiers plus the alignment, and whose
//! buffers are handed out as a window that starts at the first aligned address
//! (`buf/aligned.rs`): the kind says how big a buffer to ask the machinery for, and how to
//! turn what it gives into the handle.

use std::fmt;
use std::sync::Arc;

use crate::buf::aligned::AlignedBuf;
use crate::buf::pooled::PooledBuf;
use crate::engine::error::AllocError;

/// What a [`BufferPool`](crate::BufferPool) hands out: [`Plain`] `Vec<u8>` buffers
/// ([`PooledBuf`]) or, for direct I/O, [`Aligned`] ones ([`AlignedBuf`]).
///
/// Sealed: these two are the kinds there are.
pub trait Kind: sealed::Sealed + Clone + Send + Sync + Unpin + fmt::Debug + 'static {
    /// The buffer handle a get returns.
    type Buf: Send + Sync + fmt::Debug;
}

/// The default [`Kind`]: a pool of `Vec<u8>` buffers handed out as [`PooledBuf`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Plain;

/// The [`Kind`] of an [`AlignedPool`](crate::AlignedPool): buffers whose start and capacity
/// are multiples of an alignment, handed out as [`AlignedBuf`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Aligned {
    align: usize,
    /// The aligned tier sizes; the pool behind has each plus `align`.
    tiers: Arc<[usize]>,
}

impl Aligned {
    pub(crate) fn new(align: usize, tiers: Vec<usize>) -> Self {
        Aligned {
            align,
            tiers: tiers.into(),
        }
    }

    /// The alignment of every buffer's start and capacity.
    pub(crate) fn align(&self) -> usize {
        self.align
    }
}

impl Kind for Plain {
    type Buf = PooledBuf;
}

impl Kind for Aligned {
    type Buf = AlignedBuf;
}

pub(crate) mod sealed {
    use super::*;

    /// What the pool asks of its kind. Not nameable outside the crate, so only `Plain` and
    /// `Aligned` are kinds, and these methods are the crate's own.
    pub trait Sealed {
        /// The size to ask of the machinery for a buffer of at least `n` bytes.
        fn inner_size(&self, n: usize) -> Result<usize, AllocError>;
        /// The handle of `buf`, a buffer of at least `inner_size(n)` bytes, whose first `len` bytes
        /// are initialized (`get_zeroed`; a plain buffer's length is already set).
        fn wrap(&self, buf: PooledBuf, len: usize) -> Self::Buf
        where
            Self: Kind;
        /// `e` as seen by the caller who asked for `n` bytes.
        fn asked(&self, e: AllocError, n: usize) -> AllocError;
        /// The bytes each buffer has beyond its tier (0 for plain buffers).
        fn slack(&self) -> usize;
        /// The tier sizes to report, from the sizes of the pool behind.
        fn tier_sizes<'a>(&'a self, inner: &'a [usize]) -> &'a [usize];
    }

    impl Sealed for Plain {
        #[inline(always)]
        fn inner_size(&self, n: usize) -> Result<usize, AllocError> {
            Ok(n)
        }
        #[inline(always)]
        fn wrap(&self, buf: PooledBuf, _len: usize) -> PooledBuf {
            buf
        }
        #[inline(always)]
        fn asked(&self, e: AllocError, _n: usize) -> AllocError {
            e
        }
        #[inline(always)]
        fn slack(&self) -> usize {
            0
        }
        #[inline(always)]
        fn tier_sizes<'a>(&'a self, inner: &'a [usize]) -> &'a [usize] {
            inner
        }
    }

    impl Sealed for Aligned {
        /// `n` plus the alignment (one checked add on the fast path): the smallest tier
        /// behind that holds it is the tier whose window holds `n`, rounded or not. Above
        /// the largest tier the pool behind rounds it up to the alignment
        /// (`PoolState::oversize_capacity`), so that every window is a whole number of
        /// blocks; [`AllocError::CapacityOverflow`] if the sum overflows.
        #[inline(always)]
        fn inner_size(&self, n: usize) -> Result<usize, AllocError> {
            n.checked_add(self.align)
                .ok_or(AllocError::CapacityOverflow { requested: n })
        }
        #[inline(always)]
        fn wrap(&self, buf: PooledBuf, len: usize) -> AlignedBuf {
            AlignedBuf::new(buf, self.align, len)
        }
        fn asked(&self, e: AllocError, n: usize) -> AllocError {
            e.with_requested(n)
        }
        fn slack(&self) -> usize {
            self.align
        }
        fn tier_sizes<'a>(&'a self, _inner: &'a [usize]) -> &'a [usize] {
            &self.tiers
        }
    }
}
