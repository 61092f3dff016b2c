//! [`Session`]: rustls' unbuffered state machine driven over the pooled record buffers, with
//! no I/O: the records received are processed where they lie in a
//! [`ReadBuffer`](tierpool::io::ReadBuffer), application data goes to the reader, and what
//! rustls sends is encoded or encrypted into the [`Outgoing`] records.

use std::collections::VecDeque;

use rustls::unbuffered::{ConnectionState, EncodeError, EncryptError, UnbufferedStatus};
use tierpool::io::ReadBuffer;
use tierpool::{BufferPool, PooledBytes};
use tokio::io::ReadBuf;

use crate::output::Outgoing;
use crate::side::Unbuffered;

/// The most bytes of records held before rustls has processed them: a handshake message of
/// up to 64 KiB joined across records, and a record of at most 16 KiB and 2 KiB of
/// expansion. A peer that sends more without completing a record is sending garbage.
pub(crate) const MAX_PENDING: usize = (64 << 10) + (18 << 10) + 5;

/// What a call to [`Session::advance`] is for.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Intent<'a> {
    /// Application data, up to where the reader wants it.
    Read,
    /// Everything there is to process and send, no more (the handshake, after a key update).
    Settle,
    /// Encrypt this application data into at most `room` bytes.
    Write { data: &'a [u8], room: usize },
    /// Encrypt our `close_notify` into at most `room` bytes.
    CloseNotify { room: usize },
    /// Send a TLS 1.3 `key_update`.
    KeyUpdate,
}

/// Where [`Session::advance`] stopped.
#[derive(Debug)]
pub(crate) enum Step {
    /// rustls can go no further without more records (a handshake under way, or the records
    /// received are all processed).
    NeedInput,
    /// Application data went to the reader (a read can return).
    Delivered,
    /// The intent (`Settle`, `Write`, `CloseNotify`, `KeyUpdate`) is carried out.
    Done,
    /// The intent needs this much room in a pooled buffer first (nothing was encrypted).
    NeedRoom(usize),
    /// `KeyUpdate` refused (TLS 1.2): the connection goes on.
    Refused(rustls::Error),
    /// Both sides have sent `close_notify`.
    Closed,
}

/// The state of one TLS connection between the socket's bytes and the program's.
pub(crate) struct Session<C> {
    pub(crate) conn: C,
    /// Records received and not yet processed (rustls decrypts them where they lie).
    pub(crate) records: ReadBuffer,
    /// Records to send.
    pub(crate) out: Outgoing,
    /// Application data decrypted and not yet read.
    pub(crate) plain: VecDeque<PooledBytes>,
    pool: BufferPool,
    /// The peer's `close_notify` has been processed: no more application data comes.
    pub(crate) peer_closed: bool,
}

impl<C: Unbuffered> Session<C> {
    pub(crate) fn new(conn: C, pool: BufferPool) -> Self {
        Session {
            conn,
            records: ReadBuffer::new(pool.clone()).max_len(MAX_PENDING),
            out: Outgoing::new(pool.clone()),
            plain: VecDeque::new(),
            pool,
            peer_closed: false,
        }
    }

