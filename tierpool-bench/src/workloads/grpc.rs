//! `grpc` (modelled on gRPC-Go's shared receive buffers and its benchmark: 150 concurrent
//! streams ping-ponging 1 MiB messages on one connection): grpc's own benchmark service on
//! tonic, stock against pooled (`grpc_server --mode stock|pooled`), driven from this process by
//! one tonic client (tonic's generated client, its own prost codec) for both modes.
//!
//! `TIERPOOL_GRPC_SECS` sets each throughput row's measured window in whole seconds (4 s by
//! default, 300 ms with `--quick`, which it overrides too): at 1 MiB x 150 streams each stream
//! makes only a few round trips a second, so the default window's p99 rests on its few slowest
//! round trips, and a longer window tells this machine's noise from a difference.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use tonic::transport::Channel;

use super::{size_label, Ctx, Entry};
use crate::fixtures::grpc::stock::benchmark_service_client::BenchmarkServiceClient;
use crate::fixtures::grpc::{Payload, SimpleRequest, SimpleResponse};
use crate::harness::record::{Output, Record};
use crate::harness::server_child::ChildServer;
use crate::harness::procfs::Proc;

/// The server's two modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Stock,
    Pooled,
    /// The pooled server with `UnaryCall` through `PooledMethods::unary` (the unary row only).
    UnaryReader,
    /// The pooled server under a 64 MiB budget (the seed's shape only).
    Budget,
}

impl Mode {
    const ALL: [Mode; 2] = [Mode::Stock, Mode::Pooled];
    /// The unary row's contenders: the codec, and the pooled reader a unary method may use.
    const UNARY: [Mode; 3] = [Mode::Stock, Mode::Pooled, Mode::UnaryReader];
    /// The seed's shape's contenders: also the pooled server under a budget.
    const SEED: [Mode; 3] = [Mode::Stock, Mode::Pooled, Mode::Budget];
    /// Every contender, in report order.
    const EVERY: [Mode; 4] = [Mode::Stock, Mode::Pooled, Mode::UnaryReader, Mode::Budget];

    /// `grpc_server`'s arguments for the mode.
    fn args(self) -> &'static [&'static str] {
        match self {
            Mode::Stock => &["--mode", "stock"],
            Mode::Pooled => &["--mode", "pooled"],
            Mode::UnaryReader => &["--mode", "pooled", "--unary", "reader"],
            Mode::Budget => &["--mode", "pooled", "--budget-mib", "64"],
        }
    }

    fn label(self) -> &'static str {
        match self {
            Mode::Stock => "tonic",
            Mode::Pooled => "tonic + tierpool",
            Mode::UnaryReader => "tonic + tierpool, PooledMethods::unary",
            Mode::Budget => "tonic + tierpool, 64 MiB budget",
        }
    }

    fn setup(self) -> &'static str {
        match self {
            Mode::Stock => "grpc workload: grpc_server --mode stock: tonic 0.14 as generated with tonic_prost::ProstCodec (a Streaming<T> per request stream, its BytesMut grown to the largest message)",
            Mode::Pooled => "grpc workload: grpc_server --mode pooled: the generated service with tierpool_tonic::PooledCodec (unary, server-streaming) and PooledMethods (client-streaming, bidi): messages read into the default pool's buffers, nothing held between them; responses from pooled buffers",
            Mode::UnaryReader => "grpc workload, the unary row: grpc_server --mode pooled --unary reader: UnaryCall through PooledMethods::unary (the pooled reader and body: the request copied once, from h2's frames into a pooled buffer) instead of the codec",
            Mode::Budget => "grpc workload, the seed's shape: grpc_server --mode pooled --budget-mib 64: the pooled server with every stream's messages under one 64 MiB budget on bytes in use (a message's buffer taken whole before it is read, in turn), HTTP/2 windows of 256 KiB a stream and 64 MiB the connection",
        }
    }
}

