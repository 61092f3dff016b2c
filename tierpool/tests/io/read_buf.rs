//! `ReadBuffer` and the other receive paths: the bytes of every cut of the input, the bound
//! (a pending `P` bytes hold at most `max(2P, T0)`) whenever a read waits, and every buffer
//! back: for the read buffer, the frame reader, `PooledChain::read_all` and
//! `PooledChain::push_compact`.
#![cfg(feature = "tokio")]

use crate::common::io::{current_thread, Script};
use crate::common::{exact_pool, in_use};

use std::cell::Cell;
use std::collections::VecDeque;
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use proptest::prelude::*;
use tierpool::io::frame::FrameReader;
use tierpool::io::ReadBuffer;
use tierpool::{BufferPool, PooledChain};
use tokio::io::{AsyncRead, ReadBuf};

/// Lines ending in `\r\n`, found with `find`, taken with `split_to`, for any input cut any
/// way: the same lines as splitting the input at once; whenever a read waits the buffer holds
/// at most twice what is unread (or the smallest tier); every buffer back at the end.
fn lines_through_a_read_buffer(
    input: &[u8],
    cuts: &[usize],
    keep_frames: bool,
) -> Result<(), TestCaseError> {
    let pool = exact_pool();
    let floor = pool.tier_sizes()[0];
    let mut io = Script::cut(input, cuts);
    let mut buf = ReadBuffer::new(pool.clone());
    let mut lines = Vec::new();
    let mut kept = Vec::new();
    let waker = futures_util::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    loop {
        while let Some(end) = buf.find(b"\r\n") {
            let line = buf.split_to(end + 2);
            lines.push(line.to_vec());
            if keep_frames {
                kept.push(line);
            }
        }
        match buf.poll_read_from(&mut cx, Pin::new(&mut io)) {
            Poll::Pending => {
                let p = buf.len();
                prop_assert!(
                    buf.held_bytes() <= (2 * p).max(floor),
                    "{} held for {p} unread",
                    buf.held_bytes()
                );
            }
            Poll::Ready(Ok(0)) => break,
            Poll::Ready(Ok(_)) => {}
            Poll::Ready(Err(e)) => return Err(TestCaseError::fail(e.to_string())),
        }
    }
    let expected: Vec<Vec<u8>> = input
        .split_inclusive(|&b| b == b'\n')
        .filter(|l| l.ends_with(b"\r\n"))
        .map(<[u8]>::to_vec)
        .collect();
    prop_assert_eq!(&lines, &expected);
    let rest = buf.unread().to_vec();
    prop_assert!(input.ends_with(&rest));
    drop((buf, kept));
    prop_assert_eq!(in_use(&pool), 0, "every buffer back: {}", pool.stats());
    Ok(())
}

fn crlf_text() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        prop_oneof![
            4 => Just(b"abcdefghij".to_vec()),
            2 => Just(b"\r\n".to_vec()),
            1 => Just(vec![b'x'; 3000]),
            1 => Just(b"\r".to_vec()),
        ],
        0..60,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn a_read_buffer_yields_the_same_lines_for_every_cut(
        input in crlf_text(),
        cuts in proptest::collection::vec(any::<usize>(), 0..80),
        keep in any::<bool>(),
    ) {
        lines_through_a_read_buffer(&input, &cuts, keep)?;
    }

    /// The frame reader's payloads, for any cut of the stream: the bytes sent, and whenever
    /// the reader waits, at most twice what arrived of the payload in progress (or the
    /// smallest tier) out of the pool.
    #[test]
    fn the_frame_reader_holds_at_most_twice_what_arrived(
        lens in proptest::collection::vec(0usize..200_000, 1..4),
        cuts in proptest::collection::vec(any::<usize>(), 0..100),
    ) {
        let pool = BufferPool::new();
        let floor = pool.tier_sizes()[0];
        let mut stream = Vec::new();
        let mut payloads = Vec::new();
        for (i, &len) in lens.iter().enumerate() {
            stream.push(0);
            stream.extend((len as u32).to_be_bytes());
            payloads.push((stream.len(), stream.len() + len));
            stream.extend((0..len).map(|k| (k + i) as u8));
        }
        let delivered = Rc::new(Cell::new(0));
        let io = Counted { io: Script::cut(&stream, &cuts), delivered: Rc::clone(&delivered) };
        let mut reader = FrameReader::new(io, pool.clone());
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        for (i, &len) in lens.iter().enumerate() {
            let got = {
                let mut frame = Box::pin(reader.read_frame());
                loop {
                    match frame.as_mut().poll(&mut cx) {
                        Poll::Ready(got) => break got,
                        Poll::Pending => {
                            // The reader waits: what is out of the pool is its buffer.
                            let (start, _) = payloads[i];
                            let p = delivered.get().saturating_sub(start);
                            let out = out_of(&pool);
                            prop_assert!(
                                out <= (2 * p).max(floor),
                                "{out} out for {p} bytes of a {len}-byte payload"
                            );
                        }
                    }
                }
            };
            let (_, payload) = got.unwrap().expect("a frame");
            prop_assert_eq!(payload.len(), len);
            prop_assert!(payload.iter().enumerate().all(|(k, &b)| b == (k + i) as u8));
        }
        let mut end = Box::pin(reader.read_frame());
        let end = loop {
            if let Poll::Ready(r) = end.as_mut().poll(&mut cx) {
                break r;
            }
        };
        prop_assert!(end.unwrap().is_none(), "the end of the stream");
        let s = pool.stats();
        prop_assert_eq!(s.gets, s.returned);
    }

    /// `push_compact` of short reads: the chain holds at most twice its bytes (or the
    /// smallest tier) plus one buffer per view that filled its own; the bytes in order.
    #[test]
    fn a_chain_of_short_reads_holds_about_what_it_has(
        reads in proptest::collection::vec((1usize..3000, any::<bool>()), 1..200),
    ) {
        let pool = exact_pool();
        let floor = pool.tier_sizes()[0];
        let mut chain = PooledChain::new();
        let mut model = Vec::new();
        for (i, &(len, full)) in reads.iter().enumerate() {
            // A read of `len` bytes into a 16 KiB buffer, or (`full`) one that filled its own.
            let mut b = pool.get(if full { len } else { 16 << 10 });
            b.extend((0..len).map(|k| (k + i) as u8));
            model.extend_from_slice(&b);
            chain.push_compact(b.into_shared(), &pool);
            // Views that filled their own buffers (`full` reads of less than the smallest
            // tier hold that tier) may each add up to one smallest tier beyond twice their
            // bytes.
            let fulls = reads[..=i].iter().filter(|r| r.1).count();
            let bound = (2 * chain.len()).max(floor) + fulls * floor;
            prop_assert!(in_use(&pool) <= bound, "{} in use for {} bytes", in_use(&pool), chain.len());
        }
        prop_assert_eq!(chain.to_vec(), model);
        drop(chain);
        prop_assert_eq!(in_use(&pool), 0);
    }
}

