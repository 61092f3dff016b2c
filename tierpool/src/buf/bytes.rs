//! The `bytes` integration (feature `bytes`): [`PooledBuf`] as a [`BufMut`], zero-copy
//! [`PooledBuf::into_bytes`], and [`PooledBytes`] as a [`Buf`] and into [`Bytes`].

use bytes::buf::UninitSlice;
use bytes::{Buf, BufMut, Bytes};

use crate::{AlignedBuf, PooledBuf, PooledBytes};

// SAFETY: every method forwards to `Vec<u8>`'s own `BufMut` implementation, whose contract
// this type inherits unchanged (it is a `Vec<u8>` with a return address).
#[cfg_attr(docsrs, doc(cfg(feature = "bytes")))]
unsafe impl BufMut for PooledBuf {
    #[inline]
    fn remaining_mut(&self) -> usize {
        BufMut::remaining_mut(&**self)
    }

    #[inline]
    unsafe fn advance_mut(&mut self, cnt: usize) {
        // SAFETY: the caller upholds `advance_mut`'s contract, which is `Vec`'s.
        unsafe { BufMut::advance_mut(&mut **self, cnt) }
    }

    #[inline]
    fn chunk_mut(&mut self) -> &mut UninitSlice {
        BufMut::chunk_mut(&mut **self)
    }

    #[inline]
    fn put_slice(&mut self, src: &[u8]) {
        self.extend_from_slice(src);
    }
}

impl PooledBuf {
    /// The contents as a [`Bytes`], without copying; the buffer returns to its pool when the
    /// last clone or slice of that `Bytes` is dropped. Costs one small allocation
    /// (`Bytes::from_owner`'s control block); [`into_shared`](Self::into_shared), the cheap
    /// way to a shared form (what `freeze` is in `bytes`), does not, and its
    /// [`PooledBytes`] converts into `Bytes` without a copy too.
    ///
    /// ```
    /// let pool = tierpool::BufferPool::new();
    /// let mut buf = pool.get(16);
    /// buf.extend_from_slice(b"hello world");
    /// let bytes = buf.into_bytes();
    /// let hello = bytes.slice(..5);
    /// drop(bytes);
    /// assert_eq!(&hello[..], b"hello");
    /// drop(hello); // the buffer goes back now
    /// assert_eq!(pool.stats().returned, 1);
    /// ```
    #[must_use = "the buffer goes back to the pool if the Bytes is dropped"]
    #[cfg_attr(docsrs, doc(cfg(feature = "bytes")))]
    pub fn into_bytes(self) -> Bytes {
        Bytes::from_owner(self)
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "bytes")))]
impl Buf for PooledBytes {
    #[inline]
    fn remaining(&self) -> usize {
        self.len()
    }

    #[inline]
    fn chunk(&self) -> &[u8] {
        self.as_slice()
    }

    #[inline]
    fn advance(&mut self, cnt: usize) {
        PooledBytes::advance(self, cnt);
    }

    fn copy_to_bytes(&mut self, len: usize) -> Bytes {
        // A zero-copy split instead of the default copy.
        Bytes::from(self.split_to(len))
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "bytes")))]
impl From<PooledBytes> for Bytes {
    /// Zero-copy (one small allocation for the `Bytes` owner block); the buffer returns to its
    /// pool when the last `Bytes` and the last `PooledBytes` view are dropped.
    fn from(v: PooledBytes) -> Bytes {
        Bytes::from_owner(v)
    }
}

// SAFETY: `remaining_mut` is the spare capacity, which never grows (an aligned buffer cannot:
// a buffer allocated with its alignment cannot be reallocated as a `Vec`); `chunk_mut` is exactly those bytes, and `advance_mut` raises
// the length by at most them, after the caller initialized them (its contract), so the
// initialized-length invariant of `AlignedBuf` holds.
#[cfg_attr(docsrs, doc(cfg(feature = "bytes")))]
unsafe impl BufMut for AlignedBuf {
    #[inline]
    fn remaining_mut(&self) -> usize {
        self.capacity() - self.len()
    }

