//! commonware-runtime 2026.9.0's BufferPool (`BufferPoolConfig::for_network()`, from a tokio
//! runner, as its docs intend) against tierpool (`BufferPool::new()`): the report's get-put loop
//! (get n bytes, write the first and last, black_box the pointer, drop).
use commonware_runtime::{tokio, BufferPoolConfig, BufferPooler, Runner};
use std::hint::black_box;
use std::time::Instant;

#[inline(never)]
fn counted_loop_cw(pool: &commonware_runtime::BufferPool, n: usize, iters: usize) {
    for _ in 0..iters {
        let mut b = pool.alloc(black_box(n));
        assert!(b.capacity() >= n);
        let p = b.as_mut_ptr();
        unsafe { p.write(1); p.add(n - 1).write(2); }
        black_box(p);
        drop(b);
    }
}

#[inline(never)]
fn counted_loop_tp(pool: &tierpool::BufferPool, n: usize, iters: usize) {
    for _ in 0..iters {
        let mut b = pool.get(black_box(n));
        assert!(b.capacity() >= n);
        let p = b.as_mut_ptr();
        unsafe { p.write(1); p.add(n - 1).write(2); }
        black_box(p);
        drop(b);
    }
}

fn main() {
    let which = std::env::args().nth(1).unwrap();
    let n: usize = std::env::args().nth(2).unwrap().parse().unwrap();
    let iters: usize = std::env::args().nth(3).unwrap().parse().unwrap();
    let cfg = BufferPoolConfig::for_network();
    let cw = tokio::Runner::new(tokio::Config::default().with_network_buffer_pool_config(cfg))
        .start(|ctx| async move { ctx.network_buffer_pool().clone() });
    let tp = tierpool::BufferPool::new();
    // warm up both, then time or count one
    for _ in 0..1000 { drop(cw.alloc(n)); drop(tp.get(n)); }
    let t = Instant::now();
    if which == "cw" { counted_loop_cw(&cw, n, iters) } else { counted_loop_tp(&tp, n, iters) }
    println!("{which} {n}: {:.2} ns", t.elapsed().as_nanos() as f64 / iters as f64);
}
