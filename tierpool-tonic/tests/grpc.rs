//! gRPC under tonic through the pool (`tierpool_tonic`): the message reader against bodies
//! cut anywhere (the same messages, the bound on a wait, nothing held between messages, every
//! buffer back), bad input as statuses, gzip, the budget's back-pressure; then a real tonic
//! server and channel over loopback: the codec under tonic's own unary path, a bidi method
//! served by `PooledMethods` and called by tonic's own client and by `PooledClient`.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::io::Write;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use futures_util::StreamExt;
use http::HeaderMap;
use http_body::{Body as HttpBody, Frame};
use proptest::prelude::*;
use tierpool::BufferPool;
use tierpool_tonic::{
    Decoded, Encoding, MessageReader, PooledClient, PooledCodec, PooledMethods, PooledStreaming,
};
use tonic::body::Body;
use tonic::codegen::Service;
use tonic::server::{NamedService, UnaryService};
use tonic::{Code, Request, Response, Status};

/// A test message: one `bytes` field, generated as `Bytes` (a view of the pooled buffer).
#[derive(Clone, PartialEq, prost::Message)]
struct Ping {
    #[prost(bytes = "bytes", tag = "1")]
    data: Bytes,
}

/// What a scripted body does next.
#[derive(Debug, Clone)]
enum Step {
    Data(Vec<u8>),
    Pending,
    Trailers(HeaderMap),
    Fail,
}

/// An HTTP/2 body as h2 hands one over, played from a script (then its end). Counts the
/// frames it was polled for, so a test can tell that a reader stopped pulling.
#[derive(Debug, Default)]
struct Script {
    steps: VecDeque<Step>,
    polls: usize,
}

impl Script {
    fn new(steps: impl IntoIterator<Item = Step>) -> Self {
        Script {
            steps: steps.into_iter().collect(),
            polls: 0,
        }
    }
}

impl HttpBody for Script {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        self.polls += 1;
        match self.steps.pop_front() {
            None => Poll::Ready(None),
            Some(Step::Data(d)) => Poll::Ready(Some(Ok(Frame::data(Bytes::from(d))))),
            Some(Step::Trailers(t)) => Poll::Ready(Some(Ok(Frame::trailers(t)))),
            Some(Step::Fail) => Poll::Ready(Some(Err(std::io::Error::other("connection reset")))),
            Some(Step::Pending) => {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        }
    }
}

/// `payload` with gRPC's header (`flag` 0: plain, 1: compressed).
fn framed(flag: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![flag];
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

fn gzip(payload: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(payload).unwrap();
    e.finish().unwrap()
}

/// Polls `reader` to its end with a no-op waker: the messages, or the status it ended with.
/// At every `Pending`, checks the bound (`allowed`).
fn drain(reader: &mut MessageReader<Script>) -> (Vec<Vec<u8>>, Option<Status>) {
    drain_checking(reader, true)
}

/// The lengths the message headers in the script's data declare, in order (as far as
/// headers parse): what the reader's rule sees, compressed or not.
fn declared(script: &Script) -> Vec<usize> {
    let wire: Vec<u8> = script
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::Data(d) => Some(&d[..]),
            _ => None,
        })
        .flatten()
        .copied()
        .collect();
    let (mut lens, mut at) = (Vec::new(), 0);
    while wire.len() - at >= 5 {
        let len = u32::from_be_bytes(wire[at + 1..at + 5].try_into().unwrap()) as usize;
        lens.push(len);
        at = at.saturating_add(5 + len).min(wire.len());
    }
    lens
}

/// What message `i` of the declared lengths `lens` may hold at a wait, `pending` of its bytes
/// arrived: at most `max(2P, T0)`; or, when it is no longer than each of the two before it
/// (it then takes its whole length at once), its length's tier.
fn allowed(sizes: &[usize], lens: &[usize], i: usize, pending: usize) -> usize {
    let grown = (2 * pending).max(sizes[0]);
    match (i.checked_sub(2), lens.get(i)) {
        (Some(a), Some(&len)) if len <= lens[a].min(lens[a + 1]) => {
            grown.max(sizes.iter().copied().find(|&s| s >= len).unwrap_or(len))
        }
        _ => grown,
    }
}

