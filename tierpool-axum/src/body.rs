//! [`PooledBody`]: a request's body read into pooled memory, under axum's body limit and the
//! pool's budget.

use std::fmt;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};

use axum_core::body::Body;
use axum_core::extract::{FromRef, FromRequest, Request};
use axum_core::response::{IntoResponse, Response};
use bytes::Bytes;
use http::StatusCode;
use http_body::Frame;
use http_body_util::{BodyExt, Full};
use tierpool::io::{collect_body, CollectError};
use tierpool::{AllocError, BufferPool, PooledChain};

use crate::layer::Collected;
use crate::limit::body_limit;

/// The whole body of a request, read into buffers from the router's [`BufferPool`]: axum's
/// `Bytes` extractor, pooled. It honours axum's
/// [`DefaultBodyLimit`](https://docs.rs/axum/0.8/axum/extract/struct.DefaultBodyLimit.html)
/// (2 MiB unless the router sets another), and with a budget on the pool
/// ([`Builder::max_in_use_bytes`](tierpool::Builder::max_in_use_bytes)) every body of the
/// router is read under it ([`collect_body`] says how: a body is admitted by the length it
/// declares and then never waits; its memory follows what arrived).
///
/// The pool comes from the router's state: `BufferPool: FromRef<S>` (the state is the pool,
/// or has a field for it and `#[derive(FromRef)]`).
///
/// ```
/// use axum::{routing::post, Router};
/// use tierpool_axum::PooledBody;
///
/// async fn upload(PooledBody(body): PooledBody) -> String {
///     format!("{} bytes in {} pooled buffers", body.len(), body.num_parts())
/// }
///
/// let pool = tierpool::BufferPool::builder().max_in_use_bytes(64 << 20).build()?;
/// let app: Router = Router::new().route("/upload", post(upload)).with_state(pool);
/// # Ok::<(), tierpool::ConfigError>(())
/// ```
///
/// The bytes are a [`PooledChain`] (one view when they fit one buffer): iterate its
/// [`parts`](PooledChain::parts), read it as a `bytes::Buf` or `std::io::Read`, or take one
/// contiguous view with [`PooledChain::contiguous`]. The buffers go back to the pool when the
/// chain is dropped. As a response, a `PooledBody` is sent from its buffers.
#[derive(Debug)]
pub struct PooledBody(pub PooledChain);

impl<S> FromRequest<S> for PooledBody
where
    S: Send + Sync,
    BufferPool: FromRef<S>,
{
    type Rejection = BodyRejection;

    async fn from_request(req: Request, state: &S) -> Result<Self, BodyRejection> {
        let pool = BufferPool::from_ref(state);
        read(req, &pool).await.map(PooledBody)
    }
}

/// Reads `req`'s body into `pool` under the router's body limit; takes the buffers a
/// [`PooledBodyLayer`](crate::PooledBodyLayer) read it into, if one did.
pub(crate) async fn read(
    mut req: Request,
    pool: &BufferPool,
) -> Result<PooledChain, BodyRejection> {
    if let Some(Collected(chain)) = req.extensions_mut().remove::<Collected>() {
        return Ok(chain);
    }
    let (limit, req) = body_limit(req);
    collect(req.into_body(), pool, limit.unwrap_or(usize::MAX)).await
}

/// Reads `body` into `pool` under `limit`; a body refused for its length is kept, unread,
/// for the answer to hold ([`Unread`]).
pub(crate) async fn collect(
    body: Body,
    pool: &BufferPool,
    limit: usize,
) -> Result<PooledChain, BodyRejection> {
    let mut collect = collect_body(body, pool, limit);
    match (&mut collect).await {
        Ok(chain) => Ok(chain),
        Err(CollectError::TooLarge { limit }) => Err(BodyRejection::TooLarge {
            limit,
            unread: Unread::keep(collect.into_body()),
        }),
        Err(e) => Err(BodyRejection::from(e)),
    }
}

