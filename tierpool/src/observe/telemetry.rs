//! Publishing a pool's figures to the [`metrics`] facade (feature `metrics`), so that the
//! exporters operators already run (Prometheus, StatsD, OpenTelemetry) see them.
//!
//! Nothing is added to the fast path: the figures are those [`Stats`] already gathers from the
//! counters the pool keeps, read and published at the pool's tick (once per decay interval,
//! by the thread that runs it, or by the background trimmer) and on demand
//! ([`BufferPool::publish_metrics`](crate::BufferPool::publish_metrics)). Each publication
//! sets gauges and counters to their current values (`Counter::absolute`), so a missed one
//! loses nothing. It costs one `stats()` (every tier's lock, every cache's counters read) and
//! some hundred metric updates, each building its labels; once per interval that is nothing
//! (BENCHMARKS.md measures it).
//!
//! Every metric carries the label `pool` (the [`Builder::name`](crate::Builder::name)); the
//! per-tier ones also `tier` (its size in bytes), published for the tiers that have seen
//! traffic. Names, kinds and labels:
//!
//! | metric | kind | labels | what |
//! |---|---|---|---|
//! | `tierpool_retained_bytes` | gauge | `place` = `depot` / `caches` | bytes retained |
//! | `tierpool_retained_buffers` | gauge | | buffers retained |
//! | `tierpool_thread_caches` | gauge | | thread caches attached |
//! | `tierpool_in_use_buffers` | gauge | | buffers handed out and not returned |
//! | `tierpool_in_use_bytes` | gauge | | their bytes (exact under a budget; else from the tiers, oversize buffers not included) |
//! | `tierpool_in_use_bytes_peak` | gauge | | the most seen (under a budget, the account's peak; else the most seen at a publication) |
//! | `tierpool_gets_total` | counter | `result` = `hit` / `miss` / `oversize` | gets |
//! | `tierpool_returned_total` | counter | | buffers handed back |
//! | `tierpool_discarded_total` | counter | | of those, released to the allocator |
//! | `tierpool_released_bytes_total` | counter | `reason` = `decay` / `trim` / `cap` | bytes released, by why |
//! | `tierpool_allocator_trims_total` | counter | | times the allocator was asked to give memory back |
//! | `tierpool_budget_limit_bytes` | gauge | | `max_in_use_bytes` (budgeted pools only, as the four below) |
//! | `tierpool_budget_waiting` | gauge | | requests waiting now |
//! | `tierpool_budget_waits_total` | counter | | requests that waited |
//! | `tierpool_budget_wait_microseconds_total` | counter | | time spent waiting |
//! | `tierpool_budget_wait_longest_seconds` | gauge | | the longest wait |
//! | `tierpool_budget_refusals_total` | counter | | `try_get` refusals |
//! | `tierpool_tier_retained_bytes` | gauge | `tier` | bytes retained in the tier |
//! | `tierpool_tier_gets_total` | counter | `tier`, `result` = `hit` / `miss` | the tier's gets |
//! | `tierpool_tier_discarded_total` | counter | `tier` | the tier's buffers released |

use metrics::{counter, describe_counter, describe_gauge, gauge, Unit};

use crate::base::sync::{AtomicU64, Ordering};
use crate::observe::stats::Stats;

/// What a pool remembers between publications: the peak it has seen.
#[derive(Debug, Default)]
pub(crate) struct Published {
    peak_in_use_bytes: AtomicU64,
}

impl Published {
    /// Publishes the figures `stats` computes, of the pool named `pool`.
    pub(crate) fn publish(&self, pool: &str, stats: impl FnOnce() -> Stats) {
        let s = &stats();
        describe();
        let pool = pool.to_owned();
        let g = |name: &'static str, v: f64| gauge!(name, "pool" => pool.clone()).set(v);
        let c = |name: &'static str, v: u64| counter!(name, "pool" => pool.clone()).absolute(v);

        let caches = s.retained_bytes.saturating_sub(s.depot_bytes);
        gauge!("tierpool_retained_bytes", "pool" => pool.clone(), "place" => "depot")
            .set(s.depot_bytes as f64);
        gauge!("tierpool_retained_bytes", "pool" => pool.clone(), "place" => "caches")
            .set(caches as f64);
        g("tierpool_retained_buffers", s.retained_buffers as f64);
        g("tierpool_thread_caches", s.thread_caches as f64);

        let (in_use_buffers, in_use_bytes) = in_use(s);
        let peak = match &s.budget {
            Some(b) => b.peak_in_use_bytes as u64,
            None => self
                .peak_in_use_bytes
                .fetch_max(in_use_bytes, Ordering::Relaxed)
                .max(in_use_bytes),
        };
        g("tierpool_in_use_buffers", in_use_buffers as f64);
        g("tierpool_in_use_bytes", in_use_bytes as f64);
        g("tierpool_in_use_bytes_peak", peak as f64);

        for (result, v) in [
            ("hit", s.hits),
            ("miss", s.misses),
            ("oversize", s.oversize),
        ] {
            counter!("tierpool_gets_total", "pool" => pool.clone(), "result" => result).absolute(v);
        }
        c("tierpool_returned_total", s.returned);
        c("tierpool_discarded_total", s.discarded);
        for (reason, v) in [
            ("decay", s.released_by_decay),
            ("trim", s.released_by_trim),
            ("cap", s.released_at_cap),
        ] {
            counter!("tierpool_released_bytes_total", "pool" => pool.clone(), "reason" => reason)
                .absolute(v);
        }
        c("tierpool_allocator_trims_total", s.allocator_trims);

        if let Some(b) = &s.budget {
            g("tierpool_budget_limit_bytes", b.limit as f64);
            g("tierpool_budget_waiting", b.waiting as f64);
            c("tierpool_budget_waits_total", b.waits);
            c(
                "tierpool_budget_wait_microseconds_total",
                u64::try_from(b.wait_total.as_micros()).unwrap_or(u64::MAX),
            );
            g(
                "tierpool_budget_wait_longest_seconds",
                b.wait_longest.as_secs_f64(),
            );
            c("tierpool_budget_refusals_total", b.refusals);
        }

        for t in s
            .tiers
            .iter()
            .filter(|t| t.hits + t.misses + t.returned > 0)
        {
            let tier = t.size.to_string();
            gauge!("tierpool_tier_retained_bytes", "pool" => pool.clone(), "tier" => tier.clone())
                .set(t.retained_bytes as f64);
            for (result, v) in [("hit", t.hits), ("miss", t.misses)] {
                counter!(
                    "tierpool_tier_gets_total",
                    "pool" => pool.clone(), "tier" => tier.clone(), "result" => result
                )
                .absolute(v);
            }
            counter!("tierpool_tier_discarded_total", "pool" => pool.clone(), "tier" => tier)
                .absolute(t.discarded);
        }
    }
}

