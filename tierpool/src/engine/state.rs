//! `PoolState`: everything one pool shares between its handles, its thread caches and its
//! reclaimers. It sits below the caches' policy and the thread-local table and imports
//! neither.

use crate::base::key::{Key, Tag};
use crate::base::sync::{Arc, AtomicBool, AtomicU64, Mutex, Ordering};
use crate::engine::budget::{Budget, CACHE_SHARE};
use crate::engine::cache::reclaim::Caches;
use crate::engine::cache::spare::SpareSlots;
use crate::engine::cache::{offset_table, Cache};
use crate::engine::class::{Classes, ALL_BUCKETS};
use crate::engine::clock::Clock;
use crate::engine::config::Config;
use crate::engine::depot::{Allowance, Depot};
use crate::engine::error::AllocError;
use crate::engine::fresh::Fresh;
use crate::observe::holders::Tracker;
use crate::observe::stats::{BudgetStats, Stats};
use crate::observe::telemetry::Published;
use crate::sys::alloc::{free, Owned};
use crate::sys::trim::{free_released, AllocatorTrim, Why};

/// Bumped whenever any pool closes, so that thread tables know when to look for dead caches.
static CLOSED_POOLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many pools have closed so far. `Acquire`: pairs with the `Release` increment in
/// [`PoolState::close`], which comes after that pool's `closed` flag is set, so a table that
/// sees a new count and then reads `closed` flags sees the flag of the pool that bumped it.
pub(crate) fn closed_pools() -> u64 {
    CLOSED_POOLS.load(std::sync::atomic::Ordering::Acquire)
}

/// What a get that its thread cache could not serve comes to.
#[derive(Debug)]
pub(crate) enum Got {
    /// A buffer, and its tag (an [`Owned`]: the deferred work that runs before the buffer
    /// reaches its handle may unwind, `policy::finish`).
    Buf(Owned, Tag),
    /// A pool with a budget has no room for this buffer's charge now (bytes): the caller
    /// must wait outside any cache operation, then ask again with the charge paid.
    Wait(usize),
}

/// The state of one pool.
#[derive(Debug)]
pub(crate) struct PoolState {
    /// Never written after construction.
    pub(in crate::engine) classes: Classes,
    pub(in crate::engine) thread_cache_bytes: usize,
    /// What each thread cache may book: `thread_cache_bytes`, or under a budget
    /// `min(thread_cache_bytes, limit / 16)` (0 where caches cannot be reclaimed: `fence.rs`).
    cache_bytes: usize,
    pub(in crate::engine) zero_on_return: bool,
    /// A get its tier cannot serve may be lent a larger tier's buffer ([`Self::lends`]).
    lend: bool,
    /// The alignment of every buffer's allocation (1 for a plain pool, an
    /// [`AlignedPool`](crate::AlignedPool)'s alignment): see `Settings::align`. Never 0.
    align: usize,
    pub(in crate::engine) max_retained_bytes: usize,
    pub(in crate::engine) clock: Clock,
    /// The thread caches' lookup table (`cache::offset_table`), copied into each.
    cache_table: Box<[u32; ALL_BUCKETS]>,
    /// What thread caches book their room from: `allowance`, or, where caches cannot be
    /// reclaimed (`fence.rs`), an unbounded one of their own.
    cache_allowance: Arc<Allowance>,
    /// Stack storage thread caches gave up, for the next caches' stacks (`cache/spare.rs`).
    spares: Arc<SpareSlots>,
    pub(in crate::engine) depot: Depot,
    /// Set once, by `close`, before it rings the caches (see [`Cache::ring`]).
    pub(in crate::engine) closed: AtomicBool,
    /// Bumped by `trim()` before it rings the caches; thread caches compare it with the value
    /// they last acted on (see [`Cache::ring`]).
    pub(in crate::engine) trim_gen: AtomicU64,
    /// The last epoch whose tick has been done.
    tick_epoch: AtomicU64,
    /// The sixteenth of an interval in which idle caches were last reclaimed for room.
    pub(in crate::engine) last_quiet_reclaim: AtomicU64,
    /// Every thread cache of this pool.
    pub(in crate::engine) caches: Caches,
    pub(in crate::engine) trimmer: Mutex<Option<std::thread::Thread>>,
    /// The budget on bytes in use, if configured. A budgeted pool keeps only buffers of
    /// exactly a tier's size, so that every buffer it hands out has the capacity it was
    /// charged.
    pub(in crate::engine) budget: Option<Budget>,
    /// Released bytes, for glibc's `malloc_trim` (`sys/trim.rs`).
    pub(in crate::engine) allocator_trim: AllocatorTrim,
    /// The pool's name (`Builder::name`).
    pub(in crate::engine) name: String,
    /// What metrics publication remembers (`observe/telemetry.rs`; nothing without the
    /// feature `metrics`).
    published: Published,
    /// The tracked buffers (`observe/holders.rs`; none without the feature `holders`).
    pub(in crate::engine) holders: Tracker,
}

