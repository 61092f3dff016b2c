//! Layer 4, the buffers a user holds: [`PooledBuf`](crate::PooledBuf) (one owner, a `Vec<u8>`
//! on loan), [`PooledBytes`](crate::PooledBytes) (shared read-only views, with the recycled
//! control block they share), [`AlignedBuf`](crate::AlignedBuf) (an aligned window into a
//! pooled buffer) and, with the `bytes` feature, their `bytes::Buf`/`BufMut` implementations.
//! Imports `engine/` and below.

#[macro_use]
mod bytes_like;
pub(crate) mod pooled;
pub(crate) mod shared;
pub(crate) mod aligned;
#[cfg(feature = "bytes")]
mod bytes;
