//! [`ReadBuffer`]: a pooled, contiguous, growable read buffer whose memory follows traffic.
//!
//! # How much it holds
//!
//! A connection's read buffer holds memory only while it has unread bytes, and then at most
//! `max(2P, T0)` of it for `P` unread bytes (`T0` the pool's smallest tier), however the bytes
//! arrive: a peer that trickles a frame one byte per packet pins twice what it sent, not a
//! 16 KiB buffer per byte. The rules, shared by [`ReadBuffer`], the decoder bridge
//! ([`FramedRead`](crate::io::codec::FramedRead)) and the frame reader:
//!
//! - **Drained, it goes back.** When every byte has been consumed the buffer returns to the
//!   pool before the next wait, so an idle connection holds nothing.
//! - **A read offers enough.** Each read offers at least 8 KiB (tokio-util's `FramedRead`
//!   starts with 8 KiB, so no more receives than it), twice as much after a read that filled
//!   its offer (more is waiting), up to 256 KiB, and back down after reads that used little.
//!   With nothing unread, the read goes into a buffer taken for it from the pool; a read
//!   that finds nothing (`Pending`) gives that buffer straight back.
//! - **Sizes that repeat are remembered.** That fresh buffer is as large as the smaller of
//!   what the last two buffers had to hold when they drained (up to 4 MiB), if that is more
//!   than the offer: frames of a size that repeats (64 KiB values, say) land in one buffer
//!   instead of regrowing from the offer every time, and one large frame among small ones
//!   changes nothing. A read that then waits mid-frame gives the large buffer back under the
//!   next rule. (Not under a budget, where a read waits for room for its offer only.)
//! - **Reads append without amplifying.** With bytes unread and room for the offer, the read
//!   goes into the room (or into the room there is, if at least 8 KiB). Without room, it goes
//!   into a buffer of its own, and its bytes are
//!   then copied after the unread ones, where they fit (after moving the unread ones to the
//!   start, if that makes room), or into a buffer of the largest tier that holds both twice
//!   over (geometric growth: copying stays linear in the bytes received).
//! - **A wait holds at most twice what is pending.** Before a read returns `Pending`, a buffer
//!   larger than `max(2P, T0)` is replaced by one of the largest tier up to `2P` (copying the
//!   `P` bytes): what a large read offer, a decoder's `reserve` or the bytes consumed since
//!   had left over.
//!
//! The bound needs tiers at most a factor of two apart, which every generated tier set
//! (the default, [`power_of_two_tiers`](crate::Builder::power_of_two_tiers),
//! [`geometric_tiers`](crate::Builder::geometric_tiers)) is; above the largest tier,
//! buffers are exact.

use std::future::{poll_fn, Future};
use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::buf::pooled::PooledBuf;
use crate::buf::shared::PooledBytes;
use crate::engine::error::AllocError;
use crate::pool::acquire::Acquire;
use crate::pool::buffer_pool::BufferPool;

/// The least a read offers: tokio-util's `FramedRead` starts with an 8 KiB buffer.
pub(crate) const MIN_READ: usize = 8 << 10;
/// The most a read offers.
pub(crate) const MAX_READ: usize = 256 << 10;
/// The largest fresh buffer a read takes for frames of a size that repeats (larger frames
/// grow into their buffers as they arrive).
pub(crate) const MAX_LEARNED: usize = 4 << 20;

/// How much the next read offers: Netty's adaptive guess, between [`MIN_READ`] and
/// [`MAX_READ`]. Doubled after a read that filled its offer; halved after four reads in a
/// row that used less than a quarter of it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sizer {
    guess: usize,
    short: u8,
    /// The last read filled its offer: more is probably waiting.
    full: bool,
}

impl Sizer {
    pub(crate) fn new() -> Sizer {
        Sizer::starting_at(MIN_READ)
    }

    /// A sizer whose first offer is `n` (within [`MIN_READ`] and [`MAX_READ`]): a read of a
    /// message of known length.
    pub(crate) fn starting_at(n: usize) -> Sizer {
        Sizer {
            guess: n.clamp(MIN_READ, MAX_READ),
            short: 0,
            full: false,
        }
    }

    /// What the next read offers.
    pub(crate) fn offer(&self) -> usize {
        self.guess
    }

