//! `PooledChain`: its offsets against a `Vec<u8>` model under proptest, vectored writes, the
//! `Read`/`BufRead` adapters, `read_all`, and frames written and read as chains.

use std::io::{BufRead, Read, Write};

use proptest::prelude::*;
use tierpool::{BufferPool, PooledChain};

fn chain_of(pool: &BufferPool, parts: &[Vec<u8>]) -> PooledChain {
    parts
        .iter()
        .map(|p| {
            let mut b = pool.get(p.len());
            b.extend_from_slice(p);
            b.into_shared()
        })
        .collect()
}

#[derive(Debug, Clone)]
enum Op {
    SplitTo(usize),
    Advance(usize),
    Read(usize),
    /// `bytes::Buf::copy_to_bytes` (with the `bytes` feature; without it, a read).
    CopyToBytes(usize),
    Push(Vec<u8>),
}

fn op() -> impl Strategy<Value = Op> {
    let n = 0usize..200;
    prop_oneof![
        n.clone().prop_map(Op::SplitTo),
        n.clone().prop_map(Op::Advance),
        n.clone().prop_map(Op::Read),
        n.prop_map(Op::CopyToBytes),
        proptest::collection::vec(any::<u8>(), 0..50).prop_map(Op::Push),
    ]
}

/// The chain's bytes, by every route: views in order, the io_slices, `to_vec`, materialize.
fn assert_same(pool: &BufferPool, chain: &PooledChain, model: &[u8]) {
    assert_eq!(chain.len(), model.len());
    let by_parts: Vec<u8> = chain.parts().flat_map(|p| p.iter().copied()).collect();
    assert_eq!(by_parts, model);
    let mut slices = vec![std::io::IoSlice::new(&[]); chain.num_parts()];
    assert_eq!(chain.io_slices(&mut slices), chain.num_parts());
    let by_slices: Vec<u8> = slices.iter().flat_map(|s| s.iter().copied()).collect();
    assert_eq!(by_slices, model);
    assert_eq!(chain.to_vec(), model);
    assert_eq!(&chain.materialize(pool)[..], model);
    assert!(chain.parts().all(|p| !p.is_empty()), "no empty views kept");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 8 } else { 256 }))]

    #[test]
    fn chain_offsets_match_a_vec(
        parts in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..60), 0..8),
        ops in proptest::collection::vec(op(), 0..30),
    ) {
        let pool = BufferPool::builder().tiers([16, 64, 256]).build().unwrap();
        let mut chain = chain_of(&pool, &parts);
        let mut model: Vec<u8> = parts.concat();
        assert_same(&pool, &chain, &model);
        for op in ops {
            match op {
                Op::SplitTo(at) => {
                    let at = at.min(model.len());
                    let head = chain.split_to(at);
                    let want: Vec<u8> = model.drain(..at).collect();
                    assert_same(&pool, &head, &want);
                }
                Op::Advance(n) => {
                    let n = n.min(model.len());
                    chain.advance(n);
                    model.drain(..n);
                }
                #[cfg(not(feature = "bytes"))]
                Op::CopyToBytes(n) | Op::Read(n) => {
                    let mut out = vec![0u8; n];
                    let got = chain.read(&mut out).unwrap();
                    let want: Vec<u8> = model.drain(..n.min(model.len())).collect();
                    prop_assert_eq!(&out[..got], &want[..]);
                }
                #[cfg(feature = "bytes")]
                Op::Read(n) => {
                    let mut out = vec![0u8; n];
                    let got = chain.read(&mut out).unwrap();
                    let want: Vec<u8> = model.drain(..n.min(model.len())).collect();
                    prop_assert_eq!(&out[..got], &want[..]);
                }
                #[cfg(feature = "bytes")]
                Op::CopyToBytes(n) => {
                    use bytes::Buf;
                    let n = n.min(model.len());
                    let b = chain.copy_to_bytes(n);
                    let want: Vec<u8> = model.drain(..n).collect();
                    prop_assert_eq!(&b[..], &want[..]);
                    prop_assert_eq!(chain.remaining(), model.len());
                }
                Op::Push(p) => {
                    let mut b = pool.get(p.len());
                    b.extend_from_slice(&p);
                    chain.push(b.into_shared());
                    model.extend_from_slice(&p);
                }
            }
            assert_same(&pool, &chain, &model);
        }
        drop(chain);
        let s = pool.stats();
        prop_assert_eq!(s.gets, s.returned, "every buffer back: {}", s);
    }
}

#[test]
#[should_panic(expected = "out of bounds for a chain of 3 bytes")]
fn split_past_the_end_panics_with_the_lengths() {
    let pool = BufferPool::new();
    let mut c = chain_of(&pool, &[b"abc".to_vec()]);
    let _ = c.split_to(4);
}

/// A writer that takes at most 5 bytes per call, vectored or not.
struct Trickle(Vec<u8>, usize);

