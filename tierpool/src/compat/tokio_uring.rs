//! The tokio-uring integration (feature `tokio-uring`, Linux): [`tokio_uring::buf::IoBuf`] and
//! [`IoBufMut`] for [`PooledBuf`], [`tokio_uring::buf::IoBuf`] for [`PooledBytes`], so pooled
//! buffers go straight into tokio-uring's io_uring operations.
//!
//! tokio-uring owns a buffer for the length of an operation and hands it back with the result
//! (`BufResult`); if the future is dropped while the kernel still owns it, the runtime keeps it
//! until the operation completes (tokio-uring does not cancel it: a dropped socket read
//! completes when data arrives, and consumes that data) and then drops it, so a `PooledBuf`
//! returns to its pool exactly once, after the kernel is done (tested in
//! `tests/runtimes/tokio_uring.rs`). Reads fill up to the
//! capacity (a tier's size or a larger tier's when lent, at least what was asked); read into
//! `buf.slice(..n)` for exactly
//! `n` bytes. With `tokio_uring::buf::BoundedBuf` in scope, `view.slice(range)` on a
//! [`PooledBytes`] resolves to `BoundedBuf::slice`, which takes the view by value; call
//! [`PooledBytes::slice`] by its path to keep the view.

use tokio_uring::buf::{IoBuf, IoBufMut};

use crate::{AlignedBuf, PooledBuf, PooledBytes};

/// `IoBuf` and `IoBufMut` for a buffer that owns its bytes: `PooledBuf` (a `Vec`) and
/// `AlignedBuf` (one that cannot grow), both with `as_ptr`, `as_mut_ptr`, `len`, `capacity` and
/// `set_len` meaning what they mean for a `Vec`.
macro_rules! owned_io_buf {
    ($($t:ty),*) => {$(
        // SAFETY: the pointer is the start of the heap buffer the value owns, which moving
        // the value does not move and which nothing else frees, reallocates or writes while
        // tokio-uring owns the value (it holds the only handle; the pool gets the buffer back
        // only when the handle is dropped). `bytes_init` = `len()` bytes from it are
        // initialized, `bytes_total` = `capacity()` bytes are allocated.
        #[cfg_attr(docsrs, doc(cfg(feature = "tokio-uring")))]
        unsafe impl IoBuf for $t {
            fn stable_ptr(&self) -> *const u8 {
                self.as_ptr()
            }

            fn bytes_init(&self) -> usize {
                self.len()
            }

            fn bytes_total(&self) -> usize {
                self.capacity()
            }
        }

        // SAFETY: as for `IoBuf` above; `set_init` only raises the length (tokio-uring's own
        // `Vec` does the same), under the caller's guarantee that the bytes up to `init_len`
        // (at most `bytes_total`, the capacity) are initialized: `set_len`'s requirement.
        #[cfg_attr(docsrs, doc(cfg(feature = "tokio-uring")))]
        unsafe impl IoBufMut for $t {
            fn stable_mut_ptr(&mut self) -> *mut u8 {
                self.as_mut_ptr()
            }

            unsafe fn set_init(&mut self, init_len: usize) {
                if self.len() < init_len {
                    // SAFETY: the caller's guarantee, above.
                    unsafe { self.set_len(init_len) };
                }
            }
        }
    )*};
}

owned_io_buf!(PooledBuf, AlignedBuf);

// SAFETY: the pointer is into the shared heap buffer behind the view, which no view can mutate
// and which is freed or returned only when the last view (the one tokio-uring owns among them)
// is dropped; moving the view does not move the buffer. The view's `len()` bytes are
// initialized, and it exposes no more (`bytes_total` = `bytes_init`).
#[cfg_attr(docsrs, doc(cfg(feature = "tokio-uring")))]
unsafe impl IoBuf for PooledBytes {
    fn stable_ptr(&self) -> *const u8 {
        self.as_ptr()
    }

    fn bytes_init(&self) -> usize {
        self.len()
    }

    fn bytes_total(&self) -> usize {
        self.len()
    }
}
