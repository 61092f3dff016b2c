//! The `grpc_server` binary in both modes against tonic's generated client (every method of
//! `grpc.testing.BenchmarkService`, answers checked, a request over the limit refused) and
//! against grpc's C-core through Python's `grpcio` (`tests/fixtures/grpc_client.py`), which
//! is required where `TIERPOOL_REQUIRE_GRPCIO=1` (as `.ci/run` sets it) and skipped with a
//! line otherwise.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use futures_util::StreamExt;
use tierpool_bench::fixtures::grpc::stock::benchmark_service_client::BenchmarkServiceClient;
use tierpool_bench::fixtures::grpc::SimpleRequest;
use tonic::Code;

/// A `grpc_server` child on a free port, stopped (SIGTERM) and checked to exit cleanly when
/// dropped.
struct Server {
    child: Child,
    addr: String,
}

impl Server {
    /// Starts one with these arguments besides its address (`--mode ...`).
    fn start(args: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_grpc_server"))
            .args(["--addr", "127.0.0.1:0"])
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("grpc_server starts");
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .strip_prefix("listening on ")
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_string();
        Server { child, addr }
    }

    /// Stops it with SIGTERM: it must exit with success and print its last stats line.
    fn stop(&mut self) -> String {
        // SAFETY: `kill` with a child's pid and a valid signal number.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let mut rest = String::new();
        std::io::Read::read_to_string(self.child.stdout.as_mut().unwrap(), &mut rest).unwrap();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "grpc_server exited with {status}");
        rest
    }
}