    /// A read of `n` bytes into an offer of `offered`.
    pub(crate) fn record(&mut self, n: usize, offered: usize) {
        self.full = n >= offered;
        if n >= offered {
            self.guess = (self.guess * 2).min(MAX_READ);
            self.short = 0;
        } else if n < self.guess / 4 {
            self.short += 1;
            if self.short >= 4 {
                self.guess = (self.guess / 2).max(MIN_READ);
                self.short = 0;
            }
        } else {
            self.short = 0;
        }
    }
}

/// Where a held buffer's unread bytes live: a pooled `Vec` ([`Plain`]), or, lent to a
/// tokio-util decoder, a `BytesMut` made of one (`codec.rs`). [`Core`] runs the rules of the
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
    fn release(self);
}

/// A pooled `Vec`: the unread bytes are `buf[start..]`.
#[derive(Debug)]
pub(crate) struct Plain {
    buf: PooledBuf,
    start: usize,
}

impl Plain {
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

impl Store for Plain {
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
        Plain { buf, start: 0 }
    }
    fn release(self) {
        drop(self.buf);
    }
}

/// The rules of the module docs, on a store `S`: the held buffer (none while nothing is
/// unread), the read sizer, and a wait for room in the pool's budget.
#[derive(Debug)]
pub(crate) struct Core<S> {
    pub(crate) slot: Option<S>,
    sizer: Sizer,
    pool: BufferPool,
    /// A get waiting for room in the budget (budgeted pools only), kept across polls.
    taking: Taking,
    /// Bytes read that did not fit the buffer held, waiting for a larger one (under a
    /// budget, for room in it): `poll_read` moves both into it before reading again.
    stash: Option<PooledBuf>,
    /// The smallest tier: what the bound allows whatever is pending.
    floor: usize,
    /// The most bytes unread at once while the buffer held now has been held.
    peak: usize,
    /// The peaks of the last two buffers that drained: the least a read's fresh buffer
    /// takes (their smaller one), so that frames of a size that repeats land in one buffer
    /// instead of regrowing from the read's offer every time.
    recent: [usize; 2],
}

impl<S: Store> Core<S> {
    pub(crate) fn new(pool: BufferPool) -> Self {
        Core::with_sizer(pool, Sizer::new())
    }

    /// A core whose first read offers about `n` bytes (a message of known length).
    pub(crate) fn with_first_offer(pool: BufferPool, n: usize) -> Self {
        Core::with_sizer(pool, Sizer::starting_at(n))
    }

    fn with_sizer(pool: BufferPool, sizer: Sizer) -> Self {
        let floor = pool.tier_sizes()[0];
        Core {
            slot: None,
            sizer,
            pool,
            taking: Taking::default(),
            stash: None,
            floor,
            peak: 0,
            recent: [0; 2],
        }
    }

    pub(crate) fn pool(&self) -> &BufferPool {
        &self.pool
    }

    /// Unread bytes.
    pub(crate) fn unread_len(&self) -> usize {
        self.slot.as_ref().map_or(0, |s| s.unread().len())
    }

    /// What the held buffers take (0 if none).
    pub(crate) fn held(&self) -> usize {
        self.slot.as_ref().map_or(0, Store::held) + self.stash.as_ref().map_or(0, |b| b.capacity())
    }

    /// Gives back every buffer held, unread bytes and all.
    pub(crate) fn clear(&mut self) {
        self.peak = 0;
        self.stash = None;
        self.taking.cancel();
        if let Some(s) = self.slot.take() {
            s.release();
        }
    }

    /// Gives the buffer back if nothing in it is unread, remembering how much it had to hold.
    pub(crate) fn release_if_drained(&mut self) {
        if self.slot.as_ref().is_some_and(|s| s.unread().is_empty()) {
            if let Some(s) = self.slot.take() {
                s.release();
            }
            self.recent = [self.recent[1], self.peak];
            self.peak = 0;
        }
    }

    /// Takes the buffer held, as the frames it holds leave as views of it: what it had to
    /// hold counts as a drained buffer's.
    pub(crate) fn hand_over(&mut self) -> Option<S> {
        let slot = self.slot.take()?;
        self.peak = self.peak.max(slot.unread().len());
        self.recent = [self.recent[1], self.peak];
        self.peak = 0;
        Some(slot)
    }