/// [`drain`], checking the bound at every wait or not (under a budget, a message's buffer is
/// taken whole: the budget bounds it instead).
fn drain_checking(
    reader: &mut MessageReader<Script>,
    bound: bool,
) -> (Vec<Vec<u8>>, Option<Status>) {
    let mut cx = Context::from_waker(Waker::noop());
    let lens = declared(reader.get_ref());
    let sizes = BufferPool::new().tier_sizes().to_vec();
    let mut out = Vec::new();
    loop {
        match reader.poll_message(&mut cx) {
            Poll::Ready(Some(Ok(m))) => out.push(m.to_vec()),
            Poll::Ready(Some(Err(s))) => return (out, Some(s)),
            Poll::Ready(None) => return (out, None),
            Poll::Pending => {
                // `held_bytes` is a capacity; the message under way is the next one out.
                let (held, pending) = (reader.held_bytes(), reader.pending_bytes());
                assert!(
                    !bound || held <= allowed(&sizes, &lens, out.len(), pending),
                    "held {held} for {pending} pending, message {} of {lens:?}",
                    out.len()
                );
            }
        }
    }
}

/// The wire bytes cut at `cuts` (positions, any order), with a `Pending` after each piece.
fn cut(wire: &[u8], cuts: &[usize]) -> Vec<Step> {
    let mut at: Vec<usize> = cuts.iter().map(|c| c % (wire.len() + 1)).collect();
    at.sort_unstable();
    at.dedup();
    let mut steps = Vec::new();
    let mut from = 0;
    for c in at.into_iter().chain([wire.len()]) {
        if c > from {
            steps.push(Step::Data(wire[from..c].to_vec()));
            steps.push(Step::Pending);
            from = c;
        }
    }
    steps
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 128 }))]

    /// Any messages, cut anywhere: the same messages out, the bound held at every wait, and
    /// every buffer back once they are dropped.
    #[test]
    fn messages_cut_anywhere_come_out_whole(
        sizes in proptest::collection::vec(0usize..70_000, 1..6),
        cuts in proptest::collection::vec(0usize..400_000, 0..40),
    ) {
        let pool = BufferPool::new();
        let messages: Vec<Vec<u8>> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| (0..n).map(|j| (i * 31 + j) as u8).collect())
            .collect();
        let wire: Vec<u8> = messages.iter().flat_map(|m| framed(0, m)).collect();
        let mut reader = MessageReader::new(Script::new(cut(&wire, &cuts)), pool.clone());
        let (got, status) = drain(&mut reader);
        prop_assert!(status.is_none(), "{status:?}");
        prop_assert_eq!(got, messages);
        drop(reader);
        let s = pool.stats();
        prop_assert_eq!(s.gets, s.returned);
    }
}

#[test]
fn between_messages_nothing_is_held() {
    let pool = BufferPool::new();
    let mut wire = framed(0, &[7; 100_000]);
    wire.extend_from_slice(&framed(0, &[8; 10])[..3]); // the next header, in part
    let mut reader = MessageReader::new(
        Script::new([Step::Data(wire), Step::Pending, Step::Pending]),
        pool.clone(),
    );
    let mut cx = Context::from_waker(Waker::noop());
    let Poll::Ready(Some(Ok(first))) = reader.poll_message(&mut cx) else {
        panic!("the first message")
    };
    assert_eq!(first.len(), 100_000);
    assert!(reader.poll_message(&mut cx).is_pending());
    assert_eq!(reader.held_bytes(), 0, "three header bytes, no buffer");
    drop(first);
    drop(reader);
    let s = pool.stats();
    assert_eq!(s.gets, s.returned);
}

