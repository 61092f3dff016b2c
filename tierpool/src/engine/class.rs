//! Size classes ("tiers") and their constant-time lookup.
//!
//! # The lookup
//!
//! A size `n` is first mapped to a *bucket* in constant time, with one `leading_zeros` and two
//! shifts: the buckets cut every power-of-two range into [`SUB_BUCKETS`] equal parts (sizes up to
//! 32 get a bucket each). This is the float-like encoding that jemalloc and mimalloc use for their
//! size classes, and the integer-log trick of gRPC-Go's `BinaryTieredBufferPool` (its `mem` package) with
//! four more bits of resolution.
//!
//! At build time every bucket records the first tier that could serve the *smallest* size in it.
//! At lookup time that tier is compared with `n`; when `n` is bigger, the next tier is taken,
//! and so on. A tier size `s` ends a bucket exactly when `s` has at most five significant bits
//! (for example 1024, 1280, 1536, 1792: the power-of-two and geometric tiers the builder makes with
//! up to 16 steps per doubling), so for those tiers the first candidate is always right and the
//! lookup is one table load and one comparison, whatever the number of tiers. Arbitrary tier
//! sizes (such as Vitess's 15000) may need a few more comparisons: at most one more per tier that
//! lies strictly inside a single bucket, a bound computed at build time and reported by
//! [`Classes::max_probes`].
//!
//! Lookup for *return* ("the largest tier not above the buffer's capacity") reuses the lookup for
//! get: the smallest tier `>= cap` is the answer if it equals `cap`, otherwise the one before it.

/// log2 of the number of buckets per power-of-two range.
const SUB_BITS: u32 = 4;
/// Buckets per power-of-two range.
pub(crate) const SUB_BUCKETS: usize = 1 << SUB_BITS;

/// The most tiers a pool may have; tier indices are stored as `u16` in the bucket table.
pub(crate) const MAX_TIERS: usize = 4096;

/// The largest alignment an [`AlignedPool`](crate::AlignedPool) takes: 2 MiB (a huge page).
pub(crate) const MAX_ALIGNMENT: usize = 2 << 20;

/// Maps `n` to its bucket. Buckets are ordered: `a <= b` implies `bucket(a) <= bucket(b)`.
///
/// Branch-free: with `x = n - 1` and `h = floor(log2(x | 16))`, the bucket is
/// `16 * (h - 4) + (x >> (h - 4))`. For `x < 32` that is `x` itself (one bucket per size);
/// above, `x >> (h - 4)` keeps the leading bit and the next four, so each power-of-two range
/// `[2^h, 2^(h+1))` is cut into 16 equal buckets numbered `16 * (h - 3) .. 16 * (h - 2)`.
#[inline(always)]
pub(crate) fn bucket(n: usize) -> usize {
    // Work on n - 1 so that a size with five significant bits (a tier boundary) is the *last*
    // size of its bucket, not the first of the next one.
    bucket_of_pred(n.saturating_sub(1))
}

/// The bucket of `x + 1` (`x` is a size minus one), for every `x` including `usize::MAX`
/// (which the fast path gets for a request of 0 bytes, and maps to the last bucket).
#[inline(always)]
pub(crate) fn bucket_of_pred(x: usize) -> usize {
    let shift = (x | SUB_BUCKETS).ilog2() - SUB_BITS;
    ((shift as usize) << SUB_BITS) + (x >> shift)
}

/// Number of buckets that cover every `usize`: `bucket_of_pred(usize::MAX) + 1`.
pub(crate) const ALL_BUCKETS: usize =
    ((usize::BITS - 1 - SUB_BITS) as usize) * SUB_BUCKETS + 2 * SUB_BUCKETS;

/// The smallest size that maps to bucket `b` (inverse of [`bucket`] on bucket starts).
fn bucket_start(b: usize) -> usize {
    if b < 2 * SUB_BUCKETS {
        b + 1
    } else {
        let h = (b >> SUB_BITS) as u32 + SUB_BITS - 1;
        let m = b & (SUB_BUCKETS - 1);
        ((SUB_BUCKETS + m) << (h - SUB_BITS)) + 1
    }
}

/// An immutable, validated set of tier sizes with its lookup table.
///
/// Shared read-only by every thread cache of a pool; never written after construction.
#[derive(Debug, Clone)]
pub(crate) struct Classes {
    sizes: Box<[usize]>,
    /// `table[bucket(n)]` = index of the first tier whose size is >= the bucket's start.
    table: Box<[u16]>,
    max: usize,
    max_probes: usize,
}

