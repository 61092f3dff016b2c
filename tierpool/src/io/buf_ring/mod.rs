//! An io_uring provided-buffer ring fed by the pool (feature `buf-ring`, Linux 5.19 or later).
//!
//! A receive that names a buffer group instead of a buffer takes its buffer from the group's
//! ring only when data arrives, so a connection waiting for data holds no memory: 10,000
//! mostly idle connections need buffers only for the few that are active (memory that
//! follows traffic, at its furthest). A [`BufRing`] registers such a ring with an
//! io_uring instance and keeps it stocked from a [`BufferPool`](crate::BufferPool):
//!
//! - each completion that selected a buffer becomes a [`PooledBytes`](crate::PooledBytes) holding exactly the bytes
//!   received ([`BufRing::complete`]); dropping it gives the buffer back to the pool, like any
//!   pooled buffer, on whichever thread drops it;
//! - the ring slot the kernel used is refilled from the pool in a batch, with one store of the
//!   ring's tail, by [`BufRing::replenish`], which the event loop calls after handling a batch
//!   of completions. A buffer held for long therefore never holds a ring slot: the ring is
//!   refilled from the pool at once, and the held buffer costs only its bytes;
//! - under a budget on bytes in use ([`Builder::max_in_use_bytes`]), the ring's buffers and
//!   those handed out are charged alike, so the budget bounds both: when it has no room the
//!   slot stays empty ([`BufRingStats::starved`]), a receive that finds the ring empty
//!   completes with [`RecvError::Dry`] (`ENOBUFS`, counted in [`BufRingStats::dry`]), and the
//!   loop arms it again once [`replenish`](BufRing::replenish) has put buffers back;
//! - with **incremental consumption** (`IOU_PBUF_RING_INC`, Linux 6.12), the kernel takes only
//!   what each receive needs from a buffer, so many small receives share one large buffer as
//!   views of it ([`Incremental`]).
//!
//! The ring does not drive io_uring: it builds the submission entries ([`recv_multishot`],
//! [`recv`], [`read`]) and reads the completions. Neither compio (0.19), tokio-uring (0.5) nor
//! monoio (0.2) lets a program stock a ring from its own pool (compio allocates its ring's
//! buffers itself, of one length, and takes them back only when dropped; the other two have
//! no provided buffers), so the event loop is the [`io_uring`] crate's, as in its own examples.
//! See the crate documentation ("The network path") for what each runtime would need.
//!
//! [`recv_multishot`]: BufRing::recv_multishot
//! [`recv`]: BufRing::recv
//! [`read`]: BufRing::read
//! [`Builder::max_in_use_bytes`]: crate::Builder::max_in_use_bytes
//!
//! # Example
//!
//! An echo of what a socket receives, with one multishot receive: one submission for the life
//! of the connection, a buffer from the ring per arrival.
//!
//! ```no_run
//! use std::io::Write;
//! use std::os::fd::AsRawFd;
//! use io_uring::{cqueue, IoUring};
//! use tierpool::io::buf_ring::{BufRing, RecvError};
//!
//! let pool = tierpool::BufferPool::new();
//! let mut uring = IoUring::new(256)?;
//! let mut ring = BufRing::builder(&pool).entries(64).buf_size(16 << 10).build(&uring)?;
//! let (mut a, b) = std::os::unix::net::UnixStream::pair()?;
//! a.write_all(b"hello")?;
//!
//! let entry = ring.recv_multishot(b.as_raw_fd()).user_data(1);
//! // SAFETY: the entry names only the ring's memory, which outlives the receive.
//! unsafe { uring.submission().push(&entry)? };
//! uring.submit_and_wait(1)?;
//! let cqes: Vec<cqueue::Entry> = uring.completion().collect();
//! for cqe in cqes {
//!     // SAFETY: the completion of this ring's receive, passed once.
//!     match unsafe { ring.complete(&cqe) } {
//!         Ok(Some(bytes)) => assert_eq!(&bytes[..], b"hello"), // a pooled view
//!         Ok(None) => {}                  // end of stream
//!         Err(RecvError::Dry) => {}       // no buffer: arm again after replenish()
//!         Err(e) => return Err(e.into()),
//!     }
//! }
//! ring.replenish(); // the slot the kernel used gets a new buffer from the pool
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Safety argument
//!
//! The kernel writes into a ring buffer from the moment it selects it until it posts that
//! receive's completion; the ring's memory (the entries) it reads until the ring is
//! unregistered. So:
//!
//! - a buffer stays in its slot (owned by the ring, touched by nobody) from the time it is put
//!   in the ring until a completion names it; only then is it handed out, and only the bytes
//!   the completion counts (and, with incremental consumption, those of earlier completions
//!   from the same buffer, which the kernel does not write again);
//! - the ring counts the receives it built that have not posted their last completion
//!   ([`BufRing::in_flight`]). Tearing the ring down unregisters it (the kernel selects no
//!   more), then gives the slots' buffers back to the pool only if no receive is in flight: a
//!   receive still in flight may have selected one. Otherwise they are kept for the life of
//!   the process, never freed or reused ([`Closed::leaked`]), which is safe whatever the kernel
//!   does later;
//! - the ring keeps its own duplicate of the io_uring descriptor, so the instance (and the
//!   registration) outlives the program's `IoUring` if that is dropped first, and unregistering
//!   never reaches another file that took the descriptor's number.

mod error;
mod ring;

pub use error::{BufRingError, RecvError};
pub use ring::{probe, BufRing, BufRingBuilder, BufRingStats, Closed, Incremental, Support};

/// The largest ring the kernel accepts (`ring_entries` is at most 2^15).
pub const MAX_ENTRIES: u16 = crate::sys::uring::MAX_ENTRIES;
