//! Who holds the buffers, compiled out (feature `holders` off): the same items as
//! `holders.rs`, empty, so that the pool's hot paths carry no `#[cfg]` and nothing of the
//! feature is left in them (`Sampler::due` is a constant `false`).

use std::time::Duration;

use crate::base::key::{Key, Tag};

/// Where a get was called: nothing without the feature.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Site;

/// The caller's [`Site`]: nothing.
#[inline(always)]
pub(crate) fn site() -> Site {
    Site
}

/// Which gets a pool handle tracks: none.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sampler;

impl Sampler {
    pub(crate) fn new(_every: u32) -> Self {
        Sampler
    }

    /// Never.
    #[inline(always)]
    pub(crate) fn due(&self, _key: Key) -> bool {
        false
    }
}

/// A pool's tracked buffers: none.
#[derive(Debug)]
pub(crate) struct Tracker;

impl Tracker {
    pub(crate) fn new(_every: u32, _report_after: Option<Duration>) -> Self {
        Tracker
    }

    pub(crate) fn every(&self) -> u32 {
        0
    }

    pub(crate) fn report_after(&self) -> Option<Duration> {
        None
    }

    pub(crate) fn report_wait(&self, _pool: &str, _n: usize, _waited: Duration) {}

    pub(crate) fn report_overdue(
        &self,
        _pool: &str,
        _count: usize,
        _charge: usize,
        _waited: Duration,
    ) {
    }

    /// Untracked: `tag` itself.
    pub(crate) fn track(&self, tag: Tag, _cap: usize, _site: Site) -> Tag {
        tag
    }

    /// `tag` itself: nothing is tracked.
    #[inline(always)]
    pub(crate) fn untrack(&self, tag: Tag) -> Tag {
        tag
    }
}

/// True if `tag` names a tracked buffer's entry: never.
#[inline(always)]
pub(crate) fn is_tracked(_tag: Tag) -> bool {
    false
}
