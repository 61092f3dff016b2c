//! [`ReadRule`]: how much a reader holds while it waits and how it grows, as arithmetic over
//! a pool's tiers, with no I/O in it.

use crate::buf::pooled::PooledBuf;
use crate::pool::buffer_pool::BufferPool;

/// The least a read offers: tokio-util's `FramedRead` starts with an 8 KiB buffer.
pub(crate) const MIN_READ: usize = 8 << 10;
/// The most a read offers.
const MAX_READ: usize = 256 << 10;
/// The largest fresh buffer a read takes for sizes that repeat (larger frames grow into
/// their buffers as they arrive).
const MAX_LEARNED: usize = 4 << 20;

/// The read rules: how much memory a connection's receive buffer holds while it waits, how
/// much a read offers, and how a buffer grows. Every pooled reader of this crate
/// ([`ReadBuffer`](crate::io::ReadBuffer), the decoder bridge, the frame and chain readers,
/// readiness-first reads) follows them, and so can a protocol crate's reader: the rule is
/// arithmetic over the pool's tiers and a few remembered sizes, with no I/O, so any read
/// loop (an `AsyncRead`, an `http_body::Body`, a QUIC stream) can apply it.
///
/// With `P` bytes unread (received, not yet consumed) and `T0` the pool's smallest tier:
///
/// - **Drained, it goes back.** A buffer whose every byte is consumed goes back to the pool
///   before the next wait ([`drained`](Self::drained) then remembers how much it had to
///   hold), so an idle connection holds nothing.
/// - **A wait holds at most `max(2P, T0)`.** Before waiting for more bytes, a buffer larger
///   than [`bound(P)`](Self::bound) is replaced by the largest tier within it that holds the
///   `P` bytes ([`shrink`](Self::shrink), which copies them): however a peer trickles its
///   bytes, it pins twice what it sent. A buffer the program grew and the pool filed under a
///   tier (more capacity than the tier) is passed over for the next tier down.
/// - **A read offers enough.** [`offer`](Self::offer) is at least 8 KiB (tokio-util's
///   `FramedRead` starts with 8 KiB, so no more receives than it), doubled after a read that
///   filled its offer (more is waiting), up to 256 KiB, and halved after four reads in a row
///   that used less than a quarter of it ([`record_read`](Self::record_read)).
/// - **Sizes that repeat are remembered.** [`repeated`](Self::repeated) is the smaller of
///   what the last two buffers had to hold when they drained: a fresh buffer for a read takes
///   at least that ([`fresh_capacity`](Self::fresh_capacity), up to 4 MiB), so frames of a
///   size that repeats (64 KiB values, say) land in one buffer instead of regrowing from the
///   offer every time, while one large frame among small ones changes nothing. A message of
///   known length at most `repeated` may take its whole length at once: its peer has sent
///   two at least as long.
/// - **Growth is geometric.** Bytes that do not fit move to a buffer of the largest tier that
///   holds them twice over ([`grow_capacity`](Self::grow_capacity)), so copying stays linear
///   in the bytes received.
///
/// The bound needs tiers at most a factor of two apart, which every generated tier set (the
/// default, [`power_of_two_tiers`](crate::Builder::power_of_two_tiers),
/// [`geometric_tiers`](crate::Builder::geometric_tiers)) is; above the largest tier, buffers
/// are exact. It counts the capacities the reader asked for, so a reader takes its buffers
/// with [`get_exact`](BufferPool::get_exact) or [`PollAcquire`](crate::PollAcquire), never
/// with a get that may lend a larger tier's buffer.
///
/// ```
/// use tierpool::io::ReadRule;
///
/// let pool = tierpool::BufferPool::new();
/// let mut rule = ReadRule::new(&pool);
/// assert_eq!(rule.offer(), 8 << 10);
/// rule.record_read(8 << 10, 8 << 10); // the read filled its offer: more is waiting
/// assert_eq!(rule.offer(), 16 << 10);
///
/// // 100 bytes of a frame arrived into a 64 KiB buffer: before waiting for the rest, it
/// // moves to the smallest tier (256 B here, within max(200, 256)).
/// let mut buf = pool.get_exact(64 << 10);
/// buf.extend_from_slice(&[7; 100]);
/// assert_eq!(rule.bound(100), 256);
/// let smaller = rule.shrink(&pool, &buf, buf.capacity()).expect("a smaller buffer");
/// assert_eq!((smaller.capacity(), &smaller[..]), (256, &buf[..]));
/// ```
#[derive(Debug, Clone)]
pub struct ReadRule {
    /// The pool's smallest tier: what a wait may hold whatever is pending.
    floor: usize,
    /// What the next read offers.
    offer: usize,
    /// Reads in a row that used less than a quarter of their offer.
    short: u8,
    /// The last read filled its offer: more is probably waiting.
    filled: bool,
    /// The most bytes unread at once while the buffer held now has been held.
    peak: usize,
    /// What the last two buffers to drain had to hold.
    recent: [usize; 2],
}

