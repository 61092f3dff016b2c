//! RESP2 for the server's side: commands parsed (arrays of bulk strings, or inline), replies
//! encoded. One parser and encoder: as a tokio-util `Decoder` and `Encoder`, run unchanged by
//! tokio-util's framing and by tierpool's, and as a parser over a read buffer's bytes
//! (`buffered.rs`).

use std::io;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

/// The largest frame (and bulk string) accepted: Redis's `proto-max-bulk-len`.
pub(super) const MAX_FRAME: usize = 512 << 20;

/// The longest inline command (`PING\r\n` typed at a terminal) accepted.
const MAX_INLINE: usize = 64 << 10;

/// A RESP2 reply.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Reply {
    Simple(&'static str),
    Error(String),
    Integer(i64),
    Bulk(Option<Bytes>),
    Array(Vec<Reply>),
}

/// The codec. Resumable: a command that arrives in pieces is scanned once, not from its start
/// at every piece (its state is offsets into the unread bytes, which the framing may move).
#[derive(Debug, Default)]
pub(super) struct Resp {
    /// The current command's arguments so far, as `(start, end)` offsets into the buffer.
    args: Vec<(usize, usize)>,
    /// The argument count its header announced, once read.
    count: Option<usize>,
    /// Where parsing resumes.
    pos: usize,
}

/// A frame the decoder refuses (the connection is closed after it), or the connection's error.
#[derive(Debug)]
pub(super) struct ProtocolError(pub(super) String);

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "protocol error: {}", self.0)
    }
}

impl std::error::Error for ProtocolError {}

impl From<io::Error> for ProtocolError {
    fn from(e: io::Error) -> Self {
        ProtocolError(e.to_string())
    }
}

/// The line (without `\r\n`) starting at `from`, and where the next begins.
fn line(buf: &[u8], from: usize) -> Option<(&[u8], usize)> {
    let rest = buf.get(from..)?;
    let end = rest.windows(2).position(|w| w == b"\r\n")?;
    Some((&rest[..end], from + end + 2))
}

fn number(digits: &[u8]) -> Result<i64, ProtocolError> {
    std::str::from_utf8(digits)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| {
            ProtocolError(format!(
                "not a number: {:?}",
                String::from_utf8_lossy(digits)
            ))
        })
}

impl Resp {
    /// The next command in `buf` (a read buffer's unread bytes) and how many bytes it took,
    /// or `None` until it has all arrived: the parser whichever buffer the bytes are in
    /// (tokio-util's `Decoder` below, or mini-redis's `Connection` shape in `buffered.rs`).
    pub(super) fn parse(
        &mut self,
        buf: &[u8],
    ) -> Result<Option<(Vec<Bytes>, usize)>, ProtocolError> {
        if buf.is_empty() {
            return Ok(None);
        }
        if buf[0] != b'*' {
            return Self::inline(buf);
        }
        if self.count.is_none() {
            let Some((n, next)) = line(buf, 0) else {
                return Ok(None);
            };
            let n = number(&n[1..])?;
            if !(0..=1 << 20).contains(&n) {
                return Err(ProtocolError(format!("bad argument count {n}")));
            }
            self.count = Some(n as usize);
            self.pos = next;
        }
        let count = self.count.unwrap_or(0);
        while self.args.len() < count {
            let Some((head, next)) = line(buf, self.pos) else {
                return Ok(None);
            };
            if head.first() != Some(&b'$') {
                return Err(ProtocolError("expected a bulk string".into()));
            }
            let len = number(&head[1..])?;
            if !(0..=MAX_FRAME as i64).contains(&len) {
                return Err(ProtocolError(format!("bad bulk length {len}")));
            }
            let end = next + len as usize;
            if buf.len() < end + 2 {
                return Ok(None); // the bulk is not all here; resume at its header
            }
            if &buf[end..end + 2] != b"\r\n" {
                return Err(ProtocolError("a bulk string without its CRLF".into()));
            }
            self.args.push((next, end));
            self.pos = end + 2;
        }
        // Copied out (as mini-redis and Redis do): the read buffer goes back once drained.
        let command = self
            .args
            .drain(..)
            .map(|(s, e)| Bytes::copy_from_slice(&buf[s..e]))
            .collect();
        let used = self.pos;
        self.count = None;
        self.pos = 0;
        Ok(Some((command, used)))
    }