/// The workload's sizes.
#[derive(Clone, Debug)]
struct Shape {
    streams: usize,
    sizes: Vec<usize>,
    warmup: Duration,
    measure: Duration,
    rounds: usize,
    /// Client-streaming streams kept open after one large message, and its size.
    retained: usize,
    first: usize,
    /// How long after the burst the second RSS reading is taken.
    settle: Duration,
    /// Idle streams: connections x streams each.
    idle: (usize, usize),
    /// Concurrent unary calls of 1 MiB.
    unary: usize,
}

/// `TIERPOOL_GRPC_SECS`, if set: whole seconds, at least one.
fn window() -> Result<Option<Duration>, String> {
    match std::env::var("TIERPOOL_GRPC_SECS") {
        Err(_) => Ok(None),
        Ok(v) => match v.parse::<u64>() {
            Ok(secs) if secs > 0 => Ok(Some(Duration::from_secs(secs))),
            _ => Err(format!(
                "TIERPOOL_GRPC_SECS={v:?}: the measured window is whole seconds, at least 1"
            )),
        },
    }
}

fn shape(quick: bool, secs: Option<Duration>) -> Shape {
    if quick {
        Shape {
            streams: 8,
            sizes: vec![64 << 10],
            warmup: Duration::from_millis(100),
            measure: secs.unwrap_or(Duration::from_millis(300)),
            rounds: 1,
            retained: 8,
            first: 3 << 20,
            settle: Duration::from_millis(2500),
            idle: (4, 10),
            unary: 4,
        }
    } else {
        Shape {
            streams: 150,
            sizes: vec![1 << 20, 64 << 10, 4 << 10],
            // At 1 MiB x 150 streams a stream makes only a few round trips a second: the
            // warm-up lets every stream pass its first messages (which grow with what
            // arrives), so that the window measures the seed's steady ping-pong rather than
            // streams starting.
            warmup: Duration::from_secs(2),
            measure: secs.unwrap_or(Duration::from_secs(4)),
            rounds: 3,
            retained: 200,
            first: 3 << 20,
            settle: Duration::from_secs(5),
            idle: (100, 100),
            unary: 64,
        }
    }
}

/// A running `grpc_server` (this binary's `grpc-server` subcommand).
struct Server(ChildServer);

/// What `grpc_server` counted so far.
#[derive(Clone, Copy, Debug, Default)]
struct Stats {
    requests: u64,
    allocs: u64,
    bytes: u64,
    pool_misses: u64,
}

impl Server {
    fn start(mode: Mode) -> Result<Server, String> {
        ChildServer::start("grpc-server", mode.args()).map(Server)
    }

    fn pid(&self) -> u32 {
        self.0.pid()
    }

    /// Asks for its counts (SIGUSR1) and reads them.
    fn stats(&self) -> Result<Stats, String> {
        // SAFETY: `kill` with a pid of ours and a signal number.
        unsafe { libc::kill(self.pid() as i32, libc::SIGUSR1) };
        let line = self
            .0
            .next_line(Duration::from_secs(10))
            .ok_or("grpc_server did not answer SIGUSR1")?;
        let field = |name: &str| -> Result<u64, String> {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
                .ok_or_else(|| format!("grpc_server said {line:?}"))
        };
        Ok(Stats {
            requests: field("requests")?,
            allocs: field("allocs")?,
            bytes: field("bytes")?,
            pool_misses: field("pool_misses")?,
        })
    }
}

async fn connect(addr: &str) -> Result<BenchmarkServiceClient<Channel>, String> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .map_err(|e| e.to_string())?
        .connect()
        .await
        .map_err(|e| format!("cannot connect to grpc_server: {e}"))?;
    Ok(BenchmarkServiceClient::new(channel)
        .max_decoding_message_size(8 << 20)
        .max_encoding_message_size(8 << 20))
}