/// The unread rest of a request body refused for its length, kept until the answer has been
/// sent: hyper's HTTP/2 server resets a stream whose request body is dropped before the
/// response is complete, and the client then loses the 413 it was sent. Opaque.
pub struct Unread(Mutex<Option<Body>>);

impl Unread {
    fn keep(body: Body) -> Self {
        Unread(Mutex::new(Some(body)))
    }

    fn none() -> Self {
        Unread(Mutex::new(None))
    }

    fn take(&self) -> Option<Body> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

impl fmt::Debug for Unread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Unread")
    }
}

impl IntoResponse for PooledBody {
    fn into_response(self) -> Response {
        chain_body(self.0).into_response()
    }
}

/// Why a [`PooledBody`] (or [`PooledJson`](crate::PooledJson)) could not be read: each
/// answers with the status axum's own extractors give the same failure.
#[derive(Debug)]
#[non_exhaustive]
pub enum BodyRejection {
    /// Longer than the body limit (declared so, before anything was read, or found so):
    /// `413 Payload Too Large`.
    TooLarge {
        /// The limit.
        limit: usize,
        /// The rest of the body, kept until the answer is sent.
        unread: Unread,
    },
    /// The body could not be read (the connection closed or reset mid-body, a length that
    /// does not match the declared one): `400 Bad Request`.
    Body(axum_core::Error),
    /// The pool could not hold it (a body larger than the whole budget could ever admit, an
    /// allocator's refusal): `503 Service Unavailable`.
    NoMemory(AllocError),
}

impl From<CollectError<axum_core::Error>> for BodyRejection {
    fn from(e: CollectError<axum_core::Error>) -> Self {
        match e {
            CollectError::TooLarge { limit } => BodyRejection::TooLarge {
                limit,
                unread: Unread::none(),
            },
            CollectError::Body(e) => BodyRejection::Body(e),
            CollectError::Alloc(e) => BodyRejection::NoMemory(e),
        }
    }
}

impl BodyRejection {
    /// The status it answers with.
    pub fn status(&self) -> StatusCode {
        match self {
            BodyRejection::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            BodyRejection::Body(_) => StatusCode::BAD_REQUEST,
            BodyRejection::NoMemory(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

impl fmt::Display for BodyRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BodyRejection::TooLarge { limit, .. } => {
                write!(
                    f,
                    "the request body is longer than the limit of {limit} bytes"
                )
            }
            BodyRejection::Body(e) => write!(f, "failed to read the request body: {e}"),
            BodyRejection::NoMemory(e) => write!(f, "no memory for the request body: {e}"),
        }
    }
}

impl std::error::Error for BodyRejection {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BodyRejection::TooLarge { .. } => None,
            BodyRejection::Body(e) => Some(e),
            BodyRejection::NoMemory(e) => Some(e),
        }
    }
}

impl IntoResponse for BodyRejection {
    fn into_response(self) -> Response {
        let text = Full::new(Bytes::from(self.to_string()));
        let unread = match &self {
            BodyRejection::TooLarge { unread, .. } => unread.take(),
            _ => None,
        };
        let body = match unread {
            Some(request) => Body::new(Keeping {
                text,
                _request: request,
            }),
            None => Body::new(text),
        };
        let mut response = (self.status(), body).into_response();
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        response
    }
}

/// A response body that keeps the request's body until it has been sent whole (dropped with
/// it, after the response's last frame).
struct Keeping {
    text: Full<Bytes>,
    _request: Body,
}

impl http_body::Body for Keeping {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.text).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.text.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.text.size_hint()
    }
}

/// A response body of a chain's views (no copy), for handlers that answer with pooled data.
pub(crate) fn chain_body(chain: PooledChain) -> Body {
    Body::new(
        chain
            .into_view_frames()
            .map_frame(|f| f.map_data(Bytes::from)),
    )
}
