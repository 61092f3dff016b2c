//! What the I/O tests share: runtimes and a scripted peer.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

/// A runtime on this thread.
pub fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A runtime of two worker threads, with I/O and time.
pub fn multi_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// One step of a [`Script`].
#[derive(Debug, Clone)]
pub enum Op {
    /// Bytes, delivered as far as the read offers room (the rest at the next read).
    Data(Vec<u8>),
    /// A read that finds nothing yet (it wakes the task at once).
    Pending,
    /// A read that fails.
    Err(io::ErrorKind),
}

/// An `AsyncRead` that plays its ops in order, then the end of the stream, counting the
/// reads that delivered data.
#[derive(Debug)]
pub struct Script {
    ops: VecDeque<Op>,
    /// Reads that delivered data.
    pub reads: usize,
}

impl Script {
    pub fn new(ops: impl IntoIterator<Item = Op>) -> Script {
        Script {
            ops: ops.into_iter().collect(),
            reads: 0,
        }
    }

    /// A peer that sends `input` in pieces cut at `cuts` (offsets taken modulo its length),
    /// each piece after a wait.
    pub fn cut(input: &[u8], cuts: &[usize]) -> Script {
        Script::new(
            cut(input, cuts, &[])
                .into_iter()
                .flat_map(|op| [Op::Pending, op]),
        )
    }
}

/// `input` cut at `cuts` (offsets taken modulo its length, in any order), with a `Pending`
/// before each piece where `waits` says so.
pub fn cut(input: &[u8], cuts: &[usize], waits: &[bool]) -> Vec<Op> {
    let mut points: Vec<usize> = cuts.iter().map(|&c| c % (input.len() + 1)).collect();
    points.extend([0, input.len()]);
    points.sort_unstable();
    points.dedup();
    let mut ops = Vec::new();
    for (i, w) in points.windows(2).enumerate() {
        if waits.get(i).copied().unwrap_or(false) {
            ops.push(Op::Pending);
        }
        ops.push(Op::Data(input[w[0]..w[1]].to_vec()));
    }
    ops
}

impl AsyncRead for Script {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.ops.pop_front() {
            None => Poll::Ready(Ok(())),
            Some(Op::Pending) => {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            Some(Op::Err(kind)) => Poll::Ready(Err(io::Error::from(kind))),
            Some(Op::Data(mut d)) => {
                let n = d.len().min(buf.remaining());
                buf.put_slice(&d[..n]);
                if n < d.len() {
                    self.ops.push_front(Op::Data(d.split_off(n)));
                }
                self.reads += 1;
                Poll::Ready(Ok(()))
            }
        }
    }
}
