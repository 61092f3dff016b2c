//! Every way a Rust user might get a byte buffer and give it back, behind one interface.
//!
//! A [`Contender`] hands out buffers with `get(n)`; dropping the buffer gives it back. Each is
//! used the way its documentation intends; where a crate pools objects of one size, it gets one
//! pool per power-of-two class from 256 B to 16 MiB (the same classes as the hand-written
//! pools), and [`Kind::adaptation`] says so. Pools whose handles borrow the pool are leaked for
//! the life of the process, as a `static` pool would be; each workload builds fresh ones.

use std::ops::DerefMut;
use std::sync::{Arc, Mutex};

use crossbeam_queue::ArrayQueue;
use tierpool::{BufferPool, PooledBuf, TrimAllocator};

use crate::harness::alloc::Allocator;

/// A buffer handed out by a contender.
///
/// # Safety
/// `ptr` must point to at least `capacity` bytes that the holder may write, and that stay
/// valid (and are not handed to anyone else) until the buffer is dropped.
pub unsafe trait Buf: Send + 'static {
    /// Start of the writable memory.
    fn ptr(&mut self) -> *mut u8;
    /// Writable bytes at [`Buf::ptr`].
    fn capacity(&self) -> usize;
}

/// Writes the first and the last of the `n` bytes asked for (what every get/put workload does
/// with a buffer, so that a contender cannot hand out memory that is never touched).
#[inline(always)]
pub fn touch<B: Buf>(buf: &mut B, n: usize) {
    assert!(n > 0 && buf.capacity() >= n, "buffer smaller than asked");
    let p = buf.ptr();
    // SAFETY: `Buf` guarantees `capacity >= n` writable bytes at `p`.
    unsafe {
        p.write(1);
        p.add(n - 1).write(2);
    }
}

/// One get-put: a buffer for `n` bytes, its first and last byte written, given back. The
/// pointer [`escape`]s, so no contender's allocation or writes can be optimized away. The body
/// of the `get-put` and `instructions` workloads.
#[inline(always)]
pub fn get_put_once<C: Contender>(c: &C, n: usize) {
    let mut b = c.get(std::hint::black_box(n));
    touch(&mut b, n);
    escape(b.ptr());
    drop(b);
}

/// Makes `p` (and the memory it points to) visible to the outside at no cost: an empty `asm!`
/// block that takes the pointer in a register and may read any memory, so neither the
/// allocation nor the writes before it can be optimized away. `black_box(p)` does the same
/// through `p`'s address, which some builds computed with an extra `lea` and others did not
/// (a 1-instruction swing in every count from register allocation alone).
#[inline(always)]
pub fn escape(p: *mut u8) {
    // SAFETY: an empty asm block: it executes nothing.
    unsafe { std::arch::asm!("/* {0} */", in(reg) p, options(nostack, preserves_flags)) }
}

/// Copies `src` into the start of the buffer and reads back its first and last bytes,
/// returning their sum (the mixed workload's "read a packet and check it").
#[inline(always)]
pub fn fill_and_check<B: Buf>(buf: &mut B, src: &[u8]) -> u32 {
    assert!(buf.capacity() >= src.len(), "buffer smaller than asked");
    if src.is_empty() {
        return 0;
    }
    let p = buf.ptr();
    // SAFETY: `capacity >= src.len()` writable bytes at `p`; `src` is another object, so the
    // ranges do not overlap; the bytes read back were just written.
    unsafe {
        std::ptr::copy_nonoverlapping(src.as_ptr(), p, src.len());
        let first = p.read();
        let last = p.add(src.len() - 1).read();
        assert!(
            first == src[0] && last == src[src.len() - 1],
            "corrupt packet"
        );
        u32::from(first) + u32::from(last)
    }
}

/// Fills every byte of the first `n` (the burst workload, so that every page is resident).
#[inline]
pub fn fill_all<B: Buf>(buf: &mut B, n: usize, byte: u8) {
    assert!(buf.capacity() >= n, "buffer smaller than asked");
    // SAFETY: `capacity >= n` writable bytes at `ptr`.
    unsafe { std::ptr::write_bytes(buf.ptr(), byte, n) }
}

