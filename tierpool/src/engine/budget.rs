//! The budget on bytes in use ([`Builder::max_in_use_bytes`](crate::Builder::max_in_use_bytes)):
//! the shared account and its queue of waiters.
//!
//! # The protocol
//!
//! The budget's `limit` bytes are always in exactly one of four places:
//!
//! ```text
//!   limit = free                       (the shared account, under its lock)
//!         + Σ have of queued waiters   (the front waiter accumulates what is released)
//!         + Σ bytes on thread stacks   (buffers a thread cache holds count as charged)
//!         + in use                     (charged to buffers handed out, and to granted waiters)
//! ```
//!
//! A buffer is charged when it leaves the shared side (the depot or the allocator) and
//! refunded when it goes back there (to the depot, or freed); moving between a thread cache's
//! stack and a user costs nothing. So the fast path of a pool with a budget is the fast path
//! of a pool without one, instruction for instruction: a get from the stack and a return onto
//! it move a buffer between "on a stack" and "in use", both charged. Since a stack's buffers
//! are never counted as free, in use never exceeds `limit`.
//!
//! - **A get** that its stack cannot serve takes its buffer's charge (its tier's size; above
//!   the largest tier, the size rounded up to 4 KiB) from the account, and with a refill from
//!   the depot the charge of the whole batch, if no one is queued and it fits. Otherwise it
//!   waits.
//! - **A return** onto a stack costs nothing; one the stack cannot take goes to the depot or
//!   is freed, and its charge goes back to the account (to the front waiter first). Batches
//!   flushed from a stack to the depot are refunded as a batch.
//! - **A waiter** joins a FIFO queue. Only the front waiter accumulates released bytes, so a
//!   large request is never starved by a stream of small ones: once it is at the front,
//!   everything released goes to it until it is served. Joining sets the *pressure* flag and
//!   then *sweeps* every thread cache: each is reclaimed (`cache/reclaim.rs`) and its stacks go
//!   to the depot, refunded, whether its owner is busy or has been idle for an hour. So no idle
//!   thread holds budget a waiter needs, and the waiter waits on no thread's cooperation.
//!   While the flag is up, thread caches keep nothing: every operation takes the slow path,
//!   and returns go to the depot and the account.
//! - **How much a thread may hold**: a budgeted pool's thread caches hold at most
//!   `min(limit / 16, thread_cache_bytes)` each, so that one thread cannot sit on the whole
//!   budget between two sweeps.
//!
//! Why nothing is stranded: the sweep runs after the flag is up, and reclaims every cache
//! under that cache's lock after its owner's current operation (if any) has finished; the
//! owner's next operation finds its doorbell rung, takes the same lock, and so sees the flag.
//! The loom model `loom_budget_sweep_strands_nothing` checks it.

use std::collections::VecDeque;
use std::task::Waker;
use std::time::{Duration, Instant};

use crate::base::sync::{lock, AtomicBool, AtomicUsize, Mutex, Ordering};

/// The largest `max_in_use_bytes` (about 8 TiB): what a buffer's tag can record as a charge.
pub(crate) const MAX_BUDGET: usize = crate::base::key::MAX_PAGES * crate::base::key::PAGE;

/// Shares of the budget a thread cache may hold: `limit / CACHE_SHARE`.
pub(crate) const CACHE_SHARE: usize = 16;

/// How a waiter is woken.
#[derive(Debug)]
pub(crate) enum Wake {
    /// A blocked thread.
    Thread(std::thread::Thread),
    /// An async task (the latest waker it was polled with).
    Task(Option<Waker>),
}

impl Wake {
    fn wake(self) {
        match self {
            Wake::Thread(t) => t.unpark(),
            Wake::Task(Some(w)) => w.wake(),
            Wake::Task(None) => {}
        }
    }
}

#[derive(Debug)]
struct Waiter {
    id: u64,
    need: usize,
    /// What it has accumulated (only the front waiter accumulates).
    have: usize,
    since: Instant,
    wake: Wake,
    /// An async waiter reported as overdue by a tick ([`Budget::overdue_tasks`]).
    reported: bool,
}

/// A place in the queue, held by the waiting thread or future. Give it to
/// [`Budget::cancel`] if the wait ends without [`Budget::poll`] returning true.
#[derive(Debug)]
#[must_use = "a ticket must be collected or cancelled, or its bytes stay charged"]
pub(crate) struct Ticket {
    id: u64,
    need: usize,
}

impl Ticket {
    /// The bytes it waits for.
    pub(crate) fn need(&self) -> usize {
        self.need
    }
}

