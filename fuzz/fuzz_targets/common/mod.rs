//! What the receive-path targets share: a peer played from the fuzzer's input, and the pool's
//! books.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use tierpool::BufferPool;
use tokio::io::{AsyncRead, ReadBuf};

/// A piece of a peer's bytes: as given, or a run a few input bytes describe (so that short
/// inputs reach frames and messages of tens of KiB, above the pool's smallest tiers, where
/// the amplification bound is more than the floor).
#[derive(Arbitrary, Debug)]
pub enum Chunk {
    Raw(Vec<u8>),
    /// `len` copies of `byte`.
    Run {
        len: u16,
        byte: u8,
    },
    /// `len` bytes counting up from `from` (wrapping).
    Count {
        len: u16,
        from: u8,
    },
}

/// The bytes `chunks` stand for, in order.
pub fn concat(chunks: &[Chunk]) -> Vec<u8> {
    let mut out = Vec::new();
    for chunk in chunks {
        match chunk {
            Chunk::Raw(bytes) => out.extend_from_slice(bytes),
            Chunk::Run { len, byte } => out.extend(std::iter::repeat_n(*byte, usize::from(*len))),
            Chunk::Count { len, from } => out.extend((0..*len).map(|i| from.wrapping_add(i as u8))),
        }
    }
    out
}

/// What the peer does next.
#[derive(Debug, Clone)]
pub enum Step {
    Data(Vec<u8>),
    /// Nothing to read yet (the waker is woken: the bytes are on their way).
    Pending,
    /// The connection fails.
    Err,
}

/// `input` cut after the offsets `cuts` (any order, taken modulo the length), with a
/// `Pending` before a piece where `waits` says so, and a failure at the end if `fail`.
pub fn cut(input: &[u8], cuts: &[u16], waits: &[bool], fail: bool) -> Vec<Step> {
    let mut points: Vec<usize> = cuts
        .iter()
        .map(|&c| usize::from(c) % (input.len() + 1))
        .collect();
    points.extend([0, input.len()]);
    points.sort_unstable();
    points.dedup();
    let mut steps = Vec::new();
    for (i, w) in points.windows(2).enumerate() {
        if waits.get(i).copied().unwrap_or(i % 2 == 0) {
            steps.push(Step::Pending);
        }
        steps.push(Step::Data(input[w[0]..w[1]].to_vec()));
    }
    if fail {
        steps.push(Step::Err);
    }
    steps
}

/// An `AsyncRead` that plays its steps in order, then ends; it delivers no more of a piece
/// than a read offers (the rest stays for the next read).
#[derive(Debug)]
pub struct Peer {
    steps: VecDeque<Step>,
    /// Bytes delivered so far.
    pub delivered: usize,
}

impl Peer {
    pub fn new(steps: Vec<Step>) -> Peer {
        Peer {
            steps: steps.into(),
            delivered: 0,
        }
    }
}

impl AsyncRead for Peer {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.steps.pop_front() {
            None => Poll::Ready(Ok(())),
            Some(Step::Pending) => {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            Some(Step::Err) => Poll::Ready(Err(io::Error::from(io::ErrorKind::ConnectionReset))),
            Some(Step::Data(mut d)) => {
                let n = d.len().min(buf.remaining());
                buf.put_slice(&d[..n]);
                self.delivered += n;
                if n < d.len() {
                    self.steps.push_front(Step::Data(d.split_off(n)));
                }
                Poll::Ready(Ok(()))
            }
        }
    }
}

/// A pool whose account is exact: a budget that never binds counts every byte out, also
/// for buffers that leave the pool with views sharing them.
pub fn exact_pool() -> BufferPool {
    BufferPool::builder()
        .max_in_use_bytes(1 << 30)
        .build()
        .unwrap()
}

/// The bytes out of `pool` (the budget's account).
pub fn in_use(pool: &BufferPool) -> usize {
    pool.stats().budget.expect("budgeted").in_use_bytes
}

/// The amplification bound: while `pending` bytes wait, at most `max(2 * pending, T0)` is
/// held, `T0` the smallest tier.
pub fn assert_bound(pool: &BufferPool, held: usize, pending: usize) {
    let floor = pool.tier_sizes()[0];
    assert!(
        held <= (2 * pending).max(floor),
        "{held} bytes held for {pending} pending"
    );
}
