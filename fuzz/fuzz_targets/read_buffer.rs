//! `ReadBuffer` driven by arbitrary operations over a peer that sends arbitrary bytes in
//! arbitrary pieces: the unread bytes always those the peer sent, in order, less those taken;
//! views keep their bytes whatever happens after them; at every wait at most
//! `max(2P, T0)` held for the `P` bytes unread; a frame over the limit an error that holds
//! nothing; every buffer back once the buffer and the views are gone.
//!
//! `cargo +nightly fuzz run read_buffer` (from `fuzz/`).

#![no_main]

#[path = "common/mod.rs"]
mod common;

use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use common::{assert_bound, concat, cut, exact_pool, in_use, Chunk, Peer};
use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use tierpool::io::ReadBuffer;
use tierpool::PooledBytes;

#[derive(Arbitrary, Debug)]
enum Op {
    /// One poll of a read from the peer.
    Read,
    /// The first `n` (modulo one more than what is unread) bytes taken as a view, kept.
    SplitTo(u16),
    /// The same, discarded.
    Advance(u16),
    /// The first occurrence of a byte pair.
    Find([u8; 2]),
    /// A kept view dropped.
    Drop(u8),
    Clear,
}

#[derive(Arbitrary, Debug)]
struct Input {
    data: Vec<Chunk>,
    cuts: Vec<u16>,
    waits: Vec<bool>,
    fail: bool,
    /// The limit on unread bytes, if any.
    max_len: Option<u16>,
    ops: Vec<Op>,
}

fuzz_target!(|input: Input| {
    let data = concat(&input.data);
    let pool = exact_pool();
    let mut peer = Peer::new(cut(&data, &input.cuts, &input.waits, input.fail));
    let mut buf = ReadBuffer::new(pool.clone());
    if let Some(max) = input.max_len {
        buf = buf.max_len(usize::from(max).max(1));
    }
    let mut cx = Context::from_waker(Waker::noop());
    // The model: what the peer has sent so far, and where the unread part begins.
    let mut sent = 0usize;
    let mut unread: Vec<u8> = Vec::new();
    let mut kept: Vec<(PooledBytes, Vec<u8>)> = Vec::new();
    for op in input.ops.iter().chain(std::iter::repeat_n(&Op::Read, 64)) {
        match op {
            Op::Read => match buf.poll_read_from(&mut cx, Pin::new(&mut peer)) {
                Poll::Pending => assert_bound(&pool, buf.held_bytes(), buf.len()),
                Poll::Ready(Ok(n)) => {
                    unread.extend_from_slice(&data[sent..sent + n]);
                    sent += n;
                }
                Poll::Ready(Err(e)) => {
                    // Over the limit (InvalidData) or the peer's failure; either way the
                    // buffer holds nothing afterwards.
                    match e.kind() {
                        std::io::ErrorKind::InvalidData => {
                            let max = usize::from(input.max_len.expect("no limit set")).max(1);
                            assert!(unread.len() >= max, "{e}: {} unread", unread.len());
                            assert_eq!((buf.len(), buf.held_bytes()), (0, 0));
                        }
                        std::io::ErrorKind::ConnectionReset => assert!(input.fail),
                        _ => panic!("unexpected error {e}"),
                    }
                    break;
                }
            },
            Op::SplitTo(n) | Op::Advance(n) => {
                let n = usize::from(*n) % (unread.len() + 1);
                if let Op::SplitTo(_) = op {
                    let view = buf.split_to(n);
                    assert_eq!(&view[..], &unread[..n]);
                    if kept.len() < 64 {
                        kept.push((view, unread[..n].to_vec()));
                    }
                } else {
                    buf.advance(n);
                }
                unread.drain(..n);
            }
            Op::Find(pair) => {
                let expected = unread.windows(2).position(|w| w == pair);
                assert_eq!(buf.find(pair), expected);
            }
            Op::Drop(i) => {
                if !kept.is_empty() {
                    let i = usize::from(*i) % kept.len();
                    kept.swap_remove(i);
                }
            }
            Op::Clear => {
                buf.clear();
                unread.clear();
            }
        }
        assert_eq!(buf.unread(), &unread[..]);
        assert_eq!(buf.len(), unread.len());
        for (view, bytes) in &kept {
            assert_eq!(&view[..], &bytes[..]);
        }
    }
    drop(buf);
    drop(kept);
    assert_eq!(in_use(&pool), 0, "every buffer back: {}", pool.stats());
});
