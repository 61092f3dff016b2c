//! `--framing connection`: mini-redis's `Connection` shape, in both modes. A read buffer, the
//! parser over its unread bytes, replies written through a buffered writer; the port the crate
//! docs give (`tierpool::io`, *Porting a protocol server*) changes the buffer and the writer
//! and nothing else:
//!
//! - baseline: a `BytesMut` of 4 KiB filled by `read_buf` (grown by large frames, kept), and
//!   tokio's `BufWriter` (8 KiB, kept);
//! - pooled: `tierpool::io::ReadBuffer` and `tierpool::io::BufWriter` (held while bytes are
//!   unread or unwritten).

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::resp::{ProtocolError, Reply, Resp};
use super::server::Server;
use super::Mode;

/// A read buffer the parser reads from: what differs between the two modes.
trait ReadSide {
    /// Reads once from `from` into the buffer; 0 at the end of the stream.
    async fn fill<R: AsyncRead + Unpin>(&mut self, from: &mut R) -> std::io::Result<usize>;
    fn unread(&self) -> &[u8];
    fn advance(&mut self, n: usize);
}

impl ReadSide for BytesMut {
    async fn fill<R: AsyncRead + Unpin>(&mut self, from: &mut R) -> std::io::Result<usize> {
        from.read_buf(self).await
    }
    fn unread(&self) -> &[u8] {
        self
    }
    fn advance(&mut self, n: usize) {
        Buf::advance(self, n);
    }
}

impl ReadSide for tierpool::io::ReadBuffer {
    async fn fill<R: AsyncRead + Unpin>(&mut self, from: &mut R) -> std::io::Result<usize> {
        self.read_from(from).await
    }
    fn unread(&self) -> &[u8] {
        tierpool::io::ReadBuffer::unread(self)
    }
    fn advance(&mut self, n: usize) {
        tierpool::io::ReadBuffer::advance(self, n);
    }
}

/// Serves one connection over `read` and `write` in mini-redis's shape, the buffer and the
/// writer of `server.mode`.
pub(super) async fn serve<R, W>(server: &Server, read: R, write: W) -> Result<(), ProtocolError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    match server.mode {
        Mode::Baseline => {
            let input = BytesMut::with_capacity(4 << 10);
            let output = tokio::io::BufWriter::new(write);
            run(server, read, input, output).await
        }
        Mode::Pooled => {
            let input = tierpool::io::ReadBuffer::new(server.pool.clone());
            let output = tierpool::io::BufWriter::new(write, server.pool.clone());
            run(server, read, input, output).await
        }
    }
}

/// Reads commands into `input` and answers each through `output`, flushed once no complete
/// command is left in the buffer (pipelined commands get their replies in one write).
async fn run<R, B, W>(
    server: &Server,
    mut read: R,
    mut input: B,
    mut output: W,
) -> Result<(), ProtocolError>
where
    R: AsyncRead + Unpin,
    B: ReadSide,
    W: AsyncWrite + Unpin,
{
    let mut parser = Resp::default();
    loop {
        match parser.parse(input.unread()) {
            Ok(Some((args, used))) => {
                input.advance(used);
                write_reply(&mut output, server.execute(&args)).await?;
                continue;
            }
            Ok(None) => {}
            Err(e) => {
                let _ = write_reply(&mut output, Reply::Error(format!("ERR {e}"))).await;
                let _ = output.flush().await;
                return Err(e);
            }
        }
        output.flush().await?;
        if input.fill(&mut read).await? == 0 {
            return match input.unread().is_empty() {
                true => Ok(()),
                false => Err(ProtocolError("connection reset by peer".into())),
            };
        }
    }
}

/// Writes `reply` as mini-redis writes a frame: a bulk value straight from its bytes, anything
/// else encoded first (replies other than values are a few bytes).
async fn write_reply<W: AsyncWrite + Unpin>(out: &mut W, reply: Reply) -> std::io::Result<()> {
    if let Reply::Bulk(Some(value)) = &reply {
        out.write_all(format!("${}\r\n", value.len()).as_bytes())
            .await?;
        out.write_all(value).await?;
        return out.write_all(b"\r\n").await;
    }
    let mut encoded = BytesMut::new();
    tokio_util::codec::Encoder::encode(&mut Resp::default(), reply, &mut encoded)
        .map_err(|e| std::io::Error::other(e.0))?;
    out.write_all(&encoded).await
}