    /// The size of a fresh buffer for a read of `want` bytes, of at most `limit`: `want`, or
    /// what the last two buffers both had to hold if that is more (within `limit` and the
    /// largest read buffer that is learned, [`MAX_LEARNED`]). A read that then finds little
    /// waits in a buffer that the bound shrinks (`park`), so this costs a copy of what arrived
    /// at most, never memory beyond the bound.
    fn fresh_size(&self, want: usize, limit: usize) -> usize {
        let expect = self.recent[0].min(self.recent[1]).min(MAX_LEARNED);
        want.max(expect.min(limit))
    }

    /// Notes how much is unread now (after bytes arrived).
    fn note_peak(&mut self) {
        self.peak = self.peak.max(self.unread_len());
    }

    /// Before a wait: holds nothing if nothing is unread, else at most `max(2P, T0)`.
    pub(crate) fn park(&mut self) {
        self.release_if_drained();
        let Some(s) = &self.slot else { return };
        let p = s.unread().len();
        let bound = (2 * p).max(self.floor);
        if s.held() <= bound {
            return;
        }
        // Replace it with the largest tier up to the bound that holds the unread bytes. A
        // get that cannot wait: under a budget with no room for it, the buffer stays as it
        // is until the next wait.
        let size = self.pool.size_within(p, bound).unwrap_or(p);
        if let Ok(mut buf) = self.pool.try_get_exact(size) {
            if buf.capacity() > bound {
                // A buffer the program put back with more capacity than its tier, filed
                // under it: one of the next tier down holds the bytes too, if there is one.
                let smaller = size
                    .checked_sub(1)
                    .and_then(|hi| self.pool.size_within(p, hi));
                if let Some(Ok(b)) = smaller.map(|s| self.pool.try_get_exact(s)) {
                    buf = b;
                }
            }
            let old = self.slot.take().expect("checked above");
            buf.extend_from_slice(old.unread());
            old.release();
            self.slot = Some(S::adopt(buf));
        }
    }

    /// A buffer of at least `n` bytes from the pool, waiting (asynchronously) for room in
    /// the budget.
    fn poll_take(&mut self, cx: &mut Context<'_>, n: usize) -> Poll<io::Result<PooledBuf>> {
        self.poll_take_between(cx, n, n)
    }

