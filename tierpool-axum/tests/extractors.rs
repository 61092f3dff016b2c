//! The extractors and the layer in a real axum router: bodies and JSON as axum's own
//! extractors give them, axum's `DefaultBodyLimit` honoured (a declared length over it
//! refused before the body is read), the statuses of axum's rejections, the layer's bodies
//! taken by the extractors without a second read, and every buffer back.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::extract::DefaultBodyLimit;
use axum::http::{Request, StatusCode};
use axum::routing::post;
use axum::Router;
use http_body::{Frame, SizeHint};
use http_body_util::BodyExt;
use tierpool::BufferPool;
use tierpool_axum::{PooledBody, PooledBodyLayer, PooledJson};
use tower::ServiceExt;

fn pool() -> BufferPool {
    BufferPool::builder()
        .max_in_use_bytes(64 << 20)
        .build()
        .unwrap()
}

fn in_use(pool: &BufferPool) -> usize {
    pool.stats().budget.unwrap().in_use_bytes
}

async fn len_and_crc(PooledBody(body): PooledBody) -> String {
    let mut crc = crc32fast::Hasher::new();
    body.parts().for_each(|p| crc.update(p));
    format!("{} {}", body.len(), crc.finalize())
}

#[derive(serde::Deserialize)]
struct Order {
    id: u64,
    items: Vec<String>,
}

async fn order(PooledJson(o): PooledJson<Order>) -> String {
    format!("{} {}", o.id, o.items.len())
}

fn app(pool: &BufferPool) -> Router {
    Router::new()
        .route("/upload", post(len_and_crc))
        .route("/order", post(order))
        .route(
            "/echo",
            post(|PooledBody(b): PooledBody| async move { PooledBody(b) }),
        )
        .with_state(pool.clone())
}

async fn send(
    app: Router,
    path: &str,
    content_type: Option<&str>,
    body: Body,
) -> (StatusCode, String) {
    let (status, bytes) = send_bytes(app, path, content_type, body).await;
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

async fn send_bytes(
    app: Router,
    path: &str,
    content_type: Option<&str>,
    body: Body,
) -> (StatusCode, Bytes) {
    let mut req = Request::post(path);
    if let Some(ct) = content_type {
        req = req.header("content-type", ct);
    }
    let resp = app.oneshot(req.body(body).unwrap()).await.unwrap();
    let status = resp.status();
    (status, resp.into_body().collect().await.unwrap().to_bytes())
}

/// A body of `total` bytes in `piece`-byte frames that declares `declared` (or nothing), and
/// counts its polls.
struct Counted {
    left: usize,
    piece: usize,
    declared: Option<u64>,
    polls: Arc<AtomicUsize>,
}

impl http_body::Body for Counted {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.polls.fetch_add(1, Ordering::SeqCst);
        if self.left == 0 {
            return Poll::Ready(None);
        }
        let n = self.piece.min(self.left);
        self.left -= n;
        Poll::Ready(Some(Ok(Frame::data(Bytes::from(vec![7u8; n])))))
    }

    fn size_hint(&self) -> SizeHint {
        self.declared
            .map_or_else(SizeHint::new, SizeHint::with_exact)
    }
}

fn counted(total: usize, declared: bool) -> (Body, Arc<AtomicUsize>) {
    let polls = Arc::new(AtomicUsize::new(0));
    let body = Counted {
        left: total,
        piece: 16_384,
        declared: declared.then_some(total as u64),
        polls: polls.clone(),
    };
    (Body::new(body), polls)
}

#[tokio::test]
async fn a_body_is_read_whole_and_its_buffers_go_back() {
    let pool = pool();
    let data: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
    let (status, text) = send(app(&pool), "/upload", None, Body::from(data.clone())).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(text, format!("{} {}", data.len(), crc32fast::hash(&data)));
    let (status, echoed) = send_bytes(app(&pool), "/echo", None, Body::from(data.clone())).await;
    assert_eq!(status, StatusCode::OK);
    assert!(echoed == data, "the echo differs");
    assert_eq!(in_use(&pool), 0);
}

