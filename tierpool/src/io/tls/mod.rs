//! TLS whose record buffers come from the pool (feature `rustls`): an idle TLS connection
//! holds no buffer.
//!
//! A TLS connection needs buffers for the records it receives (up to 16 KiB and a header for
//! one record), the records it sends, and the plaintext between them. tokio-rustls keeps
//! rustls' buffers for each connection's life, data flowing or not; a server with 10,000
//! idle TLS connections holds them 10,000 times. Here rustls decrypts records in place in a
//! pooled [`ReadBuffer`](crate::io::ReadBuffer) (held only while a record is incomplete or
//! its data unread; while it waits on `P` bytes of an incomplete record, at most
//! `max(2P, T0)`: the read buffer's rules), decrypted data reaches the program as
//! [`PooledBytes`](crate::PooledBytes) views of that buffer (no copy), and records to send
//! are encrypted into a pooled buffer held until they are written. What rustls answers while
//! reading (handshake flights, alerts) is small and rare: it goes into plain heap memory,
//! freed once written.
//!
//! | type | what |
//! |---|---|
//! | [`TlsAcceptor`] | the server's handshake: `accept(socket)` gives a [`TlsStream`] |
//! | [`TlsConnector`] | the client's: `connect(name, socket)` |
//! | [`TlsStream`] | `AsyncRead` + `AsyncWrite`, and [`read_bytes`](TlsStream::read_bytes) for the decrypted data as views |
//!
//! The stream speaks the whole protocol rustls does (TLS 1.2 and 1.3, key updates,
//! `close_notify` both ways, alerts); TLS 1.3 early data is refused (rustls' default). The
//! program brings rustls' configuration, with the crypto provider of its choice
//! (`rustls-ring`, `rustls-aws-lc-rs`).
//!
//! # From tokio-rustls
//!
//! ```text
//! - let acceptor = tokio_rustls::TlsAcceptor::from(config);
//! + let acceptor = tierpool::io::tls::TlsAcceptor::new(config, pool.clone())?;
//!   let tls = acceptor.accept(socket).await?;
//!   let (read, write) = tokio::io::split(tls);
//! - let frames = tokio_util::codec::FramedRead::new(read, decoder);
//! + let frames = tierpool::io::codec::FramedRead::new(read, decoder, pool.clone());
//! ```
//!
//! The decoder reads through the stream's `AsyncRead` (one copy, from the record's buffer
//! into the decoder's; tokio-rustls makes two, into rustls' plaintext buffer and out of it:
//! the repository's `docs/benchmarks-history.md` has the callgrind run that shows both).
//! A parser of its own can take [`read_bytes`](TlsStream::read_bytes)' views instead.
//!
//! # rustls version
//!
//! rustls lets the caller own every buffer (`Connection::read_tls` decrypting in the caller's
//! buffer, `Connection::write` encrypting into the caller's `Vec`) only from 0.24, not yet
//! released: the feature pins `rustls = "=0.24.0-dev.2"`, and the configuration types are
//! that version's (`rustls::ServerConfig::builder(Arc::new(rustls_ring::DEFAULT_PROVIDER))`).
//! rustls 0.23's unbuffered API decrypts in place too, but copies the data out into a `Vec`
//! of its own before the caller sees it. It needs Rust 1.85.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! # use std::sync::Arc;
//! # use rustls::pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer, ServerName};
//! use tierpool::io::tls::{TlsAcceptor, TlsConnector};
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//!
//! # let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tls");
//! # let certs = CertificateDer::pem_file_iter(format!("{dir}/server.pem")).unwrap()
//! #     .collect::<Result<Vec<_>, _>>().unwrap();
//! # let key = PrivateKeyDer::from_pem_file(format!("{dir}/server.key")).unwrap();
//! # let provider = Arc::new(rustls_ring::DEFAULT_PROVIDER);
//! # let identity = Arc::new(rustls::crypto::Identity::from_cert_chain(certs).unwrap());
//! # let server_config = Arc::new(rustls::ServerConfig::builder(provider.clone())
//! #     .with_no_client_auth().with_single_cert(identity, key).unwrap());
//! # let mut roots = rustls::RootCertStore::empty();
//! # roots.add(CertificateDer::from_pem_file(format!("{dir}/ca.pem")).unwrap()).unwrap();
//! # let client_config = Arc::new(rustls::ClientConfig::builder(provider)
//! #     .with_root_certificates(roots).with_no_client_auth().unwrap());
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
//!     let data = tls.read_bytes().await?.expect("a record"); // a view, no copy
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

mod input;
mod output;
mod stream;
mod handshake;

pub use handshake::{TlsAcceptor, TlsConnector};
pub use stream::TlsStream;
