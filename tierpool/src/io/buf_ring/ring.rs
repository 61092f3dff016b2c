//! The ring: [`BufRingBuilder`], [`BufRing`] and what it does with the pool (its slots,
//! their refill, completions into views, teardown), and [`probe`].

use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::Ordering;

use io_uring::{cqueue, opcode, squeue, types};

use super::error::{register_error, BufRingError, RecvError};
use crate::buf::pooled::PooledBuf;
use crate::buf::shared::PooledBytes;
use crate::pool::buffer_pool::BufferPool;
use crate::sys::uring::{
    register, ring_head, unregister, unsupported, RingMemory, MAX_ENTRIES, PBUF_RING_INC,
};

/// Whether the ring uses incremental consumption (`IOU_PBUF_RING_INC`, Linux 6.12), in which
/// the kernel takes only what each receive needs from a buffer and the next receive goes on
/// where it stopped, so that small receives share a large buffer as views.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Incremental {
    /// Each receive takes a whole buffer (the default).
    #[default]
    Off,
    /// Incremental where the kernel has it, whole buffers where it does not
    /// ([`BufRing::is_incremental`] says which).
    IfSupported,
    /// Incremental, or [`BufRingError::Unsupported`].
    Required,
}

/// What the kernel offers (from [`probe`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Support {
    /// Provided-buffer rings (Linux 5.19).
    pub rings: bool,
    /// Their incremental consumption (Linux 6.12).
    pub incremental: bool,
}

/// Asks the kernel, through `uring`, whether it has provided-buffer rings and their
/// incremental consumption, by registering a one-entry ring (buffer group 65535, or the first
/// free one below it) and unregistering it.
///
/// # Errors
/// [`BufRingError::NotIoUring`] for a descriptor that is not an io_uring instance's;
/// [`BufRingError::Io`] if every group is in use or the system refuses otherwise.
pub fn probe(uring: &impl AsRawFd) -> Result<Support, BufRingError> {
    let memory = RingMemory::new(1);
    let fd = uring.as_raw_fd();
    for group in (0..=u16::MAX).rev() {
        let plain = register(fd, &memory, 1, group, 0);
        match plain {
            Ok(()) => {
                unregister(fd, group);
                let incremental = match register(fd, &memory, 1, group, PBUF_RING_INC) {
                    Ok(()) => {
                        unregister(fd, group);
                        true
                    }
                    Err(_) => false,
                };
                return Ok(Support {
                    rings: true,
                    incremental,
                });
            }
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => continue,
            Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
                return Err(BufRingError::NotIoUring)
            }
            Err(e) if unsupported(&e) => {
                return Ok(Support {
                    rings: false,
                    incremental: false,
                })
            }
            Err(e) => return Err(BufRingError::Io(e)),
        }
    }
    Err(BufRingError::Io(io::Error::from_raw_os_error(libc::EEXIST)))
}

/// What a ring slot holds.
enum Slot {
    /// Nothing: the buffer went out with a completion, or the budget had no room.
    Empty,
    /// A buffer lent to the kernel, whole (each receive takes all of it).
    Whole(PooledBuf),
    /// A buffer lent to the kernel for incremental consumption: `base` is an empty view that
    /// keeps it alive; `consumed` bytes of it have been received (and handed out as views).
    Shared {
        base: PooledBytes,
        consumed: usize,
        /// The length the entry offered.
        cap: usize,
    },
}

/// Counters of a [`BufRing`] (from [`BufRing::stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BufRingStats {
    /// Entries in the ring.
    pub entries: usize,
    /// Buffers in the ring now, lent to the kernel.
    pub in_ring: usize,
    /// Receives built by the ring that have not posted their last completion.
    pub in_flight: usize,
    /// Completions that carried bytes.
    pub received: u64,
    /// Bytes they carried.
    pub received_bytes: u64,
    /// Completions that found the ring empty (`ENOBUFS`).
    pub dry: u64,
    /// Buffers put into the ring by [`replenish`](BufRing::replenish) (and at the start).
    pub refilled: u64,
    /// Calls of [`replenish`](BufRing::replenish) that left slots empty because the pool
    /// refused a buffer (its budget had no room, or the allocator failed).
    pub starved: u64,
}

