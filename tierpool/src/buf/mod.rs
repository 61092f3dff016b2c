//! Layer 4, the buffers a user holds. Imports `engine/` and below.
//!
//! | file | what it holds |
//! |---|---|
//! | `bytes_like.rs` | the content traits (eq, ord, hash, `AsRef`, `Borrow`) every handle has, written once |
//! | `pooled.rs` | [`PooledBuf`](crate::PooledBuf): one owner, a `Vec<u8>` on loan, returned through the engine (`engine/ops.rs`) when dropped |
//! | `block.rs` | the control block shared views count on, and its recycling |
//! | `shared.rs` | [`PooledBytes`](crate::PooledBytes): shared, sliceable, read-only views |
//! | `aligned.rs` | [`AlignedBuf`](crate::AlignedBuf): a pooled buffer allocated with an alignment, that cannot grow |
//! | `bytes.rs` | (feature `bytes`) `BufMut` for the writable handles, `Buf` for views, into `Bytes` |

#[macro_use]
mod bytes_like;
pub(crate) mod pooled;
pub(crate) mod block;
pub(crate) mod shared;
pub(crate) mod aligned;
#[cfg(feature = "bytes")]
mod bytes;
