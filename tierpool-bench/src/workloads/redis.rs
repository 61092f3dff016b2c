//! `redis`: a real protocol server, ported as a user would. `kv_server` ([`crate::fixtures::kv`], a
//! Redis-protocol key-value server whose RESP decoder and encoder are one tokio-util `Decoder`
//! and `Encoder`) runs in two modes, `baseline` (tokio-util's `FramedRead` and `FramedWrite`:
//! a `BytesMut` each per connection, never shrunk) and `pooled` (tierpool's, whose buffers are
//! held only while bytes are unread or unwritten), and is measured the way its users would:
//!
//! - **idle connections**: this process opens N connections (10,000 in the full run; the
//!   server is a process of its own), each makes one `PING`, then all wait: the server's RSS
//!   per idle connection;
//! - **large values**: 1,000 of them each send one 64 KiB `SET` (of one key, so the database
//!   holds one value), then wait two decay intervals: the server's RSS kept above before;
//! - **trickle**: 1,000 fresh connections each send all but the last byte of a 4,000-byte
//!   `SET`, one byte per write (`TCP_NODELAY`), in turn: the server's RSS above idle while
//!   they wait, and in `pooled` mode the bytes its pool has out (exact: a budget that never
//!   binds), against the bytes pending;
//! - **throughput**: `redis-benchmark -t set` and `-t get` with 1 KiB and 64 KiB values, 50
//!   clients: requests/s, and the server's CPU time per request (`/proc/PID/stat`);
//! - **receives**: one more `redis-benchmark` run per mode with `strace -c` attached to the
//!   server: receive system calls per request.
//!
//! - **TLS** (rows named `TLS ...`): the server started with `--tls-cert`, `pooled` then
//!   running tierpool-rustls' stream (rustls 0.23, record buffers from the pool) and
//!   `baseline` tokio-rustls (rustls 0.23), the same decoder and encoder over each: the idle
//!   connections (handshake done, one `PING`, then idle), the large values and the
//!   `redis-benchmark --tls` runs again, this process a rustls client.
//! - **mini-redis's `Connection`** (rows named `mini-redis Connection: ...`): the server
//!   started with `--framing connection`, a read buffer with the same parser over its unread
//!   bytes and a buffered writer (`baseline`: a `BytesMut` filled by `read_buf` and tokio's
//!   `BufWriter`; `pooled`: `tierpool::io::ReadBuffer` and `tierpool::io::BufWriter`, the port
//!   the crate docs give), `redis-benchmark` SETs and GETs of 64 KiB values.
//!
//! Interleaved rounds, one server process per mode (and TLS or not) per round; medians over
//! the rounds.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use super::{Ctx, Entry};
use crate::harness::record::{Output, Record};
use crate::harness::server_child::ChildServer;
use crate::harness::procfs::Proc;

/// The modes `kv_server` runs in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Mode {
    Baseline,
    Pooled,
}

impl Mode {
    const ALL: [Mode; 2] = [Mode::Baseline, Mode::Pooled];

    pub(super) fn arg(self) -> &'static str {
        match self {
            Mode::Baseline => "baseline",
            Mode::Pooled => "pooled",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Mode::Baseline => "kv_server baseline (tokio-util FramedRead + FramedWrite)",
            Mode::Pooled => "kv_server pooled (tierpool FramedRead + FramedWrite)",
        }
    }

    fn setup(self) -> &'static str {
        match self {
            Mode::Baseline => "redis workload: kv_server (tierpool_bench::fixtures::kv) --mode baseline: its RESP Decoder and Encoder in tokio-util's FramedRead and FramedWrite over each connection's halves (a BytesMut each, 8 KiB from the start, grown by large frames and never shrunk); the TLS rows over tokio-rustls 0.26 (rustls 0.23, ring); the mini-redis Connection rows (--framing connection): mini-redis's shape, the same parser over a BytesMut of 4 KiB filled by read_buf, replies through tokio's BufWriter",
            Mode::Pooled => "redis workload: kv_server (tierpool_bench::fixtures::kv) --mode pooled: the same Decoder and Encoder in tierpool::io::codec's FramedRead and FramedWrite (buffers from a pool with a budget that never binds and the background trimmer; held only while bytes are unread or unwritten); the TLS rows over tierpool-rustls (rustls 0.23, ring; record buffers from the same pool); the mini-redis Connection rows: that shape ported as the crate docs say, tierpool::io::ReadBuffer and tierpool::io::BufWriter",
        }
    }
}

