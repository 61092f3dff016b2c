//! tokio-util's codecs over pooled buffers (`tierpool::io::codec`): the same frames as
//! tokio-util's own `FramedRead` for every way the input can be cut, the memory bound while
//! a frame is pending, every buffer back; and tokio-util's own `framed_read.rs` and
//! `framed_write.rs` cases, ported.
#![cfg(feature = "tokio-util")]

use crate::common::io::{current_thread, cut, Op, Script};
use crate::common::{exact_pool, in_use};

use std::io;
use std::task::{Context, Poll};

use bytes::{Buf, BufMut, BytesMut};
use futures_util::{FutureExt, Sink, SinkExt, StreamExt};
use proptest::prelude::*;
use tierpool::io::codec::{FramedRead, FramedWrite};
use tierpool::BufferPool;
use tokio_util::codec::{AnyDelimiterCodec, BytesCodec, Decoder, LengthDelimitedCodec, LinesCodec};

/// Everything a stream yields until its end: frames, and errors by kind.
async fn collect<S, T, E>(mut s: S) -> Vec<Result<T, String>>
where
    S: futures_util::Stream<Item = Result<T, E>> + Unpin,
    E: std::fmt::Display,
{
    let mut out = Vec::new();
    while let Some(item) = s.next().await {
        let failed = item.is_err();
        out.push(item.map_err(|e| e.to_string()));
        if failed {
            // tokio-util's streams end once after an error; both are read to that point.
            break;
        }
    }
    out
}

/// The pooled stream and tokio-util's give the same items over the same reads; the pooled one
/// makes no more reads, and gives every buffer back.
fn same_as_tokio_util<D, F>(make: F, ops: Vec<Op>) -> Result<(), TestCaseError>
where
    D: Decoder + Unpin,
    D::Item: PartialEq + std::fmt::Debug,
    D::Error: std::fmt::Display,
    F: Fn() -> D,
{
    // The account is exact, also for buffers that leave the pool with frames sharing them
    // (they are freed with the last frame, their charge refunded).
    let pool = exact_pool();
    current_thread().block_on(async {
        let mut theirs = tokio_util::codec::FramedRead::new(Script::new(ops.clone()), make());
        let expected = collect(&mut theirs).await;
        let mut ours = FramedRead::new(Script::new(ops), make(), pool.clone());
        let got = collect(&mut ours).await;
        prop_assert_eq!(&got, &expected);
        prop_assert!(
            ours.get_ref().reads <= theirs.get_ref().reads,
            "reads: pooled {} > tokio-util {}",
            ours.get_ref().reads,
            theirs.get_ref().reads
        );
        drop((ours, got, expected));
        Ok(())
    })?;
    prop_assert_eq!(
        in_use(&pool),
        0,
        "every buffer back or let go: {}",
        pool.stats()
    );
    Ok(())
}

fn lines() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        prop_oneof![
            Just(b'\n'),
            Just(b'a'),
            Just(b'b'),
            Just(0xffu8),
            Just(b'\r')
        ],
        0..400,
    )
}