impl Drop for Server {
    /// A test that fails leaves no server behind (it would hold the test's output open).
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The code of a request over the limit tells which reader served a method: tonic's framing
/// (stock, and the codec behind it) refuses with `OUT_OF_RANGE`, the pooled reader with
/// `RESOURCE_EXHAUSTED`. `refused`: the codes expected for a unary and a bidi request.
async fn tonic_client_calls_every_method(addr: &str, refused: Refused) {
    let mut client = BenchmarkServiceClient::connect(format!("http://{addr}"))
        .await
        .unwrap()
        .max_decoding_message_size(8 << 20)
        .max_encoding_message_size(8 << 20);
    let body_len = |r: &tierpool_bench::fixtures::grpc::SimpleResponse| {
        r.payload.as_ref().map_or(0, |p| p.body.len())
    };

    let r = client
        .unary_call(SimpleRequest::new(1 << 20, 3000, 1))
        .await
        .unwrap();
    assert_eq!(body_len(r.get_ref()), 3000);

    let sizes = [(1, 10), (100_000, 1 << 20), (1 << 20, 7), (0, 0)];
    let requests = futures_util::stream::iter(sizes.map(|(s, r)| SimpleRequest::new(s, r, 2)));
    let mut answers = client.streaming_call(requests).await.unwrap().into_inner();
    let mut got = Vec::new();
    while let Some(r) = answers.message().await.unwrap() {
        got.push(body_len(&r));
    }
    assert_eq!(got, sizes.map(|(_, r)| r));

    let requests = futures_util::stream::iter([
        SimpleRequest::new(3 << 20, 1, 3),
        SimpleRequest::new(10, 55, 3),
    ]);
    let r = client.streaming_from_client(requests).await.unwrap();
    assert_eq!(body_len(r.get_ref()), 55);

    let mut answers = client
        .streaming_from_server(SimpleRequest::new(5, 64_000, 4))
        .await
        .unwrap()
        .into_inner();
    for _ in 0..20 {
        assert_eq!(body_len(&answers.message().await.unwrap().unwrap()), 64_000);
    }
    drop(answers); // cancels the call

    let requests = futures_util::stream::iter([SimpleRequest::new(100, 1000, 5)])
        .chain(futures_util::stream::pending());
    let mut answers = client
        .streaming_both_ways(requests)
        .await
        .unwrap()
        .into_inner();
    for _ in 0..10 {
        assert_eq!(body_len(&answers.message().await.unwrap().unwrap()), 1000);
    }
    drop(answers);

    // Over the server's 4 MiB limit: refused by the reader that serves each method, and the
    // server goes on.
    let err = client
        .unary_call(SimpleRequest::new(5 << 20, 1, 6))
        .await
        .unwrap_err();
    assert_eq!(err.code(), refused.unary, "{err:?}");
    let requests = futures_util::stream::iter([SimpleRequest::new(5 << 20, 1, 6)]);
    let mut answers = client.streaming_call(requests).await.unwrap().into_inner();
    let err = answers.message().await.unwrap_err();
    assert_eq!(err.code(), refused.bidi, "{err:?}");
    let r = client
        .unary_call(SimpleRequest::new(1, 1, 7))
        .await
        .unwrap();
    assert_eq!(body_len(r.get_ref()), 1);
}

/// Python's grpcio (grpc's C-core), if this machine has it: `grpc_client.py addr args..`.
fn grpcio_client(addr: &str) {
    grpcio(addr, &[]);
}

fn grpcio(addr: &str, args: &[&str]) {
    let has = Command::new("/usr/bin/python3")
        .args(["-c", "import grpc"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !has {
        assert!(
            std::env::var("TIERPOOL_REQUIRE_GRPCIO").as_deref() != Ok("1"),
            "TIERPOOL_REQUIRE_GRPCIO=1 but /usr/bin/python3 has no grpc module (apt-get install python3-grpcio)"
        );
        eprintln!(
            "skipped: grpc's C-core client (/usr/bin/python3 with python3-grpcio) is not installed"
        );
        return;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/grpc_client.py");
    let out = Command::new("/usr/bin/python3")
        .args([script, addr])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success() && out.stdout.starts_with(b"ok"),
        "grpcio client: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The codes a request over the limit is refused with, by method kind.
#[derive(Clone, Copy)]
struct Refused {
    unary: Code,
    bidi: Code,
}

/// Tonic's framing for both: the stock server.
const TONIC: Refused = Refused {
    unary: Code::OutOfRange,
    bidi: Code::OutOfRange,
};

/// The pooled server: the codec for unary calls (tonic's framing), the pooled reader for
/// bidi ones.
const CODEC_AND_READER: Refused = Refused {
    unary: Code::OutOfRange,
    bidi: Code::ResourceExhausted,
};

/// The pooled reader for both: `UnaryCall` through `PooledMethods::unary`.
const READER: Refused = Refused {
    unary: Code::ResourceExhausted,
    bidi: Code::ResourceExhausted,
};

fn serves_tonic_and_grpcio(args: &[&str], refused: Refused) {
    let mut server = Server::start(args);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(tonic_client_calls_every_method(&server.addr, refused));
    grpcio_client(&server.addr);
    let last = server.stop();
    drop(server);
    assert!(last.contains("stats requests="), "{last:?}");
}

#[test]
fn the_stock_server_answers_tonic_and_grpcio() {
    serves_tonic_and_grpcio(&["--mode", "stock"], TONIC);
}

#[test]
fn the_pooled_server_answers_tonic_and_grpcio() {
    serves_tonic_and_grpcio(&["--mode", "pooled"], CODEC_AND_READER);
}

/// `UnaryCall` through `PooledMethods::unary` instead of the codec.
#[test]
fn the_pooled_server_with_the_unary_reader_answers_tonic_and_grpcio() {
    serves_tonic_and_grpcio(&["--mode", "pooled", "--unary", "reader"], READER);
}

/// Under a 64 MiB budget, more streams than it holds on one connection all complete: twenty
/// streams each sending a 3 MiB message and five small ones (grpc's C-core client; without
/// the server's HTTP/2 windows set for the budget, waiting streams held the connection's
/// window and every stream stalled, in 3 of 8 runs), eight rounds over; then the report's
/// seed shape, 150 bidi streams ping-ponging 1 MiB messages on one connection (tonic's
/// client), every answer its size.
#[test]
fn under_a_budget_more_streams_than_it_holds_all_complete() {
    let mut server = Server::start(&["--mode", "pooled", "--budget-mib", "64"]);
    grpcio(&server.addr, &["flood", "20", &(3 << 20).to_string(), "8"]);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let client = BenchmarkServiceClient::connect(format!("http://{}", server.addr))
                .await
                .unwrap()
                .max_decoding_message_size(8 << 20)
                .max_encoding_message_size(8 << 20);
            let mut streams = Vec::new();
            for i in 0..150u8 {
                let mut client = client.clone();
                streams.push(tokio::spawn(async move {
                    let requests = futures_util::stream::iter(
                        (0..3).map(move |_| SimpleRequest::new(1 << 20, 1 << 20, i)),
                    );
                    let mut answers = client.streaming_call(requests).await.unwrap().into_inner();
                    let mut n = 0;
                    while let Some(r) = answers.message().await.unwrap() {
                        assert_eq!(r.payload.map_or(0, |p| p.body.len()), 1 << 20);
                        n += 1;
                    }
                    assert_eq!(n, 3, "stream {i}");
                }));
            }
            for s in streams {
                s.await.unwrap();
            }
        });
    server.stop();
}
