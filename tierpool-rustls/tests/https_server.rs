//! The `https_server` example, run as a user runs it and driven by curl (HTTP/1.1 and HTTP/2
//! by ALPN, a 1 MiB body echoed) and by a tokio-rustls client whose connections then idle:
//! the server's pool has nothing out while they do.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use rustls::pki_types::{pem::PemObject, CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");

/// The example's binary, built beside this test (`cargo test` builds the examples; a test
/// run alone builds it).
fn example() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(|deps| deps.parent()).unwrap();
    let path = profile_dir.join("examples").join("https_server");
    if !path.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut build = Command::new(cargo);
        build.args([
            "build",
            "-p",
            "tierpool-rustls",
            "--example",
            "https_server",
        ]);
        if !cfg!(debug_assertions) {
            build.arg("--release");
        }
        assert!(build.status().unwrap().success(), "building the example");
    }
    path
}

/// The running example; killed when dropped.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start() -> Server {
        let mut child = Command::new(example())
            .args(["--addr", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("the example said {line:?}"));
        Server { child, port }
    }

    /// curl against the server with `args`: its output.
    fn curl(&self, args: &[&str], path: &str) -> Vec<u8> {
        let out = Command::new("curl")
            .args(["-sS", "--fail", "--cacert", &format!("{DIR}/ca.pem")])
            .args(["--resolve", &format!("localhost:{}:127.0.0.1", self.port)])
            .args(args)
            .arg(format!("https://localhost:{}{path}", self.port))
            .output()
            .expect("curl (the tests need it)");
        assert!(
            out.status.success(),
            "curl: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }

    /// The bytes the server's pool has out.
    fn in_use(&self) -> usize {
        String::from_utf8(self.curl(&[], "/stats"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn curl_gets_and_echoes_over_http1_and_http2() {
    let server = Server::start();
    assert_eq!(server.curl(&["--http1.1"], "/"), b"hello\n");
    let version = server.curl(
        &["--http2", "-o", "/dev/null", "-w", "%{http_version}"],
        "/",
    );
    assert_eq!(version, b"2");

    let body: Vec<u8> = (0..1 << 20)
        .map(|i: u32| (i * 7 + i / 1000) as u8)
        .collect();
    let file = std::env::temp_dir().join(format!("https_server_body_{}", std::process::id()));
    std::fs::File::create(&file)
        .unwrap()
        .write_all(&body)
        .unwrap();
    let data = format!("@{}", file.display());
    for version in ["--http1.1", "--http2"] {
        let echo = server.curl(&[version, "--data-binary", &data], "/echo");
        assert!(echo == body, "{version}: the echo differs");
    }
    std::fs::remove_file(&file).unwrap();
}

#[test]
fn idle_keep_alive_connections_hold_no_pooled_buffer() {
    let server = Server::start();
    let port = server.port;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(format!("{DIR}/ca.pem")).unwrap())
        .unwrap();
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let idle = runtime.block_on(async {
        let mut idle = Vec::new();
        for _ in 0..20 {
            let socket = tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .unwrap();
            let name = ServerName::try_from("localhost").unwrap();
            let mut tls = connector.connect(name, socket).await.unwrap();
            tls.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
                .await
                .unwrap();
            let mut reply = Vec::new();
            while !reply.ends_with(b"hello\n") {
                let mut chunk = [0; 512];
                let n = tls.read(&mut chunk).await.unwrap();
                assert!(n > 0, "the server closed a keep-alive connection");
                reply.extend_from_slice(&chunk[..n]);
            }
            idle.push(tls); // kept open, idle
        }
        idle
    });
    assert_eq!(server.in_use(), 0, "20 idle keep-alive TLS connections");
    drop(idle);
}
