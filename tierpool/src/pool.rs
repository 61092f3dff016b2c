//! [`BufferPool`], the handle users hold, and `Shared`, the state behind it.

use std::fmt;

use crate::buf::{PooledBuf, NO_TIER};
use crate::class::Classes;
use crate::config::{Builder, Config};
use crate::decay::{self, Clock};
use crate::depot::Depot;
use crate::error::AllocError;
use crate::local::{self, alloc_fresh, prepare_hit, scrub, Fresh};
use crate::registry::{self, PoolId};
use crate::stats::{LocalCounters, Stats};
use crate::sync::{lock, Arc, AtomicBool, AtomicU64, CachePadded, Mutex, Ordering};

/// A size-tiered pool of `Vec<u8>` buffers, shared across threads.
///
/// `BufferPool` is a cheap handle: cloning it clones an `Arc`, and every clone serves the same
/// buffers. It is `Send + Sync`. Several pools can live in one process (one per component or
/// connection) without slowing each other down: each thread keeps a separate cache per pool.
/// When the last handle is dropped, the pool's depot is freed at once and buffers still out are
/// freed when they are dropped.
///
/// ```
/// use tierpool::BufferPool;
///
/// let pool = BufferPool::new();
/// let mut buf = pool.get(5000);           // len 0, capacity >= 5000
/// assert!(buf.capacity() >= 5000);
/// buf.extend_from_slice(b"hello");
/// let worker = {
///     let pool = pool.clone();
///     std::thread::spawn(move || {
///         drop(buf);                      // returned to the pool from another thread
///         pool.stats().returned
///     })
/// };
/// assert_eq!(worker.join().unwrap(), 1);
/// ```
#[derive(Clone)]
pub struct BufferPool {
    id: PoolId,
    owner: Arc<Owner>,
}

/// Closes the pool when the last [`BufferPool`] handle goes away.
struct Owner {
    id: PoolId,
    shared: Arc<Shared>,
}

impl Drop for Owner {
    fn drop(&mut self) {
        self.shared.close(self.id);
    }
}

/// Registered thread counters, and the counts of threads that have gone.
#[derive(Debug)]
struct Attached {
    locals: Vec<Arc<LocalCounters>>,
    /// Counts folded in from exited threads, and from operations that ran without a thread
    /// cache (during thread exit, or re-entrant calls). Never holds retained figures.
    retired: Stats,
}

/// The state of one pool, shared by its handles, the thread caches and the trimmer.
#[derive(Debug)]
pub(crate) struct Shared {
    /// Read on every operation, written never: first, on lines of its own.
    pub(crate) classes: CachePadded<Classes>,
    pub(crate) thread_cache_bytes: usize,
    pub(crate) zero_on_return: bool,
    pub(crate) max_retained_bytes: usize,
    pub(crate) clock: Clock,
    pub(crate) depot: Depot,
    pub(crate) closed: AtomicBool,
    /// Bumped by `trim()`; thread caches compare it with the value they last saw.
    pub(crate) trim_gen: AtomicU64,
    /// The last epoch whose depot decay has been done.
    depot_epoch: AtomicU64,
    attached: Mutex<Attached>,
    trimmer: Mutex<Option<std::thread::Thread>>,
    interval: std::time::Duration,
}