/// `io`, counting the bytes it delivers.
struct Counted {
    io: Script,
    delivered: Rc<Cell<usize>>,
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        self.delivered
            .set(self.delivered.get() + buf.filled().len() - before);
        polled
    }
}

/// What `pool` has handed out and not got back, in bytes (from its per-tier counts: exact
/// while one thread uses it).
fn out_of(pool: &BufferPool) -> usize {
    pool.stats()
        .tiers
        .iter()
        .map(|t| (t.hits + t.misses).saturating_sub(t.returned) as usize * t.size)
        .sum()
}

/// The 1-byte trickle of the issue, through `ReadBuffer`: 4,000 bytes of one frame, one per
/// read, hold at most 8 KiB while they wait (not a buffer per byte).
#[test]
fn a_trickle_into_a_read_buffer_holds_what_arrived() {
    let pool = BufferPool::new();
    let input = vec![b'x'; 4000];
    let cuts: Vec<usize> = (1..4000).collect();
    let mut io = Script::cut(&input, &cuts);
    let mut buf = ReadBuffer::new(pool.clone());
    let waker = futures_util::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    let mut most = 0;
    loop {
        match buf.poll_read_from(&mut cx, Pin::new(&mut io)) {
            Poll::Pending => most = most.max(buf.held_bytes()),
            Poll::Ready(Ok(0)) => break,
            Poll::Ready(r) => {
                r.unwrap();
            }
        }
    }
    assert_eq!(buf.len(), 4000);
    assert!(most <= 8000, "held {most} for at most 4,000 bytes");
    buf.clear();
    assert_eq!(buf.held_bytes(), 0);
}

/// A limit on unread bytes: a clear error, and nothing kept.
#[test]
fn more_unread_than_the_limit_is_an_error() {
    let pool = BufferPool::new();
    current_thread().block_on(async {
        let data = vec![b'a'; 10_000];
        let mut io = &data[..];
        let mut buf = ReadBuffer::new(pool.clone()).max_len(1000);
        let err = loop {
            match buf.read_from(&mut io).await {
                Ok(0) => panic!("the end of the stream before the limit"),
                Ok(_) => continue,
                Err(e) => break e,
            }
        };
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert_eq!((buf.len(), buf.held_bytes()), (0, 0));
    });
    let s = pool.stats();
    assert_eq!(s.gets, s.returned);
}

/// Under a budget that runs out mid-frame, a read that needs a larger buffer waits (the task,
/// not the thread), holding what arrived, and goes on once room is back.
#[test]
fn a_budget_that_runs_out_mid_frame_makes_the_read_wait() {
    let pool = BufferPool::builder()
        .max_in_use_bytes(256 << 10)
        .build()
        .unwrap();
    current_thread().block_on(async {
        let (mut tx, mut rx) = tokio::io::duplex(1 << 20);
        use tokio::io::AsyncWriteExt;
        let mut buf = ReadBuffer::new(pool.clone());
        tx.write_all(&[1u8; 8192]).await.unwrap();
        assert_eq!(buf.read_from(&mut rx).await.unwrap(), 8192);
        let hog = pool.get(200 << 10); // a 224 KiB tier: 24 KiB of the budget left
        tx.write_all(&[2u8; 100_000]).await.unwrap();
        let mut read = 0;
        let mut reading = Box::pin(async {
            while read < 100_000 {
                read += buf.read_from(&mut rx).await.unwrap();
            }
            buf
        });
        let waited = poll_fn(|cx| Poll::Ready(reading.as_mut().poll(cx).is_pending())).await;
        assert!(waited, "waits for room");
        drop(hog);
        let buf = reading.await;
        assert_eq!(buf.len(), 8192 + 100_000);
        assert!(buf.unread()[..8192].iter().all(|&b| b == 1));
        assert!(buf.unread()[8192..].iter().all(|&b| b == 2));
    });
}

