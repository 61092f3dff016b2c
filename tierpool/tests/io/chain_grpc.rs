//! gRPC-Go's `mem` tests for `BufferSlice` (`mem/buffer_slice_test.go`: `Len`, `Ref`,
//! `LazyMaterialize`, `Reader`, `Writer`), ported to `PooledChain`, and the reader's needs
//! they point at: a look ahead without consuming (`Peek`), skipping (`Discard`), one byte at a
//! time (`ReadByte`), a contiguous view without a copy for a one-view chain, and a read of a
//! whole stream that keeps its bytes when it fails.

use std::io::{Read, Write};

use tierpool::{BufferPool, PooledBytes, PooledChain};

fn view(pool: &BufferPool, data: &[u8]) -> PooledBytes {
    let mut b = pool.get(data.len());
    b.extend_from_slice(data);
    b.into_shared()
}

fn abcd_times(pool: &BufferPool, n: usize) -> PooledChain {
    (0..n).map(|_| view(pool, b"abcd")).collect()
}

/// `TestBufferSlice_Len`: empty, single, multiple.
#[test]
fn len() {
    let pool = BufferPool::new();
    for (n, want) in [(0, 0), (1, 4), (3, 12)] {
        assert_eq!(abcd_times(&pool, n).len(), want, "{n} views");
    }
}

/// `TestBufferSlice_Ref`: a reference (here a clone) still reads the data after the original
/// is freed.
#[test]
fn a_clone_outlives_the_original() {
    let pool = BufferPool::new();
    let chain = abcd_times(&pool, 2);
    let copy = chain.clone();
    drop(chain);
    assert_eq!(copy.materialize(&pool)[..], b"abcdabcd"[..]);
    assert_eq!(
        pool.stats().returned,
        1,
        "only the materialized buffer is back"
    );
    drop(copy);
    assert_eq!(pool.stats().returned, 3);
}

/// `TestBufferSlice_LazyMaterialize`: a single view is given back without the pool; several
/// are copied into one buffer.
#[test]
fn contiguous_takes_no_buffer_for_one_view() {
    let pool = BufferPool::new();
    let single = abcd_times(&pool, 1);
    let gets = pool.stats().gets;
    let one = single.contiguous(&pool);
    assert_eq!(&one[..], b"abcd");
    assert_eq!(pool.stats().gets, gets, "no buffer taken, no copy");
    assert_eq!(one.as_ptr(), single.parts().next().unwrap().as_ptr());
    let multiple = abcd_times(&pool, 3);
    let gets = pool.stats().gets;
    let joined = multiple.contiguous(&pool);
    assert_eq!(&joined[..], b"abcdabcdabcd");
    assert_eq!(pool.stats().gets, gets + 1, "one buffer for the copy");
    assert!(PooledChain::new().contiguous(&pool).is_empty());
}

/// `TestBufferSlice_Reader`: read one byte at a time to the end; the original still holds
/// its data.
#[test]
fn reading_a_clone_byte_by_byte() {
    let pool = BufferPool::new();
    let chain = abcd_times(&pool, 3);
    let mut reader = chain.clone();
    let mut got = Vec::new();
    loop {
        let mut one = [0u8; 1];
        match reader.read(&mut one).unwrap() {
            0 => break,
            n => got.extend_from_slice(&one[..n]),
        }
    }
    assert_eq!(got, b"abcdabcdabcd");
    assert_eq!(chain.to_vec(), b"abcdabcdabcd");
}

/// `TestBufferSlice_Writer`: each write copied into a pooled buffer appended to the chain.
#[test]
fn a_writer_appends_pooled_copies() {
    let pool = BufferPool::new();
    let mut chain = PooledChain::new();
    let mut w = chain.writer(&pool);
    for data in [b"abcd", b"abcd", b"abcd"] {
        assert_eq!(w.write(data).unwrap(), 4);
    }
    assert_eq!(w.write(b"").unwrap(), 0);
    assert_eq!(chain.to_vec(), b"abcdabcdabcd");
    assert_eq!(chain.num_parts(), 3);
    // Under a budget with no room, a write is an error, not a wait.
    let tight = BufferPool::builder()
        .max_in_use_bytes(4096)
        .build()
        .unwrap();
    let held = tight.get(4096);
    let err = chain.writer(&tight).write(b"x").unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::OutOfMemory);
    drop(held);
}

