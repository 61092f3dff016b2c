//! [`BufferPool`], the handle users hold. The state behind it is `PoolState` (`state.rs`);
//! its gets go through this thread's cache (`tls.rs`, `cache.rs`, `policy.rs`).

use std::fmt;

use crate::buf::{give_back, PooledBuf, NO_TIER};
use crate::cache::Owner;
use crate::config::{Builder, Config};
use crate::decay;
use crate::error::AllocError;
use crate::fresh::{prepare_hit, Fresh};
use crate::policy;
use crate::registry;
use crate::state::PoolState;
use crate::stats::Stats;
use crate::sync::{lock, Arc};
use crate::tls;

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
    key: u32,
    handle: Arc<Handle>,
}

/// Closes the pool when the last [`BufferPool`] handle goes away.
struct Handle {
    key: u32,
    state: Arc<PoolState>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.state.close();
        registry::unregister(self.key);
        // This thread's own cache can let go of its buffers at once; other threads' caches
        // were rung and do so at their next operation or exit.
        let _ = tls::with_owner(self.key, (), |o, pool, ()| policy::service(o, pool));
        if let Some(trimmer) = lock(&self.state.trimmer).take() {
            trimmer.unpark();
        }
    }
}

impl BufferPool {
    /// A new pool with the default configuration (a private pool; for the process-wide one,
    /// see [`default_pool`](crate::default_pool)): geometric tiers with four classes per doubling
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
        let state = Arc::new(PoolState::new(config));
        let key = registry::register(&state);
        if background {
            *lock(&state.trimmer) = decay::spawn_trimmer(&state, state.interval);
        }
        BufferPool {
            key,
            handle: Arc::new(Handle { key, state }),
        }
    }

    fn shared(&self) -> &PoolState {
        &self.handle.state
    }

    #[inline(always)]
    fn acquire(&self, n: usize, how: Fresh) -> Result<PooledBuf, AllocError> {
        let (v, tier) = match tls::fast_pop(self.key, n) {
            Some(hit) => {
                let tier = hit.tier;
                let mut v = hit.into_vec();
                prepare_hit(&mut v, n, how);
                (v, tier)
            }
            // The slow path's result comes through memory; taking it apart here, on its own
            // branch, lets the fast path keep the handle in registers (measured: 17
            // instructions of stack copies per get+drop otherwise).
            None => self.acquire_slow(n, how)?.into_parts(),
        };
        Ok(PooledBuf::new(v, self.key, tier))
    }

    #[cold]
    #[inline(never)]
    fn acquire_slow(&self, n: usize, how: Fresh) -> Result<PooledBuf, AllocError> {
        let get = |o: &Owner<'_>, pool: &PoolState, n| policy::get_slow(o, pool, n, how);
        let (v, tier) = match tls::with_owner(self.key, n, get) {
            Ok(r) => r?,
            Err(n) => {
                let state = || Some(Arc::clone(&self.handle.state));
                match tls::attach(self.key, n, state, get) {
                    Ok(r) => r?,
                    Err(n) => (self.shared().get_direct(n, how)?, NO_TIER),
                }
            }
        };
        Ok(PooledBuf::new(v, self.key, tier))
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
    #[must_use = "the buffer goes straight back to the pool if unused"]
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
    #[must_use = "the buffer goes straight back to the pool if unused"]
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
    #[must_use = "the buffer goes straight back to the pool if unused"]
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
        give_back(self.key, NO_TIER, buf);
    }

    /// A snapshot of the pool's counters. See [`Stats`] for what is exact when.
    #[must_use]
    pub fn stats(&self) -> Stats {
        self.shared().stats()
    }

    /// Releases retained memory now: everything in the shared depot and in the calling
    /// thread's cache, and returns how many bytes that was. Other threads' caches are told
    /// (their doorbell rings) and release theirs at their next use of the pool.
    ///
    /// ```
    /// let pool = tierpool::BufferPool::new();
    /// drop(pool.get(4096));
    /// assert_eq!(pool.trim(), 4096);
    /// assert_eq!(pool.stats().retained_bytes, 0);
    /// ```
    pub fn trim(&self) -> usize {
        let state = self.shared();
        let generation = state.start_trim();
        let own = tls::with_owner(self.key, (), |o, _, ()| policy::trimmed(o, generation));
        own.unwrap_or(0) + state.depot.trim()
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
        self.key == other.key
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
