//! What an open gRPC stream keeps after one large message: stock tonic against the pooled path.
//!
//! `cargo run --release -p tierpool-bench --example grpc_retention [streams] [first MiB]`
//!
//! For each mode, a server runs as a child process (this program again, `serve MODE`) with one
//! client-streaming method. The client opens `streams` streams (default 200) over 4
//! connections; each sends one large message (default 3 MiB), then three of 100 bytes, and
//! stays open. Once the server has read every stream's fourth message, the server's RSS is
//! read from `/proc` (at once, and 5 s later with the streams still open), and compared with
//! its RSS before the streams: bytes kept per open stream. The server also prints its pool's
//! buffers out (taken and not returned) and the bytes it retains.
//!
//! stock: tonic's `Grpc::client_streaming` with `tonic_prost::ProstCodec` (tonic's
//! `Streaming<T>` and its per-stream buffer). pooled: the same method through
//! `tierpool::io::grpc::PooledMethods` (a `MessageReader` per stream).

use std::convert::Infallible;
use std::future::Future;
use std::io::{BufRead, BufReader};
use std::pin::Pin;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use tierpool::io::grpc::{PooledClient, PooledMethods, PooledStreaming};
use tierpool::BufferPool;
use tonic::body::Body;
use tonic::codegen::Service;
use tonic::server::NamedService;
use tonic::{Request, Response, Status, Streaming};

const PATH: &str = "/bench.Retain/Upload";
const CONNECTIONS: usize = 4;

#[derive(Clone, PartialEq, prost::Message)]
struct Chunk {
    #[prost(bytes = "bytes", tag = "1")]
    data: Bytes,
}

/// Counts a stream's messages; prints `ready` once a stream has had its fourth.
async fn count<S: futures_util::Stream<Item = Result<Chunk, Status>> + Unpin>(
    mut messages: S,
) -> u64 {
    let mut n = 0;
    while let Some(Ok(m)) = messages.next().await {
        std::hint::black_box(&m);
        n += 1;
        if n == 4 {
            println!("ready");
        }
    }
    n
}

/// The stock server: tonic's own client-streaming path, as generated code runs it.
#[derive(Clone)]
struct Stock;

impl NamedService for Stock {
    const NAME: &'static str = "bench.Retain";
}

impl Service<http::Request<Body>> for Stock {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<http::Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        Box::pin(async move {
            let codec = tonic_prost::ProstCodec::<Chunk, Chunk>::default();
            Ok(tonic::server::Grpc::new(codec)
                .client_streaming(StockUpload, request)
                .await)
        })
    }
}

/// The stock method, as generated code writes it: a service over tonic's `Streaming`.
struct StockUpload;

impl Service<Request<Streaming<Chunk>>> for StockUpload {
    type Response = Response<Chunk>;
    type Error = Status;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Chunk>, Status>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Streaming<Chunk>>) -> Self::Future {
        Box::pin(async move {
            let n = count(request.into_inner()).await;
            Ok(Response::new(Chunk {
                data: Bytes::from(n.to_string()),
            }))
        })
    }
}

/// The pooled server's inner service: no method of its own.
#[derive(Clone)]
struct Nothing;

impl NamedService for Nothing {
    const NAME: &'static str = "bench.Retain";
}

impl Service<http::Request<Body>> for Nothing {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<http::Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: http::Request<Body>) -> Self::Future {
        std::future::ready(Ok(Status::unimplemented("").into_http()))
    }
}

async fn upload(
    request: PooledStreaming<Chunk>,
) -> Result<Response<impl futures_util::Stream<Item = Result<Chunk, Status>>>, Status> {
    let n = count(request.into_inner()).await;
    Ok(Response::new(futures_util::stream::iter([Ok(Chunk {
        data: Bytes::from(n.to_string()),
    })])))
}

