//! Contenders shared by the criterion benchmarks: every way a Rust user might get a byte buffer
//! and give it back. Each is used the same way: `get(n)`, write the first and last byte, drop.
//!
//! The allocators (mimalloc, jemalloc) are called directly through their `GlobalAlloc`
//! implementations — exactly the calls `Vec::with_capacity` and its drop make when that
//! allocator is the global one — so every contender runs in one process, in one run.

#![allow(dead_code)] // each bench binary uses a subset

use std::alloc::{GlobalAlloc, Layout};
use std::cell::RefCell;
use std::ptr::NonNull;
use std::sync::Arc;

use criterion::Criterion;
use crossbeam_queue::ArrayQueue;
use tierpool::{BufferPool, PooledBuf};

/// A buffer that can be written at its ends and sent to another thread.
pub trait Buf: Send + 'static {
    /// Writes the first and the last of the `n` bytes asked for.
    fn touch(&mut self, n: usize);
}

fn touch_vec(v: &mut Vec<u8>, n: usize) {
    let spare = v.spare_capacity_mut();
    spare[0].write(1);
    spare[n - 1].write(2);
}

impl Buf for Vec<u8> {
    #[inline]
    fn touch(&mut self, n: usize) {
        touch_vec(self, n);
    }
}

impl Buf for PooledBuf {
    #[inline]
    fn touch(&mut self, n: usize) {
        touch_vec(self, n);
    }
}

/// A source of buffers.
pub trait Contender: Clone + Send + Sync + 'static {
    type B: Buf;
    fn name(&self) -> &'static str;
    fn get(&self, n: usize) -> Self::B;
}

/// tierpool with its default configuration.
#[derive(Clone)]
pub struct Tierpool(pub BufferPool);

impl Contender for Tierpool {
    type B = PooledBuf;
    fn name(&self) -> &'static str {
        "tierpool"
    }
    #[inline]
    fn get(&self, n: usize) -> PooledBuf {
        self.0.get(n)
    }
}

/// `Vec::with_capacity` + drop under the process's allocator (glibc malloc here).
#[derive(Clone)]
pub struct SystemVec;

impl Contender for SystemVec {
    type B = Vec<u8>;
    fn name(&self) -> &'static str {
        "Vec (glibc)"
    }
    #[inline]
    fn get(&self, n: usize) -> Vec<u8> {
        Vec::with_capacity(n)
    }
}

/// A buffer allocated from a specific allocator, freed to it on drop.
pub struct RawBuf<A: GlobalAlloc + 'static> {
    ptr: NonNull<u8>,
    layout: Layout,
    alloc: &'static A,
}

// SAFETY: the buffer owns its allocation exclusively; the allocators used here are thread-safe
// (`GlobalAlloc` implementations must be), so it may be freed from any thread.
unsafe impl<A: GlobalAlloc + Sync> Send for RawBuf<A> {}

impl<A: GlobalAlloc + Sync> Buf for RawBuf<A> {
    #[inline]
    fn touch(&mut self, n: usize) {
        // SAFETY: the allocation is `layout.size() >= n > 0` bytes long.
        unsafe {
            self.ptr.as_ptr().write(1);
            self.ptr.as_ptr().add(n - 1).write(2);
        }
    }
}

impl<A: GlobalAlloc + 'static> Drop for RawBuf<A> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: allocated by `self.alloc` with `self.layout`, freed once.
        unsafe { self.alloc.dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

pub static JEMALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
pub static MIMALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `Vec::with_capacity` + drop as it runs when `A` is the global allocator.
pub struct AllocVec<A: GlobalAlloc + Sync + 'static>(pub &'static A, pub &'static str);

impl<A: GlobalAlloc + Sync + 'static> Clone for AllocVec<A> {
    fn clone(&self) -> Self {
        AllocVec(self.0, self.1)
    }
}

impl<A: GlobalAlloc + Sync + Send + 'static> Contender for AllocVec<A> {
    type B = RawBuf<A>;
    fn name(&self) -> &'static str {
        self.1
    }
    #[inline]
    fn get(&self, n: usize) -> RawBuf<A> {
        let layout = Layout::from_size_align(n, 1).unwrap();
        // SAFETY: `n > 0` in every benchmark.
        let ptr = unsafe { self.0.alloc(layout) };
        RawBuf {
            ptr: NonNull::new(ptr).expect("allocation failed"),
            layout,
            alloc: self.0,
        }
    }
}

pub fn jemalloc_vec() -> AllocVec<tikv_jemallocator::Jemalloc> {
    AllocVec(&JEMALLOC, "Vec (jemalloc)")
}

pub fn mimalloc_vec() -> AllocVec<mimalloc::MiMalloc> {
    AllocVec(&MIMALLOC, "Vec (mimalloc)")
}

