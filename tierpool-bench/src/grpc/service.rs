//! The benchmark service's methods, once for both modes, and the server.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use tierpool_tonic::{PooledMethods, PooledStreaming};
use tonic::{Request, Response, Status, Streaming};

use super::messages::{Payload, SimpleRequest, SimpleResponse};
use super::{pooled, stock, BOTH_WAYS, FROM_CLIENT, STREAMING, UNARY};

/// The largest `response_size` answered: tonic's default receive limit.
pub const MAX_RESPONSE: usize = 4 << 20;

/// The zeros every response's payload is a view of.
static ZEROS: [u8; MAX_RESPONSE] = [0; MAX_RESPONSE];

/// Which server runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Plain tonic with its own prost codec.
    Stock,
    /// Every method through tierpool-tonic.
    Pooled,
}

impl Mode {
    /// The mode's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Stock => "stock",
            Mode::Pooled => "pooled",
        }
    }
}

/// How the pooled mode serves `UnaryCall`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Unary {
    /// Through the generated service and `PooledCodec`: tonic reads the request into its own
    /// buffer and the codec copies it into a pooled one (two copies).
    #[default]
    Codec,
    /// Through `PooledMethods::unary`: the pooled reader copies the request from h2's frames
    /// into a pooled buffer (one copy).
    Reader,
}

/// Requests the server has received, every method together.
#[derive(Debug, Default)]
pub struct Served {
    /// Request messages received.
    pub requests: AtomicU64,
}

type Responses = Pin<Box<dyn Stream<Item = Result<SimpleResponse, Status>> + Send>>;

/// The answer to `request`: `response_size` zero bytes.
fn answer(request: &SimpleRequest) -> Result<SimpleResponse, Status> {
    let size = usize::try_from(request.response_size)
        .ok()
        .filter(|&n| n <= MAX_RESPONSE)
        .ok_or_else(|| {
            Status::invalid_argument(format!(
                "response_size {} is not within 0..={MAX_RESPONSE}",
                request.response_size
            ))
        })?;
    Ok(SimpleResponse {
        payload: Some(Payload {
            r#type: 0,
            body: Bytes::from_static(&ZEROS[..size]),
        }),
    })
}

/// The methods, over any stream of requests (tonic's `Streaming`, or the pooled `Decoded`).
#[derive(Debug, Clone, Default)]
struct Bench {
    served: Arc<Served>,
}

impl Bench {
    fn count(&self) {
        self.served.requests.fetch_add(1, Ordering::Relaxed);
    }

    /// `StreamingCall`: an answer to each request, in turn.
    fn ping_pong<S>(&self, requests: S) -> Responses
    where
        S: Stream<Item = Result<SimpleRequest, Status>> + Send + 'static,
    {
        let bench = self.clone();
        Box::pin(requests.map(move |r| {
            bench.count();
            r.and_then(|r| answer(&r))
        }))
    }

    /// `StreamingFromClient`: one answer, to the last request, once the requests end.
    async fn upload<S>(&self, requests: S) -> Result<SimpleResponse, Status>
    where
        S: Stream<Item = Result<SimpleRequest, Status>>,
    {
        let mut requests = std::pin::pin!(requests);
        let mut last = SimpleRequest::default();
        while let Some(r) = requests.next().await {
            self.count();
            last = r?;
        }
        answer(&last)
    }

    /// `StreamingFromServer`: answers to the one request until the client goes.
    fn download(&self, request: SimpleRequest) -> Result<Responses, Status> {
        self.count();
        let response = answer(&request)?;
        Ok(Box::pin(futures_util::stream::repeat_with(move || {
            Ok(response.clone())
        })))
    }

    /// `StreamingBothWays`: answers to the first request sent until the requests end, which are
    /// read meanwhile, as grpc-go's benchmark server does.
    async fn both_ways<S>(&self, requests: S) -> Result<Responses, Status>
    where
        S: Stream<Item = Result<SimpleRequest, Status>> + Send + 'static,
    {
        let mut requests = Box::pin(requests);
        let first = requests
            .next()
            .await
            .ok_or_else(|| Status::invalid_argument("no request"))??;
        self.count();
        let response = answer(&first)?;
        let done = Arc::new(AtomicBool::new(false));
        let bench = self.clone();
        let finished = done.clone();
        tokio::spawn(async move {
            while let Some(Ok(_)) = requests.next().await {
                bench.count();
            }
            finished.store(true, Ordering::Relaxed);
        });
        Ok(Box::pin(
            futures_util::stream::repeat_with(move || response.clone())
                .take_while(move |_| std::future::ready(!done.load(Ordering::Relaxed)))
                .map(Ok),
        ))
    }
}

#[tonic::async_trait]
impl stock::benchmark_service_server::BenchmarkService for Bench {
    async fn unary_call(
        &self,
        request: Request<SimpleRequest>,
    ) -> Result<Response<SimpleResponse>, Status> {
        self.count();
        answer(&request.into_inner()).map(Response::new)
    }

    type StreamingCallStream = Responses;

