//! The budget on bytes in use ([`Builder::max_in_use_bytes`](crate::Builder::max_in_use_bytes)):
//! the shared account, its queue of waiters, and each thread's credit.
//!
//! # The protocol
//!
//! The budget's `limit` bytes are always in exactly one of four places:
//!
//! ```text
//!   limit = free                     (the shared account, under its lock)
//!         + Σ have of queued waiters (the front waiter accumulates what is released)
//!         + Σ credit of thread caches (each thread's own, an atomic in its cache)
//!         + in use                   (charged to buffers handed out, and to granted waiters)
//! ```
//!
//! Every move between them is a single atomic step (a read-modify-write of one credit, or a
//! critical section of the account), so in use can never exceed `limit`: a buffer is handed
//! out only after its charge moved into "in use" from a credit or from `free`.
//!
//! - **A get** charges the buffer's capacity (its tier's size; above the largest tier, the
//!   size rounded up to 4 KiB) to this thread's credit: one compare-and-swap on a line only
//!   this thread writes in steady state (no shared write). When the credit is short, the
//!   thread hands its credit to the account and takes the charge plus a refill of up to
//!   `credit_max` under the account's lock, if no one is queued.
//! - **A return** adds the charge back to the returning thread's credit (one `fetch_add`).
//!   Above `credit_max` it gives the excess beyond half of `credit_max` to the account; under
//!   pressure it gives all of it.
//! - **A waiter** joins a FIFO queue. Only the front waiter accumulates released bytes, so a
//!   large request is never starved by a stream of small ones: once it is at the front,
//!   everything released goes to it until it is served. Joining sets the *pressure* flag and
//!   then *sweeps* every thread cache's credit into the account (an atomic swap each), so no
//!   idle thread holds budget a waiter needs, and the waiter never waits on another thread's
//!   cooperation.
//! - **Idle credit**: at most `credit_max` per thread cache (`limit / 16`, at most the thread
//!   cache budget), and none once a waiter has swept it. A `try_get` that finds the account
//!   short sweeps too before it refuses.
//!
//! Why credit cannot be stranded under pressure: a return adds to its credit (`SeqCst`) and
//! then reads the pressure flag (`SeqCst`); a waiter sets the flag (`SeqCst`) and then swaps
//! every credit (`SeqCst`). In the single order of `SeqCst` operations, either the return's
//! read comes after the flag was set (it sees pressure and gives its credit back) or its add
//! comes before the sweep's swap (which takes it). The loom model
//! `loom_budget_credit_is_never_stranded` checks it.

use std::collections::VecDeque;
use std::task::Waker;
use std::time::{Duration, Instant};

use crate::sync::{lock, AtomicBool, AtomicUsize, Mutex, Ordering};

/// The bit of a pool's key that marks a pool with a budget. Caches of such a pool arm their
/// doorbell with the key without it, so the unbudgeted fast paths (which compare the doorbell
/// with the whole key) always miss, and budgeted operations take their own path at no cost to
/// pools without a budget.
pub(crate) const BUDGETED: u32 = 1 << 31;

/// The doorbell value of the caches of the pool with key `key`.
#[inline(always)]
pub(crate) fn arm(key: u32) -> u32 {
    key & !BUDGETED
}

/// Budget charges are kept in a `PooledBuf`'s tier field: a tier hint with this bit set is a
/// buffer charged its tier's size.
pub(crate) const TAG_TIERED: u32 = 1 << 30;
/// A tier field with this bit set (and not one of the two reserved values `u32::MAX`,
/// `u32::MAX - 1`) is a buffer above the largest tier, charged the low 31 bits in pages.
pub(crate) const TAG_OVERSIZE: u32 = 1 << 31;
/// The unit of charges above the largest tier.
pub(crate) const PAGE: usize = 4096;
/// The most pages a charge can encode (the largest budget is this many pages).
pub(crate) const MAX_PAGES: usize = (u32::MAX - 2 - TAG_OVERSIZE) as usize;
/// The largest `max_in_use_bytes` (about 8 TiB).
pub const MAX_BUDGET: usize = MAX_PAGES * PAGE;

