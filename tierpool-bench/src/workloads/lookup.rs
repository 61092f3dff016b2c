//! `lookup` (modelled on gRPC-Go's `mem` package): the tier for a get and for a return, for every size
//! 0..2^19, with 5, 9, 20 and 40 tiers: tierpool's O(1) lookup against a binary search and a
//! linear scan over the same tiers. The figure is time per lookup pair (get + return).

use std::hint::black_box;
use std::time::Duration;

use tierpool::__bench::Lookup as TierLookup;

use super::Ctx;
use crate::contenders::Kind;
use crate::harness::measure::{measure, timed, Case};
use crate::harness::record::{Output, Record};

/// Sizes swept: `0..SIZES`.
pub const SIZES: usize = 1 << 19;

/// Methods compared, as report labels.
pub const METHODS: [&str; 3] = ["tierpool", "binary search", "linear scan"];

/// The tier sets: gRPC-Go's 5 defaults, 9 powers of two (2 KiB..512 KiB), 20 powers of two
/// (1 B..512 KiB), and 40 tiers two per doubling.
pub fn tier_sets() -> Vec<Vec<usize>> {
    let grpc = vec![256, 4096, 16384, 32768, 1 << 20];
    let nine: Vec<usize> = (11..=19).map(|e| 1usize << e).collect();
    let twenty: Vec<usize> = (0..20).map(|e| 1usize << e).collect();
    let mut forty: Vec<usize> = (0..20).flat_map(|e| [1usize << e, 3usize << e]).collect();
    forty.sort_unstable();
    forty.dedup();
    forty.push(1 << 21);
    forty.truncate(40);
    vec![grpc, nine, twenty, forty]
}

/// First tier `>= n` by binary search.
pub fn binary_get(sizes: &[usize], n: usize) -> Option<usize> {
    let i = sizes.partition_point(|&s| s < n);
    (i < sizes.len()).then_some(i)
}

/// Last tier `<= cap` by binary search (none above the largest tier).
pub fn binary_put(sizes: &[usize], cap: usize) -> Option<usize> {
    if cap > *sizes.last()? {
        return None;
    }
    sizes.partition_point(|&s| s <= cap).checked_sub(1)
}

/// First tier `>= n` by linear scan.
pub fn linear_get(sizes: &[usize], n: usize) -> Option<usize> {
    sizes.iter().position(|&s| s >= n)
}

/// Last tier `<= cap` by linear scan (none above the largest tier).
pub fn linear_put(sizes: &[usize], cap: usize) -> Option<usize> {
    if cap > *sizes.last()? {
        return None;
    }
    sizes.iter().rposition(|&s| s <= cap)
}

/// Every size `0..SIZES` looked up once for get and once for return.
#[inline(always)]
pub fn sweep(get: impl Fn(usize) -> Option<usize>, put: impl Fn(usize) -> Option<usize>) -> usize {
    let mut acc = 0usize;
    for size in 0..SIZES {
        let size = black_box(size);
        acc = acc.wrapping_add(get(size).unwrap_or(99));
        acc = acc.wrapping_add(put(size).unwrap_or(99));
    }
    acc
}

fn case(f: impl Fn() -> usize + 'static) -> Case {
    Case {
        run: Box::new(move |iters| {
            timed(|| {
                for _ in 0..iters {
                    black_box(f());
                }
            })
        }),
        ops_per_iter: SIZES as f64,
    }
}

/// Runs the workload.
pub fn run(ctx: &Ctx) -> Output {
    let sets = tier_sets();
    let mut cases = Vec::new();
    for sizes in &sets {
        let ours = TierLookup::new(sizes);
        // The three methods must agree before they are timed.
        for n in (0..SIZES).step_by(97).chain([0, 1, SIZES - 1]) {
            assert_eq!(ours.for_get(n), binary_get(sizes, n));
            assert_eq!(ours.for_put(n), binary_put(sizes, n));
            assert_eq!(ours.for_get(n), linear_get(sizes, n));
            assert_eq!(ours.for_put(n), linear_put(sizes, n));
        }
        let (a, b) = (sizes.clone(), sizes.clone());
        cases.push(case(move || {
            sweep(|n| ours.for_get(n), |n| ours.for_put(n))
        }));
        cases.push(case(move || {
            sweep(|n| binary_get(&a, n), |n| binary_put(&a, n))
        }));
        cases.push(case(move || {
            sweep(|n| linear_get(&b, n), |n| linear_put(&b, n))
        }));
    }
    let measured = measure(
        &mut cases,
        ctx.budget(Duration::from_millis(10)),
        |done, total| {
            if ctx.progress {
                crate::harness::progress::status(&format!("lookup: round {done}/{total}"));
                if done == total {
                    crate::harness::progress::status_done();
                }
            }
        },
    );
    let mut out = Output::default();
    for (i, m) in measured.iter().enumerate() {
        let (set, method) = (i / METHODS.len(), i % METHODS.len());
        out.records.push(Record {
            workload: "lookup".into(),
            contender: METHODS[method].into(),
            allocator: ctx.alloc.name().into(),
            param: format!("{} tiers", sets[set].len()),
            metric: "ns/lookup pair".into(),
            median: m.time.median,
            min: m.time.min,
            max: m.time.max,
            samples: m.time.samples,
            allocs_per_op: None,
            bytes_per_op: None,
            extra: Default::default(),
        });
    }
    out
}

/// The `lookup` workload.
#[derive(Debug)]
pub struct Lookup;

impl super::Scenario for Lookup {
    fn name(&self) -> &'static str {
        "lookup"
    }

    /// No allocation counts: nothing is allocated by construction.
    fn counts_allocations(&self) -> bool {
        false
    }

    fn describe(&self) -> &'static str {
        "Modelled on gRPC-Go's mem package: tier lookup for get and for return, every size 0..2^19, per lookup pair."
    }

    fn weight(&self) -> u64 {
        8
    }

    fn contenders(&self) -> Vec<super::Entry> {
        vec![
            super::Entry::new(METHODS[0], Kind::Tierpool.adaptation()),
            super::Entry::new(METHODS[1], "partition_point over the sorted tier sizes"),
            super::Entry::new(
                METHODS[2],
                "position / rposition over the sorted tier sizes",
            ),
        ]
    }

    /// In the report's own process: it allocates nothing, so no allocator or heap matters.
    fn run(&self, quick: bool) -> Result<Output, String> {
        Ok(run(&Ctx {
            quick,
            alloc: crate::harness::alloc::Allocator::System,
            progress: true,
        }))
    }

    fn child(&self, ctx: &Ctx, _: &super::ChildArgs) -> Result<Option<Output>, String> {
        Ok(Some(run(ctx)))
    }
}