fn length_delimited() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..3000), 0..8).prop_map(
        |frames| {
            let mut out = Vec::new();
            for f in frames {
                out.put_u32(f.len() as u32);
                out.extend_from_slice(&f);
            }
            out
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: if cfg!(miri) { 4 } else { 96 }, ..ProptestConfig::default() })]

    #[test]
    fn lines_are_the_same_for_every_cut(
        input in lines(),
        cuts in proptest::collection::vec(any::<usize>(), 0..40),
        waits in proptest::collection::vec(any::<bool>(), 0..40),
        max in prop_oneof![Just(usize::MAX), 1usize..40],
    ) {
        same_as_tokio_util(move || LinesCodec::new_with_max_length(max), cut(&input, &cuts, &waits))?;
    }

    #[test]
    fn length_delimited_frames_are_the_same_for_every_cut(
        input in length_delimited(),
        cuts in proptest::collection::vec(any::<usize>(), 0..60),
        waits in proptest::collection::vec(any::<bool>(), 0..60),
    ) {
        same_as_tokio_util(LengthDelimitedCodec::new, cut(&input, &cuts, &waits))?;
    }

    #[test]
    fn delimited_chunks_are_the_same_for_every_cut(
        input in lines(),
        cuts in proptest::collection::vec(any::<usize>(), 0..40),
        waits in proptest::collection::vec(any::<bool>(), 0..40),
        max in prop_oneof![Just(usize::MAX), 1usize..40],
    ) {
        same_as_tokio_util(
            move || AnyDelimiterCodec::new_with_max_length(b"\n\r".to_vec(), b";".to_vec(), max),
            cut(&input, &cuts, &waits),
        )?;
    }

    /// `BytesCodec` hands out whatever a read brought, so its chunks follow the reads: the
    /// bytes, in order, are what must be the same.
    #[test]
    fn raw_bytes_are_the_same_for_every_cut(
        input in proptest::collection::vec(any::<u8>(), 0..20_000),
        cuts in proptest::collection::vec(any::<usize>(), 0..30),
        waits in proptest::collection::vec(any::<bool>(), 0..30),
    ) {
        let pool = BufferPool::new();
        let ops = cut(&input, &cuts, &waits);
        let got: Vec<u8> = current_thread().block_on(async {
            let ours = FramedRead::new(Script::new(ops), BytesCodec::new(), pool.clone());
            let chunks: Vec<BytesMut> = ours.map(Result::unwrap).collect().await;
            chunks.concat()
        });
        prop_assert!(got == input, "{} bytes, {} expected", got.len(), input.len());
    }

    /// The bound: whenever the stream waits, the pooled buffer held is at most twice the bytes
    /// pending, or one buffer of the smallest tier, however the frame arrives (here: one
    /// frame of up to 64 KiB, cut anywhere, a `Pending` after every piece).
    #[test]
    fn a_pending_frame_holds_at_most_twice_its_bytes(
        len in 1usize..65536,
        cuts in proptest::collection::vec(any::<usize>(), 0..200),
    ) {
        let pool = BufferPool::new();
        let floor = pool.tier_sizes()[0];
        let mut frame = Vec::new();
        frame.put_u32(len as u32);
        frame.extend((0..len).map(|i| i as u8));
        let waits = vec![true; 300];
        let ops = cut(&frame, &cuts, &waits);
        current_thread().block_on(async {
            let mut ours = FramedRead::new(Script::new(ops), LengthDelimitedCodec::new(), pool.clone());
            let waker = futures_util::task::noop_waker();
            let mut cx = Context::from_waker(&waker);
            loop {
                match ours.poll_next_unpin(&mut cx) {
                    Poll::Pending => {
                        let p = ours.read_buffer().len();
                        prop_assert!(
                            ours.held_bytes() <= (2 * p).max(floor),
                            "{} held for {p} pending", ours.held_bytes()
                        );
                    }
                    Poll::Ready(Some(got)) => {
                        let got = got.unwrap();
                        prop_assert_eq!(got.len(), len);
                        prop_assert!(got.iter().enumerate().all(|(i, &b)| b == i as u8));
                    }
                    Poll::Ready(None) => break,
                }
            }
            prop_assert_eq!(ours.held_bytes(), 0);
            Ok(())
        })?;
    }
}