    /// A buffer of `preferred` bytes if the pool has it now, else of `least`, waiting for
    /// room in the budget for that. Under a budget that could never hold `least` beside the
    /// buffers held now (a frame too large to grow into: growing copies, so the old and the
    /// new buffer are out at once), an error instead of a wait that would never end.
    fn poll_take_between(
        &mut self,
        cx: &mut Context<'_>,
        least: usize,
        preferred: usize,
    ) -> Poll<io::Result<PooledBuf>> {
        if !self.taking.is_waiting() {
            for size in [preferred, least] {
                match self.pool.try_get_exact(size) {
                    Ok(buf) => return Poll::Ready(Ok(buf)),
                    Err(AllocError::OverBudget { .. }) => {}
                    Err(e) => return Poll::Ready(Err(alloc_error(e))),
                }
            }
            let limit = self.pool.max_in_use_bytes().unwrap_or(usize::MAX);
            let charge = self.pool.size_for(least);
            let held = self.held();
            if held.saturating_add(charge) > limit {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::OutOfMemory,
                    format!(
                        "a buffer of {charge} bytes beside the {held} held can never fit the \
                         budget of {limit} bytes"
                    ),
                )));
            }
            self.taking.start(&self.pool, least);
        }
        self.taking.poll_wait(cx)
    }

    /// One read from `io`, of at most `limit` bytes (at least 1): `Ready(Ok(n))` with the
    /// bytes appended to the unread ones (`n == 0`: the end of the stream, or `limit == 0`),
    /// or `Pending` (the buffer then held is within the bound).
    pub(crate) fn poll_read<R: AsyncRead + ?Sized>(
        &mut self,
        cx: &mut Context<'_>,
        mut io: Pin<&mut R>,
        limit: usize,
    ) -> Poll<io::Result<usize>> {
        if let Some(n) = self.stash.as_ref().map(|b| b.len()) {
            // The last read's bytes wait for a larger buffer: get it (waiting for room
            // under a budget, holding what was read), then report them.
            ready!(self.poll_grow(cx, 0))?;
            self.note_peak();
            return Poll::Ready(Ok(n));
        }
        if limit == 0 {
            return Poll::Ready(Ok(0));
        }
        self.release_if_drained();
        let mut want = self.sizer.offer().min(limit);
        // Room for the offer in the buffer held: read into it (into the room there is, if at
        // least the least offer fits: a buffer sized for a frame of a size that repeats is
        // filled, not outgrown, as tokio-util reads into the capacity it has). Without room,
        // after a read that filled its offer (the peer is sending faster than we read), grow
        // first, so the bytes land in place: a large frame costs one copy per doubling of
        // what arrived.
        if let Some(s) = &mut self.slot {
            if s.spare() < want {
                s.compact();
            }
            if s.spare() < want && s.spare() >= MIN_READ {
                want = s.spare();
            }
            if s.spare() < want && self.sizer.full {
                ready!(self.poll_grow(cx, want))?;
            }
        }
        if let Some(s) = &mut self.slot {
            if s.spare() >= want {
                let n = match read_into(cx, io.as_mut(), &mut s.spare_mut()[..want]) {
                    Poll::Pending => {
                        self.park();
                        return Poll::Pending;
                    }
                    Poll::Ready(r) => r?,
                };
                // SAFETY: `read_into` initialized `n <= want <= spare` bytes of the room.
                unsafe { s.filled(n) };
                self.sizer.record(n, want);
                self.note_peak();
                return Poll::Ready(Ok(n));
            }
        }
        // A buffer for this read: of the size recent frames needed, if they needed more (not
        // under a budget, where a read waits for room for what it offers only).
        let size = if self.slot.is_none() && self.pool.max_in_use_bytes().is_none() {
            self.fresh_size(want, limit)
        } else {
            want
        };
        let mut fresh = match self.poll_take(cx, size) {
            Poll::Ready(r) => r?,
            Poll::Pending => {
                self.park();
                return Poll::Pending;
            }
        };
        let n = match read_into(cx, io, &mut fresh.spare_capacity_mut()[..want]) {
            // Nothing to read: the buffer goes straight back, nothing is held for the wait.
            Poll::Pending => {
                drop(fresh);
                self.park();
                return Poll::Pending;
            }
            Poll::Ready(r) => r?,
        };
        // SAFETY: `read_into` initialized the first `n` bytes of the spare capacity.
        unsafe { fresh.set_len(n) };
        self.sizer.record(n, want);
        if n == 0 {
            return Poll::Ready(Ok(0));
        }
        if self.append(fresh) {
            self.note_peak();
            return Poll::Ready(Ok(n));
        }
        ready!(self.poll_grow(cx, 0))?;
        self.note_peak();
        Poll::Ready(Ok(n))
    }

    /// Puts `fresh`'s bytes after the unread ones: adopts it if nothing is unread, else
    /// copies them into the room left (after compacting). False if they do not fit: `fresh`
    /// then waits in the stash for [`poll_grow`](Self::poll_grow).
    fn append(&mut self, fresh: PooledBuf) -> bool {
        let Some(s) = &mut self.slot else {
            self.slot = Some(S::adopt(fresh));
            return true;
        };
        let n = fresh.len();
        if s.spare() < n {
            s.compact();
        }
        if s.spare() < n {
            self.stash = Some(fresh);
            return false;
        }
        let room = &mut s.spare_mut()[..n];
        // SAFETY: `MaybeUninit<u8>` and `u8` have the same layout, and writing initialized
        // bytes over uninitialized ones is always sound.
        let room = unsafe { &mut *(room as *mut [MaybeUninit<u8>] as *mut [u8]) };
        room.copy_from_slice(&fresh);
        // SAFETY: the `n` bytes were just written, within the room.
        unsafe { s.filled(n) };
        true
    }

    /// Moves the unread bytes and the stash into a buffer of the largest tier that holds
    /// them and `room` more twice over (geometric growth: copying stays linear in the bytes
    /// received), waiting for room under a budget.
    fn poll_grow(&mut self, cx: &mut Context<'_>, room: usize) -> Poll<io::Result<()>> {
        let p = self.slot.as_ref().map_or(0, |s| s.unread().len());
        let have = p + self.stash.as_ref().map_or(0, |b| b.len());
        let total = have + room;
        let size = self.pool.size_within(total, 2 * total).unwrap_or(total);
        // At least what is there and a byte more; under a budget with no room for the
        // preferred size, that is what the wait is for.
        let mut bigger = ready!(self.poll_take_between(cx, have + 1, size))?;
        if let Some(s) = self.slot.take() {
            bigger.extend_from_slice(s.unread());
            s.release();
        }
        if let Some(stash) = self.stash.take() {
            bigger.extend_from_slice(&stash);
        }
        self.slot = Some(S::adopt(bigger));
        Poll::Ready(Ok(()))
    }
}

