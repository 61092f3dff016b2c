//! `PooledChain` driven by arbitrary operations (push, split_to, advance, copy_to_bytes, read,
//! try_into_mut of a view) and checked after every step against a `Vec<u8>` model: the bytes by
//! every route, the length, no empty views; and every buffer back at the end.
//!
//! `cargo +nightly fuzz run chain_ops` (from `fuzz/`).

#![no_main]

use std::io::Read;

use bytes::Buf;
use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use tierpool::{BufferPool, PooledChain};

#[derive(Arbitrary, Debug)]
enum Op {
    Push(Vec<u8>),
    SplitTo(u16),
    Advance(u16),
    CopyToBytes(u16),
    Read(u16),
    /// Splits a view off the front and turns it back into a writable buffer, if it is alone.
    IntoMut(u16),
}

fn check(chain: &PooledChain, model: &[u8]) {
    assert_eq!(chain.len(), model.len());
    assert_eq!(chain.remaining(), model.len());
    assert!(chain.parts().all(|p| !p.is_empty()));
    assert_eq!(chain.to_vec(), model);
    let mut slices = vec![std::io::IoSlice::new(&[]); chain.num_parts() + 1];
    let n = chain.chunks_vectored(&mut slices);
    let joined: Vec<u8> = slices[..n].iter().flat_map(|s| s.iter().copied()).collect();
    assert_eq!(joined, model);
}

fuzz_target!(|ops: Vec<Op>| {
    let pool = BufferPool::builder().tiers([8, 64, 512]).build().unwrap();
    let mut chain = PooledChain::new();
    let mut model = Vec::new();
    for op in ops.into_iter().take(200) {
        match op {
            Op::Push(p) => {
                let mut b = pool.get(p.len());
                b.extend_from_slice(&p);
                chain.push(b.into_shared());
                model.extend_from_slice(&p);
            }
            Op::SplitTo(at) => {
                let at = usize::from(at).min(model.len());
                let head = chain.split_to(at);
                let want: Vec<u8> = model.drain(..at).collect();
                check(&head, &want);
            }
            Op::Advance(n) => {
                let n = usize::from(n).min(model.len());
                chain.advance(n);
                model.drain(..n);
            }
            Op::CopyToBytes(n) => {
                let n = usize::from(n).min(model.len());
                let b = chain.copy_to_bytes(n);
                let want: Vec<u8> = model.drain(..n).collect();
                assert_eq!(&b[..], &want[..]);
            }
            Op::Read(n) => {
                let mut out = vec![0u8; usize::from(n)];
                let got = chain.read(&mut out).unwrap();
                let want: Vec<u8> = model.drain(..got).collect();
                assert_eq!(&out[..got], &want[..]);
            }
            Op::IntoMut(at) => {
                let at = usize::from(at).min(model.len());
                let head = chain.split_to(at);
                let want: Vec<u8> = model.drain(..at).collect();
                for part in head.parts() {
                    let view = part.clone();
                    // Two views exist (`part` and `view`): never writable.
                    assert!(view.try_into_mut().is_err());
                }
                let mut rebuilt = Vec::new();
                let parts: Vec<_> = head.parts().cloned().collect();
                drop(head);
                for p in parts {
                    match p.try_into_mut() {
                        Ok(mut buf) => {
                            rebuilt.extend_from_slice(&buf);
                            buf.push(0xAA); // writable
                        }
                        Err(p) => rebuilt.extend_from_slice(&p), // shared with `chain`
                    }
                }
                assert_eq!(rebuilt, want);
            }
        }
        check(&chain, &model);
    }
    drop(chain);
    let s = pool.stats();
    assert_eq!(s.gets, s.returned, "every buffer back: {s}");
});
