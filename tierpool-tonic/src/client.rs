//! [`PooledClient`]: calls whose requests are sent by an [`EncodeBody`] and whose responses
//! are read by a [`MessageReader`], over any tonic channel.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_core::Stream;
use http::header::{CONTENT_TYPE, TE};
use http::uri::PathAndQuery;
use http::HeaderValue;
use http_body::Body as HttpBody;
use tonic::body::Body;
use tonic::client::GrpcService;
use tonic::metadata::MetadataMap;
use tonic::{Request, Response, Status};

use crate::body::EncodeBody;
use crate::compression::{ACCEPTED, ACCEPT_ENCODING_HEADER};
use crate::decoded::Decoded;
use crate::reader::{MessageReader, DEFAULT_MAX_MESSAGE_SIZE};
use tierpool::BufferPool;

/// A gRPC client over a tonic channel (`tonic::transport::Channel`, or any
/// [`GrpcService`]) whose calls send their requests from pooled buffers ([`EncodeBody`]) and
/// read their responses into pooled buffers ([`Decoded`]): a client reading a long
/// server-streaming or bidi response holds nothing between messages, where tonic's
/// `Streaming` keeps a buffer the size of the largest message for the stream's life.
///
/// One method serves every kind of call: a unary or server-streaming request is a stream of
/// one message.
#[derive(Clone)]
pub struct PooledClient<T> {
    inner: T,
    pool: BufferPool,
    max_message: usize,
}

impl<T> fmt::Debug for PooledClient<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PooledClient")
            .field("pool", &self.pool.name())
            .field("max_message", &self.max_message)
            .finish_non_exhaustive()
    }
}

impl<T> PooledClient<T>
where
    T: GrpcService<Body>,
    T::ResponseBody: HttpBody<Data = Bytes> + Unpin + Send + 'static,
    <T::ResponseBody as HttpBody>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    /// A client over `channel`, taking buffers from `pool`.
    pub fn new(channel: T, pool: BufferPool) -> Self {
        PooledClient {
            inner: channel,
            pool,
            max_message: DEFAULT_MAX_MESSAGE_SIZE,
        }
    }

    /// The largest response message accepted (default 4 MiB, tonic's).
    pub fn max_message_size(mut self, max: usize) -> Self {
        self.max_message = max;
        self
    }

    /// Calls the method at `path` (`"/package.Service/Method"`) with the request's messages;
    /// the response's messages arrive as they are read.
    ///
    /// # Errors
    /// The call's status when it fails before its response's headers: the channel's error
    /// (`UNAVAILABLE` and the like), a response that is not gRPC, or a status the server
    /// answered with alone. A status in the trailers ends the returned stream.
    pub async fn streaming<Req, Resp, S>(
        &mut self,
        path: &'static str,
        requests: Request<S>,
    ) -> Result<Response<Decoded<Resp, T::ResponseBody>>, Status>
    where
        Req: prost::Message + Send + 'static,
        Resp: prost::Message + Default,
        S: Stream<Item = Req> + Send + 'static,
    {
        let (metadata, extensions, messages) = requests.into_parts();
        let body = EncodeBody::request(Oks(Box::pin(messages)), self.pool.clone());
        let mut request = http::Request::new(Body::new(body));
        *request.uri_mut() = http::Uri::from(PathAndQuery::from_static(path));
        *request.method_mut() = http::Method::POST;
        *request.headers_mut() = metadata.into_headers();
        *request.extensions_mut() = extensions;
        let headers = request.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        headers.insert(TE, HeaderValue::from_static("trailers"));
        headers.insert(ACCEPT_ENCODING_HEADER, HeaderValue::from_static(ACCEPTED));

        std::future::poll_fn(|cx| self.inner.poll_ready(cx))
            .await
            .map_err(|e| Status::from_error(e.into()))?;
        let response = self
            .inner
            .call(request)
            .await
            .map_err(|e| Status::from_error(e.into()))?;
        let (parts, body) = response.into_parts();
        if parts.status != http::StatusCode::OK {
            return Err(from_http_status(parts.status));
        }
        if let Some(status) = Status::from_header_map(&parts.headers) {
            if status.code() != tonic::Code::Ok {
                return Err(status); // a response of headers alone
            }
        }
        let reader = MessageReader::for_headers(body, self.pool.clone(), &parts.headers)?
            .max_message_size(self.max_message)
            .response();
        Ok(Response::from_parts(
            MetadataMap::from_headers(parts.headers),
            Decoded::new(reader),
            parts.extensions,
        ))
    }
}

/// A response whose HTTP status is not 200: the gRPC code the spec maps it to.
fn from_http_status(status: http::StatusCode) -> Status {
    use tonic::Code;
    let code = match status.as_u16() {
        400 => Code::Internal,
        401 => Code::Unauthenticated,
        403 => Code::PermissionDenied,
        404 => Code::Unimplemented,
        429 | 502..=504 => Code::Unavailable,
        _ => Code::Unknown,
    };
    Status::new(
        code,
        format!("the server answered with HTTP status {status}"),
    )
}

/// A stream of requests as the `Result`s an [`EncodeBody`] sends.
struct Oks<S>(Pin<Box<S>>);

impl<S: Stream> Stream for Oks<S> {
    type Item = Result<S::Item, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.as_mut().poll_next(cx).map(|m| m.map(Ok))
    }
}
