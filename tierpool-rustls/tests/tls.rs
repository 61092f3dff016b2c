//! TLS over pooled buffers (`tierpool_rustls`): real rustls clients and servers over
//! loopback, byte-exact round trips across record boundaries, TLS 1.2 and 1.3, key updates,
//! `close_notify` both ways, a non-Rust client (`openssl s_client`), tokio-rustls on the
//! other end, the bad inputs (a plaintext client, garbage, a truncated record, a peer that
//! vanishes mid-handshake, a record trickled a byte at a time), and every buffer back each
//! time.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ServerConfig};
use tierpool::BufferPool;
use tierpool_rustls::{client, TlsAcceptor, TlsConnector, TlsStream};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");

/// A pool whose figures are exact: a budget that never binds counts the bytes in use.
fn exact_pool() -> BufferPool {
    BufferPool::builder()
        .max_in_use_bytes(1 << 30)
        .build()
        .unwrap()
}

/// The bytes `pool` has handed out and not had back (it has a budget).
fn in_use(pool: &BufferPool) -> usize {
    pool.stats()
        .budget
        .expect("a pool with a budget")
        .in_use_bytes
}

/// A runtime of two worker threads, with I/O and time.
fn multi_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn certs() -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
    let certs = CertificateDer::pem_file_iter(format!("{DIR}/server.pem"))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(format!("{DIR}/server.key")).unwrap();
    (certs, key)
}

fn server_config() -> Arc<ServerConfig> {
    let (certs, key) = certs();
    Arc::new(
        ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap(),
    )
}