#[derive(Debug, Default)]
struct Account {
    free: usize,
    queue: VecDeque<Waiter>,
    /// Sum of `have` over `queue`.
    queued: usize,
    /// Tickets served and not yet collected (their bytes are in use).
    served: Vec<(u64, usize)>,
    next_id: u64,
    /// The most bytes ever out of the account (in use plus on thread stacks):
    /// `limit - free - queued`.
    peak: usize,
    waits: u64,
    wait_total: Duration,
    wait_longest: Duration,
    refusals: u64,
}

/// The shared account of one pool's budget.
#[derive(Debug)]
pub(crate) struct Budget {
    limit: usize,
    /// True while the queue is not empty: thread caches keep nothing. Written under the
    /// account's lock; read by owners under their cache's lock or after a sweep reclaimed
    /// their cache (module docs), so `Relaxed` is enough.
    pressure: AtomicBool,
    account: Mutex<Account>,
    /// Of the bytes in use, those set aside by reservations and not yet spent (for `Stats`
    /// only: the account counts them as in use).
    reserved: AtomicUsize,
}

/// A snapshot of the account, for `Stats`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct AccountStats {
    pub(crate) free: usize,
    /// Accumulated by waiters not yet served (served ones count as in use).
    pub(crate) queued: usize,
    pub(crate) waiting: usize,
    pub(crate) peak: usize,
    pub(crate) waits: u64,
    pub(crate) wait_total: Duration,
    pub(crate) wait_longest: Duration,
    pub(crate) refusals: u64,
    pub(crate) reserved: usize,
}

impl Budget {
    /// A budget of `limit` bytes.
    pub(crate) fn new(limit: usize) -> Self {
        Budget {
            limit,
            pressure: AtomicBool::new(false),
            account: Mutex::new(Account {
                free: limit,
                ..Account::default()
            }),
            reserved: AtomicUsize::new(0),
        }
    }

    /// The limit.
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// True while someone waits.
    pub(crate) fn under_pressure(&self) -> bool {
        self.pressure.load(Ordering::Relaxed)
    }

    /// Takes `charge` bytes, and as many more multiples of `unit` (`> 0`) up to `more` as
    /// are free, if no one is queued and `charge` fits. Returns the extra bytes taken, or
    /// `None` (nothing taken) if the charge must wait.
    pub(crate) fn try_take(&self, charge: usize, more: usize, unit: usize) -> Option<usize> {
        let mut a = lock(&self.account);
        if !a.queue.is_empty() || a.free < charge {
            return None;
        }
        let room = (a.free - charge).min(more);
        let extra = room - room % unit.max(1);
        a.free -= charge + extra;
        self.note_peak(&mut a);
        Some(extra)
    }

    /// Notes `bytes` set aside by a reservation (`more`) or spent or given back (not).
    pub(crate) fn note_reserved(&self, bytes: usize, more: bool) {
        if more {
            self.reserved.fetch_add(bytes, Ordering::Relaxed);
        } else {
            self.reserved.fetch_sub(bytes, Ordering::Relaxed);
        }
    }

    /// Counts a refusal (a `try_get` over budget).
    pub(crate) fn refused(&self) {
        lock(&self.account).refusals += 1;
    }

    /// Gives `bytes` back to the account: to the queue's front first.
    pub(crate) fn refund(&self, bytes: usize) {
        if bytes == 0 {
            return;
        }
        let mut wake = Vec::new();
        {
            let mut a = lock(&self.account);
            self.deposit(&mut a, bytes, &mut wake);
        }
        wake.into_iter().for_each(Wake::wake);
    }

    /// Under the lock: `bytes` go to the front waiters in order, serving each one whose need
    /// is met; what is left stays free. Collects whom to wake (woken after the lock).
    fn deposit(&self, a: &mut Account, mut bytes: usize, wake: &mut Vec<Wake>) {
        a.free += bytes;
        bytes = a.free;
        while let Some(front) = a.queue.front_mut() {
            let give = bytes.min(front.need - front.have);
            front.have += give;
            a.queued += give;
            bytes -= give;
            if front.have < front.need {
                break;
            }
            let w = a.queue.pop_front().expect("front exists");
            a.queued -= w.have;
            a.served.push((w.id, w.need));
            let waited = w.since.elapsed();
            a.wait_total += waited;
            a.wait_longest = a.wait_longest.max(waited);
            wake.push(w.wake);
        }
        a.free = bytes;
        if a.queue.is_empty() {
            self.pressure.store(false, Ordering::Relaxed);
        }
        self.note_peak(a);
    }

    fn note_peak(&self, a: &mut Account) {
        a.peak = a.peak.max(self.limit - a.free - a.queued);
    }

