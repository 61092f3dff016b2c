//! The `upload_server` example, run as a user runs it, in both modes: curl over HTTP/1.1 and
//! HTTP/2 (prior knowledge), JSON, a body over the 16 MiB limit; then, in pooled mode under an
//! 8 MiB budget, more uploads at once than it holds, each more than the budget divided by the
//! uploads: twenty of 4 MiB over HTTP/1.1 (a connection each) and two hundred of 256 KiB over
//! HTTP/2 (four connections): every one completes with its checksum.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// The example's binary, built beside this test (`cargo test` builds the examples; a test
/// run alone builds it).
fn example() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(|deps| deps.parent()).unwrap();
    let path = profile_dir.join("examples").join("upload_server");
    if !path.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut build = Command::new(cargo);
        build.args(["build", "-p", "tierpool-axum", "--example", "upload_server"]);
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
    fn start(args: &[&str]) -> Server {
        let mut child = Command::new(example())
            .args(["--addr", "127.0.0.1:0"])
            .args(args)
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

    /// curl's answer: the status and body. curl itself must succeed.
    fn curl(&self, args: &[&str], path: &str) -> (u16, String) {
        let (ok, code, body) = self.curl_any(args, path);
        assert!(ok, "curl {args:?} {path} failed");
        (code, body)
    }

    /// curl's answer whether curl succeeded or not (a server that answers a body over the
    /// limit before it is sent resets the rest of it, and curl reports that).
    fn curl_any(&self, args: &[&str], path: &str) -> (bool, u16, String) {
        let out = Command::new("curl")
            .args(["-sS", "-o", "-", "-w", "\n%{http_code}"])
            .args(args)
            .arg(format!("http://127.0.0.1:{}{path}", self.port))
            .output()
            .expect("curl (the tests need it)");
        let text = String::from_utf8(out.stdout).unwrap();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
        (
            out.status.success(),
            code.trim().parse().unwrap_or(0),
            body.to_string(),
        )
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn pattern(n: usize, seed: u32) -> Vec<u8> {
    (0..n as u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 24) as u8 ^ seed as u8)
        .collect()
}

#[test]
fn both_modes_answer_curl_the_same_over_http1_and_http2() {
    let body = pattern(3 << 20, 1);
    let file = std::env::temp_dir().join(format!("upload_server_{}", std::process::id()));
    std::fs::File::create(&file)
        .unwrap()
        .write_all(&body)
        .unwrap();
    let data = format!("@{}", file.display());
    let want = format!(
        "{{\"crc32\":{},\"len\":{}}}",
        crc32fast::hash(&body),
        body.len()
    );
    let big = std::env::temp_dir().join(format!("upload_server_big_{}", std::process::id()));
    std::fs::File::create(&big)
        .unwrap()
        .write_all(&vec![0; (16 << 20) + 1])
        .unwrap();
    let too_big = format!("@{}", big.display());
    for mode in ["stock", "pooled"] {
        let server = Server::start(&["--mode", mode]);
        for version in ["--http1.1", "--http2-prior-knowledge"] {
            let (code, text) = server.curl(&[version, "--data-binary", &data], "/upload");
            assert_eq!(
                (code, text.as_str()),
                (200, want.as_str()),
                "{mode} {version}"
            );
            let json = [
                "-H",
                "content-type: application/json",
                "-d",
                r#"{"a":1,"b":[2],"c":{}}"#,
            ];
            let (code, text) = server.curl(&[&[version][..], &json[..]].concat(), "/json");
            assert_eq!(
                (code, text.as_str()),
                (200, r#"{"keys":3}"#),
                "{mode} {version}"
            );
        }
        // Over the limit: refused. (Over HTTP/2 the server answers 413 and then resets the
        // stream whose rest it does not read, as RFC 9113 section 8.1 allows; curl 7.88 drops
        // such an answer, so HTTP/2's is checked with hyper's client below.)
        let (ok, code, _) = server.curl_any(&["--http1.1", "--data-binary", &too_big], "/upload");
        assert_eq!((ok, code), (true, 413), "{mode}");
        let status = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async {
                let client = Client::builder(TokioExecutor::new())
                    .http2_only(true)
                    .build_http();
                let req = hyper::Request::post(format!("http://127.0.0.1:{}/upload", server.port))
                    .body(Full::new(Bytes::from(vec![0u8; (16 << 20) + 1])))
                    .unwrap();
                client.request(req).await.unwrap().status()
            });
        assert_eq!(status, 413, "{mode}, HTTP/2");
    }
    std::fs::remove_file(&file).unwrap();
    std::fs::remove_file(&big).unwrap();
}

#[test]
fn more_uploads_than_the_budget_holds_all_complete_over_http1_and_http2() {
    let server = Server::start(&["--mode", "pooled", "--budget-mib", "8"]);
    let port = server.port;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        // HTTP/2: four clients (a connection each), fifty streams each.
        let h2_clients: Vec<_> = (0..4)
            .map(|_| {
                Client::builder(TokioExecutor::new())
                    .http2_only(true)
                    .build_http()
            })
            .collect();
        let mut tasks = Vec::new();
        for i in 0..220u32 {
            // HTTP/1.1: a client (a connection) each, 4 MiB; HTTP/2: 256 KiB.
            let h2 = i >= 20;
            let (client, len) = if h2 {
                (h2_clients[i as usize % 4].clone(), 256 << 10)
            } else {
                (Client::builder(TokioExecutor::new()).build_http(), 4 << 20)
            };
            tasks.push(tokio::spawn(async move {
                let body = pattern(len, i);
                let want = format!(
                    "{{\"crc32\":{},\"len\":{}}}",
                    crc32fast::hash(&body),
                    body.len()
                );
                let req = hyper::Request::post(format!("http://127.0.0.1:{port}/upload"))
                    .body(Full::new(Bytes::from(body)))
                    .unwrap();
                let resp = client.request(req).await.unwrap();
                let status = resp.status();
                let text = resp.into_body().collect().await.unwrap().to_bytes();
                assert_eq!(status, 200, "upload {i} (HTTP/2: {h2})");
                assert_eq!(String::from_utf8_lossy(&text), want, "upload {i}");
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
}