/// `LengthDelimitedCodec` reserves a frame's whole declared length once it has read the
/// head; the `BytesMut` then reallocates outside the pool. At the next wait the stream still
/// holds at most twice the bytes pending (it moves them into a pooled buffer of that size),
/// and the decoder's allocation is freed, not filed in the pool, where it would be handed out
/// later as a smaller tier (found by the aarch64 run: 54,184 bytes held for 24,576 pending,
/// the decoder's buffer served again by the park).
#[test]
fn a_decoder_reserving_a_whole_frame_keeps_the_bound() {
    let pool = BufferPool::new();
    let len = 54_180;
    let mut frame = Vec::new();
    frame.put_u32(len as u32);
    frame.extend((0..len).map(|i| i as u8));
    let ops = vec![
        Op::Pending,
        Op::Data(frame[..24_580].to_vec()),
        Op::Pending,
        Op::Data(frame[24_580..].to_vec()),
    ];
    current_thread().block_on(async {
        let mut ours = FramedRead::new(Script::new(ops), LengthDelimitedCodec::new(), pool.clone());
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut waits = 0;
        loop {
            match ours.poll_next_unpin(&mut cx) {
                Poll::Pending => {
                    waits += 1;
                    let p = ours.read_buffer().len();
                    let floor = pool.tier_sizes()[0];
                    assert!(
                        ours.held_bytes() <= (2 * p).max(floor),
                        "{} held for {p}",
                        ours.held_bytes()
                    );
                }
                Poll::Ready(Some(got)) => assert_eq!(got.unwrap().len(), len),
                Poll::Ready(None) => break,
            }
        }
        assert_eq!(waits, 2);
    });
    // Every buffer the pool keeps has its tier's capacity: the decoder's was not adopted.
    let s = pool.stats();
    let by_tier: usize = s.tiers.iter().map(|t| t.size * t.retained_buffers).sum();
    assert_eq!(s.retained_bytes, by_tier, "{s}");
}

/// A trickle, the attack of the issue: 4,000 bytes of one line arriving one per read. The
/// pooled stream holds about what arrived; tokio-util's holds its 8 KiB from the start.
#[test]
fn a_trickle_holds_what_arrived_not_a_buffer_per_byte() {
    let pool = BufferPool::new();
    let mut ops = Vec::new();
    for _ in 0..4000 {
        ops.push(Op::Data(b"x".to_vec()));
        ops.push(Op::Pending);
    }
    ops.push(Op::Data(b"\n".to_vec()));
    current_thread().block_on(async {
        let mut ours = FramedRead::new(Script::new(ops), LinesCodec::new(), pool.clone());
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut most = 0;
        let line = loop {
            match ours.poll_next_unpin(&mut cx) {
                Poll::Pending => most = most.max(ours.held_bytes()),
                Poll::Ready(item) => break item.unwrap().unwrap(),
            }
        };
        assert_eq!(line.len(), 4000);
        assert!(most <= 8000, "held {most} for 4,000 bytes");
        assert_eq!(ours.held_bytes(), 0);
    });
    let s = pool.stats();
    assert_eq!(s.gets, s.returned);
}

/// An idle stream holds nothing: pending reads give their buffer straight back.
#[test]
fn an_idle_stream_holds_nothing() {
    let pool = BufferPool::new();
    current_thread().block_on(async {
        let ops = (0..10).map(|_| Op::Pending);
        let mut ours = FramedRead::new(Script::new(ops), LinesCodec::new(), pool.clone());
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        for _ in 0..10 {
            assert!(ours.poll_next_unpin(&mut cx).is_pending());
            assert_eq!(ours.held_bytes(), 0);
        }
    });
}

/// A frame larger than the configured limit: a clear error, the buffer back, the stream ended
/// once (tokio-util's behaviour after an error).
#[test]
fn a_frame_over_the_limit_is_an_error_and_nothing_is_kept() {
    let pool = BufferPool::new();
    current_thread().block_on(async {
        let ops = vec![Op::Data(vec![b'a'; 5000])];
        let mut ours =
            FramedRead::new(Script::new(ops), LinesCodec::new(), pool.clone()).max_frame_len(1000);
        let err = ours.next().await.unwrap().unwrap_err();
        assert!(err.to_string().contains("limit of 1000"), "{err}");
        assert_eq!(ours.held_bytes(), 0);
        assert!(ours.next().await.is_none());
    });
    let s = pool.stats();
    assert_eq!(s.gets, s.returned);
}

/// A read error mid-frame ends the stream once with the error; the buffer goes back.
#[test]
fn a_read_error_mid_frame_gives_everything_back() {
    let pool = BufferPool::new();
    current_thread().block_on(async {
        let ops = vec![
            Op::Data(b"half a li".to_vec()),
            Op::Err(io::ErrorKind::ConnectionReset),
        ];
        let mut ours = FramedRead::new(Script::new(ops), LinesCodec::new(), pool.clone());
        assert!(ours.next().await.unwrap().is_err());
        assert!(ours.next().await.is_none());
    });
    let s = pool.stats();
    assert_eq!(s.gets, s.returned);
}

