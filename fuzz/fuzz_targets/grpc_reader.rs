//! The gRPC message reader over an HTTP/2 body played from arbitrary input: messages (plain,
//! gzip'd, with flags and lengths that may lie), garbage after them, cut anywhere with waits
//! between the pieces, ending cleanly, with trailers (OK or an error) or with a failed
//! connection. The pool holds buffers the program grew and gave back (more capacity than the
//! tier they are filed under). Checked against a plain parse of the same bytes: the same
//! messages, then the same status code; without a budget at most `max(2P, T0)` held at every
//! wait (or, for a message no longer than each of the two before it, its own length's
//! buffer); every buffer back at the end, with and without a budget.
//!
//! `cargo +nightly fuzz run grpc_reader` (from `fuzz/`).

#![no_main]

#[path = "common/mod.rs"]
mod common;

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use common::{concat, Chunk};
use http::{HeaderMap, HeaderValue};
use http_body::{Body, Frame};
use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use tierpool_tonic::{Encoding, MessageReader};
use tierpool::BufferPool;
use tonic::Code;

#[derive(Arbitrary, Debug)]
struct Message {
    /// The header's flag byte: 0 plain, 1 compressed, anything else a protocol error.
    flag: u8,
    payload: Vec<Chunk>,
    /// The payload gzip'd (with flag 1, a message a gzip stream sends).
    gzip: bool,
    /// Added to the header's length: a header that lies about its payload.
    lie: i8,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum End {
    Clean,
    TrailersOk,
    TrailersError(u8),
    Fail,
}

#[derive(Arbitrary, Debug)]
struct Input {
    messages: Vec<Message>,
    garbage: Vec<Chunk>,
    end: End,
    gzip_encoding: bool,
    max: u16,
    response: bool,
    budget: bool,
    cuts: Vec<u16>,
    waits: Vec<bool>,
    /// Buffers the program grew and gave back before the reading: a tier (by index, above
    /// the smallest) and how far past that tier's size the capacity goes (short of the
    /// next tier's: the pool files it under this one).
    grown: Vec<(u8, u16)>,
}

enum Step {
    Data(Vec<u8>),
    Pending,
    Trailers(HeaderMap),
    Fail,
}

struct Script(VecDeque<Step>);

impl Body for Script {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        match self.0.pop_front() {
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

fn gzip(payload: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(payload).unwrap();
    e.finish().unwrap()
}

fn trailers(code: Code) -> HeaderMap {
    let mut t = HeaderMap::new();
    t.insert("grpc-status", HeaderValue::from(code as i32));
    t
}

/// The error code a trailer's status byte stands for (an error: never OK).
fn error_code(byte: u8) -> Code {
    match Code::from(i32::from(byte % 16) + 1) {
        Code::Ok => Code::Unknown,
        code => code,
    }
}

/// The lengths the message headers in `wire` declare, in order (as far as headers parse).
fn declared(wire: &[u8]) -> Vec<usize> {
    let mut lens = Vec::new();
    let mut at = 0;
    while wire.len() - at >= 5 {
        let len = u32::from_be_bytes(wire[at + 1..at + 5].try_into().unwrap()) as usize;
        lens.push(len);
        at = at.saturating_add(5 + len).min(wire.len());
    }
    lens
}

/// What message `i` (of the declared lengths `lens`) may hold at a wait with `pending` bytes
/// arrived: `max(2P, T0)`, or, when it is no longer than each of the two before it (it then
/// takes its whole length at once), its tier's capacity (or less than the next tier's: a
/// grown buffer filed under its tier).
fn allowed(sizes: &[usize], lens: &[usize], i: usize, pending: usize) -> usize {
    let grown = (2 * pending).max(sizes[0]);
    match (i.checked_sub(2), lens.get(i)) {
        (Some(a), Some(&len)) if len <= lens[a].min(lens[a + 1]) => {
            let tier = sizes.iter().position(|&s| s >= len);
            let whole = match tier {
                Some(t) => sizes.get(t + 1).map_or(sizes[t], |&next| next - 1),
                None => len,
            };
            grown.max(whole)
        }
        _ => grown,
    }
}

/// The messages a plain parse of `wire` finds, and the code it ends with (`None`: a clean end).
fn reference(wire: &[u8], input: &Input, max: usize) -> (Vec<Vec<u8>>, Option<Code>) {
    let mut out = Vec::new();
    let mut at = 0;
    // Where the body ends inside a message or its header, the end event decides.
    let truncated = |out: Vec<Vec<u8>>| match input.end {
        End::Fail => (out, Some(Code::Unknown)),
        End::TrailersError(b) => (out, Some(error_code(b))),
        End::Clean | End::TrailersOk => (out, Some(Code::Internal)),
    };
    while at < wire.len() {
        if wire.len() - at < 5 {
            return truncated(out);
        }
        let flag = wire[at];
        let len = u32::from_be_bytes(wire[at + 1..at + 5].try_into().unwrap()) as usize;
        if flag > 1 || (flag == 1 && !input.gzip_encoding) {
            return (out, Some(Code::Internal));
        }
        if len > max {
            return (out, Some(Code::ResourceExhausted));
        }
        if wire.len() - at - 5 < len {
            return truncated(out);
        }
        let payload = &wire[at + 5..at + 5 + len];
        at += 5 + len;
        if flag == 0 {
            out.push(payload.to_vec());
            continue;
        }
        let mut plain = Vec::new();
        match flate2::read::GzDecoder::new(payload)
            .take(max as u64 + 1)
            .read_to_end(&mut plain)
        {
            Err(_) => return (out, Some(Code::Internal)),
            Ok(n) if n > max => return (out, Some(Code::ResourceExhausted)),
            Ok(_) => out.push(plain),
        }
    }
    match input.end {
        End::Fail => (out, Some(Code::Unknown)),
        End::TrailersError(b) => (out, Some(error_code(b))),
        End::TrailersOk => (out, None),
        End::Clean => (out, input.response.then_some(Code::Unknown)),
    }
}

fuzz_target!(|input: Input| {
    let max = usize::from(input.max);
    let mut wire = Vec::new();
    for m in &input.messages {
        let plain = concat(&m.payload);
        let payload = if m.gzip { gzip(&plain) } else { plain };
        let len = (payload.len() as i64 + i64::from(m.lie)).max(0) as u32;
        wire.push(m.flag);
        wire.extend_from_slice(&len.to_be_bytes());
        wire.extend_from_slice(&payload);
    }
    wire.extend_from_slice(&concat(&input.garbage));
    let (expected, expected_code) = reference(&wire, &input, max);

    // The wire cut at the input's offsets, a wait before each piece the input asks for.
    let mut steps: VecDeque<Step> = common::cut(&wire, &input.cuts, &input.waits, false)
        .into_iter()
        .map(|step| match step {
            common::Step::Data(d) => Step::Data(d),
            common::Step::Pending | common::Step::Err => Step::Pending,
        })
        .collect();
    match input.end {
        End::Clean => {}
        End::TrailersOk => steps.push_back(Step::Trailers(trailers(Code::Ok))),
        End::TrailersError(b) => steps.push_back(Step::Trailers(trailers(error_code(b)))),
        End::Fail => steps.push_back(Step::Fail),
    }

    let pool = if input.budget {
        BufferPool::builder()
            .max_in_use_bytes(1 << 30)
            .build()
            .unwrap()
    } else {
        BufferPool::new()
    };
    let sizes = pool.tier_sizes().to_vec();
    for &(tier, past) in input.grown.iter().take(8) {
        let t = 1 + usize::from(tier) % (sizes.len() - 2);
        let room = sizes[t + 1] - sizes[t];
        pool.put(Vec::with_capacity(sizes[t] + usize::from(past) % room));
    }
    let puts = pool.stats().returned;
    let lens = declared(&wire);
    let mut reader = MessageReader::new(Script(steps), pool.clone())
        .max_message_size(max)
        .encoding(input.gzip_encoding.then_some(Encoding::Gzip));
    if input.response {
        reader = reader.response();
    }
    let mut cx = Context::from_waker(Waker::noop());
    let mut got = Vec::new();
    let code = loop {
        match reader.poll_message(&mut cx) {
            Poll::Ready(Some(Ok(m))) => got.push(m),
            Poll::Ready(Some(Err(status))) => break Some(status.code()),
            Poll::Ready(None) => break None,
            Poll::Pending => {
                // Under a budget a message's buffer is charged whole up front (the budget
                // bounds it instead).
                let (held, pending) = (reader.held_bytes(), reader.pending_bytes());
                assert!(
                    input.budget || held <= allowed(&sizes, &lens, got.len(), pending),
                    "{held} bytes held for {pending} pending, message {} of {lens:?}",
                    got.len()
                );
            }
        }
    };
    let got_bytes: Vec<Vec<u8>> = got.iter().map(|m| m.to_vec()).collect();
    assert_eq!(got_bytes, expected);
    assert_eq!(code, expected_code);
    drop(reader);
    drop(got);
    let s = pool.stats();
    assert_eq!(s.gets, s.returned - puts, "every buffer back: {s}");
    if let Some(budget) = &s.budget {
        assert_eq!(budget.in_use_bytes, 0, "{s}");
    }
});
