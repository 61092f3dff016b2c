//! How buffers are made on a miss, made ready on a hit, and cleaned on return.

use crate::error::AllocError;

/// How a fresh buffer is made on a miss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fresh {
    /// `Vec::with_capacity`; aborts or panics on failure like `Vec`.
    Plain,
    /// Zeroed (`calloc`), `len` set to the request.
    Zeroed,
    /// `try_reserve_exact`; failure is an error.
    Fallible,
}

/// Allocates a buffer of capacity `cap` for a request of `n` bytes.
pub(crate) fn alloc_fresh(cap: usize, n: usize, how: Fresh) -> Result<Vec<u8>, AllocError> {
    match how {
        Fresh::Plain => Ok(Vec::with_capacity(cap)),
        Fresh::Zeroed => {
            let mut v = vec![0u8; cap];
            v.truncate(n);
            Ok(v)
        }
        Fresh::Fallible => {
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

#[cold]
fn wipe_capacity(v: &mut Vec<u8>) {
    v.spare_capacity_mut().fill(std::mem::MaybeUninit::new(0));
    // Keep the compiler from treating the zeros as dead stores before a free.
    std::hint::black_box(v.spare_capacity_mut().as_ptr());
}