/// Configures a [`BufRing`]; from [`BufRing::builder`].
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct BufRingBuilder {
    pool: BufferPool,
    entries: u32,
    buf_size: usize,
    group: u16,
    incremental: Incremental,
}

impl BufRingBuilder {
    /// Entries in the ring: a power of two from 1 to [`MAX_ENTRIES`](crate::io::buf_ring::MAX_ENTRIES) (default 256). Each
    /// holds one buffer from the pool while it waits for data.
    pub fn entries(mut self, entries: u32) -> Self {
        self.entries = entries;
        self
    }

    /// Each buffer's size (default 16 KiB): the pool's tier for it, so the buffers are the
    /// pool's (a receive gets at most the tier's size).
    pub fn buf_size(mut self, size: usize) -> Self {
        self.buf_size = size;
        self
    }

    /// The buffer group id receives name (default 0); one ring per group and io_uring
    /// instance.
    pub fn group(mut self, group: u16) -> Self {
        self.group = group;
        self
    }

    /// Incremental consumption (default [`Incremental::Off`]).
    pub fn incremental(mut self, incremental: Incremental) -> Self {
        self.incremental = incremental;
        self
    }

    /// Registers the ring with the io_uring instance behind `uring` (an
    /// [`io_uring::IoUring`], or its raw descriptor) and fills it from the pool, as far as a
    /// budget allows.
    ///
    /// # Errors
    /// [`BufRingError`]: a bad configuration, a kernel without rings (or without the
    /// incremental consumption required), a group in use, or a system error.
    pub fn build(self, uring: &impl AsRawFd) -> Result<BufRing, BufRingError> {
        let entries = match u16::try_from(self.entries) {
            Ok(n) if n.is_power_of_two() && n <= MAX_ENTRIES => n,
            _ => {
                return Err(BufRingError::InvalidEntries {
                    entries: self.entries,
                })
            }
        };
        if self.buf_size == 0 || self.buf_size > u32::MAX as usize {
            return Err(BufRingError::InvalidBufSize {
                size: self.buf_size,
            });
        }
        // SAFETY: `fcntl(F_DUPFD_CLOEXEC)` on a descriptor the caller borrowed to us.
        let dup = unsafe { libc::fcntl(uring.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
        if dup < 0 {
            return Err(BufRingError::Io(io::Error::last_os_error()));
        }
        // SAFETY: `dup` is a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(dup) };
        let memory = RingMemory::new(entries);
        let group = self.group;
        let err = |e, feature| register_error(e, group, feature);
        let incremental = match self.incremental {
            Incremental::Off => false,
            want => match register(fd.as_raw_fd(), &memory, entries, group, PBUF_RING_INC) {
                Ok(()) => true,
                Err(e) if want == Incremental::Required || !unsupported(&e) => {
                    return Err(err(
                        e,
                        "incremental consumption of buffer rings (IOU_PBUF_RING_INC, Linux 6.12)",
                    ))
                }
                Err(_) => false,
            },
        };
        if !incremental {
            register(fd.as_raw_fd(), &memory, entries, group, 0).map_err(|e| {
                err(
                    e,
                    "provided-buffer rings (IORING_REGISTER_PBUF_RING, Linux 5.19)",
                )
            })?;
        }
        let mut ring = BufRing {
            pool: self.pool,
            memory,
            fd,
            mask: entries - 1,
            tail: 0,
            group,
            buf_size: self.buf_size,
            incremental,
            slots: (0..entries).map(|_| Slot::Empty).collect(),
            empty: (0..entries).rev().collect(),
            positions: vec![0; usize::from(entries)].into_boxed_slice(),
            stats: BufRingStats {
                entries: usize::from(entries),
                ..BufRingStats::default()
            },
        };
        ring.replenish();
        Ok(ring)
    }
}

/// A provided-buffer ring registered with an io_uring instance and stocked from a
/// [`BufferPool`] (module docs).
///
/// One event loop owns it (`&mut self` for everything but the counters); it may move between
/// threads. The [`PooledBytes`] it hands out are ordinary pooled views, `Send + Sync`.
pub struct BufRing {
    pool: BufferPool,
    memory: RingMemory,
    fd: OwnedFd,
    mask: u16,
    /// Our copy of the ring's tail (the kernel only reads it).
    tail: u16,
    group: u16,
    buf_size: usize,
    incremental: bool,
    /// Indexed by buffer id.
    slots: Box<[Slot]>,
    /// Buffer ids of the empty slots.
    empty: Vec<u16>,
    /// Indexed by buffer id: the ring position (the tail's value) its entry was written at.
    positions: Box<[u16]>,
    stats: BufRingStats,
}

// SAFETY: the ring's memory and its buffers are owned by this value alone (the kernel aside,
// which does not care which thread the owner runs on); every field is `Send` but the raw
// pointer to the entries, which nothing else aliases.
unsafe impl Send for BufRing {}

impl fmt::Debug for BufRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BufRing")
            .field("group", &self.group)
            .field("buf_size", &self.buf_size)
            .field("incremental", &self.incremental)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl BufRing {
    /// A builder for a ring stocked from `pool` (which it clones: the same pool).
    pub fn builder(pool: &BufferPool) -> BufRingBuilder {
        BufRingBuilder {
            pool: pool.clone(),
            entries: 256,
            buf_size: 16 << 10,
            group: 0,
            incremental: Incremental::Off,
        }
    }

    /// The buffer group id.
    pub fn group(&self) -> u16 {
        self.group
    }

    /// Whether the kernel consumes the buffers incrementally ([`Incremental`]).
    pub fn is_incremental(&self) -> bool {
        self.incremental
    }

    /// The size asked for each buffer ([`BufRingBuilder::buf_size`]).
    pub fn buf_size(&self) -> usize {
        self.buf_size
    }

    /// Receives built by this ring that have not yet posted their last completion.
    pub fn in_flight(&self) -> usize {
        self.stats.in_flight
    }

    /// The ring's counters.
    pub fn stats(&self) -> BufRingStats {
        BufRingStats {
            in_ring: self.slots.len() - self.empty.len(),
            ..self.stats
        }
    }

    /// A multishot receive from the socket `fd` into this ring's buffers (Linux 6.0): one
    /// submission, a completion per arrival, until the end of the stream, an error or a dry
    /// ring (its last completion has no `IORING_CQE_F_MORE`; arm it again then).
    ///
    /// Push the entry (set its `user_data`) and pass every one of its completions to
    /// [`complete`](Self::complete): the ring counts it in flight until then.
    pub fn recv_multishot(&mut self, fd: RawFd) -> squeue::Entry {
        self.stats.in_flight += 1;
        opcode::RecvMulti::new(types::Fd(fd), self.group).build()
    }

    /// One receive of at most `max` bytes (0: up to a buffer) from the socket `fd`, into one of
    /// this ring's buffers. As [`recv_multishot`](Self::recv_multishot), one completion.
    ///
    /// With incremental consumption `max` is ignored (0 is asked): where the kernel commits
    /// the buffer when it selects it (io-wq, files that cannot be polled), it would consume
    /// `max` bytes of the buffer whatever was received, and the views would lose their
    /// place.
    pub fn recv(&mut self, fd: RawFd, max: u32) -> squeue::Entry {
        self.stats.in_flight += 1;
        let max = if self.incremental { 0 } else { max };
        opcode::Recv::new(types::Fd(fd), std::ptr::null_mut(), max)
            .buf_group(self.group)
            .build()
            .flags(squeue::Flags::BUFFER_SELECT)
    }

    /// One read of at most `max` bytes (0: up to a buffer) from `fd` at `offset` (`u64::MAX`:
    /// the file position, for pipes and sockets), into one of this ring's buffers. As
    /// [`recv`](Self::recv) (`max` ignored with incremental consumption).
    pub fn read(&mut self, fd: RawFd, max: u32, offset: u64) -> squeue::Entry {
        self.stats.in_flight += 1;
        let max = if self.incremental { 0 } else { max };
        opcode::Read::new(types::Fd(fd), std::ptr::null_mut(), max)
            .offset(offset)
            .buf_group(self.group)
            .build()
            .flags(squeue::Flags::BUFFER_SELECT)
    }

    /// Reads a completion of one of this ring's receives: `Ok(Some(bytes))`, exactly the bytes
    /// received, in a pooled view; `Ok(None)` at the end of the stream.
    ///
    /// Pass every completion of every receive the ring built, once: the ring takes back the
    /// buffer the kernel used and counts the receive done at its last completion. Call
    /// [`replenish`](Self::replenish) after a batch of completions.
    ///
    /// # Safety
    /// `cqe` is a completion of an entry this ring built ([`recv_multishot`](Self::recv_multishot),
    /// [`recv`](Self::recv), [`read`](Self::read)), and no completion is passed twice (a
    /// `cqueue::Entry` can be cloned). A completion of another buffer group, or one passed
    /// again, names a buffer id whose slot may hold a buffer the kernel can still write into,
    /// which would then be handed out; the ring catches only the completions that name no
    /// buffer it lent ([`RecvError::NotFromRing`]).
    ///
    /// # Errors
    /// [`RecvError::Dry`] when the ring had no buffer; [`RecvError::Io`] when the receive
    /// failed; [`RecvError::NotFromRing`] for a completion that names no buffer this ring
    /// lent (or carries data without a buffer).
    pub unsafe fn complete(
        &mut self,
        cqe: &cqueue::Entry,
    ) -> Result<Option<PooledBytes>, RecvError> {
        let flags = cqe.flags();
        let res = cqe.result();
        let last = !cqueue::more(flags);
        let Some(bid) = cqueue::buffer_select(flags) else {
            return self.complete_without_buffer(res, last);
        };
        let n = usize::try_from(res).unwrap_or(0);
        self.check_lent(bid, n)?;
        self.finished(last);
        // Whether the kernel is done with the buffer. With bytes, without incremental
        // consumption, it is (the entry was consumed when it was selected or at this
        // completion); with it, unless it says more of the buffer is left. Without bytes (an
        // error, or 0 at the end of a file) it may or may not have consumed the entry: when
        // the request ran where it commits at selection (io-wq, files that cannot be polled)
        // it did, else it did not (and an incremental 0-byte completion is reported without
        // `IORING_CQE_F_BUF_MORE` by some kernels); the ring's head says which.
        let done = if res > 0 {
            !(self.incremental && cqueue::buffer_more(flags))
        } else {
            self.consumed_by_kernel(bid)
        };
        let slot = &mut self.slots[usize::from(bid)];
        let bytes = match slot {
            Slot::Empty => None, // ruled out above
            Slot::Whole(_) if !done => None,
            Slot::Whole(_) => {
                let Slot::Whole(mut buf) = std::mem::replace(slot, Slot::Empty) else {
                    unreachable!("matched above")
                };
                // SAFETY: the kernel wrote `n` bytes at the buffer's start (the completion
                // says so; `n` is within the capacity, checked above), and writes it no more:
                // without incremental consumption a completion with bytes ends the kernel's
                // use of the buffer it names.
                unsafe { buf.set_len(n) };
                (n > 0).then(|| buf.into_shared())
            }
            Slot::Shared { base, consumed, .. } => {
                let at = *consumed;
                *consumed += n;
                // SAFETY: the kernel consumes the buffer in order from its start (the ring
                // asks for no length limit in this mode, so it advances by exactly the bytes
                // received): bytes `..at` were received by earlier completions, `at..at + n`
                // by this one (within the length the entry offered, checked above), and it
                // writes none of them again. The bytes past them it may still write, but no
                // view covers them.
                let view = (n > 0).then(|| unsafe { base.written_view(at, n) });
                if done {
                    *slot = Slot::Empty;
                }
                view
            }
        };
        if done {
            self.empty.push(bid);
        }
        if res < 0 {
            return Err(RecvError::Io(io::Error::from_raw_os_error(-res)));
        }
        match bytes {
            Some(b) => {
                self.stats.received += 1;
                self.stats.received_bytes += b.len() as u64;
                Ok(Some(b))
            }
            None => Ok(None),
        }
    }

    /// A completion that names no buffer: the end of the stream, the ring run dry, or an
    /// error (data without a buffer is not this ring's).
    fn complete_without_buffer(
        &mut self,
        res: i32,
        last: bool,
    ) -> Result<Option<PooledBytes>, RecvError> {
        if res > 0 {
            return Err(RecvError::NotFromRing { bid: None });
        }
        self.finished(last);
        match res {
            0 => Ok(None),
            r if r == -libc::ENOBUFS => {
                self.stats.dry += 1;
                Err(RecvError::Dry)
            }
            r => Err(RecvError::Io(io::Error::from_raw_os_error(-r))),
        }
    }

    /// Whether buffer `bid` is lent to the kernel with room for the `n` bytes a completion
    /// says it received into it.
    fn check_lent(&self, bid: u16, n: usize) -> Result<(), RecvError> {
        let fits = match self.slots.get(usize::from(bid)) {
            None | Some(Slot::Empty) => false,
            Some(Slot::Whole(buf)) => n <= buf.capacity(),
            Some(Slot::Shared { consumed, cap, .. }) => *consumed + n <= *cap,
        };
        if fits {
            Ok(())
        } else {
            Err(RecvError::NotFromRing { bid: Some(bid) })
        }
    }

    /// Counts a receive done at its last completion.
    fn finished(&mut self, last: bool) {
        if last {
            self.stats.in_flight = self.stats.in_flight.saturating_sub(1);
        }
    }

    /// Whether the kernel has consumed the entry of buffer `bid` (its head is past the
    /// entry's position), from `IORING_REGISTER_PBUF_STATUS` (Linux 6.8). Where the kernel
    /// cannot say, false: the slot then keeps its buffer, which is safe (at worst the slot is
    /// not reused).
    fn consumed_by_kernel(&self, bid: u16) -> bool {
        let Ok(head) = ring_head(self.fd.as_raw_fd(), self.group) else {
            return false;
        };
        // Positions are the ring's 16-bit counters: the entry at `pos` lies in the window
        // `tail - entries .. tail`; it is consumed if it is farther from the tail than the
        // head is.
        let pos = self.positions[usize::from(bid)];
        self.tail.wrapping_sub(pos) > self.tail.wrapping_sub(head)
    }

    /// Puts a buffer from the pool into every empty slot, and publishes them to the kernel
    /// with one store of the ring's tail; returns how many. Stops at the first buffer the pool
    /// refuses (the budget has no room, or the allocator failed), counting the slots left
    /// empty in [`BufRingStats::starved`].
    pub fn replenish(&mut self) -> usize {
        let mut added = 0u16;
        while let Some(&bid) = self.empty.last() {
            let mut buf = match self.pool.try_get_exact(self.buf_size) {
                Ok(buf) => buf,
                Err(_) => {
                    self.stats.starved += 1;
                    break;
                }
            };
            self.empty.pop();
            let addr = buf.as_mut_ptr();
            let len = u32::try_from(buf.capacity()).unwrap_or(u32::MAX);
            let pos = self.tail.wrapping_add(added);
            self.positions[usize::from(bid)] = pos;
            let index = usize::from(pos & self.mask);
            // SAFETY: `index` is within the ring; the kernel reads only the entries between
            // its head and our published tail, and this one is past the tail (the ring holds
            // at most `entries` buffers, one per slot, so the kernel is done with this entry).
            unsafe { self.memory.write_entry(index, addr, len, bid) };
            self.slots[usize::from(bid)] = if self.incremental {
                Slot::Shared {
                    base: buf.into_shared(),
                    consumed: 0,
                    cap: len as usize,
                }
            } else {
                Slot::Whole(buf)
            };
            added += 1;
        }
        if added > 0 {
            self.tail = self.tail.wrapping_add(added);
            // Release: the entries written above are visible to the kernel before the tail
            // that publishes them.
            self.memory.tail().store(self.tail, Ordering::Release);
            self.stats.refilled += u64::from(added);
        }
        usize::from(added)
    }

    /// Unregisters the ring and gives its buffers back to the pool, or, if receives are still
    /// in flight (one may have selected a buffer, which the kernel could still write), keeps
    /// them for the life of the process, never freed or reused. Dropping the ring does the
    /// same. To get every buffer back, cancel the ring's receives (`AsyncCancel`) and pass
    /// their last completions to [`complete`](Self::complete) first.
    pub fn close(mut self) -> Closed {
        self.teardown()
    }

    fn teardown(&mut self) -> Closed {
        let unregistered = unregister(self.fd.as_raw_fd(), self.group);
        let lent = std::mem::take(&mut self.slots);
        let mut closed = Closed::default();
        let safe = unregistered && self.stats.in_flight == 0;
        for slot in lent.into_vec() {
            match slot {
                Slot::Empty => {}
                held if safe => {
                    closed.returned += 1;
                    drop(held);
                }
                held => {
                    closed.leaked += 1;
                    quarantine(Orphan::Buffer(held));
                }
            }
        }
        if !unregistered {
            // The kernel may still read the entries: they are kept too.
            quarantine(Orphan::Entries(std::mem::replace(
                &mut self.memory,
                RingMemory::new(1),
            )));
        }
        self.empty.clear();
        closed
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        if !self.slots.is_empty() {
            self.teardown();
        }
    }
}

/// What a teardown could not safely free: kept for the life of the process, never freed or
/// reused (and still reachable, so leak checkers do not report it).
#[allow(dead_code)] // kept, never read
enum Orphan {
    /// A buffer a receive in flight may have selected.
    Buffer(Slot),
    /// Entries the kernel may still read (their ring could not be unregistered).
    Entries(RingMemory),
}

// SAFETY: a `RingMemory` is plain memory owned by its value (the raw pointer is what stops the
// automatic impl); an orphan is never used again, only kept.
unsafe impl Send for Orphan {}

static ORPHANS: std::sync::Mutex<Vec<Orphan>> = std::sync::Mutex::new(Vec::new());

fn quarantine(orphan: Orphan) {
    ORPHANS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(orphan);
}

/// What [`BufRing::close`] did with the ring's buffers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Closed {
    /// Buffers given back to the pool.
    pub returned: usize,
    /// Buffers kept back because receives were still in flight: kept for the life of the
    /// process, never freed or reused (under a budget they stay charged).
    pub leaked: usize,
}

#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;

