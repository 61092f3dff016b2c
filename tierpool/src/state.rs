//! `PoolState`: everything one pool shares between its handles, its thread caches and its
//! trimmer. It sits below the caches' policy and the thread-local table and imports neither.

use crate::budget::{arm, Budget, Charge, CREDIT_SHARE};
use crate::cache::Cache;
use crate::class::Classes;
use crate::config::Config;
use crate::decay::Clock;
use crate::depot::Depot;
use crate::error::AllocError;
use crate::fresh::{alloc_fresh, prepare_hit, scrub, Fresh};
use crate::os::AllocatorTrim;
use crate::stats::{BudgetStats, Stats};
use crate::sync::{lock, Arc, AtomicBool, AtomicU64, Mutex, Ordering};

/// Bumped whenever any pool closes, so that thread tables know when to look for dead caches.
static CLOSED_POOLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many pools have closed so far. `Acquire`: pairs with the `Release` increment in
/// [`PoolState::close`], which comes after that pool's `closed` flag is set, so a table that
/// sees a new count and then reads `closed` flags sees the flag of the pool that bumped it.
pub(crate) fn closed_pools() -> u64 {
    CLOSED_POOLS.load(std::sync::atomic::Ordering::Acquire)
}

/// Registered thread caches, and the counts of threads that have gone.
#[derive(Debug)]
struct Attached {
    caches: Vec<Arc<Cache>>,
    /// Counts folded in from exited threads, and from operations that ran without a thread
    /// cache (during thread exit, or re-entrant calls). Never holds retained figures.
    retired: Stats,
}

/// The state of one pool.
#[derive(Debug)]
pub(crate) struct PoolState {
    /// Never written after construction.
    pub(crate) classes: Classes,
    pub(crate) thread_cache_bytes: usize,
    pub(crate) zero_on_return: bool,
    pub(crate) max_retained_bytes: usize,
    pub(crate) clock: Clock,
    /// The thread caches' shared lookup table (`cache::offset_table`).
    cache_table: Arc<[u32]>,
    pub(crate) depot: Depot,
    /// Set once, by `close`, before it rings the caches (see [`Cache::ring`]).
    pub(crate) closed: AtomicBool,
    /// Bumped by `trim()` before it rings the caches; thread caches compare it with the value
    /// they last acted on (see [`Cache::ring`]).
    pub(crate) trim_gen: AtomicU64,
    /// The last epoch whose depot decay has been done.
    depot_epoch: AtomicU64,
    attached: Mutex<Attached>,
    pub(crate) trimmer: Mutex<Option<std::thread::Thread>>,
    pub(crate) interval: std::time::Duration,
    /// The budget on bytes in use, if configured. A budgeted pool keeps only buffers of
    /// exactly a tier's size, so that every buffer it hands out has the capacity it was
    /// charged.
    pub(crate) budget: Option<Arc<Budget>>,
    /// Released bytes, for glibc's `malloc_trim` (`os.rs`).
    pub(crate) allocator_trim: AllocatorTrim,
}

impl PoolState {
    pub(crate) fn new(config: Config) -> Self {
        let empty = Stats::empty(config.classes.sizes());
        let budget = config.max_in_use_bytes.map(|limit| {
            let credit_max = (limit / CREDIT_SHARE).min(config.thread_cache_bytes);
            Arc::new(Budget::new(limit, credit_max))
        });
        let cache_table = crate::cache::offset_table(&config.classes);
        PoolState {
            depot: Depot::new(config.classes.sizes(), config.max_retained_bytes),
            classes: config.classes,
            thread_cache_bytes: config.thread_cache_bytes,
            zero_on_return: config.zero_on_return,
            max_retained_bytes: config.max_retained_bytes,
            clock: Clock::new(config.interval_nanos),
            cache_table,
            closed: AtomicBool::new(false),
            trim_gen: AtomicU64::new(0),
            depot_epoch: AtomicU64::new(0),
            attached: Mutex::new(Attached {
                caches: Vec::new(),
                retired: empty,
            }),
            trimmer: Mutex::new(None),
            interval: config.decay_interval,
            budget,
            allocator_trim: AllocatorTrim::new(config.trim_allocator),
        }
    }

