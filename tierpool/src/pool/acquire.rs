//! Taking a buffer beyond the fast path: this thread's cache's slow path, and, with a budget
//! on bytes in use that has no room now, the one wait on the budget's queue, for blocking
//! callers ([`get`](crate::BufferPool::get), [`get_timeout`](crate::BufferPool::get_timeout))
//! and async ones ([`acquire`](crate::BufferPool::acquire)) alike.
//!
//! Both start the same way ([`PoolRef::begin`]): ask the slow path; if the budget has no room,
//! sweep the thread caches' buffers back into it and ask again; else join the queue with a
//! way to be woken (the thread, or the task's waker). A blocking caller then parks until its
//! ticket is served ([`Budget::wait`]); a future polls the ticket when woken. Either way the
//! buffer is then taken with its charge paid ([`PoolRef::fetch_paid`]), which never waits.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::buf::pooled::PooledBuf;
use crate::engine::error::AllocError;
use crate::engine::ops::{self, Budget, Fresh, Got, Ticket, Wake};
use crate::observe::holders::{site, Site};
use crate::pool::handle::{PoolRef, Wait};
use crate::pool::kind::{Kind, Plain};

/// How the start of a slow get ended: with a buffer, or in the budget's queue.
enum Begun {
    Got(PooledBuf),
    /// Waiting for `charge` bytes of the budget.
    Queued {
        ticket: Ticket,
        charge: usize,
    },
}

impl PoolRef {
    /// Everything a blocking get can need beyond the fast path: the slow path of this
    /// thread's cache, and with a budget that has no room now, waiting (as `wait` allows)
    /// and then taking the buffer with its charge paid.
    #[cold]
    #[inline(never)]
    pub(crate) fn acquire_slow(
        &self,
        n: usize,
        how: Fresh,
        wait: Wait,
    ) -> Result<PooledBuf, AllocError> {
        let begun = self.begin(n, how, || match wait {
            Wait::Never => None,
            Wait::For(_) => Some(Wake::Thread(std::thread::current())),
        })?;
        let (ticket, charge) = match begun {
            Begun::Got(b) => return Ok(b),
            Begun::Queued { ticket, charge } => (ticket, charge),
        };
        let Wait::For(timeout) = wait else {
            unreachable!("a get that may not wait is refused, not queued")
        };
        self.block(ticket, n, timeout)?;
        self.fetch_paid(n, how, charge)
    }

    /// The start every slow get shares: a buffer from the slow path if the budget (if any)
    /// has room, else, after sweeping the thread caches' buffers back into the account, a
    /// place in the budget's queue, woken through `wake()`; `wake` giving `None` means the
    /// get may not wait, and is refused ([`AllocError::OverBudget`]).
    fn begin(
        &self,
        n: usize,
        how: Fresh,
        wake: impl FnOnce() -> Option<Wake>,
    ) -> Result<Begun, AllocError> {
        let charge = match self.fetch(n, how, 0)? {
            Got::Buf(v, tag) => return Ok(Begun::Got(PooledBuf::new(v.into_vec(), self.key, tag))),
            Got::Wait(charge) => self.check_charge(n, charge)?,
        };
        if self.take_swept(charge) {
            return self.fetch_paid(n, how, charge).map(Begun::Got);
        }
        let (state, budget) = (self.state(), self.budget());
        let Some(wake) = wake() else {
            budget.refused();
            return Err(AllocError::OverBudget {
                requested: n,
                in_use: state.in_use(),
                limit: budget.limit(),
            });
        };
        // The way to wake goes in with the ticket, so a grant between here and the caller's
        // first look at the ticket wakes it: no lost wake-up. The queue sweeps the caches
        // again now that it is joined.
        let ticket = budget.enqueue(charge, wake);
        ops::sweep(state);
        Ok(Begun::Queued { ticket, charge })
    }

    /// Parks this thread until `ticket` (for a get of `n`) is served, or for at most
    /// `timeout` ([`AllocError::TimedOut`], reporting at least `timeout` waited). A wait
    /// longer than `report_waits_after` names the top holders once (feature `holders`).
    fn block(&self, ticket: Ticket, n: usize, timeout: Option<Duration>) -> Result<(), AllocError> {
        let (state, budget) = (self.state(), self.budget());
        let start = Instant::now();
        let deadline = timeout.and_then(|t| start.checked_add(t));
        let mut report = || {
            state
                .holders()
                .report_wait(state.name(), n, start.elapsed())
        };
        let report = state
            .holders()
            .report_after()
            .and_then(|after| start.checked_add(after))
            .map(|at| (at, &mut report as &mut dyn FnMut()));
        if budget.wait(ticket, deadline, report) {
            return Ok(());
        }
        Err(AllocError::TimedOut {
            requested: n,
            in_use: state.in_use(),
            limit: budget.limit(),
            waited: start.elapsed(),
        })
    }

