//! Model-based randomized tests: long sequences of get / drop / put / grow / trim on one thread,
//! checked step by step against a simple reference model of what the pool must retain.

use std::time::Duration;

use proptest::prelude::*;
use tierpool::{BufferPool, PooledBuf, Stats};

use crate::common;

const TIERS: [usize; 6] = [64, 100, 256, 1000, 4096, 6000];

#[derive(Debug, Clone)]
enum Op {
    Get(usize),
    GetZeroed(usize),
    TryGet(usize),
    Drop(usize),
    PutBack(usize),
    Grow(usize, usize),
    Foreign(usize),
    Trim,
}

fn op() -> impl Strategy<Value = Op> {
    let size = prop_oneof![0..7000usize, Just(0usize), Just(6000usize), Just(6001usize)];
    prop_oneof![
        4 => size.clone().prop_map(Op::Get),
        1 => size.clone().prop_map(Op::GetZeroed),
        1 => size.prop_map(Op::TryGet),
        3 => any::<usize>().prop_map(Op::Drop),
        1 => any::<usize>().prop_map(Op::PutBack),
        1 => (any::<usize>(), 1..5000usize).prop_map(|(i, n)| Op::Grow(i, n)),
        1 => prop_oneof![0..7000usize, Just(63usize), Just(64usize), Just(65usize), Just(12000usize)]
            .prop_map(Op::Foreign),
        1 => Just(Op::Trim),
    ]
}

/// What the pool must hold: per tier, the capacities of retained buffers.
#[derive(Debug, Default)]
struct Model {
    retained: Vec<Vec<usize>>,
    /// Tiers whose get was offered a larger tier's buffer already (once per decay interval,
    /// and the interval here is longer than any case).
    lent: Vec<bool>,
    gets: u64,
    hits: u64,
    misses: u64,
    oversize: u64,
    returned: u64,
    discarded: u64,
}

impl Model {
    fn new() -> Self {
        Model {
            retained: vec![Vec::new(); TIERS.len()],
            lent: vec![false; TIERS.len()],
            ..Model::default()
        }
    }

    fn tier_for_get(n: usize) -> Option<usize> {
        TIERS.iter().position(|&s| s >= n)
    }

    /// The tiers that may lend to a get of tier `t`: larger, at most twice its size.
    fn lenders(t: usize) -> impl Iterator<Item = usize> {
        (t + 1..TIERS.len()).take_while(move |&u| TIERS[u] <= 2 * TIERS[t])
    }

    fn tier_for_put(cap: usize) -> Option<usize> {
        if cap > *TIERS.last().unwrap() {
            return None;
        }
        TIERS.iter().rposition(|&s| s <= cap)
    }

    /// Checks a buffer just handed out for `n` bytes and updates the model.
    fn got(&mut self, n: usize, buf: &PooledBuf) {
        self.gets += 1;
        let cap = buf.capacity();
        assert!(cap >= n, "false hit: asked {n}, got {cap}");
        match Self::tier_for_get(n) {
            None => {
                self.oversize += 1;
                assert_eq!(cap, n, "oversize buffers are exact");
            }
            Some(t) => {
                // Its own tier first; with none retained there, a larger tier up to twice
                // its size may lend a buffer of exactly its size (`lenders`), once per tier
                // and interval; otherwise it is fresh.
                let own = self.retained[t].iter().position(|&c| c == cap);
                let mut offered = false;
                let from = match own {
                    Some(i) => Some((t, i)),
                    None => {
                        let held = &self.retained[t];
                        assert!(held.is_empty(), "tier {t} held {held:?}, gave {cap}");
                        offered = !std::mem::replace(&mut self.lent[t], true);
                        Self::lenders(t)
                            .filter(|&u| offered && cap == TIERS[u])
                            .find_map(|u| {
                                let i = self.retained[u].iter().position(|&c| c == cap)?;
                                Some((u, i))
                            })
                    }
                };
                if let Some((u, i)) = from {
                    self.retained[u].swap_remove(i);
                    self.hits += 1;
                } else {
                    // Offered a loan: no lender held a buffer of its exact size.
                    for u in Self::lenders(t).filter(|_| offered) {
                        let held = &self.retained[u];
                        assert!(
                            !held.contains(&TIERS[u]),
                            "allocated while lender {u} held {held:?}"
                        );
                    }
                    assert_eq!(cap, TIERS[t], "fresh buffers have the tier's exact size");
                    self.misses += 1;
                }
            }
        }
    }

    fn returned(&mut self, cap: usize) {
        self.returned += 1;
        match Self::tier_for_put(cap) {
            Some(t) => self.retained[t].push(cap),
            None => self.discarded += 1,
        }
    }

