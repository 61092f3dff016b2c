//! [`Unbuffered`]: the two rustls connections a [`TlsStream`](crate::TlsStream) drives, the
//! server's and the client's, behind one method.

use std::ops::DerefMut;

use rustls::client::{ClientConnectionData, UnbufferedClientConnection};
use rustls::server::{ServerConnectionData, UnbufferedServerConnection};
use rustls::unbuffered::{UnbufferedConnectionCommon, UnbufferedStatus};

/// A rustls 0.23 unbuffered connection: [`UnbufferedServerConnection`] (what
/// [`TlsAcceptor`](crate::TlsAcceptor) makes) or [`UnbufferedClientConnection`]
/// ([`TlsConnector`](crate::TlsConnector)). Through `Deref` it is rustls'
/// [`CommonState`](rustls::CommonState): the negotiated version and cipher suite, ALPN, the
/// peer's certificates.
///
/// Sealed: these two are the connections there are.
pub trait Unbuffered:
    sealed::Sealed + DerefMut<Target = UnbufferedConnectionCommon<Self::Data>> + Send
{
    /// rustls' side data (`ServerConnectionData`, `ClientConnectionData`).
    type Data;

    /// rustls' `process_tls_records` on `incoming`, the records received and not yet
    /// discarded.
    fn process<'c, 'i>(
        &'c mut self,
        incoming: &'i mut [u8],
    ) -> UnbufferedStatus<'c, 'i, Self::Data>;
}

impl Unbuffered for UnbufferedServerConnection {
    type Data = ServerConnectionData;

    fn process<'c, 'i>(
        &'c mut self,
        incoming: &'i mut [u8],
    ) -> UnbufferedStatus<'c, 'i, ServerConnectionData> {
        self.process_tls_records(incoming)
    }
}

impl Unbuffered for UnbufferedClientConnection {
    type Data = ClientConnectionData;

    fn process<'c, 'i>(
        &'c mut self,
        incoming: &'i mut [u8],
    ) -> UnbufferedStatus<'c, 'i, ClientConnectionData> {
        self.process_tls_records(incoming)
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for rustls::server::UnbufferedServerConnection {}
    impl Sealed for rustls::client::UnbufferedClientConnection {}
}
