//! Who holds the buffers (feature `holders`): a sampled share of the buffers a pool hands out
//! remembers where it was taken ([`BufferPool::holders`](crate::BufferPool::holders)).
//!
//! A tracked buffer carries, instead of its tier hint, a tag that names its entry here
//! ([`Tag::tracked`]): the entry keeps the buffer's own tag, the call site, the time and the
//! capacity. Such a tag is no tier of any cache, so the return's fast path refuses it (its
//! bounds check, as for any foreign tag) and the slow path gives the entry back
//! ([`Tracker::untrack`]) before doing what it does with the original tag. Every way a
//! buffer comes back or leaves the pool goes through there: a drop, the last view of
//! `PooledBytes` or `Bytes`, `into_vec`. So untracked buffers pay nothing on return, and with
//! the feature off nothing of this is compiled.
//!
//! Sampling: one get in `every` on each thread is tracked (a countdown per thread), so a
//! site's count is a sample; `every = 1` tracks every buffer.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::panic::Location;
use std::time::{Duration, Instant};

use crate::base::key::{Key, Tag};
use crate::base::sync::{lock, Mutex};

/// Where outstanding tracked buffers were taken: one row of
/// [`BufferPool::holders`](crate::BufferPool::holders).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Holder {
    /// The call site of the `get` (or `try_get`, `get_timeout`, `get_zeroed`, `acquire`).
    /// Buffers taken inside tierpool's async functions for the caller (the frame reader's
    /// payloads, `PooledChain::read_all`) name tierpool's line: an async function cannot pass
    /// its caller's location on. (`PooledChain::materialize` names its caller.)
    pub location: &'static Location<'static>,
    /// Tracked buffers taken there and not yet returned.
    pub buffers: usize,
    /// Their capacities, summed.
    pub bytes: usize,
    /// How long the oldest of them has been out.
    pub oldest: Duration,
}

/// One tracked buffer.
#[derive(Debug)]
struct Entry {
    tag: Tag,
    location: &'static Location<'static>,
    since: Instant,
    bytes: usize,
}

/// Where a get was called.
pub(crate) type Site = &'static Location<'static>;

/// The caller's [`Site`] (through every `#[track_caller]` function above it).
#[inline(always)]
#[track_caller]
pub(crate) fn site() -> Site {
    Location::caller()
}

/// Which gets a pool handle tracks: one in `every` per thread (0: none). Kept in the handle,
/// so that the get's check needs no load through the pool.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sampler {
    every: u32,
}

impl Sampler {
    pub(crate) fn new(every: u32) -> Self {
        Sampler { every }
    }

    /// True if this thread's get from the pool `key` is to be tracked now.
    #[inline(always)]
    pub(crate) fn due(&self, key: Key) -> bool {
        self.every != 0 && due(key, self.every)
    }
}

/// True if `tag` names a tracked buffer's entry.
#[inline(always)]
pub(crate) fn is_tracked(tag: Tag) -> bool {
    tag.tracked_index().is_some()
}

/// A pool's tracked buffers.
#[derive(Debug)]
pub(crate) struct Tracker {
    /// One get in this many is tracked (0: none).
    every: u32,
    /// A budget wait longer than this reports the top holders (`None`: never).
    report_after: Option<Duration>,
    entries: Mutex<Slab>,
}

/// Holders a long wait's report names.
const REPORTED: usize = 5;

#[derive(Debug, Default)]
struct Slab {
    slots: Vec<Option<Entry>>,
    free: Vec<usize>,
}

thread_local! {
    /// The countdown of the pool this thread tracked for last (its key's bits, and gets until
    /// its next tracked one; key 0 is no pool's): the common case, one pool, is a cell.
    static LAST: Cell<(u32, u32)> = const { Cell::new((0, 0)) };
    /// The countdowns of the other pools this thread used with tracking on.
    static OTHERS: RefCell<Vec<(u32, u32)>> = const { RefCell::new(Vec::new()) };
}

/// True if this thread's next get from the pool with key `key` is to be tracked, one in
/// `every` (not 0): a countdown per pool and thread. A countdown starts at a point in
/// `0..every` taken from the thread's stack address, so that many short-lived threads are
/// not all tracked at their first get.
#[inline]
pub(crate) fn due(key: Key, every: u32) -> bool {
    let k = key.raw();
    LAST.with(|last| {
        let (mut lk, mut left) = last.get();
        if lk != k {
            left = switch(lk, left, k, every);
            lk = k;
        }
        let due = left == 0;
        last.set((lk, if due { every - 1 } else { left - 1 }));
        due
    })
}

/// Parks the countdown of pool `from` and returns pool `to`'s, a new one if it has none.
#[cold]
fn switch(from: u32, from_left: u32, to: u32, every: u32) -> u32 {
    OTHERS.with(|o| {
        let mut o = o.borrow_mut();
        if from != 0 {
            match o.iter_mut().find(|(key, _)| *key == from) {
                Some(entry) => entry.1 = from_left,
                None => o.push((from, from_left)),
            }
        }
        match o.iter().find(|(key, _)| *key == to) {
            Some(&(_, left)) => left,
            None => ((&to as *const u32 as usize >> 4) as u32) % every,
        }
    })
}

impl Tracker {
    pub(crate) fn new(every: u32, report_after: Option<Duration>) -> Self {
        Tracker {
            every,
            report_after: report_after.filter(|_| every != 0),
            entries: Mutex::new(Slab::default()),
        }
    }