impl Core<Plain> {
    /// Reads from `io` until `want` bytes are unread or the stream ends, and takes them as a
    /// buffer (none if none arrived): `(buffer, complete)`. While it waits it holds at most
    /// `max(2P, T0)` for the `P` bytes that arrived (module docs). On an error the bytes
    /// read so far stay unread in `self` (take them with [`take`](Self::take)).
    pub(crate) async fn read_chunk<R: AsyncRead + Unpin + ?Sized>(
        &mut self,
        io: &mut R,
        want: usize,
    ) -> io::Result<(Option<PooledBuf>, bool)> {
        while self.unread_len() < want {
            let remaining = want - self.unread_len();
            if poll_fn(|cx| self.poll_read(cx, Pin::new(&mut *io), remaining)).await? == 0 {
                return Ok((self.take(), false));
            }
        }
        Ok((self.take(), true))
    }

    /// The unread bytes, as a buffer of their own (at its start), and nothing held.
    pub(crate) fn take(&mut self) -> Option<PooledBuf> {
        self.slot.take().map(Plain::into_buf)
    }
}

/// A buffer taken from the pool for I/O: at once if the pool has room, else by waiting
/// (asynchronously, kept across polls) for room in the budget. What every pooled reader and
/// writer of this module uses to get its buffer.
#[derive(Debug, Default)]
pub(crate) struct Taking {
    waiting: Option<Box<Acquire<'static>>>,
}

impl Taking {
    /// A buffer of at least `n` bytes; `Pending` while a budget has no room for it. A wait
    /// begun for another size is finished first (the caller checks what it got).
    pub(crate) fn poll_take(
        &mut self,
        cx: &mut Context<'_>,
        pool: &BufferPool,
        n: usize,
    ) -> Poll<io::Result<PooledBuf>> {
        if self.waiting.is_none() {
            match pool.try_get_exact(n) {
                Err(AllocError::OverBudget { .. }) => self.start(pool, n),
                got => return Poll::Ready(got.map_err(alloc_error)),
            }
        }
        self.poll_wait(cx)
    }

    /// Begins waiting for `n` bytes (the caller tried `try_get` first).
    pub(crate) fn start(&mut self, pool: &BufferPool, n: usize) {
        self.waiting = Some(Box::new(pool.acquire_owned(n).exact()));
    }

    /// True while a wait is under way.
    pub(crate) fn is_waiting(&self) -> bool {
        self.waiting.is_some()
    }

    /// The wait under way. Call only while [`is_waiting`](Self::is_waiting).
    pub(crate) fn poll_wait(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<PooledBuf>> {
        let fut = self.waiting.as_mut().expect("a wait under way");
        let got = ready!(Pin::new(&mut **fut).poll(cx));
        self.waiting = None;
        Poll::Ready(got.map_err(alloc_error))
    }

    /// Gives up the wait (its place in the queue passes to the next waiter).
    pub(crate) fn cancel(&mut self) {
        self.waiting = None;
    }
}

/// Writes `bytes[*written..]` to `io`, advancing `written` as it goes: `Ready(Ok)` once all
/// of it is written. A writer that takes nothing is a `WriteZero` error.
pub(crate) fn poll_write_from<W: AsyncWrite + Unpin + ?Sized>(
    cx: &mut Context<'_>,
    io: &mut W,
    bytes: &[u8],
    written: &mut usize,
) -> Poll<io::Result<()>> {
    while *written < bytes.len() {
        let n = ready!(Pin::new(&mut *io).poll_write(cx, &bytes[*written..]))?;
        if n == 0 {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "failed to write the buffered data",
            )));
        }
        *written += n;
    }
    Poll::Ready(Ok(()))
}

