//! How buffers are made on a miss, made ready on a hit, and cleaned on return.

use crate::engine::error::AllocError;
use crate::sys::alloc::{self, free};

/// How a fresh buffer is made on a miss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fresh {
    /// `Vec::with_capacity`; aborts or panics on failure like `Vec`.
    Infallible,
    /// Zeroed (`calloc`), `len` set to the request.
    Zeroed,
    /// `try_reserve_exact`; failure is an error.
    Fallible,
    /// As `Infallible`, and served by the request's own tier only: no larger tier's buffer is
    /// lent (`Classes::lenders`). What `io`'s readers and writers ask for: their bounds on
    /// what they hold are counted in tier sizes.
    InfallibleExact,
    /// As `Fallible`, and served by the request's own tier only (as `InfallibleExact`).
    FallibleExact,
}

impl Fresh {
    /// True if a larger tier's retained buffer may serve the get (not for the exact kinds).
    #[inline]
    pub(crate) fn lends(self) -> bool {
        !matches!(self, Fresh::InfallibleExact | Fresh::FallibleExact)
    }
}

/// Allocates a buffer of capacity `cap` for a request of `n` bytes, with alignment `align`
/// (1 for a plain pool; an [`AlignedPool`](crate::AlignedPool)'s alignment otherwise, in which
/// case `cap` is a multiple of it: `sys/alloc.rs`).
pub(crate) fn alloc_fresh(
    cap: usize,
    n: usize,
    how: Fresh,
    align: usize,
) -> Result<Vec<u8>, AllocError> {
    let v = alloc_once(cap, n, how, align)?;
    if !badly_placed(&v) {
        return Ok(v);
    }
    // Freed first: glibc then raises its mmap threshold above this size, and the second
    // allocation comes from its heap, at another offset. Kept whatever it is.
    free(v, align);
    alloc_once(cap, n, how, align)
}

/// Buffers at least this large are checked for their placement (glibc's initial mmap
/// threshold: smaller ones never get a chunk of their own).
const LARGE: usize = 128 << 10;

/// True for a large buffer whose bytes start 16 bytes into a page: where glibc puts the data
/// of a chunk it `mmap`ped (the first large allocations of a process, before glibc raises its
/// threshold). Copying page-aligned data (a file's pages, from the kernel) to a destination 16
/// bytes past a page boundary is much slower than to any other offset
/// (`docs/benchmarks-history.md` has the figures). A pool keeps its first buffers for good,
/// so it makes sure they are not placed there. Only with glibc (`target_env = "gnu"`); elsewhere the check is off.
fn badly_placed(v: &Vec<u8>) -> bool {
    cfg!(all(target_os = "linux", target_env = "gnu", not(miri)))
        && v.capacity() >= LARGE
        && v.as_ptr().align_offset(4096) == 4096 - 16
}

fn alloc_once(cap: usize, n: usize, how: Fresh, align: usize) -> Result<Vec<u8>, AllocError> {
    if align > 1 {
        return alloc_aligned(cap, n, how, align);
    }
    match how {
        Fresh::Infallible | Fresh::InfallibleExact => Ok(Vec::with_capacity(cap)),
        Fresh::Zeroed => {
            let mut v = vec![0u8; cap];
            v.truncate(n);
            Ok(v)
        }
        Fresh::Fallible | Fresh::FallibleExact => {
            if cap > isize::MAX as usize {
                return Err(AllocError::CapacityOverflow { requested: n });
            }
            let mut v = Vec::new();
            v.try_reserve_exact(cap)
                .map_err(|_| AllocError::AllocFailed {
                    requested: n,
                    capacity: cap,
                })?;
            Ok(v)
        }
    }
}

/// [`alloc_once`] for an aligned pool (`sys/alloc.rs`): errors as the kinds of `Vec` have
/// them (the infallible kinds abort through
/// [`handle_alloc_error`](std::alloc::handle_alloc_error), as `Vec` does).
#[cold]
fn alloc_aligned(cap: usize, n: usize, how: Fresh, align: usize) -> Result<Vec<u8>, AllocError> {
    match alloc::alloc_aligned(cap, align, how == Fresh::Zeroed, n) {
        Ok(v) => Ok(v),
        Err(None) => Err(AllocError::CapacityOverflow { requested: n }),
        Err(Some(layout)) => match how {
            Fresh::Fallible | Fresh::FallibleExact => Err(AllocError::AllocFailed {
                requested: n,
                capacity: cap,
            }),
            _ => std::alloc::handle_alloc_error(layout),
        },
    }
}

/// Makes a buffer that was just taken from retention ready to hand out for `n` bytes.
#[inline(always)]
pub(crate) fn prepare_hit(v: &mut Vec<u8>, n: usize, how: Fresh) {
    if how == Fresh::Zeroed {
        v.resize(n, 0);
    }
}

