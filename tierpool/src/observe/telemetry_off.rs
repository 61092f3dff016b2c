//! Publishing to the `metrics` facade, compiled out (feature `metrics` off): the same calls as
//! `telemetry.rs`, doing nothing, so that the pool's code has no `#[cfg]` where it publishes.

use crate::observe::stats::Stats;

/// Nothing to remember without the feature.
#[derive(Debug, Default)]
pub(crate) struct Published;

impl Published {
    /// Does nothing; the figures are not even computed.
    #[inline(always)]
    pub(crate) fn publish(&self, _pool: &str, _stats: impl FnOnce() -> Stats) {}
}
