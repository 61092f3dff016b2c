//! A hyper HTTPS server (HTTP/1.1 and HTTP/2 by ALPN) whose rustls configuration is built as
//! hyper-rustls' own server example builds it, ported from tokio-rustls to tierpool-rustls:
//! the two lines marked `tierpool` are the whole port. An idle connection holds no buffer.
//!
//! ```sh
//! cargo run -p tierpool-rustls --example https_server -- --addr 127.0.0.1:8443
//! curl --cacert tierpool-rustls/tests/data/ca.pem https://localhost:8443/
//! curl --cacert tierpool-rustls/tests/data/ca.pem --http2 --data-binary @file https://localhost:8443/echo
//! ```
//!
//! `GET /` answers `hello`, `POST /echo` the request's body, `GET /stats` the bytes the
//! pool has handed out and not had back (its budget, 256 MiB, counts them). `--cert` and
//! `--key` name PEM files (the test certificates by default).

use std::sync::Arc;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;
use tierpool::BufferPool;
use tokio::net::TcpListener;

type Error = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");
    let mut addr = "127.0.0.1:8443".to_string();
    let mut cert = format!("{dir}/server.pem");
    let mut key = format!("{dir}/server.key");
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next().ok_or(format!("{arg} needs a value"))?;
        match arg.as_str() {
            "--addr" => addr = value,
            "--cert" => cert = value,
            "--key" => key = value,
            _ => return Err(format!("unknown option {arg}; --addr, --cert, --key").into()),
        }
    }

    // The configuration, as a hyper-rustls server builds it.
    let certs = CertificateDer::pem_file_iter(&cert)?.collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_file(&key)?;
    let mut config = ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];

    let pool = BufferPool::builder()
        .max_in_use_bytes(256 << 20)
        .background_trim(true)
        .build()?;
    // tokio-rustls: let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let acceptor = tierpool_rustls::TlsAcceptor::new(Arc::new(config), pool.clone())?; // tierpool

    let listener = TcpListener::bind(&addr).await?;
    println!("listening on {}", listener.local_addr()?);
    loop {
        let (socket, _) = listener.accept().await?;
        let (acceptor, pool) = (acceptor.clone(), pool.clone());
        tokio::spawn(async move {
            let tls = match acceptor.accept(socket).await {
                Ok(tls) => tls,
                Err(e) => return eprintln!("handshake: {e}"),
            };
            let service = hyper::service::service_fn(move |r| answer(r, pool.clone()));
            let served = Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(tls), service)
                .await;
            if let Err(e) = served {
                eprintln!("connection: {e}");
            }
        });
    }
}

async fn answer(
    request: Request<Incoming>,
    pool: BufferPool,
) -> Result<Response<Full<Bytes>>, Error> {
    let body = match (request.method(), request.uri().path()) {
        (&Method::GET, "/") => Bytes::from_static(b"hello\n"),
        (&Method::POST, "/echo") => request.into_body().collect().await?.to_bytes(),
        (&Method::GET, "/stats") => {
            let in_use = pool.stats().budget.map_or(0, |b| b.in_use_bytes);
            Bytes::from(format!("{in_use}\n"))
        }
        _ => {
            let mut not_found = Response::new(Full::new(Bytes::from_static(b"not found\n")));
            *not_found.status_mut() = StatusCode::NOT_FOUND;
            return Ok(not_found);
        }
    };
    Ok(Response::new(Full::new(body)))
}
