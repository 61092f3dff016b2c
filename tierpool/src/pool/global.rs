//! The process-wide default pool.
//!
//! Libraries that need buffers but take no pool from their caller use [`default_pool`];
//! an application sets it once, early, with [`set_default_pool`] (gRPC-Go's "settable
//! process-wide default" in its `mem` package). Per-component pools remain possible alongside it.
//!
//! The default pool gives memory back without a knob: it runs the background trimmer
//! ([`Builder::background_trim`](crate::Builder::background_trim)), one thread that ticks it
//! once per decay interval, so a program that uses only the default pool and goes quiet
//! returns the buffers its threads' caches and the depot kept within about two intervals
//! (2 s), and the allocator is asked to give the pages back. A pool that is used keeps
//! ticking itself as it works; only a quiet one needs the thread, and a private pool a
//! program makes is its own to configure. The thread is started with the default pool, on
//! first use, and sleeps between ticks.

use std::sync::OnceLock;

use crate::BufferPool;

static DEFAULT: OnceLock<BufferPool> = OnceLock::new();

/// Sets the process-wide default pool, once.
///
/// # Errors
/// Gives `pool` back if a default is already set (by an earlier call, or because
/// [`default_pool`] was already used and created the default configuration).
///
/// ```
/// let pool = tierpool::BufferPool::builder().power_of_two_tiers(512, 1 << 20).build()?;
/// tierpool::set_default_pool(pool.clone()).ok();
/// assert!(tierpool::default_pool().same_pool(&pool));
/// assert!(tierpool::set_default_pool(tierpool::BufferPool::new()).is_err()); // only once
/// # Ok::<(), tierpool::ConfigError>(())
/// ```
pub fn set_default_pool(pool: BufferPool) -> Result<(), BufferPool> {
    DEFAULT.set(pool)
}

/// The process-wide default pool: the one given to [`set_default_pool`], or else a pool with
/// the default configuration and the background trimmer on (module docs), created on first
/// use.
///
/// ```
/// let buf = tierpool::default_pool().get(4096);
/// assert!(buf.capacity() >= 4096);
/// ```
pub fn default_pool() -> &'static BufferPool {
    DEFAULT.get_or_init(|| {
        BufferPool::builder()
            .name("default")
            .background_trim(true)
            .build()
            .expect("the default configuration is valid")
    })
}
