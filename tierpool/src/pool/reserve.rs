//! [`Reservation`]: bytes of a pool's budget set aside first, spent on buffers taken later.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::buf::pooled::PooledBuf;
use crate::engine::error::AllocError;
use crate::engine::ops::{Fresh, Ticket, Wake};
use crate::observe::holders::{site, Site};
use crate::pool::buffer_pool::BufferPool;

/// Bytes of a pool's budget ([`Builder::max_in_use_bytes`](crate::Builder::max_in_use_bytes))
/// set aside for buffers that will be taken later, as the data they hold arrives.
///
/// What it is for: admitting work by its size before any of it is done, so that work the
/// budget has started always finishes. A server collecting request bodies under a budget
/// that takes each body's buffers only as its bytes arrive can deadlock: every body holds
/// part of the budget and waits for more. Reserving each body's whole size first (waiting,
/// in order with every other waiter, until the budget has it) admits only the bodies the
/// budget can finish, while memory still follows what arrived: a body whose peer stalls
/// holds buffers for the bytes it sent, and its reservation for the rest.
///
/// The budget counts a reservation's bytes as in use from the moment it is granted
/// ([`BudgetStats::in_use_bytes`](crate::BudgetStats::in_use_bytes)). A buffer taken
/// through it ([`try_get_exact`](Self::try_get_exact)) is paid from it: its charge
/// ([`BufferPool::charge_for`]) moves from the reservation to the buffer, which gives it
/// back to the budget when it goes back to the pool, as every buffer does. What is left
/// when the reservation is dropped goes back to the budget. Without a budget a reservation
/// sets nothing aside and its gets are [`BufferPool::try_get_exact`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), tierpool::AllocError> {
/// let pool = tierpool::BufferPool::builder().max_in_use_bytes(1 << 20).build().unwrap();
/// let body_len = 300_000;
/// let mut reservation = pool.reserve(pool.charge_for(body_len)).await?;
/// let buf = reservation.try_get_exact(body_len)?; // paid from the reservation
/// assert_eq!(reservation.left(), 0);
/// assert_eq!(pool.stats().budget.unwrap().in_use_bytes, pool.charge_for(body_len));
/// drop((buf, reservation));
/// # Ok(()) }
/// ```
#[must_use = "a reservation gives its bytes back when dropped"]
pub struct Reservation {
    pool: BufferPool,
    left: usize,
}

impl BufferPool {
    /// The bytes of the budget a get of `n` bytes takes: its tier's size, or above the
    /// largest tier its capacity rounded up to 4 KiB. What to [`reserve`](Self::reserve) for
    /// the buffers a piece of work will take (the sum of their charges); the same figure
    /// whether the pool has a budget or not.
    ///
    /// ```
    /// let pool = tierpool::BufferPool::builder().tiers([1024, 4096]).build()?;
    /// assert_eq!(pool.charge_for(1000), 1024);
    /// assert_eq!(pool.charge_for(5000), 8192);
    /// # Ok::<(), tierpool::ConfigError>(())
    /// ```
    pub fn charge_for(&self, n: usize) -> usize {
        let cap = self.capacity_for(n);
        if self.tier_sizes().last().is_some_and(|&t| cap <= t) {
            cap
        } else {
            cap.checked_next_multiple_of(4096).unwrap_or(usize::MAX)
        }
    }

    /// Sets `bytes` of the budget aside now, if it has them free (after collecting what the
    /// thread caches hold); never waits.
    ///
    /// # Errors
    /// [`AllocError::OverBudget`] if the budget has no room for them now (or others wait
    /// before this), [`AllocError::LargerThanBudget`] if it never can.
    pub fn try_reserve(&self, bytes: usize) -> Result<Reservation, AllocError> {
        match self.core.reserve_begin(bytes, || None)? {
            None => Ok(Reservation::new(self.clone(), bytes)),
            Some(_) => unreachable!("a reservation that may not wait is refused, not queued"),
        }
    }

