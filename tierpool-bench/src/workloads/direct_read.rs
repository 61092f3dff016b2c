//! `direct-read` (direct I/O, modelled on goleveldb's block reads): a 1 GiB file on a filesystem with direct
//! I/O, read and written with `O_DIRECT` in 64 KiB or 1 MiB blocks through compio (io_uring),
//! each block in a buffer from one of three strategies: a pooled aligned buffer
//! ([`tierpool::AlignedPool`]), a fresh aligned allocation per block (`std::alloc` with the
//! layout, what projects without a pool write), or one aligned buffer reused for every block
//! (the floor). One process per strategy, operation and block size (peak RSS and CPU time are
//! per process); per block, with MB/s, CPU time per MiB (user + system, `getrusage`: the disk
//! may bound MB/s, CPU time shows what the buffer strategy costs), allocations and minor page
//! faults per block.

use std::alloc::Layout;
use std::collections::BTreeMap;
use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::time::Instant;

use compio::buf::{BufResult, IoBuf, IoBufMut, SetLen};
use compio::io::{AsyncReadAt, AsyncWriteAt};
use tierpool::AlignedPool;

use super::{files, size_label, Ctx};
use crate::harness::alloc;
use crate::harness::children::{in_rounds, ChildRun};
use crate::harness::choice::Choice;
use crate::harness::record::{Output, Record};
use crate::harness::procfs::Proc;

crate::choices! {
    /// How each block gets its buffer.
    pub enum Strategy {
        /// `pool.get(block)` from an `AlignedPool`, dropped after the block.
        Pooled => (
            "pooled",
            "tierpool AlignedPool (O_DIRECT)",
            "direct-read workload: AlignedPool::with_alignment(4096), pool.get(block) per block (its tier is exactly the block), read_at / write_at with O_DIRECT through compio's io_uring driver, dropped after the block",
        ),
        /// `std::alloc::alloc` with the aligned layout per block, freed after it.
        Fresh => (
            "fresh",
            "aligned alloc per block (O_DIRECT)",
            "direct-read workload: std::alloc::alloc(Layout::from_size_align(block, 4096)) per block, read_at / write_at with O_DIRECT through compio's io_uring driver, freed after the block",
        ),
        /// One aligned allocation for every block.
        Reused => (
            "reused",
            "one reused aligned buffer (O_DIRECT)",
            "direct-read workload: one std::alloc aligned allocation moved into every read_at / write_at and back (compio returns it with the result): the floor",
        ),
    }
}

/// Read or write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `read_at` each block, first and last byte checked.
    Read,
    /// Fill each block (memset per 64 KiB of the pattern), `write_at` it.
    Write,
}

/// The runs of one strategy: every operation and block size, in report order.
pub const SHAPES: [(Op, usize); 4] = [
    (Op::Read, 64 << 10),
    (Op::Read, 1 << 20),
    (Op::Write, 64 << 10),
    (Op::Write, 1 << 20),
];

/// The report's parameter for a shape.
pub fn param((op, block): (Op, usize)) -> String {
    let op = match op {
        Op::Read => "read",
        Op::Write => "write",
    };
    format!("{op}, {} blocks", size_label(block))
}

/// Every buffer's alignment: 4 KiB, which every device's direct I/O accepts (the file's own,
/// from `direct_io_alignment`, is used if larger).
pub const ALIGN: usize = 4096;

/// The file's size.
pub fn file_size(quick: bool) -> usize {
    if quick {
        32 << 20
    } else {
        1 << 30
    }
}

/// Where the file lives: in the workspace's `target` directory (created if missing), on the
/// disk (a temporary directory may be a tmpfs, which has no direct I/O).
pub fn file_path(quick: bool) -> PathBuf {
    let target = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target");
    files::data_path(&target, "direct-read", file_size(quick))
}

/// Interleaved rounds: one process per strategy and shape in each.
pub fn rounds(quick: bool) -> usize {
    if quick {
        1
    } else {
        3
    }
}

/// The pattern's byte for file offset `pos`: one value per 64 KiB, so that a block of either
/// size is checked by its first and last byte and filled with one `memset` per 64 KiB.
fn byte_at(pos: usize) -> u8 {
    ((pos >> 16) as u8).wrapping_mul(31).wrapping_add(7)
}

/// The alignment the workload uses for `path`, or why direct I/O is refused there (tierpool's
/// message names the path).
pub fn alignment(path: &Path) -> Result<usize, String> {
    tierpool::direct_io_alignment(path)
        .map(|a| a.pool_alignment().max(ALIGN))
        .map_err(|e| e.to_string())
}