impl PoolState {
    pub(crate) fn new(config: Config) -> Self {
        let budget = config.max_in_use_bytes.map(Budget::new);
        let cache_bytes = match config.max_in_use_bytes {
            // A budgeted pool counts its thread caches' buffers as charged, so a waiter must
            // be able to take them back from any thread: without reclaiming, no caches.
            Some(_) if !crate::sys::fence::available() => 0,
            Some(limit) => config.thread_cache_bytes.min(limit / CACHE_SHARE),
            None => config.thread_cache_bytes,
        };
        let allowance = Arc::new(Allowance::new(config.max_retained_bytes));
        // Caches draw their room from the same allowance as the depot only where they can be
        // reclaimed from other threads: elsewhere an idle thread would keep its room for good
        // and, with enough of them, leave none to anyone (the bound is then the old one: the
        // cap plus each cache's own).
        let cache_allowance = if crate::sys::fence::available() {
            Arc::clone(&allowance)
        } else {
            Arc::new(Allowance::new(usize::MAX))
        };
        PoolState {
            cache_allowance,
            spares: Arc::new(SpareSlots::new()),
            depot: Depot::new(config.classes.sizes(), allowance, config.align.max(1)),
            cache_table: offset_table(&config.classes),
            caches: Caches::new(config.classes.sizes()),
            classes: config.classes,
            thread_cache_bytes: config.thread_cache_bytes,
            cache_bytes,
            zero_on_return: config.zero_on_return,
            lend: config.align == 0 && config.max_in_use_bytes.is_none(),
            align: config.align.max(1),
            max_retained_bytes: config.max_retained_bytes,
            clock: Clock::new(config.interval_nanos),
            closed: AtomicBool::new(false),
            trim_gen: AtomicU64::new(0),
            tick_epoch: AtomicU64::new(0),
            last_quiet_reclaim: AtomicU64::new(0),
            trimmer: Mutex::new(None),
            budget,
            allocator_trim: AllocatorTrim::new(config.trim_allocator),
            name: config.name,
            published: Default::default(),
            holders: Tracker::new(config.track_every, config.report_waits_after),
        }
    }

    /// The pool's name (`Builder::name`).
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The tracked buffers (feature `holders`).
    pub(crate) fn holders(&self) -> &Tracker {
        &self.holders
    }

    /// The tier sizes, ascending.
    pub(crate) fn tier_sizes(&self) -> &[usize] {
        self.classes.sizes()
    }

    /// The cap on retained bytes (`Builder::max_retained_bytes`).
    pub(crate) fn max_retained_bytes(&self) -> usize {
        self.max_retained_bytes
    }

    /// What each thread cache may keep, as configured (`Builder::thread_cache_bytes`).
    pub(crate) fn thread_cache_bytes(&self) -> usize {
        self.thread_cache_bytes
    }

    /// The bytes the shared depot holds.
    pub(crate) fn depot_bytes(&self) -> usize {
        self.depot.bytes()
    }

    /// The budget on bytes in use, if the pool has one.
    pub(crate) fn budget(&self) -> Option<&Budget> {
        self.budget.as_ref()
    }

    /// The bytes the thread caches hold (charged, in a budgeted pool).
    pub(crate) fn held_in_caches(&self) -> usize {
        self.caches.held_bytes()
    }

