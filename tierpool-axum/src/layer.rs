//! [`PooledBodyLayer`]: every request body of a router read into pooled memory before its
//! handler runs.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum_core::extract::Request;
use axum_core::response::{IntoResponse, Response};
use tierpool::{BufferPool, PooledChain};
use tower_layer::Layer;
use tower_service::Service;

use crate::body::{chain_body, collect};
use crate::limit::body_limit;

/// A tower layer that reads every request body into pooled memory before the service runs,
/// under a limit and the pool's budget (as [`collect_body`](tierpool::io::collect_body) does): for services that do not
/// use [`PooledBody`](crate::PooledBody) and [`PooledJson`](crate::PooledJson), so that no
/// upload of the router escapes the budget.
///
/// The service sees the body as it would have arrived, one data frame per pooled buffer (each
/// a `Bytes` view, no copy); a [`PooledBody`](crate::PooledBody) or
/// [`PooledJson`](crate::PooledJson) extractor takes the buffers themselves, without reading
/// them again. axum's `Bytes` and `Json` extractors join the frames into one heap `Bytes`
/// when there is more than one: with this layer, a handler that keeps large bodies uses the
/// pooled extractors.
///
/// A body over the limit is answered with 413 before the service runs; a body that fails to
/// arrive with 400. The limit is [`limit`](Self::limit)'s, else the router's
/// `DefaultBodyLimit` (2 MiB by default). Nothing waits for ever for room in the budget but by
/// the admission rule; a service that wants to refuse after a while adds a timeout layer
/// (`tower_http::timeout::TimeoutLayer`) outside this one.
///
/// ```
/// use axum::{body::Bytes, routing::post, Router};
/// use tierpool_axum::PooledBodyLayer;
///
/// let pool = tierpool::BufferPool::builder().max_in_use_bytes(64 << 20).build()?;
/// let app: Router = Router::new()
///     .route("/upload", post(|body: Bytes| async move { body.len().to_string() }))
///     .layer(PooledBodyLayer::new(pool).limit(16 << 20));
/// # Ok::<(), tierpool::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct PooledBodyLayer {
    pool: BufferPool,
    limit: Option<usize>,
}

impl PooledBodyLayer {
    /// Bodies into `pool`'s buffers, under the router's `DefaultBodyLimit`.
    pub fn new(pool: BufferPool) -> Self {
        PooledBodyLayer { pool, limit: None }
    }

    /// Refuses bodies longer than `bytes` (in place of the router's `DefaultBodyLimit`).
    pub fn limit(mut self, bytes: usize) -> Self {
        self.limit = Some(bytes);
        self
    }
}

impl fmt::Debug for PooledBodyLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PooledBodyLayer")
            .field("pool", &self.pool.name())
            .field("limit", &self.limit)
            .finish()
    }
}

impl<S> Layer<S> for PooledBodyLayer {
    type Service = PooledBodies<S>;

    fn layer(&self, inner: S) -> PooledBodies<S> {
        PooledBodies {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service [`PooledBodyLayer`] makes.
#[derive(Clone)]
pub struct PooledBodies<S> {
    inner: S,
    layer: PooledBodyLayer,
}

impl<S> fmt::Debug for PooledBodies<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PooledBodies")
            .field("layer", &self.layer)
            .finish_non_exhaustive()
    }
}

/// The buffers a request's body was read into, for the pooled extractors to take.
#[derive(Clone, Debug)]
pub(crate) struct Collected(pub(crate) PooledChain);

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S> Service<Request> for PooledBodies<S>
where
    S: Service<Request, Response = Response> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = S::Error;
    type Future = BoxFuture<Result<Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        // The service polled ready is the one called; a clone takes its place.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let pool = self.layer.pool.clone();
        let own_limit = self.layer.limit;
        Box::pin(async move {
            let (router_limit, req) = body_limit(req);
            let (parts, body) = req.into_parts();
            let limit = own_limit.or(router_limit).unwrap_or(usize::MAX);
            match collect(body, &pool, limit).await {
                Ok(chain) => {
                    let mut req = Request::from_parts(parts, chain_body(chain.clone()));
                    req.extensions_mut().insert(Collected(chain));
                    inner.call(req).await
                }
                Err(rejection) => Ok(rejection.into_response()),
            }
        })
    }
}
