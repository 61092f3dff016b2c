//! Time for decay: the pool's interval clock.
//!
//! Time is cut into intervals of the configured length, numbered from the pool's creation
//! (*epochs*). Nothing is released on a timer by default; instead, every thread cache reads
//! the clock on its housekeeping: every 256 returns to a tier (down to 8 for a thread whose
//! returns are far apart in time, so that it looks a few times an interval), every 16
//! slow-path operations, and whenever its doorbell rang. When a cache sees a new epoch it releases its own buffers
//! that stayed unused through the previous interval (its low-water mark), gives back the
//! bookings of tiers it stopped using, and asks the pool to *tick* for that epoch, once
//! whoever gets there first: the depot releases what stayed idle in it, and every thread cache
//! that has not been used since the previous tick (its owner went quiet for at least an
//! interval) is reclaimed by the ticking thread and emptied (`cache/reclaim.rs`).
//!
//! So a buffer that becomes idle is released within about two intervals while any thread
//! keeps using the pool, even at a low rate, and even if the thread that holds it never uses
//! the pool again. A pool that nobody uses at all never looks at the clock; the optional
//! background trimmer ([`Builder::background_trim`](crate::Builder::background_trim)) then
//! ticks once per interval.

use std::time::Instant;

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

    /// The time left until the next interval begins.
    pub(crate) fn until_next(&self) -> std::time::Duration {
        let elapsed = self.start.elapsed().as_nanos();
        let interval = u128::from(self.interval_nanos);
        let left = interval - elapsed % interval;
        std::time::Duration::from_nanos(left.min(u128::from(u64::MAX)) as u64)
    }

    /// The current sixteenth of an interval (rate limits finer than an epoch).
    pub(crate) fn tick16(&self) -> u64 {
        (self.start.elapsed().as_nanos() * 16 / u128::from(self.interval_nanos)) as u64
    }
}