    /// True once the pool closed. `Acquire`, pairing with `close`'s `Release` store: a thread
    /// that sees the flag sees the depot closed too.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// A new thread cache for this pool (key `key`), registered so that `stats()` reads it
    /// and reclaimers can reach it.
    pub(crate) fn new_cache(&self, key: Key) -> Arc<Cache> {
        let (epoch, trim_gen) = (self.clock.epoch(), self.trim_gen.load(Ordering::Relaxed));
        // An exited thread's empty cache, if one is parked (`cache/reclaim.rs`).
        let parked = self.caches.unpark(key, epoch, trim_gen);
        let cache = parked.unwrap_or_else(|| self.make_cache(key, epoch, trim_gen));
        // Born rung if the pool closed or a budget waiter is queued: its owner's first
        // operation then takes the lock and sees why. A cache born armed while a waiter
        // waits could keep a charged buffer its owner returned through the fast path, which
        // the waiter's sweep, having listed the caches before this one existed, never takes.
        self.caches.attach(&cache, || {
            self.closed.load(Ordering::Relaxed) || self.under_pressure()
        });
        cache
    }

    /// A new cache for key `key`, its clocks at `epoch` and `trim_gen`.
    fn make_cache(&self, key: Key, epoch: u64, trim_gen: u64) -> Arc<Cache> {
        Cache::new(
            key,
            &self.classes,
            &self.cache_table,
            self.cache_bytes,
            // A budgeted pool's large slot takes no buffer above a cache's share of the
            // budget: one such buffer could be the whole budget, held by one thread between
            // two sweeps. Below that it has one, so that a budgeted thread cycling large
            // buffers does not take the depot's lock on every get and put.
            self.budget
                .as_ref()
                .map_or(usize::MAX, |b| b.limit() / CACHE_SHARE),
            self.zero_on_return,
            epoch,
            trim_gen,
            &self.cache_allowance,
            &self.spares,
        )
    }

    /// True if thread caches book their room from the depot's allowance (so that a stack
    /// can hand its buffers to the depot with their room); false where caches cannot be
    /// reclaimed and count apart.
    pub(crate) fn caches_share_allowance(&self) -> bool {
        Arc::ptr_eq(&self.cache_allowance, self.depot.allowance())
    }

    /// True if a waiter is queued for the budget: thread caches keep nothing then.
    pub(crate) fn under_pressure(&self) -> bool {
        self.budget.as_ref().is_some_and(Budget::under_pressure)
    }

    /// True if returned buffers must have exactly a tier's size to be kept.
    pub(crate) fn exact_only(&self) -> bool {
        self.budget.is_some()
    }

    /// The bytes a buffer of this pool with `tag` was charged (0 without a budget).
    pub(crate) fn charge_of(&self, tag: Tag) -> usize {
        match &self.budget {
            Some(_) => tag.charge(self.classes.sizes()),
            None => 0,
        }
    }

    /// What a get of `n` bytes is charged under a budget: its tier's size, or above the
    /// largest tier its capacity rounded up to 4 KiB (0 without a budget).
    pub(crate) fn charge_for(&self, n: usize) -> Result<usize, AllocError> {
        match self.classes.for_get(n) {
            Some(t) => Ok(self.charge_of(Tag::tier(t))),
            None => Ok(self.oversize_tag(self.oversize_capacity(n)?).1),
        }
    }

    /// Gives `bytes` of charge back to the budget (nothing without one).
    pub(crate) fn refund(&self, bytes: usize) {
        if let Some(b) = &self.budget {
            b.refund(bytes);
        }
    }

    /// Pays for up to `n` buffers of `charge` bytes each (`n >= 1`): the one a get hands out,
    /// beyond `prepaid` (0 or `charge`) already paid, and as many of the other `n - 1`, to keep
    /// on a stack, as the budget has room for now. Returns how many are paid (`1..=n`; `n`
    /// without a budget), or `None` (nothing taken) if the first must wait. The one charge
    /// arithmetic of every get: what a caller does not use it refunds.
    pub(crate) fn pay(&self, charge: usize, prepaid: usize, n: usize) -> Option<usize> {
        let Some(b) = &self.budget else {
            return Some(n);
        };
        let more = (n - 1) * charge;
        let extra = if prepaid >= charge {
            // Paid; extra room only if free now (nobody waits for it), else none.
            b.try_take(0, more, charge).unwrap_or(0)
        } else {
            b.try_take(charge - prepaid, more, charge)?
        };
        Some(1 + extra.checked_div(charge).unwrap_or(0))
    }