impl Write for Trickle {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        let n = b.len().min(5);
        self.0.extend_from_slice(&b[..n]);
        self.1 += 1;
        Ok(n)
    }
    fn write_vectored(&mut self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
        let mut n = 0;
        for b in bufs {
            let k = b.len().min(5 - n);
            self.0.extend_from_slice(&b[..k]);
            n += k;
            if n == 5 {
                break;
            }
        }
        self.1 += 1;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn write_to_survives_partial_vectored_writes_and_bufread_walks_the_views() {
    let pool = BufferPool::new();
    let parts = [b"one ".to_vec(), b"two ".to_vec(), b"three".to_vec()];
    let mut c = chain_of(&pool, &parts);
    let mut w = Trickle(Vec::new(), 0);
    c.write_to(&mut w).unwrap();
    assert_eq!(w.0, b"one two three");
    assert_eq!(w.1, 3, "13 bytes, 5 per call");
    assert!(c.is_empty());
    let mut c = chain_of(&pool, &parts);
    assert_eq!(c.fill_buf().unwrap(), b"one ");
    c.consume(2);
    let mut line = String::new();
    c.read_to_string(&mut line).unwrap();
    assert_eq!(line, "e two three");
    assert_eq!(c.fill_buf().unwrap(), b"");
    let s = pool.stats();
    assert_eq!(s.gets, s.returned);
}

#[cfg(feature = "tokio")]
mod with_tokio {
    use super::*;
    use crate::common::Rng;
    use tierpool::io::frame::{FrameReader, FrameWriter};
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn read_all_reads_to_the_end_in_chunks_and_enforces_the_limit() {
        let pool = BufferPool::new();
        let mut r = Rng(9);
        let data: Vec<u8> = (0..300_000).map(|_| r.next() as u8).collect();
        let chain = PooledChain::read_all(&mut &data[..], &pool, 64 << 10, 1 << 20)
            .await
            .unwrap();
        assert_eq!(chain.num_parts(), 5);
        assert!(chain.parts().all(|p| p.len() <= 64 << 10));
        assert_eq!(chain.to_vec(), data);
        drop(chain);
        let err = PooledChain::read_all(&mut &data[..], &pool, 64 << 10, 100_000)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
        let empty = PooledChain::read_all(&mut &b""[..], &pool, 4096, 10)
            .await
            .unwrap();
        assert!(empty.is_empty());
        let s = pool.stats();
        assert_eq!(s.gets, s.returned, "{s}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn frames_written_as_chains_and_read_as_chains_check_every_byte() {
        let pool = BufferPool::new();
        let (a, b) = tokio::io::duplex(32 << 10);
        let sizes = [0usize, 1, 4095, 4096, 100_000, 1 << 20, 3 << 20];
        let writer_pool = pool.clone();
        let writer = tokio::spawn(async move {
            let mut w = FrameWriter::new(a);
            for (i, &n) in sizes.iter().enumerate() {
                let mut r = Rng(i as u64);
                let bytes: Vec<u8> = (0..n).map(|_| r.next() as u8).collect();
                // Split into uneven views to exercise the vectored write.
                let parts: Vec<Vec<u8>> = bytes.chunks(7777).map(<[u8]>::to_vec).collect();
                w.write_chain(i as u8, chain_of(&writer_pool, &parts))
                    .await
                    .unwrap();
            }
            w.flush().await.unwrap();
        });
        let mut reader = FrameReader::new(b, pool.clone()).max_frame_size(4 << 20);
        for (i, &n) in sizes.iter().enumerate() {
            let (flags, chain) = reader.read_frame_chain(64 << 10).await.unwrap().unwrap();
            assert_eq!((flags, chain.len()), (i as u8, n));
            assert!(chain.parts().all(|p| p.len() <= 64 << 10));
            let mut r = Rng(i as u64);
            let want: Vec<u8> = (0..n).map(|_| r.next() as u8).collect();
            assert_eq!(chain.to_vec(), want);
        }
        assert!(reader.read_frame_chain(4096).await.unwrap().is_none());
        writer.await.unwrap();
        let s = pool.stats();
        assert_eq!(s.gets, s.returned, "{s}");
    }

    #[tokio::test]
    async fn a_chain_frame_cut_short_says_how_much_arrived() {
        let pool = BufferPool::new();
        let (mut a, b) = tokio::io::duplex(1 << 16);
        a.write_all(&[0, 0, 0, 0x10, 0]).await.unwrap(); // 4096 bytes claimed
        a.write_all(&[1u8; 5000 - 4096 + 1000][..1000])
            .await
            .unwrap();
        drop(a);
        let mut r = FrameReader::new(b, pool.clone());
        match r.read_frame_chain(256).await {
            Err(tierpool::io::frame::FrameError::UnexpectedEof {
                expected, received, ..
            }) => assert_eq!((expected, received), (4096, 1000)),
            other => panic!("{other:?}"),
        }
        let s = pool.stats();
        assert_eq!(s.gets, s.returned, "{s}");
    }
}
