//! `http` (sending pooled chains through hyper as fast as `Full<Bytes>`): a hyper 1
//! server on loopback (HTTP/1.1 and h2c, one tokio worker) answers `GET /<body>/<size>` with
//! a body of 64 KiB or 1 MiB made per request in one of four ways: `Full<Bytes>` from a fresh
//! `Vec`, one `PooledBytes`, a `PooledChain` of 16 KiB views (tierpool's body: the whole chain
//! as one frame), and the same chain sent one frame per view (`into_view_frames`, how the
//! chain body worked before).
//!
//! Each body is first fetched with curl over HTTP/1.1 and HTTP/2 and checked byte for byte.
//! Then, in 5 interleaved rounds of 2 s runs, wrk (one thread, 8 keep-alive connections) over
//! HTTP/1.1 and h2load (one thread, 8 connections of one stream each) over HTTP/2 measure
//! requests/s, and this process measures its own CPU time and minor page faults per request
//! (the server's work: the clients are other processes; steadier than the rate on a shared
//! machine) and its allocations (counted during the same runs). Every pooled buffer must be
//! back at the end. Skipped, saying so, where wrk or curl is not installed; without h2load,
//! or if it fails, the HTTP/2 rows are left out, saying so (`.ci/run` installs all three).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::process::Command;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::Frame;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tierpool::{BufferPool, PooledBytes, PooledChain, ViewFrames};

use super::{size_label, Ctx};
use crate::harness::choice::Choice;
use crate::harness::record::{Output, Record};
use crate::harness::procfs::Proc;

crate::choices! {
    /// How a response body is made (its id is the URL's first path segment).
    pub enum Strategy {
        /// `Full<Bytes>` from a fresh `Vec` per request.
        Full => (
            "full",
            "Full<Bytes> from a fresh Vec (hyper)",
            "http workload: Vec::with_capacity(size) filled from the pattern, Full::new(Bytes::from(vec)) as the response body",
        ),
        /// One `PooledBytes`.
        Pooled => (
            "pooled",
            "tierpool PooledBytes body (hyper)",
            "http workload: pool.get(size) filled from the pattern, into_shared(): the PooledBytes is the body (one frame)",
        ),
        /// A `PooledChain` of 16 KiB views: one frame, the whole chain.
        Chain => (
            "chain",
            "tierpool PooledChain body, 16 KiB views (hyper)",
            "http workload: size / 16 KiB pooled buffers of 16 KiB filled from the pattern, collected into a PooledChain: the chain is the body, its one frame the whole chain (Data = PooledChain, chunks_vectored for writev)",
        ),
        /// The same chain, one frame per view.
        ChainPerView => (
            "chain-per-view",
            "PooledChain::into_view_frames, a frame per view (hyper)",
            "http workload: the same PooledChain as into_view_frames(): one frame per view (tierpool's chain body before this workload; what axum and tonic, whose bodies need Data = Bytes, are given)",
        ),
    }
}

/// Body sizes.
pub const SIZES: [usize; 2] = [64 << 10, 1 << 20];

/// A chain's view size.
pub const VIEW: usize = 16 << 10;

/// The body's byte at `i`.
fn byte_at(i: usize) -> u8 {
    (i.wrapping_mul(2_654_435_761) >> 11) as u8
}

/// The pooled buffers of a chain of `data` in views of [`VIEW`] bytes.
fn chain_of(data: &[u8], pool: &BufferPool) -> PooledChain {
    data.chunks(VIEW)
        .map(|c| {
            let mut b = pool.get(c.len());
            b.extend_from_slice(c);
            b.into_shared()
        })
        .collect()
}