    /// A buffer for `n` bytes through this thread's cache, or without one (down the ladder),
    /// `prepaid` bytes of its charge paid.
    fn fetch(&self, n: usize, how: Fresh, prepaid: usize) -> Result<Got, AllocError> {
        ops::get(self.key, self.state_arc(), n, how, prepaid)
    }

    /// A get of `n` bytes whose charge is paid from `prepaid` bytes set aside (a
    /// reservation's), as far as they go; the rest is taken from the budget if it has room now.
    /// Returns the buffer and the bytes of `prepaid` it used.
    pub(crate) fn get_prepaid(
        &self,
        n: usize,
        how: Fresh,
        prepaid: usize,
    ) -> Result<(PooledBuf, usize), AllocError> {
        let charge = self.state().charge_for(n)?;
        let paid = prepaid.min(charge);
        match self.fetch(n, how, paid)? {
            Got::Buf(v, tag) => {
                if paid > 0 {
                    self.budget().note_reserved(paid, false);
                }
                Ok((PooledBuf::new(v.into_vec(), self.key, tag), paid))
            }
            Got::Wait(_) => {
                let budget = self.budget();
                budget.refused();
                Err(AllocError::OverBudget {
                    requested: n,
                    in_use: self.state().in_use(),
                    limit: budget.limit(),
                })
            }
        }
    }

    /// Sets `bytes` of the budget aside: at once if they are free (after sweeping the thread
    /// caches' buffers into the account), else a place in the budget's queue (through
    /// `wake()`; `None` refuses instead, [`AllocError::OverBudget`]). `Ok(None)`: set aside.
    pub(crate) fn reserve_begin(
        &self,
        bytes: usize,
        wake: impl FnOnce() -> Option<Wake>,
    ) -> Result<Option<Ticket>, AllocError> {
        if !self.key.budgeted() || bytes == 0 {
            return Ok(None);
        }
        let budget = self.budget();
        let limit = budget.limit();
        if bytes > limit {
            return Err(AllocError::LargerThanBudget {
                requested: bytes,
                charge: bytes,
                limit,
            });
        }
        if budget.try_take(bytes, 0, 1).is_some() || self.take_swept(bytes) {
            budget.note_reserved(bytes, true);
            return Ok(None);
        }
        let Some(wake) = wake() else {
            budget.refused();
            return Err(AllocError::OverBudget {
                requested: bytes,
                in_use: self.state().in_use(),
                limit,
            });
        };
        let ticket = budget.enqueue(bytes, wake);
        ops::sweep(self.state());
        Ok(Some(ticket))
    }

    /// True once `ticket`'s bytes are set aside (in use); else `waker` is kept to be woken.
    pub(crate) fn reserve_poll(&self, ticket: &Ticket, waker: &std::task::Waker) -> bool {
        let budget = self.budget();
        let granted = budget.poll(ticket, Some(waker));
        if granted {
            budget.note_reserved(ticket.need(), true);
        }
        granted
    }

    /// Gives up a reservation's place in the queue.
    pub(crate) fn reserve_cancel(&self, ticket: Ticket) {
        self.budget().cancel(ticket);
    }

    /// Gives back bytes set aside and not used.
    pub(crate) fn reserve_release(&self, bytes: usize) {
        self.budget().note_reserved(bytes, false);
        self.state().refund(bytes);
    }

    /// [`fetch`](Self::fetch) with the whole charge paid, which never has to wait.
    fn fetch_paid(&self, n: usize, how: Fresh, charge: usize) -> Result<PooledBuf, AllocError> {
        match self.fetch(n, how, charge)? {
            Got::Buf(v, tag) => Ok(PooledBuf::new(v.into_vec(), self.key, tag)),
            Got::Wait(_) => unreachable!("a paid get never waits"),
        }
    }

    /// The budget, for a pool whose key says it has one.
    fn budget(&self) -> &Budget {
        self.state()
            .budget()
            .expect("only a pool with a budget asks to wait")
    }

    /// Refuses a charge that can never be served: larger than the whole budget (or a size
    /// no allocation can have).
    fn check_charge(&self, n: usize, charge: usize) -> Result<usize, AllocError> {
        if n > isize::MAX as usize {
            return Err(AllocError::CapacityOverflow { requested: n });
        }
        let limit = self.budget().limit();
        if charge > limit {
            return Err(AllocError::LargerThanBudget {
                requested: n,
                charge,
                limit,
            });
        }
        Ok(charge)
    }

    /// Takes `charge` bytes from the account after sweeping the thread caches into it, if
    /// they hold anything; false if that was not enough (nothing taken).
    fn take_swept(&self, charge: usize) -> bool {
        let state = self.state();
        if state.held_in_caches() == 0 {
            return false;
        }
        ops::sweep(state);
        self.budget().try_take(charge, 0, 1).is_some()
    }
}

