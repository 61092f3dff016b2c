//! [`PooledJson`]: a JSON request body read into pooled memory and deserialized from there.

use std::fmt;
use std::io::Read;

use axum_core::extract::{FromRef, FromRequest, Request};
use axum_core::response::{IntoResponse, Response};
use http::header::CONTENT_TYPE;
use http::{HeaderMap, StatusCode};
use serde::de::DeserializeOwned;
use tierpool::BufferPool;

use crate::body::{read, BodyRejection};

/// A JSON request body: axum's `Json<T>` extractor, its body read as [`PooledBody`](crate::PooledBody)
/// reads it (into the router's pool, under the body limit and the pool's budget) and
/// deserialized from the pooled buffers. The buffers go back once `T` is built.
///
/// As axum's `Json`, it needs a `Content-Type` of `application/json` (or `+json`), and
/// answers a missing one with 415, malformed JSON with 400 and JSON of the wrong shape with
/// 422.
///
/// ```
/// use axum::{routing::post, Router};
/// use tierpool_axum::PooledJson;
///
/// #[derive(serde::Deserialize)]
/// struct Order { id: u64, items: Vec<String> }
///
/// async fn order(PooledJson(order): PooledJson<Order>) -> String {
///     format!("order {}: {} items", order.id, order.items.len())
/// }
///
/// let pool = tierpool::BufferPool::builder().max_in_use_bytes(64 << 20).build()?;
/// let app: Router = Router::new().route("/order", post(order)).with_state(pool);
/// # Ok::<(), tierpool::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct PooledJson<T>(pub T);

impl<T, S> FromRequest<S> for PooledJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
    BufferPool: FromRef<S>,
{
    type Rejection = JsonRejection;

    async fn from_request(req: Request, state: &S) -> Result<Self, JsonRejection> {
        if !json_content_type(req.headers()) {
            return Err(JsonRejection::MissingContentType);
        }
        let pool = BufferPool::from_ref(state);
        let body = read(req, &pool).await?;
        // One contiguous view: the body's own when it is one buffer, else a copy into one
        // (taken without waiting), else the buffers read in turn.
        let parsed = if body.num_parts() <= 1 {
            serde_json::from_slice(&body.contiguous(&pool))
        } else if let Ok(one) = body.try_materialize(&pool) {
            drop(body);
            serde_json::from_slice(&one)
        } else {
            serde_json::from_reader(body.take(u64::MAX))
        };
        parsed.map(PooledJson).map_err(JsonRejection::from)
    }
}

/// True if `headers` say the body is JSON (`application/json`, `application/*+json`).
fn json_content_type(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let mime = value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match mime.split_once('/') {
        Some(("application", sub)) => sub == "json" || sub.ends_with("+json"),
        _ => false,
    }
}

/// Why a [`PooledJson`] could not be extracted; each answers with the status axum's `Json`
/// gives the same failure.
#[derive(Debug)]
#[non_exhaustive]
pub enum JsonRejection {
    /// No `Content-Type: application/json`: `415 Unsupported Media Type`.
    MissingContentType,
    /// The body is not JSON: `400 Bad Request`.
    Syntax(serde_json::Error),
    /// JSON, but not a `T`: `422 Unprocessable Entity`.
    Data(serde_json::Error),
    /// The body could not be read ([`BodyRejection`]'s status).
    Body(BodyRejection),
}

impl From<BodyRejection> for JsonRejection {
    fn from(e: BodyRejection) -> Self {
        JsonRejection::Body(e)
    }
}

impl From<serde_json::Error> for JsonRejection {
    fn from(e: serde_json::Error) -> Self {
        match e.classify() {
            serde_json::error::Category::Data => JsonRejection::Data(e),
            _ => JsonRejection::Syntax(e),
        }
    }
}

impl JsonRejection {
    /// The status it answers with.
    pub fn status(&self) -> StatusCode {
        match self {
            JsonRejection::MissingContentType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            JsonRejection::Syntax(_) => StatusCode::BAD_REQUEST,
            JsonRejection::Data(_) => StatusCode::UNPROCESSABLE_ENTITY,
            JsonRejection::Body(e) => e.status(),
        }
    }
}

impl fmt::Display for JsonRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonRejection::MissingContentType => {
                f.write_str("expected a request with `Content-Type: application/json`")
            }
            JsonRejection::Syntax(e) => write!(f, "failed to parse the request body as JSON: {e}"),
            JsonRejection::Data(e) => {
                write!(
                    f,
                    "failed to deserialize the JSON body into the target type: {e}"
                )
            }
            JsonRejection::Body(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for JsonRejection {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            JsonRejection::MissingContentType => None,
            JsonRejection::Syntax(e) | JsonRejection::Data(e) => Some(e),
            JsonRejection::Body(e) => Some(e),
        }
    }
}

impl IntoResponse for JsonRejection {
    fn into_response(self) -> Response {
        (self.status(), self.to_string()).into_response()
    }
}
