//! The background trimmer ([`Builder::background_trim`](crate::Builder::background_trim)): a
//! thread that ticks a pool once per decay interval, so that a pool used rarely or not at all
//! still releases what it retains and reclaims its idle threads' caches.

use std::time::Duration;

use crate::base::sync::{Arc, Weak};
use crate::engine::cache::reclaim::Turn;
use crate::engine::policy;
use crate::engine::state::PoolState;

/// Starts the background trimmer for `state`: it holds only a weak reference, ticks the pool
/// just after each interval begins (or when unparked by the pool closing), and exits once the
/// pool is closed or gone. Returns `None` if the OS refuses to start a thread; the pool then
/// works without it.
///
/// It sleeps until the next interval rather than for an interval: sleeping a fixed interval
/// drifted, and now and then two wake-ups fell in one interval, where the second cannot tick,
/// which delayed reclaiming idle caches by an interval (the report's `idle-threads`).
pub(crate) fn spawn(state: &Arc<PoolState>) -> Option<std::thread::Thread> {
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