    /// True once the pool closed. `Acquire`, pairing with `close`'s `Release` store: a thread
    /// that sees the flag sees the depot closed too.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// A new thread cache for this pool (key `key`), registered so that `stats()` reads it
    /// and `trim`/`close` can ring it.
    pub(crate) fn new_cache(&self, key: u32) -> Arc<Cache> {
        let cache = Cache::new(
            arm(key),
            &self.classes,
            &self.cache_table,
            self.thread_cache_bytes,
            self.zero_on_return,
            self.clock.epoch(),
            self.trim_gen.load(Ordering::Relaxed),
            self.budget.clone(),
        );
        let mut a = lock(&self.attached);
        // Under the lock `close` rings under: either `close` rings this cache later, or its
        // flag (stored before it took the lock) is visible here.
        if self.closed.load(Ordering::Relaxed) {
            // Too late to be rung by `close`: born rung, so its owner finds the pool closed.
            cache.ring();
        }
        a.caches.push(Arc::clone(&cache));
        cache
    }

    /// Unregisters a thread cache, folding its counts into the retired totals in the same
    /// critical section so that `stats()` never sees them twice or not at all.
    pub(crate) fn detach(&self, cache: &Cache) {
        let mut a = lock(&self.attached);
        if let Some(i) = a.caches.iter().position(|c| std::ptr::eq(&**c, cache)) {
            a.caches.swap_remove(i);
            cache.add_to(&mut a.retired, false);
        }
    }

    /// Takes every thread cache's credit into the budget's account (after a waiter set the
    /// pressure flag: see `budget.rs`). Waits on no thread.
    pub(crate) fn sweep_credit(&self) {
        let Some(budget) = &self.budget else {
            return;
        };
        let swept: usize = lock(&self.attached)
            .caches
            .iter()
            .map(|c| c.credit().sweep())
            .sum();
        budget.release(swept);
    }

    /// True if returned buffers must have exactly a tier's size to be kept.
    pub(crate) fn exact_only(&self) -> bool {
        self.budget.is_some()
    }

    /// The charge of a buffer of this pool with tier field `tag`.
    pub(crate) fn charge_of(&self, tag: u32) -> usize {
        match Charge::of(tag) {
            Charge::None => 0,
            Charge::Bytes(b) => b,
            Charge::Tier(hint) => {
                let t = hint as usize / crate::cache::TIER_BYTES;
                if t < self.classes.len() {
                    self.classes.size(t)
                } else {
                    0
                }
            }
        }
    }

    /// Bytes in use now (0 without a budget): what is neither free, nor gathered by waiters,
    /// nor held as credit.
    pub(crate) fn in_use(&self) -> usize {
        self.budget_stats().map_or(0, |b| b.in_use_bytes)
    }

    fn budget_stats(&self) -> Option<BudgetStats> {
        let budget = self.budget.as_ref()?;
        let credit: usize = lock(&self.attached)
            .caches
            .iter()
            .map(|c| c.credit().get())
            .sum();
        let a = budget.snapshot();
        let limit = budget.limit();
        Some(BudgetStats {
            limit,
            in_use_bytes: limit.saturating_sub(a.free + a.queued + credit),
            peak_in_use_bytes: a.peak,
            credit_bytes: credit,
            waiting: a.waiting,
            waits: a.waits,
            wait_total: a.wait_total,
            wait_longest: a.wait_longest,
            refusals: a.refusals,
        })
    }

    /// Gives a charge back to the budget without a thread cache.
    pub(crate) fn refund_direct(&self, tag: u32) {
        if let Some(budget) = &self.budget {
            budget.release(self.charge_of(tag));
        }
    }

    /// Rings every thread cache's doorbell: each owner takes the slow path at its next
    /// operation and looks at the pool's flags.
    pub(crate) fn ring_all(&self) {
        for c in &lock(&self.attached).caches {
            c.ring();
        }
    }

    /// Runs the depot's decay once for `epoch`, whichever thread gets here first.
    ///
    /// `Relaxed` is enough: the CAS only elects one thread per epoch (a read-modify-write, so
    /// two threads cannot both win the same epoch), and the decay it runs synchronizes through
    /// the depot's tier locks, not through this counter. A thread that loses, or reads a stale
    /// epoch, skips a decay the winner runs.
    pub(crate) fn tick(&self, epoch: u64) {
        let seen = self.depot_epoch.load(Ordering::Relaxed);
        if epoch > seen
            && self
                .depot_epoch
                .compare_exchange(seen, epoch, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.allocator_trim.released(self.depot.decay());
            self.allocator_trim.maybe_run(epoch);
        }
    }