    /// How long a budget wait may last before it reports the holders.
    pub(crate) fn report_after(&self) -> Option<Duration> {
        self.report_after
    }

    /// A request for `n` bytes of the pool named `pool` has waited `waited` for its budget:
    /// a `tracing` warning (target `tierpool::holders`) names the sites that hold the most.
    pub(crate) fn report_wait(&self, pool: &str, n: usize, waited: Duration) {
        tracing::warn!(
            target: "tierpool::holders",
            pool,
            requested = n,
            waited_ms = waited.as_millis() as u64,
            "a request has waited {waited:?} for the budget; the tracked holders: {}",
            self.top()
        );
    }

    /// `count` async requests (`acquire`) of the pool named `pool` have waited `after` or
    /// longer, the longest `waited` for a charge of `charge` bytes: one `tracing` warning per
    /// tick that finds any (target `tierpool::holders`), naming the top holders. Each wait is
    /// reported once.
    pub(crate) fn report_overdue(&self, pool: &str, count: usize, charge: usize, waited: Duration) {
        tracing::warn!(
            target: "tierpool::holders",
            pool,
            waiting = count,
            charge,
            waited_ms = waited.as_millis() as u64,
            "{count} async request(s) have waited up to {waited:?} for the budget; the tracked holders: {}",
            self.top()
        );
    }

    /// The sites holding the most tracked bytes, as text.
    fn top(&self) -> String {
        let top: Vec<String> = self
            .holders()
            .iter()
            .take(REPORTED)
            .map(|h| {
                format!(
                    "{} holds {} buffers, {} bytes, the oldest for {:?}",
                    h.location, h.buffers, h.bytes, h.oldest
                )
            })
            .collect();
        if top.is_empty() {
            "none".to_string()
        } else {
            top.join("; ")
        }
    }

    /// One get in how many is tracked (0: none).
    pub(crate) fn every(&self) -> u32 {
        self.every
    }

    /// The tracked tag of a buffer of `bytes` just taken at `location` (its sample was due,
    /// [`due`]), or `tag` itself once a billion tracked buffers are out.
    pub(crate) fn track(&self, tag: Tag, bytes: usize, location: Site) -> Tag {
        let entry = Entry {
            tag,
            location,
            since: Instant::now(),
            bytes,
        };
        let mut slab = lock(&self.entries);
        let index = match slab.free.pop() {
            Some(i) => i,
            None if slab.slots.len() < Tag::MAX_TRACKED => {
                slab.slots.push(None);
                slab.slots.len() - 1
            }
            None => return tag, // a billion tracked buffers out: this one goes untracked
        };
        slab.slots[index] = Some(entry);
        Tag::tracked(index)
    }

    /// The original tag of a buffer coming back (or leaving the pool) with `tag`, its entry
    /// gone; `tag` itself if it is not a tracked one.
    pub(crate) fn untrack(&self, tag: Tag) -> Tag {
        let Some(index) = tag.tracked_index() else {
            return tag;
        };
        let mut slab = lock(&self.entries);
        let entry = slab.slots.get_mut(index).and_then(Option::take);
        match entry {
            Some(e) => {
                slab.free.push(index);
                e.tag
            }
            // No entry: only a buffer of a pool dropped long ago whose key was reused (keys
            // wrap after 2^26 pools; `registry.rs` adopts such buffers) can bring a tag that
            // names none, or worse, another buffer's, which then loses its entry and its
            // charge. Accepted as the registry accepts stale tier hints after a wrap.
            None => Tag::NONE,
        }
    }

    /// Outstanding tracked buffers grouped by call site, most bytes first.
    pub(crate) fn holders(&self) -> Vec<Holder> {
        let now = Instant::now();
        // One pass under the lock (tracked gets and returns wait for it), grouping by site.
        let mut sites: HashMap<(&str, u32, u32), Holder> = HashMap::new();
        for e in lock(&self.entries).slots.iter().flatten() {
            let age = now.saturating_duration_since(e.since);
            let l = e.location;
            let h = sites
                .entry((l.file(), l.line(), l.column()))
                .or_insert(Holder {
                    location: l,
                    buffers: 0,
                    bytes: 0,
                    oldest: age,
                });
            h.buffers += 1;
            h.bytes += e.bytes;
            h.oldest = h.oldest.max(age);
        }
        let mut by_site: Vec<Holder> = sites.into_values().collect();
        by_site.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(b.oldest.cmp(&a.oldest)));
        by_site
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn one_in_every_is_tracked_and_untracking_gives_the_tag_back() {
        let t = Tracker::new(4, None);
        let site = Location::caller();
        let tags: Vec<Tag> = (0..8)
            .map(|i| {
                if due(Key::new(1, false, 1), t.every()) {
                    t.track(Tag::tier(i), 100, site)
                } else {
                    Tag::tier(i)
                }
            })
            .collect();
        let tracked: Vec<&Tag> = tags
            .iter()
            .filter(|t| t.tracked_index().is_some())
            .collect();
        assert_eq!(tracked.len(), 2, "{tags:?}");
        let h = t.holders();
        assert_eq!((h.len(), h[0].buffers, h[0].bytes), (1, 2, 200));
        for (i, tag) in tags.iter().enumerate() {
            assert_eq!(t.untrack(*tag), Tag::tier(i), "the original tag comes back");
        }
        assert!(t.holders().is_empty());
        assert_eq!(
            t.untrack(*tracked[0]),
            Tag::NONE,
            "an entry is given back once"
        );
    }
}