    /// What a kernel without a registration answers (`EINVAL` for an opcode or flag it does
    /// not know) is reported as `Unsupported`, naming the feature: here a flag no kernel has,
    /// on a real io_uring instance.
    #[test]
    fn a_refused_registration_is_reported_as_unsupported() {
        let Ok(uring) = io_uring::IoUring::new(8) else {
            assert!(
                std::env::var_os("TIERPOOL_REQUIRE_IO_URING").is_none(),
                "no io_uring"
            );
            return;
        };
        let memory = RingMemory::new(4);
        let e = register(uring.as_raw_fd(), &memory, 4, 5, 0x4000).unwrap_err();
        let e = register_error(e, 5, "a flag from the future (Linux 99)");
        match &e {
            BufRingError::Unsupported { feature, source } => {
                assert_eq!(source.raw_os_error(), Some(libc::EINVAL));
                assert!(feature.contains("Linux 99"));
            }
            other => panic!("{other:?}"),
        }
        let text = e.to_string();
        assert!(
            text.starts_with("this kernel has no a flag from the future"),
            "{text}"
        );
        // Not a power of two: the kernel refuses it too, and `build` checks it first.
        assert!(register(uring.as_raw_fd(), &memory, 3, 5, 0).is_err());
        assert!(!unregister(uring.as_raw_fd(), 5), "nothing was registered");
    }
}