fn client_config_with(versions: &[&'static rustls::SupportedProtocolVersion]) -> Arc<ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(format!("{DIR}/ca.pem")).unwrap())
        .unwrap();
    Arc::new(
        ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(versions)
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

fn client_config() -> Arc<ClientConfig> {
    client_config_with(rustls::DEFAULT_VERSIONS)
}

/// An acceptor whose buffers come from `server_pool`, a connector whose buffers come from
/// `client_pool`, and a listener on a free loopback port.
async fn endpoints(
    server_pool: &BufferPool,
    client_pool: &BufferPool,
) -> (TlsAcceptor, TlsConnector, TcpListener, std::net::SocketAddr) {
    let acceptor = TlsAcceptor::new(server_config(), server_pool.clone()).unwrap();
    let connector = TlsConnector::new(client_config(), client_pool.clone());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    (acceptor, connector, listener, addr)
}

fn localhost() -> ServerName<'static> {
    ServerName::try_from("localhost").unwrap()
}

/// Deterministic bytes for a round trip.
fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// A server that echoes what it reads through `read_bytes` (views) until the client's
/// `close_notify` (or, given `until`, that many bytes), then sends its own; returns the
/// buffers the stream holds at the end.
async fn echo_server(listener: TcpListener, acceptor: TlsAcceptor) -> io::Result<usize> {
    echo_server_until(listener, acceptor, usize::MAX).await
}

async fn echo_server_until(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    until: usize,
) -> io::Result<usize> {
    let (socket, _) = listener.accept().await?;
    let mut tls = acceptor.accept(socket).await?;
    let mut echoed = 0;
    while echoed < until {
        let Some(data) = tls.read_bytes().await? else {
            break;
        };
        assert!(!data.is_empty());
        tls.write_all(&data).await?;
        echoed += data.len();
    }
    tls.shutdown().await?;
    Ok(tls.held_bytes())
}

/// One client: writes `data` (in `chunk`-byte writes), reads the echo concurrently, shuts
/// down, and expects the same bytes back.
async fn round_trip(
    connector: &TlsConnector,
    addr: std::net::SocketAddr,
    data: Vec<u8>,
    chunk: usize,
) -> io::Result<client::TlsStream<TcpStream>> {
    let socket = TcpStream::connect(addr).await?;
    let tls = connector.connect(localhost(), socket).await?;
    let (mut r, mut w) = tokio::io::split(tls);
    let sent = data.clone();
    let writer = tokio::spawn(async move {
        for piece in sent.chunks(chunk) {
            w.write_all(piece).await?;
        }
        w.flush().await?;
        w.shutdown().await?;
        io::Result::Ok(w)
    });
    let mut echo = Vec::with_capacity(data.len());
    r.read_to_end(&mut echo).await?;
    let w = writer.await.unwrap()?;
    assert!(echo == data, "echo of {} bytes differs", data.len());
    Ok(r.unsplit(w))
}

/// One connection to a fresh echo server on `acceptor`: `data` sent in `chunk`-byte writes
/// and echoed back. Returns the client's stream and the bytes the server's held at its end.
async fn echo_once(
    acceptor: &TlsAcceptor,
    connector: &TlsConnector,
    data: Vec<u8>,
    chunk: usize,
) -> (client::TlsStream<TcpStream>, usize) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(echo_server(listener, acceptor.clone()));
    let client = round_trip(connector, addr, data, chunk).await.unwrap();
    (client, server.await.unwrap().unwrap())
}

#[test]
fn round_trips_of_every_size_across_record_boundaries_give_every_buffer_back() {
    multi_thread().block_on(async {
        let server_pool = exact_pool();
        let client_pool = exact_pool();
        let acceptor = TlsAcceptor::new(server_config(), server_pool.clone()).unwrap();
        let connector = TlsConnector::new(client_config(), client_pool.clone());
        for (i, &(n, chunk)) in [
            (1, 1),
            (100, 7),
            (16_383, 16_383),
            (16_384, 16_384),
            (16_385, 16_385),
            (50_000, 4096),
            (65_536, 65_536),
            (200_001, 100_000),
            (1 << 20, 1 << 20),
            (3_000_000, 70_000),
        ]
        .iter()
        .enumerate()
        {
            let (client, end) = echo_once(&acceptor, &connector, pattern(n, i as u8), chunk).await;
            assert_eq!(end, 0, "{n} bytes: the server held a buffer at the end");
            assert_eq!(client.held_bytes(), 0);
            drop(client);
            assert_eq!(in_use(&server_pool), 0, "{n} bytes: server buffers out");
            assert_eq!(in_use(&client_pool), 0, "{n} bytes: client buffers out");
        }
    });
}

/// A write never outgrows the pooled buffer its records are encrypted into: the room it
/// reserves holds every record rustls makes of it (rustls fragments plaintext below 16 KiB by
/// the cipher's overhead), so no buffer is grown out of the pool and comes back as a larger
/// tier's. Guards the sizing in `output.rs` (`sealed_len`): an undercount grows a buffer at
/// every large write. Under TLS 1.2 and 1.3, with a budget (no lending): every buffer comes
/// back to the tier it was taken from.
#[test]
fn writes_never_outgrow_their_pooled_buffers() {
    multi_thread().block_on(async {
        for versions in [&[&rustls::version::TLS12][..], &[&rustls::version::TLS13]] {
            let server_pool = exact_pool();
            let client_pool = exact_pool();
            let acceptor = TlsAcceptor::new(server_config(), server_pool.clone()).unwrap();
            let connector = TlsConnector::new(client_config_with(versions), client_pool.clone());
            for (i, &(n, chunk)) in [
                (65_545, 65_545), // a RESP reply of a 64 KiB value
                (49_152, 49_152),
                (48_960, 48_960),
                (200_000, 100_000),
                (1 << 20, 1 << 20),
            ]
            .iter()
            .enumerate()
            {
                echo_once(&acceptor, &connector, pattern(n, i as u8), chunk).await;
            }
            for (side, pool) in [("server", &server_pool), ("client", &client_pool)] {
                for t in pool.stats().tiers {
                    assert!(
                        t.returned <= t.hits + t.misses,
                        "{side}: tier {} got back {} buffers and handed out {}: a write outgrew its buffer",
                        t.size,
                        t.returned,
                        t.hits + t.misses
                    );
                }
            }
        }
    });
}

/// The point of it all: connections that completed a handshake and an exchange, then idle,
/// hold no pooled buffer on either side, only rustls' session state.
#[test]
fn idle_connections_hold_no_buffer() {
    multi_thread().block_on(async {
        let server_pool = exact_pool();
        let client_pool = exact_pool();
        let (acceptor, connector, listener, addr) = endpoints(&server_pool, &client_pool).await;
        let server = tokio::spawn(async move {
            let mut streams = Vec::new();
            for _ in 0..50 {
                let (socket, _) = listener.accept().await?;
                let mut tls = acceptor.accept(socket).await?;
                let mut ping = [0; 4];
                tls.read_exact(&mut ping).await?;
                tls.write_all(b"PONG").await?;
                tls.flush().await?;
                streams.push(tls);
            }
            io::Result::Ok(streams)
        });
        let mut clients = Vec::new();
        for _ in 0..50 {
            let socket = TcpStream::connect(addr).await.unwrap();
            let mut tls = connector.connect(localhost(), socket).await.unwrap();
            tls.write_all(b"PING").await.unwrap();
            let mut pong = [0; 4];
            tls.read_exact(&mut pong).await.unwrap();
            assert_eq!(&pong, b"PONG");
            clients.push(tls);
        }
        let servers = server.await.unwrap().unwrap();
        assert!(servers.iter().all(|s| s.held_bytes() == 0));
        assert!(clients.iter().all(|s| s.held_bytes() == 0));
        assert_eq!(in_use(&server_pool), 0, "50 idle server connections");
        assert_eq!(in_use(&client_pool), 0, "50 idle client connections");
    });
}

#[test]
fn tls12_and_tls13_both_work_and_are_what_was_negotiated() {
    multi_thread().block_on(async {
        let pool = exact_pool();
        let acceptor = TlsAcceptor::new(server_config(), pool.clone()).unwrap();
        for (versions, version) in [
            (
                &[&rustls::version::TLS12][..],
                rustls::ProtocolVersion::TLSv1_2,
            ),
            (&[&rustls::version::TLS13], rustls::ProtocolVersion::TLSv1_3),
        ] {
            let connector = TlsConnector::new(client_config_with(versions), pool.clone());
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let server = tokio::spawn(echo_server(listener, acceptor.clone()));
            let client = round_trip(&connector, addr, pattern(40_000, 3), 10_000)
                .await
                .unwrap();
            assert_eq!(client.connection().protocol_version(), Some(version));
            server.await.unwrap().unwrap();
            drop(client);
            assert_eq!(in_use(&pool), 0);
        }
    });
}

#[test]
fn key_updates_both_ways_keep_the_data_flowing() {
    multi_thread().block_on(async {
        let pool = exact_pool();
        let (acceptor, connector, listener, addr) = endpoints(&pool, &pool).await;
        let server = tokio::spawn(async move {
            let (socket, _) = listener.accept().await?;
            let mut tls = acceptor.accept(socket).await?;
            for round in 0..5u8 {
                let mut got = vec![0; 1000];
                tls.read_exact(&mut got).await?;
                assert_eq!(got, pattern(1000, round));
                if round % 2 == 1 {
                    tls.refresh_traffic_keys().await?;
                }
                tls.write_all(&pattern(1000, round + 100)).await?;
                tls.flush().await?;
            }
            tls.shutdown().await?;
            io::Result::Ok(())
        });
        let socket = TcpStream::connect(addr).await.unwrap();
        let mut tls = connector.connect(localhost(), socket).await.unwrap();
        for round in 0..5u8 {
            if round % 2 == 0 {
                tls.refresh_traffic_keys().await.unwrap();
            }
            tls.write_all(&pattern(1000, round)).await.unwrap();
            tls.flush().await.unwrap();
            let mut got = vec![0; 1000];
            tls.read_exact(&mut got).await.unwrap();
            assert_eq!(got, pattern(1000, round + 100));
        }
        let mut rest = Vec::new();
        tls.read_to_end(&mut rest).await.unwrap(); // the server's close_notify
        assert!(rest.is_empty());
        server.await.unwrap().unwrap();
        tls.shutdown().await.unwrap();
        drop(tls);
        assert_eq!(in_use(&pool), 0);
    });
}

#[test]
fn a_decoder_reads_through_the_stream_unchanged() {
    use futures_util::StreamExt;
    multi_thread().block_on(async {
        let pool = exact_pool();
        let (acceptor, connector, listener, addr) = endpoints(&pool, &pool).await;
        let lines: Vec<String> = (0..2000)
            .map(|i| format!("line {i} {}", "x".repeat(i % 97)))
            .collect();
        let expected = lines.clone();
        let server = tokio::spawn(async move {
            let (socket, _) = listener.accept().await.unwrap();
            let tls = acceptor.accept(socket).await.unwrap();
            let mut frames = tierpool::io::codec::FramedRead::new(
                tls,
                tokio_util::codec::LinesCodec::new(),
                pool.clone(),
            );
            let mut got = Vec::new();
            while let Some(line) = frames.next().await {
                got.push(line.unwrap());
            }
            assert_eq!(frames.held_bytes(), 0);
            got
        });
        let socket = TcpStream::connect(addr).await.unwrap();
        let mut tls = connector.connect(localhost(), socket).await.unwrap();
        for line in &lines {
            tls.write_all(line.as_bytes()).await.unwrap();
            tls.write_all(b"\n").await.unwrap();
        }
        tls.shutdown().await.unwrap();
        assert_eq!(server.await.unwrap(), expected);
    });
}

/// The server's outcome for a client that does `client` on the raw socket.
async fn accept_against<F, Fut>(pool: &BufferPool, client: F) -> io::Result<Vec<u8>>
where
    F: FnOnce(TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let acceptor = TlsAcceptor::new(server_config(), pool.clone()).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = tokio::spawn(async move {
        let socket = TcpStream::connect(addr).await.unwrap();
        client(socket).await;
    });
    let (socket, _) = listener.accept().await.unwrap();
    let result = tokio::time::timeout(Duration::from_secs(20), async {
        let mut tls = acceptor.accept(socket).await?;
        let mut all = Vec::new();
        while let Some(b) = tls.read_bytes().await? {
            all.extend_from_slice(&b);
        }
        Ok(all)
    })
    .await
    .expect("the server did not finish");
    peer.await.unwrap();
    result
}

#[test]
fn a_plaintext_client_gets_an_alert_and_a_clear_error() {
    multi_thread().block_on(async {
        let pool = exact_pool();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let err = accept_against(&pool, |mut s| async move {
            s.write_all(b"*1\r\n$4\r\nPING\r\n").await.unwrap();
            let mut answer = Vec::new();
            let _ = s.read_to_end(&mut answer).await;
            tx.send(answer).unwrap();
        })
        .await
        .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
        // The rustls error itself is the source.
        let tls = err
            .get_ref()
            .and_then(|e| e.downcast_ref::<rustls::Error>());
        assert!(tls.is_some(), "{err:?}");
        let answer = rx.await.unwrap();
        // A fatal alert record (content type 21), not silence.
        assert_eq!(answer.first(), Some(&21), "the client got {answer:?}");
        assert_eq!(in_use(&pool), 0);
    });
}

/// The first flight of a real client: its `ClientHello` record.
fn client_hello() -> Vec<u8> {
    let mut conn = rustls::ClientConnection::new(client_config(), localhost()).unwrap();
    let mut tls = Vec::new();
    conn.write_tls(&mut tls).unwrap();
    tls
}

#[test]
fn a_peer_that_vanishes_mid_handshake_is_an_unexpected_eof() {
    multi_thread().block_on(async {
        let pool = exact_pool();
        let hello = client_hello();
        let half = hello[..hello.len() / 2].to_vec();
        let err = accept_against(&pool, |mut s| async move {
            s.write_all(&half).await.unwrap();
        })
        .await
        .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof, "{err}");
        // And one that vanishes after the whole ClientHello, before its second flight.
        let err = accept_against(&pool, |mut s| async move {
            s.write_all(&hello).await.unwrap();
            let mut flight = vec![0; 512];
            let _ = s.read(&mut flight).await;
        })
        .await
        .unwrap_err();
        // Closed with the server's flight unread: the client's kernel resets the connection.
        assert!(
            matches!(
                err.kind(),
                io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset
            ),
            "{err}"
        );
        assert_eq!(in_use(&pool), 0);
    });
}