    async fn streaming_call(
        &self,
        request: Request<Streaming<SimpleRequest>>,
    ) -> Result<Response<Responses>, Status> {
        Ok(Response::new(self.ping_pong(request.into_inner())))
    }

    async fn streaming_from_client(
        &self,
        request: Request<Streaming<SimpleRequest>>,
    ) -> Result<Response<SimpleResponse>, Status> {
        self.upload(request.into_inner()).await.map(Response::new)
    }

    type StreamingFromServerStream = Responses;

    async fn streaming_from_server(
        &self,
        request: Request<SimpleRequest>,
    ) -> Result<Response<Responses>, Status> {
        self.download(request.into_inner()).map(Response::new)
    }

    type StreamingBothWaysStream = Responses;

    async fn streaming_both_ways(
        &self,
        request: Request<Streaming<SimpleRequest>>,
    ) -> Result<Response<Responses>, Status> {
        self.both_ways(request.into_inner())
            .await
            .map(Response::new)
    }
}

/// The pooled service as generated (its codec `PooledCodec`): the unary and server-streaming
/// methods; `PooledMethods` serves the others, so these three are never called.
#[tonic::async_trait]
impl pooled::benchmark_service_server::BenchmarkService for Bench {
    async fn unary_call(
        &self,
        request: Request<SimpleRequest>,
    ) -> Result<Response<SimpleResponse>, Status> {
        self.count();
        answer(&request.into_inner()).map(Response::new)
    }

    type StreamingCallStream = Responses;

    async fn streaming_call(
        &self,
        _: Request<Streaming<SimpleRequest>>,
    ) -> Result<Response<Responses>, Status> {
        Err(Status::internal("served through PooledMethods"))
    }

    async fn streaming_from_client(
        &self,
        _: Request<Streaming<SimpleRequest>>,
    ) -> Result<Response<SimpleResponse>, Status> {
        Err(Status::internal("served through PooledMethods"))
    }

    type StreamingFromServerStream = Responses;

    async fn streaming_from_server(
        &self,
        request: Request<SimpleRequest>,
    ) -> Result<Response<Responses>, Status> {
        self.download(request.into_inner()).map(Response::new)
    }

    type StreamingBothWaysStream = Responses;

    async fn streaming_both_ways(
        &self,
        _: Request<Streaming<SimpleRequest>>,
    ) -> Result<Response<Responses>, Status> {
        Err(Status::internal("served through PooledMethods"))
    }
}

/// Serves the benchmark service in `mode` on `listener` until `shutdown` completes, counting
/// requests into `served`. The pooled mode uses the process-wide pool
/// (`tierpool::default_pool()`, which trims in the background) and serves `UnaryCall` as
/// `unary` says (the stock mode ignores it). With `budget_windows` (the default pool has a
/// budget), HTTP/2's windows are set for it.
pub async fn serve(
    listener: tokio::net::TcpListener,
    mode: Mode,
    unary: Unary,
    budget_windows: bool,
    served: Arc<Served>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    let bench = Bench { served };
    let mut server = tonic::transport::Server::builder();
    if budget_windows {
        // Under a budget a stream may wait for room with its frames queued in h2, which also
        // count against the connection's window: 200 streams of 256 KiB cannot fill 64 MiB,
        // so a waiting stream never holds the window an admitted one needs.
        server = server
            .max_concurrent_streams(200)
            .initial_stream_window_size(256 << 10)
            .initial_connection_window_size(64 << 20);
    }
    match mode {
        Mode::Stock => {
            let service = stock::benchmark_service_server::BenchmarkServiceServer::new(bench);
            server
                .add_service(service)
                .serve_with_incoming_shutdown(incoming, shutdown)
                .await?;
        }
        Mode::Pooled => {
            let pool = tierpool::default_pool().clone();
            let generated =
                pooled::benchmark_service_server::BenchmarkServiceServer::new(bench.clone());
            let (b1, b2, b3, b4) = (bench.clone(), bench.clone(), bench.clone(), bench);
            let mut service = PooledMethods::new(generated, pool)
                .streaming(STREAMING, move |r: PooledStreaming<SimpleRequest>| {
                    let responses = b1.ping_pong(r.into_inner());
                    async move { Ok(Response::new(responses)) }
                })?
                .streaming(FROM_CLIENT, move |r: PooledStreaming<SimpleRequest>| {
                    let bench = b2.clone();
                    async move {
                        let one = bench.upload(r.into_inner()).await?;
                        Ok(Response::new(futures_util::stream::iter([Ok(one)])))
                    }
                })?
                .streaming(BOTH_WAYS, move |r: PooledStreaming<SimpleRequest>| {
                    let bench = b3.clone();
                    async move { bench.both_ways(r.into_inner()).await.map(Response::new) }
                })?;
            if unary == Unary::Reader {
                service = service.unary(UNARY, move |r: Request<SimpleRequest>| {
                    b4.count();
                    std::future::ready(answer(r.get_ref()).map(Response::new))
                })?;
            }
            server
                .add_service(service)
                .serve_with_incoming_shutdown(incoming, shutdown)
                .await?;
        }
    }
    Ok(())
}
