//! `file-read` (seed 002, goleveldb's block reads): a file in the page cache read from start to
//! end in fixed-size blocks through compio (io_uring), each block into a buffer from one of
//! three strategies: a pooled buffer from tierpool, a fresh `Vec` per read, or one `Vec`
//! reused for every read (the floor). One process per strategy and block size (peak RSS is
//! per process); per read, with MB/s, allocations and minor page faults per read.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use compio::buf::BufResult;
use compio::io::AsyncReadAt;
use tierpool::BufferPool;

use super::{size_label, Ctx};
use crate::alloc::{self, minor_faults, peak_rss_bytes};
use crate::report::{Output, Record};

/// How each read gets its buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// `pool.get(block)`, dropped after the read's bytes are checked.
    Pooled,
    /// `Vec::with_capacity(block)` per read.
    FreshVec,
    /// One `Vec` for every read.
    Reused,
}

impl Strategy {
    /// Every strategy, in report order.
    pub const ALL: [Strategy; 3] = [Strategy::Pooled, Strategy::FreshVec, Strategy::Reused];

    /// `--contender` id.
    pub fn id(self) -> &'static str {
        match self {
            Strategy::Pooled => "pooled",
            Strategy::FreshVec => "fresh-vec",
            Strategy::Reused => "reused",
        }
    }

    /// Parses [`Strategy::id`].
    pub fn from_id(id: &str) -> Option<Strategy> {
        Strategy::ALL.into_iter().find(|s| s.id() == id)
    }

    /// The report label.
    pub fn label(self) -> &'static str {
        match self {
            Strategy::Pooled => "tierpool (compio read_at)",
            Strategy::FreshVec => "Vec per read (compio read_at)",
            Strategy::Reused => "one reused Vec (compio read_at)",
        }
    }

    /// For the contender table.
    pub fn description(self) -> &'static str {
        match self {
            Strategy::Pooled => "file-read workload: BufferPool::new(), pool.get(block) per read (its tier is exactly the block), read_at through compio's io_uring driver, dropped after the check",
            Strategy::FreshVec => "file-read workload: Vec::with_capacity(block) per read, read_at through compio's io_uring driver, dropped after the check",
            Strategy::Reused => "file-read workload: one Vec::with_capacity(block) moved into every read_at and back (compio returns it with the result): the floor",
        }
    }
}

/// Block sizes.
pub const BLOCKS: [usize; 2] = [64 << 10, 1 << 20];

/// The file's size.
pub fn file_size(quick: bool) -> usize {
    if quick {
        16 << 20
    } else {
        256 << 20
    }
}

/// Where the file lives (made by [`make_file`] in the parent, read by the children, removed
/// by the parent).
pub fn file_path(quick: bool) -> PathBuf {
    std::env::temp_dir().join(format!(
        "tierpool-file-read-{}MiB.bin",
        file_size(quick) >> 20
    ))
}

/// True if this kernel gives compio an io_uring.
pub fn io_uring_available() -> bool {
    compio::runtime::Runtime::new().is_ok()
}

/// Byte `i` of the file.
fn byte_at(i: usize) -> u8 {
    (i as u64)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .rotate_left(17) as u8
}

/// Writes the file (and so puts it in the page cache).
pub fn make_file(path: &Path, size: usize) -> std::io::Result<()> {
    let data: Vec<u8> = (0..size).map(byte_at).collect();
    std::fs::write(path, data)
}

/// Timed passes over the file per process (after one untimed pass).
pub fn passes(quick: bool) -> usize {
    if quick {
        1
    } else {
        5
    }
}

/// Reads the whole file once with `strategy`; returns the number of reads.
async fn pass(
    file: &compio::fs::File,
    size: usize,
    block: usize,
    strategy: Strategy,
    pool: &BufferPool,
    reused: &mut Option<Vec<u8>>,
) -> usize {
    let mut pos = 0;
    let mut reads = 0;
    while pos < size {
        let n = match strategy {
            Strategy::Pooled => {
                let BufResult(r, buf) = file.read_at(pool.get(block), pos as u64).await;
                check(&buf, pos);
                r.expect("read")
            }
            Strategy::FreshVec => {
                let BufResult(r, buf) = file.read_at(Vec::with_capacity(block), pos as u64).await;
                check(&buf, pos);
                r.expect("read")
            }
            Strategy::Reused => {
                let mut v = reused.take().expect("the reused buffer");
                v.clear();
                let BufResult(r, v) = file.read_at(v, pos as u64).await;
                check(&v, pos);
                *reused = Some(v);
                r.expect("read")
            }
        };
        assert!(n > 0, "short file");
        pos += n;
        reads += 1;
    }
    reads
}

/// Spot-checks a block: its first and last byte.
fn check(buf: &[u8], pos: usize) {
    if let (Some(&a), Some(&z)) = (buf.first(), buf.last()) {
        assert_eq!(a, byte_at(pos));
        assert_eq!(z, byte_at(pos + buf.len() - 1));
    }
}

/// Runs one strategy and block size in this process. `None` if io_uring is refused.
pub fn run_one(ctx: &Ctx, strategy: Strategy, block: usize) -> Option<Output> {
    let rt = match compio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("  file-read: io_uring refused ({e}): skipped");
            return None;
        }
    };
    let size = file_size(ctx.quick);
    let path = file_path(ctx.quick);
    let pool = BufferPool::new();
    let mut reused = Some(Vec::with_capacity(block));
    let (times, reads, faults, counted) = rt.block_on(async {
        let file = compio::fs::File::open(&path)
            .await
            .expect("the workload's file");
        pass(&file, size, block, strategy, &pool, &mut reused).await; // warm-up, page cache
        let mut times = Vec::new();
        let mut reads = 0;
        let faults0 = minor_faults();
        let before = alloc::counted();
        alloc::set_counting(true);
        for _ in 0..passes(ctx.quick) {
            let t = Instant::now();
            reads += pass(&file, size, block, strategy, &pool, &mut reused).await;
            times.push(t.elapsed());
        }
        alloc::set_counting(false);
        let after = alloc::counted();
        (
            times,
            reads,
            minor_faults() - faults0,
            (after.allocs - before.allocs, after.bytes - before.bytes),
        )
    });
    let per_pass = reads / times.len();
    let ns: Vec<f64> = times
        .iter()
        .map(|t| t.as_nanos() as f64 / per_pass as f64)
        .collect();
    let s = crate::measure::Summary::of(ns);
    let mut extra = BTreeMap::new();
    extra.insert("MB/s".to_string(), block as f64 / s.median * 1e3);
    extra.insert("page faults/read".to_string(), faults as f64 / reads as f64);
    extra.insert(
        "peak RSS MiB".to_string(),
        peak_rss_bytes() as f64 / (1 << 20) as f64,
    );
    Some(Output {
        records: vec![Record {
            workload: "file-read".into(),
            contender: strategy.label().into(),
            allocator: ctx.alloc.name().into(),
            param: format!("{} blocks", size_label(block)),
            metric: "ns/read".into(),
            median: s.median,
            min: s.min,
            max: s.max,
            samples: times.len(),
            allocs_per_op: Some(counted.0 as f64 / reads as f64),
            bytes_per_op: Some(counted.1 as f64 / reads as f64),
            extra,
        }],
        timelines: vec![],
    })
}
