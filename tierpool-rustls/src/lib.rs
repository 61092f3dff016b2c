//! TLS over [rustls](https://docs.rs/rustls) 0.23 whose record buffers come from a
//! [tierpool](https://docs.rs/tierpool) pool: an idle TLS connection holds no buffer.
//!
//! # From tokio-rustls
//!
//! The configuration stays as it is (the same `Arc<rustls::ServerConfig>` a tokio-rustls,
//! hyper-rustls or axum-server program builds); the acceptor takes a pool, and a tokio-util
//! decoder reads through tierpool's `FramedRead`:
//!
//! ```text
//! - let acceptor = tokio_rustls::TlsAcceptor::from(config);
//! + let acceptor = tierpool_rustls::TlsAcceptor::new(config, pool.clone())?;
//!   let tls = acceptor.accept(socket).await?;
//!   let (read, write) = tokio::io::split(tls);
//! - let frames = tokio_util::codec::FramedRead::new(read, decoder);
//! + let frames = tierpool::io::codec::FramedRead::new(read, decoder, pool.clone());
//! ```
//!
//! A client changes `tokio_rustls::TlsConnector::from(config)` to
//! [`TlsConnector::new(config, pool)`](TlsConnector::new); `connect(name, socket)` is the
//! same. The stream types keep tokio-rustls' names: [`server::TlsStream`] and
//! [`client::TlsStream`]. The repository's `tierpool-rustls/examples/https_server.rs` is a
//! hyper HTTPS server ported this way.
//!
//! # What it changes
//!
//! A TLS connection needs buffers for the records it receives (up to 16 KiB and a header for
//! one record), the records it sends, and the plaintext between them. tokio-rustls keeps
//! rustls' buffers for each connection's life, data flowing or not: a server with 10,000 idle
//! TLS connections holds them 10,000 times. Here rustls' unbuffered API processes the records
//! where they lie in a pooled [`ReadBuffer`](tierpool::io::ReadBuffer), held only while a
//! record is incomplete or not yet processed (while it waits on `P` bytes of an incomplete
//! record, at most `max(2P, T0)`: tierpool's read rules); the records to send are encrypted
//! into a pooled buffer held until they are written; decrypted data not yet read waits in
//! pooled buffers.
//!
//! | type | what |
//! |---|---|
//! | [`TlsAcceptor`] | the server's handshake: `accept(socket)` gives a [`server::TlsStream`] |
//! | [`TlsConnector`] | the client's: `connect(name, socket)` gives a [`client::TlsStream`] |
//! | [`TlsStream`] | `AsyncRead` + `AsyncWrite`, and [`read_bytes`](TlsStream::read_bytes) for the decrypted data as pooled views |
//!
//! The stream speaks the whole protocol rustls does (TLS 1.2 and 1.3, key updates,
//! `close_notify` both ways, alerts); TLS 1.3 early data is refused (rustls' default). The
//! program brings rustls' configuration, with the crypto provider of its choice (rustls'
//! `ring` or `aws-lc-rs` feature).
//!
//! # Where it copies, and what differs from tokio-rustls
//!
//! - **Decrypted data**: rustls 0.23 decrypts each record in place in the pooled buffer,
//!   then copies its plaintext into a `Vec` of its own (allocated per record); the stream
//!   copies it from there into the reader's buffer (`AsyncRead`), or into a pooled buffer
//!   ([`read_bytes`](TlsStream::read_bytes)). That is tokio-rustls' count: two copies
//!   after the socket's.
//! - **Records sent**: rustls encrypts each record into a `Vec` and copies it into the pooled
//!   buffer (tokio-rustls writes from rustls' `Vec`): one copy more per record sent.
//! - **The server name a client asked for** (SNI) is not exposed by rustls 0.23's unbuffered
//!   server; a certificate resolver (`ServerConfig::cert_resolver`) sees it during the
//!   handshake.
//! - Under a budget ([`Builder::max_in_use_bytes`](tierpool::Builder::max_in_use_bytes))
//!   with no room, the records to send wait for room (a write is `Pending`); decrypted data
//!   that does not fit the reader's buffer goes to the heap rather than be lost (it is
//!   decrypted already).
//!
//! # rustls versions
//!
//! This crate follows rustls' 0.23 releases (tokio-rustls 0.26's). rustls 0.24, when it is
//! released, decrypts into the caller's buffer without the per-record `Vec` (its
//! `Connection::read_tls` over a `TlsInputBuffer`); its configuration types are new ones, so
//! it will be a new major version of this crate.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! # use std::sync::Arc;
//! # use rustls::pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer, ServerName};
//! use tierpool_rustls::{TlsAcceptor, TlsConnector};
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//!
//! # let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");
//! # let certs = CertificateDer::pem_file_iter(format!("{dir}/server.pem")).unwrap()
//! #     .collect::<Result<Vec<_>, _>>().unwrap();
//! # let key = PrivateKeyDer::from_pem_file(format!("{dir}/server.key")).unwrap();
//! # let provider = Arc::new(rustls::crypto::ring::default_provider());
//! # let server_config = Arc::new(rustls::ServerConfig::builder_with_provider(provider.clone())
//! #     .with_safe_default_protocol_versions().unwrap()
//! #     .with_no_client_auth().with_single_cert(certs, key).unwrap());
//! # let mut roots = rustls::RootCertStore::empty();
//! # roots.add(CertificateDer::from_pem_file(format!("{dir}/ca.pem")).unwrap()).unwrap();
//! # let client_config = Arc::new(rustls::ClientConfig::builder_with_provider(provider)
//! #     .with_safe_default_protocol_versions().unwrap()
//! #     .with_root_certificates(roots).with_no_client_auth());
//! let pool = tierpool::BufferPool::new();
//! let acceptor = TlsAcceptor::new(server_config, pool.clone())?;
//! let connector = TlsConnector::new(client_config, pool.clone());
//!
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let addr = listener.local_addr()?;
//! let server = tokio::spawn(async move {
//!     let (socket, _) = listener.accept().await?;
//!     let mut tls = acceptor.accept(socket).await?;
//!     assert_eq!(tls.held_bytes(), 0); // handshake done: no buffer held
//!     let data = tls.read_bytes().await?.expect("a record"); // a pooled view
//!     tls.write_all(&data).await?;
//!     tls.shutdown().await // close_notify
//! });
//!
//! let socket = tokio::net::TcpStream::connect(addr).await?;
//! let name = ServerName::try_from("localhost").unwrap();
//! let mut tls = connector.connect(name, socket).await?;
//! tls.write_all(b"hello").await?;
//! let mut echo = Vec::new();
//! tls.read_to_end(&mut echo).await?; // ends at the server's close_notify
//! assert_eq!(echo, b"hello");
//! server.await??;
//! # Ok(()) }
//! ```

#![warn(missing_docs, missing_debug_implementations)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod side;
mod output;
mod session;
mod stream;
mod acceptor;

pub use acceptor::{TlsAcceptor, TlsConnector};
pub use side::Unbuffered;
pub use stream::TlsStream;

/// The server side's stream, as tokio-rustls names it.
pub mod server {
    /// A TLS stream made by [`TlsAcceptor::accept`](crate::TlsAcceptor::accept).
    pub type TlsStream<IO> = crate::TlsStream<IO, rustls::server::UnbufferedServerConnection>;
}

/// The client side's stream, as tokio-rustls names it.
pub mod client {
    /// A TLS stream made by [`TlsConnector::connect`](crate::TlsConnector::connect).
    pub type TlsStream<IO> = crate::TlsStream<IO, rustls::client::UnbufferedClientConnection>;
}
