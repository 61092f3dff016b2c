//! `file-read` (modelled on goleveldb's block reads): a file in the page cache read from start to
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

use super::{files, size_label, Ctx};
use crate::harness::alloc;
use crate::harness::children::{in_rounds, ChildRun};
use crate::harness::choice::Choice;
use crate::harness::record::{Output, Record};
use crate::harness::procfs::Proc;

crate::choices! {
    /// How each read gets its buffer.
    pub enum Strategy {
        /// `pool.get(block)`, dropped after the read's bytes are checked.
        Pooled => (
            "pooled",
            "tierpool (compio read_at)",
            "file-read workload: BufferPool::new(), pool.get(block) per read (its tier is exactly the block), read_at through compio's io_uring driver, dropped after the check",
        ),
        /// `Vec::with_capacity(block)` per read.
        FreshVec => (
            "fresh-vec",
            "Vec per read (compio read_at)",
            "file-read workload: Vec::with_capacity(block) per read, read_at through compio's io_uring driver, dropped after the check",
        ),
        /// One `Vec` for every read.
        Reused => (
            "reused",
            "one reused Vec (compio read_at)",
            "file-read workload: one Vec::with_capacity(block) moved into every read_at and back (compio returns it with the result): the floor",
        ),
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
/// by the parent): the temporary directory, whose page cache holds it.
pub fn file_path(quick: bool) -> PathBuf {
    files::data_path(&std::env::temp_dir(), "file-read", file_size(quick))
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
pub fn make_file(path: &Path, size: usize) -> Result<(), String> {
    files::make_file(path, size, files::Writes::Buffered, |pos, block| {
        for (i, b) in block.iter_mut().enumerate() {
            *b = byte_at(pos + i);
        }
    })
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
        let faults0 = Proc::Me.minor_faults();
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
            Proc::Me.minor_faults() - faults0,
            (after.allocs - before.allocs, after.bytes - before.bytes),
        )
    });
    let per_pass = reads / times.len();
    let ns: Vec<f64> = times
        .iter()
        .map(|t| t.as_nanos() as f64 / per_pass as f64)
        .collect();
    let s = crate::harness::measure::Summary::of(ns);
    let mut extra = BTreeMap::new();
    extra.insert("MB/s".to_string(), block as f64 / s.median * 1e3);
    extra.insert("page faults/read".to_string(), faults as f64 / reads as f64);
    extra.insert(
        "peak RSS MiB".to_string(),
        Proc::Me.peak_rss() as f64 / (1 << 20) as f64,
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

/// The `file-read` workload.
#[derive(Debug)]
pub struct FileRead;

impl super::Scenario for FileRead {
    fn name(&self) -> &'static str {
        "file-read"
    }

    fn describe(&self) -> &'static str {
        "Modelled on goleveldb's block reads: a 256 MiB file in the page cache read start to end in 64 KiB or 1 MiB blocks with compio's read_at on io_uring, each block into a tierpool buffer, a fresh Vec, or one reused Vec (the floor); one process per strategy and block size, 5 timed passes after a warm-up; per read, with MB/s, allocations and minor page faults per read, peak RSS."
    }

    fn weight(&self) -> u64 {
        15
    }

    fn contenders(&self) -> Vec<super::Entry> {
        Strategy::ALL.iter().map(|&s| super::Entry::of(s)).collect()
    }

    fn baseline(&self) -> String {
        Strategy::FreshVec.label().into()
    }

    fn available(&self, _quick: bool) -> Result<(), String> {
        io_uring_available()
            .then_some(())
            .ok_or_else(|| "io_uring refused by this kernel".into())
    }

    /// Writes the file, reads it in a child per strategy and block size, removes it.
    fn run(&self, quick: bool) -> Result<Output, String> {
        let path = file_path(quick);
        make_file(&path, file_size(quick))?;
        let runs: Vec<ChildRun> = (0..BLOCKS.len())
            .flat_map(|i| {
                Strategy::ALL.iter().map(move |&s| ChildRun {
                    id: s.id(),
                    shape: Some(i),
                    label: s.label().to_string(),
                })
            })
            .collect();
        let out = in_rounds(self.name(), super::streaming::rounds(quick), &runs, quick);
        let _ = std::fs::remove_file(&path);
        out
    }

    fn child(&self, ctx: &Ctx, args: &super::ChildArgs) -> Result<Option<Output>, String> {
        let s = args.strategy(self.name())?;
        let block = args.shape(&BLOCKS, "block size")?;
        run_one(ctx, s, block)
            .map(Some)
            .ok_or_else(|| "io_uring refused".into())
    }
}