/// Frames that share the read buffer (`LengthDelimitedCodec`'s `split_to`), kept past the
/// buffer's drain: their bytes stay right, and the pool's books balance (the allocation goes
/// with the frames, its charge back to the pool).
#[test]
fn frames_that_outlive_the_buffer_keep_their_bytes() {
    let pool = BufferPool::builder()
        .max_in_use_bytes(64 << 20)
        .build()
        .unwrap();
    let mut input = Vec::new();
    for i in 0..50u8 {
        input.put_u32(100);
        input.extend([i; 100]);
    }
    current_thread().block_on(async {
        let ops = vec![Op::Data(input)];
        let ours = FramedRead::new(Script::new(ops), LengthDelimitedCodec::new(), pool.clone());
        let frames: Vec<BytesMut> = ours.map(Result::unwrap).collect().await;
        assert_eq!(frames.len(), 50);
        for (i, f) in frames.iter().enumerate() {
            assert!(f.iter().all(|&b| b == i as u8));
        }
    });
    let b = pool.stats().budget.unwrap();
    assert_eq!(b.in_use_bytes, 0, "every charge back");
}

// ---- tokio-util's tests/framed_read.rs, ported (their decoder, our stream) ----

struct U32Decoder;

impl Decoder for U32Decoder {
    type Item = u32;
    type Error = io::Error;
    fn decode(&mut self, buf: &mut BytesMut) -> io::Result<Option<u32>> {
        if buf.len() < 4 {
            return Ok(None);
        }
        Ok(Some(buf.split_to(4).get_u32()))
    }
}

fn framed(ops: Vec<Op>) -> (FramedRead<Script, U32Decoder>, BufferPool) {
    let pool = BufferPool::new();
    (
        FramedRead::new(Script::new(ops), U32Decoder, pool.clone()),
        pool,
    )
}

fn poll_once(s: &mut FramedRead<Script, U32Decoder>) -> Poll<Option<io::Result<u32>>> {
    let waker = futures_util::task::noop_waker();
    s.poll_next_unpin(&mut Context::from_waker(&waker))
}

/// Asserts that the next poll gives the frame `want`.
#[track_caller]
fn assert_frame(s: &mut FramedRead<Script, U32Decoder>, want: u32) {
    assert_eq!(
        poll_once(s).map(|o| o.map(Result::unwrap)),
        Poll::Ready(Some(want))
    );
}

#[test]
fn read_multi_frame_in_packet() {
    let (mut s, _pool) = framed(vec![Op::Data(
        b"\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x02".to_vec(),
    )]);
    assert_frame(&mut s, 0);
    assert_frame(&mut s, 1);
    assert_frame(&mut s, 2);
    assert!(matches!(poll_once(&mut s), Poll::Ready(None)));
}

#[test]
fn read_multi_frame_across_packets() {
    let (mut s, _pool) = framed(vec![
        Op::Data(b"\x00\x00\x00\x00".to_vec()),
        Op::Data(b"\x00\x00\x00\x01".to_vec()),
        Op::Data(b"\x00\x00\x00\x02".to_vec()),
    ]);
    for want in 0..3 {
        assert_frame(&mut s, want);
    }
    assert!(matches!(poll_once(&mut s), Poll::Ready(None)));
}

#[test]
fn read_not_ready() {
    let (mut s, _pool) = framed(vec![
        Op::Pending,
        Op::Data(b"\x00\x00\x00\x00".to_vec()),
        Op::Data(b"\x00\x00\x00\x01".to_vec()),
    ]);
    assert!(poll_once(&mut s).is_pending());
    assert_frame(&mut s, 0);
    assert_frame(&mut s, 1);
    assert!(matches!(poll_once(&mut s), Poll::Ready(None)));
}

#[test]
fn read_partial_then_not_ready() {
    let (mut s, _pool) = framed(vec![
        Op::Data(b"\x00\x00".to_vec()),
        Op::Pending,
        Op::Data(b"\x00\x00\x00\x00\x00\x01\x00\x00\x00\x02".to_vec()),
    ]);
    assert!(poll_once(&mut s).is_pending());
    for want in 0..3 {
        assert_frame(&mut s, want);
    }
    assert!(matches!(poll_once(&mut s), Poll::Ready(None)));
}

