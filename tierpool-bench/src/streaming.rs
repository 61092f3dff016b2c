//! A loopback streaming server and client on tierpool's frame reader and writer (seed 003:
//! gRPC-Go's streaming benchmark, `-workloads=streaming -maxConcurrentCalls=150
//! -reqSizeBytes=1048576 -respSizeBytes=1048576 -networkMode=Local`).
//!
//! The client opens `conns` connections and runs `streams` concurrent streams (tasks) over
//! them; each stream sends a request of `req` bytes and awaits a response of `resp` bytes, again
//! and again. Streams share a connection through a writer task (requests) and a reader task
//! that hands each response to its stream by id, so a received buffer is taken on the reader's
//! worker thread and dropped on the stream's, often another.
//!
//! What varies is how *received* frames are stored, on both sides ([`Strategy`]). Sending is
//! the same for every strategy and allocates nothing: a header, the stream id, and a slice of a
//! shared pattern, in one vectored write.
//!
//! Message payload: `[stream id: u64 BE][pattern bytes]`, framed with gRPC's 5-byte header.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use futures_util::StreamExt;
use hdrhistogram::Histogram;
use tierpool::io::frame::{FrameError, FrameFormat, FrameReader, Grpc};
use tierpool::{BufferPool, PooledBuf, PooledBytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::{FramedRead, LengthDelimitedCodec};

/// Largest frame either side accepts.
pub const MAX_FRAME: usize = 16 << 20;

crate::choices! {
    /// How received frames are stored.
    pub enum Strategy {
        /// A fresh `Vec` of the frame's length per message.
        NoPool => (
            "no-pool",
            "no pool",
            "receive: Vec::with_capacity(frame length) per message, payload read straight into it",
        ),
        /// `tokio_util`'s `FramedRead` with `LengthDelimitedCodec`: one `BytesMut` read buffer
        /// per connection, frames split off it.
        BytesMut => (
            "bytesmut",
            "BytesMut (Framed)",
            "receive: tokio_util FramedRead + LengthDelimitedCodec (one BytesMut read buffer per connection, frames split off it)",
        ),
        /// tierpool's `FrameReader`: each payload read straight into a `PooledBuf`.
        Pooled => (
            "pooled",
            "tierpool",
            "receive: tierpool::io::frame::FrameReader, payload read straight into a PooledBuf (BufferPool::new())",
        ),
        /// As `Pooled`, turned into a shared `PooledBytes` (what a stream would pass around).
        Shared => (
            "shared",
            "tierpool PooledBytes",
            "receive: as tierpool, then PooledBuf::into_shared (PooledBytes, recycled control block)",
        ),
    }
}

/// A received payload, however it was stored.
#[derive(Debug)]
pub enum Msg {
    /// [`Strategy::NoPool`].
    Vec(Vec<u8>),
    /// [`Strategy::BytesMut`].
    BytesMut(BytesMut),
    /// [`Strategy::Pooled`].
    Pooled(PooledBuf),
    /// [`Strategy::Shared`].
    Shared(PooledBytes),
}

impl Msg {
    /// The payload.
    pub fn as_slice(&self) -> &[u8] {
        match self {
            Msg::Vec(v) => v,
            Msg::BytesMut(b) => b,
            Msg::Pooled(p) => p,
            Msg::Shared(s) => s,
        }
    }
}

/// Reads frames with one strategy.
pub enum Receiver<R> {
    /// Fresh `Vec`s.
    NoPool(R),
    /// `FramedRead`.
    BytesMut(Box<FramedRead<R, LengthDelimitedCodec>>),
    /// tierpool (`shared`: into `PooledBytes`).
    Pooled(FrameReader<R>, bool),
}

impl<R> std::fmt::Debug for Receiver<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Receiver")
    }
}

impl<R: AsyncRead + Unpin> Receiver<R> {
    /// A receiver over `io`.
    pub fn new(strategy: Strategy, io: R, pool: &BufferPool) -> Self {
        match strategy {
            Strategy::NoPool => Receiver::NoPool(io),
            Strategy::BytesMut => Receiver::BytesMut(Box::new(FramedRead::new(
                io,
                LengthDelimitedCodec::builder()
                    .length_field_offset(1)
                    .length_field_length(4)
                    .num_skip(Grpc::HEADER_LEN)
                    .max_frame_length(MAX_FRAME)
                    .new_codec(),
            ))),
            Strategy::Pooled | Strategy::Shared => Receiver::Pooled(
                FrameReader::new(io, pool.clone()).max_frame_size(MAX_FRAME),
                strategy == Strategy::Shared,
            ),
        }
    }

