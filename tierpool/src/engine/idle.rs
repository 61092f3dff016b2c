//! The one rule by which the pool lets go of what it keeps: whatever stayed unused through a
//! whole decay interval is released at the interval's end (Bonwick's depot working set; Go's
//! `sync.Pool` victim cache has the same effect: what is unused for one interval is gone by
//! the end of the next).
//!
//! An [`IdleStack`] keeps items newest on top and remembers its *low-water mark*: the fewest
//! items it held since the last decay. Items are taken from the top (or, by a search, from
//! anywhere), so the ones below the mark are exactly those that sat there through the whole
//! interval, and [`IdleStack::decay`] releases them. The depot's stacks of buffers, the spare
//! stack storage of thread caches and the parked caches of exited threads are each an
//! `IdleStack`; a thread cache's own stacks follow the same rule with raw pointers, which the
//! fast path needs (`cache/stack.rs`).

/// A stack whose items that stayed untouched through an interval can be told apart (module
/// docs). Invariant: `low <= items.len()`, and the `low` oldest items were all there at the
/// last decay and none of them has been taken since.
#[derive(Debug)]
pub(crate) struct IdleStack<T> {
    /// Oldest first.
    items: Vec<T>,
    low: usize,
}

impl<T> Default for IdleStack<T> {
    fn default() -> Self {
        IdleStack::with_capacity(0)
    }
}

impl<T> IdleStack<T> {
    /// An empty stack with room for `n` items (so that pushing them allocates nothing).
    pub(crate) fn with_capacity(n: usize) -> Self {
        IdleStack {
            items: Vec::with_capacity(n),
            low: 0,
        }
    }

    /// Items held.
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// Adds `item` on top.
    pub(crate) fn push(&mut self, item: T) {
        self.items.push(item);
    }

    /// Takes the newest item.
    pub(crate) fn pop(&mut self) -> Option<T> {
        let item = self.items.pop()?;
        self.low = self.low.min(self.items.len());
        Some(item)
    }

    /// Takes the newest item for which `pick` is true (`pick` may change the items it looks
    /// at: it sees each newest first, until it answers true).
    pub(crate) fn take_newest(&mut self, mut pick: impl FnMut(&mut T) -> bool) -> Option<T> {
        let i = self.items.iter_mut().rposition(&mut pick)?;
        if i < self.low {
            self.low -= 1; // one of the untouched ones was touched
        }
        Some(self.items.remove(i))
    }

    /// Takes the `n` oldest items (all of them if fewer), handing each to `f`, oldest first;
    /// those below the mark among them no longer count as idle. With `shrink`, an emptied
    /// stack frees its storage too (what it held went idle: the storage may sit above it in
    /// the heap, and a `malloc` that returns memory only from the top of its heap, glibc's,
    /// could give none of it back while the storage lived); without it, the next push
    /// allocates nothing.
    pub(crate) fn take_oldest(&mut self, n: usize, shrink: bool, f: impl FnMut(T)) {
        let n = n.min(self.items.len());
        self.items.drain(..n).for_each(f);
        self.low = self.low.saturating_sub(n);
        if shrink && n > 0 && self.items.is_empty() {
            self.items = Vec::new();
        }
    }

    /// Ends an interval: hands the items that stayed untouched through it to `f` (oldest
    /// first; `shrink` as for [`Self::take_oldest`]), or, with `all`, every item; the rest
    /// start the next interval. Returns how many went.
    pub(crate) fn decay(&mut self, all: bool, shrink: bool, f: impl FnMut(T)) -> usize {
        let n = if all { self.items.len() } else { self.low };
        self.take_oldest(n, shrink, f);
        self.low = self.items.len();
        n
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn decayed(s: &mut IdleStack<u32>) -> Vec<u32> {
        let mut out = Vec::new();
        s.decay(false, true, |x| out.push(x));
        out
    }

    #[test]
    fn what_stayed_untouched_through_an_interval_goes_at_its_end() {
        let mut s = IdleStack::default();
        for x in 0..6 {
            s.push(x);
        }
        assert!(decayed(&mut s).is_empty(), "the first interval starts now");
        // Through this interval the stack never holds fewer than 4: 0..4 stayed idle.
        assert_eq!(s.pop(), Some(5));
        assert_eq!(s.pop(), Some(4));
        s.push(40);
        s.push(50);
        assert_eq!(decayed(&mut s), [0, 1, 2, 3]);
        assert_eq!(decayed(&mut s), [40, 50], "the rest idled through the next");
        assert_eq!(s.len(), 0);
    }

    #[test]
    fn taking_from_the_middle_or_the_bottom_keeps_the_mark_exact() {
        let mut s = IdleStack::default();
        for x in 0..6 {
            s.push(x);
        }
        decayed(&mut s);
        // One untouched item taken from the middle, two from the bottom, then new ones.
        assert_eq!(s.take_newest(|x| *x == 2), Some(2));
        let mut old = Vec::new();
        s.take_oldest(2, false, |x| old.push(x));
        assert_eq!(old, [0, 1]);
        s.push(60);
        s.push(70);
        // 3, 4 and 5 stayed; 60 and 70 came during the interval and stay for the next.
        assert_eq!(decayed(&mut s), [3, 4, 5]);
        assert_eq!(s.len(), 2);
        // A search that finds nothing takes nothing; one above the mark leaves it.
        assert_eq!(s.take_newest(|x| *x == 99), None);
        s.push(80);
        assert_eq!(s.take_newest(|x| *x == 80), Some(80));
        assert_eq!(decayed(&mut s), [60, 70]);
        // `all` takes everything.
        s.push(1);
        let mut all = Vec::new();
        assert_eq!(s.decay(true, true, |x| all.push(x)), 1);
        assert_eq!((all, s.len()), (vec![1], 0));
    }
}