impl ReadRule {
    /// The rule for a reader taking buffers from `pool`, its first read offering 8 KiB.
    pub fn new(pool: &BufferPool) -> Self {
        ReadRule::starting_at(pool, MIN_READ)
    }

    /// The rule with a first read offering `n` bytes (within 8 and 256 KiB): a read of a
    /// message whose length is known.
    pub fn starting_at(pool: &BufferPool, n: usize) -> Self {
        ReadRule {
            floor: pool.tier_sizes()[0],
            offer: n.clamp(MIN_READ, MAX_READ),
            short: 0,
            filled: false,
            peak: 0,
            recent: [0; 2],
        }
    }

    /// How many bytes the next read offers (the room to read into).
    pub fn offer(&self) -> usize {
        self.offer
    }

    /// Notes a read of `n` bytes into an offer of `offered`: the next offer doubles if it was
    /// filled, and halves after four reads in a row that used less than a quarter of theirs.
    pub fn record_read(&mut self, n: usize, offered: usize) {
        self.filled = n >= offered;
        if self.filled {
            self.offer = (self.offer * 2).min(MAX_READ);
            self.short = 0;
        } else if n < self.offer / 4 {
            self.short += 1;
            if self.short >= 4 {
                self.offer = (self.offer / 2).max(MIN_READ);
                self.short = 0;
            }
        } else {
            self.short = 0;
        }
    }

    /// True if the last read filled its offer: the peer is sending faster than it is read, so
    /// a reader out of room grows before reading rather than reading into a buffer of its own.
    pub fn last_read_filled(&self) -> bool {
        self.filled
    }

    /// Notes that `unread` bytes are held unread now (after bytes arrived): the most at once
    /// is what [`drained`](Self::drained) remembers.
    pub fn note_unread(&mut self, unread: usize) {
        self.peak = self.peak.max(unread);
    }

    /// The buffer held has drained (or left whole, as views): remembers the most it had to
    /// hold, for [`repeated`](Self::repeated). A buffer that held nothing changes nothing.
    pub fn drained(&mut self) {
        if self.peak > 0 {
            self.recent = [self.recent[1], self.peak];
            self.peak = 0;
        }
    }

    /// The buffer held was given up with bytes unread (an error, a connection closed): what
    /// it had to hold is forgotten, not remembered as a size.
    pub fn discarded(&mut self) {
        self.peak = 0;
    }

    /// The smaller of what the last two buffers to drain had to hold: a size that repeats
    /// (0 until two have drained).
    pub fn repeated(&self) -> usize {
        self.recent[0].min(self.recent[1])
    }

    /// The capacity to take for a fresh buffer that a read of `want` bytes goes into, of at
    /// most `limit` bytes (the rest of a message, say): `want`, or
    /// [`repeated`](Self::repeated) if that is more (within `limit` and 4 MiB). A read that
    /// then finds little waits in a buffer that [`shrink`](Self::shrink) reduces, so this
    /// costs a copy of what arrived at most, never memory beyond the bound.
    pub fn fresh_capacity(&self, want: usize, limit: usize) -> usize {
        want.max(self.repeated().min(MAX_LEARNED).min(limit))
    }

    /// The most a buffer may hold while its reader waits with `pending` bytes unread:
    /// `max(2 * pending, T0)`.
    pub fn bound(&self, pending: usize) -> usize {
        pending.saturating_mul(2).max(self.floor)
    }

