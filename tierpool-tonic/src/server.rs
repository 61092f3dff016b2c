//! [`PooledMethods`]: a generated tonic service with some of its streaming methods served
//! through the pooled reader and body, inside a `tonic::transport::Server`.

use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_core::Stream;
use http::header::CONTENT_TYPE;
use http::HeaderValue;
use tonic::body::Body;
use tonic::server::NamedService;
use tonic::{Request, Response, Status};
use tower_service::Service;

use crate::body::EncodeBody;
use crate::compression::{ACCEPTED, ACCEPT_ENCODING_HEADER};
use crate::decoded::Decoded;
use crate::reader::{MessageReader, DEFAULT_MAX_MESSAGE_SIZE};
use tierpool::BufferPool;

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;
type Handler = Arc<dyn Fn(http::Request<Body>) -> BoxFuture<http::Response<Body>> + Send + Sync>;

/// The request a pooled streaming handler receives: its messages, read into pooled memory.
pub type PooledStreaming<Req> = Request<Decoded<Req, Body>>;

/// A tonic service (a generated `FooServer`, say) with some of its methods (client-streaming
/// and bidi with [`streaming`](Self::streaming), unary with [`unary`](Self::unary)) served by
/// handlers of your own through the pooled path: requests read by a
/// [`MessageReader`] (nothing held between messages), responses sent by an [`EncodeBody`]
/// (each batch in a pooled buffer until h2 has written it). Every other method goes to the
/// service unchanged, and the whole is one service for `tonic::transport::Server::add_service`
/// (it keeps the service's name).
///
/// ```ignore
/// let echo = EchoServer::new(MyEcho::default()); // generated with codec_path = PooledCodec
/// let echo = PooledMethods::new(echo, pool.clone())
///     .streaming("/echo.Echo/Chat", move |request: PooledStreaming<Ping>| async move {
///         let mut pings = request.into_inner();
///         let pongs = async_stream::try_stream! {
///             while let Some(ping) = pings.message().await? { yield Pong { data: ping.data } }
///         };
///         Ok(tonic::Response::new(pongs))
///     })?; // a path outside `echo.Echo` is refused here
/// Server::builder().add_service(echo).serve(addr).await?;
/// ```
///
/// A path is refused when its handler is registered unless it names a method of the wrapped
/// service (`/{NamedService::NAME}/{Method}`): a request for a method of another service would
/// never reach this service, and its handler would never run. tonic does not list a generated
/// service's methods, so a misspelled method of the right service is not caught: its requests
/// are answered `UNIMPLEMENTED` by the generated service, as they would be without the
/// wrapper.
///
/// A handler's stream may end with an error: the response's trailers carry its status. A
/// handler that returns an error before any message answers with that status alone.
pub struct PooledMethods<S> {
    inner: S,
    pool: BufferPool,
    max_message: usize,
    methods: Arc<Vec<(&'static str, Handler)>>,
}

impl<S: Clone> Clone for PooledMethods<S> {
    fn clone(&self) -> Self {
        PooledMethods {
            inner: self.inner.clone(),
            pool: self.pool.clone(),
            max_message: self.max_message,
            methods: Arc::clone(&self.methods),
        }
    }
}

impl<S> fmt::Debug for PooledMethods<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let paths: Vec<&str> = self.methods.iter().map(|(p, _)| *p).collect();
        f.debug_struct("PooledMethods")
            .field("pool", &self.pool.name())
            .field("max_message", &self.max_message)
            .field("methods", &paths)
            .finish_non_exhaustive()
    }
}

impl<S> PooledMethods<S> {
    /// `inner` with no method taken over yet; pooled handlers take buffers from `pool`.
    pub fn new(inner: S, pool: BufferPool) -> Self {
        PooledMethods {
            inner,
            pool,
            max_message: DEFAULT_MAX_MESSAGE_SIZE,
            methods: Arc::new(Vec::new()),
        }
    }

    /// The largest request message the pooled handlers accept (default 4 MiB, tonic's).
    /// Set it before adding the methods it applies to.
    pub fn max_message_size(mut self, max: usize) -> Self {
        self.max_message = max;
        self
    }

    /// Serves the method at `path` (`"/package.Service/Method"`) with `handler`: given the
    /// request's messages, it answers with a stream of responses (a client-streaming method's
    /// stream has one). Replaces an earlier handler for the same path.
    ///
    /// # Errors
    /// [`MethodPathError`] if `path` is not `/{S::NAME}/{Method}` for a non-empty method
    /// name: a method of another service (or a malformed path) that this service would never
    /// be asked for.
    pub fn streaming<Req, Resp, F, Fut, St>(
        mut self,
        path: &'static str,
        handler: F,
    ) -> Result<Self, MethodPathError>
    where
        S: NamedService,
        Req: prost::Message + Default + Send + 'static,
        Resp: prost::Message + Send + 'static,
        F: Fn(PooledStreaming<Req>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Response<St>, Status>> + Send + 'static,
        St: Stream<Item = Result<Resp, Status>> + Send + 'static,
    {
        check_path::<S>(path)?;
        let pool = self.pool.clone();
        let max = self.max_message;
        let handler = Arc::new(handler);
        let serve: Handler = Arc::new(move |request: http::Request<Body>| {
            let (parts, body) = request.into_parts();
            let reader = match MessageReader::for_headers(body, pool.clone(), &parts.headers) {
                Ok(reader) => reader.max_message_size(max),
                Err(status) => return Box::pin(std::future::ready(status_only(status))),
            };
            let request = http::Request::from_parts(parts, Decoded::new(reader));
            let answer = handler(Request::from_http(request));
            let pool = pool.clone();
            Box::pin(async move {
                match answer.await {
                    Ok(response) => {
                        let (metadata, messages, extensions) = response.into_parts();
                        let body = Body::new(EncodeBody::response(messages, pool));
                        let mut response = http::Response::new(body);
                        *response.headers_mut() = metadata.into_headers();
                        *response.extensions_mut() = extensions;
                        grpc_headers(response.headers_mut());
                        response
                    }
                    Err(status) => status_only(status),
                }
            })
        });
        let methods = Arc::make_mut(&mut self.methods);
        methods.retain(|(p, _)| *p != path);
        methods.push((path, serve));
        Ok(self)
    }
}

/// A path given to [`PooledMethods`] that is not a method of the service it wraps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodPathError {
    path: &'static str,
    service: &'static str,
}

