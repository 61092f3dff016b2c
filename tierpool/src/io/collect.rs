//! [`collect_body`]: an `http_body::Body` (a request's, a response's) read into pooled memory
//! under a limit, and under the pool's budget without deadlock.

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::Buf;
use http_body::Body;

use crate::buf::pooled::PooledBuf;
use crate::engine::error::AllocError;
use crate::io::chain::PooledChain;
use crate::pool::buffer_pool::BufferPool;
use crate::pool::reserve::{Reservation, Reserve};

/// The largest buffer a body's bytes are gathered in: a larger body is a chain of them.
const MAX_PIECE: usize = 1 << 20;

/// Reads `body` to its end into pooled buffers, refusing more than `limit` bytes: the
/// collected bytes as a [`PooledChain`] (one view when they fit one buffer). Each data frame
/// is copied out of the body's own buffers (hyper's and h2's) as it arrives, so they are
/// released as the body is read. Trailers are read and dropped.
///
/// **Memory follows what arrived.** The bytes go into buffers taken as they arrive, the first
/// of the pool's smallest tier and each next one as large as all before it together (up to
/// 1 MiB): while the peer is slow, the buffers held are at most twice what arrived, and the
/// smallest tier.
///
/// **Under a budget** ([`Builder::max_in_use_bytes`](crate::Builder::max_in_use_bytes)), the
/// body's buffers are [reserved](BufferPool::reserve) before any of it is read: for the
/// length it declares (`Content-Length`, or HTTP/2's `content-length`), else for `limit`.
/// The reservation waits in the budget's queue, in order with every other waiter, and the
/// body is not polled meanwhile: hyper stops reading that connection (HTTP/1.1: TCP's flow
/// control slows the peer; HTTP/2: the stream's window is not released), so the process
/// stays within the budget. A body the budget has started always finishes: its buffers are
/// paid for already. Nothing is refused for want of room; put a timeout around the future to
/// refuse after one. What the reservation does not spend goes back when the body ends.
///
/// On HTTP/2, a waiting stream's frames stay queued in h2 (at most its stream window) and
/// count against the connection's window too: a server whose streams may wait here sets a
/// connection window larger than its streams' windows together (hyper's
/// `http2().initial_connection_window_size`), so that waiting streams cannot hold the window
/// the admitted ones need.
///
/// # Errors
/// [`CollectError::TooLarge`] if the body declares more than `limit` (before any memory is
/// taken or the body is read) or sends more; [`CollectError::Body`] with the body's error (a
/// reset connection, a length that does not match the declared one); [`CollectError::Alloc`]
/// if the pool cannot serve (a reservation larger than the whole budget, an allocator's
/// refusal). Every buffer goes back whatever the error.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// use http_body_util::Full;
///
/// let pool = tierpool::BufferPool::builder().max_in_use_bytes(64 << 20).build()?;
/// let body = Full::new(bytes::Bytes::from(vec![7u8; 100_000]));
/// let chain = tierpool::io::collect_body(body, &pool, 16 << 20).await?;
/// assert_eq!(chain.len(), 100_000);
///
/// let too_large = Full::new(bytes::Bytes::from(vec![7u8; 100_000]));
/// let err = tierpool::io::collect_body(too_large, &pool, 50_000).await.unwrap_err();
/// assert!(matches!(err, tierpool::io::CollectError::TooLarge { limit: 50_000 }));
/// # Ok(()) }
/// ```
pub fn collect_body<B: Body + Unpin>(body: B, pool: &BufferPool, limit: usize) -> CollectBody<B> {
    CollectBody {
        body,
        pool: pool.clone(),
        limit,
        state: State::Start,
        chain: PooledChain::new(),
        piece: None,
        capacity: 0,
        received: 0,
    }
}

/// The future [`collect_body`] returns.
#[must_use = "futures do nothing unless polled"]
pub struct CollectBody<B> {
    body: B,
    pool: BufferPool,
    limit: usize,
    state: State,
    /// The buffers filled so far.
    chain: PooledChain,
    /// The buffer being filled.
    piece: Option<PooledBuf>,
    /// The capacities of the buffers taken so far: the size of the next one.
    capacity: usize,
    /// Bytes received.
    received: usize,
}