use std::future::Future;

/// Frames delivered as a server sees requests: each in reads of at most `piece` bytes that
/// are all there at once, then a wait for the next (`None`: a `Pending`).
struct Requests(VecDeque<Option<Vec<u8>>>);

impl Requests {
    fn new(frames: &[Vec<u8>], piece: usize) -> Requests {
        let mut steps = VecDeque::new();
        for f in frames {
            steps.push_back(None);
            steps.extend(f.chunks(piece).map(|c| Some(c.to_vec())));
        }
        Requests(steps)
    }
}

impl AsyncRead for Requests {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.0.pop_front() {
            Some(None) => {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            Some(Some(mut c)) => {
                let n = c.len().min(buf.remaining());
                buf.put_slice(&c[..n]);
                if n < c.len() {
                    self.0.push_front(Some(c.split_off(n)));
                }
                Poll::Ready(Ok(()))
            }
            None => Poll::Ready(Ok(())),
        }
    }
}

/// Reads `len`-byte frames one at a time from `io` into `rb`, each split off and checked:
/// the pool's gets per frame.
fn gets_per_frame(pool: &BufferPool, io: &mut Requests, frames: &[Vec<u8>]) -> Vec<u64> {
    let mut rb = ReadBuffer::new(pool.clone());
    let mut gets = Vec::new();
    current_thread().block_on(async {
        for f in frames {
            let before = pool.stats().gets;
            while rb.len() < f.len() {
                assert!(
                    rb.read_from(io).await.unwrap() > 0,
                    "the stream ended early"
                );
            }
            assert_eq!(&rb.split_to(f.len())[..], &f[..]);
            gets.push(pool.stats().gets - before);
        }
    });
    gets
}

#[test]
fn frames_of_a_size_that_repeats_land_in_one_buffer() {
    // 64 KiB frames in 16 KiB reads, each after a wait (a SET of 64 KiB as redis-benchmark
    // sends it): from the third on, the read takes a buffer the size the last two needed, and
    // the frame lands in it without regrowing from the read's offer. Two gets per frame: the
    // buffer taken for the read that found the wait (given straight back, nothing held) and
    // the one the frame lands in. (Regrowing from the offer: five.)
    let pool = BufferPool::new();
    let frames: Vec<Vec<u8>> = (0..8).map(|i| vec![i as u8; 64 << 10]).collect();
    let gets = gets_per_frame(&pool, &mut Requests::new(&frames, 16 << 10), &frames);
    assert!(gets[0] > 1, "the first frame grows: {gets:?}");
    assert!(
        gets[2..].iter().all(|&g| g == 2),
        "one buffer per frame: {gets:?}"
    );
}

#[test]
fn a_trickled_frame_after_large_ones_holds_twice_what_arrived() {
    // Two 64 KiB frames teach the read buffer their size; the third arrives a byte at a time:
    // the large buffer taken for its first byte is given back at the first wait.
    let pool = BufferPool::new();
    let floor = pool.tier_sizes()[0];
    let frames: Vec<Vec<u8>> = (0..2).map(|i| vec![i as u8; 64 << 10]).collect();
    let mut io = Requests::new(&frames, 16 << 10);
    let mut rb = ReadBuffer::new(pool.clone());
    current_thread().block_on(async {
        for f in &frames {
            while rb.len() < f.len() {
                rb.read_from(&mut io).await.unwrap();
            }
            drop(rb.split_to(f.len()));
        }
        let third = vec![9u8; 64 << 10];
        let mut trickle = Requests::new(std::slice::from_ref(&third), 1);
        // A wait between every byte.
        trickle.0 = trickle.0.into_iter().flat_map(|s| [None, s]).collect();
        let mut waits = 0;
        while rb.len() < third.len() {
            let got = poll_fn(|cx| match rb.poll_read_from(cx, Pin::new(&mut trickle)) {
                Poll::Pending => Poll::Ready(None),
                Poll::Ready(r) => Poll::Ready(Some(r)),
            })
            .await;
            if got.is_none() {
                waits += 1;
                let held = rb.held_bytes();
                assert!(
                    held <= floor.max(2 * rb.len()),
                    "held {held} for {} bytes",
                    rb.len()
                );
            }
        }
        assert!(waits > 1000);
        assert_eq!(&rb.split_to(third.len())[..], &third[..]);
    });
}