    /// Joins the queue for `need` bytes, and sets the pressure flag. The caller then sweeps
    /// the thread caches (`cache/reclaim.rs`) and waits.
    pub(crate) fn enqueue(&self, need: usize, wake: Wake) -> Ticket {
        let mut woken = Vec::new();
        let ticket = {
            let mut a = lock(&self.account);
            let id = a.next_id;
            a.next_id += 1;
            a.waits += 1;
            a.queue.push_back(Waiter {
                id,
                need,
                have: 0,
                since: Instant::now(),
                wake,
                reported: false,
            });
            self.pressure.store(true, Ordering::Relaxed);
            // A new front accumulates what is free at once.
            self.deposit(&mut a, 0, &mut woken);
            Ticket { id, need }
        };
        woken.into_iter().for_each(Wake::wake);
        ticket
    }

    /// True (and the ticket is consumed: its bytes are in use now) if it was served;
    /// otherwise stores `waker` to be woken with.
    pub(crate) fn poll(&self, ticket: &Ticket, waker: Option<&Waker>) -> bool {
        let mut a = lock(&self.account);
        if let Some(i) = a.served.iter().position(|&(id, _)| id == ticket.id) {
            a.served.swap_remove(i);
            return true;
        }
        if let Some(waker) = waker {
            if let Some(w) = a.queue.iter_mut().find(|w| w.id == ticket.id) {
                match &mut w.wake {
                    Wake::Task(Some(old)) if old.will_wake(waker) => {}
                    slot => *slot = Wake::Task(Some(waker.clone())),
                }
            }
        }
        false
    }

    /// The async waiters (futures of `acquire`) that have waited `after` or longer and were
    /// not reported yet, now marked reported: how many, and the need and wait of the longest.
    /// (A blocked thread reports its own wait, from [`wait`](Self::wait).)
    #[cfg_attr(not(feature = "holders"), allow(dead_code))]
    pub(crate) fn overdue_tasks(&self, after: Duration) -> Option<(usize, usize, Duration)> {
        let mut a = lock(&self.account);
        let now = Instant::now();
        let mut found: Option<(usize, usize, Duration)> = None;
        for w in a.queue.iter_mut() {
            let waited = now.saturating_duration_since(w.since);
            if w.reported || waited < after || !matches!(w.wake, Wake::Task(_)) {
                continue;
            }
            w.reported = true;
            found = Some(match found {
                Some((count, need, longest)) if longest >= waited => (count + 1, need, longest),
                Some((count, ..)) => (count + 1, w.need, waited),
                None => (1, w.need, waited),
            });
        }
        found
    }

    /// Gives up a place in the queue (a dropped future, a timeout): what it accumulated, or
    /// everything if it was served meanwhile, goes back to the account (to the next waiter).
    pub(crate) fn cancel(&self, ticket: Ticket) {
        let mut wake = Vec::new();
        {
            let mut a = lock(&self.account);
            let back = if let Some(i) = a.served.iter().position(|&(id, _)| id == ticket.id) {
                a.served.swap_remove(i);
                ticket.need
            } else if let Some(i) = a.queue.iter().position(|w| w.id == ticket.id) {
                let w = a.queue.remove(i).expect("found");
                a.queued -= w.have;
                let waited = w.since.elapsed();
                a.wait_total += waited;
                a.wait_longest = a.wait_longest.max(waited);
                w.have
            } else {
                0
            };
            // Also when `back` is 0: the next waiter may now be at the front.
            self.deposit(&mut a, back, &mut wake);
        }
        wake.into_iter().for_each(Wake::wake);
    }

    /// Blocks the calling thread until `ticket` is served (true) or `deadline` passes
    /// (false: the ticket is cancelled).
    pub(crate) fn wait(
        &self,
        ticket: Ticket,
        deadline: Option<Instant>,
        mut report: Option<(Instant, &mut dyn FnMut())>,
    ) -> bool {
        loop {
            if self.poll(&ticket, None) {
                return true;
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                // Served between the poll and now? `cancel` gives it back then.
                self.cancel(ticket);
                return false;
            }
            // Waiting longer than the report's threshold: it runs once, here, with no lock
            // held (feature `holders`: who holds the budget), and the wait goes on.
            if report.as_ref().is_some_and(|(at, _)| now >= *at) {
                if let Some((_, f)) = report.take() {
                    // A report that panics (a subscriber's bug) must not leave this ticket
                    // in the queue, owning every release: its panic is dropped here.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
                }
                continue;
            }
            match [deadline, report.as_ref().map(|r| r.0)]
                .into_iter()
                .flatten()
                .min()
            {
                None => std::thread::park(),
                Some(until) => std::thread::park_timeout(until.saturating_duration_since(now)),
            }
        }
    }