enum State {
    Start,
    /// Waiting for the budget to set the body's buffers aside; the length it declared.
    Reserving(Reserve, Option<usize>),
    /// Reading, the buffers paid from the reservation; the length the body declared.
    Reading(Reservation, Option<usize>),
    Done,
}

impl<B: Body + Unpin> CollectBody<B> {
    /// The buffers held now, in bytes (their capacities): at most twice what arrived (and the
    /// smallest tier) while the body is read.
    pub fn held_bytes(&self) -> usize {
        self.chain
            .parts()
            .map(|p| p.buffer_capacity())
            .sum::<usize>()
            + self.piece.as_ref().map_or(0, |p| p.capacity())
    }

    /// Bytes received so far.
    pub fn received(&self) -> usize {
        self.received
    }

    /// The body being read.
    pub fn get_ref(&self) -> &B {
        &self.body
    }

    /// The body, as far as it was read: after an error, for a server to keep it until its
    /// answer is sent (hyper's HTTP/2 resets a stream whose request body is dropped before
    /// the response is complete, and the client then loses the response).
    pub fn into_body(self) -> B {
        self.body
    }

    fn poll_collect(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<PooledChain, CollectError<B::Error>>> {
        loop {
            match &mut self.state {
                State::Start => {
                    let hint = self.body.size_hint();
                    if hint.lower() > self.limit as u64 {
                        return Poll::Ready(Err(CollectError::TooLarge { limit: self.limit }));
                    }
                    let declared = hint.exact().map(|n| n as usize);
                    let total = declared.unwrap_or(self.limit);
                    let reserve = self.pool.reserve(plan(&self.pool, total));
                    self.state = State::Reserving(reserve, declared);
                }
                State::Reserving(reserve, declared) => {
                    let declared = *declared;
                    let reservation = ready!(Pin::new(reserve).poll(cx))?;
                    self.state = State::Reading(reservation, declared);
                }
                State::Reading(..) => return self.poll_read(cx),
                State::Done => panic!("`CollectBody` polled after it completed"),
            }
        }
    }

    fn poll_read(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<PooledChain, CollectError<B::Error>>> {
        loop {
            let frame = match ready!(Pin::new(&mut self.body).poll_frame(cx)) {
                None => return Poll::Ready(Ok(self.finish())),
                Some(Err(e)) => return Poll::Ready(Err(CollectError::Body(e))),
                Some(Ok(frame)) => frame,
            };
            let Ok(mut data) = frame.into_data() else {
                continue; // trailers
            };
            if data.remaining() > self.limit - self.received {
                return Poll::Ready(Err(CollectError::TooLarge { limit: self.limit }));
            }
            while data.has_remaining() {
                let n = {
                    let piece = self.room()?;
                    let chunk = data.chunk();
                    let n = chunk.len().min(piece.capacity() - piece.len());
                    piece.extend_from_slice(&chunk[..n]);
                    n
                };
                data.advance(n);
                self.received += n;
            }
        }
    }

    /// The buffer to copy into, with room: the one being filled, or (when it is full) the
    /// next, paid from the reservation.
    fn room(&mut self) -> Result<&mut PooledBuf, CollectError<B::Error>> {
        if self.piece.as_ref().is_some_and(|p| p.len() == p.capacity()) {
            let full = self.piece.take().expect("checked");
            self.chain.push(full.into_shared());
        }
        if self.piece.is_none() {
            let State::Reading(reservation, declared) = &mut self.state else {
                unreachable!("buffers are taken while reading");
            };
            let rest = declared.map(|d| d.saturating_sub(self.received));
            let size = next_piece(&self.pool, self.capacity, rest.filter(|&r| r > 0));
            let piece = reservation.try_get_exact(size)?;
            self.capacity += piece.capacity();
            self.piece = Some(piece);
        }
        Ok(self.piece.as_mut().expect("taken above"))
    }

    /// The end: the bytes as a chain, the reservation's rest given back.
    fn finish(&mut self) -> PooledChain {
        if let Some(piece) = self.piece.take() {
            if !piece.is_empty() {
                self.chain.push(piece.into_shared());
            }
        }
        self.state = State::Done;
        std::mem::take(&mut self.chain)
    }
}

/// The size of the next buffer after buffers of `capacity` bytes together, with `rest` bytes
/// of a declared length still to come: as large as the ones before together (the smallest
/// tier first, at most [`MAX_PIECE`]), or `rest` if that is less.
fn next_piece(pool: &BufferPool, capacity: usize, rest: Option<usize>) -> usize {
    let floor = pool.tier_sizes()[0];
    let grow = pool
        .capacity_within(floor, capacity.clamp(floor, MAX_PIECE))
        .unwrap_or(floor);
    match rest {
        Some(r) if pool.capacity_for(r) <= grow => r,
        _ => grow,
    }
}

/// What the buffers for `total` bytes are charged together: what a body declaring `total`
/// bytes reserves.
fn plan(pool: &BufferPool, total: usize) -> usize {
    let (mut capacity, mut charge, mut left) = (0usize, 0usize, total);
    while left > 0 {
        let size = next_piece(pool, capacity, Some(left));
        let cap = pool.capacity_for(size);
        charge = charge.saturating_add(pool.charge_for(size));
        capacity += cap;
        left = left.saturating_sub(cap);
    }
    charge
}

impl<B: Body + Unpin> Future for CollectBody<B> {
    type Output = Result<PooledChain, CollectError<B::Error>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let got = this.poll_collect(cx);
        if let Poll::Ready(Err(_)) = &got {
            // Every buffer back, the reservation's bytes too.
            this.state = State::Done;
            this.piece = None;
            this.chain = PooledChain::new();
        }
        got
    }
}

// Nothing is pinned: the body is polled through `Pin::new` (it is `Unpin`).
impl<B: Unpin> Unpin for CollectBody<B> {}

impl<B> fmt::Debug for CollectBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Start => "start",
            State::Reserving(..) => "reserving",
            State::Reading(..) => "reading",
            State::Done => "done",
        };
        f.debug_struct("CollectBody")
            .field("pool", &self.pool.name())
            .field("limit", &self.limit)
            .field("state", &state)
            .field("received", &self.received)
            .finish_non_exhaustive()
    }
}

