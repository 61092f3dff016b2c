//! What a pool hands out: plain buffers ([`Plain`], the default) or aligned ones
//! ([`Aligned`]). A [`BufferPool`](crate::BufferPool) is generic over its [`Kind`], so every
//! way to get a buffer, and every figure and control, is written once for both.
//!
//! An aligned pool is a pool whose buffers are allocated with its alignment
//! (`sys/alloc.rs`) and handed out as an [`AlignedBuf`], which cannot grow: the kind says how
//! to turn what the machinery gives into the handle.

use crate::buf::aligned::AlignedBuf;
use crate::buf::pooled::PooledBuf;
use std::fmt;

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
}

impl Aligned {
    pub(crate) fn new(align: usize) -> Self {
        Aligned { align }
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
    /// `Aligned` are kinds, and this method is the crate's own.
    pub trait Sealed {
        /// The handle of `buf`, a buffer just taken from the pool (its length already set:
        /// `get_zeroed`'s `n`, else 0).
        fn wrap(&self, buf: PooledBuf) -> Self::Buf
        where
            Self: Kind;
        /// The capacity of a buffer of `n` bytes above the largest tier (saturating).
        fn oversize_capacity(&self, n: usize) -> usize;
        /// The largest capacity above the largest tier that is at most `hi`.
        fn oversize_floor(&self, hi: usize) -> usize;
    }

    impl Sealed for Plain {
        #[inline(always)]
        fn wrap(&self, buf: PooledBuf) -> PooledBuf {
            buf
        }
        fn oversize_capacity(&self, n: usize) -> usize {
            n
        }
        fn oversize_floor(&self, hi: usize) -> usize {
            hi
        }
    }

    impl Sealed for Aligned {
        #[inline(always)]
        fn wrap(&self, buf: PooledBuf) -> AlignedBuf {
            AlignedBuf::new(buf)
        }
        fn oversize_capacity(&self, n: usize) -> usize {
            n.checked_next_multiple_of(self.align).unwrap_or(usize::MAX)
        }
        fn oversize_floor(&self, hi: usize) -> usize {
            hi - hi % self.align
        }
    }
}
