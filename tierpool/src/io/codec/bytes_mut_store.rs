//! A pooled buffer handed to a codec as a `BytesMut`, and its way back: what `FramedRead` and
//! `FramedWrite` share.

use std::fmt;

use bytes::{Bytes, BytesMut};

use crate::base::key::{Key, Tag};
use crate::buf::pooled::PooledBuf;
use crate::engine::ops;
use crate::io::parts::Store;

/// A pooled buffer handed to a codec as a `BytesMut` (no copy), and how to give it back.
pub(super) struct BytesMutStore {
    /// The buffer as the codec sees it.
    pub(super) bm: BytesMut,
    key: Key,
    tag: Tag,
    /// The pooled allocation: its address and capacity. A `BytesMut` converted back into a
    /// `Vec` with both is that allocation (not one a decoder's `reserve` made).
    addr: usize,
    cap: usize,
}

impl fmt::Debug for BytesMutStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BytesMutStore")
            .field("len", &self.bm.len())
            .field("capacity", &self.cap)
            .finish()
    }
}

impl BytesMutStore {
    pub(super) fn new(buf: PooledBuf) -> BytesMutStore {
        let key = buf.key();
        let (v, tag) = buf.into_parts();
        let (addr, cap) = (v.as_ptr() as usize, v.capacity());
        // No copy: `Bytes` takes the `Vec` (allocating its small control block when the
        // `Vec` is not full), and a unique `Bytes` becomes a `BytesMut` in place.
        let bm = BytesMut::from(Bytes::from(v));
        BytesMutStore {
            bm,
            key,
            tag,
            addr,
            cap,
        }
    }
}

impl Store for BytesMutStore {
    fn unread(&self) -> &[u8] {
        &self.bm
    }
    fn spare(&self) -> usize {
        self.bm.capacity() - self.bm.len()
    }
    fn held(&self) -> usize {
        self.cap.max(self.bm.capacity())
    }
    fn spare_mut(&mut self) -> &mut [std::mem::MaybeUninit<u8>] {
        self.bm.spare_capacity_mut()
    }
    unsafe fn filled(&mut self, n: usize) {
        let len = self.bm.len() + n;
        // SAFETY: the caller's contract: `n` more bytes are initialized, within the capacity.
        unsafe { self.bm.set_len(len) };
    }
    fn compact(&mut self) {
        // `bytes` moves the unread bytes to the start when that is cheap and nothing else
        // shares the allocation; it never allocates here.
        let room = self.held().saturating_sub(self.bm.len());
        let _ = self.bm.try_reclaim(room);
    }
    fn adopt(buf: PooledBuf) -> Self {
        BytesMutStore::new(buf)
    }
    fn give_back(self) {
        drop(self);
    }
}

impl Drop for BytesMutStore {
    /// Gives the buffer back: a unique `BytesMut` gives its whole allocation back (unread
    /// bytes moved to the front), a shared one a copy of its bytes, and the allocation stays
    /// with the frames that share it.
    fn drop(&mut self) {
        let v: Vec<u8> = std::mem::take(&mut self.bm).into();
        if v.as_ptr() as usize == self.addr && v.capacity() == self.cap {
            ops::put(self.key, self.tag, v);
        } else {
            // The pooled allocation left the pool (to the frames, or freed by a decoder's
            // `reserve`): its charge goes back. This buffer is the decoder's (a `reserve`
            // sized it, often to a whole frame's declared length) or a copy of unread bytes:
            // freed, not kept. Filed under the largest tier below its capacity, it would be
            // handed out later as that tier, larger than asked, and a read buffer parked in
            // it would hold more than its bound.
            ops::refund(self.key, self.tag);
            drop(v);
        }
    }
}