    /// An inline command: words up to the end of the line.
    fn inline(buf: &[u8]) -> Result<Option<(Vec<Bytes>, usize)>, ProtocolError> {
        let Some((text, next)) = line(buf, 0) else {
            if buf.len() > MAX_INLINE {
                return Err(ProtocolError("inline command too long".into()));
            }
            return Ok(None);
        };
        let words = text
            .split(|b| b.is_ascii_whitespace())
            .filter(|w| !w.is_empty())
            .map(Bytes::copy_from_slice)
            .collect();
        Ok(Some((words, next)))
    }
}

impl Decoder for Resp {
    type Item = Vec<Bytes>;
    type Error = ProtocolError;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        let Some((command, used)) = self.parse(buf)? else {
            return Ok(None);
        };
        buf.advance(used);
        Ok(Some(command))
    }
}

impl Encoder<Reply> for Resp {
    type Error = ProtocolError;

    fn encode(&mut self, reply: Reply, out: &mut BytesMut) -> Result<(), ProtocolError> {
        match reply {
            Reply::Simple(s) => {
                out.put_u8(b'+');
                out.put_slice(s.as_bytes());
            }
            Reply::Error(e) => {
                out.put_u8(b'-');
                out.put_slice(e.as_bytes());
            }
            Reply::Integer(i) => {
                out.put_slice(format!(":{i}").as_bytes());
            }
            Reply::Bulk(None) => out.put_slice(b"$-1"),
            Reply::Bulk(Some(b)) => {
                out.put_slice(format!("${}\r\n", b.len()).as_bytes());
                out.put_slice(&b);
            }
            Reply::Array(items) => {
                out.put_slice(format!("*{}\r\n", items.len()).as_bytes());
                for item in items {
                    self.encode(item, out)?;
                }
                return Ok(());
            }
        }
        out.put_slice(b"\r\n");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(input: &[u8]) -> Result<Vec<Vec<Bytes>>, ProtocolError> {
        let mut codec = Resp::default();
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        // One byte at a time: every command arrives in pieces.
        for &b in input {
            buf.put_u8(b);
            while let Some(c) = codec.decode(&mut buf)? {
                out.push(c);
            }
        }
        Ok(out)
    }

    #[test]
    fn commands_in_pieces_arrays_and_inline() {
        let got = decode_all(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING  hi\r\n*0\r\n").unwrap();
        assert_eq!(
            got,
            vec![
                vec![Bytes::from("GET"), Bytes::from("k")],
                vec![Bytes::from("PING"), Bytes::from("hi")],
                vec![],
            ]
        );
    }

    #[test]
    fn bad_frames_are_errors() {
        for bad in [
            &b"*x\r\n"[..],
            b"*1\r\n+OK\r\n",
            b"*1\r\n$-2\r\n",
            b"*1\r\n$1\r\nab\r\n",
            b"*2000000\r\n",
        ] {
            assert!(
                decode_all(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        // An inline command without its end, longer than the limit (in one piece).
        let mut long = BytesMut::from(&vec![b'a'; MAX_INLINE + 2][..]);
        assert!(Resp::default().decode(&mut long).is_err());
    }

    #[test]
    fn replies_encode_as_resp2() {
        let mut out = BytesMut::new();
        let reply = Reply::Array(vec![
            Reply::Simple("OK"),
            Reply::Error("ERR x".into()),
            Reply::Integer(-3),
            Reply::Bulk(None),
            Reply::Bulk(Some(Bytes::from("v"))),
        ]);
        Resp::default().encode(reply, &mut out).unwrap();
        assert_eq!(
            &out[..],
            b"*5\r\n+OK\r\n-ERR x\r\n:-3\r\n$-1\r\n$1\r\nv\r\n"
        );
    }
}
