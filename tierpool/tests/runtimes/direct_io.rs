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

#[allow(unused_imports)]
use crate::common::{io_uring_refused, random_bytes};

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

/// A file on a filesystem with direct I/O, `size` bytes of the pattern written with
/// `O_DIRECT`, and a pool aligned for it.
struct Fixture {
    path: PathBuf,
    pool: AlignedPool,
    #[cfg_attr(
        not(any(feature = "compio", feature = "tokio-uring")),
        allow(dead_code)
    )]
    align: usize,
}

impl Fixture {
    /// The fixture for test `name`, or `None` (with a message) where direct I/O is refused.
    fn new(name: &str, size: usize) -> Option<Fixture> {
        let path = dio_path(name);
        let align = dio_file(&path)?.pool_alignment();
        let pool = AlignedPool::with_alignment(align).unwrap();
        write_pattern_direct(&path, &pool, size, 256 << 10);
        Some(Fixture { path, pool, align })
    }

    /// Checks that every buffer came back, removes the file, and returns the pool's figures.
    fn finish(self) -> tierpool::Stats {
        let s = self.pool.stats();
        assert_eq!(s.gets, s.returned, "every buffer back: {s}");
        std::fs::remove_file(&self.path).unwrap();
        s
    }
}

/// Checks that `buf` holds the pattern of the file from offset `pos`.
#[track_caller]
fn check_block(buf: &[u8], pos: usize) {
    for (i, &b) in buf.iter().enumerate() {
        assert_eq!(b, pattern(pos + i), "byte {}", pos + i);
    }
}

#[test]
fn std_direct_io_writes_and_reads_back_every_byte() {
    use std::os::unix::fs::FileExt;
    let (size, block) = (4 << 20, 64 << 10);
    let Some(f) = Fixture::new("std", size) else {
        return;
    };
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(&f.path)
        .unwrap();
    for pos in (0..size).step_by(block) {
        let mut buf = f.pool.get_zeroed(block);
        file.read_exact_at(&mut buf, pos as u64).unwrap();
        check_block(&buf, pos);
    }
    let s = f.finish();
    assert!(s.hits >= s.gets - 2, "the same block reused: {s}");
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
        let Some(f) = Fixture::new("compio", 0) else {
            return;
        };
        let (pool, path) = (&f.pool, &f.path);
        let content = random_bytes(7, 8 << 20);
        rt.block_on(async {
            let mut file = open_direct(path, true).await;
            for (k, chunk) in content.chunks(1 << 20).enumerate() {
                let mut buf = pool.get(1 << 20);
                buf.extend_from_slice(chunk);
                let BufResult(n, buf) = file.write_at(buf, (k << 20) as u64).await;
                assert_eq!(n.unwrap(), 1 << 20);
                assert_eq!(buf.as_ptr() as usize % f.align, 0);
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
        let s = f.finish();
        assert!(s.misses <= 3, "one buffer per size, reused: {s}");
    }

    #[test]
    fn an_unaligned_offset_is_the_kernels_einval_and_the_buffer_comes_back_intact() {
        let Some(rt) = runtime() else { return };
        let Some(f) = Fixture::new("einval", 1 << 20) else {
            return;
        };
        let pool = &f.pool;
        rt.block_on(async {
            let file = open_direct(&f.path, false).await;
            let mut buf = pool.get(64 << 10);
            buf.extend_from_slice(b"kept");
            // An offset that is not a multiple of the alignment: the kernel refuses.
            let BufResult(r, buf) = file.read_at(buf, 1).await;
            assert_eq!(r.unwrap_err().raw_os_error(), Some(libc::EINVAL));
            assert_eq!(&buf[..], b"kept", "nothing lost");
            // A length that is not a whole block (a read into the buffer's first 100 bytes).
            let BufResult(r, slice) = file.read_at(pool.get(64 << 10).slice(..100), 0).await;
            assert_eq!(r.unwrap_err().raw_os_error(), Some(libc::EINVAL));
            drop(slice.into_inner());
            // The same buffer, emptied, reads at an aligned offset.
            let mut buf = buf;
            buf.clear();
            let BufResult(r, buf) = file.read_at(buf, 64 << 10).await;
            assert_eq!(r.unwrap(), 64 << 10);
            check_block(&buf, 64 << 10);
        });
        f.finish();
    }
}

#[cfg(feature = "tokio-uring")]
#[test]
fn tokio_uring_reads_a_direct_file_into_aligned_buffers() {
    let size = 2 << 20;
    let Some(f) = Fixture::new("tokio-uring", size) else {
        return;
    };
    let rt = match tokio_uring::Runtime::new(&tokio_uring::builder()) {
        Ok(rt) => rt,
        Err(e) => return io_uring_refused(e),
    };
    rt.block_on(async {
        let file = tokio_uring::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&f.path)
            .await
            .unwrap();
        for pos in (0..size).step_by(256 << 10) {
            let (n, buf) = file.read_at(f.pool.get(256 << 10), pos as u64).await;
            assert_eq!(n.unwrap(), 256 << 10);
            check_block(&buf, pos);
        }
        file.close().await.unwrap();
    });
    f.finish();
}

#[cfg(feature = "monoio")]
#[test]
fn monoio_reads_a_direct_file_into_aligned_buffers() {
    let size = 2 << 20;
    let Some(f) = Fixture::new("monoio", size) else {
        return;
    };
    let mut rt = match monoio::RuntimeBuilder::<monoio::IoUringDriver>::new().build() {
        Ok(rt) => rt,
        Err(e) => return io_uring_refused(e),
    };
    rt.block_on(async {
        let file = monoio::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&f.path)
            .await
            .unwrap();
        for pos in (0..size).step_by(256 << 10) {
            let (n, buf) = file.read_at(f.pool.get(256 << 10), pos as u64).await;
            assert_eq!(n.unwrap(), 256 << 10);
            check_block(&buf, pos);
        }
        file.close().await.unwrap();
    });
    f.finish();
}

/// Aligned pooled buffers as io_uring registered buffers (`IORING_REGISTER_BUFFERS`) through
/// tokio-uring's `FixedBufRegistry`: `read_fixed_at` fills them with `O_DIRECT`, and once the
/// registration is revoked and the registry dropped they return to the pool.
#[cfg(feature = "tokio-uring")]
#[test]
fn aligned_buffers_serve_as_a_tokio_uring_registered_set() {
    use tokio_uring::buf::fixed::FixedBufRegistry;
    let Some(f) = Fixture::new("fixed", 1 << 20) else {
        return;
    };
    let (block, count) = (64 << 10, 4);
    let rt = match tokio_uring::Runtime::new(&tokio_uring::builder()) {
        Ok(rt) => rt,
        Err(e) => return io_uring_refused(e),
    };
    let pool = &f.pool;
    let before = pool.stats().returned;
    rt.block_on(async {
        let registry = FixedBufRegistry::new((0..count).map(|_| pool.get(block)));
        registry.register().unwrap();
        let file = tokio_uring::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&f.path)
            .await
            .unwrap();
        for k in 0..16usize {
            let buf = registry.check_out(k % count).expect("checked in again");
            let (n, buf) = file.read_fixed_at(buf, (k * block) as u64).await;
            assert_eq!(n.unwrap(), block);
            assert_eq!(buf.as_ptr() as usize % f.align, 0);
            check_block(&buf, k * block);
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
    let returned = pool.stats().returned;
    assert_eq!(returned, before + count as u64, "back once unregistered");
    f.finish();
}
