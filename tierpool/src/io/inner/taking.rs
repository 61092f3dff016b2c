//! A buffer for I/O, waiting for room in a budget.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use crate::buf::pooled::PooledBuf;
use crate::engine::error::AllocError;
use crate::pool::acquire::Acquire;
use crate::pool::buffer_pool::BufferPool;

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

/// An [`AllocError`] as the `io::Error` a read returns (kind `OutOfMemory`).
pub(crate) fn alloc_error(e: AllocError) -> io::Error {
    io::Error::new(io::ErrorKind::OutOfMemory, e)
}
