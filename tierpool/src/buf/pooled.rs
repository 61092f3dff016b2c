//! [`PooledBuf`], the buffer handle that goes back to its pool when dropped.

use std::borrow::BorrowMut;
use std::fmt;
use std::io;
use std::mem::{self, ManuallyDrop};
use std::ops::{Deref, DerefMut};

use crate::base::key::{Key, Tag};
use crate::base::sync::Arc;
use crate::engine::cache::Owner;
use crate::engine::cache::Pushed;
use crate::engine::local::{self, SlowOp};
use crate::engine::state::PoolState;
use crate::engine::{policy, registry};
use crate::observe::holders::is_tracked;
use crate::sys::alloc::free;

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

/// Returns `v` to the pool with key `key`: the drop path of [`PooledBuf`] and
/// [`BufferPool::put`](crate::BufferPool::put). A pool with a budget takes the same path:
/// a buffer on a stack stays charged (`budget.rs`).
#[inline(always)]
pub(crate) fn give_back(key: Key, tag: Tag, mut v: Vec<u8>) {
    match local::fast_push(key, tag.hint(), &mut v) {
        // Taken: `v` is an empty `Vec` now, with nothing to free.
        Pushed::Kept => mem::forget(v),
        Pushed::Due => {
            mem::forget(v);
            local::service(key, tag.hint());
        }
        Pushed::Refused => {
            // The `Vec` goes to the slow path as its parts, in registers: passed whole (by
            // reference to a copy, the ABI's way for 24 bytes), it can make the compiler keep
            // `v` in memory on the fast path too.
            let mut v = mem::ManuallyDrop::new(v);
            give_back_slow(v.as_mut_ptr(), v.len(), v.capacity(), key, tag)
        }
    }
}

/// A return the fast path could not take: through this thread's cache's slow path, or
/// without one. The buffer comes as the parts of a `Vec` whose ownership passes here.
#[cold]
#[inline(never)]
fn give_back_slow(ptr: *mut u8, len: usize, cap: usize, key: Key, tag: Tag) {
    // SAFETY: the parts of a `Vec<u8>` the caller gave up (`ManuallyDrop`), so this is its
    // only owner.
    let v = unsafe { Vec::from_raw_parts(ptr, len, cap) };
    local::slow(key, Return { v, key, tag });
}

/// A buffer coming back to the pool with key `key`, on the slow path.
struct Return {
    v: Vec<u8>,
    key: Key,
    tag: Tag,
}

impl SlowOp for Return {
    type Out = ();
    fn find_pool(&self) -> Option<Arc<PoolState>> {
        registry::lookup(self.key)
    }
    fn with_cache(self, o: &Owner<'_>, pool: &PoolState) {
        policy::put_slow(o, pool, self.v, pool.untrack(self.tag));
    }
    fn without_cache(self, pool: Option<&PoolState>) {
        match pool {
            Some(pool) => pool.put_direct(self.v, pool.untrack(self.tag)),
            None => free(self.v, self.key.align()), // the pool is gone
        }
    }
}

/// Gives the charge recorded in `tag` back to the budget of the pool with key `key`: a
/// buffer of a budgeted pool left the pool (`into_vec`, `into_bytes`).
#[cold]
pub(crate) fn refund(key: Key, tag: Tag) {
    // A tracked buffer (feature `holders`) leaves its entry too, budget or not.
    if (!key.budgeted() && !is_tracked(tag)) || tag == Tag::NONE {
        return;
    }
    local::with_pool(
        key,
        || registry::lookup(key),
        |pool| {
            if let Some(pool) = pool {
                let tag = pool.untrack(tag);
                if key.budgeted() {
                    pool.refund(pool.charge_of(tag));
                }
            }
        },
    );
}

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
        refund(this.key, this.tag);
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
        give_back(self.key, self.tag, buf);
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