// SAFETY: a `Vec`'s whole capacity is writable memory it owns.
unsafe impl Buf for Vec<u8> {
    #[inline(always)]
    fn ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr()
    }
    #[inline(always)]
    fn capacity(&self) -> usize {
        Vec::capacity(self)
    }
}

// SAFETY: as for `Vec`: a `PooledBuf` owns its `Vec` exclusively until dropped.
unsafe impl Buf for PooledBuf {
    #[inline(always)]
    fn ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr()
    }
    #[inline(always)]
    fn capacity(&self) -> usize {
        Vec::capacity(self)
    }
}

/// A source of buffers, shared by every thread of a workload.
pub trait Contender: Clone + Send + Sync + 'static {
    /// The buffer handle; dropping it gives the buffer back.
    type B: Buf;
    /// A buffer with room for at least `n > 0` bytes.
    fn get(&self, n: usize) -> Self::B;
    /// Bytes the pool holds for reuse right now, where the pool can say.
    fn retained_bytes(&self) -> Option<u64> {
        None
    }
}

/// The contenders of the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// tierpool, default configuration (56 tiers: 4 per doubling from 256 B to 2 MiB, then 4,
    /// 8 and 16 MiB).
    Tierpool,
    /// tierpool with power-of-two tiers only.
    TierpoolPow2,
    /// tierpool with a budget on bytes in use (`max_in_use_bytes`, 256 MiB).
    TierpoolBudget,
    /// `Vec::with_capacity` and drop, under the process's global allocator.
    Vec,
    /// `Mutex<Vec<Vec<u8>>>` per power-of-two class.
    MutexPool,
    /// crossbeam `ArrayQueue` per power-of-two class.
    QueuePool,
    /// The `zeropool` crate.
    Zeropool,
    /// The `object-pool` crate.
    ObjectPool,
    /// The `byte-pool` crate.
    BytePool,
    /// The `opool` crate.
    Opool,
    /// The `lockfree-object-pool` crate.
    LockfreeObjectPool,
    /// tierpool asking the process's allocator (jemalloc, mimalloc) to give back what it
    /// released (`Builder::trim_allocator`); only in `burst`, under those allocators.
    TierpoolPurge,
}

impl Kind {
    /// The pools, in report order (the `Vec` baseline runs once per allocator).
    pub const POOLS: [Kind; 10] = [
        Kind::Tierpool,
        Kind::TierpoolPow2,
        Kind::TierpoolBudget,
        Kind::MutexPool,
        Kind::QueuePool,
        Kind::Zeropool,
        Kind::ObjectPool,
        Kind::BytePool,
        Kind::Opool,
        Kind::LockfreeObjectPool,
    ];

    /// Every contender, in report order (the `Vec` baseline after the tierpools).
    pub const ALL: [Kind; 11] = [
        Kind::Tierpool,
        Kind::TierpoolPow2,
        Kind::TierpoolBudget,
        Kind::Vec,
        Kind::MutexPool,
        Kind::QueuePool,
        Kind::Zeropool,
        Kind::ObjectPool,
        Kind::BytePool,
        Kind::Opool,
        Kind::LockfreeObjectPool,
    ];

    /// Contenders run by one workload only (`burst`), not in [`Kind::ALL`].
    pub const EXTRA: [Kind; 1] = [Kind::TierpoolPurge];

