//! The monoio integration (feature `monoio`, Linux): monoio's [`IoBuf`] and [`IoBufMut`] for
//! [`PooledBuf`] and [`IoBuf`] for [`PooledBytes`], so pooled buffers go straight into
//! monoio's io_uring operations. As with the other completion-based runtimes, the runtime owns
//! a buffer for the length of an operation and keeps it until the kernel completes it, so a
//! `PooledBuf` returns to its pool exactly once, after the kernel is done (tested in
//! `tests/monoio.rs`). Reads fill up to the capacity (a tier's size); with monoio's `IoBuf`
//! in scope, call [`PooledBytes::slice`] by its path (`IoBuf::slice` takes the view by value).

use monoio::buf::{IoBuf, IoBufMut};

use crate::{AlignedBuf, PooledBuf, PooledBytes};

// SAFETY: the pointer is the `Vec`'s heap buffer, which moving the `PooledBuf` does not move
// and which nothing else frees or reallocates while monoio owns the value (the pool gets the
// buffer back only when the handle is dropped); `bytes_init` is `len()`, initialized bytes.
#[cfg_attr(docsrs, doc(cfg(feature = "monoio")))]
unsafe impl IoBuf for PooledBuf {
    fn read_ptr(&self) -> *const u8 {
        self.as_ptr()
    }

    fn bytes_init(&self) -> usize {
        self.len()
    }
}

// SAFETY: as above: a stable pointer to `capacity()` allocated bytes (`bytes_total`);
// `set_init` sets the length, under the caller's guarantee that the bytes up to `pos` (at most
// the capacity) are initialized, which is `Vec::set_len`'s requirement.
#[cfg_attr(docsrs, doc(cfg(feature = "monoio")))]
unsafe impl IoBufMut for PooledBuf {
    fn write_ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr()
    }

    fn bytes_total(&mut self) -> usize {
        self.capacity()
    }

    unsafe fn set_init(&mut self, pos: usize) {
        // `pos` becomes the length, as monoio's contract says and its `Vec` does (a short
        // read into a longer buffer leaves no stale bytes counted).
        // SAFETY: the caller guarantees the bytes up to `pos` (<= capacity) are initialized.
        unsafe { self.set_len(pos) };
    }
}

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

// SAFETY: the pointer is the aligned start of the heap buffer the `AlignedBuf` owns, which
// moving it does not move and which nothing else frees or writes while monoio owns the value;
// `bytes_init` = `len()` bytes from it are initialized.
#[cfg_attr(docsrs, doc(cfg(feature = "monoio")))]
unsafe impl IoBuf for AlignedBuf {
    fn read_ptr(&self) -> *const u8 {
        self.as_ptr()
    }

    fn bytes_init(&self) -> usize {
        self.len()
    }
}

// SAFETY: as above: a stable pointer to `capacity()` bytes (`bytes_total`); `set_init` sets
// the length, under the caller's guarantee that the bytes up to `pos` (at most the capacity)
// are initialized.
#[cfg_attr(docsrs, doc(cfg(feature = "monoio")))]
unsafe impl IoBufMut for AlignedBuf {
    fn write_ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr()
    }

    fn bytes_total(&mut self) -> usize {
        self.capacity()
    }

    unsafe fn set_init(&mut self, pos: usize) {
        // `pos` becomes the length, as monoio's contract says.
        // SAFETY: the caller guarantees the bytes up to `pos` (<= capacity) are initialized.
        unsafe { self.set_len(pos) };
    }
}