/// Sizes of the run: idle connections, long-lived ones sending a large value, trickling
/// connections, requests per redis-benchmark run (1 KiB, 64 KiB).
struct Shape {
    idle: usize,
    large: usize,
    trickle: usize,
    trickle_bytes: usize,
    requests: (usize, usize),
    rounds: usize,
}

fn shape(quick: bool) -> Shape {
    if quick {
        Shape {
            idle: 300,
            large: 50,
            trickle: 30,
            trickle_bytes: 4000,
            requests: (4000, 500),
            rounds: 1,
        }
    } else {
        Shape {
            idle: 10_000,
            large: 1_000,
            trickle: 1_000,
            trickle_bytes: 4000,
            requests: (100_000, 10_000),
            rounds: 3,
        }
    }
}

/// The value size of the large-value phase.
const LARGE: usize = 64 << 10;

/// The server's decay interval (tierpool's default): what "two intervals later" waits.
const INTERVAL: Duration = Duration::from_secs(1);

/// A running `kv_server` (this binary's `kv-server` subcommand, `tierpool_bench::fixtures::kv`).
pub(super) struct Server {
    child: ChildServer,
    pub(super) port: u16,
    /// It speaks TLS.
    tls: bool,
}

/// The test certificates (a CA, and a certificate it signed for `localhost`).
fn tls_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tierpool-rustls/tests/data")
        .join(name)
}

impl Server {
    fn start(mode: Mode, tls: bool) -> Result<Server, String> {
        Server::start_with(mode, tls, &[])
    }

    /// [`Server::start`] with further arguments (`--max-in-use BYTES`).
    pub(super) fn start_with(mode: Mode, tls: bool, more: &[&str]) -> Result<Server, String> {
        let mut args: Vec<std::ffi::OsString> = vec!["--mode".into(), mode.arg().into()];
        args.extend(more.iter().map(Into::into));
        if tls {
            args.push("--tls-cert".into());
            args.push(tls_file("server.pem").into());
            args.push("--tls-key".into());
            args.push(tls_file("server.key").into());
        }
        let child = ChildServer::start("kv-server", &args)?;
        let port = child.port();
        Ok(Server { child, port, tls })
    }

    /// Panics the server has reported so far.
    pub(super) fn panics(&self) -> usize {
        self.child.panics()
    }

    pub(super) fn pid(&self) -> u32 {
        self.child.pid()
    }

    /// The server's resident set.
    fn rss(&self) -> u64 {
        Proc::Pid(self.pid()).rss()
    }

    /// The server's CPU time, user and system.
    fn cpu(&self) -> Duration {
        Proc::Pid(self.pid()).cpu()
    }

    /// `INFO`'s field `name`.
    pub(super) fn info(&self, name: &str) -> Result<u64, String> {
        Ok(self.infos([name])?[0])
    }

    /// `INFO`'s fields `names`, from one reply (so they describe one moment, and one asking
    /// connection is counted in `connected_clients`).
    pub(super) fn infos<const N: usize>(&self, names: [&str; N]) -> Result<[u64; N], String> {
        let mut c = connect(self.port, self.tls)?;
        c.write_all(b"*1\r\n$4\r\nINFO\r\n")
            .map_err(|e| e.to_string())?;
        let text = read_bulk(&mut c)?;
        let mut values = [0; N];
        for (value, name) in values.iter_mut().zip(names) {
            *value = text
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{name}:"))?.trim().parse().ok())
                .ok_or_else(|| format!("INFO has no {name}: {text}"))?;
        }
        Ok(values)
    }

    pub(super) fn stop(self) -> Result<(), String> {
        self.child.stop()
    }
}

/// A connection to the server: plain, or a rustls client's.
pub(super) enum Conn {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Conn::Plain(s) => s.read(buf),
            Conn::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Conn::Plain(s) => s.write(buf),
            Conn::Tls(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Conn::Plain(s) => s.flush(),
            Conn::Tls(s) => s.flush(),
        }
    }
}