    /// The name on the command line (`--contender`) of a child process.
    pub fn id(self) -> &'static str {
        match self {
            Kind::Tierpool => "tierpool",
            Kind::TierpoolPow2 => "tierpool-pow2",
            Kind::TierpoolBudget => "tierpool-budget",
            Kind::Vec => "vec",
            Kind::MutexPool => "mutex-pool",
            Kind::QueuePool => "queue-pool",
            Kind::Zeropool => "zeropool",
            Kind::ObjectPool => "object-pool",
            Kind::BytePool => "byte-pool",
            Kind::Opool => "opool",
            Kind::LockfreeObjectPool => "lockfree-object-pool",
            Kind::TierpoolPurge => "tierpool-purge",
        }
    }

    /// Parses a name written by [`Kind::id`].
    pub fn from_id(id: &str) -> Option<Kind> {
        Kind::ALL
            .into_iter()
            .chain(Kind::EXTRA)
            .find(|k| k.id() == id)
    }

    /// The name in tables and charts; `alloc` is the process's allocator (named in the label
    /// of a pool only when it is not the system allocator: pools run under glibc except in
    /// the burst workload).
    pub fn label(self, alloc: Allocator) -> String {
        let name = self.base_label(alloc);
        if self != Kind::Vec && alloc != Allocator::System {
            format!("{name} on {}", alloc.name())
        } else {
            name
        }
    }

    fn base_label(self, alloc: Allocator) -> String {
        match self {
            Kind::Tierpool => "tierpool".into(),
            Kind::TierpoolPow2 => "tierpool (pow2 tiers)".into(),
            Kind::TierpoolBudget => "tierpool (budget)".into(),
            Kind::Vec => format!("Vec ({})", alloc.name()),
            Kind::MutexPool => "Mutex<Vec> per class".into(),
            Kind::QueuePool => "ArrayQueue per class".into(),
            Kind::Zeropool => "zeropool 0.7".into(),
            Kind::ObjectPool => "object-pool 0.6".into(),
            Kind::BytePool => "byte-pool 0.2".into(),
            Kind::Opool => "opool 0.2".into(),
            Kind::LockfreeObjectPool => "lockfree-object-pool 0.1".into(),
            Kind::TierpoolPurge => "tierpool (purge)".into(),
        }
    }

    /// How the contender was set up for these workloads.
    pub fn adaptation(self) -> &'static str {
        match self {
            Kind::Tierpool => "BufferPool::new(): 56 tiers, 4 per doubling from 256 B to 2 MiB, then 4, 8, 16 MiB; 64 MiB retained cap (thread caches included), 8 MiB thread caches, 1 s decay; glibc heap trimmed after releases of 1 MiB or more (trim_allocator, default on)",
            Kind::TierpoolPow2 => "builder().power_of_two_tiers(256, 16 MiB), otherwise default",
            Kind::TierpoolBudget => "builder().max_in_use_bytes(256 MiB), otherwise default (thread caches then hold min(8 MiB, 256 MiB / 16) each, plus one buffer of up to 16 MiB; not in burst, where tierpool's memory without a budget is the point)",
            Kind::Vec => "Vec::with_capacity(n) and drop; the allocator is the process's global allocator (mimalloc and jemalloc run in child processes). In the instructions workload the allocator is called directly (alloc + dealloc: what Vec compiles to under that global allocator), not through this binary's switchable counting allocator, which adds ~20 instructions per get+put",
            Kind::MutexPool => "hand-written: a Mutex<Vec<Vec<u8>>> per power-of-two class 256 B..16 MiB, unbounded",
            Kind::QueuePool => "hand-written: a crossbeam ArrayQueue (1024 slots) per power-of-two class 256 B..16 MiB; the shape of many Rust pools",
            Kind::Zeropool => "ZeroPool::new(), alloc_uninit(n) (its non-zeroing path); the pool is leaked (handles borrow it)",
            Kind::ObjectPool => "one Pool<Vec<u8>> per power-of-two class, pull(|| Vec::with_capacity(class)); pools leaked (handles borrow them)",
            Kind::BytePool => "one BytePool per power-of-two class, alloc(class size): it reuses only exact sizes and keeps every block >= 4 KiB in one FIFO queue, so one pool for all sizes popped a mismatched block, allocated anew and grew by a block per operation in a first run; new blocks are zeroed (vec![0; n]); pools leaked",
            Kind::Opool => "one Pool (1024 slots) per power-of-two class, get(); allocator makes Vec::with_capacity(class); pools leaked",
            Kind::LockfreeObjectPool => "one LinearObjectPool<Vec<u8>> per power-of-two class, pull(); it creates objects 32 at a time, so they start empty and reserve their class on first use; pools leaked",
            Kind::TierpoolPurge => "BufferPool::builder().trim_allocator(TrimAllocator::Jemalloc or ::Mimalloc), the process's allocator (features jemalloc, mimalloc), otherwise default",
        }
    }
}

/// How tierpool asks `alloc` to give released memory back.
pub fn purge_of(alloc: Allocator) -> TrimAllocator {
    match alloc {
        Allocator::System => TrimAllocator::Glibc,
        Allocator::Mimalloc => TrimAllocator::Mimalloc,
        Allocator::Jemalloc => TrimAllocator::Jemalloc,
    }
}

