//! [`BufferPool`], the handle users hold. The state behind it is `PoolState` (`state.rs`);
//! its gets go through this thread's cache (`cache/`).

use std::fmt;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::base::key::{Key, Tag};
use crate::base::sync::{lock, Arc, Weak};
use crate::buf::pooled::{give_back, PooledBuf};
use crate::engine::budget::{Budget, Ticket, Wake};
use crate::engine::cache::reclaim::Turn;
use crate::engine::config::{Builder, Config};
use crate::engine::error::{AllocError, ConfigError};
use crate::engine::fresh::{prepare_hit, Fresh};
use crate::engine::registry;
use crate::engine::state::{Got, PoolState};
use crate::engine::{local, policy};
use crate::observe::stats::Stats;
use crate::sys::trim::Why;

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
    key: Key,
    /// One get in this many is tracked (feature `holders`; 0: none). Kept in the handle, in
    /// the key's padding, so that the get's check needs no load through the pool.
    #[cfg(feature = "holders")]
    track_every: u32,
    handle: Arc<Handle>,
}

/// Where a get was called, for tracking holders (feature `holders`); nothing without it.
#[cfg(feature = "holders")]
type Site = &'static std::panic::Location<'static>;
#[cfg(not(feature = "holders"))]
type Site = NoSite;

/// [`Site`] without the feature: nothing to carry.
#[cfg(not(feature = "holders"))]
#[derive(Clone, Copy)]
struct NoSite;

/// The caller's [`Site`] (through every `#[track_caller]` function above it).
#[inline(always)]
#[cfg_attr(feature = "holders", track_caller)]
fn site() -> Site {
    #[cfg(feature = "holders")]
    {
        std::panic::Location::caller()
    }
    #[cfg(not(feature = "holders"))]
    {
        NoSite
    }
}

/// Closes the pool when the last [`BufferPool`] handle goes away.
struct Handle {
    key: Key,
    state: Arc<PoolState>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        // Every thread cache gives up its buffers now (reclaimed), or, where caches cannot be
        // reclaimed, at its owner's next operation or exit; this thread's own at once.
        policy::close_all(&self.state);
        registry::unregister(self.key);
        local::slow(
            self.key,
            (),
            || None,
            |o, pool, ()| policy::service(o, pool),
            |_, ()| {},
        );
        if let Some(trimmer) = lock(&self.state.trimmer).take() {
            trimmer.unpark();
        }
    }
}