#[test]
fn read_err() {
    let (mut s, _pool) = framed(vec![Op::Err(io::ErrorKind::Other)]);
    match poll_once(&mut s) {
        Poll::Ready(Some(Err(e))) => assert_eq!(e.kind(), io::ErrorKind::Other),
        other => panic!("{other:?}"),
    }
}

#[test]
fn read_partial_then_err() {
    let (mut s, _pool) = framed(vec![
        Op::Data(b"\x00\x00".to_vec()),
        Op::Err(io::ErrorKind::Other),
    ]);
    match poll_once(&mut s) {
        Poll::Ready(Some(Err(e))) => assert_eq!(e.kind(), io::ErrorKind::Other),
        other => panic!("{other:?}"),
    }
}

#[test]
fn read_partial_would_block_then_err() {
    let (mut s, _pool) = framed(vec![
        Op::Data(b"\x00\x00".to_vec()),
        Op::Pending,
        Op::Err(io::ErrorKind::Other),
    ]);
    assert!(poll_once(&mut s).is_pending());
    match poll_once(&mut s) {
        Poll::Ready(Some(Err(e))) => assert_eq!(e.kind(), io::ErrorKind::Other),
        other => panic!("{other:?}"),
    }
}

#[test]
fn huge_size() {
    // tokio-util's reads 32 KiB of zeros through a decoder of 32 KiB frames.
    struct Big;
    impl Decoder for Big {
        type Item = u32;
        type Error = io::Error;
        fn decode(&mut self, buf: &mut BytesMut) -> io::Result<Option<u32>> {
            if buf.len() < 32 * 1024 {
                return Ok(None);
            }
            buf.advance(32 * 1024);
            Ok(Some(0))
        }
    }
    let data = vec![0u8; 32 * 1024];
    let pool = BufferPool::new();
    let mut s = FramedRead::new(&data[..], Big, pool.clone());
    current_thread().block_on(async {
        assert_eq!(s.next().await.unwrap().unwrap(), 0);
        assert!(s.next().await.is_none());
    });
}

#[test]
fn data_remaining_is_error() {
    let (mut s, _pool) = framed(vec![Op::Data(b"\x00\x00\x00\x00\x00".to_vec())]);
    assert_frame(&mut s, 0);
    assert!(matches!(poll_once(&mut s), Poll::Ready(Some(Err(_)))));
}

#[test]
fn multi_frames_on_eof() {
    struct MyDecoder(Vec<u32>);
    impl Decoder for MyDecoder {
        type Item = u32;
        type Error = io::Error;
        fn decode(&mut self, _: &mut BytesMut) -> io::Result<Option<u32>> {
            unreachable!();
        }
        fn decode_eof(&mut self, _: &mut BytesMut) -> io::Result<Option<u32>> {
            if self.0.is_empty() {
                return Ok(None);
            }
            Ok(Some(self.0.remove(0)))
        }
    }
    let pool = BufferPool::new();
    let mut s = FramedRead::new(Script::new([]), MyDecoder(vec![0, 1, 2, 3]), pool);
    current_thread().block_on(async {
        for want in 0..4 {
            assert_eq!(s.next().await.unwrap().unwrap(), want);
        }
        assert!(s.next().await.is_none());
    });
}

#[test]
fn read_eof_then_resume() {
    let (mut s, _pool) = framed(vec![
        Op::Data(b"\x00\x00\x00\x01".to_vec()),
        Op::Data(Vec::new()),
        Op::Data(b"\x00\x00\x00\x02".to_vec()),
        Op::Data(Vec::new()),
        Op::Data(Vec::new()),
    ]);
    // An empty chunk is an end of stream; tokio-util's stream ends and may be read again.
    assert_frame(&mut s, 1);
    assert!(matches!(poll_once(&mut s), Poll::Ready(None)));
    assert_frame(&mut s, 2);
    assert!(matches!(poll_once(&mut s), Poll::Ready(None)));
    assert!(matches!(poll_once(&mut s), Poll::Ready(None)));
}