/// Something to run with a contender of any type (a generic callback).
pub trait Visit {
    /// What the visit returns.
    type Out;
    /// Runs with the contender `c`.
    fn visit<C: Contender>(self, c: C) -> Self::Out;
}

/// Builds a fresh contender of kind `kind` and hands it to `v`.
pub fn with_contender<V: Visit>(kind: Kind, v: V) -> V::Out {
    match kind {
        Kind::Tierpool => v.visit(Tierpool(BufferPool::new())),
        Kind::TierpoolPow2 => v.visit(Tierpool(
            BufferPool::builder()
                .power_of_two_tiers(256, 16 << 20)
                .build()
                .expect("valid configuration"),
        )),
        Kind::TierpoolBudget => v.visit(Tierpool(
            BufferPool::builder()
                .max_in_use_bytes(BUDGET)
                .build()
                .expect("valid configuration"),
        )),
        Kind::Vec => v.visit(PlainVec),
        Kind::MutexPool => v.visit(MutexPool::new()),
        Kind::QueuePool => v.visit(QueuePool::new(1024)),
        Kind::Zeropool => v.visit(Zeropool(Box::leak(Box::new(zeropool::ZeroPool::new())))),
        Kind::ObjectPool => v.visit(ObjectPool::new()),
        Kind::BytePool => v.visit(BytePool::new()),
        Kind::Opool => v.visit(Opool::new(1024)),
        Kind::LockfreeObjectPool => v.visit(LockfreePool::new()),
        Kind::TierpoolPurge => v.visit(Tierpool(
            BufferPool::builder()
                .trim_allocator(purge_of(crate::harness::alloc::current()))
                .build()
                .expect("valid configuration"),
        )),
    }
}

/// The budget of [`Kind::TierpoolBudget`]: more than any workload it runs in holds at once
/// (cross-thread holds a channel's worth of 1 MiB buffers, threads 64 x 4 KiB), so that it
/// measures what the budget's bookkeeping costs, not waiting.
pub const BUDGET: usize = 256 << 20;

/// Number of power-of-two classes, 256 B (class 0) to 16 MiB (class 16).
pub const CLASSES: usize = 17;

/// Size of power-of-two class `c`.
#[inline(always)]
pub fn class_size(c: usize) -> usize {
    256 << c
}

/// The power-of-two class for a request of `n` bytes, or `None` above 16 MiB.
#[inline(always)]
pub fn class_for(n: usize) -> Option<usize> {
    let c = (n.max(256).next_power_of_two().trailing_zeros() - 8) as usize;
    (c < CLASSES).then_some(c)
}

/// The class a returned buffer of capacity `cap` belongs to: only exact class sizes are kept.
#[inline(always)]
fn class_of_capacity(cap: usize) -> Option<usize> {
    class_for(cap).filter(|&c| class_size(c) == cap)
}

/// tierpool.
#[derive(Clone, Debug)]
pub struct Tierpool(pub BufferPool);

impl Contender for Tierpool {
    type B = PooledBuf;
    #[inline(always)]
    fn get(&self, n: usize) -> PooledBuf {
        self.0.get(n)
    }
    fn retained_bytes(&self) -> Option<u64> {
        Some(self.0.stats().retained_bytes as u64)
    }
}

/// `Vec::with_capacity` + drop.
#[derive(Clone, Copy, Debug)]
pub struct PlainVec;

impl Contender for PlainVec {
    type B = Vec<u8>;
    #[inline(always)]
    fn get(&self, n: usize) -> Vec<u8> {
        Vec::with_capacity(n)
    }
}

/// A buffer that goes back to one of the hand-written per-class pools.
#[derive(Debug)]
pub struct ClassBuf<P: ClassStore> {
    v: Vec<u8>,
    pool: P,
}

/// Storage of a hand-written per-class pool.
pub trait ClassStore: Clone + Send + Sync + 'static {
    /// Takes a buffer of class `c`, if one is kept.
    fn pop(&self, c: usize) -> Option<Vec<u8>>;
    /// Keeps a buffer of class `c` (or drops it when full).
    fn push(&self, c: usize, v: Vec<u8>);
    /// Bytes kept.
    fn retained(&self) -> u64;
}

