//! Compressed messages: which encoding a stream uses, and decompression into pooled memory
//! bounded by the message limit.

use std::io::Read;

use http::HeaderMap;
use tonic::Status;

use crate::status;
use tierpool::{BufferPool, PooledBuf};

/// The header that names a stream's message encoding.
pub(crate) const ENCODING_HEADER: &str = "grpc-encoding";
/// The header that lists the encodings a peer accepts.
pub(crate) const ACCEPT_ENCODING_HEADER: &str = "grpc-accept-encoding";
/// What the pooled path accepts, as `grpc-accept-encoding` says it.
pub(crate) const ACCEPTED: &str = "gzip,identity";

/// A message encoding the pooled path decompresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Encoding {
    /// `gzip`, as tonic's `CompressionEncoding::Gzip` and gRPC's other stacks send it.
    Gzip,
}

/// The encoding `headers` name: `None` for none or `identity`.
///
/// # Errors
/// `UNIMPLEMENTED` for an encoding the pooled path does not decompress.
pub(crate) fn from_headers(headers: &HeaderMap) -> Result<Option<Encoding>, Status> {
    let Some(value) = headers.get(ENCODING_HEADER) else {
        return Ok(None);
    };
    match value.as_bytes() {
        b"identity" => Ok(None),
        b"gzip" => Ok(Some(Encoding::Gzip)),
        other => Err(Status::unimplemented(format!(
            "message encoding {:?} is not supported (supported: {ACCEPTED})",
            String::from_utf8_lossy(other)
        ))),
    }
}

/// `compressed` decompressed into a pooled buffer that grows (geometrically) with the output,
/// never past `max` bytes: a decompression bomb is `RESOURCE_EXHAUSTED` once its output
/// passes the limit, having written at most one byte past it. The output's buffers are taken
/// without waiting: under a budget with no room for them now, the message is
/// `RESOURCE_EXHAUSTED` (its compressed payload already holds its share of the budget).
pub(crate) fn decompress(
    encoding: Encoding,
    compressed: &[u8],
    pool: &BufferPool,
    max: usize,
) -> Result<PooledBuf, Status> {
    let Encoding::Gzip = encoding;
    let mut decoder = flate2::read::GzDecoder::new(compressed);
    // A first guess of four times the compressed size (gzip's usual ratio on protobuf is
    // two to four), then doubling.
    let first = compressed.len().saturating_mul(4).clamp(64, max.max(64));
    let mut out = pool.try_get_exact(first).map_err(status::from_alloc)?;
    // `out` is kept zeroed up to its capacity (once per buffer), `filled` bytes of it written.
    // Never more than one byte past the limit is written, whatever the tier's slack.
    let cap = out.capacity().min(max + 1);
    out.resize(cap, 0);
    let mut filled = 0;
    loop {
        if filled == out.len() {
            if filled > max {
                return Err(status::too_large(filled, max));
            }
            // One byte past the limit is enough to tell that the output exceeds it.
            let size = (2 * filled).min(max + 1).max(filled + 1);
            let mut bigger = pool.try_get_exact(size).map_err(status::from_alloc)?;
            bigger.extend_from_slice(&out);
            let cap = bigger.capacity().min(max + 1);
            bigger.resize(cap, 0);
            out = bigger;
        }
        match decoder.read(&mut out[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) => {
                return Err(Status::internal(format!(
                    "could not decompress a gzip message: {e}"
                )))
            }
        }
    }
    if filled > max {
        return Err(status::too_large(filled, max));
    }
    out.truncate(filled);
    Ok(out)
}
