//! The records received: a [`ReadBuffer`] that rustls decrypts in place, and the decrypted
//! application data split off it as [`PooledBytes`] views.

use std::collections::VecDeque;

use rustls::{Connection, SideData, Tcp, TlsInputBuffer};

use crate::buf::shared::PooledBytes;
use crate::io::ReadBuffer;

/// The most bytes of undecrypted records held: rustls joins a handshake message of up to
/// 64 KiB in the buffer, and a record carries at most 16 KiB and 2 KiB of expansion. A peer
/// that sends more without completing a record is sending garbage.
pub(crate) const MAX_PENDING: usize = (64 << 10) + (18 << 10) + 5;

/// rustls' view of the records received: the read buffer's unread bytes, from which rustls'
/// discards are counted here and applied once it has let go (views are split off first).
struct Records<'a> {
    buf: &'a mut ReadBuffer,
    discarded: usize,
    eof: bool,
}

impl TlsInputBuffer for Records<'_> {
    fn slice_mut(&mut self) -> &mut [u8] {
        &mut self.buf.unread_mut()[self.discarded..]
    }

    fn discard(&mut self, num_bytes: usize) {
        self.discarded += num_bytes;
    }

    fn received_close_notify(&mut self) {}

    fn has_seen_eof(&self) -> bool {
        self.eof
    }
}

/// Where a payload rustls returned lies.
#[derive(Debug)]
pub(crate) enum Found {
    /// `len` bytes at `offset` from the start of the unread bytes: decrypted in place.
    At { offset: usize, len: usize },
    /// A payload rustls returned from its own memory (a copy of it).
    Copied(PooledBytes),
}

/// Runs rustls over every whole record in `buf`: handshake and alert records are consumed
/// (what rustls answers is appended to `out`), application data is split off `buf` as views
/// and queued in `plain` in order, and the records are dropped from `buf`. `found` is scratch
/// (kept to reuse its memory). True if the peer's `close_notify` was among the records. On
/// an error, the data decrypted before it is still queued.
pub(crate) fn decrypt<Side: SideData>(
    conn: &mut Connection<Side, Tcp>,
    buf: &mut ReadBuffer,
    eof: bool,
    out: &mut Vec<u8>,
    plain: &mut VecDeque<PooledBytes>,
    found: &mut Vec<Found>,
) -> Result<bool, rustls::Error> {
    found.clear();
    // The unread bytes do not move while rustls works on them: `unread_mut` moves them at
    // most once, here, before the base is taken.
    let base = buf.unread_mut().as_ptr() as usize;
    let len = buf.len();
    let mut records = Records {
        buf,
        discarded: 0,
        eof,
    };
    let mut peer_closed = false;
    let result = {
        let mut handler = conn.read_tls(&mut records, out);
        let result = loop {
            match handler.next_payload() {
                None => break Ok(()),
                Some(Err(e)) => break Err(e),
                Some(Ok(payload)) => {
                    let bytes = payload.bytes();
                    if bytes.is_empty() {
                        continue;
                    }
                    let at = (bytes.as_ptr() as usize).wrapping_sub(base);
                    if at < len && bytes.len() <= len - at {
                        found.push(Found::At {
                            offset: at,
                            len: bytes.len(),
                        });
                    } else {
                        // rustls returns a payload of its own only where it had to build one
                        // (not for application data records today): kept as it is.
                        found.push(Found::Copied(PooledBytes::from(bytes.to_vec())));
                    }
                }
            }
        };
        if result.is_ok() {
            peer_closed = handler.state().peer_has_closed();
        }
        // Dropping the handler reports what it consumed through `discard`.
        result
    };
    let Records { buf, discarded, .. } = records;
    // Split the payloads off in order; the rest of what rustls consumed is dropped.
    let mut consumed = 0;
    for f in found.drain(..) {
        match f {
            Found::At { offset, len } => {
                buf.advance(offset - consumed);
                plain.push_back(buf.split_to(len));
                consumed = offset + len;
            }
            Found::Copied(bytes) => plain.push_back(bytes),
        }
    }
    buf.advance(discarded.saturating_sub(consumed));
    result.map(|()| peer_closed)
}