impl BufferPool {
    /// A new pool with the default configuration (a private pool; for the process-wide one,
    /// see [`default_pool`](crate::default_pool)): geometric tiers with four classes per doubling
    /// from 256 B to 16 MiB (256, 320, 384, 448, 512, 640, ..., 1 MiB, 1.25 MiB, ..., 16 MiB;
    /// at most 20% of a buffer is slack), a 64 MiB cap on what the depot and all thread caches retain together, 8 MiB per thread
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
        let state = Arc::new(PoolState::new(config));
        let key = registry::register(&state);
        if background {
            *lock(&state.trimmer) = spawn_trimmer(&state);
        }
        BufferPool {
            key,
            #[cfg(feature = "holders")]
            track_every: state.holders.every(),
            handle: Arc::new(Handle { key, state }),
        }
    }

    fn shared(&self) -> &PoolState {
        &self.handle.state
    }

    #[inline(always)]
    #[cfg_attr(feature = "holders", track_caller)]
    fn obtain(&self, n: usize, how: Fresh, wait: Wait) -> Result<PooledBuf, AllocError> {
        self.obtain_at(n, how, wait, site())
    }

    /// [`obtain`](Self::obtain), tracked (feature `holders`) as taken at `site`.
    #[inline(always)]
    fn obtain_at(
        &self,
        n: usize,
        how: Fresh,
        wait: Wait,
        site: Site,
    ) -> Result<PooledBuf, AllocError> {
        let _ = site;
        let (v, tag) = match local::fast_pop(self.key, n) {
            Some(hit) => {
                let tag = Tag::from_hint(hit.hint);
                let mut v = hit.into_vec();
                prepare_hit(&mut v, n, how);
                (v, tag)
            }
            // The slow path's result comes through memory; taking it apart here, on its own
            // branch, lets the fast path keep the handle in registers (measured: 17
            // instructions of stack copies per get+drop otherwise).
            None => self.acquire_slow(n, how, wait)?.into_parts(),
        };
        #[cfg(feature = "holders")]
        let tag = self.track(tag, v.capacity(), site);
        Ok(PooledBuf::new(v, self.key, tag))
    }

    /// [`obtain`](Self::obtain) for the gets that cannot fail (they panic instead): the slow
    /// path returns a plain handle, which stays in registers (a `Result` with
    /// [`AllocError`]'s layout merged into the fast path through the stack: 4 instructions).
    #[inline(always)]
    #[cfg_attr(feature = "holders", track_caller)]
    fn obtain_or_panic(&self, n: usize, how: Fresh) -> PooledBuf {
        let (v, tag) = match local::fast_pop(self.key, n) {
            Some(hit) => {
                let tag = Tag::from_hint(hit.hint);
                let mut v = hit.into_vec();
                prepare_hit(&mut v, n, how);
                (v, tag)
            }
            None => self.slow_or_panic(n, how).into_parts(),
        };
        #[cfg(feature = "holders")]
        let tag = self.track(tag, v.capacity(), std::panic::Location::caller());
        PooledBuf::new(v, self.key, tag)
    }

    #[cold]
    #[inline(never)]
    fn slow_or_panic(&self, n: usize, how: Fresh) -> PooledBuf {
        match self.acquire_slow(n, how, Wait::Until(None)) {
            Ok(b) => b,
            Err(e) => get_failed(e),
        }
    }

    /// Everything a get can need beyond the fast path: the slow path of this thread's cache,
    /// and with a budget that has no room now, waiting (as `wait` allows) and asking again
    /// with the charge paid.
    #[cold]
    #[inline(never)]
    fn acquire_slow(&self, n: usize, how: Fresh, wait: Wait) -> Result<PooledBuf, AllocError> {
        let charge = match self.fetch(n, how, 0)? {
            Got::Buf(v, tag) => return Ok(PooledBuf::new(v, self.key, tag)),
            Got::Wait(charge) => self.check_charge(n, charge)?,
        };
        self.wait_for(n, charge, wait)?;
        self.fetch_paid(n, how, charge)
    }

    /// A buffer for `n` bytes through this thread's cache, or without one (down the ladder),
    /// `prepaid` bytes of its charge paid.
    fn fetch(&self, n: usize, how: Fresh, prepaid: usize) -> Result<Got, AllocError> {
        local::slow(
            self.key,
            n,
            || Some(Arc::clone(&self.handle.state)),
            |o, pool, n| policy::get_slow(o, pool, n, how, prepaid),
            |pool, n| pool.unwrap_or(self.shared()).get_direct(n, how, prepaid),
        )
    }

    /// [`fetch`](Self::fetch) with the whole charge paid, which never has to wait.
    fn fetch_paid(&self, n: usize, how: Fresh, charge: usize) -> Result<PooledBuf, AllocError> {
        match self.fetch(n, how, charge)? {
            Got::Buf(v, tag) => Ok(PooledBuf::new(v, self.key, tag)),
            Got::Wait(_) => unreachable!("a paid get never waits"),
        }
    }

    /// The budget, for a pool whose key says it has one.
    fn budget(&self) -> &Budget {
        self.shared()
            .budget
            .as_ref()
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

    /// Takes `charge` bytes of the budget for a get of `n` that found no room: after sweeping
    /// the thread caches' buffers back into the account if any hold some, then by waiting in
    /// line as `wait` allows (the queue sweeps the caches again once it is joined).
    fn wait_for(&self, n: usize, charge: usize, wait: Wait) -> Result<(), AllocError> {
        let (state, budget) = (self.shared(), self.budget());
        if self.take_swept(charge) {
            return Ok(());
        }
        let Wait::Until(deadline) = wait else {
            budget.refused();
            return Err(AllocError::OverBudget {
                requested: n,
                in_use: state.in_use(),
                limit: budget.limit(),
            });
        };
        let start = Instant::now();
        let ticket = budget.enqueue(charge, Wake::Thread(std::thread::current()));
        policy::sweep(state);
        #[cfg(feature = "holders")]
        let mut report = || state.holders.report_wait(&state.name, n, start.elapsed());
        #[cfg(feature = "holders")]
        let report = state
            .holders
            .report_after()
            .and_then(|after| start.checked_add(after))
            .map(|at| (at, &mut report as &mut dyn FnMut()));
        #[cfg(not(feature = "holders"))]
        let report = None;
        if !budget.wait(ticket, deadline, report) {
            return Err(AllocError::TimedOut {
                requested: n,
                in_use: state.in_use(),
                limit: budget.limit(),
                waited: start.elapsed(),
            });
        }
        Ok(())
    }

    /// Takes `charge` bytes from the account after sweeping the thread caches into it, if
    /// they hold anything; false if that was not enough (nothing taken).
    fn take_swept(&self, charge: usize) -> bool {
        let state = self.shared();
        if state.caches.held_bytes() == 0 {
            return false;
        }
        policy::sweep(state);
        self.budget().try_take(charge, 0, 1).is_some()
    }

    /// A buffer with `len() == 0` and `capacity() >= n`, from the smallest tier that fits `n`
    /// (a fresh buffer has exactly that tier's capacity). Above the largest tier, a buffer of
    /// capacity exactly `n` from the heap, not kept when dropped. `get(0)` serves the smallest
    /// tier.
    ///
    /// With a budget on bytes in use ([`Builder::max_in_use_bytes`]), waits (blocking the
    /// thread, like a bounded channel's `send`) until the buffer fits the budget; waiters are
    /// served in order. In async code use [`acquire`](Self::acquire) instead, which waits
    /// without blocking the thread.
    ///
    /// # Panics
    /// Like `Vec::with_capacity`: if `n` is above `isize::MAX` (and the allocation aborts the
    /// process if memory is exhausted). With a budget, if the buffer's charge is larger than
    /// the whole budget (it could never be served). Use [`try_get`](Self::try_get) or
    /// [`get_timeout`](Self::get_timeout) to get an error instead.
    ///
    /// ```
    /// let pool = tierpool::BufferPool::builder().tiers([1024, 4096]).build()?;
    /// assert_eq!(pool.get(1000).capacity(), 1024);
    /// assert_eq!(pool.get(1025).capacity(), 4096);
    /// assert_eq!(pool.get(5000).capacity(), 5000); // oversize: exact, not kept
    /// # Ok::<(), tierpool::ConfigError>(())
    /// ```
    #[must_use = "the buffer goes straight back to the pool if unused"]
    #[inline(always)]
    #[cfg_attr(feature = "holders", track_caller)]
    pub fn get(&self, n: usize) -> PooledBuf {
        self.obtain_or_panic(n, Fresh::Plain)
    }

    /// Like [`get`](Self::get), but never waits and never panics: an impossible size, an
    /// allocator failure or (with a budget) no room in the budget now is an error.
    ///
    /// # Errors
    /// [`AllocError::CapacityOverflow`] above `isize::MAX`, [`AllocError::AllocFailed`] when the
    /// allocator refuses; with a budget, [`AllocError::OverBudget`] (with how much is in use)
    /// when the buffer does not fit now, and [`AllocError::LargerThanBudget`] when it never
    /// can.
    ///
    /// ```
    /// let pool = tierpool::BufferPool::new();
    /// assert!(pool.try_get(4096).is_ok());
    /// assert!(pool.try_get(usize::MAX).is_err());
    ///
    /// let bounded = tierpool::BufferPool::builder().max_in_use_bytes(1 << 20).build()?;
    /// let held = bounded.get(1 << 20);
    /// match bounded.try_get(4096) {
    ///     Err(tierpool::AllocError::OverBudget { requested, in_use, limit }) => {
    ///         assert_eq!((requested, in_use, limit), (4096, 1 << 20, 1 << 20));
    ///     }
    ///     other => panic!("{other:?}"),
    /// }
    /// # Ok::<(), tierpool::ConfigError>(())
    /// ```
    #[must_use = "the buffer goes straight back to the pool if unused"]
    #[inline]
    #[cfg_attr(feature = "holders", track_caller)]
    pub fn try_get(&self, n: usize) -> Result<PooledBuf, AllocError> {
        self.obtain(n, Fresh::Fallible, Wait::Never)
    }

    /// Like [`get`](Self::get), but waits at most `timeout` for room in the budget, and
    /// reports failures as errors. Without a budget it never waits (it is then
    /// [`try_get`](Self::try_get)).
    ///
    /// # Errors
    /// As [`try_get`](Self::try_get), with [`AllocError::TimedOut`] instead of `OverBudget`.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let pool = tierpool::BufferPool::builder().max_in_use_bytes(1 << 20).build()?;
    /// let held = pool.get(1 << 20);
    /// let err = pool.get_timeout(4096, Duration::from_millis(10)).unwrap_err();
    /// assert!(matches!(err, tierpool::AllocError::TimedOut { .. }));
    /// std::thread::scope(|s| {
    ///     s.spawn(|| {
    ///         std::thread::sleep(Duration::from_millis(10));
    ///         drop(held); // frees the budget: the waiting get below is served
    ///     });
    ///     assert!(pool.get_timeout(4096, Duration::from_secs(10)).is_ok());
    /// });
    /// # Ok::<(), tierpool::ConfigError>(())
    /// ```
    #[must_use = "the buffer goes straight back to the pool if unused"]
    #[cfg_attr(feature = "holders", track_caller)]
    pub fn get_timeout(&self, n: usize, timeout: Duration) -> Result<PooledBuf, AllocError> {
        let deadline = Instant::now().checked_add(timeout);
        self.obtain(n, Fresh::Fallible, Wait::Until(deadline))
    }

    /// A future that resolves to a buffer for `n` bytes once it fits the budget on bytes in
    /// use ([`Builder::max_in_use_bytes`]); without a budget it is ready at once. It works
    /// with any async runtime (it only uses the task's waker).
    ///
    /// Waiters are served in order (a large request is not overtaken by a stream of small
    /// ones). Cancel-safe: dropping the future before it resolves gives back whatever it had
    /// gathered, and the next waiter is served.
    ///
    /// # Errors
    /// As [`try_get`](Self::try_get), except that it waits instead of returning
    /// `OverBudget`; [`AllocError::LargerThanBudget`] at once for a buffer that can never fit.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let pool = tierpool::BufferPool::builder().max_in_use_bytes(1 << 20).build()?;
    /// let held = pool.acquire(1 << 20).await?;
    /// let waiting = pool.acquire(4096);            // no room yet
    /// tokio::spawn(async move { drop(held) });      // returned elsewhere: the waiter wakes
    /// let buf = waiting.await?;
    /// assert!(buf.capacity() >= 4096);
    /// # Ok(()) }
    /// ```
    #[cfg_attr(feature = "holders", track_caller)]
    pub fn acquire(&self, n: usize) -> Acquire<'_> {
        Acquire {
            pool: self,
            n,
            state: AcquireState::Start,
            #[cfg(feature = "holders")]
            site: std::panic::Location::caller(),
        }
    }

    /// A buffer with `len() == n`, all zeros. Fresh buffers come zeroed from the allocator
    /// (`calloc`, which is free for pages fresh from the OS); reused ones are zeroed up to `n`.
    /// With a budget, waits like [`get`](Self::get).
    ///
    /// # Panics
    /// Like [`get`](Self::get).
    ///
    /// ```
    /// let pool = tierpool::BufferPool::new();
    /// let z = pool.get_zeroed(100);
    /// assert_eq!(&z[..], &[0u8; 100][..]);
    /// ```
    #[must_use = "the buffer goes straight back to the pool if unused"]
    #[inline]
    #[cfg_attr(feature = "holders", track_caller)]
    pub fn get_zeroed(&self, n: usize) -> PooledBuf {
        self.obtain_or_panic(n, Fresh::Zeroed)
    }

    /// The tag a buffer `v` just taken at `site` leaves with: tracked if this pool tracks
    /// holders and this thread's sample is due, else `tag` (feature `holders`).
    #[cfg(feature = "holders")]
    #[inline(always)]
    fn track(&self, tag: Tag, cap: usize, site: &'static std::panic::Location<'static>) -> Tag {
        if self.track_every == 0 || !crate::observe::holders::due(self.key, self.track_every) {
            return tag;
        }
        self.track_slow(tag, cap, site)
    }

    #[cfg(feature = "holders")]
    #[cold]
    #[inline(never)]
    fn track_slow(
        &self,
        tag: Tag,
        cap: usize,
        site: &'static std::panic::Location<'static>,
    ) -> Tag {
        self.shared().holders.track(tag, cap, site)
    }

    /// The buffers handed out and not yet returned, among those tracked
    /// ([`Builder::track_holders`]; feature `holders`), grouped by the call site of the get
    /// that took them, most bytes first: who holds the memory, and for how long. With a
    /// sample of one get in N, the counts are a sample.
    ///
    /// ```
    /// let pool = tierpool::BufferPool::builder().track_holders(1).build()?;
    /// let kept: Vec<_> = (0..3).map(|_| pool.get(4096)).collect(); let line = line!();
    /// drop(pool.get(100)); // returned: not listed
    /// let h = pool.holders(); // `kept`'s line holds three buffers
    /// assert_eq!(h.len(), 1);
    /// assert_eq!((h[0].buffers, h[0].bytes, h[0].location.line()), (3, 3 * 4096, line));
    /// # drop(kept);
    /// # Ok::<(), tierpool::ConfigError>(())
    /// ```
    #[cfg(feature = "holders")]
    #[cfg_attr(docsrs, doc(cfg(feature = "holders")))]
    pub fn holders(&self) -> Vec<crate::Holder> {
        self.shared().holders.holders()
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
        give_back(self.key, Tag::NONE, buf);
    }

    /// A snapshot of the pool's counters. See [`Stats`] for what is exact when.
    #[must_use]
    pub fn stats(&self) -> Stats {
        self.shared().stats()
    }

    /// Releases retained memory now: everything in the shared depot and in every thread's
    /// cache, idle threads' included (each is reclaimed: see the crate docs, *How it works*),
    /// and returns how many bytes that was. A thread in the middle of an operation on its
    /// cache is waited for (one get or return); no thread is interrupted. Where caches cannot
    /// be reclaimed (no Linux `membarrier`), only the calling thread's cache and the depot are
    /// released now, and every other cache at its owner's next operation.
    ///
    /// ```
    /// use std::sync::mpsc::channel;
    ///
    /// let pool = tierpool::BufferPool::new();
    /// drop(pool.get(4096)); // kept in this thread's cache
    /// let (idle, wake) = (channel(), channel::<()>());
    /// let other = {
    ///     let pool = pool.clone();
    ///     std::thread::spawn(move || {
    ///         drop(pool.get(8192)); // kept in that thread's cache
    ///         idle.0.send(()).unwrap();
    ///         wake.1.recv().unwrap(); // idle: never touches the pool again
    ///     })
    /// };
    /// idle.1.recv().unwrap();
    /// # if tierpool::__bench::reclaims_other_threads() {
    /// assert_eq!(pool.trim(), 4096 + 8192); // both caches, the idle thread's too
    /// assert_eq!(pool.stats().retained_bytes, 0);
    /// # }
    /// wake.0.send(()).unwrap();
    /// other.join().unwrap();
    /// ```
    pub fn trim(&self) -> usize {
        let state = self.shared();
        let caches = match policy::trim_all(state) {
            Some(bytes) => bytes,
            // Caches cannot be reclaimed here: this thread's own releases now, the others at
            // their owners' next operation.
            None => local::slow(
                self.key,
                (),
                || None,
                |o, pool, ()| {
                    o.set_trim_gen(pool.trim_gen.load(std::sync::atomic::Ordering::Relaxed));
                    policy::release_all(o, pool)
                },
                |_, ()| 0,
            ),
        };
        let bytes = caches + state.depot.trim();
        state.allocator_trim.released(bytes, Why::Trim);
        state.allocator_trim.run_now();
        bytes
    }

    /// The tier sizes, ascending.
    pub fn tier_sizes(&self) -> &[usize] {
        self.shared().classes.sizes()
    }

    /// The pool's name ([`Builder::name`]; `pool-1`, `pool-2`, ... for unnamed pools).
    pub fn name(&self) -> &str {
        &self.shared().name
    }

    /// Publishes the pool's figures to the [`metrics`](https://docs.rs/metrics) facade now
    /// (feature `metrics`; the names and labels are listed in the README). The pool also
    /// publishes them at each tick, once per decay interval while it is used or with
    /// [`Builder::background_trim`]; call this for a pool used rarely, or before a scrape.
    ///
    /// ```
    /// let pool = tierpool::BufferPool::builder().name("rx").build()?;
    /// drop(pool.get(4096));
    /// pool.publish_metrics(); // e.g. tierpool_gets_total{pool="rx",result="miss"} 1
    /// # Ok::<(), tierpool::ConfigError>(())
    /// ```
    #[cfg(feature = "metrics")]
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub fn publish_metrics(&self) {
        self.shared().publish_metrics();
    }

    /// The cap on the bytes the pool retains: the depot and every thread cache together (see
    /// [`Builder::max_retained_bytes`]).
    pub fn max_retained_bytes(&self) -> usize {
        self.shared().max_retained_bytes
    }

    /// The most each thread's cache for this pool may hold (under a budget on bytes in use,
    /// caches hold at most `min(thread_cache_bytes, max_in_use_bytes / 16)`). Whatever the
    /// number of threads, the depot and all thread caches together retain at most
    /// [`max_retained_bytes`](Self::max_retained_bytes).
    pub fn thread_cache_bytes(&self) -> usize {
        self.shared().thread_cache_bytes
    }

    /// The budget on bytes in use ([`Builder::max_in_use_bytes`]), if the pool has one.
    pub fn max_in_use_bytes(&self) -> Option<usize> {
        self.shared().budget.as_ref().map(|b| b.limit())
    }

    /// True if both handles refer to the same pool.
    pub fn same_pool(&self, other: &BufferPool) -> bool {
        self.key == other.key
    }
}

