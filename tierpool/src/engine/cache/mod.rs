//! Thread caches: one per thread and pool, and the protocol that lets other threads reclaim
//! them.
//!
//! | file | what it owns |
//! |---|---|
//! | `stack.rs` | a tier's stack of raw pointers: its storage, its counters, its capacity |
//! | `spare.rs` | stack storage caches gave up, kept (bounded, decayed) for the next cache's stacks |
//! | `block.rs` | the cache's memory: one allocation, the doorbell first, everything at constant offsets |
//! | `counters.rs` | what other threads read: counts for `stats()`, bytes held, the activity signature |
//! | `fast.rs` | the fast path: a get or a return in one visit, reached from the doorbell's address |
//! | `owner.rs` | who may touch the stacks when ([`Owner`]: the busy mark, the lock, the heavy fence), and the cache-wide state it keeps (housekeeping's pace, epochs, work left for after the operation) |
//! | `tier_ops.rs` | what an owner does to a tier's stack: push, pop, take the oldest out, low-water mark, loans, storage, counters |
//! | `book.rs` | bookings: how much each tier may hold, drawn from the pool's allowance |
//! | `reclaim.rs` | the pool's list of caches, and taking caches over from their owners |
//!
//! The files are listed bottom-up: each imports only files above it, and the engine's files
//! below this folder (`engine/mod.rs`). What a cache *does* on the slow path
//! (`engine/policy/`) and how a thread finds its cache (`engine/local.rs`) sit above the
//! pool's state, which holds the list of caches; this folder knows nothing of either. This
//! file only declares the files and re-exports.
//!
//! # Layout
//!
//! ```text
//!  Cache: one allocation, shared by an Arc between the thread's table and the pool's list
//!  ┌───────────────────────────────────────────────────────────────────────────────┐
//!  │ Head (a multiple of 64 bytes)                                                │
//!  │   bell: key   ← the pool's key while the fast path may run; RUNG when another  │
//!  │               thread wants the owner's attention or is reclaiming the cache    │
//!  │         using ← 1 while the owner works on its stacks (fast or slow path)      │
//!  │   hint_end, table: bucket → byte offset of the bucket's first tier             │
//!  │   lock, bookings, decay and housekeeping state, cold counters               │
//!  ├───────────────────────────────────────────────────────────────────────────────┤
//!  │ tiers: [Tier; tiers + 1], 64 bytes each, the last a sentinel that never matches │
//!  └───────────────────────────────────────────────────────────────────────────────┘
//! ```
//!
//! The thread-local slot points at the cache's first byte (its doorbell), and everything the
//! fast path needs is at a constant offset from there: the lookup table, and the tiers at
//! `size_of::<Head>()`. So a get costs one load of the slot, the doorbell, the table entry and
//! the tier's line; no pointer is loaded from the cache to find another part of it.
//!
//! # Who may touch the stacks
//!
//! One thread at a time, its *owner*: the thread the cache belongs to, with two plain stores
//! per operation and no locked instruction, or a *reclaimer* that has taken the cache over
//! with a lock, a ring and a `membarrier`. `owner.rs` has the protocol and why it holds.

pub(super) mod stack;
pub(crate) mod spare;
pub(super) mod block;
mod counters;
pub(super) mod fast;
pub(super) mod owner;
mod tier_ops;
mod book;
pub(crate) mod reclaim;

pub(crate) use block::{offset_table, Cache};
pub(crate) use fast::Pushed;
pub(crate) use owner::Owner;
