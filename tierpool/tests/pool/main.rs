//! The pool's behaviour, one module per area: the API's semantics and bad input, threads,
//! reclaiming idle caches, the budget, decay, stress, random sequences checked against a
//! model (plain and aligned), the long-wait report and the metrics.
//!
//! One test binary: the modules share the helpers and run side by side. Tests that need a
//! process of their own (a counting global allocator, the process's RSS or its threads, the
//! default pool) are the files beside this folder.

#[path = "../common/mod.rs"]
mod common;

mod aligned_model;
mod bad_input;
mod budget;
mod reservation;
mod decay;
mod holders;
mod metrics;
mod pool_model;
mod reclaim;
mod semantics;
mod stress;
mod threads;