/// The future returned by [`BufferPool::acquire`](crate::BufferPool::acquire): a buffer once it fits the budget.
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct Acquire<'a, K: Kind = Plain> {
    pool: Held<'a, K>,
    /// The size asked.
    n: usize,
    /// `Fallible`, or `FallibleExact` ([`Acquire::exact`]).
    how: Fresh,
    state: AcquireState,
    /// Where `acquire` was called (feature `holders`; nothing without it).
    site: Site,
}

/// The pool an [`Acquire`] takes from: borrowed (`acquire`), or a handle of its own
/// (`acquire_owned`, a `'static` future).
#[derive(Debug)]
enum Held<'a, K: Kind> {
    Borrowed(&'a PoolRef, &'a K),
    Owned(PoolRef, K),
}

impl<K: Kind> Held<'_, K> {
    fn pool(&self) -> &PoolRef {
        match self {
            Held::Borrowed(p, _) => p,
            Held::Owned(p, _) => p,
        }
    }

    fn kind(&self) -> &K {
        match self {
            Held::Borrowed(_, k) => k,
            Held::Owned(_, k) => k,
        }
    }
}

#[derive(Debug)]
enum AcquireState {
    Start,
    /// In the budget's queue for a buffer of `m` bytes (the size asked of the machinery).
    Waiting {
        ticket: Ticket,
        m: usize,
        /// The bytes it waits for.
        charge: usize,
    },
    Done,
}

impl<'a, K: Kind> Acquire<'a, K> {
    #[cfg_attr(feature = "holders", track_caller)]
    pub(crate) fn new(pool: &'a PoolRef, kind: &'a K, n: usize) -> Self {
        Acquire::with(Held::Borrowed(pool, kind), n)
    }

    #[cfg_attr(feature = "holders", track_caller)]
    fn with(pool: Held<'a, K>, n: usize) -> Self {
        Acquire {
            pool,
            n,
            how: Fresh::Fallible,
            state: AcquireState::Start,
            site: site(),
        }
    }
}

impl<K: Kind> Acquire<'_, K> {
    /// This wait, served by the size's own tier only, as
    /// [`get_exact`](crate::BufferPool::get_exact): the buffer's capacity is exactly
    /// [`capacity_for(n)`](crate::BufferPool::capacity_for).
    pub fn exact(mut self) -> Self {
        self.how = Fresh::FallibleExact;
        self
    }
}

impl<K: Kind> Acquire<'static, K> {
    #[cfg_attr(feature = "holders", track_caller)]
    pub(crate) fn new_owned(pool: PoolRef, kind: K, n: usize) -> Self {
        Acquire::with(Held::Owned(pool, kind), n)
    }
}

impl<K: Kind> Future for Acquire<'_, K> {
    type Output = Result<K::Buf, AllocError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let polled = this.poll_buf(cx);
        let kind = this.pool.kind();
        polled.map(|r| r.map(|b| kind.wrap(b)))
    }
}

impl<K: Kind> Acquire<'_, K> {
    fn poll_buf(&mut self, cx: &mut Context<'_>) -> Poll<Result<PooledBuf, AllocError>> {
        let pool = self.pool.pool();
        if let AcquireState::Start = self.state {
            self.state = AcquireState::Done;
            let m = self.n;
            if !pool.key.budgeted() {
                return Poll::Ready(pool.obtain_at(m, self.how, Wait::Never, self.site));
            }
            let waker = || Some(Wake::Task(Some(cx.waker().clone())));
            match pool.begin(m, self.how, waker) {
                Err(e) => return Poll::Ready(Err(e)),
                Ok(Begun::Got(b)) => return Poll::Ready(Ok(pool.track(b, self.site))),
                Ok(Begun::Queued { ticket, charge }) => {
                    self.state = AcquireState::Waiting { ticket, m, charge };
                }
            }
        }
        let AcquireState::Waiting { ticket, m, charge } = &self.state else {
            panic!("`Acquire` polled after it completed");
        };
        if !pool.budget().poll(ticket, Some(cx.waker())) {
            return Poll::Pending;
        }
        let (m, charge) = (*m, *charge);
        self.state = AcquireState::Done;
        let got = pool.fetch_paid(m, self.how, charge);
        Poll::Ready(got.map(|b| pool.track(b, self.site)))
    }
}

impl<K: Kind> Drop for Acquire<'_, K> {
    /// Cancels the wait: what the request had gathered goes to the next waiter.
    fn drop(&mut self) {
        if let AcquireState::Waiting { ticket, .. } =
            std::mem::replace(&mut self.state, AcquireState::Done)
        {
            self.pool.pool().budget().cancel(ticket);
        }
    }
}