impl Shared {
    pub(crate) fn new(config: Config) -> Self {
        let tiers = config.classes.len();
        let empty = Stats::empty(config.classes.sizes());
        Shared {
            depot: Depot::new(tiers, config.max_retained_bytes),
            classes: CachePadded(config.classes),
            thread_cache_bytes: config.thread_cache_bytes,
            zero_on_return: config.zero_on_return,
            max_retained_bytes: config.max_retained_bytes,
            clock: Clock::new(config.interval_nanos),
            closed: AtomicBool::new(false),
            trim_gen: AtomicU64::new(0),
            depot_epoch: AtomicU64::new(0),
            attached: Mutex::new(Attached {
                locals: Vec::new(),
                retired: empty,
            }),
            trimmer: Mutex::new(None),
            interval: config.decay_interval,
        }
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Registers a new thread cache's counters.
    pub(crate) fn attach(&self, counters: Arc<LocalCounters>) {
        lock(&self.attached).locals.push(counters);
    }

    /// Unregisters a thread cache's counters, folding its counts into the retired totals in
    /// the same critical section so that `stats()` never sees them twice or not at all.
    pub(crate) fn detach(&self, counters: &Arc<LocalCounters>) {
        let mut a = lock(&self.attached);
        if let Some(i) = a.locals.iter().position(|c| Arc::ptr_eq(c, counters)) {
            a.locals.swap_remove(i);
            counters.add_to(&mut a.retired, false);
        }
    }

    /// Runs the depot's decay once for `epoch`, whichever thread gets here first.
    pub(crate) fn tick(&self, epoch: u64) {
        let seen = self.depot_epoch.load(Ordering::Relaxed);
        if epoch > seen
            && self
                .depot_epoch
                .compare_exchange(seen, epoch, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.depot.decay();
        }
    }

    /// Closes the pool: no buffer is kept from now on.
    fn close(&self, id: PoolId) {
        self.closed.store(true, Ordering::Release);
        registry::unregister(id);
        self.depot.close();
        local::note_pool_closed();
        local::detach(id);
        if let Some(trimmer) = lock(&self.trimmer).take() {
            trimmer.unpark();
        }
    }

    fn with_retired(&self, f: impl FnOnce(&mut Stats)) {
        f(&mut lock(&self.attached).retired);
    }

    /// A get that cannot use a thread cache (the thread is exiting, or a re-entrant call).
    #[cold]
    fn get_direct(&self, n: usize, how: Fresh) -> Result<Vec<u8>, AllocError> {
        let Some(t) = self.classes.for_get(n) else {
            let v = alloc_fresh(n, n, how)?;
            self.with_retired(|s| s.oversize += 1);
            return Ok(v);
        };
        if let Some(mut v) = self.depot.take_one(t) {
            prepare_hit(&mut v, n, how);
            self.with_retired(|s| s.tiers[t].hits += 1);
            return Ok(v);
        }
        let v = alloc_fresh(self.classes.size(t), n, how)?;
        self.with_retired(|s| s.tiers[t].misses += 1);
        Ok(v)
    }

    /// A return that cannot use a thread cache.
    #[cold]
    fn put_direct(&self, mut v: Vec<u8>) {
        scrub(&mut v, self.zero_on_return);
        let Some(t) = self.classes.for_put(v.capacity()) else {
            self.with_retired(|s| s.untiered_returned += 1);
            return;
        };
        let kept = self.depot.put_one(t, v).is_ok();
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
            for l in &a.locals {
                l.add_to(&mut s, true);
            }
            s.thread_caches = a.locals.len();
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
        s.finish()
    }
}

/// Returns `v` to the pool named `id`: the drop path of [`PooledBuf`] and [`BufferPool::put`].
#[inline(always)]
pub(crate) fn give_back(id: PoolId, tier: u16, v: Vec<u8>) {
    if let Err(v) = local::fast_put(id, tier, v) {
        give_back_slow(id, v);
    }
}

#[cold]
#[inline(never)]
fn give_back_slow(id: PoolId, v: Vec<u8>) {
    if let Err(v) = local::with_cache(id, v, |cache, v| cache.put_slow(v)) {
        give_back_cold(id, v);
    }
}

#[cold]
#[inline(never)]
fn give_back_cold(id: PoolId, v: Vec<u8>) {
    if let Err(v) = local::attach(id, v, || registry::lookup(id), |cache, v| cache.put_slow(v)) {
        match registry::lookup(id) {
            Some(shared) => shared.put_direct(v),
            None => drop(v), // the pool is gone
        }
    }
}

impl BufferPool {
    /// A pool with the default configuration: geometric tiers with four classes per doubling
    /// from 256 B to 16 MiB (256, 320, 384, 448, 512, 640, ..., 1 MiB, 1.25 MiB, ..., 16 MiB;
    /// at most 20% of a buffer is slack), a 64 MiB cap on the shared depot, 2 MiB per thread
    /// cache, and a 1 s decay interval.
    ///
    /// ```
    /// let pool = tierpool::BufferPool::new();
    /// // A 1 MiB message plus a 5-byte header does not jump to 2 MiB.
    /// assert_eq!(pool.get((1 << 20) + 5).capacity(), 1_310_720);
    /// ```
    pub fn new() -> Self {
        Builder::new()
            .build()
            .expect("the default configuration is valid")
    }

