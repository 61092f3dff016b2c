//! `uploads`: HTTP request bodies under one memory budget. tierpool-axum's `upload_server`
//! example (its own source, run as `tierpool-bench upload-server`) in its two modes: `stock`,
//! axum's `Bytes` and `Json` extractors, and `pooled`, `PooledBody` and `PooledJson` under a
//! 64 MiB budget; 16 MiB per body in both. A fresh server per row, mode and round; 3
//! interleaved rounds; medians.
//!
//! - **Upload floods**: 200 uploads of 8 MiB at once (this process's hyper clients), over
//!   HTTP/1.1 (a connection each) and over HTTP/2 (4 connections of 50 streams): the server's
//!   peak RSS, bodies/s (the flood's size over its time), the 99th percentile of an upload's
//!   time; every answer's length and CRC-32 checked, and none refused.
//! - **Small JSON**: 1 KiB JSON objects, `h2load` over HTTP/1.1 (50 connections) and HTTP/2
//!   (10 connections of 10 streams): requests/s; every answer a 2xx.
//! - **Trickle**: 200 connections each declaring a 4,001-byte body and sending 2,000 bytes of
//!   it one byte per write (`TCP_NODELAY`), then waiting: the server's RSS above its idle
//!   figure per connection.
//!
//! Skipped, saying so, where h2load is not installed (`.ci/run` installs it).

use std::collections::BTreeMap;
use std::io::Write;
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};

use super::{Ctx, Entry};
use crate::harness::record::{Output, Record};
use crate::harness::server_child::ChildServer;

const MIB: f64 = (1 << 20) as f64;

/// The server's modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Stock,
    Pooled,
}

impl Mode {
    const ALL: [Mode; 2] = [Mode::Stock, Mode::Pooled];

    fn arg(self) -> &'static str {
        match self {
            Mode::Stock => "stock",
            Mode::Pooled => "pooled",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Mode::Stock => "axum extractors (Bytes, Json)",
            Mode::Pooled => "tierpool-axum (PooledBody, PooledJson), 64 MiB budget",
        }
    }

    fn setup(self) -> &'static str {
        match self {
            Mode::Stock => "uploads workload: upload_server --mode stock: axum 0.8's Bytes and Json extractors (each body collected into a fresh allocation under DefaultBodyLimit 16 MiB; nothing bounds the bodies together)",
            Mode::Pooled => "uploads workload: upload_server --mode pooled: tierpool-axum's PooledBody and PooledJson over a pool with max_in_use_bytes 64 MiB (each body admitted by its declared length against the budget, in turn, its memory following what arrived), DefaultBodyLimit 16 MiB",
        }
    }
}

/// The sizes of a run.
struct Shape {
    rounds: usize,
    uploads: usize,
    upload_size: usize,
    json_requests: usize,
    trickles: usize,
    trickled: usize,
}

fn shape(quick: bool) -> Shape {
    if quick {
        Shape {
            rounds: 1,
            uploads: 40,
            upload_size: 2 << 20,
            json_requests: 2_000,
            trickles: 50,
            trickled: 500,
        }
    } else {
        Shape {
            rounds: 3,
            uploads: 200,
            upload_size: 8 << 20,
            json_requests: 40_000,
            trickles: 200,
            trickled: 2_000,
        }
    }
}

/// One row's figures in one round: `(param, metric, value)`.
type Figures = Vec<(String, &'static str, f64)>;

/// The bytes of upload `i`: one of four patterns (the server's CRC tells them apart).
fn payload(size: usize, i: usize) -> Bytes {
    let seed = (i % 4) as u32;
    Bytes::from(
        (0..size as u32)
            .map(|j| (j.wrapping_mul(2_654_435_761) >> 24) as u8 ^ seed as u8)
            .collect::<Vec<u8>>(),
    )
}

/// The answer `upload_server` gives for `body`.
fn expected(body: &[u8]) -> String {
    format!(
        "{{\"crc32\":{},\"len\":{}}}",
        crc32fast::hash(body),
        body.len()
    )
}

/// `uploads` uploads at once to `addr`: HTTP/1.1 a connection each, or HTTP/2 over 4
/// connections. Returns (bodies/s, p99 seconds). Every answer is checked.
async fn flood(addr: &str, http2: bool, s: &Shape) -> Result<(f64, f64), String> {
    let bodies: Vec<Bytes> = (0..4).map(|i| payload(s.upload_size, i)).collect();
    let answers: Vec<String> = bodies.iter().map(|b| expected(b)).collect();
    let mut senders = Vec::new();
    if http2 {
        for _ in 0..4 {
            let io = tokio::net::TcpStream::connect(addr)
                .await
                .map_err(|e| e.to_string())?;
            let (send, conn) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(io))
                    .await
                    .map_err(|e| e.to_string())?;
            tokio::spawn(conn);
            senders.push(send);
        }
    }
    let start = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..s.uploads {
        let body = bodies[i % 4].clone();
        let want = answers[i % 4].clone();
        let addr = addr.to_string();
        let h2 = senders.get(i % 4).cloned();
        tasks.push(tokio::spawn(async move {
            let begun = Instant::now();
            let mut send = match h2 {
                Some(s) => Sender::H2(s),
                None => Sender::connect_h1(&addr).await?,
            };
            let req = hyper::Request::post(format!("http://{addr}/upload"))
                .body(Full::new(body))
                .map_err(|e| e.to_string())?;
            let resp = send.send(req).await?;
            let status = resp.status();
            let text = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| e.to_string())?
                .to_bytes();
            if status != 200 || text != want.as_bytes() {
                return Err(format!(
                    "upload {i}: {status} {}",
                    String::from_utf8_lossy(&text)
                ));
            }
            Ok::<_, String>(begun.elapsed())
        }));
    }
    // Up to an hour in microseconds: a histogram made with `new` starts at a highest value
    // of 2 and `saturating_record` clamps to it rather than grow.
    let mut times = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3)
        .expect("valid bounds");
    for t in tasks {
        let took = t.await.map_err(|e| e.to_string())??;
        times.saturating_record(took.as_micros() as u64);
    }
    let elapsed = start.elapsed().as_secs_f64();
    let p99 = times.value_at_quantile(0.99) as f64 / 1e6;
    Ok((s.uploads as f64 / elapsed, p99))
}