/// Buffers and bytes in use: exact bytes under a budget; otherwise what each tier handed out
/// and did not get back, at the tier's size (a buffer returned to another tier than it came
/// from, grown or foreign, moves the estimate; clamped at zero).
fn in_use(s: &Stats) -> (u64, u64) {
    let buffers = s.gets.saturating_sub(s.returned);
    let bytes = match &s.budget {
        Some(b) => b.in_use_bytes as u64,
        None => s
            .tiers
            .iter()
            .map(|t| (t.hits + t.misses).saturating_sub(t.returned) * t.size as u64)
            .sum(),
    };
    (buffers, bytes)
}

/// Describes every metric to the installed recorder (on each publication: a recorder
/// installed after the first one learns them too).
fn describe() {
    describe_gauge!(
        "tierpool_retained_bytes",
        Unit::Bytes,
        "Bytes retained by the pool, in the shared depot or in thread caches (label place)"
    );
    describe_gauge!(
        "tierpool_retained_buffers",
        Unit::Count,
        "Buffers retained by the pool"
    );
    describe_gauge!(
        "tierpool_thread_caches",
        Unit::Count,
        "Thread caches attached to the pool"
    );
    describe_gauge!(
        "tierpool_in_use_buffers",
        Unit::Count,
        "Buffers handed out and not yet returned"
    );
    describe_gauge!(
        "tierpool_in_use_bytes",
        Unit::Bytes,
        "Bytes handed out and not yet returned (exact under a budget; else estimated from the tiers)"
    );
    describe_gauge!(
        "tierpool_in_use_bytes_peak",
        Unit::Bytes,
        "The most bytes in use seen"
    );
    describe_counter!(
        "tierpool_gets_total",
        Unit::Count,
        "Gets, by result: hit, miss (allocated), oversize (above the largest tier)"
    );
    describe_counter!(
        "tierpool_returned_total",
        Unit::Count,
        "Buffers handed back"
    );
    describe_counter!(
        "tierpool_discarded_total",
        Unit::Count,
        "Buffers handed back and released to the allocator"
    );
    describe_counter!(
        "tierpool_released_bytes_total",
        Unit::Bytes,
        "Bytes released to the allocator, by reason: decay, trim, cap"
    );
    describe_counter!(
        "tierpool_allocator_trims_total",
        Unit::Count,
        "Times the pool asked the allocator to give memory back"
    );
    describe_gauge!(
        "tierpool_budget_limit_bytes",
        Unit::Bytes,
        "The budget on bytes in use"
    );
    describe_gauge!(
        "tierpool_budget_waiting",
        Unit::Count,
        "Requests waiting for budget now"
    );
    describe_counter!(
        "tierpool_budget_waits_total",
        Unit::Count,
        "Requests that waited for budget"
    );
    describe_counter!(
        "tierpool_budget_wait_microseconds_total",
        Unit::Microseconds,
        "Time requests spent waiting for budget"
    );
    describe_gauge!(
        "tierpool_budget_wait_longest_seconds",
        Unit::Seconds,
        "The longest a request waited for budget"
    );
    describe_counter!(
        "tierpool_budget_refusals_total",
        Unit::Count,
        "try_get calls refused for lack of budget"
    );
    describe_gauge!(
        "tierpool_tier_retained_bytes",
        Unit::Bytes,
        "Bytes retained in one tier (label tier: its size)"
    );
    describe_counter!(
        "tierpool_tier_gets_total",
        Unit::Count,
        "Gets of one tier, by result: hit, miss"
    );
    describe_counter!(
        "tierpool_tier_discarded_total",
        Unit::Count,
        "Buffers of one tier released to the allocator"
    );
}