    /// Bytes in use now (0 without a budget): what is neither free, nor gathered by waiters,
    /// nor on thread stacks.
    pub(crate) fn in_use(&self) -> usize {
        self.budget_stats().map_or(0, |b| b.in_use_bytes)
    }

    fn budget_stats(&self) -> Option<BudgetStats> {
        let budget = self.budget.as_ref()?;
        let cached = self.caches.held_bytes();
        let a = budget.snapshot();
        let limit = budget.limit();
        Some(BudgetStats {
            limit,
            in_use_bytes: limit.saturating_sub(a.free + a.queued + cached),
            peak_in_use_bytes: a.peak,
            cached_bytes: cached,
            waiting: a.waiting,
            waits: a.waits,
            wait_total: a.wait_total,
            wait_longest: a.wait_longest,
            refusals: a.refusals,
            reserved_bytes: a.reserved,
        })
    }

    /// Claims the tick of `epoch` (true for exactly one caller per epoch) and runs the
    /// depot's part of it: its decay and, if enough was released, glibc's trim. The caller
    /// reclaims idle caches (`engine/cache/reclaim.rs`).
    ///
    /// `Relaxed` is enough: the CAS only elects one thread per epoch (a read-modify-write, so
    /// two threads cannot both win the same epoch), and the decay it runs synchronizes through
    /// the depot's tier locks, not through this counter.
    pub(crate) fn claim_tick(&self, epoch: u64) -> bool {
        let seen = self.tick_epoch.load(Ordering::Relaxed);
        let won = epoch > seen
            && self
                .tick_epoch
                .compare_exchange(seen, epoch, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok();
        if won {
            self.allocator_trim.released(self.depot.decay(), Why::Decay);
            self.spares.decay(false);
            self.caches.decay_parked(false);
        }
        won
    }

    /// Frees every spare stack array and parked cache (`trim`).
    pub(crate) fn trim_spares(&self) {
        self.caches.decay_parked(true);
        self.spares.decay(true);
    }

    /// Starts a trim: bumps the generation (each cache acts on it when reclaimed or at its
    /// owner's next operation). Returns the new generation.
    pub(crate) fn start_trim(&self) -> u64 {
        // Relaxed: published to each cache by its ring (`Cache::ring`) or its reclaimer's lock.
        self.trim_gen.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Closes the pool: no buffer is kept from now on. The caller then reclaims (or, without
    /// a heavy fence, rings) every thread cache.
    pub(crate) fn close(&self) {
        // Release: pairs with `is_closed`; published to each cache by its ring, too.
        self.closed.store(true, Ordering::Release);
        self.depot.close();
        self.caches.close_parked();
        self.spares.close();
        // Release: see `closed_pools`.
        CLOSED_POOLS.fetch_add(1, std::sync::atomic::Ordering::Release);
    }

    /// A retained buffer of tier `t` straight from the depot, without a thread cache's stack:
    /// with `odd_only`, only one larger than the tier's size (the exact ones are the thread
    /// cache's to refill).
    pub(crate) fn take_direct(&self, t: usize, odd_only: bool) -> Option<Vec<u8>> {
        if odd_only {
            self.depot.take_odd(t)
        } else {
            self.depot.take_one(t)
        }
    }

    /// True if a get of kind `how` that finds no retained buffer of its tier may be lent
    /// one of a larger tier ([`Classes::lenders`]): not under a budget (each buffer keeps
    /// the charge of the tier it was taken for), nor in an aligned pool (its buffers have
    /// their tier's capacity), nor for `io`'s exact gets.
    ///
    /// [`Classes::lenders`]: crate::engine::class::Classes::lenders
    pub(crate) fn lends(&self, how: Fresh) -> bool {
        self.lend && how.lends()
    }

    /// Tier `t` and the tiers that may lend to its gets (none where the pool does not lend):
    /// what room-making for `t` spares.
    pub(crate) fn lenders_of(&self, t: usize) -> std::ops::Range<usize> {
        if self.lend {
            t..self.classes.lenders(t).end
        } else {
            t..t + 1
        }
    }

    /// A retained buffer of exactly a lending tier's size for a get of tier `t`, from the
    /// depot, nearest size first; returns it and its tier.
    pub(crate) fn take_lent(&self, t: usize) -> Option<(Vec<u8>, usize)> {
        self.classes
            .lenders(t)
            .find_map(|u| self.depot.take_exact(u).map(|v| (v, u)))
    }

    /// The alignment of every buffer's allocation (`Settings::align`): what frees them.
    #[inline]
    pub(crate) fn align(&self) -> usize {
        self.align
    }

    /// The capacity of a buffer above the largest tier for a get of `n` bytes: `n`, or in an
    /// [`AlignedPool`](crate::AlignedPool), `n` rounded up to the alignment (a whole number of
    /// blocks, as its docs promise).
    ///
    /// # Errors
    /// [`AllocError::CapacityOverflow`] when the rounded size is above `isize::MAX`.
    #[inline]
    pub(crate) fn oversize_capacity(&self, n: usize) -> Result<usize, AllocError> {
        if self.align == 1 {
            return Ok(n);
        }
        match n.checked_next_multiple_of(self.align) {
            Some(cap) if cap <= isize::MAX as usize => Ok(cap),
            _ => Err(AllocError::CapacityOverflow { requested: n }),
        }
    }

    /// The tag and charge of a buffer above the largest tier for `n` bytes (the charge is 0
    /// and the tag [`Tag::NONE`] without a budget).
    pub(crate) fn oversize_tag(&self, n: usize) -> (Tag, usize) {
        match &self.budget {
            Some(_) => Tag::oversize(n).unwrap_or((Tag::NONE, 0)),
            None => (Tag::NONE, 0),
        }
    }

    /// Files `v`, a return to tier `t`, in the depot; or, refused there, frees it and counts
    /// it released at the cap. True if kept. A return refused for want of room has its pages
    /// given back first (`free_released`): nothing is about to reuse that memory, and glibc
    /// would keep it in the returning thread's arena. A buffer of another size than its
    /// tier's in a pool with a budget (which keeps only exact sizes) is freed as it is: a
    /// grown buffer comes back that way on every return, however much room there is.
    pub(crate) fn file_in_depot(&self, t: usize, v: Vec<u8>) -> bool {
        let cap = v.capacity();
        if self.exact_only() && cap != self.classes.size(t) {
            free(v, self.align);
        } else if let Err(v) = self.depot.put_one(t, v) {
            free_released(v, self.align);
        } else {
            return true;
        }
        self.allocator_trim.released(cap, Why::Cap);
        false
    }

    /// Publishes the pool's figures to the `metrics` facade (`observe/telemetry.rs`; nothing
    /// without the feature). Out of line, so that the tick that runs it stays small.
    #[cold]
    #[inline(never)]
    pub(crate) fn publish_metrics(&self) {
        self.published.publish(&self.name, || self.stats());
    }

    /// The real tag of a buffer that comes back (or leaves the pool) with `tag`: a tracked
    /// buffer's entry is given back (`holders.rs`); any other tag is itself.
    #[inline(always)]
    pub(crate) fn untrack(&self, tag: Tag) -> Tag {
        self.holders.untrack(tag)
    }

    pub(crate) fn stats(&self) -> Stats {
        let mut s = Stats::empty(self.classes.sizes());
        self.caches.add_to(&mut s);
        self.depot.add_to(&mut s);
        s.budget = self.budget_stats();
        s.allocator_trims = self.allocator_trim.count();
        s.released_by_decay = self.allocator_trim.released_for(Why::Decay);
        s.released_by_trim = self.allocator_trim.released_for(Why::Trim);
        s.released_at_cap = self.allocator_trim.released_for(Why::Cap);
        s.finish()
    }
}