    /// A [`Builder`] to configure tiers, caps and decay.
    pub fn builder() -> Builder {
        Builder::new()
    }

    pub(crate) fn from_config(config: Config) -> Self {
        let background = config.background_trim;
        let shared = Arc::new(Shared::new(config));
        let id = registry::register(&shared);
        if background {
            *lock(&shared.trimmer) = decay::spawn_trimmer(&shared, shared.interval);
        }
        BufferPool {
            id,
            owner: Arc::new(Owner { id, shared }),
        }
    }

    fn shared(&self) -> &Shared {
        &self.owner.shared
    }

    #[inline(always)]
    fn acquire(&self, n: usize, how: Fresh) -> Result<PooledBuf, AllocError> {
        if let Some((mut v, tier)) = local::fast_get(self.id, n) {
            prepare_hit(&mut v, n, how);
            return Ok(PooledBuf::new(v, self.id, tier));
        }
        self.acquire_slow(n, how)
            .map(|v| PooledBuf::new(v, self.id, NO_TIER))
    }

    #[cold]
    #[inline(never)]
    fn acquire_slow(&self, n: usize, how: Fresh) -> Result<Vec<u8>, AllocError> {
        match local::with_cache(self.id, n, |cache, n| cache.get_slow(n, how)) {
            Ok(v) => v,
            Err(n) => {
                let shared = || Some(Arc::clone(&self.owner.shared));
                match local::attach(self.id, n, shared, |cache, n| cache.get_slow(n, how)) {
                    Ok(v) => v,
                    Err(n) => self.shared().get_direct(n, how),
                }
            }
        }
    }

    /// A buffer with `len() == 0` and `capacity() >= n`, from the smallest tier that fits `n`
    /// (a fresh buffer has exactly that tier's capacity). Above the largest tier, a buffer of
    /// capacity exactly `n` from the heap, not kept when dropped. `get(0)` serves the smallest
    /// tier.
    ///
    /// # Panics
    /// Like `Vec::with_capacity`: if `n` is above `isize::MAX` (and the allocation aborts the
    /// process if memory is exhausted). Use [`try_get`](Self::try_get) to get an error instead.
    ///
    /// ```
    /// let pool = tierpool::BufferPool::builder().tiers([1024, 4096]).build()?;
    /// assert_eq!(pool.get(1000).capacity(), 1024);
    /// assert_eq!(pool.get(1025).capacity(), 4096);
    /// assert_eq!(pool.get(5000).capacity(), 5000); // oversize: exact, not kept
    /// # Ok::<(), tierpool::ConfigError>(())
    /// ```
    #[inline(always)]
    pub fn get(&self, n: usize) -> PooledBuf {
        match self.acquire(n, Fresh::Plain) {
            Ok(b) => b,
            Err(e) => unreachable!("infallible allocation reported {e}"),
        }
    }