/// An [`AllocError`] as the `io::Error` a read returns (kind `OutOfMemory`).
pub(crate) fn alloc_error(e: AllocError) -> io::Error {
    io::Error::new(io::ErrorKind::OutOfMemory, e)
}

/// `AsyncRead::poll_read` into `room`: the bytes read (initialized there).
fn read_into<R: AsyncRead + ?Sized>(
    cx: &mut Context<'_>,
    io: Pin<&mut R>,
    room: &mut [MaybeUninit<u8>],
) -> Poll<io::Result<usize>> {
    let mut rb = ReadBuf::uninit(room);
    ready!(io.poll_read(cx, &mut rb))?;
    Poll::Ready(Ok(rb.filled().len()))
}

/// A pooled, contiguous, growable read buffer: reads append to it, a parser looks at the
/// unread bytes as one `&[u8]`, and frames are split off as [`PooledBytes`] without a copy.
/// Its memory follows traffic: drained, its buffer goes back to the pool, so an idle
/// connection holds nothing; with `P` bytes unread it holds at most `max(2P, T0)` (`T0` the
/// pool's smallest tier) while it waits, however the bytes arrive (module docs).
///
/// For a parser that is not a tokio-util decoder: look at [`unread`](Self::unread) (or
/// [`find`](Self::find) a delimiter), consume with [`advance`](Self::advance) or take a frame
/// with [`split_to`](Self::split_to), and read more with [`read_from`](Self::read_from) when
/// what is there is not a whole frame. For a tokio-util `Decoder`, use
/// [`FramedRead`](crate::io::codec::FramedRead) (feature `tokio-util`).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// use tierpool::io::ReadBuffer;
///
/// let pool = tierpool::BufferPool::new();
/// let mut input: &[u8] = b"PING\r\nECHO hi\r\n";
/// let mut buf = ReadBuffer::new(pool);
/// let mut lines = Vec::new();
/// loop {
///     while let Some(end) = buf.find(b"\r\n") {
///         let line = buf.split_to(end + 2); // a view of the pooled buffer, no copy
///         lines.push(line);
///     }
///     if buf.read_from(&mut input).await? == 0 {
///         break; // the end of the stream
///     }
/// }
/// assert_eq!(lines, [&b"PING\r\n"[..], b"ECHO hi\r\n"]);
/// assert_eq!(buf.held_bytes(), 0); // drained: nothing held
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ReadBuffer {
    core: Core<Plain>,
    /// After a split: the unread bytes as a view of the buffer the frames share.
    rest: Option<PooledBytes>,
    /// The most unread bytes it may hold (`max_len`).
    max_len: usize,
}

impl ReadBuffer {
    /// An empty read buffer taking its buffers from `pool`; it holds nothing until bytes
    /// arrive.
    pub fn new(pool: BufferPool) -> Self {
        ReadBuffer {
            core: Core::new(pool),
            rest: None,
            max_len: usize::MAX,
        }
    }

    /// Refuses to hold more than `bytes` unread bytes: a read that finds that many already
    /// unread (a frame larger than a parser would ever take) fails with
    /// [`io::ErrorKind::InvalidData`] and the buffer is given back. Default: no limit.
    pub fn max_len(mut self, bytes: usize) -> Self {
        self.max_len = bytes.max(1);
        self
    }

    /// The unread bytes.
    pub fn unread(&self) -> &[u8] {
        match &self.rest {
            Some(rest) => rest,
            None => self.core.slot.as_ref().map_or(&[], Store::unread),
        }
    }

    /// The number of unread bytes.
    pub fn len(&self) -> usize {
        self.unread().len()
    }

    /// True if nothing is unread.
    pub fn is_empty(&self) -> bool {
        self.unread().is_empty()
    }

    /// The capacity of the pooled buffer it holds now (0 when it holds none). Frames split
    /// off and still alive are not counted: they hold their buffer themselves.
    pub fn held_bytes(&self) -> usize {
        self.core.held()
    }

    /// Where `needle` first occurs in the unread bytes (a delimiter such as `b"\r\n"`).
    pub fn find(&self, needle: &[u8]) -> Option<usize> {
        find(self.unread(), needle)
    }

