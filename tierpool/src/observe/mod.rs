//! Layer 2, what the pool reports: the [`Stats`](crate::Stats) snapshot and the counting
//! that feeds it (`stats.rs`), publishing it through the `metrics` facade (`telemetry.rs`,
//! feature `metrics`), and who holds the buffers (`holders.rs`, feature `holders`). Imports
//! only `base/`; the engine fills these in.

pub(crate) mod stats;
#[cfg(feature = "metrics")]
pub(crate) mod telemetry;
#[cfg(feature = "holders")]
pub(crate) mod holders;
