//! `io::collect_body` over an HTTP body played from arbitrary input: bytes cut anywhere with
//! waits between the pieces, a declared length that may lie (or none), a limit, a budget or
//! not, perhaps a failure at the end; the pool holds buffers the program grew and gave back.
//! Checked: the bytes collected are the body's; a body longer than the limit is `TooLarge`
//! (without being read when it declares so); at every wait at most `max(2P, T0)` held for the
//! `P` bytes received; every buffer (and every reserved byte) back at the end.
//!
//! `cargo +nightly fuzz run body_collect` (from `fuzz/`).

#![no_main]

#[path = "common/mod.rs"]
mod common;

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use common::{concat, cut, Chunk};
use http_body::{Body, Frame, SizeHint};
use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use tierpool::io::{collect_body, CollectError};
use tierpool::BufferPool;

#[derive(Arbitrary, Debug)]
struct Input {
    body: Vec<Chunk>,
    /// The declared length: `None` unknown; else the real one plus this (a lie, if not 0).
    declared: Option<i16>,
    limit: u32,
    budget: bool,
    cuts: Vec<u16>,
    waits: Vec<bool>,
    fail: bool,
    /// Grown buffers put in the pool first: a tier (by index, above the smallest) and how far
    /// past its size.
    grown: Vec<(u8, u16)>,
}

struct Script {
    steps: VecDeque<common::Step>,
    declared: Option<u64>,
    polled: bool,
}

impl Body for Script {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        self.polled = true;
        match self.steps.pop_front() {
            None => Poll::Ready(None),
            Some(common::Step::Data(d)) => Poll::Ready(Some(Ok(Frame::data(Bytes::from(d))))),
            Some(common::Step::Err) => Poll::Ready(Some(Err(std::io::Error::other("reset")))),
            Some(common::Step::Pending) => {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        }
    }

    fn size_hint(&self) -> SizeHint {
        self.declared.map_or_else(SizeHint::new, SizeHint::with_exact)
    }
}

fuzz_target!(|input: Input| {
    let data = concat(&input.body);
    let limit = input.limit as usize % (1 << 20);
    let declared = input
        .declared
        .map(|lie| (data.len() as i64 + i64::from(lie)).max(0) as u64);
    let pool = if input.budget {
        BufferPool::builder().max_in_use_bytes(64 << 20).build().unwrap()
    } else {
        BufferPool::new()
    };
    let sizes = pool.tier_sizes().to_vec();
    for &(tier, past) in input.grown.iter().take(8) {
        let t = 1 + usize::from(tier) % (sizes.len() - 2);
        pool.put(Vec::with_capacity(sizes[t] + usize::from(past) % (sizes[t + 1] - sizes[t])));
    }
    let puts = pool.stats().returned;
    let floor = sizes[0];
    let body = Script {
        steps: cut(&data, &input.cuts, &input.waits, input.fail).into(),
        declared,
        polled: false,
    };
    let mut collect = collect_body(body, &pool, limit);
    let mut cx = Context::from_waker(Waker::noop());
    let got = loop {
        match Pin::new(&mut collect).poll(&mut cx) {
            Poll::Ready(r) => break r,
            Poll::Pending => {
                let (held, p) = (collect.held_bytes(), collect.received());
                assert!(held <= (2 * p).max(floor), "{held} held for {p} received");
            }
        }
    };
    let polled = collect.get_ref().polled;
    drop(collect);
    match got {
        Ok(chain) => {
            assert!(data.len() <= limit, "{} bytes collected over a limit of {limit}", data.len());
            assert!(chain.to_vec() == data, "the bytes collected differ");
        }
        Err(CollectError::TooLarge { limit: l }) => {
            assert_eq!(l, limit);
            let over = data.len() > limit || declared.is_some_and(|d| d > limit as u64);
            assert!(over, "refused a body of {} bytes (declared {declared:?})", data.len());
            if declared.is_some_and(|d| d > limit as u64) {
                assert!(!polled, "a declared length over the limit was read");
            }
        }
        Err(CollectError::Body(_)) => assert!(input.fail, "a body error without a failure"),
        Err(CollectError::Alloc(e)) => panic!("{e}"),
    }
    let s = pool.stats();
    assert_eq!(s.gets, s.returned - puts, "every buffer back: {s}");
    if let Some(b) = &s.budget {
        assert_eq!((b.in_use_bytes, b.reserved_bytes), (0, 0), "{s}");
    }
});
