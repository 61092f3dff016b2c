//! A Redis-protocol (RESP2) key-value server whose RESP decoder and encoder are one tokio-util
//! `Decoder` and `Encoder`, run unchanged in two modes:
//!
//! - `--mode pooled`: tierpool's `FramedRead` and `FramedWrite`, whose buffers come from a
//!   pool and are held only while bytes are unread or unwritten;
//! - `--mode baseline`: tokio-util's own `FramedRead` and `FramedWrite` (a `BytesMut` each per
//!   connection, 8 KiB from the start, never shrunk).
//!
//! ```sh
//! cargo build --release -p tierpool --example kv_server --all-features
//! target/release/examples/kv_server --addr 127.0.0.1:6379 --mode pooled
//! redis-benchmark -p 6379 -t set,get -d 1024 -q
//! ```
//!
//! With `--tls-cert FILE --tls-key FILE` (PEM: the certificate chain, and its PKCS#8, PKCS#1
//! or SEC1 key; feature `rustls`) it speaks TLS 1.2 and 1.3: in `pooled` mode through
//! `tierpool::io::tls` (rustls 0.24, record buffers from the pool, an idle connection holding
//! none), in `baseline` mode through tokio-rustls (rustls 0.23 with its own buffers); the
//! same decoder and encoder over each stream's halves, and the same crypto (*ring*).
//!
//! ```sh
//! D=tierpool/tests/data/tls
//! target/release/examples/kv_server --mode pooled --tls-cert $D/server.pem --tls-key $D/server.key
//! redis-benchmark --tls --cacert $D/ca.pem -p 6379 -t set,get -d 1024 -q
//! ```
//!
//! It answers as Redis does: `PING` and `PING message`, `GET`, `SET key value`, `DEL key...`,
//! binary-safe values, pipelined commands (replies written together, flushed when no more
//! commands are buffered), the `CONFIG GET` that `redis-benchmark` sends first, and an
//! unknown command with `-ERR unknown command ...`. `INFO` reports the server's memory: its
//! RSS, and in `pooled` mode the bytes its connections hold in pooled buffers (exact: the
//! pool has a budget, which makes its account exact; by default one that never binds,
//! `--max-in-use BYTES` one that does: a connection then waits for room rather than the
//! server growing past it). Inline commands
//! (`PING\r\n` from a terminal) work too. A frame larger than 512 MiB is refused and its
//! connection closed. It serves until SIGINT or SIGTERM, then exits cleanly, and lifts its
//! `RLIMIT_NOFILE` soft limit to the hard one.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures_util::{FutureExt, SinkExt, Stream, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::codec::{Decoder, Encoder};

/// The largest frame (and bulk string) accepted: Redis's `proto-max-bulk-len`.
const MAX_FRAME: usize = 512 << 20;

