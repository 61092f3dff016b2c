//! The process-wide default pool.
//!
//! Libraries that need buffers but take no pool from their caller use [`default_pool`];
//! an application sets it once, early, with [`set_default_pool`] (gRPC-Go's "settable
//! process-wide default" in its `mem` package). Per-component pools remain possible alongside it.

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
/// the default configuration, created on first use.
///
/// ```
/// let buf = tierpool::default_pool().get(4096);
/// assert!(buf.capacity() >= 4096);
/// ```
pub fn default_pool() -> &'static BufferPool {
    DEFAULT.get_or_init(|| {
        BufferPool::builder()
            .name("default")
            .build()
            .expect("the default configuration is valid")
    })
}