    fn trim(&mut self) {
        for t in &mut self.retained {
            self.discarded += t.len() as u64;
            t.clear();
        }
    }

    fn check(&self, s: &Stats) {
        assert_eq!(s.gets, self.gets, "{s}");
        assert_eq!(s.hits, self.hits, "{s}");
        assert_eq!(s.misses, self.misses, "{s}");
        assert_eq!(s.oversize, self.oversize, "{s}");
        assert_eq!(s.returned, self.returned, "{s}");
        assert_eq!(s.discarded, self.discarded, "{s}");
        for (t, held) in self.retained.iter().enumerate() {
            assert_eq!(s.tiers[t].retained_buffers, held.len(), "tier {t}: {s}");
            assert_eq!(
                s.tiers[t].retained_bytes,
                held.iter().sum::<usize>(),
                "tier {t}"
            );
        }
        common::assert_books_balance(s);
    }
}

fn run(ops: &[Op], pool: &BufferPool, model: Option<&mut Model>) {
    let mut fallback = Model::new();
    let exact = model.is_some();
    let model = model.unwrap_or(&mut fallback);
    let mut held: Vec<PooledBuf> = Vec::new();
    for op in ops {
        match *op {
            Op::Get(n) | Op::GetZeroed(n) | Op::TryGet(n) => {
                let b = match op {
                    Op::Get(_) => pool.get(n),
                    Op::GetZeroed(_) => {
                        let b = pool.get_zeroed(n);
                        assert_eq!(b.len(), n);
                        assert!(b.iter().all(|&x| x == 0));
                        b
                    }
                    _ => pool.try_get(n).unwrap(),
                };
                if !matches!(op, Op::GetZeroed(_)) {
                    assert!(b.is_empty(), "stale length");
                }
                if exact {
                    model.got(n, &b);
                } else {
                    assert!(b.capacity() >= n);
                }
                held.push(b);
            }
            Op::Drop(i) if !held.is_empty() => {
                let b = held.swap_remove(i % held.len());
                let cap = b.capacity();
                drop(b);
                model.returned(cap);
            }
            Op::PutBack(i) if !held.is_empty() => {
                let v = held.swap_remove(i % held.len()).into_vec();
                let cap = v.capacity();
                pool.put(v);
                model.returned(cap);
            }
            Op::Grow(i, extra) if !held.is_empty() => {
                let len = held.len();
                let b = &mut held[i % len];
                let fill = b.len() + extra;
                b.resize(fill, 0xEE);
            }
            Op::Foreign(cap) => {
                let v: Vec<u8> = Vec::with_capacity(cap);
                let cap = v.capacity();
                pool.put(v);
                model.returned(cap);
            }
            Op::Trim => {
                pool.trim();
                model.trim();
            }
            _ => {}
        }
        if exact {
            model.check(&pool.stats());
        }
    }
    let s = pool.stats();
    assert!(s.depot_bytes <= pool.max_retained_bytes());
    // The depot and every thread cache together, the large slot included: one number.
    assert!(s.retained_bytes <= common::retained_bound(pool, 1), "{s}");
}

/// Longest operation sequence: Miri interprets every step, so it gets shorter ones.
const MAX_OPS: usize = if cfg!(miri) { 40 } else { 300 };

proptest! {
    #![proptest_config(ProptestConfig {
        cases: if cfg!(miri) { 2 } else { 256 },
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// With a cap that is never reached, the pool must match the model exactly: every hit,
    /// miss, retained buffer and byte. A tiny thread budget forces traffic through the depot.
    #[test]
    fn pool_matches_reference_model(ops in proptest::collection::vec(op(), 1..MAX_OPS)) {
        let pool = BufferPool::builder()
            .tiers(TIERS)
            .max_retained_bytes(1 << 30)
            .thread_cache_bytes(5000)
            .decay_interval(Duration::from_secs(3600))
            .build()
            .unwrap();
        let mut model = Model::new();
        run(&ops, &pool, Some(&mut model));
    }

    /// With a small cap the pool releases buffers; then only the invariants are checked:
    /// no false hits, caps held, counters consistent.
    #[test]
    fn small_cap_keeps_invariants(ops in proptest::collection::vec(op(), 1..MAX_OPS), cap in 6000..30000usize) {
        let pool = BufferPool::builder()
            .tiers(TIERS)
            .max_retained_bytes(cap)
            .thread_cache_bytes(cap / 4)
            .build()
            .unwrap();
        run(&ops, &pool, None);
        let s = pool.stats();
        common::assert_books_balance(&s);
    }
}