/// A RESP2 reply.
#[derive(Debug, Clone, PartialEq)]
enum Reply {
    Simple(&'static str),
    Error(String),
    Integer(i64),
    Bulk(Option<Bytes>),
    Array(Vec<Reply>),
}

/// RESP2 for the server's side: decodes commands (arrays of bulk strings, or inline), encodes
/// replies. Resumable: a command that arrives in pieces is scanned once, not from its start
/// at every piece (its state is offsets into the unread bytes, which the framing may move).
#[derive(Debug, Default)]
struct Resp {
    /// How far the current command has been parsed: its arguments so far, as `(start, end)`
    /// offsets into the buffer, the count announced, and where parsing resumes.
    args: Vec<(usize, usize)>,
    count: Option<usize>,
    pos: usize,
}

/// The error of a frame the decoder refuses (the connection is closed after it).
#[derive(Debug)]
struct ProtocolError(String);

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

impl Decoder for Resp {
    type Item = Vec<Bytes>;
    type Error = ProtocolError;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        if buf.is_empty() {
            return Ok(None);
        }
        if buf[0] != b'*' {
            // An inline command: words up to the end of the line.
            let Some((text, next)) = line(buf, 0) else {
                if buf.len() > 64 << 10 {
                    return Err(ProtocolError("inline command too long".into()));
                }
                return Ok(None);
            };
            let words = text
                .split(|b| b.is_ascii_whitespace())
                .filter(|w| !w.is_empty())
                .map(Bytes::copy_from_slice)
                .collect();
            buf.advance(next);
            return Ok(Some(words));
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
        buf.advance(self.pos);
        self.count = None;
        self.pos = 0;
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

/// What the server shares between connections.
struct Server {
    db: Mutex<HashMap<Bytes, Bytes>>,
    mode: Mode,
    pool: tierpool::BufferPool,
    connections: AtomicUsize,
    tls: Option<tls::Acceptor>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    Pooled,
    Baseline,
}

impl Server {
    fn execute(&self, args: &[Bytes]) -> Reply {
        let Some(name) = args.first() else {
            return Reply::Error("ERR empty command".into());
        };
        let name = name.to_ascii_lowercase();
        let arity = |n: usize| args.len() == n;
        let wrong = || {
            Reply::Error(format!(
                "ERR wrong number of arguments for '{}' command",
                String::from_utf8_lossy(&name)
            ))
        };
        match &name[..] {
            b"ping" => match args.len() {
                1 => Reply::Simple("PONG"),
                2 => Reply::Bulk(Some(args[1].clone())),
                _ => wrong(),
            },
            b"get" if arity(2) => Reply::Bulk(self.db.lock().unwrap().get(&args[1]).cloned()),
            b"set" if arity(3) => {
                self.db
                    .lock()
                    .unwrap()
                    .insert(args[1].clone(), args[2].clone());
                Reply::Simple("OK")
            }
            b"del" if args.len() >= 2 => {
                let mut db = self.db.lock().unwrap();
                let n = args[1..].iter().filter(|k| db.remove(*k).is_some()).count();
                Reply::Integer(n as i64)
            }
            b"config" if args.len() == 3 && args[1].eq_ignore_ascii_case(b"get") => {
                // What redis-benchmark asks first.
                let value = match &args[2].to_ascii_lowercase()[..] {
                    b"save" => Some(""),
                    b"appendonly" => Some("no"),
                    _ => None,
                };
                Reply::Array(match value {
                    Some(v) => vec![
                        Reply::Bulk(Some(args[2].clone())),
                        Reply::Bulk(Some(Bytes::from(v))),
                    ],
                    None => vec![],
                })
            }
            b"info" => Reply::Bulk(Some(Bytes::from(self.info()))),
            b"get" | b"set" | b"del" | b"config" => wrong(),
            _ => {
                let mut e = format!(
                    "ERR unknown command '{}', with args beginning with:",
                    String::from_utf8_lossy(&args[0])
                );
                for a in args.iter().skip(1).take(8) {
                    let _ = write!(e, " '{}'", String::from_utf8_lossy(a));
                }
                Reply::Error(e)
            }
        }
    }

    /// `INFO`: the mode, the connections, the process's RSS and, pooled, what the pool holds.
    fn info(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "# kv_server\r");
        let _ = writeln!(s, "mode:{:?}\r", self.mode);
        let _ = writeln!(
            s,
            "connected_clients:{}\r",
            self.connections.load(Ordering::Relaxed)
        );
        let _ = writeln!(s, "keys:{}\r", self.db.lock().unwrap().len());
        let _ = writeln!(s, "rss_bytes:{}\r", rss_bytes());
        let stats = self.pool.stats();
        let budget = stats.budget.as_ref();
        let _ = writeln!(
            s,
            "pool_in_use_bytes:{}\r",
            budget.map_or(0, |b| b.in_use_bytes)
        );
        let _ = writeln!(s, "pool_retained_bytes:{}\r", stats.retained_bytes);
        // What the pool may hold at most: in use (the budget) and kept for reuse.
        let _ = writeln!(
            s,
            "pool_max_in_use_bytes:{}\r",
            self.pool.max_in_use_bytes().unwrap_or(0)
        );
        let _ = writeln!(
            s,
            "pool_max_retained_bytes:{}\r",
            self.pool.max_retained_bytes()
        );
        s
    }
}

/// The process's resident set, from `/proc/self/statm`.
fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// Serves one connection: frames from `frames`, replies through `sink`, replies flushed when
/// no further command is buffered (so pipelined commands get their replies in one write).
async fn serve<F, S>(server: &Server, mut frames: F, mut sink: S) -> Result<(), ProtocolError>
where
    F: Stream<Item = Result<Vec<Bytes>, ProtocolError>> + Unpin,
    S: futures_util::Sink<Reply, Error = ProtocolError> + Unpin,
{
    while let Some(command) = frames.next().await {
        let reply = match command {
            Ok(args) => server.execute(&args),
            Err(e) => {
                // A frame it cannot read: say so, and close the connection.
                let _ = sink.send(Reply::Error(format!("ERR {e}"))).await;
                return Err(e);
            }
        };
        sink.feed(reply).await?;
        // More commands already here? Answer them before writing.
        let mut next = frames.next().now_or_never();
        while let Some(Some(command)) = next {
            let reply = match command {
                Ok(args) => server.execute(&args),
                Err(e) => {
                    let _ = sink.send(Reply::Error(format!("ERR {e}"))).await;
                    return Err(e);
                }
            };
            sink.feed(reply).await?;
            next = frames.next().now_or_never();
        }
        sink.flush().await?;
        if let Some(None) = next {
            break; // the end of the stream
        }
    }
    Ok(())
}

/// Serves one connection over `read` and `write`, the halves of a socket or a TLS stream.
async fn serve_halves<R, W>(server: &Server, read: R, write: W) -> Result<(), ProtocolError>
where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
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

async fn connection(server: Arc<Server>, socket: TcpStream) {
    let _ = socket.set_nodelay(true);
    server.connections.fetch_add(1, Ordering::Relaxed);
    let served = match &server.tls {
        None => {
            let (read, write) = socket.into_split();
            serve_halves(&server, read, write).await
        }
        Some(acceptor) => acceptor.serve(&server, socket).await,
    };
    if let Err(e) = served {
        if std::env::var_os("KV_SERVER_VERBOSE").is_some() {
            eprintln!("connection closed: {e}");
        }
    }
    server.connections.fetch_sub(1, Ordering::Relaxed);
}

/// TLS: tierpool's stream in `pooled` mode, tokio-rustls in `baseline` mode.
#[cfg(feature = "rustls")]
mod tls {
    use std::io;
    use std::sync::Arc;
    use std::time::Duration;

    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use tokio::net::TcpStream;

