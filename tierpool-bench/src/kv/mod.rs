//! `kv_server`: a Redis-protocol (RESP2) key-value server whose decoder and encoder are one
//! tokio-util `Decoder` and `Encoder`, run unchanged in two modes; the `redis` and `soak`
//! workloads' server.
//!
//! - `--mode pooled`: tierpool's `FramedRead` and `FramedWrite`, whose buffers come from a
//!   pool and are held only while bytes are unread or unwritten;
//! - `--mode baseline`: tokio-util's own `FramedRead` and `FramedWrite` (a `BytesMut` each per
//!   connection, 8 KiB from the start, never shrunk).
//!
//! ```sh
//! cargo build --release -p tierpool-bench --bin kv_server
//! target/release/kv_server --addr 127.0.0.1:6379 --mode pooled
//! redis-benchmark -p 6379 -t set,get -d 1024 -q
//! ```
//!
//! With `--framing connection` a connection reads and writes in the shape of mini-redis's
//! `Connection` instead ([`buffered`]): a read buffer (`BytesMut`, or tierpool's
//! `ReadBuffer`), the same parser over its bytes, and a buffered writer (tokio's, or
//! tierpool's `BufWriter`): the port the crate docs give for a server with its own parser.
//!
//! With `--tls-cert FILE --tls-key FILE` (PEM: the certificate chain, and its PKCS#8, PKCS#1
//! or SEC1 key) it speaks TLS 1.2 and 1.3 ([`tls`]): the same decoder and encoder over each
//! stream's halves.
//!
//! ```sh
//! D=tierpool-rustls/tests/data
//! target/release/kv_server --mode pooled --tls-cert $D/server.pem --tls-key $D/server.key
//! redis-benchmark --tls --cacert $D/ca.pem -p 6379 -t set,get -d 1024 -q
//! ```
//!
//! It answers as Redis does ([`server`]): `PING` and `PING message`, `GET`, `SET key value`,
//! `DEL key...`, binary-safe values, pipelined commands (replies written together, flushed
//! when no more commands are buffered), the `CONFIG GET` that `redis-benchmark` sends first,
//! inline commands (`PING\r\n` from a terminal), and an unknown command with `-ERR unknown
//! command ...`. `INFO` reports the server's memory: its RSS, and in `pooled` mode the bytes
//! its connections hold in pooled buffers (exact: the pool has a budget, which makes its
//! account exact; by default one that never binds, `--max-in-use BYTES` one that does: a
//! connection then waits for room rather than the server growing past it). A frame larger
//! than 512 MiB is refused and its connection closed. It serves until SIGINT or SIGTERM, then
//! exits cleanly, and lifts its `RLIMIT_NOFILE` soft limit to the hard one.
//!
//! The port a user makes is smaller than this server: tierpool's `examples/framed_port.rs`
//! shows it alone.

mod resp;
mod server;
mod tls;
mod buffered;
mod connection;

use std::collections::HashMap;
use std::io;
use std::process::ExitCode;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};

use tokio::net::TcpListener;

use server::Server;

/// Whose framing the connections use.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    Pooled,
    Baseline,
}

/// How a connection reads commands and writes replies, in either mode.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Framing {
    /// The codec in a `FramedRead` and a `FramedWrite` (tokio-util's or tierpool's).
    Codec,
    /// mini-redis's `Connection` shape: a read buffer, the parser over its bytes, a buffered
    /// writer (`buffered.rs`).
    Connection,
}

/// The command line.
struct Options {
    addr: String,
    mode: Mode,
    framing: Framing,
    tls: Option<(String, String)>,
    /// The pool's budget: by default one that never binds (1 TiB), which still makes
    /// `INFO`'s bytes in use exact.
    max_in_use: usize,
}

const USAGE: &str = "usage: kv_server [--addr HOST:PORT] [--mode pooled|baseline] \
[--framing codec|connection] [--tls-cert FILE --tls-key FILE] [--max-in-use BYTES]";

impl Options {
    fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
        let mut o = Options {
            addr: "127.0.0.1:6379".into(),
            mode: Mode::Pooled,
            framing: Framing::Codec,
            tls: None,
            max_in_use: 1 << 40,
        };
        let (mut cert, mut key) = (None, None);
        while let Some(a) = args.next() {
            let mut value = || args.next().ok_or_else(|| format!("{a} needs a value"));
            match a.as_str() {
                "--addr" => o.addr = value()?,
                "--mode" => {
                    o.mode = match value()?.as_str() {
                        "pooled" => Mode::Pooled,
                        "baseline" => Mode::Baseline,
                        m => return Err(format!("--mode {m}: pooled or baseline")),
                    }
                }
                "--framing" => {
                    o.framing = match value()?.as_str() {
                        "codec" => Framing::Codec,
                        "connection" => Framing::Connection,
                        f => return Err(format!("--framing {f}: codec or connection")),
                    }
                }
                "--tls-cert" => cert = Some(value()?),
                "--tls-key" => key = Some(value()?),
                "--max-in-use" => {
                    let v = value()?;
                    o.max_in_use = v
                        .parse()
                        .map_err(|_| format!("--max-in-use {v}: a number of bytes"))?;
                }
                _ => return Err(format!("unknown argument {a}")),
            }
        }
        o.tls = match (cert, key) {
            (None, None) => None,
            (Some(cert), Some(key)) => Some((cert, key)),
            _ => return Err("--tls-cert and --tls-key go together".into()),
        };
        Ok(o)
    }
}

/// `kv_server`'s `main`: `args` are its arguments (without the program's name).
pub fn server_main(args: impl Iterator<Item = String>) -> ExitCode {
    let args: Vec<String> = args.collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let options = match Options::parse(args.into_iter()) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("kv_server: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kv_server: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(o: Options) -> Result<(), String> {
    let _ = crate::nofile::raise_nofile(0);
    // The default configuration, the budget, and the background trimmer, so that a quiet
    // server gives its memory back.
    let pool = tierpool::BufferPool::builder()
        .name("kv_server")
        .max_in_use_bytes(o.max_in_use)
        .background_trim(true)
        .build()
        .map_err(|e| format!("--max-in-use {}: {e}", o.max_in_use))?;
    let tls = match &o.tls {
        None => None,
        Some((cert, key)) => Some(Arc::new(tls::Acceptor::new(o.mode, cert, key, &pool)?)),
    };
    let tls_on = tls.is_some();
    let server = Arc::new(Server {
        db: Mutex::new(HashMap::new()),
        mode: o.mode,
        framing: o.framing,
        pool,
        connections: AtomicUsize::new(0),
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("a tokio runtime: {e}"))?;
    let addr = o.addr.clone();
    let served = rt.block_on(async move {
        let listener = TcpListener::bind(&addr).await?;
        println!(
            "kv_server listening on {} ({:?}, {:?}{})",
            listener.local_addr()?,
            o.mode,
            o.framing,
            if tls_on { ", TLS" } else { "" }
        );
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((socket, _)) => {
                        let tls = tls.clone();
                        tokio::spawn(connection::connection(Arc::clone(&server), tls, socket));
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
    });
    rt.shutdown_timeout(std::time::Duration::from_millis(100));
    served.map_err(|e| format!("{}: {e}", o.addr))
}