/// Why [`collect_body`] gave up.
#[derive(Debug)]
pub enum CollectError<E> {
    /// The body is longer than the limit: it declared so (nothing was read), or sent more.
    /// HTTP's answer is `413 Payload Too Large`.
    TooLarge {
        /// The limit.
        limit: usize,
    },
    /// The body's own error: a connection reset, a length that does not match the one
    /// declared, a timeout of the server's.
    Body(E),
    /// The pool could not serve: a reservation larger than the whole budget, an allocator's
    /// refusal.
    Alloc(AllocError),
}

impl<E> From<AllocError> for CollectError<E> {
    fn from(e: AllocError) -> Self {
        CollectError::Alloc(e)
    }
}

impl<E: fmt::Display> fmt::Display for CollectError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CollectError::TooLarge { limit } => {
                write!(f, "the body is longer than the limit of {limit} bytes")
            }
            CollectError::Body(e) => write!(f, "reading the body: {e}"),
            CollectError::Alloc(e) => write!(f, "no memory for the body: {e}"),
        }
    }
}

impl<E: Error + 'static> Error for CollectError<E> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            CollectError::TooLarge { .. } => None,
            CollectError::Body(e) => Some(e),
            CollectError::Alloc(e) => Some(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_double_from_the_smallest_tier_and_the_plan_pays_for_them() {
        let pool = BufferPool::new();
        let floor = pool.tier_sizes()[0];
        assert_eq!(next_piece(&pool, 0, None), floor);
        assert_eq!(next_piece(&pool, floor, None), floor);
        assert_eq!(next_piece(&pool, 2 * floor, None), 2 * floor);
        assert_eq!(next_piece(&pool, 100 << 20, None), MAX_PIECE);
        assert_eq!(next_piece(&pool, 4096, Some(100)), 100);
        // The plan's charges cover the pieces a body of each length takes.
        for total in [1, 255, 256, 257, 1000, 65_536, 1 << 20, (8 << 20) + 3] {
            let (mut cap, mut charge, mut got) = (0, 0, 0);
            while got < total {
                let size = next_piece(&pool, cap, Some(total - got));
                let c = pool.capacity_for(size);
                cap += c;
                charge += pool.charge_for(size);
                got += c;
            }
            assert_eq!(plan(&pool, total), charge, "{total}");
            assert!(
                charge <= total + total / 4 + 2 * floor + 4096,
                "{total}: {charge}"
            );
        }
    }
}