impl MethodPathError {
    /// The path refused.
    pub fn path(&self) -> &'static str {
        self.path
    }

    /// The wrapped service's name (`NamedService::NAME`).
    pub fn service(&self) -> &'static str {
        self.service
    }
}

impl fmt::Display for MethodPathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` is not a method of the wrapped service `{}`: PooledMethods serves paths \
             of the form `/{}/Method`",
            self.path, self.service, self.service
        )
    }
}

impl std::error::Error for MethodPathError {}

/// `path` is `/{S::NAME}/{Method}`, the method's name non-empty and without a `/`.
fn check_path<S: NamedService>(path: &'static str) -> Result<(), MethodPathError> {
    let method = path
        .strip_prefix('/')
        .and_then(|p| p.strip_prefix(S::NAME))
        .and_then(|p| p.strip_prefix('/'));
    match method {
        Some(m) if !m.is_empty() && !m.contains('/') => Ok(()),
        _ => Err(MethodPathError {
            path,
            service: S::NAME,
        }),
    }
}

impl<S> PooledMethods<S> {
    /// Serves the unary method at `path` with `handler`, through the same path as
    /// [`streaming`](Self::streaming): the request's message is read from h2's frames straight
    /// into a pooled buffer (copied once, as tonic copies it into its own buffer; through
    /// [`PooledCodec`](crate::PooledCodec) it is copied a second time, out of tonic's buffer)
    /// and decoded as `Req`, whose `Bytes` fields are views of that buffer; the response goes
    /// out from a pooled buffer. Replaces an earlier handler for the same path.
    ///
    /// As tonic does, the handler runs once the request has ended (its trailers, if any, are
    /// not merged into the request's metadata). A request without a message, or with more
    /// than one, is answered with `INTERNAL`.
    ///
    /// # Errors
    /// As [`streaming`](Self::streaming): a path outside the wrapped service.
    pub fn unary<Req, Resp, F, Fut>(
        self,
        path: &'static str,
        handler: F,
    ) -> Result<Self, MethodPathError>
    where
        S: NamedService,
        Req: prost::Message + Default + Send + 'static,
        Resp: prost::Message + Send + 'static,
        F: Fn(Request<Req>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Response<Resp>, Status>> + Send + 'static,
    {
        let handler = Arc::new(handler);
        self.streaming(path, move |request: PooledStreaming<Req>| {
            let handler = Arc::clone(&handler);
            async move {
                let (metadata, extensions, mut messages) = request.into_parts();
                let Some(message) = messages.message().await? else {
                    return Err(Status::internal("a unary request without a message"));
                };
                if messages.message().await?.is_some() {
                    return Err(Status::internal(
                        "a unary request with more than one message",
                    ));
                }
                drop(messages);
                let response = handler(Request::from_parts(metadata, extensions, message)).await?;
                Ok(response.map(|m| One(Some(Ok(m)))))
            }
        })
    }
}

/// A stream of one item: a unary method's response.
struct One<T>(Option<T>);

// Nothing is pinned inside: the item is moved out whole.
impl<T> Unpin for One<T> {}

impl<T> Stream for One<T> {
    type Item = T;

    fn poll_next(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<T>> {
        Poll::Ready(self.get_mut().0.take())
    }
}

/// A response of headers alone that carry `status` (gRPC's "trailers-only" response).
fn status_only(status: Status) -> http::Response<Body> {
    let mut response = status.into_http::<Body>();
    response
        .headers_mut()
        .insert(ACCEPT_ENCODING_HEADER, HeaderValue::from_static(ACCEPTED));
    response
}

/// The headers every gRPC response of the pooled path carries.
fn grpc_headers(headers: &mut http::HeaderMap) {
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    headers.insert(ACCEPT_ENCODING_HEADER, HeaderValue::from_static(ACCEPTED));
}

impl<S> Service<http::Request<Body>> for PooledMethods<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<http::Response<Body>, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let path = request.uri().path();
        match self.methods.iter().find(|(p, _)| *p == path) {
            Some((_, serve)) => {
                let answer = serve(request);
                Box::pin(async move { Ok(answer.await) })
            }
            None => Box::pin(self.inner.call(request)),
        }
    }
}

impl<S: NamedService> NamedService for PooledMethods<S> {
    const NAME: &'static str = S::NAME;
}