#[test]
fn garbage_and_truncation_after_the_handshake_are_clear_errors() {
    multi_thread().block_on(async {
        let pool = exact_pool();
        let connector = TlsConnector::new(client_config(), exact_pool());
        let mut cases = Vec::new();
        // A record whose authentication fails; a record header of an unknown type; a record
        // cut short by the end of the stream; a clean end without close_notify.
        for tail in [
            &b"\x17\x03\x03\x00\x20abcdefghijklmnopqrstuvwxyz012345"[..],
            &b"\x63\x03\x03\x00\x05hello"[..],
            &b"\x17\x03\x03\x00\x40abc"[..],
            &b""[..],
        ] {
            let connector = connector.clone();
            let tail = tail.to_vec();
            let result = accept_against(&pool, move |socket| async move {
                let mut tls = connector.connect(localhost(), socket).await.unwrap();
                tls.write_all(b"before").await.unwrap();
                tls.flush().await.unwrap();
                // Give the record time to be read alone.
                tokio::time::sleep(Duration::from_millis(50)).await;
                let raw = tls.get_mut();
                raw.write_all(&tail).await.unwrap();
                raw.shutdown().await.unwrap();
                let mut rest = Vec::new();
                let _ = raw.read_to_end(&mut rest).await;
            })
            .await;
            cases.push(result);
        }
        let kinds: Vec<_> = cases
            .iter()
            .map(|r| r.as_ref().map_err(io::Error::kind).map(Vec::len))
            .collect();
        assert_eq!(
            kinds,
            [
                Err(io::ErrorKind::InvalidData),
                Err(io::ErrorKind::InvalidData),
                Err(io::ErrorKind::UnexpectedEof),
                Err(io::ErrorKind::UnexpectedEof),
            ]
        );
        assert_eq!(in_use(&pool), 0);
    });
}

