//! Pooled buffers in monoio's operations (feature `monoio`), on a real io_uring: a file read
//! into `PooledBuf`s and checked byte by byte, a `PooledBytes` slice written to a file, and a
//! loopback TCP echo. Where the kernel refuses io_uring the tests say so and return, unless
//! `TIERPOOL_REQUIRE_IO_URING` is set (as `.ci/run` sets it).

#![cfg(all(feature = "monoio", target_os = "linux", not(miri)))]

use std::future::Future;

use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use tierpool::BufferPool;

use crate::common::{io_uring_refused, random_bytes as data, temp_path};

/// Runs `f` on a monoio io_uring runtime; false (with a message) where io_uring is refused.
fn run<F: Future<Output = ()>>(f: F) -> bool {
    match monoio::RuntimeBuilder::<monoio::IoUringDriver>::new()
        .enable_timer()
        .build()
    {
        Ok(mut rt) => {
            rt.block_on(f);
            true
        }
        Err(e) => {
            io_uring_refused(e);
            false
        }
    }
}

#[test]
fn a_file_is_read_into_pooled_buffers_and_a_slice_written_back() {
    let src = temp_path("read");
    let dst = temp_path("write");
    let content = data(1, 3 << 20);
    std::fs::write(&src, &content).unwrap();
    let pool = BufferPool::new();
    let ran = run(async {
        let file = monoio::fs::File::open(&src).await.unwrap();
        let mut pos = 0usize;
        while pos < content.len() {
            let (n, buf) = file.read_at(pool.get(256 << 10), pos as u64).await;
            let n = n.unwrap();
            assert!(n > 0 && buf.len() == n);
            assert_eq!(&buf[..], &content[pos..pos + n]);
            pos += n;
        }
        file.close().await.unwrap();
        let mut buf = pool.get(100_000);
        buf.extend_from_slice(&content[..100_000]);
        let shared = buf.into_shared();
        let middle = tierpool::PooledBytes::slice(&shared, 1000..90_000);
        let out = monoio::fs::File::create(&dst).await.unwrap();
        let (r, back) = out.write_all_at(middle, 0).await;
        r.unwrap();
        assert_eq!(back.len(), 89_000);
        out.sync_all().await.unwrap();
        out.close().await.unwrap();
    });
    if ran {
        assert_eq!(std::fs::read(&dst).unwrap(), &content[1000..90_000]);
        std::fs::remove_file(&dst).unwrap();
    }
    std::fs::remove_file(&src).unwrap();
    let s = pool.stats();
    assert_eq!(s.gets, s.returned, "{s}");
}

#[test]
fn a_loopback_tcp_echo_through_pooled_buffers() {
    let pool = BufferPool::new();
    run(async {
        let listener = monoio::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server_pool = pool.clone();
        let server = monoio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            loop {
                let (n, buf) = s.read(server_pool.get(16 << 10)).await;
                if n.unwrap() == 0 {
                    break;
                }
                let (r, _) = s.write_all(buf).await; // echo the pooled buffer itself
                r.unwrap();
            }
        });
        let mut c = monoio::net::TcpStream::connect(addr).await.unwrap();
        for round in 0..20u64 {
            let msg = data(round, 1 + (round as usize * 7919) % (48 << 10));
            let mut out = pool.get(msg.len());
            out.extend_from_slice(&msg);
            let (r, _) = c.write_all(out.into_shared()).await;
            r.unwrap();
            let mut echoed = Vec::new();
            while echoed.len() < msg.len() {
                let (n, buf) = c.read(pool.get(16 << 10)).await;
                assert!(n.unwrap() > 0, "connection closed early");
                echoed.extend_from_slice(&buf);
            }
            assert_eq!(echoed, msg);
        }
        drop(c);
        server.await;
    });
    let s = pool.stats();
    assert_eq!(s.gets, s.returned, "{s}");
}