fn request(body: &Bytes, response_size: usize) -> SimpleRequest {
    SimpleRequest {
        response_type: 0,
        response_size: response_size as i32,
        payload: Some(Payload {
            r#type: 0,
            body: body.clone(),
        }),
    }
}

/// Round trips counted while `counting`, with their latencies.
#[derive(Default)]
struct Trips {
    count: AtomicU64,
    latency_us: Mutex<Option<Histogram<u64>>>,
}

impl Trips {
    fn add(&self, h: &Histogram<u64>) {
        let mut all = self.latency_us.lock().unwrap();
        match all.as_mut() {
            Some(a) => a.add(h).expect("same bounds"),
            None => *all = Some(h.clone()),
        }
    }
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds")
}

/// The seed's shape: `streams` bidi `StreamingCall`s on one connection, each sending a
/// message of `size` and awaiting its answer of `size`, until the measured window ends.
async fn ping_pong(
    client: &BenchmarkServiceClient<Channel>,
    streams: usize,
    size: usize,
    counting: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    trips: Arc<Trips>,
) -> Result<(), String> {
    let body = Bytes::from(vec![1u8; size]);
    let mut tasks = Vec::new();
    for _ in 0..streams {
        let mut client = client.clone();
        let (body, counting, stop, trips) =
            (body.clone(), counting.clone(), stop.clone(), trips.clone());
        tasks.push(tokio::spawn(async move {
            let (tx, rx) = tokio::sync::mpsc::channel(1);
            let requests = futures_util::stream::unfold(rx, |mut rx| async move {
                rx.recv().await.map(|m| (m, rx))
            });
            tx.send(request(&body, size))
                .await
                .map_err(|e| e.to_string())?;
            let mut answers = client
                .streaming_call(requests)
                .await
                .map_err(|e| e.to_string())?
                .into_inner();
            let mut h = histogram();
            let mut sent = Instant::now();
            loop {
                let answer = answers.message().await.map_err(|e| e.to_string())?;
                let got = answer.and_then(|a| a.payload).map_or(0, |p| p.body.len());
                if got != size {
                    return Err(format!("an answer of {got} bytes, not {size}"));
                }
                if counting.load(Ordering::Relaxed) {
                    h.record(sent.elapsed().as_micros().max(1) as u64).ok();
                    trips.count.fetch_add(1, Ordering::Relaxed);
                }
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                sent = Instant::now();
                tx.send(request(&body, size))
                    .await
                    .map_err(|e| e.to_string())?;
            }
            trips.add(&h);
            Ok::<(), String>(())
        }));
    }
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    Ok(())
}