/// Messages of the lengths `first`, arrived at once, then one of `last` bytes whose first
/// 200,000 come a thousand at a time with a wait after each piece: the gets each message
/// took, and at each wait, the bytes held and arrived.
fn trickle_after(first: &[usize], last: usize) -> (Vec<u64>, Vec<(usize, usize)>) {
    let pool = BufferPool::new();
    let mut steps: Vec<Step> = first
        .iter()
        .map(|&n| Step::Data(framed(0, &vec![1; n])))
        .collect();
    let wire = framed(0, &vec![2; last]);
    let cuts: Vec<usize> = (0..200).map(|i| 5 + i * 1000).collect();
    steps.extend(cut(&wire[..5 + 200 * 1000], &cuts));
    steps.push(Step::Data(wire[5 + 200 * 1000..].to_vec()));
    let mut reader = MessageReader::new(Script::new(steps), pool.clone());
    let mut cx = Context::from_waker(Waker::noop());
    let (mut gets, mut waits) = (Vec::new(), Vec::new());
    let mut before = 0;
    loop {
        match reader.poll_message(&mut cx) {
            Poll::Ready(Some(Ok(m))) => {
                assert!(m.len() == last || first.contains(&m.len()));
                gets.push(pool.stats().gets - before);
                before = pool.stats().gets;
            }
            Poll::Ready(None) => break,
            Poll::Ready(Some(Err(s))) => panic!("{s:?}"),
            Poll::Pending => waits.push((reader.held_bytes(), reader.pending_bytes())),
        }
    }
    assert_eq!(gets.len(), first.len() + 1);
    drop(reader);
    let s = pool.stats();
    assert_eq!(s.gets, s.returned, "every buffer back");
    (gets, waits)
}

#[test]
fn a_trickled_large_message_holds_twice_what_arrived() {
    let floor = BufferPool::new().tier_sizes()[0];
    // First on its stream, after one message, longer than the two before it, and longer
    // than one of them: each grows with what arrives, and each wait holds at most
    // `max(2P, T0)`.
    for (first, last) in [
        (&[][..], 1 << 20),
        (&[1 << 20][..], 1 << 20),
        (&[1 << 20, 1 << 20][..], 2 << 20),
        (&[512 << 10, 2 << 20][..], 1 << 20),
    ] {
        let (_, waits) = trickle_after(first, last);
        assert!(waits.len() > 200, "{}", waits.len());
        for (held, pending) in waits {
            assert!(
                held <= (2 * pending).max(floor),
                "after {first:?}: {held} held for {pending} pending"
            );
        }
    }
}

/// Buffers the program grew and gave back sit in the pool filed under a tier, with more
/// capacity than it: the reader's bound still holds at every wait (it passes such a buffer
/// over for the next tier down), where taking the tier within the bound as it came would
/// hold more than twice what arrived.
#[test]
fn with_grown_buffers_in_the_pool_a_wait_still_holds_at_most_twice_what_arrived() {
    let pool = BufferPool::new();
    let floor = pool.tier_sizes()[0];
    // Pieces whose bounds (twice what arrived) fall just short of a tier: the tier within
    // the bound is then one step below it, and a grown buffer filed under that tier
    // (capacity up to the next tier) is over the bound.
    let mut pieces = Vec::new();
    let mut arrived = 0;
    for &tier in pool.tier_sizes().iter().skip(1).take(12) {
        let target = tier / 2 + 8; // bound = tier + 16: the tier fits, its grown buffers may not
        if target > arrived {
            pieces.push(target - arrived);
            arrived = target;
        }
        // Grown buffers filed under this tier: more capacity than the next bound.
        let next = pool.capacity_for(tier + 1);
        pool.put(Vec::with_capacity(next - 1));
        pool.put(Vec::with_capacity(next - 1));
    }
    let len = 1 << 20;
    let wire = framed(0, &vec![3; len]);
    let mut steps = vec![Step::Data(wire[..5].to_vec()), Step::Pending];
    let mut at = 5;
    for n in pieces {
        steps.push(Step::Data(wire[at..at + n].to_vec()));
        steps.push(Step::Pending);
        at += n;
    }
    steps.push(Step::Data(wire[at..].to_vec()));
    let mut reader = MessageReader::new(Script::new(steps), pool.clone());
    let mut cx = Context::from_waker(Waker::noop());
    let mut waits = 0;
    let got = loop {
        match reader.poll_message(&mut cx) {
            Poll::Ready(Some(Ok(m))) => break m,
            Poll::Ready(other) => panic!("{other:?}"),
            Poll::Pending => {
                let (held, pending) = (reader.held_bytes(), reader.pending_bytes());
                assert!(
                    held <= (2 * pending).max(floor),
                    "{held} bytes held for {pending} arrived"
                );
                waits += 1;
            }
        }
    };
    assert_eq!(got.len(), len);
    assert!(waits >= 10, "{waits} waits");
}