    /// The next payload, or `None` at a clean end of stream.
    ///
    /// # Errors
    /// Transport errors and malformed frames.
    pub async fn recv(&mut self) -> Result<Option<Msg>, FrameError> {
        match self {
            Receiver::NoPool(io) => {
                let mut header = [0u8; Grpc::HEADER_LEN];
                match io.read_exact(&mut header).await {
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
                    Err(e) => return Err(e.into()),
                }
                let (_, len) = Grpc.decode(&header)?;
                if len > MAX_FRAME as u64 {
                    return Err(FrameError::TooLarge {
                        len,
                        max: MAX_FRAME,
                    });
                }
                let len = len as usize;
                let mut v = Vec::with_capacity(len);
                while v.len() < len {
                    let rest = len - v.len();
                    if io.read_buf(&mut bytes::BufMut::limit(&mut v, rest)).await? == 0 {
                        return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
                    }
                }
                Ok(Some(Msg::Vec(v)))
            }
            Receiver::BytesMut(framed) => match framed.next().await {
                None => Ok(None),
                Some(Ok(b)) => Ok(Some(Msg::BytesMut(b))),
                Some(Err(e)) => Err(e.into()),
            },
            Receiver::Pooled(reader, false) => {
                Ok(reader.read_frame().await?.map(|(_, b)| Msg::Pooled(b)))
            }
            Receiver::Pooled(reader, true) => Ok(reader
                .read_frame_shared()
                .await?
                .map(|(_, b)| Msg::Shared(b))),
        }
    }
}

/// The byte at offset `i` of every payload's pattern part.
#[inline]
fn pattern_byte(i: usize) -> u8 {
    (i % 251) as u8
}

/// A pattern of `len` bytes, shared by every message.
pub fn pattern(len: usize) -> Arc<[u8]> {
    (0..len).map(pattern_byte).collect()
}

/// Writes one message (`id` then `body`) as a frame of `8 + body.len()` bytes, in one vectored
/// write; allocates nothing.
///
/// # Errors
/// Transport errors.
pub async fn send<W: AsyncWrite + Unpin>(
    w: &mut W,
    id: u64,
    body: &[u8],
) -> Result<(), FrameError> {
    let mut header = [0u8; Grpc::HEADER_LEN];
    Grpc.encode(0, 8 + body.len(), &mut header)?;
    let id = id.to_be_bytes();
    let mut all = Buf::chain(Buf::chain(&header[..], &id[..]), body);
    w.write_all_buf(&mut all).await?;
    Ok(())
}

/// Checks a received payload: its length, and its pattern at a few places. Returns its id.
///
/// # Panics
/// If the payload is corrupt (the benchmark must not measure wrong answers).
pub fn check(msg: &[u8], len: usize) -> u64 {
    assert_eq!(msg.len(), len, "payload length");
    let id = u64::from_be_bytes(msg[..8].try_into().expect("8 bytes"));
    let body = &msg[8..];
    for i in [0, body.len() / 2, body.len().saturating_sub(1)] {
        if i < body.len() {
            assert_eq!(body[i], pattern_byte(i), "payload corrupt at {i}");
        }
    }
    id
}

/// Server: accepts connections until `stop` and answers every request with a response of
/// `resp` bytes carrying the request's id.
pub async fn serve(
    listener: TcpListener,
    strategy: Strategy,
    pool: BufferPool,
    req: usize,
    resp: usize,
) {
    let body: Arc<[u8]> = pattern(resp - 8);
    loop {
        let Ok((sock, _)) = listener.accept().await else {
            return;
        };
        let _ = sock.set_nodelay(true);
        let (rd, mut wr) = sock.into_split();
        let (tx, mut rx) = mpsc::channel::<(u64, Msg)>(256);
        let mut receiver = Receiver::new(strategy, rd, &pool);
        tokio::spawn(async move {
            while let Ok(Some(msg)) = receiver.recv().await {
                let id = check(msg.as_slice(), req);
                if tx.send((id, msg)).await.is_err() {
                    return;
                }
            }
        });
        let body = body.clone();
        tokio::spawn(async move {
            while let Some((id, request)) = rx.recv().await {
                // The request lives until its response is written, as it would in a server
                // that processes it; then it is dropped on this task's thread.
                if send(&mut wr, id, &body).await.is_err() {
                    return;
                }
                drop(request);
            }
        });
    }
}

