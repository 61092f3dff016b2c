//! The body limit axum's `DefaultBodyLimit` sets on a request, read through axum's own API.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum_core::body::Body;
use axum_core::extract::Request;
use axum_core::RequestExt;
use bytes::Bytes;
use http_body::{Body as _, Frame, SizeHint};

/// The body limit in force for `req` (`None`: `DefaultBodyLimit::disable()`), and `req`.
///
/// axum keeps the limit private and applies it with `RequestExt::with_limited_body`, which
/// wraps the body in `http_body_util::Limited`, whose size hint for a body of unknown length
/// has the limit as its upper bound. So the limit is read by applying it to a stand-in body
/// of unknown length; the real body is then read under that limit by `collect_body`, which
/// refuses a declared length over it before reading anything (`Limited` would read up to the
/// limit first).
pub(crate) fn body_limit(req: Request) -> (Option<usize>, Request) {
    let (parts, body) = req.into_parts();
    let probe = Request::from_parts(parts, Body::new(Unknown)).with_limited_body();
    let limit = probe
        .body()
        .size_hint()
        .upper()
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX));
    let (parts, _) = probe.into_parts();
    (limit, Request::from_parts(parts, body))
}

/// A body of unknown length with nothing in it.
struct Unknown;

impl http_body::Body for Unknown {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(None)
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::new()
    }
}