    /// Drives rustls over the records received until `intent` is carried out or rustls
    /// needs more records. Application data goes into `sink` as far as it has room, the rest
    /// into [`plain`](Self::plain); handshake messages, alerts and answers rustls encodes go
    /// into [`out`](Self::out). A `Read` stops once data was delivered and the sink is full
    /// (or there is none); any other intent processes every record there is first.
    ///
    /// # Errors
    /// rustls' error for the connection (a bad record, a failed handshake, an alert from the
    /// peer); the alert rustls answers with is in `out`.
    pub(crate) fn advance(
        &mut self,
        mut intent: Intent<'_>,
        mut sink: Option<&mut ReadBuf<'_>>,
    ) -> Result<Step, rustls::Error> {
        let mut delivered = false;
        loop {
            let Session {
                conn,
                records,
                out,
                plain,
                pool,
                peer_closed,
            } = self;
            // No view of the records is ever split off, so this moves nothing.
            let input = records
                .unread_mut()
                .expect("no view of the records is alive");
            let UnbufferedStatus { mut discard, state } = conn.process(input);
            let step = match state {
                Err(e) => Err(e),
                Ok(ConnectionState::ReadTraffic(mut traffic)) => {
                    let mut failed = None;
                    while let Some(record) = traffic.next_record() {
                        match record {
                            Ok(record) => {
                                discard += record.discard;
                                deliver(record.payload, sink.as_deref_mut(), plain, pool);
                                delivered = true;
                            }
                            Err(e) => {
                                failed = Some(e);
                                break;
                            }
                        }
                    }
                    let sink_full = sink.as_ref().is_none_or(|s| s.remaining() == 0);
                    // A read stops once it has data; the end of a handshake at the first
                    // application data after it (what follows is the reads' to process).
                    let stop = match intent {
                        Intent::Read => sink_full || !plain.is_empty(),
                        Intent::Settle => !conn.is_handshaking(),
                        _ => false,
                    };
                    match failed {
                        Some(e) => Err(e),
                        None if !stop => Ok(None),
                        None if matches!(intent, Intent::Read) => Ok(Some(Step::Delivered)),
                        None => Ok(Some(Step::Done)),
                    }
                }
                Ok(ConnectionState::EncodeTlsData(mut encode)) => {
                    let need = match encode.encode(&mut []) {
                        Err(EncodeError::InsufficientSize(e)) => e.required_size,
                        _ => 0,
                    };
                    out.append(need, |room| encode.encode(room))
                        .map(|_| None)
                        .map_err(|e| rustls::Error::General(e.to_string()))
                }
                Ok(ConnectionState::TransmitTlsData(transmit)) => {
                    // The records are in `out`, written in order by the stream's I/O.
                    transmit.done();
                    Ok(None)
                }
                Ok(ConnectionState::BlockedHandshake) => Ok(Some(Step::NeedInput)),
                Ok(ConnectionState::PeerClosed) => {
                    *peer_closed = true;
                    Ok(None)
                }
                Ok(ConnectionState::Closed) => {
                    *peer_closed = true;
                    Ok(Some(Step::Closed))
                }
                Ok(ConnectionState::WriteTraffic(mut traffic)) => match intent {
                    Intent::Read if delivered => Ok(Some(Step::Delivered)),
                    Intent::Read => Ok(Some(Step::NeedInput)),
                    Intent::Settle => Ok(Some(Step::Done)),
                    Intent::Write { data, room } => {
                        sealed(out.append(room, |r| traffic.encrypt(data, r)))
                    }
                    Intent::CloseNotify { room } => {
                        sealed(out.append(room, |r| traffic.queue_close_notify(r)))
                    }
                    Intent::KeyUpdate => match traffic.refresh_traffic_keys() {
                        // The next pass encodes the `key_update` into `out`.
                        Ok(()) => {
                            intent = Intent::Settle;
                            Ok(None)
                        }
                        Err(e) => Ok(Some(Step::Refused(e))),
                    },
                },
                Ok(ConnectionState::ReadEarlyData(_)) => Err(rustls::Error::General(
                    "TLS 1.3 early data arrived, which this stream does not read".into(),
                )),
                Ok(other) => Err(rustls::Error::General(format!(
                    "a rustls state this stream does not know: {other:?}"
                ))),
            };
            records.advance(discard);
            match step {
                Ok(None) => continue,
                Ok(Some(step)) => return Ok(step),
                Err(e) => {
                    self.encode_alert();
                    return Err(e);
                }
            }
        }
    }

    /// After an error: the alert rustls queued, into `out` (the stream writes it where the
    /// socket takes it). rustls hands queued records out before it looks at the input, so
    /// nothing is processed again.
    fn encode_alert(&mut self) {
        while self.conn.wants_write() {
            let Session {
                conn, records, out, ..
            } = self;
            let Ok(input) = records.unread_mut() else {
                return;
            };
            let UnbufferedStatus { discard, state } = conn.process(input);
            let encoded = match state {
                Ok(ConnectionState::EncodeTlsData(mut encode)) => {
                    let need = match encode.encode(&mut []) {
                        Err(EncodeError::InsufficientSize(e)) => e.required_size,
                        _ => 0,
                    };
                    out.append(need, |room| encode.encode(room)).is_ok()
                }
                _ => false,
            };
            records.advance(discard);
            if !encoded {
                return;
            }
        }
    }
}

/// An encryption's outcome as a step.
fn sealed(got: Result<usize, EncryptError>) -> Result<Option<Step>, rustls::Error> {
    match got {
        Ok(_) => Ok(Some(Step::Done)),
        Err(EncryptError::InsufficientSize(e)) => Ok(Some(Step::NeedRoom(e.required_size))),
        Err(e) => Err(rustls::Error::General(e.to_string())),
    }
}

/// A record's application data: into `sink` as far as it has room, the rest copied into a
/// pooled buffer queued in `plain` (from the heap under a budget with no room now: the data
/// is decrypted already, and rustls' copy of it is heap memory too).
fn deliver(
    payload: &[u8],
    sink: Option<&mut ReadBuf<'_>>,
    plain: &mut VecDeque<PooledBytes>,
    pool: &BufferPool,
) {
    let mut rest = payload;
    if let Some(dst) = sink {
        let n = rest.len().min(dst.remaining());
        dst.put_slice(&rest[..n]);
        rest = &rest[n..];
    }
    if rest.is_empty() {
        return;
    }
    let view = match pool.try_get_exact(rest.len()) {
        Ok(mut buf) => {
            buf.extend_from_slice(rest);
            buf.into_shared()
        }
        Err(_) => PooledBytes::from(rest.to_vec()),
    };
    plain.push_back(view);
}
