//! The frame reader and writer (feature `tokio`): round trips, hostile input, loopback streams.

#![cfg(feature = "tokio")]

use std::time::Duration;

use tierpool::io::frame::{FrameError, FrameFormat, FramePart, FrameReader, FrameWriter, Grpc};
use tierpool::BufferPool;
use tokio::io::AsyncWriteExt;

use crate::common::Rng;

fn payload(seed: u64, len: usize) -> Vec<u8> {
    let mut r = Rng(seed);
    (0..len).map(|_| r.next() as u8).collect()
}

/// Every buffer handed out has come back.
fn assert_all_returned(pool: &BufferPool) {
    let s = pool.stats();
    assert_eq!(
        s.gets, s.returned,
        "buffers still out (leaked on some path): {s}"
    );
}

#[tokio::test]
async fn round_trips_of_random_sizes() {
    let pool = BufferPool::new();
    let (a, b) = tokio::io::duplex(256 << 10);
    let sizes: Vec<usize> = {
        let mut r = Rng(42);
        (0..300)
            .map(|i| match i % 4 {
                0 => 0,
                1 => (r.next() % 300) as usize,
                2 => (r.next() % 70_000) as usize,
                _ => (r.next() % (3 << 20)) as usize,
            })
            .collect()
    };
    let sent = sizes.clone();
    let writer = tokio::spawn(async move {
        let mut w = FrameWriter::new(a);
        for (i, &n) in sent.iter().enumerate() {
            w.write_frame(i as u8, &payload(i as u64, n)).await.unwrap();
        }
        w.flush().await.unwrap();
    });
    let mut r = FrameReader::new(b, pool.clone());
    for (i, &n) in sizes.iter().enumerate() {
        let (flags, p) = r.read_frame().await.unwrap().expect("a frame");
        assert_eq!(flags, i as u8);
        assert_eq!(p.len(), n);
        assert!(p[..] == payload(i as u64, n)[..], "frame {i} corrupted");
    }
    writer.await.unwrap();
    assert!(
        r.read_frame().await.unwrap().is_none(),
        "clean end of stream"
    );
    assert!(pool.stats().hits > 0, "buffers were reused");
    assert_all_returned(&pool);
}

#[tokio::test]
async fn too_large_is_refused_before_allocating() {
    let pool = BufferPool::new();
    let (mut a, b) = tokio::io::duplex(1024);
    a.write_all(&[0, 0, 0x10, 0, 1]).await.unwrap(); // 1 MiB + 1
    let mut r = FrameReader::new(b, pool.clone()).max_frame_size(1 << 20);
    match r.read_frame().await {
        Err(FrameError::TooLarge { len, max }) => assert_eq!((len, max), ((1 << 20) + 1, 1 << 20)),
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert_eq!(pool.stats().gets, 0, "nothing was allocated");
    // The largest length gRPC can express, against the default maximum.
    let (mut a, b) = tokio::io::duplex(1024);
    a.write_all(&[0, 0xff, 0xff, 0xff, 0xff]).await.unwrap();
    let err = FrameReader::new(b, pool.clone())
        .read_frame()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("exceeds the maximum"), "{err}");
    assert_eq!(pool.stats().gets, 0);
}

#[tokio::test]
async fn eof_mid_header_says_what_is_missing() {
    let pool = BufferPool::new();
    let (mut a, b) = tokio::io::duplex(1024);
    a.write_all(&[0, 0, 0]).await.unwrap();
    drop(a);
    let err = FrameReader::new(b, pool.clone())
        .read_frame()
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            FrameError::UnexpectedEof {
                part: FramePart::Header,
                expected: 5,
                received: 3
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.missing(), Some(2));
    assert!(
        err.to_string()
            .contains("2 bytes before the end of the frame header"),
        "{err}"
    );
}