/// The TLS client's configuration: trusts the test CA.
fn tls_client_config() -> Result<std::sync::Arc<rustls::ClientConfig>, String> {
    use rustls::pki_types::{pem::PemObject, CertificateDer};
    static CONFIG: std::sync::OnceLock<std::sync::Arc<rustls::ClientConfig>> =
        std::sync::OnceLock::new();
    if let Some(c) = CONFIG.get() {
        return Ok(c.clone());
    }
    let ca = CertificateDer::from_pem_file(tls_file("ca.pem")).map_err(|e| e.to_string())?;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca).map_err(|e| e.to_string())?;
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(CONFIG.get_or_init(|| std::sync::Arc::new(config)).clone())
}

pub(super) fn connect(port: u16, tls: bool) -> Result<Conn, String> {
    let s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .map_err(|e| e.to_string())?;
    if !tls {
        return Ok(Conn::Plain(s));
    }
    let name = rustls::pki_types::ServerName::try_from("localhost").map_err(|e| e.to_string())?;
    let conn =
        rustls::ClientConnection::new(tls_client_config()?, name).map_err(|e| e.to_string())?;
    // The handshake runs with the first write and read.
    Ok(Conn::Tls(Box::new(rustls::StreamOwned::new(conn, s))))
}

/// Reads one reply line (`+OK`, `+PONG`, an error) and checks it is `want`.
pub(super) fn expect_line(c: &mut Conn, want: &[u8]) -> Result<(), String> {
    let mut got = Vec::new();
    let mut byte = [0u8];
    while !got.ends_with(b"\r\n") {
        c.read_exact(&mut byte).map_err(|e| format!("reply: {e}"))?;
        got.push(byte[0]);
    }
    if got != want {
        return Err(format!(
            "expected {:?}, got {:?}",
            String::from_utf8_lossy(want),
            String::from_utf8_lossy(&got)
        ));
    }
    Ok(())
}

/// Reads one bulk reply's bytes (`None` for a null bulk), checking its framing.
pub(super) fn read_bulk_bytes(c: &mut Conn) -> Result<Option<Vec<u8>>, String> {
    let mut head = Vec::new();
    let mut byte = [0u8];
    while !head.ends_with(b"\r\n") {
        c.read_exact(&mut byte).map_err(|e| format!("reply: {e}"))?;
        head.push(byte[0]);
    }
    if head == b"$-1\r\n" {
        return Ok(None);
    }
    let len: usize = std::str::from_utf8(&head[1..head.len() - 2])
        .ok()
        .filter(|_| head[0] == b'$')
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("not a bulk reply: {:?}", String::from_utf8_lossy(&head)))?;
    let mut body = vec![0u8; len + 2];
    c.read_exact(&mut body).map_err(|e| e.to_string())?;
    if !body.ends_with(b"\r\n") {
        return Err("a bulk reply without its CRLF".into());
    }
    body.truncate(len);
    Ok(Some(body))
}

/// Reads one bulk reply as text.
fn read_bulk(c: &mut Conn) -> Result<String, String> {
    let body = read_bulk_bytes(c)?.ok_or("a null bulk reply")?;
    String::from_utf8(body).map_err(|e| e.to_string())
}

/// `SET key value` in RESP, for any bytes.
pub(super) fn set(key: &str, value: &[u8]) -> Vec<u8> {
    let mut v = format!(
        "*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${}\r\n",
        key.len(),
        value.len()
    )
    .into_bytes();
    v.extend_from_slice(value);
    v.extend_from_slice(b"\r\n");
    v
}

/// `SET key value` with a value of `value_len` letters.
pub(super) fn set_command(key: &str, value_len: usize) -> Vec<u8> {
    let value: Vec<u8> = (0..value_len).map(|i| b'a' + (i % 26) as u8).collect();
    set(key, &value)
}

/// A `SET key value` of exactly `total` bytes in RESP (`total` large enough for the header).
pub(super) fn set_of_length(key: &str, total: usize) -> Vec<u8> {
    let mut value = total.saturating_sub(set_command(key, 0).len());
    // The bulk header's digits grow with the value: shorten it until the whole fits.
    while value > 0 && set_command(key, value).len() > total {
        value -= 1;
    }
    let v = set_command(key, value);
    debug_assert_eq!(v.len(), total);
    v
}

