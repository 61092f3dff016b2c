//! How much a read offers.

/// The least a read offers: tokio-util's `FramedRead` starts with an 8 KiB buffer.
pub(crate) const MIN_READ: usize = 8 << 10;
/// The most a read offers.
pub(crate) const MAX_READ: usize = 256 << 10;
/// The largest fresh buffer a read takes for frames of a size that repeats (larger frames
/// grow into their buffers as they arrive).
pub(crate) const MAX_LEARNED: usize = 4 << 20;

/// How much the next read offers: Netty's adaptive guess, between [`MIN_READ`] and
/// [`MAX_READ`]. Doubled after a read that filled its offer; halved after four reads in a
/// row that used less than a quarter of it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sizer {
    guess: usize,
    short: u8,
    /// The last read filled its offer: more is probably waiting.
    pub(super) full: bool,
}

impl Sizer {
    pub(crate) fn new() -> Sizer {
        Sizer::starting_at(MIN_READ)
    }

    /// A sizer whose first offer is `n` (within [`MIN_READ`] and [`MAX_READ`]): a read of a
    /// message of known length.
    pub(crate) fn starting_at(n: usize) -> Sizer {
        Sizer {
            guess: n.clamp(MIN_READ, MAX_READ),
            short: 0,
            full: false,
        }
    }

    /// What the next read offers.
    pub(crate) fn offer(&self) -> usize {
        self.guess
    }

    /// A read of `n` bytes into an offer of `offered`.
    pub(crate) fn record(&mut self, n: usize, offered: usize) {
        self.full = n >= offered;
        if n >= offered {
            self.guess = (self.guess * 2).min(MAX_READ);
            self.short = 0;
        } else if n < self.guess / 4 {
            self.short += 1;
            if self.short >= 4 {
                self.guess = (self.guess / 2).max(MIN_READ);
                self.short = 0;
            }
        } else {
            self.short = 0;
        }
    }
}