    #[inline]
    unsafe fn advance_mut(&mut self, cnt: usize) {
        let new = self.len() + cnt;
        assert!(
            new <= self.capacity(),
            "advance_mut({cnt}) past the end of an aligned buffer ({} of {} bytes left)",
            self.remaining_mut(),
            self.capacity()
        );
        // SAFETY: within the capacity (checked), and the caller initialized the `cnt` bytes.
        unsafe { self.set_len(new) }
    }

    #[inline]
    fn chunk_mut(&mut self) -> &mut UninitSlice {
        UninitSlice::uninit(self.spare_capacity_mut())
    }

    #[inline]
    fn put_slice(&mut self, src: &[u8]) {
        self.extend_from_slice(src);
    }
}

impl AlignedBuf {
    /// The contents as a [`Bytes`], without copying (it starts at the buffer's aligned
    /// start); the buffer returns to its pool when the last clone or slice is dropped. One
    /// small allocation (`Bytes::from_owner`'s block), as [`PooledBuf::into_bytes`].
    ///
    /// ```
    /// let pool = tierpool::AlignedPool::with_alignment(4096)?;
    /// let mut block = pool.get(4096);
    /// block.resize(4096, 1);
    /// let bytes = block.into_bytes();
    /// assert_eq!(bytes.as_ptr() as usize % 4096, 0);
    /// assert_eq!(bytes.len(), 4096);
    /// # Ok::<(), tierpool::ConfigError>(())
    /// ```
    #[must_use = "the buffer goes back to the pool if the Bytes is dropped"]
    #[cfg_attr(docsrs, doc(cfg(feature = "bytes")))]
    pub fn into_bytes(self) -> Bytes {
        Bytes::from_owner(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BufferPool;

    #[test]
    fn buf_mut_and_into_bytes() {
        let pool = BufferPool::new();
        let mut b = pool.get(8);
        b.put_u32(0xdead_beef);
        b.put_slice(b"abc");
        let frozen = b.into_bytes();
        assert_eq!(&frozen[..], b"\xde\xad\xbe\xefabc");
        let mut parts = frozen.clone();
        let head = parts.split_to(4);
        drop(frozen);
        let other = std::thread::spawn(move || {
            assert_eq!(&parts[..], b"abc");
            drop(parts);
        });
        other.join().unwrap();
        assert_eq!(pool.stats().returned, 0);
        drop(head);
        assert_eq!(
            pool.stats().returned,
            1,
            "returned exactly once, with the last view"
        );
    }

    #[test]
    fn aligned_buf_mut_and_into_bytes() {
        let pool = crate::AlignedPool::with_alignment(512).unwrap();
        let mut b = pool.get(512);
        b.put_u32(7);
        b.put_bytes(1, 508);
        assert_eq!(b.remaining_mut(), 0);
        assert_eq!(b.len(), 512);
        let over = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| b.put_u8(0)));
        assert!(
            over.is_err(),
            "BufMut panics past remaining_mut, as its contract says"
        );
        let frozen = b.into_bytes();
        assert_eq!(frozen.as_ptr() as usize % 512, 0);
        assert_eq!(&frozen[..4], &[0, 0, 0, 7]);
        let tail = frozen.slice(4..);
        drop(frozen);
        assert!(tail.iter().all(|&x| x == 1));
        assert_eq!(pool.stats().returned, 0);
        drop(tail);
        assert_eq!(pool.stats().returned, 1);
    }

    #[test]
    fn pooled_bytes_as_buf() {
        let pool = BufferPool::new();
        let mut b = pool.get(8);
        b.put_slice(&[1, 2, 3, 4, 5, 6]);
        let mut v = b.into_shared();
        assert_eq!(v.get_u16(), 0x0102);
        let mid = v.copy_to_bytes(2);
        assert_eq!(&mid[..], &[3, 4]);
        assert_eq!(v.remaining(), 2);
        let bytes = Bytes::from(v);
        assert_eq!(&bytes[..], &[5, 6]);
        drop((mid, bytes));
        assert_eq!(pool.stats().returned, 1);
    }
}
