//! Layer 5, the pools that hand buffers out: [`BufferPool`](crate::BufferPool),
//! [`AlignedPool`](crate::AlignedPool), the process-wide default pool. Imports `buf/` and
//! below.

pub(crate) mod buffer_pool;
pub(crate) mod aligned;
pub(crate) mod global;

pub(crate) use crate::engine::config::Builder;
pub(crate) use buffer_pool::{Acquire, BufferPool};
