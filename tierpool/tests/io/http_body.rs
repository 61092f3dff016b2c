//! `http_body::Body` for `PooledBytes` and `PooledChain` (feature `http-body`): one data frame
//! each (the view, or the whole chain), with an exact size hint; the buffers go back when the
//! frames are dropped.

#![cfg(feature = "http-body")]

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use http_body::Body;
use tierpool::{BufferPool, PooledBytes, PooledChain};

struct Noop;
impl Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

/// Polls `body` to its end; returns the data frames.
fn frames<B: Body + Unpin>(mut body: B) -> Vec<B::Data>
where
    B::Error: std::fmt::Debug,
{
    let waker = Waker::from(Arc::new(Noop));
    let mut cx = Context::from_waker(&waker);
    let mut out = Vec::new();
    loop {
        match Pin::new(&mut body).poll_frame(&mut cx) {
            Poll::Ready(Some(f)) => match f.unwrap().into_data() {
                Ok(d) => out.push(d),
                Err(_) => panic!("data frames only"),
            },
            Poll::Ready(None) => break,
            Poll::Pending => panic!("a pooled body is always ready"),
        }
    }
    assert!(body.is_end_stream());
    assert_eq!(body.size_hint().exact(), Some(0));
    out
}

fn bytes(pool: &BufferPool, data: &[u8]) -> PooledBytes {
    let mut b = pool.get(data.len());
    b.extend_from_slice(data);
    b.into_shared()
}

#[test]
fn a_pooled_bytes_body_is_one_frame() {
    let pool = BufferPool::new();
    let body = bytes(&pool, b"hello body");
    assert_eq!(body.size_hint().exact(), Some(10));
    assert!(!body.is_end_stream());
    let got = frames(body);
    assert_eq!(got.len(), 1);
    assert_eq!(&got[0][..], b"hello body");
    assert_eq!(pool.stats().returned, 0, "the frame still holds the buffer");
    drop(got);
    assert_eq!(pool.stats().returned, 1);
    assert!(frames(PooledBytes::default()).is_empty());
}

#[test]
fn a_chain_body_is_the_whole_chain_in_one_frame() {
    use bytes::Buf;
    let pool = BufferPool::new();
    let chain: PooledChain = [&b"GET "[..], b"/pooled", b" HTTP/1.1"]
        .into_iter()
        .map(|p| bytes(&pool, p))
        .collect();
    assert_eq!(chain.size_hint().exact(), Some(20));
    let mut got = frames(chain);
    assert_eq!(got.len(), 1);
    // Its views reach a vectored write at once.
    let mut slices = [std::io::IoSlice::new(&[]); 8];
    assert_eq!(got[0].chunks_vectored(&mut slices), 3);
    let joined = got[0].copy_to_bytes(20);
    assert_eq!(&joined[..], b"GET /pooled HTTP/1.1");
    drop(got);
    let s = pool.stats();
    assert_eq!((s.gets, s.returned), (3, 3));
    assert!(frames(PooledChain::new()).is_empty());
}

#[test]
fn view_frames_are_one_frame_per_view_for_bytes_typed_stacks() {
    let pool = BufferPool::new();
    let chain: PooledChain = [&b"GET "[..], b"/pooled", b" HTTP/1.1"]
        .into_iter()
        .map(|p| bytes(&pool, p))
        .collect();
    let body = chain.into_view_frames();
    assert_eq!(body.size_hint().exact(), Some(20));
    let got = frames(body);
    assert_eq!(got.len(), 3);
    // Each view converts to `Bytes` without a copy: the same address.
    let first = got[0].as_ptr();
    let as_bytes: Vec<bytes::Bytes> = got.into_iter().map(bytes::Bytes::from).collect();
    assert_eq!(as_bytes[0].as_ptr(), first);
    let joined: Vec<u8> = as_bytes.iter().flat_map(|b| b.iter().copied()).collect();
    assert_eq!(&joined[..], b"GET /pooled HTTP/1.1");
    drop(as_bytes);
    let s = pool.stats();
    assert_eq!((s.gets, s.returned), (3, 3));
}