#[test]
fn a_message_as_long_as_the_two_before_it_is_copied_once_through_its_waits() {
    // Two 1 MiB messages, then one trickled in 200 pieces: it takes its whole length at its
    // header (the peer sent two as long first) and keeps it, one buffer however often the
    // reader waits, and no more than that buffer.
    let len = 1 << 20;
    let (gets, waits) = trickle_after(&[len, len], len);
    assert_eq!(gets[2], 1, "buffers taken per message: {gets:?}");
    assert!(waits.len() > 200, "{}", waits.len());
    let whole = BufferPool::new().get(len).capacity();
    assert!(
        waits.iter().all(|&(held, p)| held == whole || p == 0),
        "{waits:?}"
    );
}

#[test]
fn same_sized_messages_take_one_buffer_each() {
    let pool = BufferPool::new();
    let len = 1 << 20;
    let wire: Vec<u8> = (0..6).flat_map(|_| framed(0, &vec![3; len])).collect();
    // h2's frames: 16 KiB each, all arrived (no wait).
    let steps = wire.chunks(16 << 10).map(|c| Step::Data(c.to_vec()));
    let mut reader = MessageReader::new(Script::new(steps), pool.clone());
    let mut cx = Context::from_waker(Waker::noop());
    let mut gets = Vec::new();
    for _ in 0..6 {
        let before = pool.stats().gets;
        let Poll::Ready(Some(Ok(m))) = reader.poll_message(&mut cx) else {
            panic!()
        };
        assert_eq!(m.len(), len);
        gets.push(pool.stats().gets - before);
    }
    // The first two grow with what arrives; from the third on, the message's own length is
    // taken at once: one buffer, one copy of each byte.
    assert_eq!(
        &gets[2..],
        &[1, 1, 1, 1],
        "buffers taken per message: {gets:?}"
    );
}

#[test]
fn a_length_over_the_limit_is_refused_before_any_memory_is_taken() {
    let pool = BufferPool::new();
    let mut header = vec![0];
    header.extend_from_slice(&(64u32 << 20).to_be_bytes());
    let mut reader = MessageReader::new(Script::new([Step::Data(header)]), pool.clone());
    let (got, status) = drain(&mut reader);
    assert!(got.is_empty());
    let status = status.expect("refused");
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains("67108864"), "{status:?}");
    assert_eq!(pool.stats().gets, 0, "nothing taken");
}

#[test]
fn bad_input_is_a_clear_status_and_every_buffer_comes_back() {
    let cases: Vec<(&str, Vec<Step>, Option<Encoding>, Code)> = vec![
        (
            "compressed flag, no encoding",
            vec![Step::Data(framed(1, b"abc"))],
            None,
            Code::Internal,
        ),
        (
            "flag 2",
            vec![Step::Data(framed(2, b"abc"))],
            None,
            Code::Internal,
        ),
        (
            "ends inside a message",
            vec![Step::Data(framed(0, &[1; 5000])[..3000].to_vec())],
            None,
            Code::Internal,
        ),
        (
            "ends inside a header",
            vec![Step::Data(vec![0, 0])],
            None,
            Code::Internal,
        ),
        (
            "gzip that is not gzip",
            vec![Step::Data(framed(1, b"not gzip at all"))],
            Some(Encoding::Gzip),
            Code::Internal,
        ),
        (
            "a decompression bomb",
            vec![Step::Data(framed(1, &gzip(&vec![0; 64 << 20])))],
            Some(Encoding::Gzip),
            Code::ResourceExhausted,
        ),
        (
            "the connection fails",
            vec![
                Step::Data(framed(0, &[1; 5000])[..100].to_vec()),
                Step::Fail,
            ],
            None,
            Code::Unknown,
        ),
    ];
    for (what, steps, encoding, code) in cases {
        let pool = BufferPool::new();
        let mut reader = MessageReader::new(Script::new(steps), pool.clone()).encoding(encoding);
        let (got, status) = drain(&mut reader);
        assert!(got.is_empty(), "{what}");
        let status = status.unwrap_or_else(|| panic!("{what}: no error"));
        assert_eq!(status.code(), code, "{what}: {status:?}");
        assert!(
            reader.next_is_none(),
            "{what}: the stream ends after its error"
        );
        drop(reader);
        let s = pool.stats();
        assert_eq!(s.gets, s.returned, "{what}: every buffer back");
    }
}

