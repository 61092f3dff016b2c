//! The compio integration (feature `compio`): [`compio_buf::IoBuf`], [`IoBufMut`] and
//! [`SetLen`] for [`PooledBuf`], [`compio_buf::IoBuf`] for [`PooledBytes`], so pooled buffers
//! go straight into compio's completion-based operations (io_uring on Linux, IOCP on Windows).
//!
//! A completion-based runtime owns the buffer for the length of an operation: the buffer is
//! moved into the operation and handed back with its result (`BufResult`). If the future is
//! dropped while the kernel still owns the buffer, compio keeps the buffer until the operation
//! completes and then drops it, so a `PooledBuf` goes back to its pool exactly once, after the
//! kernel is done with it (tested in `tests/runtimes/compio.rs`).
//!
//! Two things to know when using them:
//! - compio reads fill a buffer up to its **capacity**, and a pooled buffer's capacity is its
//!   tier's size, or up to twice that when a larger tier's buffer is lent (at least what was
//!   asked: `pool.get(10_000)` has 10,240 bytes with the default tiers when fresh). To read
//!   exactly `n` bytes, read into `buf.slice(..n)` ([`IoBuf::slice`]) and take the buffer back
//!   with `into_inner()`.
//! - With [`compio_buf::IoBuf`] in scope, `view.slice(range)` on a [`PooledBytes`] resolves to
//!   `IoBuf::slice`, which takes the view by value; call [`PooledBytes::slice`] by its path to
//!   keep the view.
//!
//! ```
//! # fn main() -> std::io::Result<()> {
//! use compio::buf::{BufResult, IntoInner, IoBuf};
//! use compio::io::AsyncReadExt;
//!
//! let pool = tierpool::BufferPool::new();
//! let rt = match compio::runtime::Runtime::new() {
//!     Ok(rt) => rt,
//!     Err(_) => return Ok(()), // no io_uring on this machine
//! };
//! rt.block_on(async {
//!     let mut src = &b"a pooled read"[..];
//!     let BufResult(r, slice) = src.read_exact(pool.get(13).slice(..13)).await;
//!     r?;
//!     let buf = slice.into_inner(); // the PooledBuf, 13 bytes in, back to the pool on drop
//!     assert_eq!(&buf[..], b"a pooled read");
//!     Ok(())
//! })
//! # }
//! ```
//!
//! Both traits are safe to implement in compio-buf 0.8; what the kernel relies on is that the
//! pointer they report stays valid and in place while the operation runs. For these types it
//! does: the bytes live in a heap allocation owned by the value (a `Vec`'s buffer, or the
//! shared buffer behind a `PooledBytes` view), which moving the value does not move, and which
//! nothing else frees or mutates while the operation owns the value.

use std::mem::MaybeUninit;

use compio_buf::{IoBuf, IoBufMut, ReserveError, ReserveExactError, SetLen};

use crate::{AlignedBuf, PooledBuf, PooledBytes};

#[cfg_attr(docsrs, doc(cfg(feature = "compio")))]
impl IoBuf for PooledBuf {
    /// The buffer's `len()` bytes: what a write sends.
    #[inline]
    fn as_init(&self) -> &[u8] {
        self
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "compio")))]
impl SetLen for PooledBuf {
    /// Sets the `Vec`'s length after a read filled it.
    ///
    /// # Safety
    /// As [`SetLen::set_len`]: `len <= capacity()`, and the bytes up to `len` are initialized.
    #[inline]
    unsafe fn set_len(&mut self, len: usize) {
        // SAFETY: the caller upholds `Vec::set_len`'s contract, which is `SetLen::set_len`'s.
        unsafe { Vec::set_len(self, len) }
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "compio")))]
impl IoBufMut for PooledBuf {
    /// The whole capacity, as the `Vec`'s: a read fills it from the start (not from `len()`)
    /// and sets the length to what it read.
    #[inline]
    fn as_uninit(&mut self) -> &mut [MaybeUninit<u8>] {
        IoBufMut::as_uninit(&mut **self)
    }

    /// Grows the buffer like a `Vec` (it is then filed by its new capacity when returned).
    fn reserve(&mut self, len: usize) -> Result<(), ReserveError> {
        IoBufMut::reserve(&mut **self, len)
    }

    fn reserve_exact(&mut self, len: usize) -> Result<(), ReserveExactError> {
        IoBufMut::reserve_exact(&mut **self, len)
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "compio")))]
impl IoBuf for PooledBytes {
    /// The view's bytes: what a write sends. The buffer returns to its pool when the last
    /// view (this one, after the operation hands it back and it is dropped) goes.
    #[inline]
    fn as_init(&self) -> &[u8] {
        self
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "compio")))]
impl IoBuf for AlignedBuf {
    /// The buffer's `len()` bytes, from its aligned start: what a write sends.
    #[inline]
    fn as_init(&self) -> &[u8] {
        self
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "compio")))]
impl SetLen for AlignedBuf {
    /// Sets the length after a read filled the buffer.
    ///
    /// # Safety
    /// As [`SetLen::set_len`]: `len <= capacity()`, and the bytes up to `len` are initialized.
    #[inline]
    unsafe fn set_len(&mut self, len: usize) {
        // SAFETY: the caller upholds `AlignedBuf::set_len`'s contract, which is this one.
        unsafe { AlignedBuf::set_len(self, len) }
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "compio")))]
impl IoBufMut for AlignedBuf {
    /// The whole capacity from the aligned start: a read fills it from the start (not from
    /// `len()`) and sets the length to what it read. It cannot grow: `reserve` beyond the
    /// capacity is `NotSupported` (the default).
    #[inline]
    fn as_uninit(&mut self) -> &mut [MaybeUninit<u8>] {
        let cap = self.capacity();
        // SAFETY: `capacity()` bytes from the start lie in the buffer (`AlignedBuf`'s
        // invariants) and are exclusively borrowed. As with compio-buf's own `Vec` and `[u8]`
        // implementations, safe code could write `MaybeUninit::uninit()` over the first
        // `len()` bytes through this slice; compio's operations only write bytes read and then
        // set the length, and the trait's design leaves that hole open for every type.
        unsafe { std::slice::from_raw_parts_mut(self.as_mut_ptr().cast(), cap) }
    }
}