// ---- tokio-util's tests/framed_write.rs, ported ----

#[test]
fn write_multi_frame_in_packet_then_the_buffer_goes_back() {
    let pool = BufferPool::new();
    current_thread().block_on(async {
        let mut out = FramedWrite::new(Vec::new(), LengthDelimitedCodec::new(), pool.clone());
        for i in 0..3u8 {
            out.feed(bytes::Bytes::from(vec![i; 3])).await.unwrap();
        }
        assert!(out.held_bytes() > 0, "buffered until flushed");
        SinkExt::<bytes::Bytes>::flush(&mut out).await.unwrap();
        assert_eq!(out.held_bytes(), 0, "flushed: the buffer is back");
        let want: Vec<u8> = (0..3u8).flat_map(|i| [0, 0, 0, 3, i, i, i]).collect();
        assert_eq!(out.get_ref(), &want);
    });
    let s = pool.stats();
    assert_eq!(s.gets, s.returned);
}

#[test]
fn write_hits_backpressure() {
    // tokio-util's: with a boundary of 8 bytes per item, feeding more than the boundary makes
    // `poll_ready` write out first; every item arrives, in order.
    const ITER: usize = 2 * 1024;
    let pool = BufferPool::new();
    current_thread().block_on(async {
        let mut out = FramedWrite::new(Vec::new(), LinesCodec::new(), pool.clone());
        out.set_backpressure_boundary(ITER * 8);
        for i in 0..=ITER * 2 {
            out.feed(i.to_string()).await.unwrap();
        }
        SinkExt::<String>::flush(&mut out).await.unwrap();
        let text = String::from_utf8(out.get_ref().clone()).unwrap();
        let got: Vec<usize> = text.lines().map(|l| l.parse().unwrap()).collect();
        assert_eq!(got, (0..=ITER * 2).collect::<Vec<_>>());
        assert_eq!(out.held_bytes(), 0);
    });
}

/// `BufWriter`: small writes are buffered, large ones pass through, and the buffer is held
/// only while bytes wait.
#[test]
fn buf_writer_holds_a_buffer_only_while_bytes_wait() {
    use tokio::io::AsyncWriteExt;
    let pool = BufferPool::new();
    current_thread().block_on(async {
        let mut w = tierpool::io::BufWriter::new(Vec::new(), pool.clone());
        assert_eq!(w.held_bytes(), 0);
        w.write_all(b"small").await.unwrap();
        assert!(w.held_bytes() > 0);
        assert!(w.get_ref().is_empty(), "buffered");
        let big = vec![7u8; 100_000];
        w.write_all(&big).await.unwrap(); // flushes the small bytes, then passes through
        assert_eq!(w.held_bytes(), 0);
        assert_eq!(&w.get_ref()[..5], b"small");
        w.write_all(b"tail").await.unwrap();
        w.shutdown().await.unwrap();
        assert_eq!(w.held_bytes(), 0);
        let mut want = b"small".to_vec();
        want.extend(&big);
        want.extend(b"tail");
        assert_eq!(w.get_ref(), &want);
    });
    let s = pool.stats();
    assert_eq!(s.gets, s.returned);
}