/// After an error the reader is over.
trait NextIsNone {
    fn next_is_none(&mut self) -> bool;
}

impl NextIsNone for MessageReader<Script> {
    fn next_is_none(&mut self) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        matches!(self.poll_message(&mut cx), Poll::Ready(None))
    }
}

#[test]
fn an_unknown_encoding_is_unimplemented() {
    let mut headers = HeaderMap::new();
    headers.insert("grpc-encoding", "snappy".parse().unwrap());
    let err =
        MessageReader::for_headers(Script::default(), BufferPool::new(), &headers).unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented);
    headers.insert("grpc-encoding", "gzip".parse().unwrap());
    assert!(MessageReader::for_headers(Script::default(), BufferPool::new(), &headers).is_ok());
}

#[test]
fn gzip_messages_are_decompressed_into_pooled_memory() {
    let pool = BufferPool::new();
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let mut wire = framed(1, &gzip(&big));
    wire.extend_from_slice(&framed(0, b"plain"));
    wire.extend_from_slice(&framed(1, &gzip(b"")));
    let cuts: Vec<usize> = (0..wire.len()).step_by(777).collect();
    let mut reader = MessageReader::new(Script::new(cut(&wire, &cuts)), pool.clone())
        .encoding(Some(Encoding::Gzip));
    let (got, status) = drain(&mut reader);
    assert!(status.is_none(), "{status:?}");
    assert_eq!(got, vec![big, b"plain".to_vec(), Vec::new()]);
    drop(reader);
    let s = pool.stats();
    assert_eq!(s.gets, s.returned);
}

#[test]
fn trailers_with_an_error_end_the_stream_with_it() {
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", "8".parse().unwrap());
    trailers.insert("grpc-message", "slow down".parse().unwrap());
    let steps = [Step::Data(framed(0, b"one")), Step::Trailers(trailers)];
    let mut reader = MessageReader::new(Script::new(steps), BufferPool::new());
    let (got, status) = drain(&mut reader);
    assert_eq!(got, vec![b"one".to_vec()]);
    let status = status.expect("the trailers' status");
    assert_eq!(
        (status.code(), status.message()),
        (Code::ResourceExhausted, "slow down")
    );
    assert!(reader.trailers().is_some());
}

#[test]
fn under_a_budget_the_reader_stops_pulling_until_there_is_room() {
    let pool = BufferPool::builder()
        .max_in_use_bytes(1 << 20)
        .build()
        .unwrap();
    let held = pool.get(1 << 20);
    let wire = framed(0, &[5; 64 << 10]);
    let steps = cut(&wire, &[5, 20_000]);
    let mut reader = MessageReader::new(Script::new(steps), pool.clone());
    let mut cx = Context::from_waker(Waker::noop());
    assert!(reader.poll_message(&mut cx).is_pending());
    let polls = reader.get_ref().polls;
    for _ in 0..5 {
        assert!(reader.poll_message(&mut cx).is_pending());
    }
    assert_eq!(
        reader.get_ref().polls,
        polls,
        "the body is not polled while the budget is spent"
    );
    drop(held);
    let (got, status) = drain_checking(&mut reader, false);
    assert!(status.is_none(), "{status:?}");
    assert_eq!(got, vec![vec![5; 64 << 10]]);
}

// --- A real tonic server and channel over loopback. ---

/// A unary echo, run by tonic's own server path with the pooled codec.
#[derive(Clone)]
struct EchoUnary;

impl UnaryService<Ping> for EchoUnary {
    type Response = Ping;
    type Future = std::future::Ready<Result<Response<Ping>, Status>>;

    fn call(&mut self, request: Request<Ping>) -> Self::Future {
        std::future::ready(Ok(Response::new(request.into_inner())))
    }
}

/// What a generated `EchoServer` is: a service with a name that answers its methods with
/// tonic's `Grpc`; here with one unary method and the codec under test.
#[derive(Clone)]
struct Echo {
    pool: BufferPool,
}

impl NamedService for Echo {
    const NAME: &'static str = "test.Echo";
}