/// Whether direct I/O works where the file goes: makes the directory, an empty file, asks
/// its alignment, and removes it.
pub fn probe(quick: bool) -> Result<(), String> {
    let path = file_path(quick);
    let probe = files::create_empty(&path).and_then(|()| alignment(&path));
    let _ = std::fs::remove_file(&path);
    probe.map(|_| ())
}

/// An aligned heap allocation: what a project without a pool allocates per block.
struct AlignedAlloc {
    ptr: NonNull<u8>,
    len: usize,
    layout: Layout,
}

impl AlignedAlloc {
    fn new(size: usize, align: usize) -> Self {
        let layout = Layout::from_size_align(size, align).expect("a valid layout");
        // SAFETY: `size` is non-zero (a block).
        let ptr = unsafe { std::alloc::alloc(layout) };
        let ptr = NonNull::new(ptr).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedAlloc {
            ptr,
            len: 0,
            layout,
        }
    }
}

impl Drop for AlignedAlloc {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

impl IoBuf for AlignedAlloc {
    fn as_init(&self) -> &[u8] {
        // SAFETY: the first `len` bytes were written (by `fill` or a read, `set_len`).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl SetLen for AlignedAlloc {
    unsafe fn set_len(&mut self, len: usize) {
        self.len = len;
    }
}

impl IoBufMut for AlignedAlloc {
    fn as_uninit(&mut self) -> &mut [MaybeUninit<u8>] {
        // SAFETY: the whole allocation, as possibly uninitialized bytes.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().cast(), self.layout.size()) }
    }
}

/// Fills `block` bytes for file offset `pos` with the pattern through `spare` (the buffer's
/// whole capacity, from its start).
fn fill(spare: &mut [MaybeUninit<u8>], pos: usize, block: usize) {
    for (k, seg) in spare[..block].chunks_mut(64 << 10).enumerate() {
        seg.fill(MaybeUninit::new(byte_at(pos + (k << 16))));
    }
}

/// Checks a block read at `pos`: its first and last byte.
fn check(buf: &[u8], pos: usize, block: usize) {
    assert_eq!(buf.len(), block, "a short read at {pos}");
    assert_eq!(buf[0], byte_at(pos), "first byte at {pos}");
    assert_eq!(
        buf[block - 1],
        byte_at(pos + block - 1),
        "last byte at {pos}"
    );
}

/// Makes the file: `size` bytes of the pattern, written with `O_DIRECT`.
pub fn make_file(path: &Path, size: usize) -> Result<(), String> {
    files::create_empty(path)?;
    let align = alignment(path)?;
    files::make_file(path, size, files::Writes::Direct(align), |pos, block| {
        for (k, seg) in block.chunks_mut(64 << 10).enumerate() {
            seg.fill(byte_at(pos + (k << 16)));
        }
    })
}

/// One block at `pos` with `strategy`.
async fn one_block(
    file: &mut compio::fs::File,
    (op, block): (Op, usize),
    pos: usize,
    strategy: Strategy,
    pool: &AlignedPool,
    reused: &mut Option<AlignedAlloc>,
) {
    let at = pos as u64;
    match (strategy, op) {
        (Strategy::Pooled, Op::Read) => {
            let BufResult(r, buf) = file.read_at(pool.get(block), at).await;
            r.expect("read");
            check(&buf, pos, block);
        }
        (Strategy::Pooled, Op::Write) => {
            let mut buf = pool.get(block);
            fill(IoBufMut::as_uninit(&mut buf), pos, block);
            // SAFETY: `fill` wrote the first `block` bytes.
            unsafe { buf.set_len(block) };
            let BufResult(r, _) = file.write_at(buf, at).await;
            assert_eq!(r.expect("write"), block);
        }
        (Strategy::Fresh, Op::Read) => {
            let BufResult(r, buf) = file
                .read_at(AlignedAlloc::new(block, pool.alignment()), at)
                .await;
            r.expect("read");
            check(buf.as_init(), pos, block);
        }
        (Strategy::Fresh, Op::Write) => {
            let mut buf = AlignedAlloc::new(block, pool.alignment());
            fill(buf.as_uninit(), pos, block);
            buf.len = block;
            let BufResult(r, _) = file.write_at(buf, at).await;
            assert_eq!(r.expect("write"), block);
        }
        (Strategy::Reused, op) => {
            let mut buf = reused.take().expect("the reused buffer");
            let buf = match op {
                Op::Read => {
                    buf.len = 0;
                    let BufResult(r, buf) = file.read_at(buf, at).await;
                    r.expect("read");
                    check(buf.as_init(), pos, block);
                    buf
                }
                Op::Write => {
                    fill(buf.as_uninit(), pos, block);
                    buf.len = block;
                    let BufResult(r, buf) = file.write_at(buf, at).await;
                    assert_eq!(r.expect("write"), block);
                    buf
                }
            };
            *reused = Some(buf);
        }
    }
}

/// Bytes per timed sample: the file is timed in 64 MiB stretches (one in `--quick`'s 32 MiB
/// file: 8 MiB).
fn stretch(quick: bool) -> usize {
    if quick {
        8 << 20
    } else {
        64 << 20
    }
}

/// What the timed stretches of one run measured.
struct Stretches {
    /// Each stretch's wall and CPU time.
    times: Vec<std::time::Duration>,
    cpu: Vec<std::time::Duration>,
    /// Blocks in the timed stretches, and the minor page faults, allocations and bytes
    /// allocated while they ran.
    blocks: usize,
    faults: u64,
    allocs: u64,
    bytes: u64,
}

/// Runs one strategy and shape in this process. `None` if io_uring or direct I/O is refused.
pub fn run_one(ctx: &Ctx, strategy: Strategy, shape: (Op, usize)) -> Option<Output> {
    let (_, block) = shape;
    let rt = match compio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("  direct-read: io_uring refused ({e}): skipped");
            return None;
        }
    };
    let path = file_path(ctx.quick);
    let align = match alignment(&path) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("  direct-read: {e}: skipped");
            return None;
        }
    };
    let pool = AlignedPool::with_alignment(align).expect("a valid alignment");
    let reused = AlignedAlloc::new(block, align);
    let stretch = stretch(ctx.quick);
    let m = rt.block_on(timed_stretches(
        &path,
        file_size(ctx.quick),
        stretch,
        (strategy, shape),
        &pool,
        reused,
    ));
    Some(record(ctx, strategy, shape, stretch, &m))
}