/// Shares of the budget a thread cache may hold as credit: `limit / CREDIT_SHARE`.
pub(crate) const CREDIT_SHARE: usize = 16;

/// What a `PooledBuf`'s tier field says about its charge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Charge {
    /// Not charged (an adopted `Vec`, or a pool without budget).
    None,
    /// Charged its tier's size; the tier hint (byte offset) follows.
    Tier(u32),
    /// Charged this many bytes (above the largest tier).
    Bytes(usize),
}

impl Charge {
    /// Decodes the tier field of a buffer from a budgeted pool.
    #[inline]
    pub(crate) fn of(tag: u32) -> Charge {
        if tag >= u32::MAX - 1 {
            Charge::None
        } else if tag & TAG_OVERSIZE != 0 {
            Charge::Bytes((tag & !TAG_OVERSIZE) as usize * PAGE)
        } else if tag & TAG_TIERED != 0 {
            Charge::Tier(tag & !TAG_TIERED)
        } else {
            Charge::None
        }
    }

    /// The tier hint to return the buffer with (`u32::MAX`, none, above the largest tier).
    #[inline]
    pub(crate) fn hint(self) -> u32 {
        match self {
            Charge::Tier(hint) => hint,
            _ => u32::MAX,
        }
    }
}

/// The charge of a buffer above the largest tier, for `n` bytes: `(bytes, tag)`.
pub(crate) fn oversize_charge(n: usize) -> Option<(usize, u32)> {
    let pages = n.div_ceil(PAGE).max(1);
    (pages <= MAX_PAGES).then(|| (pages * PAGE, TAG_OVERSIZE | pages as u32))
}

/// A thread cache's credit: budget bytes its thread may charge without asking.
///
/// The owner takes and adds with read-modify-writes on its own cache line (never contended in
/// steady state); a waiter may [`sweep`](Self::sweep) it from any thread at any time. Every
/// operation is one atomic step, so no byte is lost or counted twice.
#[derive(Debug, Default)]
pub(crate) struct Credit(AtomicUsize);

