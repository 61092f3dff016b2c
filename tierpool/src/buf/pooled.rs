//! [`PooledBuf`], the buffer handle that goes back to its pool when dropped.

use std::borrow::BorrowMut;
use std::fmt;
use std::io;
use std::mem::{self, ManuallyDrop};
use std::ops::{Deref, DerefMut};

use crate::base::key::{Key, Tag};
use crate::engine::ops;

/// A `Vec<u8>` on loan from a [`BufferPool`](crate::BufferPool); dropping it returns the buffer.
///
/// It dereferences to `Vec<u8>`, so everything a `Vec` can do works: push, extend, resize, even
/// grow beyond the capacity it came with (on return it is filed by its capacity then). It is
/// `Send` and `'static`: move it into a spawned task or another thread, and it still returns to
/// its pool, into the cache of whichever thread drops it. It holds no reference to the pool, only
/// the pool's id, so it may outlive every pool handle; it is then simply freed.
///
/// Its length starts at 0, so safe code can never read what a previous user wrote.
///
/// ```
/// use std::io::Write;
///
/// let pool = tierpool::BufferPool::new();
/// let mut buf = pool.get(64);
/// write!(buf, "status {}", 200)?;
/// assert_eq!(&buf[..], b"status 200");
/// let owned: Vec<u8> = buf.into_vec(); // detached: will not come back
/// assert_eq!(owned, b"status 200");
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct PooledBuf {
    /// Taken exactly once: by `Drop`, or by `into_parts`/`into_vec` (which do not run
    /// `Drop`). `ManuallyDrop`, so that the drop glue has no field left to drop after `Drop`
    /// ran: no resetting stores and no unwinding path, which keeps the glue small enough for
    /// the compiler to inline at every drop site (with a plain `Vec` it stops inlining it
    /// once a crate has many drop sites).
    buf: ManuallyDrop<Vec<u8>>,
    /// The pool's key (`key.rs`).
    key: Key,
    /// The tier the buffer was handed out from (a hint that lets the return path skip the
    /// tier lookup: verified, not trusted), and in a budgeted pool its charge (`key.rs`).
    tag: Tag,
}

// The size the docs promise: a `Vec` and eight bytes.
const _: () = assert!(mem::size_of::<PooledBuf>() == 32);

impl PooledBuf {
    #[inline(always)]
    pub(crate) fn new(buf: Vec<u8>, key: Key, tag: Tag) -> Self {
        PooledBuf {
            buf: ManuallyDrop::new(buf),
            key,
            tag,
        }
    }

    /// The key of the pool it came from.
    #[inline(always)]
    pub(crate) fn key(&self) -> Key {
        self.key
    }

    /// The parts of a `PooledBuf`, without running its destructor.
    #[inline(always)]
    pub(crate) fn into_parts(self) -> (Vec<u8>, Tag) {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped (`ManuallyDrop`), so `buf` is taken only here.
        (unsafe { ManuallyDrop::take(&mut this.buf) }, this.tag)
    }

    /// Detaches the buffer from its pool: the returned `Vec` is an ordinary one and will not be
    /// given back (unless you hand it to [`BufferPool::put`](crate::BufferPool::put)).
    #[must_use = "the buffer is freed, not returned to the pool, if the Vec is dropped"]
    #[inline]
    pub fn into_vec(self) -> Vec<u8> {
        let mut this = ManuallyDrop::new(self);
        // The bytes leave the pool: with a budget they stop counting as in use.
        ops::refund(this.key, this.tag);
        // SAFETY: `this` is never dropped (`ManuallyDrop`), so `buf` is taken only here.
        unsafe { ManuallyDrop::take(&mut this.buf) }
    }
}

impl Drop for PooledBuf {
    #[inline(always)]
    fn drop(&mut self) {
        // SAFETY: `drop` runs once, and nothing uses `buf` after it; `into_parts` and
        // `into_vec`, the only other takers, do not run `Drop`.
        let buf = unsafe { ManuallyDrop::take(&mut self.buf) };
        ops::put(self.key, self.tag, buf);
    }
}

impl Deref for PooledBuf {
    type Target = Vec<u8>;
    #[inline(always)]
    fn deref(&self) -> &Vec<u8> {
        &self.buf
    }
}

impl DerefMut for PooledBuf {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }
}

impl AsMut<[u8]> for PooledBuf {
    #[inline]
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.buf
    }
}

impl BorrowMut<[u8]> for PooledBuf {
    fn borrow_mut(&mut self) -> &mut [u8] {
        &mut self.buf
    }
}

impl io::Write for PooledBuf {
    #[inline]
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    #[inline]
    fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
        self.buf.extend_from_slice(data);
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl fmt::Debug for PooledBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PooledBuf")
            .field("len", &self.buf.len())
            .field("capacity", &self.buf.capacity())
            .field("pool", &self.key)
            .finish()
    }
}

bytes_like!(PooledBuf);
