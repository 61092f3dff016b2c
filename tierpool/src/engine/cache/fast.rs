//! The fast path: a get or a return in one visit to the cache, from the address of its
//! doorbell.
//!
//! Each marks the owner busy (a plain store), fences the compiler, compares the doorbell with
//! the pool's key, works on one tier, and clears the mark (a plain store with `Release`
//! semantics): the owner's half of the protocol in `owner.rs`. Between the two stores it calls
//! nothing, so it can never block while the mark is set.
//!
//! A get: the bucket of the size (one `bsr` and two shifts), the table entry (the byte offset
//! of the bucket's first candidate tier), the tier's size checked against the request (never
//! a false hit), the pop. A return: the buffer's tier hint bounds-checked, its capacity
//! checked against the tier's size, the push. Both touch the cache's first line, one table
//! entry, the tier's line and one slot, and write only the mark, the tier's line and the slot.

use std::mem::size_of;

use super::block::{Doorbell, Head, TABLE_OFF, TIERS_OFF};
use super::stack::{count_return, place, Tier};
use crate::base::key::Key;
use crate::base::sync::Ordering;
use crate::engine::class::bucket_of_pred;
use crate::sys::fence;

use Ordering::{Relaxed, Release};

/// A buffer just popped by the fast path, as parts: plain scalars, so that the compiler keeps
/// them in registers all the way into the caller's `PooledBuf` (a niche-encoded
/// `Option<(Vec<u8>, u32)>` made it copy the handle through the stack).
#[derive(Debug)]
#[must_use = "dropping a Popped leaks its buffer"]
pub(crate) struct Popped {
    /// Owns a buffer of capacity exactly `cap` from the global allocator (made only by
    /// `pop_tier`).
    ptr: *mut u8,
    cap: usize,
    /// The tier it came from, as a hint (byte offset).
    pub(crate) hint: u32,
}

impl Popped {
    /// The buffer, empty.
    #[inline(always)]
    pub(crate) fn into_vec(self) -> Vec<u8> {
        // SAFETY: `ptr` owns a buffer of capacity exactly `cap` from the global allocator
        // (field invariant), and `self` is consumed, so the `Vec` is its only owner.
        unsafe { Vec::from_raw_parts(self.ptr, 0, self.cap) }
    }
}

/// What [`push`] did with a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pushed {
    /// On the stack.
    Kept,
    /// On the stack, and housekeeping is due.
    Due,
    /// Not taken: the slow path must file it.
    Refused,
}

/// Marks the owner busy and checks the doorbell (the owner's side of the protocol in
/// `mod.rs`): true if the doorbell holds `key`, and the mark is then set; false, with the mark
/// cleared, otherwise.
#[inline(always)]
fn begin(bell: &Doorbell, key: Key) -> bool {
    bell.using.store(1, Relaxed);
    fence::light();
    if bell.key.load(Relaxed) == key.raw() {
        return true;
    }
    bell.using.store(0, Release);
    false
}

/// Clears the busy mark (`Release`: a reclaimer that reads the 0 sees this operation's
/// writes).
#[inline(always)]
fn end(bell: &Doorbell) {
    bell.using.store(0, Release);
}

/// The tier at byte offset `off` of the cache starting at `base`.
///
/// # Safety
/// `base` is a cache's first byte, with provenance over the whole cache, and `off` is
/// `t * TIER_STRIDE` for some tier `t` of it (the sentinel included).
#[inline(always)]
unsafe fn tier_at<'a>(base: *const u8, off: usize) -> &'a Tier {
    // SAFETY: the caller guarantees the offset of a tier of this cache, which lies at
    // `TIERS_OFF` past its first byte.
    unsafe { &*base.add(TIERS_OFF + off).cast::<Tier>() }
}

/// The fast path of a get of `n` bytes from the cache whose doorbell is at `bell`: the
/// newest buffer of the tier for `n`, or `None` for the slow path (doorbell not armed with
/// `key`, tier empty or at its low-water mark, size above the largest tier).
///
/// # Safety
/// `bell` is the thread-local slot's doorbell (`engine/local.rs`): a rung static one, or the first
/// byte of a cache of this thread, alive for this call, derived from the whole cache; and no
/// other operation on that cache runs on this thread.
#[inline(always)]
pub(crate) unsafe fn pop(bell: *const Doorbell, key: Key, n: usize) -> Option<Popped> {
    // SAFETY: the caller guarantees a live doorbell.
    let door = unsafe { &*bell };
    if !begin(door, key) {
        return None;
    }
    let base = bell.cast::<u8>();
    let b = bucket_of_pred(n.wrapping_sub(1));
    // SAFETY: the doorbell holds a pool key, so it is a cache's first field (the static "no
    // cache" doorbell is always rung), and the table sits at `TABLE_OFF` with an entry for
    // every bucket of `usize` (`ALL_BUCKETS`), which `bucket_of_pred` never exceeds.
    let off = unsafe { *base.add(TABLE_OFF).cast::<u32>().add(b) } as usize;
    // SAFETY: table entries are offsets of tiers (or of the sentinel) of this cache.
    let tier = unsafe { tier_at(base, off) };
    if tier.size < n {
        // A tier with more than five significant bits inside the bucket, or a size above
        // the largest tier: rare, out of line (and on its own path, so that its result,
        // which comes back through memory, is not merged with the common one's registers).
        return pop_walk(door, base, n, off);
    }
    pop_tier(door, tier, off)
}