impl Service<http::Request<Body>> for Echo {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<http::Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let codec = PooledCodec::<Ping, Ping>::with_pool(self.pool.clone());
        match request.uri().path() {
            "/test.Echo/Unary" => Box::pin(async move {
                Ok(tonic::server::Grpc::new(codec)
                    .unary(EchoUnary, request)
                    .await)
            }),
            _ => Box::pin(std::future::ready(Ok(Status::unimplemented(
                "no such method",
            )
            .into_http()))),
        }
    }
}

/// A bidi echo through the pooled path: each ping back as a pong; a ping of "fail" ends the
/// stream with `ABORTED` after what came before.
async fn chat(
    request: PooledStreaming<Ping>,
) -> Result<Response<impl futures_util::Stream<Item = Result<Ping, Status>>>, Status> {
    let pings: Decoded<Ping, Body> = request.into_inner();
    let pongs = pings.map(|ping| match ping {
        Ok(p) if &p.data[..] == b"fail" => Err(Status::aborted("asked to fail")),
        other => other,
    });
    Ok(Response::new(pongs))
}

async fn serve(pool: BufferPool) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let service = PooledMethods::new(Echo { pool: pool.clone() }, pool)
        .streaming("/test.Echo/Chat", chat)
        .unwrap()
        .unary(
            "/test.Echo/PooledUnary",
            |request: Request<Ping>| async move {
                let ping = request.into_inner();
                if &ping.data[..] == b"fail" {
                    return Err(Status::aborted("asked to fail"));
                }
                Ok(Response::new(ping))
            },
        )
        .unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    addr
}

/// A path outside the wrapped service (a method of another service, a malformed path) is
/// refused when its handler is registered, never served by the inner service in silence.
#[test]
fn a_path_outside_the_wrapped_service_is_refused_when_registered() {
    let pool = BufferPool::new();
    let methods = || PooledMethods::new(Echo { pool: pool.clone() }, pool.clone());
    for path in [
        "/other.Echo/Chat",
        "/test.Echo",
        "/test.Echo/",
        "test.Echo/Chat",
        "/test.EchoChat",
        "/test.Echo/Chat/more",
        "/test.Echox/Chat",
    ] {
        let err = methods().streaming(path, chat).unwrap_err();
        assert_eq!((err.path(), err.service()), (path, "test.Echo"));
        assert!(err.to_string().contains("/test.Echo/Method"), "{err}");
        let unary = |r: Request<Ping>| async move { Ok(Response::new(r.into_inner())) };
        assert!(methods().unary(path, unary).is_err(), "{path}");
    }
    // The wrapped service's own methods are taken.
    assert!(methods().streaming("/test.Echo/Chat", chat).is_ok());
    assert!(methods().streaming("/test.Echo/Chta", chat).is_ok()); // tonic lists no methods
}

