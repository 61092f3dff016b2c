//! Layer 1, the operating system and the allocator: the allocation and the free of an aligned
//! pool's buffers (`alloc.rs`), the asymmetric fence that lets a thread
//! reclaim another's cache (`fence.rs`: Linux `membarrier`), asking the allocator to give
//! released memory back to the system (`trim.rs`: glibc's `malloc_trim`, jemalloc's purge,
//! mimalloc's collection), what a file needs for direct I/O (`direct_io.rs`: `statx`), and
//! the kernel's side of io_uring provided-buffer rings (`uring.rs`, feature `buf-ring`).
//! Imports only `base/`.

pub(crate) mod alloc;
pub(crate) mod fence;
pub(crate) mod trim;
#[cfg(target_os = "linux")]
pub(crate) mod direct_io;
#[cfg(all(feature = "buf-ring", target_os = "linux", not(loom)))]
pub(crate) mod uring;
