//! The TLS stream's record input: after a real handshake (rustls on both sides, the server
//! on `tierpool_rustls`), a client's records, perhaps with bytes changed, cut short or
//! followed by garbage, arrive cut anywhere with waits between the pieces. Checked: what the
//! server reads is a prefix of what the client wrote, and all of it when the records are
//! untouched; a clean end only after the client's `close_notify` with every byte read; at
//! every wait at most `max(2P, T0)` held for the `P` bytes of the record under way; every
//! buffer back once the stream and the views are gone.
//!
//! `cargo +nightly fuzz run tls_records` (from `fuzz/`).

#![no_main]

#[path = "common/mod.rs"]
mod common;

use std::io;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Waker};

use common::{cut, exact_pool, in_use, Peer};
use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ServerConfig};
use tierpool_rustls::{TlsAcceptor, TlsConnector};
use tierpool::BufferPool;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};

#[derive(Arbitrary, Debug)]
struct Input {
    /// The client's writes: a length and a seed for each.
    writes: Vec<(u16, u8)>,
    close_notify: bool,
    /// Bytes of the records replaced: an offset (modulo their length) and the new byte.
    changes: Vec<(u16, u8)>,
    /// The records cut short at this offset (modulo their length).
    truncate: Option<u16>,
    garbage: Vec<u8>,
    cuts: Vec<u16>,
    waits: Vec<bool>,
    fail: bool,
    keep_views: bool,
}

fn configs() -> &'static (Arc<ServerConfig>, Arc<ClientConfig>) {
    static CONFIGS: OnceLock<(Arc<ServerConfig>, Arc<ClientConfig>)> = OnceLock::new();
    CONFIGS.get_or_init(|| {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let certs = CertificateDer::pem_slice_iter(include_bytes!(
            "../../tierpool-rustls/tests/data/server.pem"
        ))
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
        let key = PrivateKeyDer::from_pem_slice(include_bytes!(
            "../../tierpool-rustls/tests/data/server.key"
        ))
        .unwrap();
        let server = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(
                CertificateDer::from_pem_slice(include_bytes!(
                    "../../tierpool-rustls/tests/data/ca.pem"
                ))
                .unwrap(),
            )
            .unwrap();
        let client = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        (Arc::new(server), Arc::new(client))
    })
}

/// A socket: an in-memory pipe for the handshake; then, once `script` is set, reads that play
/// it; once `capture` is set, writes that land there.
struct Wire {
    pipe: tokio::io::DuplexStream,
    script: Option<Peer>,
    capture: Option<Vec<u8>>,
}

impl Wire {
    fn pair() -> (Wire, Wire) {
        let (a, b) = tokio::io::duplex(1 << 16);
        let wire = |pipe| Wire {
            pipe,
            script: None,
            capture: None,
        };
        (wire(a), wire(b))
    }
}

impl AsyncRead for Wire {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        match &mut this.script {
            Some(peer) => Pin::new(peer).poll_read(cx, buf),
            None => Pin::new(&mut this.pipe).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Wire {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        match &mut this.capture {
            Some(c) => {
                c.extend_from_slice(data);
                Poll::Ready(Ok(data.len()))
            }
            None => Pin::new(&mut this.pipe).poll_write(cx, data),
        }
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.pipe).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.pipe).poll_shutdown(cx)
    }
}

/// Where each TLS record of `wire` ends (its 5-byte header gives its length).
fn record_ends(wire: &[u8]) -> Vec<usize> {
    let mut ends = Vec::new();
    let mut at = 0;
    while wire.len() - at >= 5 {
        at += 5 + usize::from(u16::from_be_bytes([wire[at + 3], wire[at + 4]]));
        ends.push(at.min(wire.len()));
    }
    ends
}

fuzz_target!(|input: Input| {
    let (server_config, client_config) = configs();
    let pool = exact_pool();
    let floor = pool.tier_sizes()[0];
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let (mut server, sent, records) = rt.block_on(async {
        let acceptor = TlsAcceptor::new(server_config.clone(), pool.clone()).unwrap();
        let connector = TlsConnector::new(client_config.clone(), BufferPool::new());
        let (a, b) = Wire::pair();
        let name = ServerName::try_from("localhost").unwrap();
        let (server, client) = tokio::join!(acceptor.accept(a), connector.connect(name, b));
        let (server, mut client) = (server.unwrap(), client.unwrap());
        client.get_mut().capture = Some(Vec::new());
        let mut sent = Vec::new();
        for &(len, seed) in input.writes.iter().take(8) {
            let piece: Vec<u8> = (0..len)
                .map(|i| (i as u8).wrapping_mul(31) ^ seed)
                .collect();
            client.write_all(&piece).await.unwrap();
            sent.extend_from_slice(&piece);
        }
        if input.close_notify {
            client.shutdown().await.unwrap();
        } else {
            client.flush().await.unwrap();
        }
        let records = client.get_mut().capture.take().unwrap();
        (server, sent, records)
    });
    let ends = record_ends(&records);

    // The records as the server gets them.
    let mut wire = records.clone();
    if !wire.is_empty() {
        for &(at, byte) in &input.changes {
            let at = usize::from(at) % wire.len();
            wire[at] = byte;
        }
    }
    if let Some(t) = input.truncate {
        wire.truncate(usize::from(t) % (wire.len() + 1));
    }
    wire.extend_from_slice(&input.garbage);
    let untouched = wire == records;
    // Up to where the wire is the client's records.
    let same_up_to = wire
        .iter()
        .zip(&records)
        .position(|(a, b)| a != b)
        .unwrap_or(wire.len().min(records.len()));
    server.get_mut().script = Some(Peer::new(cut(&wire, &input.cuts, &input.waits, input.fail)));

    let mut cx = Context::from_waker(Waker::noop());
    let mut got = Vec::new();
    let mut kept = Vec::new();
    let end = loop {
        match server.poll_read_bytes(&mut cx) {
            Poll::Pending => {
                let delivered = server.get_ref().script.as_ref().map_or(0, |p| p.delivered);
                if delivered <= same_up_to {
                    let done = ends.iter().rev().find(|&&e| e <= delivered).copied();
                    let p = delivered - done.unwrap_or(0);
                    let held = server.held_bytes();
                    assert!(
                        held <= (2 * p).max(floor),
                        "{held} bytes held for {p} bytes of a record"
                    );
                }
            }
            Poll::Ready(Ok(Some(view))) => {
                got.extend_from_slice(&view);
                if input.keep_views {
                    kept.push(view);
                }
            }
            Poll::Ready(Ok(None)) => break Ok(()),
            Poll::Ready(Err(e)) => break Err(e),
        }
    };
    assert!(
        sent.starts_with(&got),
        "{} bytes read are not what was sent",
        got.len()
    );
    match end {
        Ok(()) => {
            assert!(input.close_notify, "a clean end without close_notify");
            assert_eq!(got.len(), sent.len(), "a clean end before every byte");
        }
        Err(e) => assert!(!(untouched && input.close_notify && !input.fail), "{e}"),
    }
    if untouched && !input.fail {
        assert_eq!(got.len(), sent.len());
    }
    drop(server);
    drop(kept);
    assert_eq!(in_use(&pool), 0, "every buffer back: {}", pool.stats());
});
