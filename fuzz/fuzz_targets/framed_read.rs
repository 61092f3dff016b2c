//! The pooled `FramedRead` against tokio-util's own over the same peer: for each of
//! tokio-util's decoders (and one that reserves a whole frame up front, as
//! `LengthDelimitedCodec` does), arbitrary bytes cut anywhere with waits between the pieces
//! and maybe a failure at the end give the same frames and the same error (`BytesCodec`:
//! the same bytes, its chunks following the reads); at every wait at
//! most `max(2P, T0)` is held for the `P` bytes pending; every buffer back at the end.
//!
//! `cargo +nightly fuzz run framed_read` (from `fuzz/`).

#![no_main]

#[path = "common/mod.rs"]
mod common;

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use bytes::{Buf, BytesMut};
use common::{assert_bound, concat, cut, exact_pool, in_use, Chunk, Peer, Step};
use futures_core::Stream;
use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use tierpool::io::codec::FramedRead;
use tokio_util::codec::{AnyDelimiterCodec, BytesCodec, Decoder, LengthDelimitedCodec, LinesCodec};

#[derive(Arbitrary, Debug)]
enum Codec {
    Lines,
    LengthDelimited,
    AnyDelimiter,
    Bytes,
    Reserving,
}

#[derive(Arbitrary, Debug)]
struct Input {
    codec: Codec,
    /// The decoder's own limit on a frame (its constructor's `max_length`).
    max: u16,
    data: Vec<Chunk>,
    cuts: Vec<u16>,
    waits: Vec<bool>,
    fail: bool,
}

/// Frames of a 2-byte big-endian length and that many bytes; on reading a head it reserves
/// the whole frame at once (a peer's claim, which the pool must not take as the size of what
/// it holds while the bytes trickle in).
struct Reserving {
    max: usize,
}

impl Decoder for Reserving {
    type Item = Vec<u8>;
    type Error = io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> io::Result<Option<Vec<u8>>> {
        if src.len() < 2 {
            return Ok(None);
        }
        let len = usize::from(u16::from_be_bytes([src[0], src[1]]));
        if len > self.max {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "frame too long"));
        }
        if src.len() < 2 + len {
            src.reserve(2 + len - src.len());
            return Ok(None);
        }
        src.advance(2);
        Ok(Some(src.split_to(len).to_vec()))
    }
}

/// Every item of `stream` up to its end or its first error (after which tokio-util's stream
/// ends), with `at_wait` called at each `Pending`.
fn collect<S, T, E>(mut stream: S, mut at_wait: impl FnMut(&S)) -> Vec<Result<T, String>>
where
    S: Stream<Item = Result<T, E>> + Unpin,
    E: std::fmt::Display,
{
    let mut cx = Context::from_waker(Waker::noop());
    let mut out = Vec::new();
    loop {
        match Pin::new(&mut stream).poll_next(&mut cx) {
            Poll::Pending => at_wait(&stream),
            Poll::Ready(None) => return out,
            Poll::Ready(Some(item)) => {
                let failed = item.is_err();
                out.push(item.map_err(|e| e.to_string()));
                if failed {
                    return out;
                }
            }
        }
    }
}

fn same_as_tokio_util<D>(make: impl Fn() -> D, steps: Vec<Step>)
where
    D: Decoder + Unpin,
    D::Item: PartialEq + std::fmt::Debug,
    D::Error: std::fmt::Display,
{
    let pool = exact_pool();
    let expected = collect(
        tokio_util::codec::FramedRead::new(Peer::new(steps.clone()), make()),
        |_| {},
    );
    let got = collect(
        FramedRead::new(Peer::new(steps), make(), pool.clone()),
        |ours: &FramedRead<Peer, D>| {
            assert_bound(&pool, ours.held_bytes(), ours.read_buffer().len())
        },
    );
    assert_eq!(got, expected);
    drop(got);
    assert_eq!(in_use(&pool), 0, "every buffer back: {}", pool.stats());
}

/// `BytesCodec` hands out whatever a read brought, so its chunks follow the reads (which
/// differ: the buffers differ): the bytes, in order, and the ending must be the same.
fn same_bytes_as_tokio_util(steps: Vec<Step>) {
    let pool = exact_pool();
    let flatten = |items: Vec<Result<BytesMut, String>>| {
        let mut bytes = Vec::new();
        let mut error = None;
        for item in items {
            match item {
                Ok(chunk) => bytes.extend_from_slice(&chunk),
                Err(e) => error = Some(e),
            }
        }
        (bytes, error)
    };
    let expected = flatten(collect(
        tokio_util::codec::FramedRead::new(Peer::new(steps.clone()), BytesCodec::new()),
        |_| {},
    ));
    let got = flatten(collect(
        FramedRead::new(Peer::new(steps), BytesCodec::new(), pool.clone()),
        |ours: &FramedRead<Peer, BytesCodec>| {
            assert_bound(&pool, ours.held_bytes(), ours.read_buffer().len())
        },
    ));
    assert_eq!(got, expected);
    assert_eq!(in_use(&pool), 0, "every buffer back: {}", pool.stats());
}

fuzz_target!(|input: Input| {
    let max = usize::from(input.max).max(1);
    let steps = cut(&concat(&input.data), &input.cuts, &input.waits, input.fail);
    match input.codec {
        Codec::Lines => same_as_tokio_util(|| LinesCodec::new_with_max_length(max), steps),
        Codec::LengthDelimited => same_as_tokio_util(
            || {
                LengthDelimitedCodec::builder()
                    .length_field_length(2)
                    .max_frame_length(max)
                    .new_codec()
            },
            steps,
        ),
        Codec::AnyDelimiter => same_as_tokio_util(
            || AnyDelimiterCodec::new_with_max_length(b",;".to_vec(), b",".to_vec(), max),
            steps,
        ),
        Codec::Bytes => same_bytes_as_tokio_util(steps),
        Codec::Reserving => same_as_tokio_util(|| Reserving { max }, steps),
    }
});
