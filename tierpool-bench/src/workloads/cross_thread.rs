//! `cross-thread` (modelled on gRPC-Go's transport): a producer takes buffers and fills their
//! ends, a consumer releases them after a bounded channel.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_queue::ArrayQueue;

use super::{run_cases, size_params, Ctx, MakeCases};
use crate::contenders::{touch, Contender, Kind};
use crate::harness::measure::Case;
use crate::harness::record::Output;

/// Sizes measured.
pub const SIZES: [usize; 3] = [4 << 10, 64 << 10, 1 << 20];

/// Slots in the channel between producer and consumer.
pub const CHANNEL: usize = 64;

/// A bounded single-producer single-consumer channel whose ends spin instead of sleeping
/// (sleeping would time the scheduler, not the pools).
#[derive(Debug)]
pub struct SpinChannel<T>(ArrayQueue<T>);

impl<T> SpinChannel<T> {
    /// A channel of `capacity` slots.
    pub fn new(capacity: usize) -> Self {
        SpinChannel(ArrayQueue::new(capacity))
    }

    /// Sends, spinning while the channel is full.
    pub fn send(&self, mut value: T) {
        while let Err(v) = self.0.push(value) {
            value = v;
            std::hint::spin_loop();
        }
    }

    /// Receives, spinning while the channel is empty.
    pub fn recv(&self) -> T {
        loop {
            if let Some(v) = self.0.pop() {
                return v;
            }
            std::hint::spin_loop();
        }
    }
}

/// One thread gets `count` buffers of `n` bytes, writes their ends and sends them; another
/// drops them. Returns the time from the first get until the consumer has dropped the last.
pub fn hand_off<C: Contender>(c: &C, n: usize, count: u64) -> Duration {
    let queue = Arc::new(SpinChannel::<C::B>::new(CHANNEL));
    let rx = queue.clone();
    let consumer = std::thread::spawn(move || {
        for _ in 0..count {
            drop(rx.recv());
        }
    });
    let start = Instant::now();
    for _ in 0..count {
        let mut buf = c.get(n);
        touch(&mut buf, n);
        queue.send(buf);
    }
    consumer.join().expect("consumer thread");
    start.elapsed()
}

struct Cases;

impl MakeCases for Cases {
    fn params(&self) -> Vec<String> {
        size_params(&SIZES)
    }

    fn cases<C: Contender>(&self, c: C) -> Vec<Case> {
        SIZES
            .iter()
            .map(|&n| {
                let c = c.clone();
                Case {
                    run: Box::new(move |iters| hand_off(&c, n, iters)),
                    ops_per_iter: 1.0,
                }
            })
            .collect()
    }
}

/// Runs the workload; each record also carries millions of buffers per second.
pub fn run(ctx: &Ctx, kinds: &[Kind]) -> Output {
    let mut out = run_cases(
        ctx,
        "cross-thread",
        "ns/buffer",
        Duration::from_millis(20),
        kinds,
        || Cases,
    );
    for r in &mut out.records {
        r.extra = BTreeMap::from([("Mbuffers/s".to_string(), 1e3 / r.median)]);
    }
    out
}

/// The `cross-thread` workload.
pub const WORKLOAD: super::OfKinds = super::OfKinds {
    name: "cross-thread",
    describe: "Modelled on gRPC-Go's transport: a producer takes and fills buffers, a consumer releases them after a bounded channel; per buffer.",
    weight: 15,
    run,
};
