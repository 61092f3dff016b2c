//! An upload service in two modes: `stock`, axum's own `Bytes` and `Json` extractors, and
//! `pooled`, the same handlers on `PooledBody` and `PooledJson` under one 64 MiB budget (the
//! port: the extractors' types and the router's state). HTTP/1.1 and HTTP/2 (prior
//! knowledge) on one port, 16 MiB per body in both modes.
//!
//! ```sh
//! cargo run --release -p tierpool-axum --example upload_server -- --addr 127.0.0.1:8080 --mode pooled
//! curl --data-binary @file http://127.0.0.1:8080/upload        # {"len":N,"crc32":C}
//! curl -H 'content-type: application/json' -d '{"a":1}' http://127.0.0.1:8080/json   # {"keys":1}
//! ```

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use serde_json::{json, Map, Value};
use tierpool::BufferPool;
use tierpool_axum::{PooledBody, PooledJson};
use tower_http::timeout::TimeoutLayer;

/// What can go wrong, reported as it is.
pub type Error = Box<dyn std::error::Error + Send + Sync>;

fn main() -> Result<(), Error> {
    run(std::env::args().skip(1))
}

/// Serves until killed, as the command line `args` say.
pub fn run(args: impl Iterator<Item = String>) -> Result<(), Error> {
    tokio::runtime::Runtime::new()?.block_on(serve(args.collect()))
}

async fn serve(args: Vec<String>) -> Result<(), Error> {
    let (mut addr, mut mode, mut budget_mib) = ("127.0.0.1:8080".to_string(), String::new(), 64);
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let value = args.next().ok_or(format!("{arg} needs a value"))?;
        match arg.as_str() {
            "--addr" => addr = value,
            "--mode" => mode = value,
            "--budget-mib" => budget_mib = value.parse()?,
            _ => return Err(format!("unknown option {arg}: --addr, --mode, --budget-mib").into()),
        }
    }
    let app = match mode.as_str() {
        "stock" => Router::new()
            .route("/upload", post(upload))
            .route("/json", post(keys)),
        "pooled" => {
            let pool = BufferPool::builder()
                .max_in_use_bytes(budget_mib << 20)
                .background_trim(true)
                .build()?;
            Router::new()
                .route("/upload", post(pooled_upload))
                .route("/json", post(pooled_keys))
                .with_state(pool)
        }
        _ => return Err("--mode stock|pooled".into()),
    };
    // A body that stops arriving is given up after a while (every buffer back).
    let app = app
        .layer(DefaultBodyLimit::max(16 << 20))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            Duration::from_secs(60),
        ));

    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("listening on {}", listener.local_addr()?);
    loop {
        let (socket, _) = listener.accept().await?;
        let service = TowerToHyperService::new(app.clone());
        tokio::spawn(async move {
            let mut builder = Builder::new(TokioExecutor::new());
            // A waiting stream queues at most 256 KiB in h2; 200 of them cannot hold the
            // connection's window against the streams the budget admitted.
            builder
                .http2()
                .max_concurrent_streams(200)
                .initial_stream_window_size(256 << 10)
                .initial_connection_window_size(64 << 20);
            let _ = builder
                .serve_connection(TokioIo::new(socket), service)
                .await;
        });
    }
}

async fn upload(body: Bytes) -> Json<Value> {
    Json(json!({ "len": body.len(), "crc32": crc32fast::hash(&body) }))
}

async fn keys(Json(object): Json<Map<String, Value>>) -> Json<Value> {
    Json(json!({ "keys": object.len() }))
}

async fn pooled_upload(PooledBody(body): PooledBody) -> Json<Value> {
    let mut crc = crc32fast::Hasher::new();
    body.parts().for_each(|part| crc.update(part));
    Json(json!({ "len": body.len(), "crc32": crc.finalize() }))
}

async fn pooled_keys(PooledJson(object): PooledJson<Map<String, Value>>) -> Json<Value> {
    Json(json!({ "keys": object.len() }))
}