/// Answers one request: the body named by the path, each with its own type (so that hyper
/// writes each as what it is: a `PooledChain` frame reaches hyper's encoder as a chain).
async fn serve(
    req: Request<Incoming>,
    pool: BufferPool,
    pattern: &'static [u8],
) -> Result<Response<Either>, Infallible> {
    let mut parts = req.uri().path().trim_start_matches('/').split('/');
    let strategy = parts.next().and_then(Strategy::from_id);
    let size: Option<usize> = parts.next().and_then(|s| s.parse().ok());
    let (Some(strategy), Some(size)) = (strategy, size.filter(|&s| s <= pattern.len())) else {
        let mut r = Response::new(Either::Full(Full::new(Bytes::new())));
        *r.status_mut() = hyper::StatusCode::NOT_FOUND;
        return Ok(r);
    };
    let data = &pattern[..size];
    Ok(Response::new(match strategy {
        Strategy::Full => Either::Full(Full::new(Bytes::from(data.to_vec()))),
        Strategy::Pooled => Either::Pooled({
            let mut b = pool.get(size);
            b.extend_from_slice(data);
            b.into_shared()
        }),
        Strategy::Chain => Either::Chain(chain_of(data, &pool)),
        Strategy::ChainPerView => Either::PerView(chain_of(data, &pool).into_view_frames()),
    }))
}

/// A response body of one of the measured types, unboxed (hyper sees `Bytes`, `PooledBytes`
/// or `PooledChain` frames as they are).
enum Either {
    Full(Full<Bytes>),
    Pooled(PooledBytes),
    Chain(PooledChain),
    PerView(ViewFrames),
}

/// The data of an [`Either`] body.
enum EitherBuf {
    Pooled(PooledBytes),
    Chain(PooledChain),
    Bytes(Bytes),
}

impl bytes::Buf for EitherBuf {
    fn remaining(&self) -> usize {
        match self {
            EitherBuf::Pooled(b) => b.remaining(),
            EitherBuf::Chain(c) => c.remaining(),
            EitherBuf::Bytes(b) => b.remaining(),
        }
    }

    fn chunk(&self) -> &[u8] {
        match self {
            EitherBuf::Pooled(b) => b.chunk(),
            EitherBuf::Chain(c) => c.chunk(),
            EitherBuf::Bytes(b) => b.chunk(),
        }
    }

    fn chunks_vectored<'a>(&'a self, dst: &mut [std::io::IoSlice<'a>]) -> usize {
        match self {
            EitherBuf::Pooled(b) => b.chunks_vectored(dst),
            EitherBuf::Chain(c) => c.chunks_vectored(dst),
            EitherBuf::Bytes(b) => b.chunks_vectored(dst),
        }
    }

    fn advance(&mut self, n: usize) {
        match self {
            EitherBuf::Pooled(b) => b.advance(n),
            EitherBuf::Chain(c) => c.advance(n),
            EitherBuf::Bytes(b) => b.advance(n),
        }
    }

    fn copy_to_bytes(&mut self, n: usize) -> Bytes {
        match self {
            EitherBuf::Pooled(b) => b.copy_to_bytes(n),
            EitherBuf::Chain(c) => c.copy_to_bytes(n),
            EitherBuf::Bytes(b) => b.copy_to_bytes(n),
        }
    }
}

/// A polled frame with its data wrapped by `f`.
fn map_frame<D>(
    p: Poll<Option<Result<Frame<D>, Infallible>>>,
    f: fn(D) -> EitherBuf,
) -> Poll<Option<Result<Frame<EitherBuf>, Infallible>>> {
    p.map(|o| o.map(|r| r.map(|fr| fr.map_data(f))))
}

impl http_body::Body for Either {
    type Data = EitherBuf;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<EitherBuf>, Infallible>>> {
        match self.get_mut() {
            Either::Full(b) => map_frame(Pin::new(b).poll_frame(cx), EitherBuf::Bytes),
            Either::Pooled(b) => map_frame(Pin::new(b).poll_frame(cx), EitherBuf::Pooled),
            Either::Chain(c) => map_frame(Pin::new(c).poll_frame(cx), EitherBuf::Chain),
            Either::PerView(v) => map_frame(Pin::new(v).poll_frame(cx), EitherBuf::Pooled),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Either::Full(b) => b.is_end_stream(),
            Either::Pooled(b) => b.is_end_stream(),
            Either::Chain(c) => c.is_end_stream(),
            Either::PerView(v) => v.is_end_stream(),
        }
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match self {
            Either::Full(b) => b.size_hint(),
            Either::Pooled(b) => b.size_hint(),
            Either::Chain(c) => c.size_hint(),
            Either::PerView(v) => v.size_hint(),
        }
    }
}

