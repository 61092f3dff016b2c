//! What a pooled router holds: a body trickled a byte per write holds pooled buffers for at
//! most twice the bytes sent (and the smallest tier) while it waits, and idle keep-alive
//! connections hold none. The server runs in this process, so the pool's own figures are read.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use axum::routing::post;
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tierpool::BufferPool;
use tierpool_axum::PooledBody;

/// A pooled upload router served on a free port by a runtime of its own thread.
fn serve(pool: &BufferPool) -> (u16, tokio::runtime::Runtime) {
    let app = Router::new()
        .route(
            "/upload",
            post(|PooledBody(b): PooledBody| async move { b.len().to_string() }),
        )
        .with_state(pool.clone());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    rt.spawn(async move {
        loop {
            let (socket, _) = listener.accept().await.unwrap();
            let service = TowerToHyperService::new(app.clone());
            tokio::spawn(async move {
                let _ = Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(socket), service)
                    .await;
            });
        }
    });
    (port, rt)
}

/// Pooled buffers out (in use, less what reservations hold unspent).
fn held(pool: &BufferPool) -> usize {
    let b = pool.stats().budget.unwrap();
    b.in_use_bytes - b.reserved_bytes
}

#[test]
fn a_trickled_body_holds_at_most_twice_what_was_sent() {
    let pool = BufferPool::builder()
        .max_in_use_bytes(64 << 20)
        .build()
        .unwrap();
    let floor = pool.tier_sizes()[0];
    let (port, _rt) = serve(&pool);
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_nodelay(true).unwrap();
    let declared = 100_000;
    write!(
        c,
        "POST /upload HTTP/1.1\r\nhost: x\r\ncontent-length: {declared}\r\n\r\n"
    )
    .unwrap();
    let mut sent = 0;
    for step in [1, 10, 100, 255, 256, 257, 1000, 3000, 10_000, 40_000] {
        while sent < step {
            c.write_all(b"y").unwrap();
            sent += 1;
        }
        std::thread::sleep(Duration::from_millis(30));
        let h = held(&pool);
        assert!(h <= (2 * sent).max(floor), "{h} bytes held for {sent} sent");
        let reserved = pool.stats().budget.unwrap().reserved_bytes;
        assert!(reserved <= declared * 5 / 4 + 4096, "{reserved} reserved");
    }
    c.write_all(&vec![b'y'; declared - sent]).unwrap();
    let mut answer = [0; 512];
    let n = c.read(&mut answer).unwrap();
    assert!(String::from_utf8_lossy(&answer[..n]).ends_with("100000"));
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(pool.stats().budget.unwrap().in_use_bytes, 0);
}

#[test]
fn idle_keep_alive_connections_hold_no_pooled_buffer() {
    let pool = BufferPool::builder()
        .max_in_use_bytes(64 << 20)
        .build()
        .unwrap();
    let (port, _rt) = serve(&pool);
    let mut conns = Vec::new();
    for i in 0..20 {
        let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let body = vec![b'z'; 1000 * (i + 1)];
        write!(
            c,
            "POST /upload HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n",
            body.len()
        )
        .unwrap();
        c.write_all(&body).unwrap();
        let mut answer = Vec::new();
        let mut chunk = [0; 512];
        while !String::from_utf8_lossy(&answer).ends_with(&body.len().to_string()) {
            let n = c.read(&mut chunk).unwrap();
            assert!(n > 0, "the server closed a keep-alive connection");
            answer.extend_from_slice(&chunk[..n]);
        }
        conns.push(c); // kept open, idle
    }
    std::thread::sleep(Duration::from_millis(50));
    let b = pool.stats().budget.unwrap();
    assert_eq!(
        (b.in_use_bytes, b.reserved_bytes),
        (0, 0),
        "20 idle keep-alive connections"
    );
    drop(conns);
}