/// A `redis-benchmark` run of one test at one value size: requests/s.
fn benchmark(
    port: u16,
    tls: bool,
    test: &str,
    size: usize,
    requests: usize,
) -> Result<f64, String> {
    let mut cmd = Command::new("timeout");
    cmd.args(["300", "redis-benchmark", "-h", "127.0.0.1", "-p"])
        .arg(port.to_string());
    if tls {
        cmd.args(["--tls", "--cacert"]).arg(tls_file("ca.pem"));
    }
    let out = cmd
        .args(["-t", test, "-d"])
        .arg(size.to_string())
        .args(["-n", &requests.to_string(), "-c", "50", "--csv"])
        .stderr(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run redis-benchmark: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "redis-benchmark {test} -d {size} failed: {}",
            out.status
        ));
    }
    parse_csv_rps(&String::from_utf8_lossy(&out.stdout), test)
}

/// The requests/s of `test` in `redis-benchmark --csv` output (its second field).
fn parse_csv_rps(csv: &str, test: &str) -> Result<f64, String> {
    csv.lines()
        .find_map(|l| {
            let mut f = l.split(',').map(|x| x.trim_matches('"'));
            (f.next()?.eq_ignore_ascii_case(test)).then(|| f.next()?.parse::<f64>().ok())?
        })
        .filter(|r| r.is_finite() && *r > 0.0)
        .ok_or_else(|| format!("no requests/s for {test} in {csv:?}"))
}

