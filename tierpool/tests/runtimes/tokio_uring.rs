//! Pooled buffers in tokio-uring's operations (feature `tokio-uring`), on a real io_uring: a
//! file read into `PooledBuf`s and checked byte by byte, a `PooledBytes` slice written to a
//! file, a loopback TCP echo, a read dropped while the kernel owns its buffer (not back
//! before the read completes, then back exactly once), and reads bounded by a slice. Where the kernel refuses io_uring the tests say so and return, unless
//! `TIERPOOL_REQUIRE_IO_URING` is set (as `.ci/run` sets it).

#![cfg(all(feature = "tokio-uring", target_os = "linux", not(miri)))]

use std::future::Future;
use std::task::Poll;
use std::time::Duration;

use tierpool::BufferPool;
use tokio_uring::buf::BoundedBuf;

use crate::common::{io_uring_refused, random_bytes as data, temp_path};

/// Runs `f` on a tokio-uring runtime; false (with a message) where io_uring is refused.
fn run<F: Future<Output = ()>>(f: F) -> bool {
    match tokio_uring::Runtime::new(&tokio_uring::builder()) {
        Ok(rt) => {
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
fn a_file_is_read_into_pooled_buffers_and_every_byte_checked() {
    let path = temp_path("read");
    let content = data(1, 3 << 20);
    std::fs::write(&path, &content).unwrap();
    let pool = BufferPool::new();
    run(async {
        let file = tokio_uring::fs::File::open(&path).await.unwrap();
        let mut pos = 0usize;
        while pos < content.len() {
            let (n, buf) = file.read_at(pool.get(256 << 10), pos as u64).await;
            let n = n.unwrap();
            assert!(n > 0 && buf.len() == n);
            assert_eq!(&buf[..], &content[pos..pos + n]);
            pos += n;
        }
        file.close().await.unwrap();
    });
    std::fs::remove_file(&path).unwrap();
    let s = pool.stats();
    assert_eq!(s.gets, s.returned, "{s}");
}

#[test]
fn a_slice_of_pooled_bytes_is_written_to_a_file() {
    let path = temp_path("write");
    let pool = BufferPool::new();
    let content = data(2, 100_000);
    let ran = run(async {
        let mut buf = pool.get(content.len());
        buf.extend_from_slice(&content);
        let shared = buf.into_shared();
        // By its path: with `BoundedBuf` in scope, `shared.slice(..)` is tokio-uring's slice,
        // which takes the view by value.
        let middle = tierpool::PooledBytes::slice(&shared, 1000..90_000);
        let file = tokio_uring::fs::File::create(&path).await.unwrap();
        let (r, back) = file.write_all_at(middle, 0).await;
        r.unwrap();
        assert_eq!(back.len(), 89_000);
        file.sync_all().await.unwrap();
        file.close().await.unwrap();
        drop((back, shared));
    });
    if ran {
        assert_eq!(std::fs::read(&path).unwrap(), &content[1000..90_000]);
        std::fs::remove_file(&path).unwrap();
        let s = pool.stats();
        assert_eq!((s.gets, s.returned), (1, 1));
    }
}

#[test]
fn a_loopback_tcp_echo_through_pooled_buffers() {
    let pool = BufferPool::new();
    run(async {
        let listener = tokio_uring::net::TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let server_pool = pool.clone();
        let server = tokio_uring::spawn(async move {
            let (s, _) = listener.accept().await.unwrap();
            loop {
                let (n, buf) = s.read(server_pool.get(16 << 10)).await;
                if n.unwrap() == 0 {
                    break;
                }
                let (r, _) = s.write_all(buf).await; // echo the pooled buffer itself
                r.unwrap();
            }
        });
        let c = tokio_uring::net::TcpStream::connect(addr).await.unwrap();
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
        c.shutdown(std::net::Shutdown::Write).unwrap();
        server.await.unwrap();
    });
    let s = pool.stats();
    assert_eq!(s.gets, s.returned, "{s}");
}

#[test]
fn a_cancelled_read_gives_its_buffer_back_once_after_the_completion() {
    let pool = BufferPool::new();
    run(async {
        let listener = tokio_uring::net::TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let accept = tokio_uring::spawn(async move { listener.accept().await.unwrap().0 });
        let client = tokio_uring::net::TcpStream::connect(addr).await.unwrap();
        let server = accept.await.unwrap();
        let mut read = Box::pin(client.read(pool.get(4096)));
        let first = std::future::poll_fn(|cx| Poll::Ready(read.as_mut().poll(cx))).await;
        assert!(first.is_pending(), "nothing was sent yet");
        drop(read); // dropped while the kernel owns the buffer
                    // tokio-uring does not cancel the read: the kernel keeps the buffer until the read
                    // completes, and the buffer must not come back before.
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(
            pool.stats().returned,
            0,
            "back while the kernel still owned it"
        );
        let (r, _) = server
            .write_all(b"taken by the orphaned read".to_vec())
            .await;
        r.unwrap();
        for _ in 0..100 {
            if pool.stats().returned == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let s = pool.stats();
        assert_eq!((s.gets, s.returned, s.retained_buffers), (1, 1, 1), "{s}");
        let (r, _) = server.write_all(b"after".to_vec()).await;
        r.unwrap();
        let (n, buf) = client.read(pool.get(4096)).await;
        assert_eq!(&buf[..n.unwrap()], b"after");
        assert_eq!(pool.stats().hits, 1);
    });
    let s = pool.stats();
    assert_eq!(s.gets, s.returned, "{s}");
}

#[test]
fn a_read_into_a_slice_stops_at_the_slice() {
    let path = temp_path("slice");
    std::fs::write(&path, data(3, 10_000)).unwrap();
    let pool = BufferPool::new();
    run(async {
        let file = tokio_uring::fs::File::open(&path).await.unwrap();
        // Reads fill up to the capacity (the 10,240-byte tier); a slice bounds them.
        let (n, slice) = file.read_at(pool.get(5000).slice(..5000), 0).await;
        assert_eq!(n.unwrap(), 5000);
        let buf = slice.into_inner();
        assert_eq!((buf.len(), buf.capacity()), (5000, 5120));
        assert_eq!(&buf[..], &data(3, 10_000)[..5000]);
        file.close().await.unwrap();
    });
    std::fs::remove_file(&path).unwrap();
}
