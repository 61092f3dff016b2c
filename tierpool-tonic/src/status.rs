//! The gRPC statuses the pooled path answers with, one place for each reason.

use tonic::Status;

use tierpool::AllocError;

/// A message longer than the limit (checked before any memory is taken).
pub(crate) fn too_large(len: usize, max: usize) -> Status {
    Status::resource_exhausted(format!(
        "a message of {len} bytes exceeds the limit of {max} bytes"
    ))
}

/// The pool could not give a buffer: an impossible size, the allocator's refusal, or a budget
/// that can never hold it.
pub(crate) fn from_alloc(e: AllocError) -> Status {
    Status::resource_exhausted(format!("no buffer for the message: {e}"))
}