    /// Consumes `n` unread bytes.
    ///
    /// # Panics
    /// If `n > len()`.
    pub fn advance(&mut self, n: usize) {
        assert!(
            n <= self.len(),
            "advance({n}) past the {} unread bytes",
            self.len()
        );
        match &mut self.rest {
            Some(rest) => {
                rest.advance(n);
                if rest.is_empty() {
                    self.rest = None;
                }
            }
            None => {
                if let Some(s) = &mut self.core.slot {
                    s.start += n;
                }
                self.core.release_if_drained();
            }
        }
    }

    /// Takes the first `n` unread bytes as a view of the pooled buffer, without a copy. The
    /// buffer returns to the pool when the last of its views (and this read buffer) let go.
    ///
    /// # Panics
    /// If `n > len()`.
    pub fn split_to(&mut self, n: usize) -> PooledBytes {
        assert!(
            n <= self.len(),
            "split_to({n}) past the {} unread bytes",
            self.len()
        );
        let mut rest = match self.rest.take() {
            Some(rest) => rest,
            None => match self.core.hand_over() {
                Some(Plain { buf, start }) => {
                    let mut view = buf.into_shared();
                    view.advance(start);
                    view
                }
                None => return PooledBytes::default(),
            },
        };
        let frame = rest.split_to(n);
        if !rest.is_empty() {
            self.rest = Some(rest);
        }
        frame
    }

    /// Gives back the buffer and drops every unread byte.
    pub fn clear(&mut self) {
        self.rest = None;
        self.core.clear();
    }

    /// The unread bytes, writable in place (TLS records are decrypted where they lie). Views
    /// split off earlier keep their bytes: if any is still alive, the unread bytes move to a
    /// buffer of their own first ([`unshare`](Self::unshare)). The slice stays where it is
    /// until the next read, `split_to` or `unread_mut` that has to move it.
    #[cfg(feature = "rustls")]
    pub(crate) fn unread_mut(&mut self) -> &mut [u8] {
        self.unshare();
        match &mut self.core.slot {
            Some(Plain { buf, start }) => &mut buf[*start..],
            None => &mut [],
        }
    }

    /// Makes the unread bytes a plain buffer again before a read: the one the views share if
    /// none of them is left (after moving the bytes to its start), else a copy.
    fn unshare(&mut self) {
        let Some(rest) = self.rest.take() else { return };
        let buf = match rest.try_into_mut() {
            Ok(buf) => buf,
            Err(rest) => {
                let p = rest.len();
                let size = self.core.pool().size_within(p, 2 * p).unwrap_or(p);
                let mut buf = self.core.pool().get_exact(size);
                buf.extend_from_slice(&rest);
                buf
            }
        };
        self.core.slot = Some(Plain::adopt(buf));
    }

    /// Reads once from `io`, appending to the unread bytes: how many arrived (0 at the end of
    /// the stream). With nothing unread it holds no buffer while `io` has nothing to read, and
    /// a buffer is taken only for a read that has data (module docs).
    ///
    /// # Errors
    /// `io`'s error; [`io::ErrorKind::OutOfMemory`] if the pool cannot serve a buffer;
    /// [`io::ErrorKind::InvalidData`] if [`max_len`](Self::max_len) bytes are already unread.
    pub fn poll_read_from<R: AsyncRead + ?Sized>(
        &mut self,
        cx: &mut Context<'_>,
        io: Pin<&mut R>,
    ) -> Poll<io::Result<usize>> {
        if self.len() >= self.max_len {
            let held = self.len();
            self.clear();
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{held} bytes unread and no frame: more than the limit of {} bytes",
                    self.max_len
                ),
            )));
        }
        self.unshare();
        let limit = self.max_len - self.len();
        self.core.poll_read(cx, io, limit)
    }

    /// [`poll_read_from`](Self::poll_read_from) as a future.
    ///
    /// # Errors
    /// As [`poll_read_from`](Self::poll_read_from).
    pub async fn read_from<R: AsyncRead + Unpin + ?Sized>(
        &mut self,
        io: &mut R,
    ) -> io::Result<usize> {
        poll_fn(|cx| self.poll_read_from(cx, Pin::new(&mut *io))).await
    }
}

/// Where `needle` first occurs in `hay`.
pub(crate) fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    match needle {
        [] => Some(0),
        [b] => hay.iter().position(|x| x == b),
        [first, rest @ ..] => {
            let mut from = 0;
            while let Some(i) = hay[from..].iter().position(|x| x == first) {
                let at = from + i;
                if hay[at + 1..].starts_with(rest) {
                    return Some(at);
                }
                from = at + 1;
            }
            None
        }
    }
}