impl Credit {
    /// Takes `charge` if the credit holds that much.
    #[inline]
    pub(crate) fn take(&self, charge: usize) -> bool {
        let mut cur = self.0.load(Ordering::Relaxed);
        loop {
            if cur < charge {
                return false;
            }
            match self.0.compare_exchange_weak(
                cur,
                cur - charge,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
    }

    /// Adds `bytes`; returns the new credit. `SeqCst`: see the module docs.
    #[inline]
    pub(crate) fn add(&self, bytes: usize) -> usize {
        self.0.fetch_add(bytes, Ordering::SeqCst) + bytes
    }

    /// Takes the whole credit (any thread). `SeqCst`: see the module docs.
    pub(crate) fn sweep(&self) -> usize {
        self.0.swap(0, Ordering::SeqCst)
    }

    /// Takes what is above `keep`.
    fn take_above(&self, keep: usize) -> usize {
        let mut cur = self.0.load(Ordering::Relaxed);
        loop {
            if cur <= keep {
                return 0;
            }
            match self
                .0
                .compare_exchange_weak(cur, keep, Ordering::SeqCst, Ordering::Relaxed)
            {
                Ok(_) => return cur - keep,
                Err(now) => cur = now,
            }
        }
    }

    /// The credit now.
    pub(crate) fn get(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
}

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
}

/// A place in the queue, held by the waiting thread or future. Give it to
/// [`Budget::cancel`] if the wait ends without [`Budget::is_granted`] returning true.
#[derive(Debug)]
#[must_use = "a ticket must be collected or cancelled, or its bytes stay charged"]
pub(crate) struct Ticket {
    id: u64,
    need: usize,
}

#[derive(Debug)]
struct Account {
    free: usize,
    queue: VecDeque<Waiter>,
    /// Sum of `have` over `queue`.
    queued: usize,
    /// Tickets served and not yet collected (their bytes are in use).
    served: Vec<(u64, usize)>,
    next_id: u64,
    /// The most bytes ever out of the account (in use plus credit): `limit - free - queued`.
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
    credit_max: usize,
    /// True while the queue is not empty: returns give all their credit back.
    pressure: AtomicBool,
    account: Mutex<Account>,
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
}

impl Budget {
    /// A budget of `limit` bytes; thread caches hold at most `credit_max` of it idle.
    pub(crate) fn new(limit: usize, credit_max: usize) -> Self {
        Budget {
            limit,
            credit_max,
            pressure: AtomicBool::new(false),
            account: Mutex::new(Account {
                free: limit,
                queue: VecDeque::new(),
                queued: 0,
                served: Vec::new(),
                next_id: 0,
                peak: 0,
                waits: 0,
                wait_total: Duration::ZERO,
                wait_longest: Duration::ZERO,
                refusals: 0,
            }),
        }
    }

    /// The limit.
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// The most credit a thread cache keeps while no one waits.
    pub(crate) fn credit_max(&self) -> usize {
        self.credit_max
    }

    /// True while someone waits.
    pub(crate) fn under_pressure(&self) -> bool {
        self.pressure.load(Ordering::SeqCst)
    }

    /// Adds `charge` back to `credit` (a return on the credit's owning thread). Returns what
    /// the credit should not keep, taken out of it, for the caller to
    /// [`release`](Self::release) (after it let go of the cache): everything under pressure,
    /// the excess over half of `credit_max` above `credit_max`, otherwise nothing.
    #[inline]
    pub(crate) fn credit_back(&self, credit: &Credit, charge: usize) -> usize {
        let now = credit.add(charge);
        if self.under_pressure() {
            credit.sweep()
        } else if now > self.credit_max {
            credit.take_above(self.credit_max / 2)
        } else {
            0
        }
    }

    /// Moves `returned` bytes into the account, then takes `charge` and up to `refill` more,
    /// if no one is queued and `charge` fits. Returns the refill taken (to be added to the
    /// caller's credit with [`Budget::credit_back`]), or `None` if `charge` did not
    /// fit (`returned` stays in the account either way).
    pub(crate) fn try_take(&self, charge: usize, returned: usize, refill: usize) -> Option<usize> {
        let mut wake = Vec::new();
        let r = {
            let mut a = lock(&self.account);
            self.deposit(&mut a, returned, &mut wake);
            if a.queue.is_empty() && a.free >= charge {
                let extra = refill.min(a.free - charge);
                a.free -= charge + extra;
                self.note_peak(&mut a);
                Some(extra)
            } else {
                None
            }
        };
        wake.into_iter().for_each(Wake::wake);
        r
    }

    /// Counts a refusal (a `try_get` over budget).
    pub(crate) fn refused(&self) {
        lock(&self.account).refusals += 1;
    }

    /// Gives `bytes` back to the account: to the queue's front first.
    pub(crate) fn release(&self, bytes: usize) {
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
            self.pressure.store(false, Ordering::SeqCst);
        }
        self.note_peak(a);
    }

    fn note_peak(&self, a: &mut Account) {
        a.peak = a.peak.max(self.limit - a.free - a.queued);
    }

    /// Joins the queue for `need` bytes, and sets the pressure flag. The caller then sweeps
    /// the thread caches' credit (`PoolState::sweep_credit`) and waits.
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
            });
            self.pressure.store(true, Ordering::SeqCst);
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
    pub(crate) fn wait(&self, ticket: Ticket, deadline: Option<Instant>) -> bool {
        loop {
            if self.poll(&ticket, None) {
                return true;
            }
            match deadline {
                None => std::thread::park(),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        // Served between the poll and now? `cancel` gives it back then.
                        self.cancel(ticket);
                        return false;
                    }
                    std::thread::park_timeout(d - now);
                }
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
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn charges_round_trip_through_the_tag() {
        assert_eq!(Charge::of(u32::MAX), Charge::None);
        assert_eq!(Charge::of(u32::MAX - 1), Charge::None);
        assert_eq!(Charge::of(128), Charge::None);
        assert_eq!(Charge::of(TAG_TIERED | 128), Charge::Tier(128));
        let (bytes, tag) = oversize_charge(PAGE + 1).unwrap();
        assert_eq!(
            (bytes, Charge::of(tag)),
            (2 * PAGE, Charge::Bytes(2 * PAGE))
        );
        let (bytes, tag) = oversize_charge(MAX_BUDGET).unwrap();
        assert_eq!(Charge::of(tag), Charge::Bytes(bytes));
        assert!(oversize_charge(MAX_BUDGET + 1).is_none());
        assert_eq!(oversize_charge(0).unwrap().0, PAGE);
    }

    #[test]
    fn the_front_waiter_accumulates_and_later_ones_wait_their_turn() {
        let b = Budget::new(100, 10);
        assert_eq!(b.try_take(60, 0, 0), Some(0));
        let big = b.enqueue(100, Wake::Task(None));
        assert!(b.under_pressure());
        // A small request behind the large one does not jump the queue.
        assert_eq!(b.try_take(1, 0, 0), None);
        let small = b.enqueue(1, Wake::Task(None));
        assert!(!b.poll(&big, None));
        b.release(60);
        assert!(b.poll(&big, None), "served once all 100 came back");
        assert!(!b.poll(&small, None));
        assert!(b.under_pressure());
        b.release(100);
        assert!(b.poll(&small, None));
        assert!(!b.under_pressure());
        let s = b.snapshot();
        assert_eq!((s.free, s.queued, s.waiting, s.waits), (99, 0, 0, 2));
    }

    #[test]
    fn a_cancelled_front_passes_its_bytes_on() {
        let b = Budget::new(100, 10);
        assert_eq!(b.try_take(100, 0, 0), Some(0));
        let first = b.enqueue(80, Wake::Task(None));
        let second = b.enqueue(30, Wake::Task(None));
        b.release(50); // all to the front
        assert_eq!(b.snapshot().queued, 50);
        b.cancel(first);
        assert!(b.poll(&second, None), "the 50 went on to the next waiter");
        let s = b.snapshot();
        assert_eq!((s.free, s.queued), (20, 0));
        b.release(50);
        b.release(30);
        assert_eq!(b.snapshot().free, 100);
    }

    #[test]
    fn a_served_but_uncollected_ticket_gives_everything_back_when_cancelled() {
        let b = Budget::new(10, 1);
        assert_eq!(b.try_take(10, 0, 0), Some(0));
        let t = b.enqueue(10, Wake::Task(None));
        b.release(10);
        b.cancel(t);
        assert_eq!(b.snapshot().free, 10);
    }

    #[test]
    fn credit_refunds_keep_half_the_maximum_and_all_goes_back_under_pressure() {
        let b = Budget::new(1000, 100);
        let c = Credit::default();
        let refund = |charge| b.release(b.credit_back(&c, charge));
        assert_eq!(b.try_take(200, 0, 0), Some(0));
        refund(150);
        assert_eq!(c.get(), 50, "above the maximum: back down to half of it");
        assert_eq!(b.snapshot().free, 900, "50 in use, 50 credit");
        let t = b.enqueue(1000, Wake::Task(None));
        assert!(
            !b.poll(&t, None),
            "50 bytes are still charged, 50 are credit"
        );
        refund(50);
        assert_eq!(c.get(), 0, "under pressure every byte goes back");
        assert!(b.poll(&t, None));
    }

    #[test]
    fn blocking_wait_times_out_and_returns_what_it_gathered() {
        let b = Budget::new(10, 1);
        assert_eq!(b.try_take(10, 0, 0), Some(0));
        b.release(4);
        let t = b.enqueue(10, Wake::Thread(std::thread::current()));
        let deadline = Instant::now() + Duration::from_millis(20);
        assert!(!b.wait(t, Some(deadline)));
        let s = b.snapshot();
        assert_eq!((s.free, s.queued, s.waiting), (4, 0, 0));
        assert!(s.wait_longest >= Duration::from_millis(20));
    }
}
