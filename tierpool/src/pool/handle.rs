//! What every pool handle holds, whatever its kind ([`PoolRef`]): the pool's key, the state
//! behind it, and the handle that closes the pool when the last one goes; and a get's fast
//! path, written once on it. What the fast path cannot serve goes to `acquire.rs`.

use crate::base::key::{Key, Tag};
use crate::base::sync::Arc;
use crate::buf::pooled::PooledBuf;
use crate::engine::config::Config;
use crate::engine::error::AllocError;
use crate::engine::ops::{self, Fresh, PoolState};
use crate::observe::holders::{site, Sampler, Site};

/// How long a get may wait for room in the budget.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Wait {
    Never,
    /// At most this long from when the wait begins (`None`: no limit). A duration, not a
    /// deadline, so that the time reported on giving up is measured from the same instant
    /// as the limit.
    For(Option<std::time::Duration>),
}

/// What every kind of pool handle holds: the pool's key, which gets it samples for holder
/// tracking (nothing without the feature `holders`), and the state, through the handle that
/// closes the pool when the last one goes. The gets and their slow paths are written on it,
/// once, whatever the pool's kind.
#[derive(Clone)]
pub(crate) struct PoolRef {
    pub(crate) key: Key,
    /// Kept in the handle, so the get's check needs no load through the pool.
    sampler: Sampler,
    handle: Arc<Handle>,
}

/// Closes the pool when the last handle goes away.
struct Handle {
    key: Key,
    state: Arc<PoolState>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        ops::close(self.key, &self.state);
    }
}

impl std::fmt::Debug for PoolRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolRef")
            .field("key", &self.key)
            .field("name", &self.state().name())
            .finish()
    }
}

impl PoolRef {
    pub(crate) fn new(config: Config) -> Self {
        let (key, state) = ops::open(config);
        PoolRef {
            key,
            sampler: Sampler::new(state.holders().every()),
            handle: Arc::new(Handle { key, state }),
        }
    }

    pub(crate) fn state(&self) -> &PoolState {
        &self.handle.state
    }

    pub(crate) fn state_arc(&self) -> &Arc<PoolState> {
        &self.handle.state
    }

    #[inline(always)]
    #[cfg_attr(feature = "holders", track_caller)]
    pub(crate) fn obtain(&self, n: usize, how: Fresh, wait: Wait) -> Result<PooledBuf, AllocError> {
        self.obtain_at(n, how, wait, site())
    }

    /// [`obtain`](Self::obtain), tracked (feature `holders`) as taken at `site`.
    #[inline(always)]
    pub(crate) fn obtain_at(
        &self,
        n: usize,
        how: Fresh,
        wait: Wait,
        site: Site,
    ) -> Result<PooledBuf, AllocError> {
        let (v, tag) = match ops::pop(self.key, n, how) {
            Some(hit) => hit,
            // The slow path's result comes through memory; taking it apart here, on its own
            // branch, lets the fast path keep the handle in registers instead of copying it
            // through the stack (the callgrind guard counts the difference).
            None => self.acquire_slow(n, how, wait)?.into_parts(),
        };
        let tag = self.sampled(tag, v.capacity(), site);
        Ok(PooledBuf::new(v, self.key, tag))
    }

    /// [`obtain`](Self::obtain) for the gets that cannot fail (they panic instead): the slow
    /// path returns a plain handle, which stays in registers (a `Result` with
    /// [`AllocError`]'s layout would be merged into the fast path through the stack).
    #[inline(always)]
    #[cfg_attr(feature = "holders", track_caller)]
    pub(crate) fn obtain_or_panic(&self, n: usize, how: Fresh) -> PooledBuf {
        let (v, tag) = match ops::pop(self.key, n, how) {
            Some(hit) => hit,
            None => self.slow_or_panic(n, how).into_parts(),
        };
        let tag = self.sampled(tag, v.capacity(), site());
        PooledBuf::new(v, self.key, tag)
    }

    #[cold]
    #[inline(never)]
    fn slow_or_panic(&self, n: usize, how: Fresh) -> PooledBuf {
        match self.acquire_slow(n, how, Wait::For(None)) {
            Ok(b) => b,
            Err(e) => get_failed(e),
        }
    }

    /// The tag a buffer of capacity `cap` just taken at `site` leaves with: tracked if this
    /// pool tracks holders and this thread's sample is due (never without the feature
    /// `holders`: the check is a constant), else `tag`.
    #[inline(always)]
    fn sampled(&self, tag: Tag, cap: usize, site: Site) -> Tag {
        if self.sampler.due(self.key) {
            return self.track_slow(tag, cap, site);
        }
        tag
    }

    #[cold]
    #[inline(never)]
    fn track_slow(&self, tag: Tag, cap: usize, site: Site) -> Tag {
        self.state().holders().track(tag, cap, site)
    }

    /// `b`, taken at `site` on a path that does not sample (the budget's), tracked if due.
    pub(crate) fn track(&self, b: PooledBuf, site: Site) -> PooledBuf {
        let (v, tag) = b.into_parts();
        let tag = self.sampled(tag, v.capacity(), site);
        PooledBuf::new(v, self.key, tag)
    }
}

/// The panic of a get that cannot be served: a buffer larger than the whole budget.
#[cold]
#[inline(never)]
#[track_caller]
pub(crate) fn get_failed(e: AllocError) -> ! {
    panic!("tierpool: {e}")
}
