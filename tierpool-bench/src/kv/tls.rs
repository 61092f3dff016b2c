//! TLS: tierpool-rustls' stream in `pooled` mode (record buffers from the pool), tokio-rustls
//! in `baseline` mode (its own buffers); one rustls 0.23 configuration, *ring*, for both.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpStream;

use super::Mode;

/// A handshake that takes longer is dropped (a client that stalls).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The mode's TLS acceptor.
pub(super) enum Acceptor {
    Pooled(tierpool_rustls::TlsAcceptor),
    Baseline(tokio_rustls::TlsAcceptor),
}

/// The certificate chain and key in `cert` and `key` (PEM), or what is wrong with them.
fn load(
    cert: &str,
    key: &str,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let certs = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("--tls-cert {cert}: {e}"))?;
    if certs.is_empty() {
        return Err(format!("--tls-cert {cert}: no certificate in it"));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("--tls-key {key}: {e}"))?;
    Ok((certs, key))
}

impl Acceptor {
    pub(super) fn new(
        mode: Mode,
        cert: &str,
        key: &str,
        pool: &tierpool::BufferPool,
    ) -> Result<Acceptor, String> {
        let (certs, key) = load(cert, key)?;
        let bad = |e: &dyn std::fmt::Display| format!("--tls-cert/--tls-key: {e}");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| bad(&e))?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|e| bad(&e))?;
        let config = Arc::new(config);
        Ok(match mode {
            Mode::Pooled => Acceptor::Pooled(
                tierpool_rustls::TlsAcceptor::new(config, pool.clone()).map_err(|e| bad(&e))?,
            ),
            Mode::Baseline => Acceptor::Baseline(tokio_rustls::TlsAcceptor::from(config)),
        })
    }

    /// The stream over `socket` once its handshake completes (given up after
    /// `HANDSHAKE_TIMEOUT`: a client that stalls).
    pub(super) async fn handshake(&self, socket: TcpStream) -> io::Result<Stream> {
        let handshake = async {
            Ok(match self {
                Acceptor::Pooled(a) => Stream::Pooled(Box::new(a.accept(socket).await?)),
                Acceptor::Baseline(a) => Stream::Baseline(Box::new(a.accept(socket).await?)),
            })
        };
        tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake)
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out"))?
    }
}

/// A TLS connection of either mode.
pub(super) enum Stream {
    Pooled(Box<tierpool_rustls::server::TlsStream<TcpStream>>),
    Baseline(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}
