//! Layer 3, the machinery no user sees: how sizes map to tiers, when buffers are released,
//! the budget, the shared depot, the thread caches and the state one pool shares between
//! them. Imports `base/`, `sys/` and `observe/`; knows nothing of the handles above it.
//!
//! The layers above enter through one door, `ops.rs` (open, close, get, put, refund, trim,
//! sweep), and otherwise name only the configuration (`config.rs`) and the errors
//! (`error.rs`): no thread cache, no owner, no field of the pool's state.
//!
//! | file | what it owns |
//! |---|---|
//! | `class.rs` | size classes and the O(1) lookup |
//! | `budget.rs` | the budget on bytes in use: the account and its FIFO of waiters |
//! | `error.rs` | the crate's errors: [`ConfigError`](crate::ConfigError), [`AllocError`](crate::AllocError) |
//! | `clock.rs` | the decay intervals |
//! | `fresh.rs` | making a buffer on a miss, readying one on a hit, cleaning one on return |
//! | `idle.rs` | the one rule that releases what stayed unused through a decay interval |
//! | `depot.rs` | the shared depot, its decay, and the allowance that bounds depot and caches together |
//! | `config.rs` | a pool's validated configuration and the defaults |
//! | `cache/` | one thread's cache of one pool, and taking a cache over from its owner |
//! | `state.rs` | `PoolState`: what one pool shares between its handles, caches and reclaimers |
//! | `policy/` | the slow path and what reclaimers do, one rule per file: exchanges with the depot, room, retrieval, get, return, housekeeping, the tick, pool-wide operations |
//! | `local.rs` | how a thread finds its cache: the thread-local slot and table, and the one fallback ladder of every slow path |
//! | `registry.rs` | pool keys, resolved to live pools on cold paths |
//! | `trimmer.rs` | the background trimmer thread |
//! | `ops.rs` | the one door: every operation of the layers above, and every slow operation ([`SlowOp`](local::SlowOp)) behind it |
//!
//! Bottom-up: each file imports only those above it in this table.

// check_layers: door ops, config, error
pub(crate) mod class;
pub(crate) mod budget;
pub(crate) mod error;
pub(crate) mod clock;
pub(crate) mod fresh;
pub(crate) mod idle;
pub(crate) mod depot;
pub(crate) mod config;
pub(crate) mod cache;
pub(crate) mod state;
pub(crate) mod policy;
pub(crate) mod local;
pub(crate) mod registry;
pub(crate) mod trimmer;
pub(crate) mod ops;
#[cfg(all(test, loom))]
mod loom_tests;