/// [`pop`] when the bucket's first candidate is too small: walks up, then ends the operation.
#[cold]
#[inline(never)]
fn pop_walk(door: &Doorbell, base: *const u8, n: usize, mut off: usize) -> Option<Popped> {
    loop {
        off += size_of::<Tier>();
        // SAFETY: the walk starts at a tier and stops at the sentinel at the latest (its
        // size, `usize::MAX`, is `>= n`), so `off` never passes it.
        let tier = unsafe { tier_at(base, off) };
        if tier.size >= n {
            return pop_tier(door, tier, off);
        }
    }
}

/// Pops the newest buffer of `tier` (at byte offset `off`) if the stack is above its
/// low-water mark, and ends the operation.
///
/// It ends the operation on each of its two exits rather than once after them: with one
/// `end` after a merged `Option`, the compiler kept the `Option` in memory and tested it
/// again.
#[inline(always)]
fn pop_tier(door: &Doorbell, tier: &Tier, off: usize) -> Option<Popped> {
    let head = tier.head.load(Relaxed);
    if head >= tier.low.load(Relaxed) {
        // At the low-water mark (rare): empty, or a new low for decay, which moves the mark
        // here, as jemalloc's cache bins do. (Leaving it to the slow path sent every later pop
        // of the interval there.) Unallocated, all three are null: empty.
        if head == tier.end.load(Relaxed) {
            end(door);
            return None;
        }
        tier.low.store(head.wrapping_add(1), Relaxed);
    }
    // SAFETY: `slots <= head < end` (`head < low <= end`, or `head >= low` but not at `end`):
    // a filled slot of the allocated array.
    let ptr = unsafe { &*head }.load(Relaxed);
    // `head < end`, so one past it is still within (or at the end of) the array.
    // `Release`, as every store of a published figure (see `counters.rs`).
    tier.head.store(head.wrapping_add(1), Release);
    end(door);
    // The slot owned a buffer of capacity exactly `tier.size` from the global allocator;
    // moving `head` past it removed it from the stack, so the `Popped` is its only owner.
    Some(Popped {
        ptr,
        cap: tier.size,
        hint: off as u32,
    })
}

/// The fast path of a return of `v`, handed out from the tier with hint `hint` (checked), to
/// the cache whose doorbell is at `bell`: pushed (and `v` left empty) if the doorbell holds
/// `key`, the capacity is exactly the tier's size and the stack is below its fast limit.
/// Anything else leaves `v` as it was, for the slow path.
///
/// The buffer comes by `&mut` and the outcome as a plain enum, not as a
/// `Result<bool, Vec<u8>>`: with the outcome encoded in the `Vec`'s capacity niche, the
/// compiler re-tested the niche after every refusal, and merged the kept and refused paths
/// through a flag.
///
/// # Safety
/// As for [`pop`].
#[inline(always)]
pub(crate) unsafe fn push(bell: *const Doorbell, key: Key, hint: u32, v: &mut Vec<u8>) -> Pushed {
    // SAFETY: the caller guarantees a live doorbell.
    let door = unsafe { &*bell };
    if !begin(door, key) {
        return Pushed::Refused;
    }
    // SAFETY: as in `pop`, an armed doorbell is a cache's first field, and its head starts
    // there.
    let head = unsafe { &*bell.cast::<Head>() };
    let pushed = push_tier(bell.cast::<u8>(), head.hint_end, hint, v);
    end(door);
    pushed
}

#[inline(always)]
fn push_tier(base: *const u8, hint_end: usize, hint: u32, v: &mut Vec<u8>) -> Pushed {
    let off = hint as usize;
    if off >= hint_end {
        return Pushed::Refused;
    }
    // SAFETY: every hint is a multiple of `TIER_STRIDE` (made by `pop_tier` or `Tag::tier`,
    // by this pool or, after the key wrapped, another; other tags, tracked ones included, are
    // at least 2^30, above any `hint_end`), and this one is below `hint_end`: the offset of a
    // tier of this cache.
    let tier = unsafe { tier_at(base, off) };
    if v.capacity() != tier.size {
        return Pushed::Refused;
    }
    let head = tier.head.load(Relaxed);
    debug_assert!(
        !tier.full.load(Relaxed).is_null() || tier.end.load(Relaxed).is_null(),
        "a tier with slots and no `full`: returns would pass its limit"
    );
    if head <= tier.full.load(Relaxed) {
        return Pushed::Refused; // also when unallocated: null <= null
    }
    // SAFETY: `slots <= full < head`, so the slot below `head` is in the allocated array,
    // and free.
    unsafe { place(tier, head, std::mem::take(v)) };
    if count_return(tier) == 0 {
        Pushed::Due
    } else {
        Pushed::Kept
    }
}