    /// Before a wait: a buffer of the largest tier within [`bound`](Self::bound) of
    /// `unread.len()` holding a copy of `unread`, if the buffer that holds them now takes
    /// `held` bytes, more than that bound. `None` when `held` is within the bound, or when
    /// the pool has no smaller buffer for them now (under a budget with no room: it stays as
    /// it is until the next wait). Never waits.
    ///
    /// A buffer the program grew (or [`put`](BufferPool::put) in) and the pool filed under
    /// a tier has more capacity than the tier: one over the bound is passed over for the
    /// next tier down that holds the bytes. Only in the smallest tier, where no tier is
    /// below, can such a buffer stay over the bound (by less than one tier step).
    pub fn shrink(&self, pool: &BufferPool, unread: &[u8], held: usize) -> Option<PooledBuf> {
        let p = unread.len();
        let bound = self.bound(p);
        if held <= bound {
            return None;
        }
        let mut best: Option<PooledBuf> = None;
        let mut hi = bound;
        while let Some(size) = pool.capacity_within(p, hi) {
            let Ok(buf) = pool.try_get_exact(size) else {
                break;
            };
            let fits = buf.capacity() <= bound;
            if best.as_ref().is_none_or(|b| buf.capacity() < b.capacity()) {
                best = Some(buf);
            }
            if fits {
                break;
            }
            match size.checked_sub(1) {
                Some(below) => hi = below,
                None => break,
            }
        }
        let mut buf = best.filter(|b| b.capacity() < held)?;
        buf.extend_from_slice(unread);
        Some(buf)
    }

    /// The capacity to grow into for `have` bytes that must move to a larger buffer: the
    /// largest tier that holds them twice over (from `have` to `2 * have` bytes), or `have`
    /// if no tier lies there.
    pub fn grow_capacity(pool: &BufferPool, have: usize) -> usize {
        pool.capacity_within(have, have.saturating_mul(2))
            .unwrap_or(have)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offers_double_when_filled_and_halve_after_four_short_reads() {
        let pool = BufferPool::new();
        let mut r = ReadRule::new(&pool);
        for _ in 0..10 {
            let o = r.offer();
            r.record_read(o, o);
        }
        assert_eq!(r.offer(), MAX_READ);
        for i in 0..4 {
            assert_eq!(r.offer(), MAX_READ, "after {i} short reads");
            r.record_read(1, r.offer());
        }
        assert_eq!(r.offer(), MAX_READ / 2);
        assert!(!r.last_read_filled());
        assert_eq!(ReadRule::starting_at(&pool, 1).offer(), MIN_READ);
        assert_eq!(ReadRule::starting_at(&pool, 1 << 30).offer(), MAX_READ);
    }

    #[test]
    fn a_size_counts_as_repeated_once_two_buffers_reached_it() {
        let pool = BufferPool::new();
        let mut r = ReadRule::new(&pool);
        for (peak, repeated) in [(70_000, 0), (65_000, 65_000), (100, 100), (70_000, 100)] {
            r.note_unread(peak);
            r.drained();
            assert_eq!(r.repeated(), repeated);
        }
        assert_eq!(r.fresh_capacity(MIN_READ, usize::MAX), MIN_READ);
        r.note_unread(70_000);
        r.drained();
        assert_eq!(r.fresh_capacity(MIN_READ, usize::MAX), 70_000);
        assert_eq!(r.fresh_capacity(MIN_READ, 20_000), 20_000);
    }

    #[test]
    fn shrinking_passes_over_an_odd_buffer_filed_under_the_tier() {
        // The default tiers, four per doubling: ..., 448, 512, 640, ...
        let pool = BufferPool::new();
        let r = ReadRule::new(&pool);
        let unread = [1u8; 280];
        assert_eq!(r.bound(280), 560);
        assert_eq!(pool.capacity_within(280, 560), Some(512));
        // Vecs put back with more capacity than their tier: filed under 512, more than the
        // bound.
        pool.put(Vec::with_capacity(600));
        pool.put(Vec::with_capacity(570));
        let got = r.shrink(&pool, &unread, 4096).expect("smaller");
        assert_eq!(got.capacity(), 448);
        assert_eq!(&got[..], &unread[..]);
        // Within the bound already: nothing to do.
        assert!(r.shrink(&pool, &unread, 560).is_none());
    }

    #[test]
    fn growth_takes_the_largest_tier_within_twice() {
        let pool = BufferPool::builder()
            .tiers([256, 512, 1024, 2048, 4096])
            .build()
            .unwrap();
        assert_eq!(ReadRule::grow_capacity(&pool, 600), 1024);
        assert_eq!(ReadRule::grow_capacity(&pool, 3000), 4096);
        assert_eq!(ReadRule::grow_capacity(&pool, 5000), 10_000);
    }
}