// SAFETY: the `Vec`'s capacity is owned memory.
unsafe impl<P: ClassStore> Buf for ClassBuf<P> {
    #[inline(always)]
    fn ptr(&mut self) -> *mut u8 {
        self.v.as_mut_ptr()
    }
    #[inline(always)]
    fn capacity(&self) -> usize {
        self.v.capacity()
    }
}

impl<P: ClassStore> Drop for ClassBuf<P> {
    #[inline(always)]
    fn drop(&mut self) {
        let v = std::mem::take(&mut self.v);
        if let Some(c) = class_of_capacity(v.capacity()) {
            self.pool.push(c, v);
        }
    }
}

/// Every hand-written per-class store is a contender: pop the class or allocate it.
impl<P: ClassStore> Contender for P {
    type B = ClassBuf<P>;
    #[inline(always)]
    fn get(&self, n: usize) -> ClassBuf<P> {
        let v = match class_for(n) {
            Some(c) => self
                .pop(c)
                .unwrap_or_else(|| Vec::with_capacity(class_size(c))),
            None => Vec::with_capacity(n),
        };
        ClassBuf {
            v,
            pool: self.clone(),
        }
    }
    fn retained_bytes(&self) -> Option<u64> {
        Some(self.retained())
    }
}

/// The naive tiered pool: a `Mutex<Vec<Vec<u8>>>` per power-of-two class.
#[derive(Clone, Debug)]
pub struct MutexPool(Arc<Vec<Mutex<Vec<Vec<u8>>>>>);

impl MutexPool {
    /// An empty pool.
    pub fn new() -> Self {
        MutexPool(Arc::new((0..CLASSES).map(|_| Mutex::default()).collect()))
    }
}

impl Default for MutexPool {
    fn default() -> Self {
        Self::new()
    }
}

impl ClassStore for MutexPool {
    #[inline(always)]
    fn pop(&self, c: usize) -> Option<Vec<u8>> {
        self.0[c].lock().unwrap_or_else(|e| e.into_inner()).pop()
    }
    #[inline(always)]
    fn push(&self, c: usize, v: Vec<u8>) {
        self.0[c].lock().unwrap_or_else(|e| e.into_inner()).push(v);
    }
    fn retained(&self) -> u64 {
        (0..CLASSES)
            .map(|c| {
                (self.0[c].lock().unwrap_or_else(|e| e.into_inner()).len() * class_size(c)) as u64
            })
            .sum()
    }
}

/// The lock-free tiered pool: a crossbeam `ArrayQueue` per power-of-two class.
#[derive(Clone, Debug)]
pub struct QueuePool(Arc<Vec<ArrayQueue<Vec<u8>>>>);

impl QueuePool {
    /// An empty pool keeping up to `per_class` buffers per class.
    pub fn new(per_class: usize) -> Self {
        QueuePool(Arc::new(
            (0..CLASSES).map(|_| ArrayQueue::new(per_class)).collect(),
        ))
    }
}

impl ClassStore for QueuePool {
    #[inline(always)]
    fn pop(&self, c: usize) -> Option<Vec<u8>> {
        self.0[c].pop()
    }
    #[inline(always)]
    fn push(&self, c: usize, v: Vec<u8>) {
        let _ = self.0[c].push(v);
    }
    fn retained(&self) -> u64 {
        (0..CLASSES)
            .map(|c| (self.0[c].len() * class_size(c)) as u64)
            .sum()
    }
}

/// zeropool, through its non-zeroing `alloc_uninit`.
#[derive(Clone, Copy, Debug)]
pub struct Zeropool(&'static zeropool::ZeroPool);

/// A zeropool buffer.
pub struct ZeropoolBuf(zeropool::BufUninit<'static>);

impl std::fmt::Debug for ZeropoolBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZeropoolBuf")
            .field("len", &self.0.len())
            .finish()
    }
}

// SAFETY: `as_uninit_mut` is the buffer's `len()` writable bytes, owned until drop.
unsafe impl Buf for ZeropoolBuf {
    #[inline(always)]
    fn ptr(&mut self) -> *mut u8 {
        self.0.as_uninit_mut().as_mut_ptr().cast()
    }
    #[inline(always)]
    fn capacity(&self) -> usize {
        self.0.len()
    }
}

