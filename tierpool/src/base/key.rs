//! The two numbers a [`PooledBuf`](crate::PooledBuf) carries instead of a pointer: its pool's
//! [`Key`] and its [`Tag`]. Every bit pattern either can hold, and every sentinel, is written
//! down here and nowhere else.
//!
//! - A **key** names a live pool (`registry.rs`). Its low 26 bits (the slot) are never 0 and
//!   unique among live pools; the next five are the log2 of the alignment of the pool's
//!   allocations (0 for a plain pool; an [`AlignedPool`](crate::AlignedPool)'s buffers are
//!   allocated with its alignment and must be freed with it, also after the pool is gone);
//!   its top bit says the pool has a budget on bytes in use. A thread cache's
//!   doorbell holds its pool's whole key while the fast path may run, and [`RUNG`] (0, which
//!   no key is) when another thread wants the owner's attention.
//! - A **tag** says where a buffer was handed out from: the byte offset of its tier in a
//!   thread cache (a *hint*, checked on return, never trusted), or for a buffer above the
//!   largest tier of a budgeted pool the pages it was charged, or nothing. In a budgeted pool
//!   the tag is also the buffer's charge (`budget.rs`).
//!
//! ```text
//!  tag bits            meaning
//!  t * TIER_STRIDE     handed out from tier t (in a budgeted pool: charged tier t's size)
//!  1 << 30 | index     tracked (feature `holders`): entry `index` keeps the real tag
//!  1 << 31 | pages     above the largest tier, charged `pages * 4 KiB` (budgeted pools)
//!  u32::MAX - 1        FOREIGN: a shared view of a `Vec` that belongs to no pool
//!  u32::MAX            NONE: no tier known, nothing charged
//! ```

/// The doorbell's value when another thread rang it. No pool has key 0.
pub(crate) const RUNG: u32 = 0;

/// The distance between two tiers of a thread cache in bytes (one cache line each): tier
/// hints are multiples of it. `cache/stack.rs` checks that a tier's hot part has this size.
pub(crate) const TIER_STRIDE: usize = 64;

/// The bit of a key that marks a pool with a budget on bytes in use.
const BUDGETED: u32 = 1 << 31;
/// Where a key's alignment (its log2) starts.
const ALIGN_SHIFT: u32 = 26;
/// The bits of a key that hold the slot.
const SLOT_BITS: u32 = (1 << ALIGN_SHIFT) - 1;

/// A pool's key (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub(crate) struct Key(u32);

impl Key {
    /// The key of a shared view over a `Vec` that belongs to no pool (its tag is
    /// [`Tag::FOREIGN`]): no pool has it, and no doorbell holds it.
    pub(crate) const NOBODY: Key = Key(RUNG);

    /// The key with registry slot `slot` (non-zero, at most [`Key::SLOTS`]) of a pool with or
    /// without a budget, whose buffers are allocated with alignment `align` (a power of two
    /// up to 2^31, 1 for a plain pool).
    pub(crate) fn new(slot: u32, budgeted: bool, align: usize) -> Key {
        debug_assert!(slot != RUNG && slot & !SLOT_BITS == 0);
        debug_assert!(align.is_power_of_two() && align.trailing_zeros() < 32);
        let bits = slot | (align.trailing_zeros() << ALIGN_SHIFT);
        Key(if budgeted { bits | BUDGETED } else { bits })
    }

    /// The key's bits, as a doorbell holds them.
    #[inline(always)]
    pub(crate) fn raw(self) -> u32 {
        self.0
    }

    /// The registry slot: the low 26 bits, unique among live pools.
    pub(crate) fn slot(self) -> u32 {
        self.0 & SLOT_BITS
    }

    /// The alignment the pool's buffers are allocated (and must be freed) with: 1 for a plain
    /// pool and for [`Key::NOBODY`].
    #[inline]
    pub(crate) fn align(self) -> usize {
        1 << ((self.0 & !BUDGETED) >> ALIGN_SHIFT)
    }

    /// True if the pool has a budget on bytes in use.
    #[inline(always)]
    pub(crate) fn budgeted(self) -> bool {
        self.0 & BUDGETED != 0
    }

    /// The most slots there can be (the registry refuses more live pools).
    pub(crate) const SLOTS: usize = SLOT_BITS as usize;
}

/// The unit of charges above the largest tier.
pub(crate) const PAGE: usize = 4096;
/// The bit of a tag that marks a charge above the largest tier.
const OVERSIZE: u32 = 1 << 31;
/// The bit of a tag that names a tracked buffer's entry (`holders.rs`); below [`OVERSIZE`],
/// above every tier hint.
#[cfg(feature = "holders")]
const TRACKED: u32 = 1 << 30;
/// The most pages an oversize tag can hold (the largest budget is this many pages).
pub(crate) const MAX_PAGES: usize = (u32::MAX - 2 - OVERSIZE) as usize;

/// A buffer's tag (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(transparent)]
pub(crate) struct Tag(u32);

impl Tag {
    /// No tier known, nothing charged.
    pub(crate) const NONE: Tag = Tag(u32::MAX);
    /// A shared view's block over a `Vec` of no pool (`buf/shared.rs`).
    pub(crate) const FOREIGN: Tag = Tag(u32::MAX - 1);

    /// Handed out from tier `t`.
    #[inline(always)]
    pub(crate) fn tier(t: usize) -> Tag {
        Tag((t * TIER_STRIDE) as u32)
    }

    /// A tag from a tier hint that a thread cache computed (a multiple of [`TIER_STRIDE`]).
    #[inline(always)]
    pub(crate) fn from_hint(hint: u32) -> Tag {
        Tag(hint)
    }