    /// Starts a trim: bumps the generation and rings every cache. Returns the new generation,
    /// which the calling thread's own cache acts on at once.
    pub(crate) fn start_trim(&self) -> u64 {
        // Relaxed: published to each cache by its ring (`Cache::ring`).
        let generation = self.trim_gen.fetch_add(1, Ordering::Relaxed) + 1;
        self.ring_all();
        generation
    }

    /// Closes the pool: no buffer is kept from now on. Thread caches are rung and free what
    /// they hold at their next operation (or when their thread exits).
    pub(crate) fn close(&self) {
        // Release: pairs with `is_closed`; published to each cache by its ring, too.
        self.closed.store(true, Ordering::Release);
        self.depot.close();
        self.ring_all();
        // Release: see `closed_pools`.
        CLOSED_POOLS.fetch_add(1, std::sync::atomic::Ordering::Release);
    }

    fn with_retired(&self, f: impl FnOnce(&mut Stats)) {
        f(&mut lock(&self.attached).retired);
    }

    /// A buffer of tier `t` for `n` bytes without a thread cache's stack: straight from the
    /// depot (with `odd_only`, only one larger than the tier's size: the exact ones are the
    /// thread cache's to refill), or fresh. The tail of every get that its thread cache cannot
    /// serve, and of every get without one. Returns the buffer and whether it was a hit.
    pub(crate) fn direct_or_fresh(
        &self,
        t: usize,
        n: usize,
        how: Fresh,
        odd_only: bool,
    ) -> Result<(Vec<u8>, bool), AllocError> {
        let retained = if odd_only {
            self.depot.take_odd(t)
        } else {
            self.depot.take_one(t)
        };
        match retained {
            Some(mut v) => {
                prepare_hit(&mut v, n, how);
                Ok((v, true))
            }
            None => Ok((alloc_fresh(self.classes.size(t), n, how)?, false)),
        }
    }

    /// A get that cannot use a thread cache (the thread is exiting, or a re-entrant call).
    #[cold]
    pub(crate) fn get_direct(&self, n: usize, how: Fresh) -> Result<Vec<u8>, AllocError> {
        let Some(t) = self.classes.for_get(n) else {
            let v = alloc_fresh(n, n, how)?;
            self.with_retired(|s| s.oversize += 1);
            return Ok(v);
        };
        let (v, hit) = self.direct_or_fresh(t, n, how, false)?;
        self.with_retired(|s| match hit {
            true => s.tiers[t].hits += 1,
            false => s.tiers[t].misses += 1,
        });
        Ok(v)
    }

    /// A return that cannot use a thread cache.
    #[cold]
    pub(crate) fn put_direct(&self, mut v: Vec<u8>) {
        scrub(&mut v, self.zero_on_return);
        let Some(t) = self.classes.for_put(v.capacity()) else {
            self.with_retired(|s| s.untiered_returned += 1);
            return;
        };
        let cap = v.capacity();
        let kept = if !self.exact_only() || cap == self.classes.size(t) {
            self.depot.put_one(t, v).is_ok()
        } else {
            false
        };
        if !kept {
            self.allocator_trim.released(cap);
        }
        self.with_retired(|s| {
            s.tiers[t].returned += 1;
            if !kept {
                s.tiers[t].discarded += 1;
            }
        });
    }

    pub(crate) fn stats(&self) -> Stats {
        let mut s = Stats::empty(self.classes.sizes());
        {
            let a = lock(&self.attached);
            for c in &a.caches {
                c.add_to(&mut s, true);
            }
            s.thread_caches = a.caches.len();
            for (into, r) in s.tiers.iter_mut().zip(&a.retired.tiers) {
                into.hits += r.hits;
                into.misses += r.misses;
                into.returned += r.returned;
                into.discarded += r.discarded;
            }
            s.oversize += a.retired.oversize;
            s.untiered_returned += a.retired.untiered_returned;
        }
        self.depot.add_to(&mut s);
        s.budget = self.budget_stats();
        s.allocator_trims = self.allocator_trim.count();
        s.finish()
    }
}
