//! The kernel's side of io_uring provided-buffer rings (feature `buf-ring`, Linux): the
//! registration structs and opcodes, the ring's memory and its entries, and the
//! `io_uring_register` calls that register, unregister and query a ring. What a ring *does*
//! with the pool is `io/buf_ring/`.
//!
//! The `io-uring` crate has the ring's entry type but no safe registration with flags or the
//! status query, so these are written here, against the kernel's ABI (`include/uapi/linux/
//! io_uring.h`).

use std::alloc::Layout;
use std::io;
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::atomic::AtomicU16;

/// `IORING_REGISTER_PBUF_RING`.
const REGISTER_PBUF_RING: libc::c_uint = 22;
/// `IORING_UNREGISTER_PBUF_RING`.
const UNREGISTER_PBUF_RING: libc::c_uint = 23;
/// `IORING_REGISTER_PBUF_STATUS` (Linux 6.8): the head of a ring.
const PBUF_STATUS: libc::c_uint = 26;
/// `IOU_PBUF_RING_INC`: incremental consumption.
pub(crate) const PBUF_RING_INC: u16 = 2;
/// The largest ring the kernel accepts (`ring_entries` is at most 2^15).
pub(crate) const MAX_ENTRIES: u16 = 1 << 15;
/// The page size the ring's memory is aligned to (the kernel needs a page-aligned address; 64
/// KiB covers every page size Linux uses).
const RING_ALIGN: usize = 64 << 10;

/// `struct io_uring_buf_reg`.
#[repr(C)]
struct BufReg {
    ring_addr: u64,
    ring_entries: u32,
    bgid: u16,
    flags: u16,
    resv: [u64; 3],
}

/// `struct io_uring_buf_status`.
#[repr(C)]
struct BufStatus {
    buf_group: u32,
    head: u32,
    resv: [u32; 8],
}

/// `struct io_uring_buf`: one entry of the ring. The first entry's last two bytes are the
/// ring's tail (`struct io_uring_buf_ring`), which the kernel reads and only we write.
#[repr(C)]
pub(crate) struct Entry {
    addr: u64,
    len: u32,
    bid: u16,
    resv: u16,
}

/// The kernel's answers for "no such registration" (`EINVAL`: unknown opcode or flag) and "no
/// io_uring at all" (`ENOSYS`). (`EOPNOTSUPP` is a descriptor that is not an io_uring's.)
pub(crate) fn unsupported(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS))
}

/// Registers `memory` (`entries` entries) as the provided-buffer ring of buffer group
/// `group` of the io_uring instance `fd`, with `flags` (`IOU_PBUF_RING_*`).
pub(crate) fn register(
    fd: RawFd,
    memory: &RingMemory,
    entries: u16,
    group: u16,
    flags: u16,
) -> io::Result<()> {
    let reg = BufReg {
        ring_addr: memory.ptr.as_ptr() as u64,
        ring_entries: u32::from(entries),
        bgid: group,
        flags,
        resv: [0; 3],
    };
    // SAFETY: the kernel reads one `io_uring_buf_reg` from `reg`; the ring memory it names is
    // page-aligned, zeroed, at least `entries` entries long, and outlives the registration
    // (every caller unregisters before freeing it).
    unsafe { io_uring_register(fd, REGISTER_PBUF_RING, (&reg as *const BufReg).cast()) }
}

/// `io_uring_register(fd, opcode, arg, 1)`.
///
/// # Safety
/// `arg` points to the one argument `opcode` reads or writes, valid for that access.
unsafe fn io_uring_register(
    fd: RawFd,
    opcode: libc::c_uint,
    arg: *const libc::c_void,
) -> io::Result<()> {
    // SAFETY: the caller's contract; the other arguments are plain integers.
    let r = unsafe { libc::syscall(libc::SYS_io_uring_register, fd, opcode, arg, 1) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Unregisters `group`; true if the kernel did (it then reads the ring's memory no more).
pub(crate) fn unregister(fd: RawFd, group: u16) -> bool {
    let reg = BufReg {
        ring_addr: 0,
        ring_entries: 0,
        bgid: group,
        flags: 0,
        resv: [0; 3],
    };
    // SAFETY: the kernel reads one `io_uring_buf_reg` from `reg`.
    unsafe { io_uring_register(fd, UNREGISTER_PBUF_RING, (&reg as *const BufReg).cast()) }.is_ok()
}

/// The head of buffer group `group`'s ring (`IORING_REGISTER_PBUF_STATUS`, Linux 6.8): the
/// position of the next entry the kernel will take.
pub(crate) fn ring_head(fd: RawFd, group: u16) -> io::Result<u16> {
    let mut status = BufStatus {
        buf_group: u32::from(group),
        head: 0,
        resv: [0; 8],
    };
    // SAFETY: the kernel writes one `io_uring_buf_status` into `status`.
    unsafe { io_uring_register(fd, PBUF_STATUS, (&mut status as *mut BufStatus).cast()) }?;
    Ok(status.head as u16)
}

/// The ring's entries: page-aligned, zeroed memory the kernel reads.
pub(crate) struct RingMemory {
    ptr: NonNull<Entry>,
    layout: Layout,
}

impl RingMemory {
    pub(crate) fn new(entries: u16) -> RingMemory {
        let layout = Layout::from_size_align(
            usize::from(entries) * std::mem::size_of::<Entry>(),
            RING_ALIGN,
        )
        .expect("at most 2^15 entries of 16 bytes");
        // SAFETY: the layout's size is not zero (at least one entry).
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(ptr.cast::<Entry>()) else {
            std::alloc::handle_alloc_error(layout)
        };
        RingMemory { ptr, layout }
    }

    /// The tail, in the first entry's last two bytes.
    pub(crate) fn tail(&self) -> &AtomicU16 {
        // SAFETY: the first entry is live for as long as `self`; its `resv` is the ring's
        // tail, which only this thread writes (the kernel reads it), so an atomic view of it
        // is sound (`AtomicU16` has `u16`'s size and, here, its alignment).
        unsafe { AtomicU16::from_ptr(std::ptr::addr_of_mut!((*self.ptr.as_ptr()).resv)) }
    }
}

impl RingMemory {
    /// Writes entry `index`: buffer `bid`, `len` bytes at `addr`. Only `addr`, `len` and `bid`
    /// are written: the first entry's `resv` is the tail.
    ///
    /// # Safety
    /// `index` is below the ring's entries, and the kernel is done with that entry: it is
    /// past the published tail (the kernel reads only the entries between its head and the
    /// tail).
    pub(crate) unsafe fn write_entry(&self, index: usize, addr: *mut u8, len: u32, bid: u16) {
        // SAFETY: within the allocation (the caller's contract); no other reference to the
        // entry exists (this type hands none out), and the kernel does not read it now.
        unsafe {
            let e = self.ptr.as_ptr().add(index);
            std::ptr::addr_of_mut!((*e).addr).write(addr as u64);
            std::ptr::addr_of_mut!((*e).len).write(len);
            std::ptr::addr_of_mut!((*e).bid).write(bid);
        }
    }
}

impl Drop for RingMemory {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr().cast(), self.layout) };
    }
}