/// A peer that half-closes its side without a `close_notify`: the read reports the possible
/// truncation, and the answer still goes out.
#[test]
fn an_end_without_close_notify_fails_the_read_not_the_write() {
    multi_thread().block_on(async {
        let pool = exact_pool();
        let (acceptor, connector, listener, addr) = endpoints(&pool, &exact_pool()).await;
        let client = tokio::spawn(async move {
            let socket = TcpStream::connect(addr).await.unwrap();
            let mut tls = connector.connect(localhost(), socket).await.unwrap();
            tls.write_all(b"request").await.unwrap();
            tls.flush().await.unwrap();
            tls.get_mut().shutdown().await.unwrap(); // TCP FIN, no close_notify
            let mut answer = Vec::new();
            tls.read_to_end(&mut answer).await.unwrap();
            answer
        });
        let (socket, _) = listener.accept().await.unwrap();
        let mut tls = acceptor.accept(socket).await.unwrap();
        let mut got = Vec::new();
        let err = loop {
            match tls.read_bytes().await {
                Ok(Some(b)) => got.extend_from_slice(&b),
                Ok(None) => panic!("a clean end without close_notify"),
                Err(e) => break e,
            }
        };
        assert_eq!(got, b"request");
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof, "{err}");
        tls.write_all(b"answer").await.unwrap();
        tls.shutdown().await.unwrap();
        assert_eq!(client.await.unwrap(), b"answer");
        drop(tls);
        assert_eq!(in_use(&pool), 0);
    });
}