/// How long a get may wait for room in the budget.
#[derive(Debug, Clone, Copy)]
enum Wait {
    Never,
    /// Until the deadline (`None`: no deadline).
    Until(Option<Instant>),
}

/// The panic of [`BufferPool::get`]: a buffer larger than the whole budget.
#[cold]
#[inline(never)]
#[track_caller]
fn get_failed(e: AllocError) -> ! {
    panic!("tierpool: {e}")
}

/// The future returned by [`BufferPool::acquire`].
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct Acquire<'a> {
    pool: &'a BufferPool,
    n: usize,
    state: AcquireState,
    /// Where `acquire` was called (feature `holders`).
    #[cfg(feature = "holders")]
    site: &'static std::panic::Location<'static>,
}

#[derive(Debug)]
enum AcquireState {
    Start,
    /// In the budget's queue.
    Waiting {
        ticket: Ticket,
        /// The bytes it waits for.
        charge: usize,
    },
    Done,
}

impl Future for Acquire<'_> {
    type Output = Result<PooledBuf, AllocError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let polled = this.poll_buf(cx);
        #[cfg(feature = "holders")]
        // A budgeted pool's buffer comes untracked from the budget's path: tracked here, at
        // the caller of `acquire`. Without a budget `obtain_at` has tracked it there already.
        let polled = polled.map(|r| {
            r.map(|b| {
                let pool = this.pool;
                if !pool.key.budgeted() {
                    return b;
                }
                let (v, tag) = b.into_parts();
                let tag = pool.track(tag, v.capacity(), this.site);
                PooledBuf::new(v, pool.key, tag)
            })
        });
        polled
    }
}

