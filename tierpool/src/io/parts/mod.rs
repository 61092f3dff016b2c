//! The parts every pooled reader and writer of `io` is made of: the read rules
//! ([`ReadRule`], public), the stores a reader's core applies them to, the core itself (the
//! reads, the waits for room, growing and shrinking), and the write loop
//! ([`poll_write_all`], public).
//!
//! A connection's read buffer holds memory only while it has unread bytes, and then at most
//! `max(2P, T0)` of it for `P` unread bytes (`T0` the pool's smallest tier), however the bytes
//! arrive: [`ReadRule`]'s docs give the rules. [`Core`] applies them to a read loop over
//! tokio's `AsyncRead`, for [`ReadBuffer`](crate::io::ReadBuffer), the decoder bridge
//! ([`FramedRead`](crate::io::codec::FramedRead)), the frame and chain readers and
//! readiness-first reads. On top of the rules it adds what a read loop needs:
//!
//! - With nothing unread, a read goes into a buffer taken for it from the pool (of the rule's
//!   [`fresh_capacity`](ReadRule::fresh_capacity), not under a budget, where a read waits for
//!   room for its offer only); a read that finds nothing (`Pending`) gives that buffer
//!   straight back.
//! - With bytes unread and room for the offer, the read goes into the room (or into the room
//!   there is, if at least 8 KiB). Without room, after a read that filled its offer, the
//!   buffer grows first; else the read goes into a buffer of its own, and its bytes are then
//!   copied after the unread ones where they fit (after moving the unread ones to the start,
//!   if that makes room), or both move to a buffer of the rule's
//!   [`grow_capacity`](ReadRule::grow_capacity).
//! - Before a read returns `Pending`, the buffer is shrunk to the rule's bound
//!   ([`shrink`](ReadRule::shrink)).

mod rule;
#[cfg(feature = "tokio")]
mod store;
#[cfg(feature = "tokio")]
mod core;
#[cfg(feature = "tokio")]
mod write;

#[cfg(feature = "tokio")]
pub(crate) use self::core::Core;
pub use rule::ReadRule;
#[cfg(feature = "tokio")]
pub(crate) use rule::MIN_READ;
#[cfg(feature = "tokio")]
pub(crate) use store::{Store, VecStore};
#[cfg(feature = "tokio")]
pub use write::poll_write_all;
