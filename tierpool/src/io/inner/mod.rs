//! What the pooled readers and writers of `io` share: the read rules that bound what a
//! connection holds, the read sizer, the stores the rules run on, the wait for room in a
//! budget, and the write loop.
//!
//! # How much it holds
//!
//! A connection's read buffer holds memory only while it has unread bytes, and then at most
//! `max(2P, T0)` of it for `P` unread bytes (`T0` the pool's smallest tier), however the bytes
//! arrive: a peer that trickles a frame one byte per packet pins twice what it sent, not a
//! 16 KiB buffer per byte. The rules, shared by [`ReadBuffer`](crate::io::ReadBuffer), the decoder bridge
//! ([`FramedRead`](crate::io::codec::FramedRead)) and the frame reader:
//!
//! - **Drained, it goes back.** When every byte has been consumed the buffer returns to the
//!   pool before the next wait, so an idle connection holds nothing.
//! - **A read offers enough.** Each read offers at least 8 KiB (tokio-util's `FramedRead`
//!   starts with 8 KiB, so no more receives than it), twice as much after a read that filled
//!   its offer (more is waiting), up to 256 KiB, and back down after reads that used little.
//!   With nothing unread, the read goes into a buffer taken for it from the pool; a read
//!   that finds nothing (`Pending`) gives that buffer straight back.
//! - **Sizes that repeat are remembered.** That fresh buffer is as large as the smaller of
//!   what the last two buffers had to hold when they drained (up to 4 MiB), if that is more
//!   than the offer: frames of a size that repeats (64 KiB values, say) land in one buffer
//!   instead of regrowing from the offer every time, and one large frame among small ones
//!   changes nothing. A read that then waits mid-frame gives the large buffer back under the
//!   next rule. (Not under a budget, where a read waits for room for its offer only.)
//! - **Reads append without amplifying.** With bytes unread and room for the offer, the read
//!   goes into the room (or into the room there is, if at least 8 KiB). Without room, it goes
//!   into a buffer of its own, and its bytes are
//!   then copied after the unread ones, where they fit (after moving the unread ones to the
//!   start, if that makes room), or into a buffer of the largest tier that holds both twice
//!   over (geometric growth: copying stays linear in the bytes received).
//! - **A wait holds at most twice what is pending.** Before a read returns `Pending`, a buffer
//!   larger than `max(2P, T0)` is replaced by one of the largest tier up to `2P` (copying the
//!   `P` bytes): what a large read offer, a decoder's `reserve` or the bytes consumed since
//!   had left over.
//!
//! The bound needs tiers at most a factor of two apart, which every generated tier set
//! (the default, [`power_of_two_tiers`](crate::Builder::power_of_two_tiers),
//! [`geometric_tiers`](crate::Builder::geometric_tiers)) is; above the largest tier,
//! buffers are exact.

mod sizer;
mod store;
mod taking;
mod rules;
mod write;

pub(crate) use rules::Core;
pub(crate) use sizer::MIN_READ;
pub(crate) use store::{Plain, Store};
pub(crate) use taking::{alloc_error, Taking};
pub(crate) use write::poll_write_from;