#[test]
fn data_decrypted_before_an_error_is_read_first() {
    multi_thread().block_on(async {
        let pool = exact_pool();
        let (acceptor, connector, listener, addr) = endpoints(&pool, &exact_pool()).await;
        let client = tokio::spawn(async move {
            let socket = TcpStream::connect(addr).await.unwrap();
            let mut tls = connector.connect(localhost(), socket).await.unwrap();
            tls.write_all(b"before").await.unwrap();
            // The garbage follows in the same segment as the good record, most likely.
            tls.get_mut()
                .write_all(b"\x17\x03\x03\x00\x20abcdefghijklmnopqrstuvwxyz012345")
                .await
                .unwrap();
            tls.get_mut().shutdown().await.unwrap();
            let mut rest = Vec::new();
            let _ = tls.get_mut().read_to_end(&mut rest).await;
        });
        let (socket, _) = listener.accept().await.unwrap();
        let mut tls = acceptor.accept(socket).await.unwrap();
        let first = tls.read_bytes().await;
        assert_eq!(
            &first.expect("the data before the error").expect("data")[..],
            b"before"
        );
        let err = tls.read_bytes().await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
        // The error stays.
        assert!(tls.read_bytes().await.is_err());
        assert!(tls.write_all(b"x").await.is_err());
        drop(tls); // closes the socket: the client's read ends
        client.await.unwrap();
        assert_eq!(in_use(&pool), 0);
    });
}

