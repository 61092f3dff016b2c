//! `threads`: many threads get and put 4 KiB buffers at once on a 2-core machine. The figure
//! is wall time per operation of all threads together; it must not collapse as threads are
//! added beyond the cores.

use std::hint::black_box;
use std::time::Duration;

use super::{parallel, run_cases, Ctx, MakeCases};
use crate::contenders::{touch, Contender, Kind};
use crate::harness::measure::Case;
use crate::harness::record::Output;

/// Buffer size.
pub const SIZE: usize = 4 << 10;

/// Thread counts measured.
pub fn thread_counts(quick: bool) -> &'static [usize] {
    if quick {
        &[1, 2, 8]
    } else {
        &[1, 2, 8, 32, 64]
    }
}

struct Cases(&'static [usize]);

impl MakeCases for Cases {
    fn params(&self) -> Vec<String> {
        self.0.iter().map(|t| format!("{t} threads")).collect()
    }

    fn cases<C: Contender>(&self, c: C) -> Vec<Case> {
        self.0
            .iter()
            .map(|&threads| {
                let c = c.clone();
                Case {
                    run: Box::new(move |iters| {
                        parallel(threads, |_| {
                            // Two buffers at a time, so that a pool that can only keep one
                            // buffer per thread is not flattered.
                            for _ in 0..iters {
                                let mut a = c.get(black_box(SIZE));
                                let mut b = c.get(black_box(SIZE));
                                touch(&mut a, SIZE);
                                touch(&mut b, SIZE);
                                drop(black_box(a));
                                drop(black_box(b));
                            }
                        })
                    }),
                    ops_per_iter: 2.0 * threads as f64,
                }
            })
            .collect()
    }
}

/// Runs the workload.
pub fn run(ctx: &Ctx, kinds: &[Kind]) -> Output {
    run_cases(
        ctx,
        "threads",
        "ns/op (all threads)",
        Duration::from_millis(20),
        kinds,
        || Cases(thread_counts(ctx.quick)),
    )
}

/// The `threads` workload.
pub const WORKLOAD: super::OfKinds = super::OfKinds {
    name: "threads",
    describe: "All threads get/put 4 KiB at once on this 2-core machine (oversubscribed above 2); wall time per operation of all threads together.",
    weight: 20,
    run,
};