    /// Like [`get`](Self::get), but an impossible size or an allocator failure is an error,
    /// never a panic or an abort.
    ///
    /// # Errors
    /// [`AllocError::CapacityOverflow`] above `isize::MAX`, [`AllocError::AllocFailed`] when the
    /// allocator refuses.
    ///
    /// ```
    /// let pool = tierpool::BufferPool::new();
    /// assert!(pool.try_get(4096).is_ok());
    /// assert!(pool.try_get(usize::MAX).is_err());
    /// ```
    #[inline]
    pub fn try_get(&self, n: usize) -> Result<PooledBuf, AllocError> {
        self.acquire(n, Fresh::Fallible)
    }

    /// A buffer with `len() == n`, all zeros. Fresh buffers come zeroed from the allocator
    /// (`calloc`, which is free for pages fresh from the OS); reused ones are zeroed up to `n`.
    ///
    /// # Panics
    /// Like [`get`](Self::get).
    ///
    /// ```
    /// let pool = tierpool::BufferPool::new();
    /// let z = pool.get_zeroed(100);
    /// assert_eq!(&z[..], &[0u8; 100][..]);
    /// ```
    #[inline]
    pub fn get_zeroed(&self, n: usize) -> PooledBuf {
        match self.acquire(n, Fresh::Zeroed) {
            Ok(b) => b,
            Err(e) => unreachable!("infallible allocation reported {e}"),
        }
    }

    /// Adopts any `Vec<u8>`, from this pool or not: it is filed under the largest tier whose
    /// size is `<=` its capacity, or released if it fits no tier or the pool is at its cap.
    /// Its contents are discarded.
    ///
    /// ```
    /// let pool = tierpool::BufferPool::builder().tiers([1024, 4096]).build()?;
    /// pool.put(Vec::with_capacity(3000)); // kept in the 1024 tier
    /// let b = pool.get(1000);
    /// assert_eq!(b.capacity(), 3000); // never smaller than asked
    /// # Ok::<(), tierpool::ConfigError>(())
    /// ```
    #[inline]
    pub fn put(&self, buf: Vec<u8>) {
        give_back(self.id, NO_TIER, buf);
    }

    /// A snapshot of the pool's counters. See [`Stats`] for what is exact when.
    pub fn stats(&self) -> Stats {
        self.shared().stats()
    }

    /// Releases retained memory now: everything in the shared depot and in the calling
    /// thread's cache. Other threads' caches release theirs the next time they use the pool.
    ///
    /// ```
    /// let pool = tierpool::BufferPool::new();
    /// drop(pool.get(4096));
    /// pool.trim();
    /// assert_eq!(pool.stats().retained_bytes, 0);
    /// ```
    pub fn trim(&self) {
        let shared = self.shared();
        let generation = shared.trim_gen.fetch_add(1, Ordering::Relaxed) + 1;
        let _ = local::with_cache(self.id, (), |cache, ()| cache.trimmed(generation));
        shared.depot.trim();
    }

    /// The tier sizes, ascending.
    pub fn tier_sizes(&self) -> &[usize] {
        self.shared().classes.sizes()
    }

    /// The cap on bytes retained in the shared depot.
    pub fn max_retained_bytes(&self) -> usize {
        self.shared().max_retained_bytes
    }

    /// The budget of each thread's cache for this pool. Total retained memory is at most
    /// `max_retained_bytes() + threads * thread_cache_bytes()`.
    pub fn thread_cache_bytes(&self) -> usize {
        self.shared().thread_cache_bytes
    }

    /// True if both handles refer to the same pool.
    pub fn same_pool(&self, other: &BufferPool) -> bool {
        self.id == other.id
    }
}

impl Default for BufferPool {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for BufferPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.shared();
        f.debug_struct("BufferPool")
            .field("id", &self.id)
            .field("tiers", &s.classes.len())
            .field("smallest", &s.classes.size(0))
            .field("largest", &s.classes.max())
            .field("max_retained_bytes", &s.max_retained_bytes)
            .field("thread_cache_bytes", &s.thread_cache_bytes)
            .field("depot_bytes", &s.depot.bytes())
            .finish()
    }
}