/// One stretch of the file to warm up (the pool's buffers, the runtime's rings), then the
/// whole file in timed stretches.
async fn timed_stretches(
    path: &Path,
    size: usize,
    stretch: usize,
    (strategy, shape): (Strategy, (Op, usize)),
    pool: &AlignedPool,
    reused: AlignedAlloc,
) -> Stretches {
    let block = shape.1;
    let mut reused = Some(reused);
    let mut o = compio::fs::OpenOptions::new();
    o.read(true).write(true).custom_flags(libc::O_DIRECT);
    let mut file = o.open(path).await.expect("the workload's file");
    for pos in (0..stretch).step_by(block) {
        one_block(&mut file, shape, pos, strategy, pool, &mut reused).await;
    }
    let (mut times, mut cpu) = (Vec::new(), Vec::new());
    let faults0 = Proc::Me.minor_faults();
    let before = alloc::counted();
    alloc::set_counting(true);
    for start in (0..size).step_by(stretch) {
        let (t, c) = (Instant::now(), crate::harness::measure::cpu_time());
        for pos in (start..start + stretch).step_by(block) {
            one_block(&mut file, shape, pos, strategy, pool, &mut reused).await;
        }
        times.push(t.elapsed());
        cpu.push(crate::harness::measure::cpu_time() - c);
    }
    alloc::set_counting(false);
    let after = alloc::counted();
    Stretches {
        times,
        cpu,
        blocks: size / block,
        faults: Proc::Me.minor_faults() - faults0,
        allocs: after.allocs - before.allocs,
        bytes: after.bytes - before.bytes,
    }
}