/// `Reader.Peek`: look ahead across views without consuming, as a copy or as views.
#[test]
fn peeking_across_views_consumes_nothing() {
    let pool = BufferPool::new();
    let chain: PooledChain = [view(&pool, b"\x00\x00"), view(&pool, b"\x00\x07payload")]
        .into_iter()
        .collect();
    let mut header = [0u8; 4];
    assert_eq!(chain.peek(&mut header), 4);
    assert_eq!(u32::from_be_bytes(header), 7);
    let mut all = [0u8; 64];
    assert_eq!(chain.peek(&mut all), 11, "no more than the chain holds");
    let head = chain.prefix(3);
    assert_eq!(
        (head.to_vec(), head.num_parts()),
        (b"\x00\x00\x00".to_vec(), 2)
    );
    assert_eq!(chain.prefix(100).len(), 11);
    assert_eq!(chain.len(), 11, "nothing consumed");
    let gets = pool.stats().gets;
    drop(head);
    assert_eq!(pool.stats().gets, gets, "views, not copies");
}

/// `Reader.Discard` and `Reader.ReadByte`.
#[test]
fn discarding_and_popping_bytes() {
    let pool = BufferPool::new();
    let mut chain = abcd_times(&pool, 3);
    assert_eq!(chain.pop_byte(), Some(b'a'));
    assert_eq!(chain.discard(5), 5);
    assert_eq!(chain.to_vec(), b"cdabcd");
    assert_eq!(
        chain.discard(100),
        6,
        "no more than the chain holds, no panic"
    );
    assert_eq!(chain.pop_byte(), None);
    let mut one = abcd_times(&pool, 1);
    for b in *b"abcd" {
        assert_eq!(one.pop_byte(), Some(b));
    }
    assert!(one.is_empty() && one.num_parts() == 0);
    drop((chain, one));
    let s = pool.stats();
    assert_eq!(s.gets, s.returned, "{s}");
}

#[cfg(feature = "tokio")]
/// gRPC-Go's `ReadAll` returns the bytes read before an error with it; `read_all_into`
/// keeps them in the chain.
#[tokio::test]
async fn a_failed_read_all_keeps_what_it_read() {
    struct FailAfter(usize);
    impl tokio::io::AsyncRead for FailAfter {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _cx: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            if self.0 == 0 {
                return std::task::Poll::Ready(Err(std::io::Error::other("connection reset")));
            }
            let n = self.0.min(buf.remaining()).min(700);
            buf.put_slice(&vec![9u8; n]);
            self.0 -= n;
            std::task::Poll::Ready(Ok(()))
        }
    }
    let pool = BufferPool::new();
    let mut chain = PooledChain::new();
    let err = chain
        .read_all_into(&mut FailAfter(5000), &pool, 1024, 1 << 20)
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "connection reset");
    assert_eq!(chain.to_vec(), vec![9u8; 5000], "every byte read is kept");
    // And past the limit: the bytes read so far stay too.
    let mut long = PooledChain::new();
    let data = vec![3u8; 10_000];
    let err = long
        .read_all_into(&mut &data[..], &pool, 1024, 4000)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
    assert!(long.len() > 4000 && long.to_vec().iter().all(|&b| b == 3));
    // read_all_into appends: a second read adds to what is there.
    let mut both = PooledChain::from(view(&pool, b"head:"));
    let n = both
        .read_all_into(&mut &b"tail"[..], &pool, 1024, 100)
        .await
        .unwrap();
    assert_eq!((n, both.to_vec()), (4, b"head:tail".to_vec()));
}