/// True if wrk and curl are installed.
pub fn clients_available() -> Result<(), String> {
    for (tool, arg) in [("wrk", "-v"), ("curl", "--version")] {
        let ok = Command::new(tool)
            .arg(arg)
            .output()
            .map(|o| o.status.success() || !o.stdout.is_empty() || !o.stderr.is_empty())
            .unwrap_or(false);
        if !ok {
            return Err(format!(
                "{tool} is not installed (apt-get install wrk curl)"
            ));
        }
    }
    Ok(())
}

/// Fetches `url` with curl (`--http2-prior-knowledge` for HTTP/2) and checks the body.
fn curl_check(url: &str, http2: bool, size: usize) -> Result<(), String> {
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "--fail", "-o", "-"]);
    cmd.arg(if http2 {
        "--http2-prior-knowledge"
    } else {
        "--http1.1"
    });
    let out = cmd.arg(url).output().map_err(|e| format!("curl: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "curl {url}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let body = out.stdout;
    if body.len() != size || body.iter().enumerate().any(|(i, &b)| b != byte_at(i)) {
        return Err(format!(
            "curl {url} (HTTP/{}): {} bytes, not the {size} sent, or different bytes",
            if http2 { "2" } else { "1.1" },
            body.len()
        ));
    }
    Ok(())
}

/// One wrk run: (requests/s, requests, p99 latency in ms).
fn wrk(url: &str, seconds: u32) -> Result<(f64, f64, f64), String> {
    let out = Command::new("wrk")
        .args(["-t1", "-c8", &format!("-d{seconds}s"), "--latency", url])
        .output()
        .map_err(|e| format!("wrk: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |prefix: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(prefix).map(|r| r.trim().to_string()))
    };
    let rps: f64 = field("Requests/sec:")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("wrk {url}: no Requests/sec in {text}"))?;
    let requests: f64 = text
        .lines()
        .find(|l| l.contains("requests in"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("wrk {url}: no request count in {text}"))?;
    if text.contains("Non-2xx") || text.contains("Socket errors") {
        return Err(format!("wrk {url}: errors: {text}"));
    }
    let p99 = field("99%")
        .map(|v| {
            let (num, unit) = v.split_at(v.find(|c: char| c.is_alphabetic()).unwrap_or(v.len()));
            let x: f64 = num.parse().unwrap_or(0.0);
            match unit {
                "us" => x / 1e3,
                "s" => x * 1e3,
                _ => x, // ms
            }
        })
        .unwrap_or(0.0);
    Ok((rps, requests, p99))
}

/// True if h2load (nghttp2's HTTP/2 load generator) is installed.
pub fn h2load_available() -> bool {
    Command::new("h2load")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// One h2load run over h2c (prior knowledge: 8 connections, one stream each, as wrk's 8
/// keep-alive connections): (requests/s, requests). Any failed, errored or non-2xx request is
/// an error.
fn h2load(url: &str, seconds: u32) -> Result<(f64, f64), String> {
    let out = Command::new("h2load")
        .args(["-c8", "-t1", "-m1", &format!("-D{seconds}"), url])
        .output()
        .map_err(|e| format!("h2load: {e}"))?;
    let (rps, done) = parse_h2load(&String::from_utf8_lossy(&out.stdout))
        .map_err(|e| format!("h2load {url}: {e}"))?;
    if !out.status.success() {
        return Err(format!("h2load {url}: exit status {}", out.status));
    }
    Ok((rps, done))
}

/// h2load's summary: (requests/s, requests that succeeded), or why the run does not count
/// (any failed, errored, timed-out or non-2xx request).
pub fn parse_h2load(text: &str) -> Result<(f64, f64), String> {
    // "finished in 2.00s, 21513.00 req/s, 1.31GB/s"
    let rps: f64 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("finished in "))
        .and_then(|r| r.split(", ").nth(1))
        .and_then(|v| v.strip_suffix(" req/s"))
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("no req/s in {text}"))?;
    // "requests: 43026 total, 43026 started, 43026 done, 43026 succeeded, 0 failed, 0 errored, 0 timeout"
    // "status codes: 43026 2xx, 0 3xx, 0 4xx, 0 5xx"
    let count = |prefix: &str, what: &str| -> Option<f64> {
        let line = text.lines().find(|l| l.trim().starts_with(prefix))?;
        line.split(',').find_map(|f| {
            let f = f.trim().trim_start_matches(prefix).trim();
            f.strip_suffix(what)?.trim().parse().ok()
        })
    };
    let done =
        count("requests:", "succeeded").ok_or_else(|| format!("no request count in {text}"))?;
    let bad = ["failed", "errored", "timeout"]
        .iter()
        .map(|w| count("requests:", w).unwrap_or(0.0))
        .sum::<f64>();
    let ok = count("status codes:", "2xx").unwrap_or(0.0);
    // A stream cut off at the end of the run may be counted 2xx and not done.
    if bad > 0.0 || ok < done || done == 0.0 {
        return Err(format!("errors: {text}"));
    }
    Ok((rps, done))
}

/// The client of a measured run, and so the protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Client {
    /// wrk over HTTP/1.1.
    Wrk,
    /// h2load over HTTP/2 (h2c).
    H2load,
}

