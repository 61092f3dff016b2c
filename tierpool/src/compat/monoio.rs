//! The monoio integration (feature `monoio`, Linux): monoio's [`IoBuf`] and [`IoBufMut`] for
//! [`PooledBuf`] and [`IoBuf`] for [`PooledBytes`], so pooled buffers go straight into
//! monoio's io_uring operations. As with the other completion-based runtimes, the runtime owns
//! a buffer for the length of an operation and keeps it until the kernel completes it, so a
//! `PooledBuf` returns to its pool exactly once, after the kernel is done (tested in
//! `tests/runtimes/monoio.rs`). Reads fill up to the capacity (a tier's size, or a larger tier's when
//! lent: read into a slice for exactly `n` bytes); with monoio's `IoBuf`
//! in scope, call [`PooledBytes::slice`] by its path (`IoBuf::slice` takes the view by value).

use monoio::buf::{IoBuf, IoBufMut};

use crate::{AlignedBuf, PooledBuf, PooledBytes};

/// `IoBuf` and `IoBufMut` for a buffer that owns its bytes: `PooledBuf` (a `Vec`) and
/// `AlignedBuf` (an aligned one), both with `as_ptr`, `as_mut_ptr`, `len`, `capacity` and
/// `set_len` meaning what they mean for a `Vec`.
macro_rules! owned_io_buf {
    ($($t:ty),*) => {$(
        // SAFETY: the pointer is the start of the heap buffer the value owns, which moving
        // the value does not move and which nothing else frees, reallocates or writes while
        // monoio owns the value (it holds the only handle; the pool gets the buffer back only
        // when the handle is dropped); `bytes_init` is `len()`, initialized bytes.
        #[cfg_attr(docsrs, doc(cfg(feature = "monoio")))]
        unsafe impl IoBuf for $t {
            fn read_ptr(&self) -> *const u8 {
                self.as_ptr()
            }

            fn bytes_init(&self) -> usize {
                self.len()
            }
        }

        // SAFETY: as above: a stable pointer to `capacity()` allocated bytes (`bytes_total`);
        // `set_init` sets the length to `pos`, as monoio's contract says and its `Vec` does
        // (a short read into a longer buffer leaves no stale bytes counted), under the
        // caller's guarantee that the bytes up to `pos` (at most the capacity) are
        // initialized: `set_len`'s requirement.
        #[cfg_attr(docsrs, doc(cfg(feature = "monoio")))]
        unsafe impl IoBufMut for $t {
            fn write_ptr(&mut self) -> *mut u8 {
                self.as_mut_ptr()
            }

            fn bytes_total(&mut self) -> usize {
                self.capacity()
            }

            unsafe fn set_init(&mut self, pos: usize) {
                // SAFETY: the caller's guarantee, above.
                unsafe { self.set_len(pos) };
            }
        }
    )*};
}

owned_io_buf!(PooledBuf, AlignedBuf);

// SAFETY: the pointer is into the shared heap buffer behind the view, which no view mutates and
// which is freed or returned only when the last view is dropped; moving the view does not move
// the buffer. The view's `len()` bytes are initialized.
#[cfg_attr(docsrs, doc(cfg(feature = "monoio")))]
unsafe impl IoBuf for PooledBytes {
    fn read_ptr(&self) -> *const u8 {
        self.as_ptr()
    }

    fn bytes_init(&self) -> usize {
        self.len()
    }
}
