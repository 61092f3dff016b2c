//! Helpers shared by the integration tests (each test file uses a subset).

#![allow(dead_code)]

use std::collections::HashSet;
use std::sync::Mutex;

use tierpool::{PooledBuf, Stats};

/// The two identities `Stats` documents, exact once no other thread uses the pool:
/// every get was a hit, a miss or oversize; every buffer handed back is still retained, was
/// released, or was handed out again.
#[track_caller]
pub fn assert_books_balance(s: &Stats) {
    assert_eq!(s.gets, s.hits + s.misses + s.oversize, "gets: {s}");
    assert_eq!(
        s.returned,
        s.retained_buffers as u64 + s.discarded + s.hits,
        "returns: {s}"
    );
}

/// A small deterministic generator (SplitMix64), so the tests need no dependency and repeat.
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Addresses of buffers currently handed out: taking one that is already out is a double
/// hand-out.
#[derive(Default)]
pub struct Outstanding(pub Mutex<HashSet<usize>>);

impl Outstanding {
    /// Records `b` as out; panics if it already was.
    pub fn take(&self, b: &PooledBuf) {
        let fresh = self.0.lock().unwrap().insert(b.as_ptr() as usize);
        assert!(fresh, "buffer {:p} handed out twice at once", b.as_ptr());
    }

    /// Records `b` as back; panics if it was not out.
    pub fn release(&self, b: &PooledBuf) {
        let was = self.0.lock().unwrap().remove(&(b.as_ptr() as usize));
        assert!(was, "released a buffer that was not out");
    }

    /// True when no buffer is out.
    pub fn is_empty(&self) -> bool {
        self.0.lock().unwrap().is_empty()
    }
}