fn serve(mode: &str) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        println!("port {}", listener.local_addr().unwrap().port());
        let incoming = tonic::transport::server::TcpIncoming::from(listener);
        // As a server would configure it: idle buffers go back within about two decay
        // intervals (1 s) whatever the program does.
        let pool = BufferPool::builder().background_trim(true).build().unwrap();
        let mut server = tonic::transport::Server::builder().max_concurrent_streams(1000);
        let stats = pool.clone();
        tokio::spawn(async move {
            // The pool's figures for the parent, every half second.
            loop {
                tokio::time::sleep(Duration::from_millis(500)).await;
                let s = stats.stats();
                println!(
                    "pool out {} retained {}",
                    s.gets - s.returned,
                    s.retained_bytes
                );
            }
        });
        match mode {
            "stock" => server
                .add_service(Stock)
                .serve_with_incoming(incoming)
                .await
                .unwrap(),
            _ => server
                .add_service(PooledMethods::new(Nothing, pool).streaming(PATH, upload))
                .serve_with_incoming(incoming)
                .await
                .unwrap(),
        }
    });
}

fn rss(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<usize>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn measure(mode: &str, streams: usize, first: usize) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["serve", mode])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let port: u16 = lines
        .next()
        .unwrap()
        .unwrap()
        .trim_start_matches("port ")
        .parse()
        .unwrap();
    let ready = Arc::new(AtomicUsize::new(0));
    let pool_line = Arc::new(std::sync::Mutex::new(String::new()));
    {
        let (ready, pool_line) = (ready.clone(), pool_line.clone());
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                if line == "ready" {
                    ready.fetch_add(1, Ordering::SeqCst);
                } else {
                    *pool_line.lock().unwrap() = line;
                }
            }
        });
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut channels = Vec::new();
        for _ in 0..CONNECTIONS {
            let ch = tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
                .unwrap()
                .connect()
                .await
                .unwrap();
            channels.push(ch);
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let before = rss(pid);
        let mut senders = Vec::new();
        let mut calls = Vec::new();
        for i in 0..streams {
            let (tx, rx) = tokio::sync::mpsc::channel::<Chunk>(8);
            let requests = futures_util::stream::unfold(rx, |mut rx| async move {
                rx.recv().await.map(|m| (m, rx))
            });
            let mut client = PooledClient::new(channels[i % CONNECTIONS].clone(), BufferPool::new());
            calls.push(tokio::spawn(async move {
                let _ = client.streaming::<Chunk, Chunk, _>(PATH, Request::new(requests)).await;
            }));
            tx.send(Chunk { data: Bytes::from(vec![7u8; first]) }).await.unwrap();
            for _ in 0..3 {
                tx.send(Chunk { data: Bytes::from(vec![1u8; 100]) }).await.unwrap();
            }
            senders.push(tx);
        }
        let start = std::time::Instant::now();
        while ready.load(Ordering::SeqCst) < streams && start.elapsed() < Duration::from_secs(120) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let got = ready.load(Ordering::SeqCst);
        // At once, and after 5 s with every stream still open (the pool's idle buffers
        // released by then).
        for wait in [600, 5000] {
            tokio::time::sleep(Duration::from_millis(wait)).await;
            let after = rss(pid);
            let kept = after.saturating_sub(before);
            println!(
                "{mode:>6}, {got}/{streams} streams open after one {} MiB message each, {:.1} s later: server RSS {:.1} MiB -> {:.1} MiB, {:.1} KiB kept per open stream ({})",
                first >> 20,
                wait as f64 / 1000.0,
                before as f64 / 1048576.0,
                after as f64 / 1048576.0,
                kept as f64 / streams as f64 / 1024.0,
                pool_line.lock().unwrap(),
            );
        }
        drop(senders);
        for c in calls {
            let _ = c.await;
        }
    });
    let _ = child.kill();
    let _ = child.wait();
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("serve") {
        return serve(&args[1]);
    }
    let streams = args.first().and_then(|s| s.parse().ok()).unwrap_or(200);
    let first = args
        .get(1)
        .and_then(|s| s.parse::<usize>().ok())
        .unwrap_or(3)
        << 20;
    for mode in ["stock", "pooled"] {
        measure(mode, streams, first);
    }
}