impl Classes {
    /// Builds the classes from sorted, deduplicated, non-zero sizes (the builder validates).
    pub(crate) fn new(sizes: Vec<usize>) -> Self {
        debug_assert!(!sizes.is_empty() && sizes.len() <= MAX_TIERS);
        debug_assert!(sizes.windows(2).all(|w| w[0] < w[1]) && sizes[0] > 0);
        let max = *sizes.last().expect("at least one tier");
        let buckets = bucket(max) + 1;
        let mut table = Vec::with_capacity(buckets);
        let mut max_probes = 1;
        // One walk up the buckets and the sizes together: both tiers found per bucket only
        // move up, so building a pool stays cheap under Miri's interpreter too.
        let (mut first, mut last) = (0, 0);
        let mut start = bucket_start(0);
        for b in 0..buckets {
            // The first tier whose size is >= the bucket's start (`b <= bucket(max)`, so
            // `start <= max`: some tier is).
            while sizes[first] < start {
                first += 1;
            }
            // The largest size in this bucket is the next bucket's start minus one (capped at
            // max); the tier serving it bounds how far a lookup in this bucket may walk.
            let next = bucket_start(b + 1);
            let end = next.saturating_sub(1).min(max);
            last = last.max(first);
            while sizes[last] < end {
                last += 1;
            }
            max_probes = max_probes.max(last - first + 1);
            table.push(first as u16);
            start = next;
        }
        Classes {
            sizes: sizes.into_boxed_slice(),
            table: table.into_boxed_slice(),
            max,
            max_probes,
        }
    }

    /// Tier sizes, ascending.
    #[inline]
    pub(crate) fn sizes(&self) -> &[usize] {
        &self.sizes
    }

    /// Number of tiers.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.sizes.len()
    }

    /// The thread caches' lookup for bucket `b` of `usize` (`b < ALL_BUCKETS`): the first
    /// candidate tier, or `len()`, the index of the caches' sentinel tier, above the largest.
    pub(crate) fn first_candidate(&self, b: usize) -> usize {
        self.table.get(b).map_or(self.len(), |&t| usize::from(t))
    }

    /// The most size comparisons any lookup makes (1 for power-of-two and geometric tiers).
    pub(crate) fn max_probes(&self) -> usize {
        self.max_probes
    }

    /// Size of tier `t`.
    #[inline(always)]
    pub(crate) fn size(&self, t: usize) -> usize {
        self.sizes[t]
    }

    /// The larger tiers whose retained buffers may serve a get of tier `t` that its own tier
    /// cannot (no buffer of it is retained where the get looks): those up to twice `t`'s
    /// size, nearest first. A power-of-two pool would hand out a buffer up to that large for
    /// the same request anyway.
    pub(crate) fn lenders(&self, t: usize) -> std::ops::Range<usize> {
        let most = self.sizes[t].saturating_mul(2);
        let end = t + 1 + self.sizes[t + 1..].partition_point(|&s| s <= most);
        t + 1..end
    }

    /// The smallest tier whose size is `>= n`, or `None` if `n` is above the largest tier.
    #[inline(always)]
    pub(crate) fn for_get(&self, n: usize) -> Option<usize> {
        if n > self.max {
            return None;
        }
        Some(self.for_get_in_range(n))
    }

    /// [`Self::for_get`] for an `n` known to be `<= self.max`.
    #[inline(always)]
    fn for_get_in_range(&self, n: usize) -> usize {
        debug_assert!(n <= self.max);
        let b = bucket(n);
        debug_assert!(b < self.table.len());
        // SAFETY: `bucket` is monotonic and `n <= max` (every caller checks), so
        // `b <= bucket(max) == table.len() - 1` (the table has one entry per bucket up to
        // `bucket(max)`, see `new`).
        let mut t = unsafe { *self.table.get_unchecked(b) } as usize;
        if self.max_probes > 1 {
            // SAFETY: table entries are tier indices (`partition_point` over `sizes` for a
            // start `<= max`, hence `< len`), and the walk stops at the latest at tier
            // `len - 1`, whose size is `max >= n`; so `t < len` at every read.
            while unsafe { *self.sizes.get_unchecked(t) } < n {
                t += 1;
            }
        }
        // With one probe per bucket (power-of-two and geometric tiers), every size in the
        // bucket is served by its first candidate: no comparison needed.
        debug_assert!(t < self.sizes.len() && self.sizes[t] >= n);
        debug_assert!(t == 0 || self.sizes[t - 1] < n.max(1));
        t
    }

    /// The largest tier whose size is `<= cap`: where a returned buffer of capacity `cap` is
    /// filed. `None` if `cap` is below the smallest tier or above the largest (such buffers are
    /// released, never kept).
    #[inline(always)]
    pub(crate) fn for_put(&self, cap: usize) -> Option<usize> {
        if cap > self.max {
            return None;
        }
        let t = self.for_get_in_range(cap);
        if self.sizes[t] == cap {
            Some(t)
        } else {
            t.checked_sub(1)
        }
    }
}

