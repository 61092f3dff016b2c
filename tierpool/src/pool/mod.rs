//! Layer 5, the pools that hand buffers out: [`BufferPool`](crate::BufferPool),
//! [`AlignedPool`](crate::AlignedPool), the [`Builder`](crate::Builder) that configures both,
//! the process-wide default pool. Imports `buf/` and below; the files below import those
//! above them, but for the pool and its builder, which name each other.
//!
//! | file | what it holds |
//! |---|---|
//! | `kind.rs` | what a pool hands out: [`Plain`](crate::Plain) buffers or [`Aligned`](crate::Aligned) ones |
//! | `handle.rs` | what every pool handle holds (the key, the state, closing), and the get's fast path |
//! | `acquire.rs` | the slow get: the one wait on the budget, blocking or async ([`Acquire`](crate::Acquire)) |
//! | `buffer_pool.rs` | [`BufferPool`](crate::BufferPool): its gets, figures and controls, written once for both kinds |
//! | `poll_acquire.rs` | the budget's wait kept in a `poll` function's state ([`PollAcquire`](crate::PollAcquire)) |
//! | `reserve.rs` | bytes of the budget set aside first, spent on buffers taken later ([`Reservation`](crate::Reservation)) |
//! | `builder.rs` | the [`Builder`](crate::Builder) |
//! | `global.rs` | the process-wide default pool |

pub(crate) mod kind;
pub(crate) mod handle;
pub(crate) mod acquire;
pub(crate) mod buffer_pool;
pub(crate) mod poll_acquire;
pub(crate) mod reserve;
pub(crate) mod builder;
pub(crate) mod global;
