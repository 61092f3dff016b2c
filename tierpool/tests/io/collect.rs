//! `io::collect_body`: bodies cut anywhere come out whole with at most twice what arrived held
//! at every wait; a declared length over the limit is refused before the body is polled or
//! memory taken, a body that sends more is cut at the limit; errors give every buffer back;
//! under a budget more bodies than it holds all complete, and a waiting body is not polled.
#![cfg(all(feature = "http-body", not(any(miri, loom))))]

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tierpool::io::{collect_body, CollectError};
use tierpool::BufferPool;

use crate::common::{in_use, Rng};

/// What a scripted body does next.
#[derive(Debug, Clone)]
enum Step {
    Data(Vec<u8>),
    Pending,
    Fail,
}

/// A body played from a script, declaring `declared` bytes (or an unknown length); counts
/// the times it was polled.
struct Script {
    steps: VecDeque<Step>,
    declared: Option<u64>,
    polls: Arc<AtomicUsize>,
}

impl Script {
    fn new(steps: Vec<Step>, declared: Option<u64>) -> Self {
        Script {
            steps: steps.into(),
            declared,
            polls: Arc::default(),
        }
    }
}

impl Body for Script {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        self.polls.fetch_add(1, Ordering::SeqCst);
        match self.steps.pop_front() {
            None => Poll::Ready(None),
            Some(Step::Data(d)) => Poll::Ready(Some(Ok(Frame::data(Bytes::from(d))))),
            Some(Step::Fail) => Poll::Ready(Some(Err(std::io::Error::other("reset")))),
            Some(Step::Pending) => {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self.declared {
            Some(n) => SizeHint::with_exact(n),
            None => SizeHint::new(),
        }
    }
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 31 + i / 251) as u8).collect()
}

/// `data` in pieces of the given sizes (cycled), a wait after each.
fn cut(data: &[u8], sizes: &[usize]) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut at = 0;
    for &n in sizes.iter().cycle() {
        if at >= data.len() {
            break;
        }
        let n = n.clamp(1, data.len() - at);
        steps.push(Step::Data(data[at..at + n].to_vec()));
        steps.push(Step::Pending);
        at += n;
    }
    steps
}

fn budgeted(limit: usize) -> BufferPool {
    BufferPool::builder()
        .max_in_use_bytes(limit)
        .build()
        .unwrap()
}

#[test]
fn bodies_cut_anywhere_come_out_whole_holding_at_most_twice_what_arrived() {
    for pool in [BufferPool::new(), budgeted(64 << 20)] {
        let floor = pool.tier_sizes()[0];
        let mut rng = Rng(7);
        for len in [0usize, 1, 255, 256, 1000, 70_000, 1 << 20, (3 << 20) + 17] {
            for declared in [true, false] {
                let data = pattern(len);
                let sizes: Vec<usize> = (0..5).map(|_| 1 + rng.below(20_000) as usize).collect();
                let body = Script::new(cut(&data, &sizes), declared.then_some(len as u64));
                let mut collect = collect_body(body, &pool, 4 << 20);
                let mut cx = Context::from_waker(Waker::noop());
                let chain = loop {
                    match Pin::new(&mut collect).poll(&mut cx) {
                        Poll::Ready(r) => break r.unwrap(),
                        Poll::Pending => {
                            let (held, got) = (collect.held_bytes(), collect.received());
                            assert!(
                                held <= (2 * got).max(floor),
                                "{len} bytes: {held} held for {got} arrived"
                            );
                        }
                    }
                };
                assert!(chain.to_vec() == data, "{len} bytes differ");
                assert!(chain.num_parts() <= 24, "{} parts", chain.num_parts());
            }
        }
        let s = pool.stats();
        assert_eq!(s.gets, s.returned, "every buffer back: {s}");
        if s.budget.is_some() {
            assert_eq!(in_use(&pool), 0);
        }
    }
}

