//! Where a held buffer's unread bytes live.

use std::mem::MaybeUninit;

use crate::buf::pooled::PooledBuf;

/// Where a held buffer's unread bytes live: a pooled `Vec` ([`VecStore`]), or, handed to a
/// tokio-util decoder, a `BytesMut` made of one (`io/codec/bytes_mut_store.rs`). [`Core`] runs the rules of the
/// module docs on either.
pub(crate) trait Store: Sized {
    /// The unread bytes.
    fn unread(&self) -> &[u8];
    /// Room after the unread bytes in this allocation.
    fn spare(&self) -> usize;
    /// The allocation's size: what this buffer holds.
    fn held(&self) -> usize;
    /// The room after the unread bytes, to read into.
    fn spare_mut(&mut self) -> &mut [MaybeUninit<u8>];
    /// Marks the first `n` bytes of the room filled.
    ///
    /// # Safety
    /// They are initialized, and `n <= spare()`.
    unsafe fn filled(&mut self, n: usize);
    /// Moves the unread bytes to the allocation's start if that is cheap (they are no more
    /// than the bytes consumed before them), making room after them.
    fn compact(&mut self);
    /// A store of `buf`'s bytes, all unread.
    fn adopt(buf: PooledBuf) -> Self;
    /// Gives the memory back: to its pool where the allocation is still the pooled one and
    /// nothing else shares it.
    fn give_back(self);
}

/// A pooled `Vec`: the unread bytes are `buf[start..]`.
#[derive(Debug)]
pub(crate) struct VecStore {
    /// The pooled buffer.
    pub(in crate::io) buf: PooledBuf,
    /// Where the unread bytes begin.
    pub(in crate::io) start: usize,
}

impl VecStore {
    /// The buffer, its unread bytes at the start.
    pub(crate) fn into_buf(mut self) -> PooledBuf {
        if self.start > 0 {
            let end = self.buf.len();
            self.buf.copy_within(self.start..end, 0);
            self.buf.truncate(end - self.start);
        }
        self.buf
    }
}

impl Store for VecStore {
    fn unread(&self) -> &[u8] {
        &self.buf[self.start..]
    }
    fn spare(&self) -> usize {
        self.buf.capacity() - self.buf.len()
    }
    fn held(&self) -> usize {
        self.buf.capacity()
    }
    fn spare_mut(&mut self) -> &mut [MaybeUninit<u8>] {
        self.buf.spare_capacity_mut()
    }
    unsafe fn filled(&mut self, n: usize) {
        let len = self.buf.len() + n;
        // SAFETY: the caller's contract: `n` more bytes are initialized, within the capacity.
        unsafe { self.buf.set_len(len) };
    }
    fn compact(&mut self) {
        let unread = self.buf.len() - self.start;
        if self.start > 0 && self.start >= unread {
            let end = self.buf.len();
            self.buf.copy_within(self.start..end, 0);
            self.buf.truncate(unread);
            self.start = 0;
        }
    }
    fn adopt(buf: PooledBuf) -> Self {
        VecStore { buf, start: 0 }
    }
    fn give_back(self) {
        drop(self.buf);
    }
}