    use super::{serve_halves, Mode, ProtocolError, Server};

    /// A handshake that takes longer is dropped (a client that stalls).
    const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

    pub(crate) enum Acceptor {
        Pooled(tierpool::io::tls::TlsAcceptor),
        Baseline(tokio_rustls::TlsAcceptor),
    }

    /// The certificate chain and key in `cert` and `key` (PEM), or a message that says
    /// what is wrong with them.
    fn load(
        cert: &str,
        key: &str,
    ) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
        let certs = CertificateDer::pem_file_iter(cert)
            .and_then(|it| it.collect::<Result<Vec<_>, _>>())
            .map_err(|e| format!("--tls-cert {cert}: {e}"))?;
        if certs.is_empty() {
            return Err(format!("--tls-cert {cert}: no certificate in it"));
        }
        let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("--tls-key {key}: {e}"))?;
        Ok((certs, key))
    }

    impl Acceptor {
        pub(crate) fn new(
            mode: Mode,
            cert: &str,
            key: &str,
            pool: &tierpool::BufferPool,
        ) -> Result<Acceptor, String> {
            let (certs, key) = load(cert, key)?;
            let bad = |e: &dyn std::fmt::Display| format!("--tls-cert/--tls-key: {e}");
            Ok(match mode {
                Mode::Pooled => {
                    let identity = rustls::crypto::Identity::from_cert_chain(certs)
                        .map_err(|e| bad(&format!("{e:?}")))?;
                    let config =
                        rustls::ServerConfig::builder(Arc::new(rustls_ring::DEFAULT_PROVIDER))
                            .with_no_client_auth()
                            .with_single_cert(Arc::new(identity), key)
                            .map_err(|e| bad(&e))?;
                    let acceptor =
                        tierpool::io::tls::TlsAcceptor::new(Arc::new(config), pool.clone())
                            .map_err(|e| bad(&e))?;
                    Acceptor::Pooled(acceptor)
                }
                Mode::Baseline => {
                    use tokio_rustls::rustls;
                    let provider = Arc::new(rustls::crypto::ring::default_provider());
                    let config = rustls::ServerConfig::builder_with_provider(provider)
                        .with_safe_default_protocol_versions()
                        .map_err(|e| bad(&e))?
                        .with_no_client_auth()
                        .with_single_cert(certs, key)
                        .map_err(|e| bad(&e))?;
                    Acceptor::Baseline(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
                }
            })
        }

        pub(crate) async fn serve(
            &self,
            server: &Server,
            socket: TcpStream,
        ) -> Result<(), ProtocolError> {
            match self {
                Acceptor::Pooled(a) => serve_stream(server, a.accept(socket)).await,
                Acceptor::Baseline(a) => serve_stream(server, a.accept(socket)).await,
            }
        }
    }

