//! What a thread cache does beyond the fast path, in safe code: a get or a return the fast
//! path could not serve, the owner's housekeeping, and what reclaimers do with a cache they
//! took over. The layers above reach it through `ops.rs`.
//!
//! Every function on one cache takes its [`Owner`] (the owning thread's, or a reclaimer's:
//! the rules are the same either way) and the pool's state. Each file answers one question:
//!
//! | file | the question |
//! |---|---|
//! | `exchange.rs` | how buffers move between a stack, the depot and the allocator (refill, flush, give up, release) |
//! | `room.rs` | where a tier's room in its cache comes from when it needs more (the room ladder) |
//! | `retrieve.rs` | which retained buffer, besides its own stack's, may serve a get |
//! | `housekeeping.rs` | the owner's housekeeping, the look at the pool: the doorbell, trim, budget pressure, decay, close, thread exit |
//! | `get.rs` | a get the fast path could not serve, with a cache or without |
//! | `put.rs` | a return the fast path could not take, with a cache or without |
//! | `tick.rs` | the pool's tick, reclaiming idle caches, and what an operation leaves for after it |
//! | `pool_wide.rs` | the operations on every cache at once: `trim()`, closing, a budget waiter's sweep |
//!
//! Bottom-up: each file imports only those above it. The tests are in `tests.rs`.
//!
//! # Bookings
//!
//! A tier books room (`cache/book.rs`) when it is first used: one buffer for a return,
//! a batch for a refill. The booking grows with use, up to `min(64, cache_bytes / size)`
//! buffers: doubling when a return finds its stack full, and by a batch when a get finds too
//! little room to refill. Where the room comes from is `room.rs`'s ladder. A refill takes what
//! room the allowance has and, beyond it, the room the depot's buffers held there
//! (`exchange.rs`), so that at the cap nothing is evicted to make room for buffers the
//! allowance already counts; what evicts is a buffer the pool did not retain (a miss's, or
//! one returned without room).
//!
//! A refill's batch starts small (a slow start, as jemalloc's thread caches adapt their fill
//! count): a tier's first refill asks the depot for one buffer, each refill that moved
//! buffers doubles the next, up to the batch (half its stack, the whole of a stack of one or
//! two), decay halves it when buffers stayed idle, and a tier that gives up its storage starts
//! over. So a thread new to a tier takes what it uses, not every buffer the depot holds.
//!
//! # Budget
//!
//! In a pool with a budget on bytes in use, buffers on a stack count as charged
//! (`budget.rs`): a refill charges its batch, a flush refunds it, and so do releases; a
//! return that does not land on a stack refunds its buffer's charge (from its tag). A get
//! that needs a charge the account cannot give now returns [`Got::Wait`], and the caller
//! waits outside the cache. While a waiter is queued, owners keep nothing: their caches stay
//! rung, returns go to the depot, and their stacks were swept by the waiter.
//!
//! [`Owner`]: crate::engine::cache::owner::Owner
//! [`Got::Wait`]: crate::engine::state::Got::Wait

mod exchange;
mod room;
mod retrieve;
mod housekeeping;
mod get;
mod put;
mod tick;
mod pool_wide;
#[cfg(all(test, not(loom)))]
mod tests;

pub(crate) use get::{get_direct, get_slow};
pub(crate) use housekeeping::{look, release_all, retire};
pub(crate) use pool_wide::{close_all, sweep, trim_all};
pub(crate) use put::{put_direct, put_slow};
pub(crate) use tick::{finish, tick};