async fn channel(addr: std::net::SocketAddr) -> tonic::transport::Channel {
    tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

fn ping(data: &[u8]) -> Ping {
    Ping {
        data: Bytes::copy_from_slice(data),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tonic_clients_and_the_pooled_client_talk_to_the_pooled_server() {
    let server_pool = BufferPool::new();
    let addr = serve(server_pool.clone()).await;
    let client_pool = BufferPool::new();
    let channel = channel(addr).await;

    // Unary, through tonic's own client and server paths with the codec on both sides.
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    grpc.ready().await.unwrap();
    let big = vec![9u8; 3 << 20];
    let answer: Response<Ping> = grpc
        .unary(
            Request::new(ping(&big)),
            http::uri::PathAndQuery::from_static("/test.Echo/Unary"),
            PooledCodec::<Ping, Ping>::with_pool(client_pool.clone()),
        )
        .await
        .unwrap();
    assert_eq!(answer.into_inner().data.len(), big.len());

    // Bidi served by `PooledMethods`, called by tonic's own client (its `Streaming`).
    let pings = futures_util::stream::iter([ping(b"a"), ping(&[1; 200_000]), ping(b"c")]);
    grpc.ready().await.unwrap();
    let response: Response<tonic::Streaming<Ping>> = grpc
        .streaming(
            Request::new(pings),
            http::uri::PathAndQuery::from_static("/test.Echo/Chat"),
            PooledCodec::<Ping, Ping>::with_pool(client_pool.clone()),
        )
        .await
        .unwrap();
    let mut pongs = response.into_inner();
    let mut lens = Vec::new();
    while let Some(p) = pongs.message().await.unwrap() {
        lens.push(p.data.len());
    }
    assert_eq!(lens, vec![1, 200_000, 1]);

    // Bidi through `PooledClient`, a status in the trailers after the messages before it.
    let mut client = PooledClient::new(channel.clone(), client_pool.clone());
    let pings = futures_util::stream::iter([ping(b"x"), ping(&[2; 1 << 20]), ping(b"fail")]);
    let mut pongs = client
        .streaming::<Ping, Ping, _>("/test.Echo/Chat", Request::new(pings))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(&pongs.message().await.unwrap().unwrap().data[..], b"x");
    assert_eq!(pongs.message().await.unwrap().unwrap().data.len(), 1 << 20);
    let err = pongs.message().await.unwrap_err();
    assert_eq!(
        (err.code(), err.message()),
        (Code::Aborted, "asked to fail")
    );
    drop(pongs);

    // A method the inner service does not have: its own answer, unchanged.
    let err = client
        .streaming::<Ping, Ping, _>(
            "/test.Echo/Nope",
            Request::new(futures_util::stream::iter([ping(b"?")])),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented);

    // A request over the server's limit: RESOURCE_EXHAUSTED.
    let pings = futures_util::stream::iter([ping(&vec![0; 5 << 20])]);
    let mut pongs = client
        .streaming::<Ping, Ping, _>("/test.Echo/Chat", Request::new(pings))
        .await
        .unwrap()
        .into_inner();
    let err = pongs.message().await.unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
}

// --- The send side, without a network. ---

/// Polls `body` to its end: its data frames and its trailers.
fn frames_of<B: HttpBody<Data = Bytes> + Unpin>(mut body: B) -> (Vec<Bytes>, Option<HeaderMap>)
where
    B::Error: std::fmt::Debug,
{
    let mut cx = Context::from_waker(Waker::noop());
    let (mut data, mut trailers) = (Vec::new(), None);
    loop {
        match Pin::new(&mut body).poll_frame(&mut cx) {
            Poll::Ready(Some(Ok(f))) => match f.into_data() {
                Ok(d) => data.push(d),
                Err(f) => trailers = f.into_trailers().ok(),
            },
            Poll::Ready(Some(Err(e))) => panic!("{e:?}"),
            Poll::Ready(None) => return (data, trailers),
            Poll::Pending => panic!("a ready stream is never pending"),
        }
    }
}

/// A unary method served by `PooledMethods::unary`, called by tonic's own client: the message
/// and its answer whole, the handler's status, a request with no message or with two
/// refused, and every buffer of the server's pool back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unary_method_served_through_the_pooled_path() {
    let server_pool = BufferPool::new();
    let addr = serve(server_pool.clone()).await;
    let client_pool = BufferPool::new();
    let mut grpc = tonic::client::Grpc::new(channel(addr).await);
    let path = || http::uri::PathAndQuery::from_static("/test.Echo/PooledUnary");
    let codec = || PooledCodec::<Ping, Ping>::with_pool(client_pool.clone());
    for len in [0, 1, 70_000, 3 << 20] {
        let sent = (0..len).map(|i| (i % 251) as u8).collect::<Vec<u8>>();
        grpc.ready().await.unwrap();
        let answer: Response<Ping> = grpc
            .unary(Request::new(ping(&sent)), path(), codec())
            .await
            .unwrap();
        assert_eq!(answer.into_inner().data, sent);
    }
    grpc.ready().await.unwrap();
    let failed = grpc
        .unary(Request::new(ping(b"fail")), path(), codec())
        .await
        .unwrap_err();
    assert_eq!(failed.code(), Code::Aborted);
    for count in [0, 2] {
        let pings = futures_util::stream::iter((0..count).map(|_| ping(b"x")));
        grpc.ready().await.unwrap();
        let refused = grpc
            .client_streaming::<_, Ping, Ping, _>(Request::new(pings), path(), codec())
            .await
            .unwrap_err();
        assert_eq!(
            refused.code(),
            Code::Internal,
            "{count} messages: {refused:?}"
        );
    }
    // The server's buffers come back once its tasks have let go of them.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let s = server_pool.stats();
        if s.gets == s.returned {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{s}");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

#[test]
fn ready_messages_are_batched_and_each_comes_back_out_whole() {
    use tierpool_tonic::{EncodeBody, BATCH_BYTES};
    let pool = BufferPool::new();
    let sizes = [10, 20_000, 12_000, 40_000, 1, 0, 32_000, 700];
    let messages: Vec<Ping> = sizes.iter().map(|&n| ping(&vec![n as u8; n])).collect();
    let stream = futures_util::stream::iter(messages.clone().into_iter().map(Ok));
    let (data, trailers) = frames_of(EncodeBody::response(stream, pool.clone()));
    assert_eq!(trailers.unwrap()["grpc-status"], "0");
    // Each frame holds whole messages, at most BATCH_BYTES unless it is one message.
    let mut wire = Vec::new();
    for d in &data {
        let mut at = 0;
        let mut count = 0;
        while at < d.len() {
            at += 5 + u32::from_be_bytes(d[at + 1..at + 5].try_into().unwrap()) as usize;
            count += 1;
        }
        assert_eq!(at, d.len(), "whole messages per frame");
        assert!(
            count == 1 || d.len() <= BATCH_BYTES,
            "{count} messages in {} bytes",
            d.len()
        );
        wire.extend_from_slice(d);
    }
    assert!(
        data.len() < messages.len(),
        "some batched: {} frames",
        data.len()
    );
    drop(data);
    let body = Script::new([Step::Data(wire)]);
    let decoded = Decoded::<Ping, Script>::new(MessageReader::new(body, pool.clone()));
    let got: Vec<Ping> = futures_executor_block_on(decoded.map(Result::unwrap).collect());
    assert_eq!(got, messages);
    drop(got); // their `Bytes` fields are views of pooled buffers
    let s = pool.stats();
    assert_eq!(s.gets, s.returned);
}

#[test]
fn a_spent_budget_does_not_stop_a_response_and_an_error_ends_it_in_trailers() {
    use tierpool_tonic::EncodeBody;
    let pool = BufferPool::builder()
        .max_in_use_bytes(1 << 20)
        .build()
        .unwrap();
    let held = pool.get(1 << 20); // spent
    let sent = [ping(&[1; 100]), ping(&vec![2; 2 << 20])]; // the second: larger than the budget
    let wire: usize = sent
        .iter()
        .map(|m| 5 + prost::Message::encoded_len(m))
        .sum();
    let stream = futures_util::stream::iter(sent.into_iter().map(Ok))
        .chain(futures_util::stream::iter([Err(Status::data_loss("gone"))]));
    let (data, trailers) = frames_of(EncodeBody::response(stream, pool.clone()));
    assert_eq!(data.iter().map(Bytes::len).sum::<usize>(), wire);
    let trailers = trailers.expect("trailers");
    assert_eq!(
        Status::from_header_map(&trailers).unwrap().code(),
        Code::DataLoss
    );
    drop(held);
}

#[test]
fn a_response_that_ends_without_a_status_is_unknown() {
    let steps = [Step::Data(framed(0, b"one"))];
    let mut reader = MessageReader::new(Script::new(steps), BufferPool::new()).response();
    let (got, status) = drain(&mut reader);
    assert_eq!(got, vec![b"one".to_vec()]);
    assert_eq!(status.expect("no grpc-status").code(), Code::Unknown);
    let mut ok = HeaderMap::new();
    ok.insert("grpc-status", "0".parse().unwrap());
    let steps = [Step::Data(framed(0, b"one")), Step::Trailers(ok)];
    let mut reader = MessageReader::new(Script::new(steps), BufferPool::new()).response();
    assert!(drain(&mut reader).1.is_none());
}

#[test]
fn a_message_that_does_not_decode_ends_the_stream() {
    let mut wire = framed(0, &[0xff, 0xff, 0xff]); // not a Ping
    wire.extend_from_slice(&framed(0, b""));
    let decoded = Decoded::<Ping, Script>::new(MessageReader::new(
        Script::new([Step::Data(wire)]),
        BufferPool::new(),
    ));
    let got: Vec<Result<Ping, Status>> = futures_executor_block_on(decoded.collect());
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].as_ref().unwrap_err().code(), Code::Internal);
}

/// Runs a future that is ready without waiting (the scripted bodies here never wait).
fn futures_executor_block_on<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    match f.as_mut().poll(&mut cx) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("pending"),
    }
}