    /// Serves the stream `handshake` gives (dropped if it takes longer than
    /// `HANDSHAKE_TIMEOUT`) through its halves.
    async fn serve_stream<S>(
        server: &Server,
        handshake: impl std::future::Future<Output = io::Result<S>>,
    ) -> Result<(), ProtocolError>
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite,
    {
        let tls = tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake)
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out"))??;
        let (read, write) = tokio::io::split(tls);
        serve_halves(server, read, write).await
    }
}

/// Without the `rustls` feature: no TLS.
#[cfg(not(feature = "rustls"))]
mod tls {
    use super::{Mode, ProtocolError, Server};

    pub(crate) enum Acceptor {}

    impl Acceptor {
        pub(crate) fn new(
            _: Mode,
            _: &str,
            _: &str,
            _: &tierpool::BufferPool,
        ) -> Result<Acceptor, String> {
            Err("--tls-cert: built without the `rustls` feature".into())
        }

        pub(crate) async fn serve(
            &self,
            _: &Server,
            _: tokio::net::TcpStream,
        ) -> Result<(), ProtocolError> {
            match *self {}
        }
    }
}

/// Lifts the soft limit on open files to the hard one (10,000 connections need them).
fn raise_nofile() {
    // SAFETY: `getrlimit`/`setrlimit` read and write one `rlimit` struct we own.
    unsafe {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

fn usage() -> ! {
    eprintln!(
        "usage: kv_server --addr HOST:PORT --mode pooled|baseline [--tls-cert FILE --tls-key FILE] [--max-in-use BYTES]"
    );
    std::process::exit(2);
}

fn main() -> io::Result<()> {
    let mut addr = String::from("127.0.0.1:6379");
    let mut mode = Mode::Pooled;
    let (mut cert, mut key) = (None, None);
    let mut max_in_use: usize = 1 << 40;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--addr" => addr = args.next().unwrap_or_else(|| usage()),
            "--mode" => {
                mode = match args.next().as_deref() {
                    Some("pooled") => Mode::Pooled,
                    Some("baseline") => Mode::Baseline,
                    _ => usage(),
                }
            }
            "--tls-cert" => cert = Some(args.next().unwrap_or_else(|| usage())),
            "--tls-key" => key = Some(args.next().unwrap_or_else(|| usage())),
            "--max-in-use" => {
                max_in_use = match args.next().map(|v| v.parse()) {
                    Some(Ok(bytes)) => bytes,
                    _ => usage(),
                }
            }
            "--help" | "-h" => usage(),
            _ => usage(),
        }
    }
    raise_nofile();
    // The pool: the default configuration, a budget (by default one that never binds, which
    // still makes `INFO`'s bytes in use exact; `--max-in-use` sets one that does: connections
    // then wait for room instead of the server growing) and the background trimmer, so a
    // quiet server gives its memory back.
    let pool = match tierpool::BufferPool::builder()
        .name("kv_server")
        .max_in_use_bytes(max_in_use)
        .background_trim(true)
        .build()
    {
        Ok(pool) => pool,
        Err(e) => {
            eprintln!("kv_server: --max-in-use {max_in_use}: {e}");
            std::process::exit(2);
        }
    };
    let tls = match (cert, key) {
        (None, None) => None,
        (Some(cert), Some(key)) => match tls::Acceptor::new(mode, &cert, &key, &pool) {
            Ok(acceptor) => Some(acceptor),
            Err(e) => {
                eprintln!("kv_server: {e}");
                std::process::exit(1);
            }
        },
        _ => {
            eprintln!("kv_server: --tls-cert and --tls-key go together");
            std::process::exit(2);
        }
    };
    let tls_on = tls.is_some();
    let server = Arc::new(Server {
        db: Mutex::new(HashMap::new()),
        mode,
        pool,
        connections: AtomicUsize::new(0),
        tls,
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = TcpListener::bind(&addr).await?;
        println!(
            "kv_server listening on {} ({:?}{})",
            listener.local_addr()?,
            mode,
            if tls_on { ", TLS" } else { "" }
        );
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((socket, _)) => {
                        tokio::spawn(connection(Arc::clone(&server), socket));
                    }
                    // Out of descriptors, say: wait a little and go on.
                    Err(e) => {
                        eprintln!("accept: {e}");
                        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    }
                },
                _ = tokio::signal::ctrl_c() => break,
                _ = term.recv() => break,
            }
        }
        println!("kv_server: stopping");
        Ok::<_, io::Error>(())
    })?;
    rt.shutdown_timeout(std::time::Duration::from_millis(100));
    Ok(())
}