impl Contender for Zeropool {
    type B = ZeropoolBuf;
    #[inline(always)]
    fn get(&self, n: usize) -> ZeropoolBuf {
        ZeropoolBuf(self.0.alloc_uninit(n))
    }
}

/// object-pool: one `Pool<Vec<u8>>` per class.
#[derive(Clone, Copy)]
pub struct ObjectPool(&'static [object_pool::Pool<Vec<u8>>]);

impl std::fmt::Debug for ObjectPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ObjectPool")
    }
}

impl ObjectPool {
    fn new() -> Self {
        let pools: Vec<_> = (0..CLASSES)
            .map(|_| object_pool::Pool::new(0, Vec::new))
            .collect();
        ObjectPool(Box::leak(pools.into_boxed_slice()))
    }
}

/// A buffer from a crate's per-class pool (a guard that dereferences to the `Vec`), or a plain
/// `Vec` above the largest class.
pub enum ClassOrHeap<G> {
    /// From a class pool.
    Pooled(G),
    /// Larger than every class.
    Heap(Vec<u8>),
}

impl<G> std::fmt::Debug for ClassOrHeap<G> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ClassOrHeap::Pooled(_) => "ClassOrHeap::Pooled",
            ClassOrHeap::Heap(_) => "ClassOrHeap::Heap",
        })
    }
}

// SAFETY: either way the memory is a `Vec`'s owned capacity, held until the value is dropped.
unsafe impl<G: DerefMut<Target = Vec<u8>> + Send + 'static> Buf for ClassOrHeap<G> {
    #[inline(always)]
    fn ptr(&mut self) -> *mut u8 {
        match self {
            ClassOrHeap::Pooled(g) => g.as_mut_ptr(),
            ClassOrHeap::Heap(v) => v.as_mut_ptr(),
        }
    }
    #[inline(always)]
    fn capacity(&self) -> usize {
        match self {
            ClassOrHeap::Pooled(g) => g.capacity(),
            ClassOrHeap::Heap(v) => v.capacity(),
        }
    }
}

/// An object-pool buffer.
pub type ObjectPoolBuf = ClassOrHeap<object_pool::Reusable<'static, Vec<u8>>>;

impl Contender for ObjectPool {
    type B = ObjectPoolBuf;
    #[inline(always)]
    fn get(&self, n: usize) -> ObjectPoolBuf {
        match class_for(n) {
            Some(c) => ObjectPoolBuf::Pooled(self.0[c].pull(|| Vec::with_capacity(class_size(c)))),
            None => ObjectPoolBuf::Heap(Vec::with_capacity(n)),
        }
    }
    fn retained_bytes(&self) -> Option<u64> {
        Some(
            (0..CLASSES)
                .map(|c| (self.0[c].len() * class_size(c)) as u64)
                .sum(),
        )
    }
}

/// byte-pool: one `BytePool` per power-of-two class, sizes rounded up to the class.
#[derive(Clone, Copy)]
pub struct BytePool(&'static [byte_pool::BytePool<Vec<u8>>]);

impl std::fmt::Debug for BytePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BytePool")
    }
}

impl BytePool {
    fn new() -> Self {
        let pools: Vec<_> = (0..CLASSES).map(|_| byte_pool::BytePool::new()).collect();
        BytePool(Box::leak(pools.into_boxed_slice()))
    }
}

/// A byte-pool block.
pub struct BytePoolBuf(byte_pool::Block<'static, Vec<u8>>);

impl std::fmt::Debug for BytePoolBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BytePoolBuf")
    }
}

// SAFETY: a block derefs to a `Vec` whose `len` bytes are initialized and owned until drop.
unsafe impl Buf for BytePoolBuf {
    #[inline(always)]
    fn ptr(&mut self) -> *mut u8 {
        self.0.as_mut_ptr()
    }
    #[inline(always)]
    fn capacity(&self) -> usize {
        self.0.len()
    }
}

impl Contender for BytePool {
    type B = BytePoolBuf;
    #[inline(always)]
    fn get(&self, n: usize) -> BytePoolBuf {
        // Above the largest class: the last pool, asked for the exact size (it allocates).
        let (pool, size) = match class_for(n) {
            Some(c) => (&self.0[c], class_size(c)),
            None => (&self.0[CLASSES - 1], n),
        };
        BytePoolBuf(pool.alloc(size))
    }
}

