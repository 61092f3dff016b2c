//! The `kv_server` binary in both modes, plain and over TLS (the `redis` and `soak` workloads
//! drive it with `redis-benchmark` and hostile peers): replies checked command by command,
//! pipelined commands, a value larger than any read, a frame it refuses, `INFO`'s pool
//! account back to zero once the clients are gone, a clean exit on SIGTERM.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

/// A `kv_server` child on a free port, stopped (SIGTERM) and checked to exit cleanly.
struct Server {
    child: Child,
    port: u16,
}

fn tls_file(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tierpool-rustls/tests/data")
        .join(name)
}

impl Server {
    fn start(mode: &str, framing: &str, tls: bool) -> Server {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kv_server"));
        cmd.args([
            "--addr",
            "127.0.0.1:0",
            "--mode",
            mode,
            "--framing",
            framing,
            "--max-in-use",
            "16777216",
        ]);
        if tls {
            cmd.arg("--tls-cert").arg(tls_file("server.pem"));
            cmd.arg("--tls-key").arg(tls_file("server.key"));
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .spawn()
            .expect("kv_server starts");
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .split_whitespace()
            .find_map(|w| w.rsplit_once(':')?.1.parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        Server { child, port }
    }

    /// Stops it with SIGTERM: it must exit with success.
    fn stop(mut self) {
        // SAFETY: `kill` with a child's pid and a valid signal number.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let status = self.child.wait().unwrap();
        assert!(status.success(), "kv_server exited with {status}");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A client connection, plain or TLS (rustls 0.23, trusting the test CA).
trait Conn: Read + Write {}
impl<T: Read + Write> Conn for T {}

fn connect(port: u16, tls: bool) -> Box<dyn Conn> {
    let sock = TcpStream::connect(("127.0.0.1", port)).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    if !tls {
        return Box::new(sock);
    }
    let mut roots = rustls::RootCertStore::empty();
    let ca = std::fs::read(tls_file("ca.pem")).unwrap();
    for cert in rustls_pemfile_certs(&ca) {
        roots.add(cert).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = "localhost".try_into().unwrap();
    let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    Box::new(rustls::StreamOwned::new(conn, sock))
}

/// The certificates of a PEM file.
fn rustls_pemfile_certs(pem: &[u8]) -> Vec<rustls::pki_types::CertificateDer<'static>> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .unwrap()
}

/// `args` as a RESP array of bulk strings.
fn command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Reads exactly `expected.len()` bytes and compares them.
fn expect(c: &mut dyn Conn, expected: &[u8]) {
    let mut got = vec![0; expected.len()];
    c.read_exact(&mut got).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(expected)
    );
}

/// `INFO`'s field `name`.
fn info(c: &mut dyn Conn, name: &str) -> u64 {
    c.write_all(&command(&[b"INFO"])).unwrap();
    let mut head = Vec::new();
    let mut byte = [0];
    while !head.ends_with(b"\r\n") {
        c.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    let len: usize = std::str::from_utf8(&head[1..head.len() - 2])
        .unwrap()
        .parse()
        .unwrap();
    let mut body = vec![0; len + 2];
    c.read_exact(&mut body).unwrap();
    let body = String::from_utf8(body).unwrap();
    body.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:"))?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {body:?}"))
}

fn session(mode: &str, framing: &str, tls: bool) {
    let server = Server::start(mode, framing, tls);
    let mut c = connect(server.port, tls);
    c.write_all(&command(&[b"PING"])).unwrap();
    expect(&mut *c, b"+PONG\r\n");
    c.write_all(b"PING hello\r\n").unwrap(); // inline
    expect(&mut *c, b"$5\r\nhello\r\n");
    // A value larger than any one read, binary, then read back.
    let value: Vec<u8> = (0..300_000u32).map(|i| (i * 7 + i / 1000) as u8).collect();
    c.write_all(&command(&[b"SET", b"k", &value])).unwrap();
    expect(&mut *c, b"+OK\r\n");
    c.write_all(&command(&[b"GET", b"k"])).unwrap();
    let mut reply = format!("${}\r\n", value.len()).into_bytes();
    reply.extend_from_slice(&value);
    reply.extend_from_slice(b"\r\n");
    expect(&mut *c, &reply);
    // Pipelined: every reply, in order.
    let mut pipeline = Vec::new();
    for i in 0..200 {
        pipeline.extend(command(&[b"SET", format!("p{i}").as_bytes(), b"v"]));
        pipeline.extend(command(&[b"DEL", format!("p{i}").as_bytes(), b"absent"]));
    }
    pipeline.extend(command(&[b"GET", b"p0"]));
    pipeline.extend(command(&[b"NOPE", b"x"]));
    c.write_all(&pipeline).unwrap();
    for _ in 0..200 {
        expect(&mut *c, b"+OK\r\n:1\r\n");
    }
    expect(&mut *c, b"$-1\r\n");
    expect(
        &mut *c,
        b"-ERR unknown command 'NOPE', with args beginning with: 'x'\r\n",
    );
    c.write_all(&command(&[b"GET"])).unwrap();
    expect(
        &mut *c,
        b"-ERR wrong number of arguments for 'get' command\r\n",
    );
    // A frame it refuses: an error, then the connection closes.
    let mut bad = connect(server.port, tls);
    bad.write_all(b"*1\r\n$-5\r\n").unwrap();
    expect(&mut *bad, b"-ERR protocol error: bad bulk length -5\r\n");
    let mut rest = Vec::new();
    let _ = bad.read_to_end(&mut rest);
    assert!(rest.is_empty(), "bytes after the error: {rest:?}");
    drop(bad);
    // Nothing held once every frame is read (pooled: the exact account; baseline: 0). The
    // refused connection's task may still be dropping its read half when its peer sees the
    // end (the write half closes the socket first), so the account is read until it is 0,
    // for up to 5 s.
    if mode == "pooled" {
        assert_eq!(info(&mut *c, "pool_max_in_use_bytes"), 16 << 20);
    }
    let mut in_use = info(&mut *c, "pool_in_use_bytes");
    for _ in 0..500 {
        if in_use == 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        in_use = info(&mut *c, "pool_in_use_bytes");
    }
    assert_eq!(in_use, 0, "bytes in use after every frame was read");
    drop(c);
    server.stop();
}

#[test]
fn pooled_plain() {
    session("pooled", "codec", false);
}

#[test]
fn baseline_plain() {
    session("baseline", "codec", false);
}

#[test]
fn pooled_tls() {
    session("pooled", "codec", true);
}

#[test]
fn baseline_tls() {
    session("baseline", "codec", true);
}

/// mini-redis's `Connection` shape (`--framing connection`): the same answers, and in pooled
/// mode nothing held between commands (`ReadBuffer`, tierpool's `BufWriter`).
#[test]
fn pooled_connection_shape() {
    session("pooled", "connection", false);
}

#[test]
fn baseline_connection_shape() {
    session("baseline", "connection", false);
}

#[test]
fn pooled_connection_shape_tls() {
    session("pooled", "connection", true);
}

#[test]
fn bad_command_lines_exit_2_with_the_usage() {
    for args in [
        &["--mode", "fast"][..],
        &["--framing", "lines"],
        &["--tls-cert", "x"],
        &["--max-in-use", "lots"],
        &["--addr"],
        &["--what"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_kv_server"))
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("usage: kv_server"));
    }
    let out = Command::new(env!("CARGO_BIN_EXE_kv_server"))
        .args([
            "--tls-cert",
            "/nonexistent.pem",
            "--tls-key",
            "/nonexistent.key",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent.pem"));
}