#[tokio::test]
async fn eof_mid_payload_says_what_is_missing_and_returns_the_buffer() {
    let pool = BufferPool::new();
    let (mut a, b) = tokio::io::duplex(1 << 20);
    a.write_all(&[0, 0, 0, 0x01, 0x00]).await.unwrap(); // 256 bytes
    a.write_all(&[9; 100]).await.unwrap();
    drop(a);
    let err = FrameReader::new(b, pool.clone())
        .read_frame()
        .await
        .unwrap_err();
    assert_eq!(err.missing(), Some(156));
    assert!(matches!(
        err,
        FrameError::UnexpectedEof {
            part: FramePart::Payload,
            expected: 256,
            received: 100
        }
    ));
    let io: std::io::Error = err.into();
    assert_eq!(io.kind(), std::io::ErrorKind::UnexpectedEof);
    assert_all_returned(&pool);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickling_peer_gets_what_it_sent_not_what_it_claimed() {
    let pool = BufferPool::new();
    let (mut a, b) = tokio::io::duplex(1 << 20);
    let claimed: usize = 4 << 20; // the default maximum
    a.write_all(&[0, 0, 0x40, 0, 0]).await.unwrap();
    let reader_pool = pool.clone();
    let reader = tokio::spawn(async move {
        let mut r = FrameReader::new(b, reader_pool);
        r.read_frame().await
    });
    // Trickle 300 KiB in small pieces: past the initial 256 KiB, so the buffer has grown once.
    let mut sent = 0;
    while sent < 300 << 10 {
        a.write_all(&[7; 4096]).await.unwrap();
        sent += 4096;
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let stats = pool.stats();
    let largest = stats
        .tiers
        .iter()
        .filter(|t| t.misses + t.hits > 0)
        .map(|t| t.size)
        .max()
        .unwrap();
    assert!(
        largest <= 4 * sent,
        "after {sent} bytes of a claimed {claimed}, the reader allocated a {largest}-byte buffer"
    );
    // The peer gives up: the reader reports it and every buffer comes back.
    drop(a);
    let err = reader.await.unwrap().unwrap_err();
    assert_eq!(err.missing(), Some((claimed - sent) as u64));
    assert_all_returned(&pool);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_streams_check_every_byte() {
    let pool = BufferPool::new();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server_pool = pool.clone();
    let server = tokio::spawn(async move {
        let mut conns = Vec::new();
        for _ in 0..32 {
            let (sock, _) = listener.accept().await.unwrap();
            let pool = server_pool.clone();
            conns.push(tokio::spawn(async move {
                let (rd, wr) = sock.into_split();
                let mut r = FrameReader::new(rd, pool);
                let mut w = FrameWriter::new(wr);
                // Echo: the request buffer, received on this worker, is written back and
                // dropped wherever the task happens to run next.
                while let Some((flags, p)) = r.read_frame().await.unwrap() {
                    w.write_frame(flags, &p).await.unwrap();
                    w.flush().await.unwrap();
                }
            }));
        }
        for c in conns {
            c.await.unwrap();
        }
    });
    let mut streams = Vec::new();
    for s in 0..32u64 {
        let pool = pool.clone();
        streams.push(tokio::spawn(async move {
            let sock = tokio::net::TcpStream::connect(addr).await.unwrap();
            let (rd, wr) = sock.into_split();
            let mut r = FrameReader::new(rd, pool);
            let mut w = FrameWriter::new(wr);
            let mut rng = Rng(s);
            for i in 0..20u64 {
                let n = (rng.next() % 200_000) as usize;
                let data = payload(s * 1000 + i, n);
                w.write_frame(i as u8, &data).await.unwrap();
                w.flush().await.unwrap();
                let (flags, p) = r.read_frame().await.unwrap().unwrap();
                assert_eq!(flags, i as u8);
                assert!(p[..] == data[..], "stream {s} message {i} corrupted");
            }
        }));
    }
    for s in streams {
        s.await.unwrap();
    }
    server.await.unwrap();
    let stats = pool.stats();
    assert!(stats.hits > stats.gets / 2, "buffers were reused: {stats}");
    assert_all_returned(&pool);
}

#[tokio::test]
async fn shared_frames_and_writer_errors() {
    let pool = BufferPool::new();
    let (a, b) = tokio::io::duplex(1 << 16);
    let mut w = FrameWriter::new(a);
    w.write_frame(1, b"abcdef").await.unwrap();
    drop(w);
    let mut r = FrameReader::new(b, pool.clone());
    let (flags, shared) = r.read_frame_shared().await.unwrap().unwrap();
    let tail = shared.slice(3..);
    drop(shared);
    assert_eq!((flags, &tail[..]), (1, &b"def"[..]));
    drop(tail);
    assert_all_returned(&pool);
    // The writer puts header and payload back to back.
    let mut sink = Vec::new();
    let mut w = FrameWriter::new(&mut sink);
    w.write_frame(0, &[9]).await.unwrap();
    assert_eq!(sink, [0, 0, 0, 0, 1, 9]);
}

/// A format whose 1-byte length field cannot express more than 255 bytes.
struct TinyFormat;

impl FrameFormat for TinyFormat {
    const HEADER_LEN: usize = 1;

    fn decode(&self, header: &[u8]) -> Result<(u8, u64), FrameError> {
        Ok((0, u64::from(header[0])))
    }

    fn encode(&self, _flags: u8, len: usize, header: &mut [u8]) -> Result<(), FrameError> {
        header[0] = u8::try_from(len).map_err(|_| FrameError::TooLarge {
            len: len as u64,
            max: 255,
        })?;
        Ok(())
    }
}

#[tokio::test]
async fn a_payload_the_header_cannot_express_is_refused_before_anything_is_written() {
    let mut sink = Vec::new();
    let mut w = FrameWriter::with_format(&mut sink, TinyFormat);
    let err = w.write_frame(0, &[1; 300]).await.unwrap_err();
    assert!(
        matches!(err, FrameError::TooLarge { len: 300, max: 255 }),
        "{err:?}"
    );
    assert!(sink.is_empty(), "nothing written");
    // gRPC's 4-byte length: one byte more than u32::MAX is refused by the format itself.
    let mut header = [0u8; 5];
    let err = Grpc
        .encode(0, u32::MAX as usize + 1, &mut header)
        .unwrap_err();
    assert!(matches!(err, FrameError::TooLarge { max, .. } if max == u32::MAX as usize));
    // A pluggable format reads what it wrote.
    let pool = BufferPool::new();
    let mut bytes = Vec::new();
    FrameWriter::with_format(&mut bytes, TinyFormat)
        .write_frame(0, b"tiny")
        .await
        .unwrap();
    let mut r = FrameReader::with_format(&bytes[..], pool.clone(), TinyFormat);
    let (_, p) = r.read_frame().await.unwrap().unwrap();
    assert_eq!(&p[..], b"tiny");
    assert!(r.read_frame().await.unwrap().is_none());
}

/// Eight connections each send large frames at once to readers sharing a pool whose budget
/// holds two frames: every byte arrives, the readers wait for budget (so the writers back up
/// through the transport), and in use never went above the budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_a_budget_readers_wait_for_room_and_every_byte_arrives() {
    const FRAME: usize = 512 << 10;
    let pool = BufferPool::builder()
        .max_in_use_bytes(2 * 655_360) // two frames in their 640 KiB tier
        .build()
        .unwrap();
    let mut tasks = Vec::new();
    for conn in 0..8u64 {
        let (a, b) = tokio::io::duplex(64 << 10);
        tasks.push(tokio::spawn(async move {
            let mut w = FrameWriter::new(a);
            for i in 0..3 {
                w.write_frame(0, &payload(conn * 10 + i, FRAME))
                    .await
                    .unwrap();
            }
            w.flush().await.unwrap();
        }));
        let pool = pool.clone();
        tasks.push(tokio::spawn(async move {
            let mut r = FrameReader::new(b, pool);
            for i in 0..3 {
                let (_, got) = r.read_frame().await.unwrap().expect("a frame");
                assert_eq!(got[..], payload(conn * 10 + i, FRAME)[..]);
                tokio::time::sleep(Duration::from_millis(2)).await; // hold it a while
            }
            assert!(r.read_frame().await.unwrap().is_none());
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let b = pool.stats().budget.unwrap();
    assert!(b.peak_in_use_bytes <= b.limit, "{b:?}");
    assert!(
        b.waits > 0,
        "16 frames of 640 KiB against a budget of 2: some waited"
    );
    assert_eq!(b.in_use_bytes, 0);
    assert_all_returned(&pool);
}

#[tokio::test]
async fn under_a_budget_a_frame_larger_than_the_budget_is_an_alloc_error() {
    let pool = BufferPool::builder()
        .max_in_use_bytes(1 << 20)
        .build()
        .unwrap();
    let (a, b) = tokio::io::duplex(1 << 10);
    let mut header = [0u8; 5];
    Grpc.encode(0, 2 << 20, &mut header).unwrap();
    let mut a = a;
    a.write_all(&header).await.unwrap();
    let mut r = FrameReader::new(b, pool.clone());
    match r.read_frame().await {
        Err(FrameError::Alloc(tierpool::AllocError::LargerThanBudget { requested, .. })) => {
            assert_eq!(requested, 2 << 20)
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(pool.stats().gets, 0);
}
