//! [`TlsAcceptor`] and [`TlsConnector`]: the handshake over pooled buffers.

use std::fmt;
use std::io;
use std::sync::Arc;

use rustls::client::UnbufferedClientConnection;
use rustls::pki_types::ServerName;
use rustls::server::UnbufferedServerConnection;
use rustls::{ClientConfig, ServerConfig};
use tierpool::BufferPool;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::stream::{tls_error, TlsStream};

/// Accepts TLS connections with a rustls [`ServerConfig`], their buffers from a pool: what
/// tokio-rustls' `TlsAcceptor` does, with an idle connection holding no buffer. The
/// configuration is the one a tokio-rustls, hyper-rustls or axum-server program already
/// builds (rustls 0.23).
///
/// ```no_run
/// # async fn f(config: std::sync::Arc<rustls::ServerConfig>) -> std::io::Result<()> {
/// let pool = tierpool::default_pool().clone();
/// let acceptor = tierpool_rustls::TlsAcceptor::new(config, pool)?;
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let (socket, _) = listener.accept().await?;
/// let tls = acceptor.accept(socket).await?; // the handshake is done
/// # drop(tls); Ok(()) }
/// ```
#[derive(Clone)]
pub struct TlsAcceptor {
    config: Arc<ServerConfig>,
    pool: BufferPool,
}

impl TlsAcceptor {
    /// An acceptor for `config`, taking buffers from `pool`.
    ///
    /// # Errors
    /// [`io::ErrorKind::InvalidInput`] if `config` accepts TLS 1.3 early data
    /// (`max_early_data_size > 0`): the stream reads application data only after the
    /// handshake, so early data would be dropped; it is refused instead (rustls' default).
    pub fn new(config: Arc<ServerConfig>, pool: BufferPool) -> io::Result<Self> {
        if config.max_early_data_size > 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "tierpool-rustls' TlsStream does not read TLS 1.3 early data: set \
                 ServerConfig::max_early_data_size to 0",
            ));
        }
        Ok(TlsAcceptor { config, pool })
    }

    /// The server side of a handshake over `io`; the stream once it is complete.
    ///
    /// Put a timeout around it (`tokio::time::timeout`): a peer that stalls holds the
    /// connection, with what it sent of an incomplete record (at most twice its bytes held)
    /// and the part of our flight its socket has not taken (a few KiB).
    ///
    /// # Errors
    /// [`io::ErrorKind::InvalidData`] with the [`rustls::Error`] if the handshake fails (a
    /// client speaking plaintext, a bad record, no common version or cipher suite) as its
    /// source; the alert rustls answers with is written first where the socket takes it.
    /// [`io::ErrorKind::UnexpectedEof`] if the peer closes the connection before the
    /// handshake is done; the socket's own errors. Every buffer is given back.
    pub async fn accept<IO: AsyncRead + AsyncWrite + Unpin>(
        &self,
        io: IO,
    ) -> io::Result<TlsStream<IO, UnbufferedServerConnection>> {
        let conn = UnbufferedServerConnection::new(Arc::clone(&self.config)).map_err(tls_error)?;
        let mut stream = TlsStream::new(io, conn, self.pool.clone());
        stream.handshake().await?;
        Ok(stream)
    }

    /// The server configuration.
    pub fn config(&self) -> &Arc<ServerConfig> {
        &self.config
    }
}

impl fmt::Debug for TlsAcceptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsAcceptor")
            .field("pool", &self.pool.name())
            .finish_non_exhaustive()
    }
}

/// Makes TLS client connections with a rustls [`ClientConfig`], their buffers from a pool.
///
/// ```no_run
/// # async fn f(config: std::sync::Arc<rustls::ClientConfig>) -> std::io::Result<()> {
/// use rustls::pki_types::ServerName;
///
/// let connector = tierpool_rustls::TlsConnector::new(config, tierpool::default_pool().clone());
/// let socket = tokio::net::TcpStream::connect("127.0.0.1:6379").await?;
/// let name = ServerName::try_from("localhost").expect("a valid name");
/// let tls = connector.connect(name, socket).await?;
/// # drop(tls); Ok(()) }
/// ```
#[derive(Clone)]
pub struct TlsConnector {
    config: Arc<ClientConfig>,
    pool: BufferPool,
}

impl TlsConnector {
    /// A connector for `config`, taking buffers from `pool`.
    pub fn new(config: Arc<ClientConfig>, pool: BufferPool) -> Self {
        TlsConnector { config, pool }
    }

    /// The client side of a handshake with `name` over `io`; the stream once it is complete.
    ///
    /// # Errors
    /// As [`TlsAcceptor::accept`]: a certificate that does not verify for `name` is an
    /// [`io::ErrorKind::InvalidData`] error with the [`rustls::Error`].
    pub async fn connect<IO: AsyncRead + AsyncWrite + Unpin>(
        &self,
        name: ServerName<'static>,
        io: IO,
    ) -> io::Result<TlsStream<IO, UnbufferedClientConnection>> {
        let conn =
            UnbufferedClientConnection::new(Arc::clone(&self.config), name).map_err(tls_error)?;
        let mut stream = TlsStream::new(io, conn, self.pool.clone());
        stream.handshake().await?;
        Ok(stream)
    }

    /// The client configuration.
    pub fn config(&self) -> &Arc<ClientConfig> {
        &self.config
    }
}

impl fmt::Debug for TlsConnector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConnector")
            .field("pool", &self.pool.name())
            .finish_non_exhaustive()
    }
}
