//! The frame reader fed arbitrary bytes: it must never panic, never hand out a payload longer
//! than the maximum or different from the bytes sent, and give every buffer back.
//!
//! `cargo +nightly fuzz run frame_reader` (from `fuzz/`).

#![no_main]

use libfuzzer_sys::fuzz_target;
use tierpool::io::frame::{FrameError, FramePart, FrameReader};
use tierpool::BufferPool;

const MAX: usize = 1 << 16;

fuzz_target!(|data: &[u8]| {
    let pool = BufferPool::new();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut reader = FrameReader::new(data, pool.clone()).max_frame_size(MAX);
        let mut at = 0usize;
        loop {
            match reader.read_frame().await {
                Ok(None) => {
                    assert_eq!(at, data.len(), "clean end only at a frame boundary");
                    break;
                }
                Ok(Some((flags, payload))) => {
                    assert_eq!(flags, data[at]);
                    let len = u32::from_be_bytes(data[at + 1..at + 5].try_into().unwrap()) as usize;
                    assert!(len <= MAX && payload.len() == len);
                    assert_eq!(&payload[..], &data[at + 5..at + 5 + len]);
                    at += 5 + len;
                }
                Err(FrameError::TooLarge { len, max }) => {
                    assert!(len > max as u64 && max == MAX);
                    break;
                }
                Err(FrameError::UnexpectedEof {
                    part,
                    expected,
                    received,
                }) => {
                    // It ended early by exactly what the input lacks.
                    assert!(received < expected);
                    let rest = (data.len() - at) as u64;
                    match part {
                        FramePart::Header => assert!(expected == 5 && received == rest),
                        FramePart::Payload => assert_eq!(received, rest - 5),
                    }
                    break;
                }
                Err(e) => panic!("unexpected error {e}"),
            }
        }
    });
    let s = pool.stats();
    assert_eq!(s.gets, s.returned, "a buffer was not given back: {s}");
});
