//! [`PollAcquire`]: a get that may wait for room in the budget, kept in the state of a `poll`
//! function.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use crate::buf::pooled::PooledBuf;
use crate::engine::error::AllocError;
use crate::pool::acquire::Acquire;
use crate::pool::buffer_pool::BufferPool;

/// A get that waits for room in the pool's budget without blocking, polled by hand: what a
/// `poll` function (an `AsyncRead`, an `http_body::Body`, a `Stream`) keeps in its state to
/// take its buffers, as tokio-util's `PollSemaphore` is to a semaphore.
///
/// [`poll_get`](Self::poll_get) takes the buffer at once when the pool has room (always,
/// without a budget); else it joins the budget's queue (in order with every other waiter,
/// blocking or async), returns `Pending` and wakes the task once the buffer is served. The
/// buffer is served by its size's own tier, as [`get_exact`](BufferPool::get_exact) serves it:
/// its capacity is exactly [`capacity_for(n)`](BufferPool::capacity_for). Dropping the
/// `PollAcquire` (or [`cancel`](Self::cancel)) leaves the queue; what the wait had gathered
/// passes to the next waiter.
///
/// ```
/// use std::task::{Context, Poll};
/// use tierpool::{BufferPool, PollAcquire};
/// # struct Noop;
/// # impl std::task::Wake for Noop { fn wake(self: std::sync::Arc<Self>) {} }
/// # let waker = std::task::Waker::from(std::sync::Arc::new(Noop));
///
/// let pool = BufferPool::builder().max_in_use_bytes(64 << 10).build()?;
/// let mut cx = Context::from_waker(&waker); // a task's context, in a poll function
/// let mut taking = PollAcquire::new();
///
/// let held = pool.get(64 << 10); // the whole budget
/// assert!(taking.poll_get(&mut cx, &pool, 4096).is_pending()); // in the queue, woken later
/// drop(held);
/// let Poll::Ready(Ok(buf)) = taking.poll_get(&mut cx, &pool, 4096) else { panic!() };
/// assert_eq!(buf.capacity(), pool.capacity_for(4096));
/// # Ok::<(), tierpool::ConfigError>(())
/// ```
#[derive(Debug, Default)]
pub struct PollAcquire {
    waiting: Option<Pin<Box<Acquire<'static>>>>,
}

impl PollAcquire {
    /// Nothing waited for yet.
    pub fn new() -> Self {
        PollAcquire::default()
    }

    /// A buffer of capacity exactly `pool.capacity_for(n)` from `pool`: `Ready` at once if it
    /// fits the budget, else `Pending` until it does (`cx`'s task is woken then; poll again
    /// with the same pool). A wait begun for another size is finished first and its buffer
    /// returned: a caller whose size changed checks the capacity it got.
    ///
    /// # Errors
    /// As [`BufferPool::acquire`]: a size that can never fit the budget
    /// ([`AllocError::LargerThanBudget`]), an impossible size, an allocator failure; never
    /// [`AllocError::OverBudget`].
    pub fn poll_get(
        &mut self,
        cx: &mut Context<'_>,
        pool: &BufferPool,
        n: usize,
    ) -> Poll<Result<PooledBuf, AllocError>> {
        if self.waiting.is_none() {
            match pool.try_get_exact(n) {
                Err(AllocError::OverBudget { .. }) => {
                    self.waiting = Some(Box::pin(pool.acquire_owned(n).exact()));
                }
                got => return Poll::Ready(got),
            }
        }
        let fut = self.waiting.as_mut().expect("a wait under way");
        let got = ready!(fut.as_mut().poll(cx));
        self.waiting = None;
        Poll::Ready(got)
    }

    /// True while a wait is under way: the next [`poll_get`](Self::poll_get) goes on with it.
    pub fn is_waiting(&self) -> bool {
        self.waiting.is_some()
    }

    /// Gives up the wait under way, if any (its place in the queue passes on).
    pub fn cancel(&mut self) {
        self.waiting = None;
    }
}