/// Items larger than the backpressure boundary (a 64 KiB reply) are encoded into pooled
/// buffers that fit once two in a row needed that much: the sink sizes its next buffer for
/// what the last two held, so the encoder's `reserve` does not grow it out of the pool on
/// every item; a smaller item after them is encoded into a small buffer again.
#[test]
fn large_items_are_encoded_into_pooled_buffers_that_fit() {
    let pool = BufferPool::new();
    let item = bytes::Bytes::from(vec![5u8; 64 << 10]);
    current_thread().block_on(async {
        let mut out = FramedWrite::new(Vec::new(), BytesCodec::new(), pool.clone());
        for _ in 0..50 {
            out.send(item.clone()).await.unwrap();
            assert_eq!(out.held_bytes(), 0);
        }
        assert_eq!(out.get_ref().len(), 50 * item.len());
        // A small item after the large ones: a buffer of the large size (the last two
        // needed it), then, once one buffer held little, boundary-sized ones again.
        for _ in 0..2 {
            out.send(bytes::Bytes::from_static(b"tail")).await.unwrap();
        }
        out.feed(bytes::Bytes::from_static(b"tail")).await.unwrap();
        assert!(out.held_bytes() <= 8 << 10, "{}", out.held_bytes());
        SinkExt::<bytes::Bytes>::flush(&mut out).await.unwrap();
        assert!(out.get_ref().ends_with(b"tailtailtail"));
    });
    let s = pool.stats();
    assert_eq!(s.gets, 53);
    // The first two items grow the boundary-sized buffer out of the pool; each later one
    // fits a buffer of its size, taken once and reused. Misses: those two, the small items'
    // first buffer, and the one of the large size.
    assert_eq!(
        s.returned,
        s.gets - 2,
        "only the first two grown out of the pool"
    );
    assert_eq!(s.misses, 4, "{s:?}");
}

/// One large item among small ones, or items that alternate between large and small, do
/// not make small items take large buffers; a sink made ready and flushed with nothing sent
/// keeps what it learned.
#[test]
fn the_write_buffer_follows_sizes_that_repeat_not_one_offs() {
    use futures_util::future::poll_fn;
    use std::pin::Pin;
    let pool = BufferPool::new();
    let small = bytes::Bytes::from(vec![1u8; 100]);
    let large = bytes::Bytes::from(vec![2u8; 1 << 20]);
    current_thread().block_on(async {
        let mut out = FramedWrite::new(Vec::new(), BytesCodec::new(), pool.clone());
        let held_for = |out: &mut FramedWrite<Vec<u8>, BytesCodec>, item: &bytes::Bytes| {
            out.feed(item.clone()).now_or_never().unwrap().unwrap();
            let held = out.held_bytes();
            SinkExt::<bytes::Bytes>::flush(out)
                .now_or_never()
                .unwrap()
                .unwrap();
            held
        };
        for item in [&small, &large, &small, &large, &small, &small] {
            let held = held_for(&mut out, item);
            if item.len() == small.len() {
                assert!(held <= 8 << 10, "a small item in a {held}-byte buffer");
            }
        }
        // Two large items in a row: the third fits a buffer taken at its size.
        held_for(&mut out, &large);
        held_for(&mut out, &large);
        let before = pool.stats();
        // Made ready and flushed with nothing sent: the buffer goes back, the sizes stay.
        poll_fn(|cx| Sink::<bytes::Bytes>::poll_ready(Pin::new(&mut out), cx))
            .await
            .unwrap();
        SinkExt::<bytes::Bytes>::flush(&mut out).await.unwrap();
        assert!(held_for(&mut out, &large) >= large.len());
        let after = pool.stats();
        assert_eq!(
            after.returned - before.returned,
            after.gets - before.gets,
            "none grown out of the pool"
        );
    });
}

/// Under a budget, the sink takes the larger size of the last buffers only when there is
/// room for it at once: with less room than that, a small item is encoded into a
/// boundary-sized buffer without waiting.
#[test]
fn under_a_budget_a_larger_last_size_is_not_waited_for() {
    let pool = BufferPool::builder()
        .max_in_use_bytes(160 << 10)
        .build()
        .unwrap();
    let big = bytes::Bytes::from(vec![1u8; 64 << 10]);
    let mut out = FramedWrite::new(Vec::new(), BytesCodec::new(), pool.clone());
    for _ in 0..3 {
        out.send(big.clone()).now_or_never().expect("room").unwrap();
    }
    let held = pool.get(100 << 10); // leaves less room than a 64 KiB buffer
    out.send(bytes::Bytes::from_static(b"small"))
        .now_or_never()
        .expect("a boundary-sized buffer, not a wait for the larger one")
        .unwrap();
    assert_eq!(out.get_ref().len(), 3 * big.len() + 5);
    drop(held);
    drop(out);
    let s = pool.stats();
    assert_eq!(
        s.returned,
        s.gets - 2,
        "only the first two grown out of the pool"
    );
}
