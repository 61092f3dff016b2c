//! Readiness-first reads on tokio (`read_ready`, `read_ready_exact`) over real loopback TCP:
//! idle connections hold no buffer, every byte arrives, spurious readiness gives its buffer
//! back, and the frame reader holds nothing between frames.

#![cfg(feature = "tokio")]

use std::sync::Arc;
use std::time::Duration;

use tierpool::io::frame::{FrameReader, FrameWriter};
use tierpool::io::{read_ready, read_ready_exact};
use tierpool::BufferPool;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

use crate::common::random_bytes;

/// A connected pair of loopback sockets: (client, server).
async fn pair(listener: &TcpListener) -> (TcpStream, TcpStream) {
    let client = TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (server, _) = listener.accept().await.unwrap();
    (client, server)
}

fn out(pool: &BufferPool) -> u64 {
    let s = pool.stats();
    s.gets - s.returned
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_hold_no_buffer_and_every_byte_arrives() {
    let pool = BufferPool::new();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let conns = 300;
    let mut clients = Vec::new();
    let mut servers = Vec::new();
    // Connections that have received all their bytes (counted once the last buffer is back).
    let arrived = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for i in 0..conns {
        let (c, s) = pair(&listener).await;
        clients.push(c);
        let pool = pool.clone();
        let arrived = Arc::clone(&arrived);
        servers.push(tokio::spawn(async move {
            let mut s = s;
            let mut got = Vec::new();
            while let Some(buf) = read_ready(&mut s, &pool, 16 << 10).await.unwrap() {
                assert!(!buf.is_empty() && buf.len() <= 16 << 10);
                got.extend_from_slice(&buf);
                drop(buf);
                if got.len() == 40_000 {
                    arrived.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            }
            assert_eq!(got, random_bytes(i as u64, 40_000), "connection {i}");
        }));
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(out(&pool), 0, "300 waiting connections hold no buffer");
    // A few at a time send, then go quiet again.
    for (i, c) in clients.iter_mut().enumerate() {
        let data = random_bytes(i as u64, 40_000);
        for part in data.chunks(7_000) {
            c.write_all(part).await.unwrap();
        }
    }
    // Every byte in (however slow the machine: under Wine, a loaded CI machine), then each
    // connection waits for readiness again, holding nothing.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while arrived.load(std::sync::atomic::Ordering::SeqCst) < conns
        && std::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(arrived.load(std::sync::atomic::Ordering::SeqCst), conns);
    assert_eq!(out(&pool), 0, "all quiet again: nothing held");
    drop(clients);
    for s in servers {
        s.await.unwrap();
    }
    let s = pool.stats();
    assert_eq!(s.gets, s.returned, "{s}");
}

#[tokio::test]
async fn spurious_readiness_gives_the_buffer_back_and_waits_again() {
    let pool = BufferPool::new();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (mut client, server) = pair(&listener).await;
    client.write_all(b"a").await.unwrap();
    server.readable().await.unwrap();
    // Someone else takes the byte: tokio still holds the socket readable until a read finds
    // nothing, so the next wait returns at once with nothing to read.
    let mut one = [0u8; 1];
    assert_eq!(server.try_read(&mut one).unwrap(), 1);
    let reader = {
        let pool = pool.clone();
        tokio::spawn(async move {
            let mut server = server;
            let buf = read_ready(&mut server, &pool, 4096)
                .await
                .unwrap()
                .expect("data");
            (buf.to_vec(), server)
        })
    };
    // The reader wakes, finds nothing, gives its buffer back and waits again (however long
    // the machine takes to run it).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while (pool.stats().gets == 0 || out(&pool) > 0) && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(out(&pool), 0, "the spurious wake-up's buffer went back");
    assert!(pool.stats().gets >= 1, "a spurious wake-up took a buffer");
    client.write_all(b"xyz").await.unwrap();
    let (got, _server) = reader.await.unwrap();
    assert_eq!(got, b"xyz");
    assert_eq!(out(&pool), 0);
}

#[tokio::test]
async fn exact_messages_never_take_the_next_ones_bytes() {
    let pool = BufferPool::new();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (mut client, mut server) = pair(&listener).await;
    // 10,000-byte messages: their tier holds 10,240, so an unlimited read would take 240
    // bytes of the next one.
    let (a, b) = (random_bytes(1, 10_000), random_bytes(2, 10_000));
    let mut both = a.clone();
    both.extend_from_slice(&b);
    let writer = tokio::spawn(async move {
        client.write_all(&both[..3]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        client.write_all(&both[3..]).await.unwrap();
        client.write_all(&random_bytes(3, 100)).await.unwrap(); // a truncated third
    });
    let m1 = read_ready_exact(&mut server, &pool, 10_000)
        .await
        .unwrap()
        .unwrap();
    let m2 = read_ready_exact(&mut server, &pool, 10_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((&m1[..], &m2[..]), (&a[..], &b[..]));
    writer.await.unwrap();
    let err = read_ready_exact(&mut server, &pool, 10_000)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof);
    assert!(
        err.to_string().contains("9900 bytes before the end"),
        "{err}"
    );
    assert!(read_ready_exact(&mut server, &pool, 10_000)
        .await
        .unwrap()
        .is_none());
    let zero = read_ready(&mut server, &pool, 0).await.unwrap_err();
    assert_eq!(zero.kind(), std::io::ErrorKind::InvalidInput);
    drop((m1, m2));
    assert_eq!(out(&pool), 0);
}

#[tokio::test(flavor = "current_thread")]
async fn under_a_budget_the_task_waits_for_room_not_the_thread() {
    // One thread runs every task: a read that blocked it waiting for the budget would hang
    // the test, so a watchdog turns a hang into a failure.
    let finished = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    {
        let finished = finished.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(60));
            if !finished.load(std::sync::atomic::Ordering::SeqCst) {
                eprintln!("read_ready blocked the runtime's only thread waiting for the budget");
                std::process::abort();
            }
        });
    }
    let pool = BufferPool::builder()
        .max_in_use_bytes(64 << 10)
        .build()
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (mut client, server) = pair(&listener).await;
    let held = pool.get(64 << 10); // the whole budget
    client.write_all(b"hello").await.unwrap();
    let reader = {
        let pool = pool.clone();
        tokio::spawn(async move {
            let mut server = server;
            read_ready(&mut server, &pool, 1024).await
        })
    };
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert!(!reader.is_finished(), "waits for room in the budget");
    drop(held);
    let buf = reader.await.unwrap().unwrap().expect("data");
    assert_eq!(&buf[..], b"hello");
    finished.store(true, std::sync::atomic::Ordering::SeqCst);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_frame_reader_holds_no_buffer_between_frames() {
    use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
    let pool = BufferPool::new();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut writers = Vec::new();
    let mut readers = Vec::new();
    // Frames read and dropped, by every reader: the check waits for them, not for a time
    // (a fixed 50 ms sleep failed on a loaded machine, with two readers still at work).
    let done = Arc::new(AtomicU64::new(0));
    for i in 0..200u64 {
        let (c, s) = pair(&listener).await;
        writers.push(FrameWriter::new(c));
        let (pool, done) = (pool.clone(), Arc::clone(&done));
        readers.push(tokio::spawn(async move {
            let mut r = FrameReader::new(s, pool);
            let mut n = 0;
            while let Some((_, p)) = r.read_frame().await.unwrap() {
                assert_eq!(&p[..], &random_bytes(i * 10 + n, 20_000)[..]);
                drop(p);
                n += 1;
                done.fetch_add(1, SeqCst);
            }
            n
        }));
    }
    for round in 0..3u64 {
        for (i, w) in writers.iter_mut().enumerate() {
            w.write_frame(0, &random_bytes(i as u64 * 10 + round, 20_000))
                .await
                .unwrap();
            w.flush().await.unwrap();
        }
        let all = 200 * (round + 1);
        let waited = tokio::time::timeout(Duration::from_secs(60), async {
            while done.load(SeqCst) < all {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
        waited.await.expect("every reader read its frame");
        assert_eq!(
            out(&pool),
            0,
            "between frames (round {round}): nothing held"
        );
    }
    drop(writers);
    for r in readers {
        assert_eq!(r.await.unwrap(), 3);
    }
}

/// A peer that sends the first bytes of a large message and stalls: the reader holds about
/// what arrived (at most twice it, or the smallest tier), not the message's size.
#[tokio::test]
async fn a_stalled_message_holds_what_arrived_not_its_size() {
    let pool = BufferPool::builder()
        .max_in_use_bytes(1 << 30)
        .build()
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (mut client, server) = pair(&listener).await;
    client.write_all(&[7u8; 10]).await.unwrap();
    let reader = {
        let pool = pool.clone();
        tokio::spawn(async move {
            let mut server = server;
            read_ready_exact(&mut server, &pool, 64 << 10).await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let in_use = pool.stats().budget.unwrap().in_use_bytes;
    assert!(in_use <= pool.tier_sizes()[0], "{in_use} held for 10 bytes");
    client.write_all(&vec![7u8; (64 << 10) - 10]).await.unwrap();
    let buf = reader.await.unwrap().unwrap().expect("the message");
    assert_eq!(buf.len(), 64 << 10);
    assert!(buf.iter().all(|&b| b == 7));
}