impl Client {
    /// The report's parameter for a body size.
    fn param(self, size: usize) -> String {
        match self {
            Client::Wrk => format!("{} bodies, HTTP/1.1 (wrk)", size_label(size)),
            Client::H2load => format!("{} bodies, HTTP/2 (h2load)", size_label(size)),
        }
    }

    /// One run against `url`: (requests/s, requests, p99 latency in ms where the client
    /// reports one).
    fn run(self, url: &str, seconds: u32) -> Result<(f64, f64, Option<f64>), String> {
        match self {
            Client::Wrk => wrk(url, seconds).map(|(r, n, p)| (r, n, Some(p))),
            Client::H2load => h2load(url, seconds).map(|(r, n)| (r, n, None)),
        }
    }
}

/// One client run of one body and size.
struct Run {
    rps: f64,
    requests: f64,
    /// wrk's p99 latency, ms (h2load reports none).
    p99: Option<f64>,
    /// The server's allocations during the run, and their bytes.
    allocs: u64,
    bytes: u64,
    /// This process's CPU time (user + system: the server's worker, hyper's writes into the
    /// socket included) per request, in microseconds. The clients (wrk, h2load) run in their
    /// own processes, so this is the server's work alone; on a shared 2-core VM it moves far
    /// less than the rate does.
    cpu_us: f64,
    /// This process's minor page faults per request.
    faults: f64,
}

/// Rounds and seconds per client run.
pub fn shape(quick: bool) -> (usize, u32) {
    if quick {
        (1, 1)
    } else {
        (5, 2)
    }
}

/// Starts the workload's server on loopback (a port of the system's choosing), its bodies
/// from `pool`: a hyper 1 server (HTTP/1.1 and h2c) on a tokio runtime of one worker, which
/// serves until the runtime is dropped. Returns the runtime and the server's address.
pub fn start_server(
    pool: &BufferPool,
) -> Result<(tokio::runtime::Runtime, std::net::SocketAddr), String> {
    let pattern: &'static [u8] = Box::leak((0..SIZES[1]).map(byte_at).collect::<Vec<u8>>().into());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let pool = pool.clone();
    rt.spawn(async move {
        loop {
            let Ok((s, _)) = listener.accept().await else {
                return;
            };
            let _ = s.set_nodelay(true);
            let pool = pool.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| serve(req, pool.clone(), pattern));
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(s), svc)
                    .await;
            });
        }
    });
    Ok((rt, addr))
}