/// A socket for the trickle test: an in-memory pipe for the handshake, then, once `script`
/// is set, reads that deliver one byte of it each, after a `Pending` each (polled by hand);
/// once `capture` is set, writes that land there.
struct Wire {
    pipe: tokio::io::DuplexStream,
    script: Option<std::collections::VecDeque<u8>>,
    /// How many bytes of the script each read delivers, in turn (then one).
    cuts: std::collections::VecDeque<usize>,
    delivered: usize,
    ready: bool,
    capture: Option<Vec<u8>>,
}

impl Wire {
    fn pair() -> (Wire, Wire) {
        let (a, b) = tokio::io::duplex(1 << 16);
        let wire = |pipe| Wire {
            pipe,
            script: None,
            cuts: std::collections::VecDeque::new(),
            delivered: 0,
            ready: false,
            capture: None,
        };
        (wire(a), wire(b))
    }
}

impl tokio::io::AsyncRead for Wire {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        let this = &mut *self;
        match &mut this.script {
            None => std::pin::Pin::new(&mut this.pipe).poll_read(cx, buf),
            Some(q) => {
                this.ready = !this.ready;
                if this.ready {
                    return std::task::Poll::Pending;
                }
                let n = this
                    .cuts
                    .pop_front()
                    .unwrap_or(1)
                    .clamp(1, buf.remaining())
                    .min(q.len());
                if n == 0 {
                    return std::task::Poll::Pending;
                }
                let bytes: Vec<u8> = q.drain(..n).collect();
                buf.put_slice(&bytes);
                this.delivered += n;
                std::task::Poll::Ready(Ok(()))
            }
        }
    }
}

impl tokio::io::AsyncWrite for Wire {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        data: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        let this = &mut *self;
        match &mut this.capture {
            Some(c) => {
                c.extend_from_slice(data);
                std::task::Poll::Ready(Ok(data.len()))
            }
            None => std::pin::Pin::new(&mut this.pipe).poll_write(cx, data),
        }
    }
    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.pipe).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.pipe).poll_shutdown(cx)
    }
}

/// The protocol issue's trickle, as TLS: a 4,000-byte record arriving one byte per read. The
/// server holds at most `max(2P, T0)` for the `P` bytes of it that have arrived, whenever it
/// waits, and every byte comes out once the record is whole.
#[test]
fn a_record_trickled_one_byte_at_a_time_holds_at_most_twice_what_arrived() {
    multi_thread().block_on(async {
        let pool = exact_pool();
        let floor = pool.tier_sizes()[0];
        let acceptor = TlsAcceptor::new(server_config(), pool.clone()).unwrap();
        let connector = TlsConnector::new(client_config(), exact_pool());
        let (a, b) = Wire::pair();
        let (server, client) = tokio::join!(acceptor.accept(a), connector.connect(localhost(), b));
        let (mut server, mut client) = (server.unwrap(), client.unwrap());
        client.get_mut().capture = Some(Vec::new());
        let data = pattern(4000, 9);
        client.write_all(&data).await.unwrap();
        client.flush().await.unwrap();
        let record = client.get_mut().capture.take().unwrap();
        assert!(
            record.len() > 4000 && record.len() < 4100,
            "{}",
            record.len()
        );
        server.get_mut().script = Some(record.iter().copied().collect());

        let waker = futures_util::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        let mut waits = 0;
        let got = loop {
            match server.poll_read_bytes(&mut cx) {
                std::task::Poll::Pending => {
                    waits += 1;
                    let p = server.get_ref().delivered;
                    let held = server.held_bytes();
                    assert!(
                        held <= (2 * p).max(floor),
                        "held {held} with {p} bytes of the record arrived"
                    );
                    assert_eq!(in_use(&pool), held);
                }
                std::task::Poll::Ready(r) => break r.unwrap().unwrap(),
            }
        };
        assert!(waits >= record.len(), "{waits} waits");
        assert_eq!(&got[..], &data[..]);
        drop(got);
        assert_eq!(server.held_bytes(), 0);
        assert_eq!(in_use(&pool), 0);
    });
}