/// Power-of-two class for `n`: 256 B is class 0, 16 MiB class 16.
#[inline]
fn pow2_class(n: usize) -> usize {
    (n.max(256).next_power_of_two().trailing_zeros() - 8) as usize
}

const QUEUE_CLASSES: usize = 17;

/// The shape of many Rust pools: a crossbeam `ArrayQueue` per power-of-two class.
#[derive(Clone)]
pub struct QueuePool(Arc<Vec<ArrayQueue<Vec<u8>>>>);

impl QueuePool {
    pub fn new(per_class: usize) -> Self {
        QueuePool(Arc::new(
            (0..QUEUE_CLASSES)
                .map(|_| ArrayQueue::new(per_class))
                .collect(),
        ))
    }
}

pub struct QueueBuf {
    v: Vec<u8>,
    pool: QueuePool,
}

impl Buf for QueueBuf {
    #[inline]
    fn touch(&mut self, n: usize) {
        touch_vec(&mut self.v, n);
    }
}

impl Drop for QueueBuf {
    #[inline]
    fn drop(&mut self) {
        let v = std::mem::take(&mut self.v);
        let c = pow2_class(v.capacity());
        if v.capacity() == 256 << c {
            let _ = self.pool.0[c].push(v);
        }
    }
}

impl Contender for QueuePool {
    type B = QueueBuf;
    fn name(&self) -> &'static str {
        "ArrayQueue pool"
    }
    #[inline]
    fn get(&self, n: usize) -> QueueBuf {
        let c = pow2_class(n);
        let v = self.0[c]
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(256 << c));
        QueueBuf {
            v,
            pool: self.clone(),
        }
    }
}

thread_local! {
    static FREE: RefCell<Vec<Vec<Vec<u8>>>> = RefCell::new(vec![Vec::new(); QUEUE_CLASSES]);
}

/// A naive `thread_local!` free list per power-of-two class (bounded at 64 per class). A
/// buffer dropped on another thread lands in that thread's list.
#[derive(Clone)]
pub struct TlsFreeList;

pub struct TlsBuf(Vec<u8>);

impl Buf for TlsBuf {
    #[inline]
    fn touch(&mut self, n: usize) {
        touch_vec(&mut self.0, n);
    }
}

impl Drop for TlsBuf {
    #[inline]
    fn drop(&mut self) {
        let v = std::mem::take(&mut self.0);
        let c = pow2_class(v.capacity());
        let _ = FREE.try_with(|f| {
            let mut f = f.borrow_mut();
            if f[c].len() < 64 {
                f[c].push(v);
            }
        });
    }
}

impl Contender for TlsFreeList {
    type B = TlsBuf;
    fn name(&self) -> &'static str {
        "thread_local free list"
    }
    #[inline]
    fn get(&self, n: usize) -> TlsBuf {
        let c = pow2_class(n);
        let v = FREE
            .with(|f| f.borrow_mut()[c].pop())
            .unwrap_or_else(|| Vec::with_capacity(256 << c));
        TlsBuf(v)
    }
}

/// The criterion settings every bench here uses: short warm-up, `samples` samples over
/// `seconds` of measurement (this VM is noisy; compare contenders within one run).
pub fn config(samples: usize, seconds: u64) -> Criterion {
    Criterion::default()
        .sample_size(samples)
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(seconds))
}

/// A bounded single-producer single-consumer hand-off that never sleeps: both sides spin on a
/// crossbeam `ArrayQueue`.
pub struct SpinChannel<T>(ArrayQueue<T>);

impl<T> SpinChannel<T> {
    pub fn new(capacity: usize) -> Self {
        SpinChannel(ArrayQueue::new(capacity))
    }

    pub fn send(&self, mut value: T) {
        while let Err(v) = self.0.push(value) {
            value = v;
            std::hint::spin_loop();
        }
    }

    pub fn recv(&self) -> T {
        loop {
            if let Some(v) = self.0.pop() {
                return v;
            }
            std::hint::spin_loop();
        }
    }
}

/// One thread gets `count` buffers of `n` bytes, writes their ends and sends them through a
/// [`SpinChannel`]; another drops them. Returns the producer's wall time until the consumer is
/// done (the cross-thread benchmarks' workload).
pub fn hand_off<C: Contender>(c: &C, n: usize, count: u64) -> std::time::Duration {
    let queue = Arc::new(SpinChannel::<C::B>::new(64));
    let rx = queue.clone();
    let consumer = std::thread::spawn(move || {
        for _ in 0..count {
            drop(rx.recv());
        }
    });
    let start = std::time::Instant::now();
    for _ in 0..count {
        let mut buf = c.get(n);
        buf.touch(n);
        queue.send(buf);
    }
    consumer.join().unwrap();
    start.elapsed()
}
