//! The fast path's get + drop loop, for counting its instructions deterministically:
//!
//! ```sh
//! cargo build --release -p tierpool --example hot_loop
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null --toggle-collect='*counted_loop*' \
//!     target/release/examples/hot_loop 4096 100000
//! ```
//!
//! callgrind prints `Collected : N`: N / iterations is the cost of one loop iteration (one
//! `get`, a write of the first and last byte, one drop), loop included. `HOT_LOOP=try_get`
//! (with `--toggle-collect='*counted_try*'`) or `HOT_LOOP=get_zeroed` (`'*counted_zeroed*'`)
//! count the other two ways to get a buffer; `HOT_LOOP=budget` runs `counted_loop` on a pool
//! with a 256 MiB budget on bytes in use (`Builder::max_in_use_bytes`; the report's
//! budgeted tierpool's); built with
//! `--features holders`, `HOT_LOOP=holders128` (or any N) on a pool that tracks one get in N
//! (`Builder::track_holders`), `holders0` on one built with the feature that tracks none;
//! `HOT_LOOP=aligned` (the same `--toggle-collect='*counted_loop*'`, which matches
//! `counted_loop_aligned`) gets 4 KiB-aligned buffers from an `AlignedPool` (the same loop,
//! through an `AlignedBuf`). The report's
//! `instructions` workload does the same for every contender
//! (`cargo run --release -p tierpool-bench -- --workload instructions`).
//!
//! Run directly, it prints the time per iteration: `hot_loop [size] [iterations]`.

use std::hint::black_box;
use std::time::Instant;

/// What an iteration needs of a buffer: `PooledBuf` and `AlignedBuf` alike.
trait Block {
    fn capacity(&self) -> usize;
    fn as_mut_ptr(&mut self) -> *mut u8;
}

impl Block for tierpool::PooledBuf {
    #[inline(always)]
    fn capacity(&self) -> usize {
        Vec::capacity(self)
    }
    #[inline(always)]
    fn as_mut_ptr(&mut self) -> *mut u8 {
        Vec::as_mut_ptr(self)
    }
}

impl Block for tierpool::AlignedBuf {
    #[inline(always)]
    fn capacity(&self) -> usize {
        tierpool::AlignedBuf::capacity(self)
    }
    #[inline(always)]
    fn as_mut_ptr(&mut self) -> *mut u8 {
        tierpool::AlignedBuf::as_mut_ptr(self)
    }
}

/// Makes `p` (and the memory it points to) visible to the outside at no cost: an empty `asm!`
/// block that takes the pointer in a register and may read any memory, so that no write
/// through it can be proved dead. (`black_box(p)` would store the pointer to the stack and
/// load it back: two instructions in every count.) The report's `instructions` workload
/// escapes its pointers the same way, so both count the same loop.
#[inline(always)]
fn escape(p: *mut u8) {
    // SAFETY: an empty asm block: it executes nothing.
    unsafe { std::arch::asm!("/* {0} */", in(reg) p, options(nostack, preserves_flags)) }
}

/// One iteration: a buffer of `n` bytes just taken, its first and last byte written, given
/// back.
#[inline(always)]
fn iteration<B: Block>(buf: B, n: usize) {
    let mut buf = buf;
    assert!(n > 0 && buf.capacity() >= n, "buffer smaller than asked");
    let p = buf.as_mut_ptr();
    // SAFETY: the buffer has `capacity() >= n` bytes at `p`.
    unsafe {
        p.write(1);
        p.add(n - 1).write(2);
    }
    escape(p);
    drop(buf);
}

/// The loop whose instructions are counted; `#[inline(never)]` so that callgrind can collect
/// exactly this function (and what it calls).
#[inline(never)]
fn counted_loop(pool: &tierpool::BufferPool, n: usize, iters: usize) {
    for _ in 0..iters {
        iteration(pool.get(black_box(n)), n);
    }
}

/// The same with `try_get` (`--toggle-collect='*counted_try*'`).
#[inline(never)]
fn counted_try(pool: &tierpool::BufferPool, n: usize, iters: usize) {
    for _ in 0..iters {
        iteration(pool.try_get(black_box(n)).expect("a hit"), n);
    }
}

/// The same with `get_zeroed` (`--toggle-collect='*counted_zeroed*'`; includes zeroing `n`
/// bytes, a `memset`).
#[inline(never)]
fn counted_zeroed(pool: &tierpool::BufferPool, n: usize, iters: usize) {
    for _ in 0..iters {
        iteration(pool.get_zeroed(black_box(n)), n);
    }
}

/// The same with an `AlignedPool`'s buffers (`'*counted_loop*'` matches it too, so that the
/// report counts it as it counts the others).
#[inline(never)]
fn counted_loop_aligned(pool: &tierpool::AlignedPool, n: usize, iters: usize) {
    for _ in 0..iters {
        iteration(pool.get(black_box(n)), n);
    }
}

/// The aligned warm-up, not collected.
#[inline(never)]
fn warm_up_aligned(pool: &tierpool::AlignedPool, n: usize, iters: usize) {
    for _ in 0..iters {
        iteration(pool.get(black_box(n)), n);
    }
}

/// The warm-up, not collected.
#[inline(never)]
fn warm_up(pool: &tierpool::BufferPool, n: usize, iters: usize) {
    for _ in 0..iters {
        iteration(pool.get(black_box(n)), n);
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(4096, |s| s.parse().expect("size"));
    let iters: usize = args
        .next()
        .map_or(10_000_000, |s| s.parse().expect("iterations"));
    assert!(n > 0, "size must be at least 1");
    let mode = std::env::var("HOT_LOOP").unwrap_or_default();
    let builder = tierpool::BufferPool::builder();
    let builder = match mode.as_str() {
        "budget" => builder.max_in_use_bytes(256 << 20),
        // Built with `--features holders`: one get in N tracked (`HOT_LOOP=holders128`).
        #[cfg(feature = "holders")]
        m if m.starts_with("holders") => {
            builder.track_holders(m["holders".len()..].parse().expect("holdersN"))
        }
        _ => builder,
    };
    if mode == "aligned" {
        let pool = builder.build_aligned(4096).expect("valid configuration");
        warm_up_aligned(&pool, n, 1000);
        let start = Instant::now();
        counted_loop_aligned(&pool, n, iters);
        println!(
            "{:.2} ns per aligned get+drop of {n} bytes ({} hits)",
            start.elapsed().as_nanos() as f64 / iters as f64,
            pool.stats().hits
        );
        return;
    }
    let pool = builder.build().expect("valid configuration");
    warm_up(&pool, n, 1000);
    let start = Instant::now();
    match mode.as_str() {
        "try_get" => counted_try(&pool, n, iters),
        "get_zeroed" => counted_zeroed(&pool, n, iters),
        _ => counted_loop(&pool, n, iters),
    }
    let elapsed = start.elapsed();
    println!(
        "{:.2} ns per get+drop of {n} bytes ({} hits)",
        elapsed.as_nanos() as f64 / iters as f64,
        pool.stats().hits
    );
}
