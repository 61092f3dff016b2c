//! `get-put` (modelled on goleveldb's buffer pool): one thread, get + write the first and last byte + release.

use std::time::Duration;

use super::{run_cases, size_params, Ctx, MakeCases};
use crate::contenders::{get_put_once, Contender, Kind};
use crate::harness::measure::{timed, Case};
use crate::harness::record::Output;

/// Sizes measured, 256 B to 16 MiB.
pub const SIZES: [usize; 5] = [256, 4 << 10, 64 << 10, 1 << 20, 16 << 20];

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
                    run: Box::new(move |iters| {
                        timed(|| {
                            for _ in 0..iters {
                                get_put_once(&c, n);
                            }
                        })
                    }),
                    ops_per_iter: 1.0,
                }
            })
            .collect()
    }
}

/// Runs the workload.
pub fn run(ctx: &Ctx, kinds: &[Kind]) -> Output {
    run_cases(
        ctx,
        "get-put",
        "ns/op",
        Duration::from_millis(10),
        kinds,
        || Cases,
    )
}

/// The `get-put` workload.
pub const WORKLOAD: super::OfKinds = super::OfKinds {
    name: "get-put",
    describe: "Modelled on goleveldb's buffer pool: one thread, get + write first and last byte + release, per operation.",
    weight: 25,
    run,
};