/// The allocator opool calls for a class.
#[derive(Clone, Copy, Debug)]
pub struct ClassAlloc(usize);

impl opool::PoolAllocator<Vec<u8>> for ClassAlloc {
    #[inline]
    fn allocate(&self) -> Vec<u8> {
        Vec::with_capacity(self.0)
    }
}

type OpoolPool = opool::Pool<ClassAlloc, Vec<u8>>;

/// opool: one `Pool` per class.
#[derive(Clone, Copy, Debug)]
pub struct Opool(&'static [OpoolPool]);

impl Opool {
    fn new(per_class: usize) -> Self {
        let pools: Vec<_> = (0..CLASSES)
            .map(|c| opool::Pool::new(per_class, ClassAlloc(class_size(c))))
            .collect();
        Opool(Box::leak(pools.into_boxed_slice()))
    }
}

/// An opool buffer.
pub type OpoolBuf = ClassOrHeap<opool::RefGuard<'static, ClassAlloc, Vec<u8>>>;

impl Contender for Opool {
    type B = OpoolBuf;
    #[inline(always)]
    fn get(&self, n: usize) -> OpoolBuf {
        match class_for(n) {
            Some(c) => OpoolBuf::Pooled(self.0[c].get()),
            None => OpoolBuf::Heap(Vec::with_capacity(n)),
        }
    }
    fn retained_bytes(&self) -> Option<u64> {
        Some(
            (0..CLASSES)
                .map(|c| (self.0[c].len() * class_size(c)) as u64)
                .sum(),
        )
    }
}

type LinearPool = lockfree_object_pool::LinearObjectPool<Vec<u8>>;

/// lockfree-object-pool: one `LinearObjectPool` per class.
#[derive(Clone, Copy)]
pub struct LockfreePool(&'static [LinearPool]);

impl std::fmt::Debug for LockfreePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LockfreePool")
    }
}

impl LockfreePool {
    fn new() -> Self {
        let pools: Vec<_> = (0..CLASSES)
            .map(|_| LinearPool::new(Vec::new, |_| {}))
            .collect();
        LockfreePool(Box::leak(pools.into_boxed_slice()))
    }
}

/// A lockfree-object-pool buffer.
pub type LockfreeBuf = ClassOrHeap<lockfree_object_pool::LinearReusable<'static, Vec<u8>>>;

impl Contender for LockfreePool {
    type B = LockfreeBuf;
    #[inline(always)]
    fn get(&self, n: usize) -> LockfreeBuf {
        match class_for(n) {
            Some(c) => {
                let mut r = self.0[c].pull();
                if r.capacity() < class_size(c) {
                    // A fresh object of this page: give it its class's capacity once.
                    r.reserve_exact(class_size(c));
                }
                LockfreeBuf::Pooled(r)
            }
            None => LockfreeBuf::Heap(Vec::with_capacity(n)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Check(usize);

    impl Visit for Check {
        type Out = ();
        fn visit<C: Contender>(self, c: C) {
            for n in [1, 255, 256, 257, 4096, 70_000, 1 << 20, (16 << 20) + 1] {
                let mut a = c.get(n);
                let mut b = c.get(n);
                touch(&mut a, n);
                touch(&mut b, n);
                assert_ne!(a.ptr(), b.ptr(), "{}: one buffer handed out twice", self.0);
                let data: Vec<u8> = (0..n).map(|i| i as u8).collect();
                fill_and_check(&mut a, &data);
            }
        }
    }

    #[test]
    fn every_contender_serves_every_size() {
        for (i, kind) in Kind::POOLS.into_iter().chain([Kind::Vec]).enumerate() {
            with_contender(kind, Check(i));
        }
    }

    #[test]
    fn classes() {
        assert_eq!(class_for(1), Some(0));
        assert_eq!(class_for(256), Some(0));
        assert_eq!(class_for(257), Some(1));
        assert_eq!(class_for(16 << 20), Some(16));
        assert_eq!(class_for((16 << 20) + 1), None);
        assert_eq!(class_of_capacity(4096), Some(4));
        assert_eq!(class_of_capacity(4095), None);
    }
}