/// What a client run measured.
#[derive(Debug)]
pub struct ClientResult {
    /// Round trips completed in the measured window.
    pub round_trips: u64,
    /// Length of the measured window.
    pub elapsed: Duration,
    /// Round-trip latencies in microseconds.
    pub latency_us: Histogram<u64>,
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Msg>>>>;

/// Opens `conns` connections to `addr`, each with a writer task (sending the requests whose
/// ids come through its channel) and a reader task (handing each response to the stream
/// waiting for its id).
async fn connect(
    addr: SocketAddr,
    strategy: Strategy,
    pool: &BufferPool,
    conns: usize,
    streams: usize,
    req: usize,
    resp: usize,
) -> (Vec<mpsc::Sender<u64>>, Vec<Pending>) {
    let body: Arc<[u8]> = pattern(req - 8);
    let mut senders = Vec::new();
    let mut pendings = Vec::new();
    for _ in 0..conns {
        let sock = TcpStream::connect(addr).await.expect("connect");
        let _ = sock.set_nodelay(true);
        let (rd, mut wr) = sock.into_split();
        let pending: Pending = Arc::new(Mutex::new(HashMap::new()));
        let (tx, mut rx) = mpsc::channel::<u64>(streams.max(1));
        let body = body.clone();
        tokio::spawn(async move {
            while let Some(id) = rx.recv().await {
                if send(&mut wr, id, &body).await.is_err() {
                    return;
                }
            }
        });
        let mut receiver = Receiver::new(strategy, rd, pool);
        let p = pending.clone();
        tokio::spawn(async move {
            while let Ok(Some(msg)) = receiver.recv().await {
                let id = check(msg.as_slice(), resp);
                let waiter = p.lock().expect("pending").remove(&id);
                if let Some(w) = waiter {
                    let _ = w.send(msg);
                }
            }
        });
        senders.push(tx);
        pendings.push(pending);
    }
    (senders, pendings)
}

/// The client's measured window, shared by its streams.
#[derive(Clone)]
struct Window {
    /// The warm-up's end and the window's.
    measure_from: Instant,
    end: Instant,
    /// Set while the caller measures (from `measure_from` on).
    counting: Arc<AtomicBool>,
    /// Round trips counted.
    done: Arc<AtomicU64>,
}

/// Stream `s`: one request at a time until the window's end, each response checked; the
/// round trips in the window go into its histogram and the window's count.
async fn ping_pong(
    s: usize,
    tx: mpsc::Sender<u64>,
    pending: Pending,
    resp: usize,
    w: Window,
) -> Histogram<u64> {
    let mut hist = Histogram::<u64>::new(3).expect("histogram");
    let mut seq = 0u64;
    loop {
        let now = Instant::now();
        if now >= w.end {
            return hist;
        }
        let id = ((s as u64) << 32) | seq;
        seq += 1;
        let (wtx, wrx) = oneshot::channel();
        pending.lock().expect("pending").insert(id, wtx);
        tx.send(id).await.expect("connection writer");
        let msg = wrx.await.expect("response");
        assert_eq!(
            check(msg.as_slice(), resp),
            id,
            "response for another stream"
        );
        drop(msg); // on this task's thread: often not the reader's
        if now >= w.measure_from && w.counting.load(Relaxed) {
            let _ = hist.record(now.elapsed().as_micros() as u64);
            w.done.fetch_add(1, Relaxed);
        }
    }
}

/// Client: `streams` streams over `conns` connections to `addr`, for `warmup` (not measured)
/// and then `duration` (measured).
///
/// # Panics
/// If the server misbehaves (wrong ids, corrupt payloads) or the connection fails.
#[allow(clippy::too_many_arguments)]
pub async fn run_client(
    addr: SocketAddr,
    strategy: Strategy,
    pool: BufferPool,
    conns: usize,
    streams: usize,
    req: usize,
    resp: usize,
    warmup: Duration,
    duration: Duration,
    measuring: impl Fn(bool) + Send + 'static,
) -> ClientResult {
    let (senders, pendings) = connect(addr, strategy, &pool, conns, streams, req, resp).await;
    let measure_from = Instant::now() + warmup;
    let w = Window {
        measure_from,
        end: measure_from + duration,
        counting: Arc::new(AtomicBool::new(false)),
        done: Arc::new(AtomicU64::new(0)),
    };
    let mut tasks = Vec::new();
    for s in 0..streams {
        let tx = senders[s % conns].clone();
        let pending = pendings[s % conns].clone();
        tasks.push(tokio::spawn(ping_pong(s, tx, pending, resp, w.clone())));
    }
    tokio::time::sleep_until(w.measure_from.into()).await;
    measuring(true);
    w.counting.store(true, Relaxed);
    let window = Instant::now();
    tokio::time::sleep_until(w.end.into()).await;
    let elapsed = window.elapsed();
    let round_trips = w.done.load(Relaxed);
    measuring(false);
    let mut latency = Histogram::<u64>::new(3).expect("histogram");
    for t in tasks {
        latency
            .add(t.await.expect("stream task"))
            .expect("same histogram bounds");
    }
    ClientResult {
        round_trips,
        elapsed,
        latency_us: latency,
    }
}