#[cfg(feature = "bytes")]
impl bytes::Buf for ReadBuffer {
    fn remaining(&self) -> usize {
        self.len()
    }

    fn chunk(&self) -> &[u8] {
        self.unread()
    }

    fn advance(&mut self, n: usize) {
        ReadBuffer::advance(self, n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;
    use std::task::{RawWaker, RawWakerVTable, Waker};

    /// A waker that does nothing (the tests poll by hand).
    fn noop_waker() -> Waker {
        const VTABLE: RawWakerVTable = RawWakerVTable::new(
            |_| RawWaker::new(std::ptr::null(), &VTABLE),
            |_| {},
            |_| {},
            |_| {},
        );
        // SAFETY: every function of the vtable ignores the data pointer.
        unsafe { Waker::from_raw(RawWaker::new(std::ptr::null(), &VTABLE)) }
    }

    /// Chunks, each after a `Pending`, delivered no more than a read offers.
    struct Chunks(VecDeque<Vec<u8>>, bool);

    impl AsyncRead for Chunks {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            if !self.1 && !self.0.is_empty() {
                self.1 = true;
                return Poll::Pending;
            }
            self.1 = false;
            if let Some(mut c) = self.0.pop_front() {
                let n = c.len().min(buf.remaining());
                buf.put_slice(&c[..n]);
                if n < c.len() {
                    self.0.push_front(c.split_off(n));
                    self.1 = true;
                }
            }
            Poll::Ready(Ok(()))
        }
    }

    /// Every path of a read (into the room held, into a fresh buffer adopted, appended after
    /// compacting, stashed and grown), splits that share the buffer and outlive it, and
    /// shrinking at a wait: the bytes come out right (under Miri: every access in bounds and
    /// initialized).
    #[test]
    fn reads_splits_growth_and_shrinking_keep_the_bytes() {
        let pool = BufferPool::builder()
            .tiers([
                16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768,
            ])
            .build()
            .unwrap();
        let input: Vec<u8> = (0..20_000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        let sizes = [1usize, 3, 17, 200, 5000, 1, 9000, 40, 2, 4000, 1700];
        let mut chunks = VecDeque::new();
        let mut at = 0;
        for (i, &n) in sizes.iter().cycle().enumerate() {
            if at >= input.len() {
                break;
            }
            let n = n.min(input.len() - at) + i % 2;
            let n = n.min(input.len() - at);
            chunks.push_back(input[at..at + n].to_vec());
            at += n;
        }
        let mut io = Chunks(chunks, false);
        let mut rb = ReadBuffer::new(pool.clone());
        let waker = noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut out = Vec::new();
        let mut kept = Vec::new();
        loop {
            // Take a frame of 700 bytes whenever there is one; keep every third alive.
            while rb.len() >= 700 {
                let frame = rb.split_to(700);
                out.extend_from_slice(&frame);
                if out.len() % 2100 == 0 {
                    kept.push(frame);
                }
            }
            match rb.poll_read_from(&mut cx, Pin::new(&mut io)) {
                Poll::Pending => {}
                Poll::Ready(Ok(0)) => break,
                Poll::Ready(Ok(_)) => {}
                Poll::Ready(Err(e)) => panic!("{e}"),
            }
        }
        out.extend_from_slice(rb.unread());
        assert_eq!(out, input);
        for (i, f) in kept.iter().enumerate() {
            let at = (i + 1) * 2100 - 700;
            assert_eq!(&f[..], &input[at..at + 700]);
        }
        drop((rb, kept));
        let s = pool.stats();
        assert_eq!(s.gets, s.returned);
    }

    #[test]
    fn find_finds_the_first_occurrence() {
        assert_eq!(find(b"abc\r\ndef\r\n", b"\r\n"), Some(3));
        assert_eq!(find(b"abc\r", b"\r\n"), None);
        assert_eq!(find(b"\r\r\n", b"\r\n"), Some(1));
        assert_eq!(find(b"abc", b""), Some(0));
        assert_eq!(find(b"", b"x"), None);
        assert_eq!(find(b"xyx", b"x"), Some(0));
    }
}