#[test]
fn a_declared_length_over_the_limit_is_refused_before_anything_is_read_or_taken() {
    let pool = budgeted(64 << 20);
    let body = Script::new(vec![Step::Data(vec![1; 10])], Some(20 << 20));
    let polls = body.polls.clone();
    let err = futures_executor_block_on(collect_body(body, &pool, 16 << 20)).unwrap_err();
    assert!(
        matches!(err, CollectError::TooLarge { limit } if limit == 16 << 20),
        "{err}"
    );
    assert_eq!(polls.load(Ordering::SeqCst), 0, "the body was not polled");
    assert_eq!(pool.stats().gets, 0, "no buffer was taken");
    assert_eq!(in_use(&pool), 0);
}

#[test]
fn a_body_that_sends_more_than_the_limit_is_cut_there_and_gives_everything_back() {
    let pool = budgeted(64 << 20);
    let data = pattern(100_000);
    let body = Script::new(cut(&data, &[7_000]), None);
    let err = futures_executor_block_on(collect_body(body, &pool, 50_000)).unwrap_err();
    assert!(
        matches!(err, CollectError::TooLarge { limit: 50_000 }),
        "{err}"
    );
    let s = pool.stats();
    assert_eq!((s.gets, in_use(&pool)), (s.returned, 0), "{s}");
}

#[test]
fn a_body_that_fails_midway_gives_everything_back() {
    let pool = budgeted(64 << 20);
    let mut steps = cut(&pattern(300_000), &[16_384]);
    steps.truncate(20);
    steps.push(Step::Fail);
    let err = futures_executor_block_on(collect_body(
        Script::new(steps, Some(300_000)),
        &pool,
        1 << 20,
    ))
    .unwrap_err();
    assert!(matches!(err, CollectError::Body(_)), "{err}");
    let s = pool.stats();
    assert_eq!((s.gets, in_use(&pool)), (s.returned, 0), "{s}");
}

#[test]
fn a_body_that_waits_for_the_budget_is_not_polled() {
    let pool = budgeted(1 << 20);
    let hog = pool.get(1 << 20);
    let body = Script::new(vec![Step::Data(vec![1; 1000])], Some(1000));
    let polls = body.polls.clone();
    let mut collect = collect_body(body, &pool, 1 << 20);
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..3 {
        assert!(Pin::new(&mut collect).poll(&mut cx).is_pending());
    }
    assert_eq!(
        polls.load(Ordering::SeqCst),
        0,
        "a waiting body stops being read"
    );
    drop(hog);
    let Poll::Ready(Ok(chain)) = Pin::new(&mut collect).poll(&mut cx) else {
        panic!("admitted once the budget has room");
    };
    assert_eq!(chain.len(), 1000);
}

/// Forty bodies of 3 MiB at once under an 8 MiB budget (room for two at a time): every one
/// completes with its bytes, in turn, the budget never passed. Bodies of unknown length are
/// admitted at the limit.
#[test]
fn more_bodies_than_the_budget_holds_all_complete() {
    let limit = 8 << 20;
    let pool = budgeted(limit);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    rt.block_on(async {
        let mut tasks = Vec::new();
        for i in 0..40usize {
            let pool = pool.clone();
            tasks.push(tokio::spawn(async move {
                let data: Vec<u8> = pattern(3 << 20).iter().map(|b| b ^ i as u8).collect();
                let declared = (i % 3 != 0).then_some(data.len() as u64);
                let body = Script::new(cut(&data, &[16_384, 65_536, 1000]), declared);
                let chain = collect_body(body, &pool, 3 << 20).await.unwrap();
                let s = pool.stats().budget.unwrap();
                assert!(s.in_use_bytes <= limit, "{s:?}");
                assert!(chain.to_vec() == data, "body {i} differs");
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
    assert_eq!(in_use(&pool), 0);
}

fn futures_executor_block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}
