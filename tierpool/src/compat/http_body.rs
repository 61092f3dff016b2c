//! The `http-body` integration (feature `http-body`): [`http_body::Body`] for [`PooledBytes`]
//! and for [`PooledChain`], so hyper can send pooled data as a request or response body
//! without copying it into a `Bytes` first. Each body is one data frame: the view itself
//! (`Data = PooledBytes`), or the whole chain (`Data = PooledChain`, whose `bytes::Buf` gives
//! every view to a vectored write at once: hyper's `writev` takes up to 64 slices, so a 1 MiB
//! chain of 16 KiB views needs one poll and one encode, where a frame per view costs a poll,
//! an encode and a queue entry each; requests/s in BENCHMARKS.md, `http`). Each buffer goes
//! back to its pool when the transport has written and dropped its last view.
//!
//! Stacks whose body type fixes `Data = Bytes` (axum's and tonic's `Body::new`) would copy a
//! chain of several views into one `Bytes` to take it as one frame; give them
//! [`PooledChain::into_view_frames`] instead, one frame per view, each converted to `Bytes`
//! without a copy (`http_body_util::BodyExt::map_frame(|f| f.map_data(Bytes::from))`).

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use http_body::{Body, Frame, SizeHint};

use crate::{PooledBytes, PooledChain};

/// A [`PooledChain`] as a body of one data frame per view (`Data = PooledBytes`), from
/// [`PooledChain::into_view_frames`]: for body types that need `Data = Bytes` (axum, tonic),
/// where each view becomes a `Bytes` without a copy.
#[derive(Debug, Default)]
#[cfg_attr(docsrs, doc(cfg(feature = "http-body")))]
pub struct ViewFrames(PooledChain);

impl PooledChain {
    /// This chain as a body of one data frame per view, for stacks whose body type needs
    /// `Data = Bytes` (each `PooledBytes` converts to `Bytes` without a copy; the chain's own
    /// body, one frame of the whole chain, would be copied into one `Bytes` there). With hyper
    /// directly, send the chain itself: one frame, one vectored write.
    ///
    /// ```
    /// use http_body::Body;
    ///
    /// let pool = tierpool::BufferPool::new();
    /// let mut chain = tierpool::PooledChain::new();
    /// for part in [&b"hello, "[..], b"world"] {
    ///     let mut b = pool.get(part.len());
    ///     b.extend_from_slice(part);
    ///     chain.push(b.into_shared());
    /// }
    /// let body = chain.into_view_frames();
    /// assert_eq!(body.size_hint().exact(), Some(12));
    /// // axum: axum::body::Body::new(http_body_util::BodyExt::map_frame(body, |f| f.map_data(bytes::Bytes::from)))
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "http-body")))]
    pub fn into_view_frames(self) -> ViewFrames {
        ViewFrames(self)
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "http-body")))]
impl Body for ViewFrames {
    type Data = PooledBytes;
    type Error = Infallible;

    /// One data frame per view, in order (no copy), then the end.
    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<PooledBytes>, Infallible>>> {
        Poll::Ready(self.get_mut().0.pop_front().map(|p| Ok(Frame::data(p))))
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.0.len() as u64)
    }
}

/// `Body` for a type that is its own single data frame: the whole of it, taken, then the
/// end (for [`PooledBytes`] and [`PooledChain`], which are `Default` when empty).
macro_rules! one_frame_body {
    ($t:ty, $what:literal) => {
        #[cfg_attr(docsrs, doc(cfg(feature = "http-body")))]
        impl Body for $t {
            type Data = $t;
            type Error = Infallible;

            #[doc = concat!("The whole ", $what, " as one data frame (no copy), then the end.")]
            fn poll_frame(
                self: Pin<&mut Self>,
                _cx: &mut Context<'_>,
            ) -> Poll<Option<Result<Frame<$t>, Infallible>>> {
                let this = self.get_mut();
                if this.is_empty() {
                    return Poll::Ready(None);
                }
                Poll::Ready(Some(Ok(Frame::data(std::mem::take(this)))))
            }

            fn is_end_stream(&self) -> bool {
                self.is_empty()
            }

            fn size_hint(&self) -> SizeHint {
                SizeHint::with_exact(self.len() as u64)
            }
        }
    };
}

one_frame_body!(PooledBytes, "view");
one_frame_body!(PooledChain, "chain");