#[tokio::test]
async fn the_default_body_limit_is_honoured_and_a_declared_length_over_it_is_never_read() {
    let pool = pool();
    // axum's default: 2 MiB.
    let (body, polls) = counted(3 << 20, true);
    let (status, _) = send(app(&pool), "/upload", None, body).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(
        polls.load(Ordering::SeqCst),
        0,
        "refused before it was read"
    );
    // Of unknown length: cut at the limit.
    let (body, polls) = counted(3 << 20, false);
    let (status, _) = send(app(&pool), "/upload", None, body).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    let read = polls.load(Ordering::SeqCst);
    assert!(read <= (2 << 20) / 16_384 + 2, "{read} frames read");
    // A router's own limit, and none.
    let limited = app(&pool).layer(DefaultBodyLimit::max(100_000));
    let (status, _) = send(limited, "/upload", None, counted(100_001, true).0).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    let unlimited = app(&pool).layer(DefaultBodyLimit::disable());
    let (status, text) = send(unlimited, "/upload", None, counted(5 << 20, true).0).await;
    assert_eq!(
        (status, text.split(' ').next()),
        (StatusCode::OK, Some("5242880"))
    );
    assert_eq!(in_use(&pool), 0);
}

#[tokio::test]
async fn json_answers_as_axums_json_does() {
    let pool = pool();
    let json = "application/json";
    let good = r#"{"id": 7, "items": ["a", "b", "c"]}"#;
    let (status, text) = send(app(&pool), "/order", Some(json), Body::from(good)).await;
    assert_eq!((status, text.as_str()), (StatusCode::OK, "7 3"));
    // A long one, over several pooled buffers.
    let items: Vec<String> = (0..5000).map(|i| format!("\"item {i}\"")).collect();
    let long = format!(r#"{{"id": 8, "items": [{}]}}"#, items.join(","));
    let (status, text) = send(
        app(&pool),
        "/order",
        Some("application/vnd.x+json"),
        Body::from(long),
    )
    .await;
    assert_eq!((status, text.as_str()), (StatusCode::OK, "8 5000"));
    let cases = [
        (None, good, StatusCode::UNSUPPORTED_MEDIA_TYPE),
        (Some("text/plain"), good, StatusCode::UNSUPPORTED_MEDIA_TYPE),
        (Some(json), "{not json", StatusCode::BAD_REQUEST),
        (
            Some(json),
            r#"{"id": "seven"}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
    ];
    for (ct, body, want) in cases {
        let (status, text) = send(app(&pool), "/order", ct, Body::from(body)).await;
        assert_eq!(status, want, "{ct:?} {body}: {text}");
    }
    assert_eq!(in_use(&pool), 0);
}

#[tokio::test]
async fn the_layer_reads_every_body_into_the_pool_and_the_extractors_take_it_as_it_is() {
    let pool = pool();
    let plain = Router::new()
        .route("/len", post(|b: Bytes| async move { b.len().to_string() }))
        .route("/upload", post(len_and_crc))
        .with_state(pool.clone())
        .layer(PooledBodyLayer::new(pool.clone()).limit(1 << 20));
    let (status, text) = send(plain.clone(), "/len", None, Body::from(vec![1u8; 300_000])).await;
    assert_eq!((status, text.as_str()), (StatusCode::OK, "300000"));
    let gets = pool.stats().gets;
    let (status, _) = send(
        plain.clone(),
        "/upload",
        None,
        Body::from(vec![1u8; 300_000]),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let per_body = pool.stats().gets - gets;
    assert!(
        per_body < 20,
        "{per_body} gets: the extractor read the body again"
    );
    let (status, _) = send(plain, "/len", None, counted(2 << 20, true).0).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(in_use(&pool), 0);
}
