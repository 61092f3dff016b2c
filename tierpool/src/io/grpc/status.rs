//! The gRPC statuses the pooled path answers with, one place for each reason.

use std::io;

use tonic::Status;

use crate::AllocError;

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

/// A budget wait's error (an [`AllocError`] inside an `io::Error`, as `io` reports it).
pub(crate) fn from_io(e: io::Error) -> Status {
    match e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<AllocError>())
    {
        Some(alloc) => from_alloc(alloc.clone()),
        None => Status::resource_exhausted(e.to_string()),
    }
}