    /// Sets `bytes` of the budget aside, waiting (asynchronously, in order with every other
    /// waiter of the budget) until it has them. The future holds a handle to the pool
    /// (`'static`); dropped before it is served, it leaves the queue.
    ///
    /// # Errors
    /// [`AllocError::LargerThanBudget`] if the budget can never hold `bytes`.
    pub fn reserve(&self, bytes: usize) -> Reserve {
        Reserve {
            pool: self.clone(),
            bytes,
            ticket: None,
            done: false,
        }
    }
}

impl Reservation {
    fn new(pool: BufferPool, bytes: usize) -> Self {
        let left = if pool.max_in_use_bytes().is_some() {
            bytes
        } else {
            0
        };
        Reservation { pool, left }
    }

    /// The bytes set aside and not yet spent (0 without a budget).
    pub fn left(&self) -> usize {
        self.left
    }

    /// A buffer of capacity [`capacity_for(n)`](BufferPool::capacity_for), served by its
    /// size's own tier (as [`BufferPool::try_get_exact`]), its charge paid from this
    /// reservation; what the reservation does not cover is taken from the budget if it has
    /// room now. Never waits.
    ///
    /// # Errors
    /// [`AllocError::OverBudget`] if the reservation and the budget's free bytes together
    /// cannot pay for it (nothing is spent then); the pool's other errors.
    #[cfg_attr(feature = "holders", track_caller)]
    pub fn try_get_exact(&mut self, n: usize) -> Result<PooledBuf, AllocError> {
        self.get_at(n, site())
    }

    fn get_at(&mut self, n: usize, site: Site) -> Result<PooledBuf, AllocError> {
        let core = &self.pool.core;
        let (buf, paid) = core.get_prepaid(n, Fresh::FallibleExact, self.left)?;
        self.left -= paid;
        Ok(core.track(buf, site))
    }

    /// The pool it takes from.
    pub fn pool(&self) -> &BufferPool {
        &self.pool
    }
}

impl Drop for Reservation {
    /// What is left goes back to the budget (to its first waiter).
    fn drop(&mut self) {
        let left = std::mem::take(&mut self.left);
        if left > 0 {
            self.pool.core.reserve_release(left);
        }
    }
}

impl fmt::Debug for Reservation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reservation")
            .field("pool", &self.pool.name())
            .field("left", &self.left)
            .finish()
    }
}

/// The future returned by [`BufferPool::reserve`]: a [`Reservation`] once the budget has the
/// bytes.
#[must_use = "futures do nothing unless polled"]
pub struct Reserve {
    pool: BufferPool,
    bytes: usize,
    /// In the budget's queue.
    ticket: Option<Ticket>,
    done: bool,
}

impl Future for Reserve {
    type Output = Result<Reservation, AllocError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        assert!(!this.done, "`Reserve` polled after it completed");
        let core = &this.pool.core;
        match &this.ticket {
            None => {
                let waker = || Some(Wake::Task(Some(cx.waker().clone())));
                match core.reserve_begin(this.bytes, waker) {
                    Err(e) => {
                        this.done = true;
                        return Poll::Ready(Err(e));
                    }
                    Ok(None) => {}
                    Ok(Some(ticket)) => {
                        this.ticket = Some(ticket);
                        return Poll::Pending;
                    }
                }
            }
            Some(ticket) => {
                if !core.reserve_poll(ticket, cx.waker()) {
                    return Poll::Pending;
                }
                this.ticket = None;
            }
        }
        this.done = true;
        Poll::Ready(Ok(Reservation::new(this.pool.clone(), this.bytes)))
    }
}

impl Drop for Reserve {
    /// Leaves the budget's queue: what the wait had gathered goes to the next waiter.
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            self.pool.core.reserve_cancel(ticket);
        }
    }
}

impl fmt::Debug for Reserve {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reserve")
            .field("pool", &self.pool.name())
            .field("bytes", &self.bytes)
            .field("waiting", &self.ticket.is_some())
            .finish()
    }
}