/// `calls` tasks each making unary calls of `size` (answers of `size`) in turn.
async fn unary(
    client: &BenchmarkServiceClient<Channel>,
    calls: usize,
    size: usize,
    counting: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    trips: Arc<Trips>,
) -> Result<(), String> {
    let body = Bytes::from(vec![2u8; size]);
    let mut tasks = Vec::new();
    for _ in 0..calls {
        let mut client = client.clone();
        let (body, counting, stop, trips) =
            (body.clone(), counting.clone(), stop.clone(), trips.clone());
        tasks.push(tokio::spawn(async move {
            let mut h = histogram();
            while !stop.load(Ordering::Relaxed) {
                let sent = Instant::now();
                let answer = client
                    .unary_call(request(&body, size))
                    .await
                    .map_err(|e| e.to_string())?;
                let got = answer.into_inner().payload.map_or(0, |p| p.body.len());
                if got != size {
                    return Err(format!("an answer of {got} bytes, not {size}"));
                }
                if counting.load(Ordering::Relaxed) {
                    h.record(sent.elapsed().as_micros().max(1) as u64).ok();
                    trips.count.fetch_add(1, Ordering::Relaxed);
                }
            }
            trips.add(&h);
            Ok::<(), String>(())
        }));
    }
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    Ok(())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// The server's CPU time, counters and minor page faults at one moment.
struct Reading {
    cpu: Duration,
    stats: Stats,
    faults: u64,
}

impl Reading {
    fn of(server: &Server) -> Result<Self, String> {
        Ok(Reading {
            cpu: Proc::Pid(server.pid()).cpu(),
            stats: server.stats()?,
            faults: Proc::Pid(server.pid()).minor_faults(),
        })
    }
}

/// Runs `load` against a fresh server in `mode` for the shape's warm-up and measured window:
/// per round trip, with QPS, latency, the server's CPU and allocations per message, its peak
/// RSS.
fn throughput<F, Fut>(
    mode: Mode,
    s: &Shape,
    param: String,
    metric: &str,
    load: F,
) -> Result<Record, String>
where
    F: FnOnce(BenchmarkServiceClient<Channel>, Arc<AtomicBool>, Arc<AtomicBool>, Arc<Trips>) -> Fut,
    Fut: std::future::Future<Output = Result<(), String>> + Send + 'static,
{
    let server = Server::start(mode)?;
    let rt = runtime();
    let client = rt.block_on(connect(&server.0.addr))?;
    let counting = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let trips = Arc::new(Trips::default());
    let running = rt.spawn(load(client, counting.clone(), stop.clone(), trips.clone()));
    std::thread::sleep(s.warmup);
    let r0 = Reading::of(&server)?;
    let start = Instant::now();
    counting.store(true, Ordering::Relaxed);
    std::thread::sleep(s.measure);
    counting.store(false, Ordering::Relaxed);
    let elapsed = start.elapsed();
    let r1 = Reading::of(&server)?;
    stop.store(true, Ordering::Relaxed);
    rt.block_on(running).map_err(|e| e.to_string())??;
    let peak = server.0.peak_rss();
    server.0.stop()?;
    let n = trips.count.load(Ordering::Relaxed).max(1) as f64;
    let h = trips
        .latency_us
        .lock()
        .unwrap()
        .take()
        .unwrap_or_else(histogram);
    let messages = (r1.stats.requests - r0.stats.requests).max(1) as f64;
    let ns = elapsed.as_nanos() as f64 / n;
    let extra = [
        ("QPS", n / elapsed.as_secs_f64()),
        ("p50 ms", h.value_at_quantile(0.5) as f64 / 1e3),
        ("p99 ms", h.value_at_quantile(0.99) as f64 / 1e3),
        (
            "server CPU us/round trip",
            (r1.cpu - r0.cpu).as_secs_f64() * 1e6 / n,
        ),
        (
            "server allocs/message",
            (r1.stats.allocs - r0.stats.allocs) as f64 / messages,
        ),
        // Fresh pages the server touched per message: what allocating (or a pool letting go
        // of buffers at its cap) costs beyond the allocator's own time.
        (
            "server page faults/message",
            (r1.faults - r0.faults) as f64 / messages,
        ),
        (
            "server pool misses/message",
            (r1.stats.pool_misses - r0.stats.pool_misses) as f64 / messages,
        ),
        ("server peak RSS MiB", peak as f64 / MIB),
    ];
    Ok(Record {
        workload: "grpc".into(),
        contender: mode.label().into(),
        allocator: "glibc".into(),
        param,
        metric: metric.into(),
        median: ns,
        min: ns,
        max: ns,
        samples: 1,
        allocs_per_op: Some((r1.stats.allocs - r0.stats.allocs) as f64 / messages),
        bytes_per_op: Some((r1.stats.bytes - r0.stats.bytes) as f64 / messages),
        extra: extra.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
    })
}

/// Waits until the server has counted `n` requests (or 120 s have passed).
fn wait_for_requests(server: &Server, n: u64) -> Result<(), String> {
    let start = Instant::now();
    while server.stats()?.requests < n {
        if start.elapsed() > Duration::from_secs(120) {
            return Err(format!("grpc_server did not receive {n} requests in 120 s"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// Bytes kept per open stream: `retained` client-streaming streams on 4 connections each send
/// one message of `first` bytes then three of 100 and stay open; the server's RSS above its
/// start, at once and `settle` later.
fn retention(mode: Mode, s: &Shape) -> Result<Record, String> {
    let server = Server::start(mode)?;
    let rt = runtime();
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(rt.block_on(connect(&server.0.addr))?);
    }
    std::thread::sleep(Duration::from_millis(200));
    let before = Proc::Pid(server.pid()).rss();
    let big = Bytes::from(vec![3u8; s.first]);
    let small = Bytes::from(vec![4u8; 100]);
    let mut senders = Vec::new();
    rt.block_on(async {
        for i in 0..s.retained {
            let (tx, rx) = tokio::sync::mpsc::channel(4);
            let requests = futures_util::stream::unfold(rx, |mut rx| async move {
                rx.recv().await.map(|m| (m, rx))
            });
            let mut client = clients[i % clients.len()].clone();
            tokio::spawn(async move {
                let _ = client.streaming_from_client(requests).await;
            });
            tx.send(request(&big, 1)).await.map_err(|e| e.to_string())?;
            for _ in 0..3 {
                tx.send(request(&small, 1))
                    .await
                    .map_err(|e| e.to_string())?;
            }
            senders.push(tx);
        }
        Ok::<(), String>(())
    })?;
    wait_for_requests(&server, 4 * s.retained as u64)?;
    std::thread::sleep(Duration::from_millis(300));
    let at_once = Proc::Pid(server.pid()).rss();
    std::thread::sleep(s.settle);
    let later = Proc::Pid(server.pid()).rss();
    drop(senders);
    drop(rt);
    server.0.stop()?;
    let per = |rss: u64| rss.saturating_sub(before) as f64 / s.retained as f64 / 1024.0;
    Ok(memory_record(
        mode,
        format!(
            "{} open client streams after one {} message",
            s.retained,
            size_label(s.first)
        ),
        &format!("KiB per open stream ({} s later)", s.settle.as_secs_f64()),
        per(later),
        &[
            ("KiB per stream", per(later)),
            ("KiB per stream at once", per(at_once)),
            ("server RSS MiB", later as f64 / MIB),
        ],
    ))
}

/// A memory row: `kib` KiB per stream (the chart's panel), as `metric` in `unit`s.
fn memory_record(
    mode: Mode,
    param: String,
    metric: &str,
    value: f64,
    extra: &[(&str, f64)],
) -> Record {
    // A figure of 0 (nothing kept) is shown as the smallest positive one: the report's figures
    // are positive.
    let value = value.max(f64::MIN_POSITIVE);
    Record::single(
        "grpc",
        mode.label(),
        "glibc",
        param,
        metric,
        value,
        extra.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
    )
}

/// An open bidi stream: where its requests go, and its answers.
type OpenStream = (
    tokio::sync::mpsc::Sender<SimpleRequest>,
    tonic::Streaming<SimpleResponse>,
);

/// Opens `streams` bidi streams spread over `clients`' connections, none sending yet.
async fn open_idle_streams(
    clients: &[BenchmarkServiceClient<Channel>],
    streams: usize,
) -> Result<Vec<OpenStream>, String> {
    let mut calls = Vec::new();
    for i in 0..streams {
        let (tx, rx) = tokio::sync::mpsc::channel::<SimpleRequest>(1);
        let requests =
            futures_util::stream::unfold(
                rx,
                |mut rx| async move { rx.recv().await.map(|m| (m, rx)) },
            );
        let mut client = clients[i % clients.len()].clone();
        calls.push(tokio::spawn(async move {
            let answers = client
                .streaming_call(requests)
                .await
                .map_err(|e| format!("opening an idle stream: {e}"))?
                .into_inner();
            Ok::<_, String>((tx, answers))
        }));
    }
    let mut open = Vec::new();
    for c in calls {
        open.push(c.await.map_err(|e| e.to_string())??);
    }
    Ok(open)
}

/// Sends `big` on each stream, each answered with one byte; the streams stay open.
async fn one_message_each(
    streams: impl Iterator<Item = OpenStream>,
    big: Bytes,
) -> Result<Vec<OpenStream>, String> {
    let mut tasks = Vec::new();
    for (tx, mut answers) in streams {
        let big = big.clone();
        tasks.push(tokio::spawn(async move {
            tx.send(request(&big, 1)).await.map_err(|e| e.to_string())?;
            answers
                .message()
                .await
                .map_err(|e| e.to_string())?
                .ok_or("the stream ended")?;
            Ok::<_, String>((tx, answers))
        }));
    }
    let mut kept = Vec::new();
    for t in tasks {
        kept.push(t.await.map_err(|e| e.to_string())??);
    }
    Ok(kept)
}

/// Bytes per idle stream: `conns` x `per` bidi streams opened and left idle; then one 1 MiB
/// message (answered with one byte) on a tenth of them, which stay open.
fn idle(mode: Mode, s: &Shape) -> Result<Vec<Record>, String> {
    let (conns, per) = s.idle;
    let streams = conns * per;
    let server = Server::start(mode)?;
    let rt = runtime();
    let mut clients = Vec::new();
    for _ in 0..conns {
        clients.push(rt.block_on(connect(&server.0.addr))?);
    }
    std::thread::sleep(Duration::from_millis(200));
    let before = Proc::Pid(server.pid()).rss();
    let open = rt.block_on(open_idle_streams(&clients, streams))?;
    std::thread::sleep(Duration::from_millis(500));
    let idle_rss = Proc::Pid(server.pid()).rss();
    // One 1 MiB message on every tenth stream, each answered with one byte; all stay open.
    let big = Bytes::from(vec![5u8; 1 << 20]);
    let (busy, rest): (Vec<_>, Vec<_>) =
        open.into_iter().enumerate().partition(|(i, _)| i % 10 == 0);
    let busy = rt.block_on(one_message_each(busy.into_iter().map(|(_, o)| o), big))?;
    std::thread::sleep(s.settle);
    let after_rss = Proc::Pid(server.pid()).rss();
    drop((busy, rest));
    drop(rt);
    server.0.stop()?;
    let per_stream = |rss: u64| rss.saturating_sub(before) as f64 / streams as f64;
    let label = format!("{streams} idle bidi streams ({conns} connections)");
    Ok(vec![
        memory_record(
            mode,
            label.clone(),
            "bytes per idle stream",
            per_stream(idle_rss),
            &[("KiB per stream", per_stream(idle_rss) / 1024.0)],
        ),
        memory_record(
            mode,
            format!("{label}, after one 1 MiB message on a tenth"),
            "bytes per stream",
            per_stream(after_rss),
            &[("KiB per stream", per_stream(after_rss) / 1024.0)],
        ),
    ])
}

const MIB: f64 = (1 << 20) as f64;

/// The `grpc` workload.
#[derive(Debug)]
pub struct Grpc;

impl super::Scenario for Grpc {
    fn name(&self) -> &'static str {
        "grpc"
    }

    /// No allocation counts: its memory rows have none (its throughput rows give the server's, per message).
    fn counts_allocations(&self) -> bool {
        false
    }

    fn describe(&self) -> &'static str {
        "gRPC under tonic, the seeds' own protocol: grpc's BenchmarkService (grpc_server, run as a child of the report's binary) stock (tonic as generated, its own prost codec) and pooled (tierpool-tonic: the codec for unary and server-streaming, PooledMethods for client-streaming and bidi), driven from this process by tonic's generated client for both modes, one fresh server per row and mode, 3 interleaved rounds. The seed's shape: 150 bidi StreamingCall streams on one connection, each ping-ponging 1 MiB (also 64 KiB and 4 KiB) messages: per round trip, QPS, p50/p99 latency, the server's CPU per round trip and allocations per message received, its peak RSS; at 1 MiB also the pooled server under a 64 MiB budget on bytes in use (150 MiB in flight: streams admitted in turn). Unary 1 MiB calls, 64 at a time, through the codec alone (tonic's buffer, then a pooled one), and through PooledMethods::unary (the pooled reader: one copy). Retention: 200 client-streaming streams on 4 connections each send one 3 MiB message then three of 100 bytes and stay open: the server's RSS above its start per open stream, 5 s later and at once. Idle: 10,000 bidi streams (100 connections x 100) opened and left idle: bytes per idle stream; then one 1 MiB message on a tenth of them."
    }

    fn weight(&self) -> u64 {
        120
    }

    fn contenders(&self) -> Vec<Entry> {
        Mode::EVERY
            .iter()
            .map(|m| Entry::new(m.label(), m.setup()))
            .collect()
    }

    fn baseline(&self) -> String {
        Mode::Stock.label().into()
    }

    fn run(&self, quick: bool) -> Result<Output, String> {
        let s = shape(quick, window()?);
        let mut records = Vec::new();
        for round in 1..=s.rounds {
            for (i, &size) in s.sizes.iter().enumerate() {
                let modes: &[Mode] = if i == 0 { &Mode::SEED } else { &Mode::ALL };
                for &mode in modes {
                    crate::harness::progress::status(&format!(
                        "grpc round {round}/{}: {} ping-pong {}",
                        s.rounds,
                        mode.label(),
                        size_label(size)
                    ));
                    let streams = s.streams;
                    records.push(throughput(
                        mode,
                        &s,
                        format!("bidi ping-pong {} x {streams} streams", size_label(size)),
                        "ns/round trip (1/QPS)",
                        move |c, counting, stop, trips| async move {
                            ping_pong(&c, streams, size, counting, stop, trips).await
                        },
                    )?);
                }
            }
            for mode in Mode::UNARY {
                crate::harness::progress::status(&format!(
                    "grpc round {round}/{}: unary, {}",
                    s.rounds,
                    mode.label()
                ));
                let calls = s.unary;
                records.push(throughput(
                    mode,
                    &s,
                    format!("unary 1 MiB x {calls} calls"),
                    "ns/call (1/QPS)",
                    move |c, counting, stop, trips| async move {
                        unary(&c, calls, 1 << 20, counting, stop, trips).await
                    },
                )?);
            }
            for mode in Mode::ALL {
                crate::harness::progress::status(&format!(
                    "grpc round {round}/{}: {} retention",
                    s.rounds,
                    mode.label()
                ));
                records.push(retention(mode, &s)?);
                records.extend(idle(mode, &s)?);
            }
        }
        Ok(Output {
            records: crate::harness::record::merge_rounds(records),
            timelines: vec![],
        })
    }

    fn child(&self, _ctx: &Ctx, _args: &super::ChildArgs) -> Result<Option<Output>, String> {
        Err("the grpc workload runs no child of this binary".into())
    }

    /// The seed's shape at its largest size and the retention row: rows of other sizes have
    /// other scales, and would share a panel's bars with them.
    fn chart(&self, path: &Path, data: &super::ChartData) -> Result<(), crate::harness::chart::Error> {
        let seed: Vec<&Record> = data
            .rows
            .iter()
            .copied()
            .filter(|r| {
                r.param.starts_with("bidi ping-pong 1 MiB")
                    || r.param.contains("open client streams")
            })
            .collect();
        crate::harness::chart::panels_of_extras(
            path,
            "grpc: the seed's shape (bidi 1 MiB x 150 streams) and an open stream's memory after 3 MiB",
            &seed,
            &[
                ("QPS", "round trips per second"),
                ("p99 ms", "p99 latency (ms)"),
                ("server CPU us/round trip", "server CPU per round trip (us)"),
                ("server peak RSS MiB", "server peak RSS (MiB)"),
                ("KiB per stream", "server RSS per open stream (KiB)"),
            ],
        )
    }
}