    /// Above the largest tier of a budgeted pool, for `n` bytes: the tag and the charge it
    /// records (`n` rounded up to [`PAGE`], at least one page); `None` if `n` is beyond any
    /// budget.
    pub(crate) fn oversize(n: usize) -> Option<(Tag, usize)> {
        let pages = n.div_ceil(PAGE).max(1);
        (pages <= MAX_PAGES).then(|| (Tag(OVERSIZE | pages as u32), pages * PAGE))
    }

    /// The tier hint: the byte offset a thread cache checks against its tiers. Any value that
    /// is not a tier of that cache (NONE, FOREIGN, oversize and tracked tags, hints of other
    /// pools) is refused there by its bounds check.
    #[inline(always)]
    pub(crate) fn hint(self) -> u32 {
        self.0
    }

    /// Tracked buffers a pool can have out at once (tag indices below [`TRACKED`]).
    #[cfg(feature = "holders")]
    pub(crate) const MAX_TRACKED: usize = TRACKED as usize;

    /// The tag of a tracked buffer whose entry is `index` (below [`Tag::MAX_TRACKED`]).
    #[cfg(feature = "holders")]
    pub(crate) fn tracked(index: usize) -> Tag {
        debug_assert!(index < Self::MAX_TRACKED);
        Tag(TRACKED | index as u32)
    }

    /// The entry a tracked buffer's tag names, if it is one.
    #[cfg(feature = "holders")]
    pub(crate) fn tracked_index(self) -> Option<usize> {
        (self.0 & (OVERSIZE | TRACKED) == TRACKED).then_some((self.0 & !TRACKED) as usize)
    }

    /// The tier this tag names, if it names one below `tiers`.
    pub(crate) fn tier_index(self, tiers: usize) -> Option<usize> {
        let off = self.0 as usize;
        (self.0 & OVERSIZE == 0 && off % TIER_STRIDE == 0 && off / TIER_STRIDE < tiers)
            .then_some(off / TIER_STRIDE)
    }

    /// The bytes charged to a buffer of a budgeted pool with this tag, given its tier sizes.
    pub(crate) fn charge(self, sizes: &[usize]) -> usize {
        if self == Tag::NONE || self == Tag::FOREIGN {
            0
        } else if self.0 & OVERSIZE != 0 {
            (self.0 & !OVERSIZE) as usize * PAGE
        } else {
            self.tier_index(sizes.len()).map_or(0, |t| sizes[t])
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[cfg(feature = "holders")]
    #[test]
    fn tracked_tags_are_no_other_kind_of_tag() {
        for t in [Tag::NONE, Tag::FOREIGN, Tag::tier(0), Tag::tier(4095)] {
            assert_eq!(t.tracked_index(), None, "{t:?}");
        }
        let (oversize, _) = Tag::oversize(1 << 40).unwrap();
        assert_eq!(oversize.tracked_index(), None);
        for i in [0, 1, Tag::MAX_TRACKED - 1] {
            let t = Tag::tracked(i);
            assert_eq!(t.tracked_index(), Some(i));
            assert_eq!(
                t.tier_index(crate::engine::class::MAX_TIERS),
                None,
                "never a tier"
            );
            assert_eq!(t.charge(&[4096; 4]), 0, "charges nothing itself");
            assert!(
                t.hint() as usize >= crate::engine::class::MAX_TIERS * TIER_STRIDE,
                "refused by every cache"
            );
        }
    }

    #[test]
    fn keys_keep_their_slot_and_budget_bit() {
        let k = Key::new(7, true, 1);
        assert!(k.budgeted());
        assert_eq!((k.slot(), k.raw()), (7, 7 | BUDGETED));
        assert!(!Key::new(7, false, 1).budgeted());
        assert_ne!(Key::new(1, false, 1).raw(), RUNG);
        assert_eq!(Key::NOBODY.align(), 1);
        // The alignment rides beside the slot and the budget bit, and changes neither.
        let slot = Key::SLOTS as u32;
        for align in [1, 2, 4096, 2 << 20, 1 << 31] {
            for budgeted in [false, true] {
                let k = Key::new(slot, budgeted, align);
                assert_eq!((k.slot(), k.budgeted(), k.align()), (slot, budgeted, align));
                assert_ne!(
                    k,
                    Key::new(slot - 1, budgeted, align),
                    "the slot tells keys apart"
                );
            }
        }
    }

    #[test]
    fn tags_round_trip_and_sentinels_charge_nothing() {
        let sizes = [100, 200, 300];
        assert_eq!(Tag::tier(2).tier_index(3), Some(2));
        assert_eq!(Tag::tier(2).charge(&sizes), 300);
        assert_eq!(Tag::tier(3).tier_index(3), None, "past the last tier");
        assert_eq!(
            Tag::from_hint(65).tier_index(3),
            None,
            "not a stride multiple"
        );
        for t in [Tag::NONE, Tag::FOREIGN] {
            assert_eq!((t.tier_index(3), t.charge(&sizes)), (None, 0));
        }
        let (tag, bytes) = Tag::oversize(PAGE + 1).unwrap();
        assert_eq!(
            (bytes, tag.charge(&sizes), tag.tier_index(3)),
            (2 * PAGE, 2 * PAGE, None)
        );
        assert_eq!(Tag::oversize(0).unwrap().1, PAGE);
        let (tag, bytes) = Tag::oversize(MAX_PAGES * PAGE).unwrap();
        assert_eq!(tag.charge(&sizes), bytes);
        assert_ne!(tag, Tag::NONE);
        assert_ne!(tag, Tag::FOREIGN);
        assert!(Tag::oversize(MAX_PAGES * PAGE + 1).is_none());
    }
}