/// One client run against `url`, the server measured meanwhile (its allocations, CPU time and
/// page faults).
fn measured(client: Client, url: &str, seconds: u32) -> Result<Run, String> {
    let before = crate::harness::alloc::counted();
    let cpu = crate::harness::measure::cpu_time();
    let faults = Proc::Me.minor_faults();
    crate::harness::alloc::set_counting(true);
    let result = client.run(url, seconds);
    crate::harness::alloc::set_counting(false);
    let (rps, requests, p99) = result?;
    let cpu = crate::harness::measure::cpu_time() - cpu;
    let faults = Proc::Me.minor_faults().saturating_sub(faults);
    let after = crate::harness::alloc::counted();
    Ok(Run {
        rps,
        requests,
        p99,
        allocs: after.allocs - before.allocs,
        bytes: after.bytes - before.bytes,
        cpu_us: cpu.as_secs_f64() * 1e6 / requests.max(1.0),
        faults: faults as f64 / requests.max(1.0),
    })
}

/// The record of one (client, size, strategy) from its rounds' runs: the median rate, and
/// the medians of the other figures.
fn record(ctx: &Ctx, client: Client, size: usize, s: Strategy, runs: &[Run]) -> Record {
    let us: Vec<f64> = runs.iter().map(|r| 1e9 / r.rps).collect();
    let m = crate::harness::measure::Summary::of(us);
    let median = |v: Vec<f64>| crate::harness::measure::Summary::of(v).median;
    let requests: f64 = runs.iter().map(|r| r.requests).sum();
    let mut extra = BTreeMap::new();
    extra.insert("requests/s".to_string(), 1e9 / m.median);
    let p99s: Vec<f64> = runs.iter().filter_map(|r| r.p99).collect();
    if !p99s.is_empty() {
        extra.insert("p99 ms".to_string(), median(p99s));
    }
    extra.insert(
        "server CPU us/request".to_string(),
        median(runs.iter().map(|r| r.cpu_us).collect()),
    );
    extra.insert(
        "page faults/request".to_string(),
        median(runs.iter().map(|r| r.faults).collect()),
    );
    Record {
        workload: "http".into(),
        contender: s.label().into(),
        allocator: ctx.alloc.name().into(),
        param: client.param(size),
        metric: "ns/request (1/throughput)".into(),
        median: m.median,
        min: m.min,
        max: m.max,
        samples: runs.len(),
        allocs_per_op: Some(runs.iter().map(|r| r.allocs as f64).sum::<f64>() / requests),
        bytes_per_op: Some(runs.iter().map(|r| r.bytes as f64).sum::<f64>() / requests),
        extra,
    }
}

/// Runs the workload in this process: the server on a thread of its own, wrk, h2load and
/// curl as child processes.
pub fn run(ctx: &Ctx) -> Result<Output, String> {
    clients_available()?;
    let pool = BufferPool::new();
    let (rt, addr) = start_server(&pool)?;
    // The bytes, through real clients, over both protocols.
    for size in SIZES {
        for &s in Strategy::ALL {
            let url = format!("http://{addr}/{}/{size}", s.id());
            curl_check(&url, false, size)?;
            curl_check(&url, true, size)?;
        }
    }
    let (rounds, seconds) = shape(ctx.quick);
    let mut clients = vec![Client::Wrk];
    if h2load_available() {
        clients.push(Client::H2load);
    } else {
        eprintln!(
            "  http: h2load is not installed (apt-get install nghttp2-client): the HTTP/2 rows are skipped"
        );
    }
    let mut samples: BTreeMap<(Client, usize, usize), Vec<Run>> = BTreeMap::new();
    // An h2load failure leaves out the HTTP/2 rows, saying why, and keeps the rest.
    let mut h2_failed: Option<String> = None;
    for _ in 0..rounds {
        for &client in &clients {
            for size in SIZES {
                for (k, s) in Strategy::ALL.iter().copied().enumerate() {
                    if client == Client::H2load && h2_failed.is_some() {
                        continue;
                    }
                    let url = format!("http://{addr}/{}/{size}", s.id());
                    let run = match measured(client, &url, seconds) {
                        Ok(r) => r,
                        Err(e) if client == Client::H2load => {
                            h2_failed = Some(e);
                            continue;
                        }
                        Err(e) => return Err(e),
                    };
                    samples.entry((client, size, k)).or_default().push(run);
                }
            }
        }
    }
    if let Some(e) = h2_failed {
        eprintln!("  http: {e}: the HTTP/2 rows are left out");
        samples.retain(|&(client, _, _), _| client != Client::H2load);
    }
    drop(rt); // closes the server and every connection
    let st = pool.stats();
    if st.gets != st.returned {
        return Err(format!(
            "pooled buffers still out after the server closed: {st}"
        ));
    }
    let records = samples
        .into_iter()
        .map(|((client, size, k), runs)| record(ctx, client, size, Strategy::ALL[k], &runs))
        .collect();
    Ok(Output {
        records,
        timelines: vec![],
    })
}