#[test]
fn an_acceptor_refuses_a_config_that_takes_early_data() {
    let mut config = (*server_config()).clone();
    config.max_early_data_size = 16 << 10;
    let err = TlsAcceptor::new(Arc::new(config), BufferPool::new()).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
}

#[test]
fn a_client_refuses_a_server_whose_certificate_does_not_verify() {
    multi_thread().block_on(async {
        let pool = exact_pool();
        let acceptor = TlsAcceptor::new(server_config(), pool.clone()).unwrap();
        // A client that trusts no one.
        let config = Arc::new(
            ClientConfig::builder_with_provider(provider())
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth(),
        );
        let connector = TlsConnector::new(config, pool.clone());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (socket, _) = listener.accept().await.unwrap();
            acceptor.accept(socket).await.map(drop)
        });
        let socket = TcpStream::connect(addr).await.unwrap();
        let err = connector.connect(localhost(), socket).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
        assert!(
            matches!(
                err.get_ref()
                    .and_then(|e| e.downcast_ref::<rustls::Error>()),
                Some(rustls::Error::InvalidCertificate(_))
            ),
            "{err:?}"
        );
        // The server hears the client's alert.
        let server_err = server.await.unwrap().unwrap_err();
        assert_eq!(
            server_err.kind(),
            io::ErrorKind::InvalidData,
            "{server_err}"
        );
        assert_eq!(in_use(&pool), 0);
    });
}

/// A client that is not rustls: `openssl s_client`, TLS 1.2 and 1.3, its input echoed back.
#[test]
fn openssl_s_client_round_trips() {
    if std::process::Command::new("openssl")
        .arg("version")
        .output()
        .is_err()
    {
        // CI installs it (`.ci/run`); a machine without it cannot run this test.
        assert!(std::env::var_os("CI").is_none(), "openssl is not installed");
        eprintln!("openssl not installed: skipped");
        return;
    }
    multi_thread().block_on(async {
        let pool = exact_pool();
        let acceptor = TlsAcceptor::new(server_config(), pool.clone()).unwrap();
        for version in ["-tls1_2", "-tls1_3"] {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let input: String = (0..300)
                .map(|i| format!("line {i} of the openssl test\n"))
                .collect();
            let server = tokio::spawn(echo_server_until(listener, acceptor.clone(), input.len()));
            let out = tokio::task::spawn_blocking(move || {
                use std::io::Write;
                let mut child = std::process::Command::new("openssl")
                    .args(["s_client", "-quiet", "-ign_eof", version, "-connect"])
                    .arg(addr.to_string())
                    .args([
                        "-servername",
                        "localhost",
                        "-verify_return_error",
                        "-CAfile",
                    ])
                    .arg(format!("{DIR}/ca.pem"))
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap();
                let mut stdin = child.stdin.take().unwrap();
                let sent = input.clone();
                let writer = std::thread::spawn(move || {
                    stdin.write_all(sent.as_bytes()).unwrap();
                    // With -ign_eof, s_client waits for the server's close_notify.
                });
                let out = child.wait_with_output().unwrap();
                writer.join().unwrap();
                (input, out)
            })
            .await
            .unwrap();
            let (input, out) = out;
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                input,
                "openssl {version}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(server.await.unwrap().unwrap(), 0);
            assert_eq!(in_use(&pool), 0);
        }
    });
}