impl Acquire<'_> {
    fn poll_buf(&mut self, cx: &mut Context<'_>) -> Poll<Result<PooledBuf, AllocError>> {
        let this = self;
        let pool = this.pool;
        let n = this.n;
        if let AcquireState::Start = this.state {
            if !pool.key.budgeted() {
                this.state = AcquireState::Done;
                #[cfg(feature = "holders")]
                let site = this.site;
                #[cfg(not(feature = "holders"))]
                let site = site();
                return Poll::Ready(pool.obtain_at(n, Fresh::Fallible, Wait::Never, site));
            }
            let ready = |this: &mut Self, r| {
                this.state = AcquireState::Done;
                Poll::Ready(r)
            };
            let charge = match pool.fetch(n, Fresh::Fallible, 0) {
                Ok(Got::Buf(v, tag)) => return ready(this, Ok(PooledBuf::new(v, pool.key, tag))),
                Ok(Got::Wait(charge)) => match pool.check_charge(n, charge) {
                    Ok(c) => c,
                    Err(e) => return ready(this, Err(e)),
                },
                Err(e) => return ready(this, Err(e)),
            };
            if pool.take_swept(charge) {
                return ready(this, pool.fetch_paid(n, Fresh::Fallible, charge));
            }
            // The waker goes in with the ticket, so a grant between here and the check below
            // wakes this task: no lost wake-up.
            let ticket = pool
                .budget()
                .enqueue(charge, Wake::Task(Some(cx.waker().clone())));
            this.state = AcquireState::Waiting { ticket, charge };
            policy::sweep(pool.shared());
        }
        let AcquireState::Waiting { ticket, charge } = &this.state else {
            panic!("`Acquire` polled after it completed");
        };
        if !pool.budget().poll(ticket, Some(cx.waker())) {
            return Poll::Pending;
        }
        let charge = *charge;
        this.state = AcquireState::Done;
        Poll::Ready(pool.fetch_paid(n, Fresh::Fallible, charge))
    }
}