/// The `http` workload.
#[derive(Debug)]
pub struct Http;

impl super::Scenario for Http {
    fn name(&self) -> &'static str {
        "http"
    }

    fn describe(&self) -> &'static str {
        "Pooled response bodies through hyper: a hyper 1 server on loopback (HTTP/1.1 and h2c, one tokio worker) answers GET /<body>/<size> with a 64 KiB or 1 MiB body made per request: Full<Bytes> from a fresh Vec, one PooledBytes, a PooledChain of 16 KiB views (tierpool's chain body: the whole chain as one frame), or the same chain one frame per view (into_view_frames, the chain body before); each body first fetched with curl over HTTP/1.1 and HTTP/2 and checked byte for byte; then wrk -t1 -c8 (keep-alive) over HTTP/1.1 and h2load -t1 -c8 -m1 over HTTP/2 (h2c), 2 s per run, 5 interleaved rounds; per request (1/throughput), with requests/s, p99 latency (wrk's), the server's CPU time and minor page faults per request (this process's, the clients being others: the median round) and allocations per request (counted during the same runs). Every pooled buffer back at the end."
    }

    fn weight(&self) -> u64 {
        170
    }

    fn contenders(&self) -> Vec<super::Entry> {
        Strategy::ALL.iter().map(|&s| super::Entry::of(s)).collect()
    }

    fn baseline(&self) -> String {
        Strategy::Full.label().into()
    }

    fn available(&self, _quick: bool) -> Result<(), String> {
        clients_available()
    }

    /// The server and its clients in one child (wrk, h2load and curl its own children).
    fn run(&self, quick: bool) -> Result<Output, String> {
        crate::harness::children::run_one(
            self.name(),
            crate::harness::alloc::Allocator::System,
            crate::harness::children::ALL_KINDS,
            None,
            quick,
            "the http server",
        )
    }

    fn child(&self, ctx: &Ctx, _: &super::ChildArgs) -> Result<Option<Output>, String> {
        run(ctx).map(Some)
    }

    /// A panel per body size, each with its own scale.
    fn chart(
        &self,
        path: &std::path::Path,
        data: &super::ChartData,
    ) -> Result<(), crate::harness::chart::Error> {
        crate::harness::chart::panels_by_group(
            path,
            "http: time per request (1/throughput), by body size",
            data.rows,
            data.order,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::parse_h2load;

    /// h2load 1.52's summary, as printed after a 2 s run.
    const GOOD: &str = "finished in 2.00s, 21513.00 req/s, 1.31GB/s
requests: 43026 total, 43034 started, 43026 done, 43026 succeeded, 0 failed, 0 errored, 0 timeout
status codes: 43027 2xx, 0 3xx, 0 4xx, 0 5xx
";

    #[test]
    fn a_clean_run_gives_its_rate_and_count() {
        assert_eq!(parse_h2load(GOOD), Ok((21513.0, 43026.0)));
    }

    #[test]
    fn failures_errors_and_non_2xx_answers_are_refused() {
        for bad in [
            GOOD.replace("0 failed", "3 failed"),
            GOOD.replace("0 errored", "1 errored"),
            GOOD.replace("0 timeout", "2 timeout"),
            GOOD.replace("43027 2xx, 0 3xx, 0 4xx", "43020 2xx, 0 3xx, 7 4xx"),
            GOOD.replace("43026 succeeded", "0 succeeded"),
            GOOD.replace("21513.00 req/s", "n/a"),
            String::new(),
        ] {
            assert!(parse_h2load(&bad).is_err(), "accepted: {bad}");
        }
    }
}