/// A connected pair over [`Wire`]s, handshake done.
async fn wired_pair(pool: &BufferPool) -> (TlsStream<Wire>, client::TlsStream<Wire>) {
    let acceptor = TlsAcceptor::new(server_config(), pool.clone()).unwrap();
    let connector = TlsConnector::new(client_config(), BufferPool::new());
    let (a, b) = Wire::pair();
    let (server, client) = tokio::join!(acceptor.accept(a), connector.connect(localhost(), b));
    (server.unwrap(), client.unwrap())
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    /// Records cut anywhere across reads (many records in one read, one record over many,
    /// a `Pending` between reads), with the views handed out either dropped at once or all
    /// kept alive to the end (so the records after them move to a buffer of their own):
    /// every byte comes out in order, and every buffer goes back.
    #[test]
    fn records_cut_anywhere_come_out_whole(
        writes in proptest::collection::vec(1usize..40_000, 1..8),
        cuts in proptest::collection::vec(1usize..20_000, 0..40),
        keep_views in proptest::bool::ANY,
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(async {
            let pool = exact_pool();
            let (mut server, mut client) = wired_pair(&pool).await;
            client.get_mut().capture = Some(Vec::new());
            let mut sent = Vec::new();
            for (i, &n) in writes.iter().enumerate() {
                let piece = pattern(n, i as u8);
                client.write_all(&piece).await.unwrap();
                sent.extend_from_slice(&piece);
            }
            client.flush().await.unwrap();
            let records = client.get_mut().capture.take().unwrap();
            let wire = server.get_mut();
            wire.script = Some(records.into_iter().collect());
            wire.cuts = cuts.iter().copied().collect();

            let waker = futures_util::task::noop_waker();
            let mut cx = std::task::Context::from_waker(&waker);
            let mut got = Vec::new();
            let mut kept = Vec::new();
            while got.len() < sent.len() {
                match server.poll_read_bytes(&mut cx) {
                    std::task::Poll::Pending => {}
                    std::task::Poll::Ready(r) => {
                        let view = r.unwrap().expect("data, not the end");
                        got.extend_from_slice(&view);
                        if keep_views {
                            kept.push(view);
                        }
                    }
                }
            }
            assert!(got == sent, "{} bytes out of {} differ", got.len(), sent.len());
            drop(kept);
            assert_eq!(server.held_bytes(), 0);
            assert_eq!(in_use(&pool), 0);
        });
    }
}

/// One `Arc<ServerConfig>` serves both acceptors, tokio-rustls' and this crate's (the port
/// keeps the configuration), and each side talks to the other's: a tokio-rustls client to
/// the pooled server, the pooled client to a tokio-rustls server.
#[test]
fn the_same_configuration_serves_tokio_rustls_and_talks_to_it() {
    multi_thread().block_on(async {
        let pool = exact_pool();
        let config = server_config();
        let pooled = TlsAcceptor::new(Arc::clone(&config), pool.clone()).unwrap();
        let stock = tokio_rustls::TlsAcceptor::from(Arc::clone(&config));
        let data = pattern(100_000, 9);

        // A tokio-rustls client against the pooled server.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(echo_server(listener, pooled));
        let client = tokio_rustls::TlsConnector::from(client_config());
        let socket = TcpStream::connect(addr).await.unwrap();
        let tls = client.connect(localhost(), socket).await.unwrap();
        let (mut r, mut w) = tokio::io::split(tls);
        let sent = data.clone();
        let writer = tokio::spawn(async move {
            w.write_all(&sent).await.unwrap();
            w.shutdown().await.unwrap();
            w
        });
        let mut echo = Vec::new();
        r.read_to_end(&mut echo).await.unwrap();
        writer.await.unwrap();
        assert!(echo == data, "the tokio-rustls client's echo differs");
        assert_eq!(server.await.unwrap().unwrap(), 0);

        // The pooled client against a tokio-rustls server.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (socket, _) = listener.accept().await?;
            let mut tls = stock.accept(socket).await?;
            let mut got = Vec::new();
            tls.read_to_end(&mut got).await?;
            tls.write_all(&got).await?;
            tls.shutdown().await?;
            io::Result::Ok(())
        });
        let connector = TlsConnector::new(client_config(), pool.clone());
        let socket = TcpStream::connect(addr).await.unwrap();
        let mut tls = connector.connect(localhost(), socket).await.unwrap();
        tls.write_all(&data).await.unwrap();
        tls.shutdown().await.unwrap();
        let mut echo = Vec::new();
        tls.read_to_end(&mut echo).await.unwrap();
        assert!(echo == data, "the tokio-rustls server's echo differs");
        server.await.unwrap().unwrap();
        drop(tls);
        assert_eq!(in_use(&pool), 0);
    });
}