impl Drop for Acquire<'_> {
    /// Cancels the wait: what the request had gathered goes to the next waiter.
    fn drop(&mut self) {
        if let AcquireState::Waiting { ticket, .. } =
            std::mem::replace(&mut self.state, AcquireState::Done)
        {
            self.pool.budget().cancel(ticket);
        }
    }
}

/// Starts the background trimmer for `state`: it holds only a weak reference, ticks the pool
/// just after each interval begins (or when unparked by the pool closing), and exits once the
/// pool is closed or gone. Returns `None` if the OS refuses to start a thread; the pool then
/// works without it.
///
/// It sleeps until the next interval rather than for an interval: sleeping a fixed interval
/// drifted, and now and then two wake-ups fell in one interval, where the second cannot tick,
/// which delayed reclaiming idle caches by an interval (the report's `idle-threads`).
fn spawn_trimmer(state: &Arc<PoolState>) -> Option<std::thread::Thread> {
    let weak: Weak<PoolState> = Arc::downgrade(state);
    let mut wait = state.clock.until_next();
    std::thread::Builder::new()
        .name("tierpool-trim".into())
        .spawn(move || loop {
            std::thread::park_timeout(wait + Duration::from_millis(1));
            match weak.upgrade() {
                Some(state) if !state.is_closed() => {
                    policy::tick(&state, state.clock.epoch(), Turn::Wait);
                    wait = state.clock.until_next();
                }
                _ => break,
            }
        })
        .ok()
        .map(|handle| handle.thread().clone())
}

impl Builder {
    /// Validates the configuration and builds the pool.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the first invalid value: no tiers, a zero tier, a tier above
    /// `isize::MAX`, too many tiers, an invalid range or step count, a cap that cannot hold one
    /// buffer of the smallest tier, a thread cache larger than the cap, a zero interval, or a
    /// budget on bytes in use below the smallest tier or above
    /// [`MAX_BUDGET`](crate::MAX_BUDGET).
    pub fn build(self) -> Result<BufferPool, ConfigError> {
        Ok(BufferPool::from_config(self.validate()?))
    }
}

impl Default for BufferPool {
    /// A **new, private** pool with the default configuration, like [`BufferPool::new`]. For the
    /// process-wide shared pool, use [`default_pool`](crate::default_pool).
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for BufferPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.shared();
        f.debug_struct("BufferPool")
            .field("name", &s.name)
            .field("key", &self.key)
            .field("tiers", &s.classes.len())
            .field("smallest", &s.classes.size(0))
            .field("largest", &s.classes.max())
            .field("max_retained_bytes", &s.max_retained_bytes)
            .field("thread_cache_bytes", &s.thread_cache_bytes)
            .field("depot_bytes", &s.depot.bytes())
            .finish()
    }
}
