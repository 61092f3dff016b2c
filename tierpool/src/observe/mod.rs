//! Layer 2, what the pool reports: the [`Stats`](crate::Stats) snapshot and the counting
//! that feeds it (`stats.rs`), publishing it through the `metrics` facade (`telemetry.rs`,
//! feature `metrics`), and who holds the buffers (`holders.rs`, feature `holders`). Imports
//! only `base/`; the engine fills these in.
//!
//! A feature that is off swaps its file for an empty twin (`telemetry_off.rs`,
//! `holders_off.rs`) with the same items doing nothing, so the code that calls them has no
//! `#[cfg]`, and nothing of the feature reaches the fast path.

pub(crate) mod stats;
#[cfg(feature = "metrics")]
pub(crate) mod telemetry;
#[cfg(not(feature = "metrics"))]
#[path = "telemetry_off.rs"]
pub(crate) mod telemetry;
#[cfg(feature = "holders")]
pub(crate) mod holders;
#[cfg(not(feature = "holders"))]
#[path = "holders_off.rs"]
pub(crate) mod holders;