/// The record of one run: the time per block of the stretches, CPU per MiB of the median
/// stretch (a VM's hiccup lands in one stretch, not all).
fn record(
    ctx: &Ctx,
    strategy: Strategy,
    shape: (Op, usize),
    stretch: usize,
    m: &Stretches,
) -> Output {
    let block = shape.1;
    let per_stretch = (stretch / block) as f64;
    let ns: Vec<f64> = m
        .times
        .iter()
        .map(|t| t.as_nanos() as f64 / per_stretch)
        .collect();
    let s = crate::harness::measure::Summary::of(ns);
    let mib = stretch as f64 / (1 << 20) as f64;
    let cpu = crate::harness::measure::Summary::of(
        m.cpu
            .iter()
            .map(|c| c.as_nanos() as f64 / 1e3 / mib)
            .collect(),
    );
    let blocks = m.blocks as f64;
    let mut extra = BTreeMap::new();
    extra.insert("MB/s".to_string(), block as f64 / s.median * 1e3);
    extra.insert("CPU us/MiB".to_string(), cpu.median);
    extra.insert("page faults/block".to_string(), m.faults as f64 / blocks);
    extra.insert(
        "peak RSS MiB".to_string(),
        Proc::Me.peak_rss() as f64 / (1 << 20) as f64,
    );
    Output {
        records: vec![Record {
            workload: "direct-read".into(),
            contender: strategy.label().into(),
            allocator: ctx.alloc.name().into(),
            param: param(shape),
            metric: "ns/block".into(),
            median: s.median,
            min: s.min,
            max: s.max,
            samples: m.times.len(),
            allocs_per_op: Some(m.allocs as f64 / blocks),
            bytes_per_op: Some(m.bytes as f64 / blocks),
            extra,
        }],
        timelines: vec![],
    }
}

/// The `direct-read` workload.
#[derive(Debug)]
pub struct DirectRead;

impl super::Scenario for DirectRead {
    fn name(&self) -> &'static str {
        "direct-read"
    }

    fn describe(&self) -> &'static str {
        "Direct I/O, modelled on goleveldb's block reads: a 1 GiB file on the disk (ext4) read, then written, with O_DIRECT in 64 KiB or 1 MiB blocks through compio's read_at / write_at on io_uring, one block in flight, each block in a 4 KiB-aligned buffer: a tierpool AlignedPool buffer, a fresh std::alloc aligned allocation, or one reused aligned buffer (the floor); one process per strategy, operation and block size, 3 interleaved rounds, each timing the file in 64 MiB stretches after a warm-up stretch; per block, with MB/s, CPU time per MiB (user + system from getrusage, the median stretch: the disk bounds MB/s on this VM, CPU time shows what the buffer costs), allocations and minor page faults per block, peak RSS."
    }

    fn weight(&self) -> u64 {
        60
    }

    fn contenders(&self) -> Vec<super::Entry> {
        Strategy::ALL.iter().map(|&s| super::Entry::of(s)).collect()
    }

    fn baseline(&self) -> String {
        Strategy::Fresh.label().into()
    }

    /// Direct I/O where the file goes (its directory created), and io_uring.
    fn available(&self, quick: bool) -> Result<(), String> {
        probe(quick)?;
        super::file_read::io_uring_available()
            .then_some(())
            .ok_or_else(|| "io_uring refused by this kernel".into())
    }

    /// Writes the file, reads and writes it in a child per strategy and shape, removes it.
    fn run(&self, quick: bool) -> Result<Output, String> {
        let path = file_path(quick);
        crate::harness::progress::status(&format!(
            "direct-read: writing the {} MiB file",
            file_size(quick) >> 20
        ));
        make_file(&path, file_size(quick))?;
        let runs: Vec<ChildRun> = SHAPES
            .iter()
            .enumerate()
            .flat_map(|(i, &shape)| {
                Strategy::ALL.iter().map(move |&s| ChildRun {
                    id: s.id(),
                    shape: Some(i),
                    label: format!("{} ({})", s.label(), param(shape)),
                })
            })
            .collect();
        let out = in_rounds(self.name(), rounds(quick), &runs, quick);
        let _ = std::fs::remove_file(&path);
        out
    }

    fn child(&self, ctx: &Ctx, args: &super::ChildArgs) -> Result<Option<Output>, String> {
        let s = args.strategy(self.name())?;
        let shape = args.shape(&SHAPES, "shape")?;
        run_one(ctx, s, shape)
            .map(Some)
            .ok_or_else(|| "io_uring or direct I/O refused".into())
    }

    /// The disk bounds MB/s: the chart shows what each buffer costs in CPU time, reads and
    /// writes in panels of their own.
    fn chart(
        &self,
        path: &std::path::Path,
        data: &super::ChartData,
    ) -> Result<(), crate::harness::chart::Error> {
        let cpu: Vec<Record> = data
            .rows
            .iter()
            .filter_map(|r| {
                let mut c = (*r).clone();
                c.median = *r.extra.get("CPU us/MiB")?;
                c.metric = "CPU us per MiB (user + system)".into();
                Some(c)
            })
            .collect();
        crate::harness::chart::panels_by_group(
            path,
            "direct-read: CPU time per MiB of O_DIRECT reads and writes, by buffer",
            &cpu.iter().collect::<Vec<_>>(),
            data.order,
        )
    }
}