/// Where an upload is sent: a connection of its own, or a stream of a shared one.
enum Sender {
    H1(hyper::client::conn::http1::SendRequest<Full<Bytes>>),
    H2(hyper::client::conn::http2::SendRequest<Full<Bytes>>),
}

impl Sender {
    async fn connect_h1(addr: &str) -> Result<Sender, String> {
        let io = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| e.to_string())?;
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        Ok(Sender::H1(send))
    }

    async fn send(
        &mut self,
        req: hyper::Request<Full<Bytes>>,
    ) -> Result<hyper::Response<hyper::body::Incoming>, String> {
        let sent = match self {
            Sender::H1(s) => s.send_request(req).await,
            Sender::H2(s) => s.send_request(req).await,
        };
        sent.map_err(|e| format!("sending an upload: {e}"))
    }
}

/// The flood rows of one round, one fresh server per protocol.
fn floods(mode: Mode, s: &Shape, round: usize) -> Result<Figures, String> {
    let mut figures = Vec::new();
    for http2 in [false, true] {
        let how = if http2 {
            "HTTP/2, 4 connections"
        } else {
            "HTTP/1.1, a connection each"
        };
        crate::harness::progress::status(&format!(
            "uploads round {round}: {} x {} MiB, {how}, {}",
            s.uploads,
            s.upload_size >> 20,
            mode.arg()
        ));
        let server = ChildServer::start("upload-server", &["--mode", mode.arg()])?;
        let rt = runtime()?;
        let (rate, p99) = rt.block_on(flood(&server.addr, http2, s))?;
        let peak = server.peak_rss() as f64 / MIB;
        drop(rt);
        server.stop()?;
        let param = format!(
            "{} uploads of {} MiB at once, {how}",
            s.uploads,
            s.upload_size >> 20
        );
        figures.push((param.clone(), "server peak RSS MiB", peak));
        figures.push((param.clone(), "bodies/s", rate));
        figures.push((param, "p99 ms per upload", p99 * 1000.0));
    }
    Ok(figures)
}

