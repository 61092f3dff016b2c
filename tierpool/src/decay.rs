//! Giving memory back over time: the interval clock and the optional background trimmer.
//!
//! Time is cut into intervals of the configured length, numbered from the pool's creation
//! (*epochs*). Nothing is released on a timer by default; instead, every thread cache reads
//! the clock on its housekeeping: every 256 returns to a tier, every 16 slow-path operations,
//! and whenever its doorbell rang. When a cache sees a new epoch it releases its own buffers
//! that stayed unused through the previous interval (its low-water mark), gives back the
//! budget of tiers it stopped using, and asks the pool to do the same for the depot, once per
//! epoch whoever gets there first.
//! A buffer that becomes idle is therefore released within about two intervals while the
//! program keeps running, even at a low rate.
//!
//! A pool that nobody uses at all never looks at the clock, so the optional background trimmer
//! ([`Builder::background_trim`](crate::Builder::background_trim)) wakes once per interval and
//! applies the depot's decay. It cannot reach into thread caches (they belong to their threads);
//! those hold at most `thread_cache_bytes` each and are released when their thread uses any pool
//! again or exits.

use std::time::{Duration, Instant};

use crate::state::PoolState;
use crate::sync::{Arc, Weak};

/// Numbers the decay intervals since the pool was created.
#[derive(Debug)]
pub(crate) struct Clock {
    start: Instant,
    interval_nanos: u64,
}

impl Clock {
    pub(crate) fn new(interval_nanos: u64) -> Self {
        Clock {
            start: Instant::now(),
            interval_nanos,
        }
    }

    /// The current interval's number.
    pub(crate) fn epoch(&self) -> u64 {
        (self.start.elapsed().as_nanos() / u128::from(self.interval_nanos)) as u64
    }
}

/// Starts the background trimmer for `shared`. It holds only a weak reference, wakes every
/// `interval` (or when unparked by the pool closing), and exits once the pool is closed or gone.
/// Returns `None` if the OS refuses to start a thread; the pool then works without it.
pub(crate) fn spawn_trimmer(
    shared: &Arc<PoolState>,
    interval: Duration,
) -> Option<std::thread::Thread> {
    let weak: Weak<PoolState> = Arc::downgrade(shared);
    std::thread::Builder::new()
        .name("tierpool-trim".into())
        .spawn(move || loop {
            std::thread::park_timeout(interval);
            match weak.upgrade() {
                Some(shared) if !shared.is_closed() => shared.tick(shared.clock.epoch()),
                _ => break,
            }
        })
        .ok()
        .map(|handle| handle.thread().clone())
}