/// `strace -c` attached to `pid` while `run` runs: the receive system calls it made (recvfrom,
/// read, recvmsg, readv), or `None` without strace.
fn receives_during(
    pid: u32,
    run: impl FnOnce() -> Result<(), String>,
) -> Result<Option<u64>, String> {
    let out = std::env::temp_dir().join(format!("tierpool-redis-strace-{pid}"));
    let Ok(mut strace) = Command::new("strace")
        .args(["-f", "-c", "-e", "trace=recvfrom,read,recvmsg,readv", "-o"])
        .arg(&out)
        .args(["-p", &pid.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    else {
        return Ok(None);
    };
    std::thread::sleep(Duration::from_millis(300)); // attached to every thread
    let ran = run();
    // SAFETY: `kill` with a pid of ours and a signal number.
    unsafe { libc::kill(strace.id() as i32, libc::SIGINT) };
    let _ = strace.wait();
    ran?;
    let summary = std::fs::read_to_string(&out).unwrap_or_default();
    let _ = std::fs::remove_file(&out);
    Ok(Some(parse_strace_calls(&summary)))
}

/// The `calls` of every row of an `strace -c` summary, summed (its "total" row excluded).
fn parse_strace_calls(summary: &str) -> u64 {
    summary
        .lines()
        .filter(|l| {
            let name = l.split_whitespace().last().unwrap_or("");
            matches!(name, "recvfrom" | "read" | "recvmsg" | "readv")
        })
        .filter_map(|l| {
            // % time, seconds, usecs/call, calls, [errors], syscall
            let f: Vec<&str> = l.split_whitespace().collect();
            f.get(3)?.parse::<u64>().ok()
        })
        .sum()
}

/// The rows of one round of one mode.
struct Rows {
    label: &'static str,
    /// `TLS ` for a TLS server's rows.
    prefix: &'static str,
    /// How the progress line names the mode.
    progress: String,
    records: Vec<Record>,
}

impl Rows {
    fn add(&mut self, param: &str, metric: &str, value: f64, extra: &[(&str, f64)]) {
        self.records.push(Record::single(
            "redis",
            self.label,
            "glibc",
            format!("{}{param}", self.prefix),
            metric,
            value,
            extra.iter().map(|&(k, v)| (k.to_string(), v)).collect(),
        ));
    }

    fn progress(&self, what: &str) {
        crate::harness::progress::status(&format!("redis ({}): {what}", self.progress));
    }
}

/// One round of one mode: every phase, its records.
/// The trickle and the receive counts run in the first round only: they take the most time
/// (millions of one-byte writes; a benchmark under strace) and vary the least.
/// With `tls`, the server speaks TLS, the rows are named `TLS ...`, and the trickle and the
/// strace run are left out (the TLS tests hold the trickle's bound; a receive there is a
/// record's, not a request's).
fn run_mode(
    mode: Mode,
    tls: bool,
    s: &Shape,
    quick: bool,
    first: bool,
) -> Result<Vec<Record>, String> {
    let server = Server::start(mode, tls)?;
    let first = first && !tls;
    let mut rows = Rows {
        label: mode.label(),
        prefix: if tls { "TLS " } else { "" },
        progress: format!("{}{}", mode.arg(), if tls { ", TLS" } else { "" }),
        records: Vec::new(),
    };
    std::thread::sleep(Duration::from_millis(200));
    idle_and_large(&server, tls, s, &mut rows)?;
    if first {
        trickle(&server, mode, s, quick, &mut rows)?;
    }
    // Throughput and CPU per request.
    for (size, requests) in [(1024, s.requests.0), (LARGE, s.requests.1)] {
        for test in ["set", "get"] {
            rows.progress(&format!("redis-benchmark -t {test} -d {size}"));
            let rate = throughput(&server, test, size, requests)?;
            rows.add(
                &rate.param,
                "us/request (1/throughput)",
                rate.us,
                &rate.extra(),
            );
        }
    }
    // Receive system calls per request (strace attached: slower, so a run of its own).
    if first {
        rows.progress("receives per request (strace)");
        let n = s.requests.0 / 4;
        let calls = receives_during(server.pid(), || {
            benchmark(server.port, false, "get", 1024, n).map(|_| ())
        })?;
        if let Some(calls) = calls {
            rows.add(
                "receives (GET 1 KiB under strace)",
                "receive syscalls per request",
                (calls as f64 / n as f64).max(f64::MIN_POSITIVE),
                &[("receive syscalls", calls as f64)],
            );
        }
    }
    server.stop()?;
    Ok(rows.records)
}

/// `idle` connections opened and left idle, then one large value set on `large` of them:
/// RSS per idle connection, and what the large values leave behind.
fn idle_and_large(server: &Server, tls: bool, s: &Shape, rows: &mut Rows) -> Result<(), String> {
    rows.progress(&format!("{} idle connections", s.idle));
    let before = server.rss();
    let mut idle = Vec::with_capacity(s.idle);
    for _ in 0..s.idle {
        let mut c = connect(server.port, tls)?;
        c.write_all(b"*1\r\n$4\r\nPING\r\n")
            .map_err(|e| e.to_string())?;
        idle.push(c);
    }
    for c in &mut idle {
        expect_line(c, b"+PONG\r\n")?;
    }
    std::thread::sleep(2 * INTERVAL + Duration::from_millis(500));
    let with_idle = server.rss();
    let per_conn = with_idle.saturating_sub(before) as f64 / s.idle as f64;
    rows.add(
        &format!("{} idle connections", s.idle),
        "RSS bytes per idle connection",
        per_conn.max(1.0),
        &[("RSS MiB", with_idle as f64 / MIB)],
    );

    // One large value on each of `large` long-lived connections.
    rows.progress(&format!("a 64 KiB SET on each of {} connections", s.large));
    let set = set_command("big", LARGE);
    for c in idle.iter_mut().take(s.large) {
        c.write_all(&set).map_err(|e| e.to_string())?;
    }
    for c in idle.iter_mut().take(s.large) {
        expect_line(c, b"+OK\r\n")?;
    }
    std::thread::sleep(2 * INTERVAL + Duration::from_millis(500));
    let after_large = server.rss();
    let kept = after_large as f64 - with_idle as f64;
    rows.add(
        &format!("64 KiB SET on {} connections, 2 s later", s.large),
        "RSS MiB",
        after_large as f64 / MIB,
        &[("RSS kept MiB", kept.max(0.0) / MIB)],
    );
    drop(idle);
    std::thread::sleep(Duration::from_millis(500));
    Ok(())
}

/// All but the last byte of a SET on each of `trickle` connections, one byte per write, in
/// turn: RSS, and what the pool holds for the pending bytes.
fn trickle(
    server: &Server,
    mode: Mode,
    s: &Shape,
    quick: bool,
    rows: &mut Rows,
) -> Result<(), String> {
    rows.progress(&format!(
        "{} connections trickling {} bytes",
        s.trickle, s.trickle_bytes
    ));
    let base = server.rss();
    let frame = set_of_length("trickle", s.trickle_bytes);
    let frame = &frame[..];
    let mut conns = (0..s.trickle)
        .map(|_| connect(server.port, false))
        .collect::<Result<Vec<_>, _>>()?;
    for i in 0..frame.len() - 1 {
        for c in &mut conns {
            c.write_all(&frame[i..i + 1]).map_err(|e| e.to_string())?;
        }
    }
    std::thread::sleep(Duration::from_millis(if quick { 300 } else { 1000 }));
    let trickling = server.rss();
    let pending = (frame.len() - 1) * s.trickle;
    let mut extra = vec![
        ("pending KiB", pending as f64 / 1024.0),
        (
            "RSS above idle MiB",
            trickling.saturating_sub(base) as f64 / MIB,
        ),
    ];
    if mode == Mode::Pooled {
        let held = server.info("pool_in_use_bytes")?;
        extra.push(("held KiB", held as f64 / 1024.0));
        extra.push(("held / pending", held as f64 / pending as f64));
    }
    rows.add(
        &format!("{} connections trickling {} B", s.trickle, frame.len()),
        "RSS MiB",
        trickling as f64 / MIB,
        &extra,
    );
    for c in &mut conns {
        c.write_all(&frame[frame.len() - 1..])
            .map_err(|e| e.to_string())?;
    }
    for c in &mut conns {
        expect_line(c, b"+OK\r\n")?;
    }
    Ok(())
}

/// What one `redis-benchmark` run measured: its row's name, the time per request
/// (1/throughput), requests/s and the server's CPU time per request.
struct Rate {
    param: String,
    us: f64,
    rps: f64,
    cpu_us: f64,
}

impl Rate {
    /// The row's figures beside its time.
    fn extra(&self) -> [(&'static str, f64); 2] {
        [("req/s", self.rps), ("CPU us/request", self.cpu_us)]
    }
}

/// One `redis-benchmark` run of `test` with `size`-byte values against `server`.
fn throughput(server: &Server, test: &str, size: usize, requests: usize) -> Result<Rate, String> {
    let cpu0 = server.cpu();
    let rps = benchmark(server.port, server.tls, test, size, requests)?;
    let cpu = server.cpu().saturating_sub(cpu0);
    Ok(Rate {
        param: format!(
            "{} {}",
            test.to_uppercase(),
            crate::workloads::size_label(size)
        ),
        us: 1e6 / rps,
        rps,
        cpu_us: cpu.as_secs_f64() * 1e6 / requests as f64,
    })
}

/// One round of one mode in mini-redis's `Connection` shape (`kv_server --framing
/// connection`): a read buffer, the same parser over its bytes, a buffered writer;
/// `redis-benchmark` SETs and GETs of 64 KiB values.
fn run_connection_shape(mode: Mode, s: &Shape) -> Result<Vec<Record>, String> {
    let server = Server::start_with(mode, false, &["--framing", "connection"])?;
    let mut records = Vec::new();
    for test in ["set", "get"] {
        crate::harness::progress::status(&format!(
            "redis ({}, mini-redis's Connection): redis-benchmark -t {test} -d {LARGE}",
            mode.arg()
        ));
        let rate = throughput(&server, test, LARGE, s.requests.1)?;
        records.push(Record::single(
            "redis",
            mode.label(),
            "glibc",
            format!("mini-redis Connection: {}", rate.param),
            "us/request (1/throughput)",
            rate.us,
            rate.extra().map(|(k, v)| (k.to_string(), v)).into(),
        ));
    }
    server.stop()?;
    Ok(records)
}

const MIB: f64 = (1 << 20) as f64;

/// The `redis` workload.
#[derive(Debug)]
pub struct Redis;

impl super::Scenario for Redis {
    fn name(&self) -> &'static str {
        "redis"
    }

    /// No allocation counts: it measures a server of its own, which counts nothing.
    fn counts_allocations(&self) -> bool {
        false
    }

    fn describe(&self) -> &'static str {
        "A real protocol server, ported as a user would: kv_server (this crate's, tierpool_bench::fixtures::kv), a Redis-protocol (RESP2) key-value server whose decoder and encoder are one tokio-util Decoder and Encoder, in two modes: baseline (tokio-util's FramedRead and FramedWrite: a BytesMut each per connection) and pooled (tierpool::io::codec's, buffers held only while bytes are unread or unwritten). One server process per mode and round (3 interleaved rounds; the trickle and the strace run in the first only), driven from this process and by redis-benchmark: 10,000 connections that each PING and then idle (RSS per idle connection, two decay intervals later), one 64 KiB SET of one key on each of 1,000 of them (RSS two intervals later, and kept above idle), 1,000 fresh connections each sending all but the last byte of a 4,000-byte SET one byte per write (RSS while they wait; pooled: the bytes the pool has out, exact, against the bytes pending), redis-benchmark -t set and -t get at 1 KiB and 64 KiB values with 50 clients (per request: 1/throughput, requests/s, the server's CPU time), and one redis-benchmark GET run with strace -c attached to the server (receive system calls per request). Rows named mini-redis Connection: the server started with --framing connection, mini-redis's Connection shape (a read buffer, the same parser over its unread bytes, a buffered writer; baseline BytesMut and tokio's BufWriter, pooled ReadBuffer and tierpool's BufWriter), redis-benchmark -t set and -t get at 64 KiB. Rows named TLS: the server started with --tls-cert (pooled: tierpool-rustls, baseline: tokio-rustls, over one rustls 0.23 configuration; ring), the idle connections (a completed handshake and a PING, then idle; this process a rustls client), the large values and redis-benchmark --tls again."
    }

    fn weight(&self) -> u64 {
        150
    }

    fn contenders(&self) -> Vec<Entry> {
        Mode::ALL
            .iter()
            .map(|m| Entry::new(m.label(), m.setup()))
            .collect()
    }

    fn baseline(&self) -> String {
        Mode::Baseline.label().into()
    }

    fn available(&self, _quick: bool) -> Result<(), String> {
        match Command::new("redis-benchmark").arg("--version").output() {
            Ok(o) if o.status.success() => Ok(()),
            _ => Err("redis-benchmark not found (apt-get install redis-tools)".into()),
        }
    }

    fn run(&self, quick: bool) -> Result<Output, String> {
        let s = shape(quick);
        crate::harness::nofile::raise_nofile((s.idle + 64) as u64)
            .map_err(|e| format!("the redis workload opens {} connections: {e}", s.idle))?;
        let mut records = Vec::new();
        for round in 1..=s.rounds {
            for mode in Mode::ALL {
                crate::harness::progress::status(&format!(
                    "redis round {round}/{}: {} TLS",
                    s.rounds,
                    mode.arg()
                ));
                records.extend(run_mode(mode, true, &s, quick, round == 1)?);
            }
            for mode in Mode::ALL {
                crate::harness::progress::status(&format!(
                    "redis round {round}/{}: {}",
                    s.rounds,
                    mode.arg()
                ));
                records.extend(run_mode(mode, false, &s, quick, round == 1)?);
            }
            for mode in Mode::ALL {
                records.extend(run_connection_shape(mode, &s)?);
            }
        }
        Ok(Output {
            records: crate::harness::record::merge_rounds(records),
            timelines: vec![],
        })
    }

    fn child(&self, _ctx: &Ctx, _args: &super::ChildArgs) -> Result<Option<Output>, String> {
        Err("the redis workload runs no child of this binary".into())
    }

    fn chart(&self, path: &Path, data: &super::ChartData) -> Result<(), crate::harness::chart::Error> {
        crate::harness::chart::panels_of_extras(
            path,
            "redis: kv_server, tokio-util's framing against tierpool's",
            data.rows,
            &[
                ("RSS MiB", "server RSS (MiB)"),
                ("req/s", "requests/s (redis-benchmark)"),
                ("CPU us/request", "server CPU per request (us)"),
            ],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_benchmark_csv_is_read() {
        let csv = "\"test\",\"rps\",\"avg_latency_ms\"\n\"SET\",\"91575.09\",\"0.285\"\n\"GET\",\"87412.59\",\"0.299\"\n";
        assert_eq!(parse_csv_rps(csv, "set").unwrap(), 91575.09);
        assert_eq!(parse_csv_rps(csv, "get").unwrap(), 87412.59);
        assert!(parse_csv_rps(csv, "incr").is_err());
        assert!(parse_csv_rps("\"SET\",\"0\"", "set").is_err());
    }

    #[test]
    fn strace_summaries_are_summed() {
        let s = "% time     seconds  usecs/call     calls    errors syscall\n------ ----------- ----------- --------- --------- ----------------\n 60.00    0.001000           5       200           recvfrom\n 40.00    0.000500           2       100        10 read\n------ ----------- ----------- --------- --------- ----------------\n100.00    0.001500           5       300        10 total\n";
        assert_eq!(parse_strace_calls(s), 300);
    }

    #[test]
    fn set_commands_are_resp() {
        assert_eq!(
            set_command("k", 3),
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\nabc\r\n"
        );
        for total in [100, 999, 1000, 4000, 10_005] {
            assert_eq!(set_of_length("trickle", total).len(), total);
        }
    }
}