/// Clears a returned buffer; with `wipe`, overwrites its whole capacity with zeros first.
#[inline(always)]
pub(crate) fn scrub(v: &mut Vec<u8>, wipe: bool) {
    v.clear();
    if wipe {
        wipe_capacity(v);
    }
}

#[cfg(all(test, not(loom), not(miri)))]
mod tests {
    use super::*;

    /// Set in a child process of this test binary: which first large allocation to make.
    const CHILD: &str = "TIERPOOL_PLACEMENT_CHILD";

    /// A command that runs this test binary again. Under an emulator (CI runs the aarch64
    /// build under `qemu-aarch64`) the binary cannot be executed directly:
    /// `TIERPOOL_TEST_RUNNER` names the emulator and its arguments, as Cargo's target runner
    /// does for the parent.
    fn self_command() -> std::process::Command {
        let exe = std::env::current_exe().unwrap();
        let runner = std::env::var("TIERPOOL_TEST_RUNNER").unwrap_or_default();
        let mut words = runner.split_whitespace();
        match words.next() {
            Some(program) => {
                let mut c = std::process::Command::new(program);
                c.args(words).arg(exe);
                c
            }
            None => std::process::Command::new(exe),
        }
    }

    /// Runs this test alone in a fresh process (whose first large allocation glibc `mmap`s)
    /// with `CHILD=what`; true if the buffer it allocated first was badly placed.
    fn first_large_allocation_is_badly_placed(what: &str) -> bool {
        let out = self_command()
            .args([
                "--exact",
                "fresh::tests::the_first_large_buffer_of_a_process_is_not_placed_16_bytes_into_a_page",
                "--nocapture",
            ])
            .env(CHILD, what)
            .output()
            .unwrap();
        assert!(out.status.success(), "child {what} failed: {out:?}");
        String::from_utf8_lossy(&out.stdout).contains("placement: bad")
    }

    /// In a fresh process, a plain 1 MiB `Vec` (glibc `mmap`s it) starts 16 bytes into a page;
    /// a fresh pool buffer of the same size does not (it fails without the re-allocation in
    /// `alloc_fresh`). Under an allocator that does not place it there (a sanitizer's, say),
    /// there is nothing to fix and the second check is skipped.
    #[test]
    fn the_first_large_buffer_of_a_process_is_not_placed_16_bytes_into_a_page() {
        if let Ok(what) = std::env::var(CHILD) {
            let v = match what.as_str() {
                "vec" => Vec::with_capacity(1 << 20),
                _ => alloc_fresh(1 << 20, 1 << 20, Fresh::Infallible, 1).unwrap(),
            };
            let bad = v.capacity() >= LARGE && v.as_ptr().align_offset(4096) == 4096 - 16;
            println!("placement: {}", if bad { "bad" } else { "good" });
            return;
        }
        if !first_large_allocation_is_badly_placed("vec") {
            eprintln!("this allocator does not put large buffers 16 bytes into a page: skipped");
            return;
        }
        assert!(
            !first_large_allocation_is_badly_placed("pool"),
            "a fresh 1 MiB pool buffer starts 16 bytes into a page"
        );
    }

    /// Whichever way a large buffer is made, it has the capacity asked for (and zeros when
    /// zeroed), also when it was made twice.
    #[test]
    fn large_fresh_buffers_have_what_was_asked() {
        for how in [Fresh::Infallible, Fresh::Zeroed, Fresh::Fallible] {
            for cap in [LARGE, 1 << 20, 3 << 20] {
                for align in [1, 4096] {
                    let v = alloc_fresh(cap, cap / 2, how, align).unwrap();
                    assert!(v.capacity() >= cap);
                    assert_eq!(v.as_ptr() as usize % align, 0);
                    if how == Fresh::Zeroed {
                        assert_eq!(v.len(), cap / 2);
                        assert!(v.iter().all(|&b| b == 0));
                    }
                    free(v, align);
                }
            }
        }
    }

    /// An aligned pool's sizes that no layout can hold are errors, never a panic or a
    /// wrongly sized buffer.
    #[test]
    fn aligned_sizes_past_isize_max_are_errors() {
        for how in [Fresh::Infallible, Fresh::Fallible] {
            let e = alloc_fresh(isize::MAX as usize + 1, 7, how, 4096).unwrap_err();
            assert_eq!(e, AllocError::CapacityOverflow { requested: 7 });
        }
    }
}

#[cold]
fn wipe_capacity(v: &mut Vec<u8>) {
    v.spare_capacity_mut().fill(std::mem::MaybeUninit::new(0));
    // Keep the compiler from treating the zeros as dead stores before a free.
    std::hint::black_box(v.spare_capacity_mut().as_ptr());
}
