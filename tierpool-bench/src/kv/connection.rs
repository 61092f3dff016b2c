//! One connection: commands read through the mode's framing, replies written through it.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::{FutureExt, Sink, SinkExt, Stream, StreamExt};
use tokio::net::TcpStream;

use super::resp::{ProtocolError, Reply, Resp, MAX_FRAME};
use super::server::Server;
use super::tls::{self, Acceptor};
use super::{Framing, Mode};

/// Serves `socket` (over TLS, given an acceptor) until its peer closes it or sends what
/// cannot be read.
pub(super) async fn connection(server: Arc<Server>, tls: Option<Arc<Acceptor>>, socket: TcpStream) {
    let _ = socket.set_nodelay(true);
    server.connections.fetch_add(1, Ordering::Relaxed);
    let served = match tls {
        None => {
            let (read, write) = socket.into_split();
            serve_halves(&server, read, write).await
        }
        Some(acceptor) => match acceptor.handshake(socket).await {
            Ok(tls::Stream::Pooled(s)) => {
                let (read, write) = tokio::io::split(s);
                serve_halves(&server, read, write).await
            }
            Ok(tls::Stream::Baseline(s)) => {
                let (read, write) = tokio::io::split(s);
                serve_halves(&server, read, write).await
            }
            Err(e) => Err(e.into()),
        },
    };
    if let Err(e) = served {
        if std::env::var_os("KV_SERVER_VERBOSE").is_some() {
            eprintln!("connection closed: {e}");
        }
    }
    server.connections.fetch_sub(1, Ordering::Relaxed);
}

/// Serves one connection over `read` and `write`, the halves of a socket or a TLS stream:
/// the same codec in tierpool's framing (pooled) or tokio-util's (baseline), or with
/// `--framing connection` the same parser in mini-redis's shape (`buffered.rs`).
pub(super) async fn serve_halves<R, W>(
    server: &Server,
    read: R,
    write: W,
) -> Result<(), ProtocolError>
where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    if server.framing == Framing::Connection {
        return super::buffered::serve(server, read, write).await;
    }
    match server.mode {
        Mode::Pooled => {
            let frames =
                tierpool::io::codec::FramedRead::new(read, Resp::default(), server.pool.clone())
                    .max_frame_len(MAX_FRAME);
            let sink =
                tierpool::io::codec::FramedWrite::new(write, Resp::default(), server.pool.clone());
            serve(server, frames, sink).await
        }
        Mode::Baseline => {
            let frames = tokio_util::codec::FramedRead::new(read, Resp::default());
            let sink = tokio_util::codec::FramedWrite::new(write, Resp::default());
            serve(server, frames, sink).await
        }
    }
}

/// Commands from `frames`, replies through `sink`, flushed when no further command is
/// buffered (pipelined commands get their replies in one write).
async fn serve<F, S>(server: &Server, mut frames: F, mut sink: S) -> Result<(), ProtocolError>
where
    F: Stream<Item = Result<Vec<Bytes>, ProtocolError>> + Unpin,
    S: Sink<Reply, Error = ProtocolError> + Unpin,
{
    let mut next = frames.next().await;
    while let Some(command) = next {
        match command {
            Ok(args) => sink.feed(server.execute(&args)).await?,
            Err(e) => {
                // A frame it cannot read: say so, and close the connection.
                let _ = sink.send(Reply::Error(format!("ERR {e}"))).await;
                return Err(e);
            }
        }
        // More commands already here? Answer them before writing.
        next = match frames.next().now_or_never() {
            Some(more) => more,
            None => {
                sink.flush().await?;
                frames.next().await
            }
        };
    }
    sink.flush().await?;
    Ok(())
}