    /// A snapshot of the account.
    pub(crate) fn snapshot(&self) -> AccountStats {
        let a = lock(&self.account);
        AccountStats {
            free: a.free,
            queued: a.queued,
            waiting: a.queue.len(),
            peak: a.peak,
            waits: a.waits,
            wait_total: a.wait_total,
            wait_longest: a.wait_longest,
            refusals: a.refusals,
            reserved: self.reserved.load(Ordering::Relaxed),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_take_gets_its_charge_and_whole_units_of_what_is_free() {
        let b = Budget::new(100);
        assert_eq!(
            b.try_take(30, 100, 20),
            Some(60),
            "30 + three units of 20 of the 70 free"
        );
        assert_eq!(b.snapshot().free, 10);
        assert_eq!(b.try_take(20, 0, 1), None, "does not fit");
        assert_eq!(b.try_take(10, 50, 20), Some(0));
        b.refund(100);
        assert_eq!(b.snapshot().free, 100);
        assert_eq!(b.snapshot().peak, 100);
    }

    #[test]
    fn the_front_waiter_accumulates_and_later_ones_wait_their_turn() {
        let b = Budget::new(100);
        assert_eq!(b.try_take(60, 0, 1), Some(0));
        let big = b.enqueue(100, Wake::Task(None));
        assert!(b.under_pressure());
        // A small request behind the large one does not jump the queue.
        assert_eq!(b.try_take(1, 0, 1), None);
        let small = b.enqueue(1, Wake::Task(None));
        assert!(!b.poll(&big, None));
        b.refund(60);
        assert!(b.poll(&big, None), "served once all 100 came back");
        assert!(!b.poll(&small, None));
        assert!(b.under_pressure());
        b.refund(100);
        assert!(b.poll(&small, None));
        assert!(!b.under_pressure());
        let s = b.snapshot();
        assert_eq!((s.free, s.queued, s.waiting, s.waits), (99, 0, 0, 2));
    }

    #[test]
    fn a_cancelled_front_passes_its_bytes_on() {
        let b = Budget::new(100);
        assert_eq!(b.try_take(100, 0, 1), Some(0));
        let first = b.enqueue(80, Wake::Task(None));
        let second = b.enqueue(30, Wake::Task(None));
        b.refund(50); // all to the front
        assert_eq!(b.snapshot().queued, 50);
        b.cancel(first);
        assert!(b.poll(&second, None), "the 50 went on to the next waiter");
        let s = b.snapshot();
        assert_eq!((s.free, s.queued), (20, 0));
        b.refund(50);
        b.refund(30);
        assert_eq!(b.snapshot().free, 100);
    }

    #[test]
    fn a_served_but_uncollected_ticket_gives_everything_back_when_cancelled() {
        let b = Budget::new(10);
        assert_eq!(b.try_take(10, 0, 1), Some(0));
        let t = b.enqueue(10, Wake::Task(None));
        b.refund(10);
        b.cancel(t);
        assert_eq!(b.snapshot().free, 10);
    }

    #[test]
    fn nothing_jumps_the_queue_and_pressure_lasts_while_anyone_waits() {
        let b = Budget::new(10);
        assert_eq!(b.try_take(10, 0, 1), Some(0));
        let t = b.enqueue(5, Wake::Task(None));
        assert!(b.under_pressure());
        b.refund(3);
        assert_eq!(
            b.try_take(1, 0, 1),
            None,
            "3 are free, but the queue is first"
        );
        b.refund(2);
        assert!(!b.under_pressure(), "served: the queue is empty");
        assert!(b.poll(&t, None));
        assert_eq!(
            b.try_take(1, 0, 1),
            None,
            "5 are in use by the waiter, 5 outside"
        );
        b.refund(5);
        b.refund(5);
        assert_eq!(b.snapshot().free, 10);
    }

    #[test]
    fn blocking_wait_times_out_and_returns_what_it_gathered() {
        let b = Budget::new(10);
        assert_eq!(b.try_take(10, 0, 1), Some(0));
        b.refund(4);
        let t = b.enqueue(10, Wake::Thread(std::thread::current()));
        let deadline = Instant::now() + Duration::from_millis(20);
        assert!(!b.wait(t, Some(deadline), None));
        let s = b.snapshot();
        assert_eq!((s.free, s.queued, s.waiting), (4, 0, 0));
        assert!(s.wait_longest >= Duration::from_millis(20));
    }
}