/// The small-JSON rows of one round: h2load over HTTP/1.1 and HTTP/2.
fn json(mode: Mode, s: &Shape, round: usize) -> Result<Figures, String> {
    crate::harness::progress::status(&format!(
        "uploads round {round}: 1 KiB JSON, {}",
        mode.arg()
    ));
    let dir = std::env::temp_dir().join(format!("tierpool-uploads-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let file = dir.join("object.json");
    let mut object = String::from("{");
    for i in 0.. {
        if object.len() > 1000 {
            break;
        }
        object.push_str(&format!("\"key{i}\":\"{}\",", "v".repeat(20)));
    }
    object.push_str("\"end\":0}");
    std::fs::write(&file, &object).map_err(|e| e.to_string())?;
    let server = ChildServer::start("upload-server", &["--mode", mode.arg()])?;
    let url = format!("http://{}/json", server.addr);
    let n = s.json_requests.to_string();
    let mut figures = Vec::new();
    for (args, how) in [
        (&["--h1", "-c50", "-m1"][..], "HTTP/1.1, 50 connections"),
        (&["-c10", "-m10"][..], "HTTP/2, 10 connections x 10 streams"),
    ] {
        let out = Command::new("h2load")
            .args(args)
            .args([
                "-t1",
                "-n",
                &n,
                "-H",
                "content-type: application/json",
                "-d",
            ])
            .arg(&file)
            .arg(&url)
            .output()
            .map_err(|e| format!("h2load: {e}"))?;
        let text = String::from_utf8_lossy(&out.stdout);
        let (rps, done) = super::http::parse_h2load(&text).map_err(|e| format!("h2load: {e}"))?;
        if done as usize != s.json_requests {
            return Err(format!("h2load: {done} of {n} requests succeeded"));
        }
        figures.push((format!("1 KiB JSON objects, {how}"), "requests/s", rps));
    }
    server.stop()?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(figures)
}

/// The trickle row of one round: connections each sending part of a declared body, a byte
/// per write; the server's RSS above idle per connection while they wait.
fn trickle(mode: Mode, s: &Shape, round: usize) -> Result<Figures, String> {
    crate::harness::progress::status(&format!(
        "uploads round {round}: {} trickling connections, {}",
        s.trickles,
        mode.arg()
    ));
    let server = ChildServer::start("upload-server", &["--mode", mode.arg()])?;
    let declared = 2 * s.trickled + 1;
    let mut conns = Vec::new();
    for _ in 0..s.trickles {
        let mut c = TcpStream::connect(&server.addr).map_err(|e| e.to_string())?;
        c.set_nodelay(true).map_err(|e| e.to_string())?;
        let head = format!(
            "POST /upload HTTP/1.1\r\nhost: localhost\r\ncontent-length: {declared}\r\n\r\n"
        );
        c.write_all(head.as_bytes()).map_err(|e| e.to_string())?;
        conns.push(c);
    }
    std::thread::sleep(Duration::from_millis(500));
    let idle = server.rss();
    for _ in 0..s.trickled {
        for c in &mut conns {
            c.write_all(b"x").map_err(|e| e.to_string())?;
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    let waiting = server.rss();
    drop(conns);
    server.stop()?;
    let per = waiting.saturating_sub(idle) as f64 / s.trickles as f64;
    Ok(vec![(
        format!(
            "{} connections each trickling {} bytes of a {declared}-byte body",
            s.trickles, s.trickled
        ),
        "RSS above idle, bytes per connection",
        per.max(f64::MIN_POSITIVE),
    )])
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
}

/// The medians of the rounds' figures, a record each.
fn records(mode: Mode, rounds: &[Figures]) -> Vec<Record> {
    let mut by: BTreeMap<(String, &'static str), Vec<f64>> = BTreeMap::new();
    for figures in rounds {
        for (param, metric, value) in figures {
            by.entry((param.clone(), metric)).or_default().push(*value);
        }
    }
    by.into_iter()
        .map(|((param, metric), mut values)| {
            values.sort_by(f64::total_cmp);
            let median = values[values.len() / 2];
            let mut r = Record::single(
                "uploads",
                mode.label(),
                "glibc",
                param,
                metric,
                median,
                BTreeMap::new(),
            );
            r.min = values[0];
            r.max = values[values.len() - 1];
            r.samples = values.len();
            r
        })
        .collect()
}

/// The `uploads` workload.
#[derive(Debug)]
pub struct Uploads;

impl super::Scenario for Uploads {
    fn name(&self) -> &'static str {
        "uploads"
    }

    /// No allocation counts: it measures a server of its own, which counts nothing.
    fn counts_allocations(&self) -> bool {
        false
    }

    fn describe(&self) -> &'static str {
        "HTTP request bodies under one memory budget: tierpool-axum's upload_server example (its own source, as a child of the report's binary), stock (axum's Bytes and Json extractors) and pooled (PooledBody and PooledJson under a 64 MiB budget), 16 MiB per body in both, a fresh server per row, mode and round, 3 interleaved rounds. 200 uploads of 8 MiB at once, over HTTP/1.1 (a connection each) and HTTP/2 (4 connections of 50 streams), from this process's hyper clients: the server's peak RSS, bodies/s, p99 per upload, every answer's length and CRC-32 checked. 1 KiB JSON objects through h2load over HTTP/1.1 (50 connections) and HTTP/2 (10 x 10 streams): requests/s. 200 connections each trickling 2,000 bytes of a declared 4,001-byte body a byte per write: the server's RSS above idle per connection while they wait."
    }

    fn weight(&self) -> u64 {
        120
    }

    fn contenders(&self) -> Vec<Entry> {
        Mode::ALL
            .iter()
            .map(|m| Entry::new(m.label(), m.setup()))
            .collect()
    }

    fn baseline(&self) -> String {
        Mode::Stock.label().into()
    }

    fn available(&self, _quick: bool) -> Result<(), String> {
        if super::http::h2load_available() {
            Ok(())
        } else {
            Err("h2load is not installed (apt-get install nghttp2-client)".into())
        }
    }

    fn run(&self, quick: bool) -> Result<Output, String> {
        let s = shape(quick);
        let _ = crate::harness::nofile::raise_nofile(4 * s.uploads as u64 + 1024);
        let mut rounds: BTreeMap<&str, Vec<Figures>> = BTreeMap::new();
        for round in 1..=s.rounds {
            for mode in Mode::ALL {
                let mut figures = floods(mode, &s, round)?;
                figures.extend(json(mode, &s, round)?);
                figures.extend(trickle(mode, &s, round)?);
                rounds.entry(mode.arg()).or_default().push(figures);
            }
        }
        let mut out = Output::default();
        for mode in Mode::ALL {
            out.records
                .extend(records(mode, rounds.get(mode.arg()).map_or(&[], |v| v)));
        }
        Ok(out)
    }

    fn child(&self, _: &Ctx, _: &super::ChildArgs) -> Result<Option<Output>, String> {
        Ok(None)
    }
}
