//! Aligned pooled buffers against real `O_DIRECT` files: written and read back through compio,
//! tokio-uring and monoio with every byte checked, the kernel's refusals (an unaligned
//! offset, a filesystem without direct I/O) passed on with nothing lost.
//!
//! The files live in Cargo's temporary directory for integration tests (`target/tmp`). Where
//! its filesystem refuses direct I/O, or the kernel io_uring, each test says so and returns,
//! unless `TIERPOOL_REQUIRE_DIRECT_IO` (or `TIERPOOL_REQUIRE_IO_URING`) is set, as `.ci/run`
//! sets them: then that is a failure, so CI cannot pass with the tests skipped.

#![cfg(all(target_os = "linux", not(miri)))]

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

use tierpool::{direct_io_alignment, AlignedPool, DirectIoAlignment, DirectIoError};

mod common;
#[allow(unused_imports)]
use common::{io_uring_refused, random_bytes};

/// A path for `name` in a directory on a real filesystem (Cargo's `target/tmp`).
fn dio_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("tierpool-dio-{}-{name}", std::process::id()))
}

/// Makes an empty file at `path` and returns its direct I/O alignment, or `None` (with a
/// message) where the filesystem refuses direct I/O.
fn dio_file(path: &PathBuf) -> Option<DirectIoAlignment> {
    std::fs::write(path, b"").unwrap();
    match direct_io_alignment(path) {
        Ok(a) => Some(a),
        Err(e @ DirectIoError::Unsupported { .. }) => {
            std::fs::remove_file(path).unwrap();
            if std::env::var_os("TIERPOOL_REQUIRE_DIRECT_IO").is_some() {
                panic!("direct I/O required (TIERPOOL_REQUIRE_DIRECT_IO) but refused: {e}");
            }
            eprintln!("{e}: test skipped");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

/// The byte at file offset `i` of the test pattern (not periodic with any block size).
fn pattern(i: usize) -> u8 {
    (i.wrapping_mul(2_654_435_761) >> 13) as u8
}

#[test]
fn the_alignment_of_a_file_on_a_real_filesystem_is_a_power_of_two() {
    let path = dio_path("align");
    let Some(a) = dio_file(&path) else { return };
    eprintln!("{}: {a:?}", path.display());
    assert!(
        a.memory.is_power_of_two() && a.offset.is_power_of_two(),
        "{a:?}"
    );
    assert!(a.offset >= 512, "{a:?}");
    assert!(a.pool_alignment() >= a.memory.max(a.offset));
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_filesystem_without_direct_io_is_refused_clearly() {
    // tmpfs refuses O_DIRECT; /dev/shm is a tmpfs on Linux machines with a normal setup.
    let shm = std::path::Path::new("/dev/shm");
    let is_tmpfs = std::fs::read_to_string("/proc/mounts")
        .map(|m| {
            m.lines()
                .any(|l| l.split(' ').nth(1) == Some("/dev/shm") && l.contains(" tmpfs "))
        })
        .unwrap_or(false);
    if !is_tmpfs {
        eprintln!("no tmpfs at /dev/shm: test skipped");
        return;
    }
    let path = shm.join(format!("tierpool-dio-{}", std::process::id()));
    std::fs::write(&path, b"x").unwrap();
    let r = direct_io_alignment(&path);
    std::fs::remove_file(&path).unwrap();
    match r {
        Err(e @ DirectIoError::Unsupported { .. }) => {
            assert!(e.to_string().contains("does not support direct I/O"), "{e}")
        }
        other => panic!("tmpfs: {other:?}"),
    }
}

/// Writes `size` bytes of the pattern to `path` with plain std I/O, `O_DIRECT`, from aligned
/// pooled blocks of `block` bytes.
fn write_pattern_direct(path: &PathBuf, pool: &AlignedPool, size: usize, block: usize) {
    use std::os::unix::fs::FileExt;
    let file = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .unwrap();
    for pos in (0..size).step_by(block) {
        let mut buf = pool.get(block);
        for i in 0..block {
            buf.extend_from_slice(&[pattern(pos + i)]);
        }
        file.write_all_at(&buf, pos as u64).unwrap();
    }
}

#[test]
fn std_direct_io_writes_and_reads_back_every_byte() {
    use std::os::unix::fs::FileExt;
    let path = dio_path("std");
    let Some(a) = dio_file(&path) else { return };
    let pool = AlignedPool::new(a.pool_alignment()).unwrap();
    let (size, block) = (4 << 20, 64 << 10);
    write_pattern_direct(&path, &pool, size, block);
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
        .unwrap();
    for pos in (0..size).step_by(block) {
        let mut buf = pool.get_zeroed(block);
        file.read_exact_at(&mut buf, pos as u64).unwrap();
        for (i, &b) in buf.iter().enumerate() {
            assert_eq!(b, pattern(pos + i), "byte {}", pos + i);
        }
    }
    let s = pool.stats();
    assert_eq!(s.gets, s.returned);
    assert!(s.hits >= s.gets - 2, "the same block reused: {s}");
    std::fs::remove_file(&path).unwrap();
}

#[cfg(feature = "compio")]
mod compio_io {
    use super::*;
    use compio::buf::{BufResult, IntoInner, IoBuf};
    use compio::io::{AsyncReadAt, AsyncWriteAt};

    fn runtime() -> Option<compio::runtime::Runtime> {
        match compio::runtime::Runtime::new() {
            Ok(rt) => Some(rt),
            Err(e) => {
                io_uring_refused(e);
                None
            }
        }
    }

    async fn open_direct(path: &PathBuf, write: bool) -> compio::fs::File {
        let mut o = compio::fs::OpenOptions::new();
        o.read(true).write(write).custom_flags(libc::O_DIRECT);
        o.open(path).await.unwrap()
    }

    #[test]
    fn compio_writes_and_reads_a_file_in_aligned_blocks_every_byte_checked() {
        let Some(rt) = runtime() else { return };
        let path = dio_path("compio");
        let Some(a) = dio_file(&path) else { return };
        let pool = AlignedPool::new(a.pool_alignment()).unwrap();
        let content = random_bytes(7, 8 << 20);
        rt.block_on(async {
            let mut file = open_direct(&path, true).await;
            for (k, chunk) in content.chunks(1 << 20).enumerate() {
                let mut buf = pool.get(1 << 20);
                buf.extend_from_slice(chunk);
                let BufResult(n, buf) = file.write_at(buf, (k << 20) as u64).await;
                assert_eq!(n.unwrap(), 1 << 20);
                assert_eq!(buf.as_ptr() as usize % a.pool_alignment(), 0);
            }
            for block in [64 << 10, 1 << 20] {
                let mut pos = 0;
                while pos < content.len() {
                    let BufResult(n, buf) = file.read_at(pool.get(block), pos as u64).await;
                    let n = n.unwrap();
                    assert_eq!(n, block, "a whole block at {pos}");
                    assert_eq!(buf.len(), n);
                    assert_eq!(&buf[..], &content[pos..pos + n], "block at {pos}");
                    pos += n;
                }
            }
        });
        let s = pool.stats();
        assert_eq!(s.gets, s.returned, "every buffer back: {s}");
        assert!(s.misses <= 3, "one buffer per size, reused: {s}");
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn an_unaligned_offset_is_the_kernels_einval_and_the_buffer_comes_back_intact() {
        let Some(rt) = runtime() else { return };
        let path = dio_path("einval");
        let Some(a) = dio_file(&path) else { return };
        let pool = AlignedPool::new(a.pool_alignment()).unwrap();
        write_pattern_direct(&path, &pool, 1 << 20, 64 << 10);
        rt.block_on(async {
            let file = open_direct(&path, false).await;
            let mut buf = pool.get(64 << 10);
            buf.extend_from_slice(b"kept");
            // An offset that is not a multiple of the alignment: the kernel refuses.
            let BufResult(r, buf) = file.read_at(buf, 1).await;
            assert_eq!(r.unwrap_err().raw_os_error(), Some(libc::EINVAL));
            assert_eq!(&buf[..], b"kept", "nothing lost");
            // A length that is not a whole block (a read into the buffer's first 100 bytes).
            let mut fresh = pool.get(64 << 10);
            fresh.clear();
            let BufResult(r, slice) = file.read_at(fresh.slice(..100), 0).await;
            assert_eq!(r.unwrap_err().raw_os_error(), Some(libc::EINVAL));
            drop(slice.into_inner());
            // The same buffer, emptied, reads at an aligned offset.
            let mut buf = buf;
            buf.clear();
            let BufResult(r, buf) = file.read_at(buf, 64 << 10).await;
            assert_eq!(r.unwrap(), 64 << 10);
            assert!(buf
                .iter()
                .enumerate()
                .all(|(i, &b)| b == pattern((64 << 10) + i)));
        });
        let s = pool.stats();
        assert_eq!(s.gets, s.returned, "{s}");
        std::fs::remove_file(&path).unwrap();
    }
}

#[cfg(feature = "tokio-uring")]
#[test]
fn tokio_uring_reads_a_direct_file_into_aligned_buffers() {
    let path = dio_path("tokio-uring");
    let Some(a) = dio_file(&path) else { return };
    let pool = AlignedPool::new(a.pool_alignment()).unwrap();
    let size = 2 << 20;
    write_pattern_direct(&path, &pool, size, 256 << 10);
    let rt = match tokio_uring::Runtime::new(&tokio_uring::builder()) {
        Ok(rt) => rt,
        Err(e) => return io_uring_refused(e),
    };
    rt.block_on(async {
        let file = tokio_uring::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&path)
            .await
            .unwrap();
        for pos in (0..size).step_by(256 << 10) {
            let (n, buf) = file.read_at(pool.get(256 << 10), pos as u64).await;
            assert_eq!(n.unwrap(), 256 << 10);
            assert!(buf.iter().enumerate().all(|(i, &b)| b == pattern(pos + i)));
        }
        file.close().await.unwrap();
    });
    let s = pool.stats();
    assert_eq!(s.gets, s.returned, "{s}");
    std::fs::remove_file(&path).unwrap();
}

#[cfg(feature = "monoio")]
#[test]
fn monoio_reads_a_direct_file_into_aligned_buffers() {
    let path = dio_path("monoio");
    let Some(a) = dio_file(&path) else { return };
    let pool = AlignedPool::new(a.pool_alignment()).unwrap();
    let size = 2 << 20;
    write_pattern_direct(&path, &pool, size, 256 << 10);
    let mut rt = match monoio::RuntimeBuilder::<monoio::IoUringDriver>::new().build() {
        Ok(rt) => rt,
        Err(e) => return io_uring_refused(e),
    };
    rt.block_on(async {
        let file = monoio::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&path)
            .await
            .unwrap();
        for pos in (0..size).step_by(256 << 10) {
            let (n, buf) = file.read_at(pool.get(256 << 10), pos as u64).await;
            assert_eq!(n.unwrap(), 256 << 10);
            assert!(buf.iter().enumerate().all(|(i, &b)| b == pattern(pos + i)));
        }
        file.close().await.unwrap();
    });
    let s = pool.stats();
    assert_eq!(s.gets, s.returned, "{s}");
    std::fs::remove_file(&path).unwrap();
}

/// Aligned pooled buffers as io_uring registered buffers (`IORING_REGISTER_BUFFERS`) through
/// tokio-uring's `FixedBufRegistry`: `read_fixed_at` fills them with `O_DIRECT`, and once the
/// registration is revoked and the registry dropped they return to the pool.
#[cfg(feature = "tokio-uring")]
#[test]
fn aligned_buffers_serve_as_a_tokio_uring_registered_set() {
    use tokio_uring::buf::fixed::FixedBufRegistry;
    let path = dio_path("fixed");
    let Some(a) = dio_file(&path) else { return };
    let pool = AlignedPool::new(a.pool_alignment().max(4096)).unwrap();
    let (block, count) = (64 << 10, 4);
    write_pattern_direct(&path, &pool, 1 << 20, block);
    let rt = match tokio_uring::Runtime::new(&tokio_uring::builder()) {
        Ok(rt) => rt,
        Err(e) => return io_uring_refused(e),
    };
    let before = pool.stats().returned;
    rt.block_on(async {
        let registry = FixedBufRegistry::new((0..count).map(|_| pool.get(block)));
        registry.register().unwrap();
        let file = tokio_uring::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&path)
            .await
            .unwrap();
        for k in 0..16usize {
            let buf = registry.check_out(k % count).expect("checked in again");
            let (n, buf) = file.read_fixed_at(buf, (k * block) as u64).await;
            assert_eq!(n.unwrap(), block);
            assert_eq!(buf.as_ptr() as usize % 4096, 0);
            assert!(buf
                .iter()
                .enumerate()
                .all(|(i, &b)| b == pattern(k * block + i)));
        }
        file.close().await.unwrap();
        registry.unregister().unwrap();
        assert_eq!(
            pool.stats().returned,
            before,
            "registered: held by the registry"
        );
    });
    drop(rt);
    let s = pool.stats();
    assert_eq!(
        s.returned,
        before + count as u64,
        "back once unregistered: {s}"
    );
    assert_eq!(s.gets, s.returned, "{s}");
    std::fs::remove_file(&path).unwrap();
}