#[cfg(test)]
/// Power-of-two tiers from `min` to `max`: every power of two in `[min, max]`, plus `min` and
/// `max` themselves when they are not powers of two.
pub(crate) fn power_of_two(min: usize, max: usize) -> Vec<usize> {
    geometric(min, max, 1)
}

/// Geometric tiers with `steps` classes per doubling: every `p + j * p / steps` (`p` a power of
/// two, `0 <= j < steps`) in `[min, max]`, plus `min` and `max` themselves. `steps` must be a power
/// of two (checked by the builder) so that every class is a bucket boundary.
pub(crate) fn geometric(min: usize, max: usize, steps: usize) -> Vec<usize> {
    let mut out = vec![min];
    let mut p: usize = 1;
    loop {
        let step = (p / steps).max(1);
        let mut s = p;
        while s < p.saturating_mul(2) {
            if s > min && s < max {
                out.push(s);
            }
            match s.checked_add(step) {
                Some(next) => s = next,
                None => break,
            }
        }
        match p.checked_mul(2) {
            Some(next) if next < max => p = next,
            _ => break,
        }
    }
    out.push(max);
    out.sort_unstable();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(
        miri,
        ignore = "the unchecked indexing is the other lookup tests' under Miri; run natively"
    )]
    fn lenders_are_the_larger_tiers_up_to_twice_the_size() {
        let sizes = |c: &Classes, t| c.lenders(t).map(|u| c.size(u)).collect::<Vec<_>>();
        let c = Classes::new(geometric(256, 4096, 4));
        assert_eq!(sizes(&c, 0), [320, 384, 448, 512]);
        assert_eq!(sizes(&c, 1), [384, 448, 512, 640]);
        assert!(c.lenders(c.len() - 1).is_empty(), "none above the largest");
        let c = Classes::new(vec![1024, 2048, 4096, 4097]);
        assert_eq!(sizes(&c, 0), [2048]);
        assert_eq!(sizes(&c, 1), [4096], "4097 is more than twice 2048");
        let c = Classes::new(vec![1024, 3000]);
        assert!(c.lenders(0).is_empty());
    }

    fn reference_get(sizes: &[usize], n: usize) -> Option<usize> {
        sizes.iter().position(|&s| s >= n)
    }

    fn reference_put(sizes: &[usize], cap: usize) -> Option<usize> {
        if cap > *sizes.last().unwrap() {
            return None;
        }
        sizes.iter().rposition(|&s| s <= cap)
    }

    #[test]
    fn buckets_are_monotonic_and_start_where_they_say() {
        let mut prev = 0;
        let limit = if cfg!(miri) { 1 << 10 } else { 1 << 16 };
        for n in 1..limit {
            let b = bucket(n);
            assert!(b == prev || b == prev + 1, "n={n} b={b} prev={prev}");
            if b != prev || n == 1 {
                assert_eq!(bucket_start(b), n, "bucket {b}");
            }
            prev = b;
        }
        for shift in 0..usize::BITS {
            let n = 1usize << shift;
            assert!(bucket_start(bucket(n)) <= n);
            assert!(bucket(usize::MAX) >= bucket(n));
        }
    }

    #[test]
    fn all_buckets_cover_usize() {
        assert_eq!(bucket_of_pred(usize::MAX), ALL_BUCKETS - 1);
        assert_eq!(bucket_of_pred(0), 0);
        let c = Classes::new(vec![256, 4096]);
        assert_eq!(
            c.first_candidate(ALL_BUCKETS - 1),
            2,
            "above the largest tier: the sentinel"
        );
        assert_eq!(c.first_candidate(bucket(4096)), 1);
    }

    #[test]
    fn bucket_ends_on_five_significant_bits() {
        // Every size with at most 5 significant bits is the last size of its bucket.
        for h in 5..40 {
            for m in 0..16usize {
                let s = (16 + m) << (h - 4);
                assert_ne!(bucket(s), bucket(s + 1), "s={s}");
            }
        }
    }

    /// Every size up to `limit` (under Miri, which is ~1000x slower: every tier boundary and
    /// its neighbours, plus a stride).
    fn sizes_to_check(sizes: &[usize], limit: usize) -> Vec<usize> {
        if cfg!(miri) {
            let mut ns: Vec<usize> = sizes
                .iter()
                .flat_map(|&s| [s.saturating_sub(1), s, s + 1])
                .chain((0..=limit).step_by(4099))
                .chain([0, 1, 2, limit])
                .filter(|&n| n <= limit)
                .collect();
            ns.sort_unstable();
            ns.dedup();
            ns
        } else {
            (0..=limit).collect()
        }
    }

    fn check_exhaustive(sizes: Vec<usize>, limit: usize) -> Classes {
        let c = Classes::new(sizes.clone());
        for n in sizes_to_check(&sizes, limit) {
            assert_eq!(
                c.for_get(n),
                reference_get(&sizes, n.max(1)),
                "get {n} in {sizes:?}"
            );
            assert_eq!(
                c.for_put(n),
                reference_put(&sizes, n),
                "put {n} in {sizes:?}"
            );
            // The thread caches' table: first candidate, then walk up (cache.rs).
            let mut t = c.first_candidate(bucket_of_pred(n.wrapping_sub(1)));
            while t < sizes.len() && sizes[t] < n {
                t += 1;
            }
            let want = if n == 0 {
                sizes.len()
            } else {
                reference_get(&sizes, n).unwrap_or(sizes.len())
            };
            assert_eq!(t, want, "fast lookup {n} in {sizes:?}");
        }
        c
    }

    #[test]
    fn power_of_two_lookup_is_exact_with_one_probe() {
        let sizes = power_of_two(256, 1 << 20);
        assert_eq!(sizes.len(), 13);
        let c = check_exhaustive(sizes, (1 << 20) + 10);
        assert_eq!(c.max_probes(), 1);
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "the unchecked indexing is the other lookup tests' under Miri; run natively"
    )]
    fn geometric_lookup_is_exact_with_one_probe() {
        let top = 1 << 18;
        for steps in [1, 2, 4, 8, 16] {
            let sizes = geometric(64, top, steps);
            let c = check_exhaustive(sizes, top + 3);
            assert_eq!(c.max_probes(), 1, "steps {steps}");
        }
        let g = geometric(1 << 20, 1 << 21, 4);
        assert_eq!(
            g,
            vec![1 << 20, 1_310_720, 1_572_864, 1_835_008, 1 << 21],
            "1 MiB, 1.25, 1.5, 1.75, 2 MiB"
        );
    }

    #[test]
    fn arbitrary_tiers_are_exact_and_probes_bounded() {
        // Vitess's example and gRPC-Go's defaults, plus dense awkward sizes.
        for sizes in [
            vec![1024, 2048, 4096, 8192, 15000],
            vec![256, 4096, 16384, 32768, 1 << 20],
            vec![1, 2, 3, 5, 7, 11, 13, 100, 1000, 1001, 1002, 1003, 65535],
            vec![17],
            vec![1],
        ] {
            let limit = sizes.last().unwrap() + 5;
            let c = check_exhaustive(sizes.clone(), limit);
            assert!(c.max_probes() <= sizes.len());
        }
        let c = Classes::new(vec![1000, 1001, 1002, 1003]);
        assert!(
            c.max_probes() >= 4,
            "dense tiers inside one bucket need several probes"
        );
    }

    #[test]
    fn huge_sizes_and_edges() {
        let big = isize::MAX as usize;
        let c = Classes::new(vec![1, 1 << 40, big]);
        assert_eq!(c.for_get(0), Some(0));
        assert_eq!(c.for_get(2), Some(1));
        assert_eq!(c.for_get(big), Some(2));
        assert_eq!(c.for_get(big + 1), None);
        assert_eq!(c.for_get(usize::MAX), None);
        assert_eq!(c.for_put(usize::MAX), None);
        assert_eq!(c.for_put(big), Some(2));
        assert_eq!(c.for_put(big - 1), Some(1));
        assert_eq!(c.for_put(0), None);
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "the unchecked indexing is the other lookup tests' under Miri; run natively"
    )]
    fn generators_include_bounds() {
        assert_eq!(power_of_two(100, 1000), vec![100, 128, 256, 512, 1000]);
        assert_eq!(power_of_two(1, 4), vec![1, 2, 4]);
        assert_eq!(geometric(1, 8, 4), vec![1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(geometric(7, 7, 2), vec![7]);
    }
}
