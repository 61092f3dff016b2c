//! [`Core`]: the read rules ([`ReadRule`]) applied to a store, with the reads and the waits
//! for room.

use std::future::poll_fn;
use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

use super::rule::{ReadRule, MIN_READ};
use super::store::{Store, VecStore};
use crate::buf::pooled::PooledBuf;
use crate::engine::error::AllocError;
use crate::pool::buffer_pool::BufferPool;
use crate::pool::poll_acquire::PollAcquire;

/// The read rules on a store `S`: the held buffer (none while nothing is unread), the rule's
/// sizes, and a wait for room in the pool's budget.
#[derive(Debug)]
pub(crate) struct Core<S> {
    pub(crate) slot: Option<S>,
    rule: ReadRule,
    pool: BufferPool,
    /// A get waiting for room in the budget (budgeted pools only), kept across polls.
    taking: PollAcquire,
    /// Bytes read that did not fit the buffer held, waiting for a larger one (under a
    /// budget, for room in it): `poll_read` moves both into it before reading again.
    stash: Option<PooledBuf>,
}

impl<S: Store> Core<S> {
    pub(crate) fn new(pool: BufferPool) -> Self {
        Core::with_rule(ReadRule::new(&pool), pool)
    }

    /// A core whose first read offers about `n` bytes (a message of known length).
    pub(crate) fn with_first_offer(pool: BufferPool, n: usize) -> Self {
        Core::with_rule(ReadRule::starting_at(&pool, n), pool)
    }

    fn with_rule(rule: ReadRule, pool: BufferPool) -> Self {
        Core {
            slot: None,
            rule,
            pool,
            taking: PollAcquire::new(),
            stash: None,
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
        self.rule.discarded();
        self.stash = None;
        self.taking.cancel();
        if let Some(s) = self.slot.take() {
            s.give_back();
        }
    }

    /// Gives the buffer back if nothing in it is unread, remembering how much it had to hold.
    pub(crate) fn give_back_if_drained(&mut self) {
        if self.slot.as_ref().is_some_and(|s| s.unread().is_empty()) {
            if let Some(s) = self.slot.take() {
                s.give_back();
            }
            self.rule.drained();
        }
    }

    /// Takes the buffer held, as the frames it holds leave as views of it: what it had to
    /// hold counts as a drained buffer's.
    pub(crate) fn hand_over(&mut self) -> Option<S> {
        let slot = self.slot.take()?;
        self.rule.note_unread(slot.unread().len());
        self.rule.drained();
        Some(slot)
    }

    /// Notes how much is unread now (after bytes arrived).
    fn note_peak(&mut self) {
        self.rule.note_unread(self.unread_len());
    }

    /// Before a wait: holds nothing if nothing is unread, else at most `max(2P, T0)`.
    pub(crate) fn park(&mut self) {
        self.give_back_if_drained();
        let Some(s) = &self.slot else { return };
        if let Some(buf) = self.rule.shrink(&self.pool, s.unread(), s.held()) {
            let old = self.slot.replace(S::adopt(buf));
            old.expect("checked above").give_back();
        }
    }

    /// A buffer of at least `n` bytes from the pool, waiting (asynchronously) for room in
    /// the budget.
    pub(crate) fn poll_take(
        &mut self,
        cx: &mut Context<'_>,
        n: usize,
    ) -> Poll<io::Result<PooledBuf>> {
        self.poll_take_between(cx, n, n)
    }

    /// Gives up a wait for room under way.
    pub(crate) fn cancel_take(&mut self) {
        self.taking.cancel();
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
            if preferred != least {
                match self.pool.try_get_exact(preferred) {
                    Ok(buf) => return Poll::Ready(Ok(buf)),
                    Err(AllocError::OverBudget { .. }) => {}
                    Err(e) => return Poll::Ready(Err(e.into())),
                }
            }
            if let Some(limit) = self.pool.max_in_use_bytes() {
                let charge = self.pool.capacity_for(least);
                let held = self.held();
                if held.saturating_add(charge) > limit {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::OutOfMemory,
                        format!(
                            "a buffer of {charge} bytes beside the {held} held can never fit \
                             the budget of {limit} bytes"
                        ),
                    )));
                }
            }
        }
        self.taking
            .poll_get(cx, &self.pool, least)
            .map_err(io::Error::from)
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
        self.give_back_if_drained();
        let mut want = self.rule.offer().min(limit);
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
            if s.spare() < want && self.rule.last_read_filled() {
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
                self.rule.record_read(n, want);
                self.note_peak();
                return Poll::Ready(Ok(n));
            }
        }
        self.poll_read_fresh(cx, io, want, limit)
    }

    /// One read of at most `want` bytes into a buffer taken for it, when the one held has no
    /// room: the buffer goes straight back if nothing is read.
    fn poll_read_fresh<R: AsyncRead + ?Sized>(
        &mut self,
        cx: &mut Context<'_>,
        io: Pin<&mut R>,
        want: usize,
        limit: usize,
    ) -> Poll<io::Result<usize>> {
        // A buffer for this read: of the size recent frames needed, if they needed more (not
        // under a budget, where a read waits for room for what it offers only).
        let size = if self.slot.is_none() && self.pool.max_in_use_bytes().is_none() {
            self.rule.fresh_capacity(want, limit)
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
        self.rule.record_read(n, want);
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
        let size = ReadRule::grow_capacity(&self.pool, have + room);
        // At least what is there and a byte more; under a budget with no room for the
        // preferred size, that is what the wait is for.
        let mut bigger = ready!(self.poll_take_between(cx, have + 1, size))?;
        if let Some(s) = self.slot.take() {
            bigger.extend_from_slice(s.unread());
            s.give_back();
        }
        if let Some(stash) = self.stash.take() {
            bigger.extend_from_slice(&stash);
        }
        self.slot = Some(S::adopt(bigger));
        Poll::Ready(Ok(()))
    }
}

impl Core<VecStore> {
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
        self.slot.take().map(VecStore::into_buf)
    }
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
