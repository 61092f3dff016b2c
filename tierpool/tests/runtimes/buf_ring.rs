//! The provided-buffer ring (feature `buf-ring`) on a real io_uring, with a minimal event loop
//! of the `io-uring` crate: every byte across many loopback connections, no buffer (or part of
//! one) handed out twice, a dry ring recovered from under a budget, incremental consumption
//! sharing one buffer, teardown with buffers out and with a receive in flight, bad
//! configurations, and the kernel's support probed.
//!
//! On a machine without io_uring (or with it disabled) the tests say so and pass, unless
//! `TIERPOOL_REQUIRE_IO_URING` is set (as `.ci/run` sets it): then they fail.
#![cfg(all(target_os = "linux", feature = "buf-ring", not(loom), not(miri)))]

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use io_uring::{cqueue, types, IoUring};
use tierpool::io::buf_ring::{BufRing, BufRingError, Incremental, RecvError};
use tierpool::{BufferPool, PooledBytes};

use crate::common;

/// An io_uring instance, or `None` (after saying why) where the system has none.
fn uring() -> Option<IoUring> {
    match IoUring::new(1024) {
        Ok(u) => Some(u),
        Err(e) => {
            common::io_uring_refused(e);
            None
        }
    }
}

/// Builds the ring, or `None` (after saying so, or failing under
/// `TIERPOOL_REQUIRE_IO_URING`) where the kernel lacks what it asks for.
fn build(builder: tierpool::io::buf_ring::BufRingBuilder, uring: &IoUring) -> Option<BufRing> {
    match builder.build(uring) {
        Ok(r) => Some(r),
        Err(BufRingError::Unsupported { feature, .. }) => {
            common::io_uring_refused(feature);
            None
        }
        Err(e) => panic!("{e}"),
    }
}

/// A connected loopback TCP pair: (client, server).
fn pair(listener: &TcpListener) -> (TcpStream, TcpStream) {
    let c = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (s, _) = listener.accept().unwrap();
    (c, s)
}

/// Connection `k`'s bytes: not periodic with any buffer size, so a misplaced byte shows.
fn pattern(k: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i.wrapping_mul(131) ^ (i / 251) ^ k.wrapping_mul(97)) as u8)
        .collect()
}

/// Waits for at least one completion, at most 10 ms (so that a loop whose ring is dry gets to
/// replenish), and returns what completed.
fn wait(uring: &mut IoUring) -> Vec<cqueue::Entry> {
    let ts = types::Timespec::new().nsec(10_000_000);
    let args = types::SubmitArgs::new().timespec(&ts);
    match uring.submitter().submit_with_args(1, &args) {
        Ok(_) => {}
        Err(e)
            if e.raw_os_error() == Some(libc::ETIME) || e.raw_os_error() == Some(libc::EINTR) => {}
        Err(e) => panic!("io_uring_enter: {e}"),
    }
    uring.completion().collect()
}

fn push(uring: &mut IoUring, entry: &io_uring::squeue::Entry) {
    // SAFETY: the ring's receives name only the ring's own buffers, which stay valid until
    // their completions are passed to `complete` (or are leaked by a teardown).
    unsafe {
        if uring.submission().push(entry).is_err() {
            uring.submit().unwrap();
            uring
                .submission()
                .push(entry)
                .expect("room after submitting");
        }
    }
}

/// Live views by address: panics if a new one overlaps one still alive (a buffer, or part of
/// one, handed out twice).
#[derive(Default)]
struct Live(BTreeMap<usize, usize>);

impl Live {
    fn add(&mut self, v: &PooledBytes) {
        let (start, end) = (v.as_ptr() as usize, v.as_ptr() as usize + v.len());
        if let Some((&s, &e)) = self.0.range(..end).next_back() {
            assert!(
                e <= start || s >= end,
                "{start:#x}..{end:#x} overlaps a live view {s:#x}..{e:#x}"
            );
        }
        self.0.insert(start, end);
    }

    fn remove(&mut self, v: &PooledBytes) {
        self.0.remove(&(v.as_ptr() as usize));
    }
}

/// Many connections, each sending its own bytes in writes of many sizes, into a small ring
/// under a budget that holds twice the ring: every byte arrives in order on its connection, no
/// view overlaps a live one, the ring runs dry and recovers, every buffer comes back once.
fn every_byte(incremental: Incremental) {
    let Some(mut uring) = uring() else { return };
    const CONNS: usize = 48;
    const BYTES: usize = 96 << 10;
    const BUF: usize = 4096;
    const ENTRIES: u32 = 16;
    let pool = BufferPool::builder()
        .tiers([BUF, 64 << 10])
        .max_in_use_bytes(2 * ENTRIES as usize * BUF)
        .build()
        .unwrap();
    let buf_size = if incremental == Incremental::Off {
        BUF
    } else {
        64 << 10
    };
    let entries = if incremental == Incremental::Off {
        ENTRIES
    } else {
        1
    };
    let Some(mut ring) = build(
        BufRing::builder(&pool)
            .entries(entries)
            .buf_size(buf_size)
            .group(3)
            .incremental(incremental),
        &uring,
    ) else {
        return;
    };
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let (clients, servers): (Vec<_>, Vec<_>) = (0..CONNS).map(|_| pair(&listener)).unzip();
    let writers = std::thread::spawn(move || {
        // Round-robin writes of 1 byte to 9 KiB, so connections interleave in the ring.
        let mut clients = clients;
        let data: Vec<Vec<u8>> = (0..CONNS).map(|k| pattern(k, BYTES)).collect();
        let mut at = vec![0usize; CONNS];
        let mut size = 1usize;
        while at.iter().any(|&a| a < BYTES) {
            for k in 0..CONNS {
                let n = size.min(BYTES - at[k]);
                clients[k].write_all(&data[k][at[k]..at[k] + n]).unwrap();
                at[k] += n;
                size = size * 7 % 9001 + 1;
            }
        }
        for c in &clients {
            c.shutdown(std::net::Shutdown::Write).unwrap();
        }
        clients
    });
    for (k, s) in servers.iter().enumerate() {
        let e = ring.recv_multishot(s.as_raw_fd()).user_data(k as u64);
        push(&mut uring, &e);
    }
    // Each connection's views, held until it has 24 KiB or more (so buffers stay out and the
    // budget binds), then checked and dropped.
    let mut held: Vec<Vec<PooledBytes>> = (0..CONNS).map(|_| Vec::new()).collect();
    let mut got: Vec<Vec<u8>> = (0..CONNS).map(|_| Vec::new()).collect();
    let mut ended = [false; CONNS];
    let mut rearm = Vec::new();
    let mut live = Live::default();
    let deadline = Instant::now() + Duration::from_secs(60);
    let flush =
        |k: usize, held: &mut Vec<Vec<PooledBytes>>, got: &mut Vec<Vec<u8>>, live: &mut Live| {
            for v in held[k].drain(..) {
                live.remove(&v);
                got[k].extend_from_slice(&v);
            }
        };
    while ended.iter().any(|e| !e) {
        assert!(Instant::now() < deadline, "stuck: {:?}", ring.stats());
        for cqe in wait(&mut uring) {
            let k = cqe.user_data() as usize;
            let last = !cqueue::more(cqe.flags());
            // SAFETY: a completion of one of this ring's receives, passed once.
            match unsafe { ring.complete(&cqe) } {
                Ok(Some(v)) => {
                    live.add(&v);
                    held[k].push(v);
                    if held[k].iter().map(|v| v.len()).sum::<usize>() >= 24 << 10 {
                        flush(k, &mut held, &mut got, &mut live);
                    }
                    if last {
                        rearm.push(k);
                    }
                }
                Ok(None) => {
                    flush(k, &mut held, &mut got, &mut live);
                    ended[k] = true;
                }
                Err(RecvError::Dry) => rearm.push(k),
                Err(e) => panic!("connection {k}: {e}"),
            }
        }
        if ring.replenish() == 0 && ring.stats().in_ring == 0 {
            // Dry, and the budget has no room: the consumer catches up.
            for k in 0..CONNS {
                flush(k, &mut held, &mut got, &mut live);
            }
            ring.replenish();
        }
        if ring.stats().in_ring > 0 {
            for k in rearm.drain(..) {
                let e = ring
                    .recv_multishot(servers[k].as_raw_fd())
                    .user_data(k as u64);
                push(&mut uring, &e);
            }
        }
    }
    let _clients = writers.join().unwrap();
    for (k, g) in got.iter().enumerate() {
        assert_eq!(g.len(), BYTES, "connection {k}'s length");
        assert!(*g == pattern(k, BYTES), "connection {k}'s bytes");
    }
    let st = ring.stats();
    assert_eq!(st.in_flight, 0);
    assert_eq!(st.received_bytes, (CONNS * BYTES) as u64);
    if incremental == Incremental::Off {
        assert!(
            st.dry > 0,
            "the budget should have run the ring dry: {st:?}"
        );
    }
    let closed = ring.close();
    assert_eq!(closed.leaked, 0);
    let s = pool.stats();
    assert_eq!(s.gets, s.returned, "every buffer back exactly once: {s}");
    let b = s.budget.as_ref().expect("a budget");
    assert_eq!(b.in_use_bytes, 0, "{s}");
}

#[test]
fn every_byte_across_many_connections() {
    every_byte(Incremental::Off);
}

#[test]
fn every_byte_with_incremental_consumption() {
    every_byte(Incremental::Required);
}

/// A ring of two buffers and a budget of exactly two: holding both runs the ring dry
/// (`ENOBUFS`, counted); dropping them lets `replenish` refill it, and the receive goes on
/// with no byte lost.
#[test]
fn dry_ring_recovers_when_buffers_return() {
    let Some(mut uring) = uring() else { return };
    let pool = BufferPool::builder()
        .tiers([4096])
        .max_in_use_bytes(2 * 4096)
        .build()
        .unwrap();
    let mut ring = BufRing::builder(&pool)
        .entries(2)
        .buf_size(4096)
        .build(&uring)
        .unwrap();
    assert_eq!(ring.stats().in_ring, 2);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let (mut c, s) = pair(&listener);
    let data = pattern(7, 3 * 4096);
    let mut held = Vec::new();
    let mut got = Vec::new();
    let mut dry = false;
    for chunk in data.chunks(4096) {
        c.write_all(chunk).unwrap();
        loop {
            let e = ring.recv(s.as_raw_fd(), 0);
            push(&mut uring, &e);
            let cqe = loop {
                if let Some(c) = wait(&mut uring).pop() {
                    break c;
                }
            };
            // SAFETY: a completion of one of this ring's receives, passed once.
            match unsafe { ring.complete(&cqe) } {
                Ok(Some(v)) => {
                    held.push(v);
                    if held.iter().map(|v| v.len()).sum::<usize>() % 4096 == 0 {
                        break;
                    }
                }
                Ok(None) => panic!("early end"),
                Err(RecvError::Dry) => {
                    dry = true;
                    assert_eq!(ring.replenish(), 0, "the budget is spent");
                    assert!(pool.try_get(1).is_err());
                    for v in held.drain(..) {
                        got.extend_from_slice(&v);
                    }
                    assert_eq!(ring.replenish(), 2, "both buffers back in the ring");
                }
                Err(e) => panic!("{e}"),
            }
        }
        ring.replenish();
    }
    for v in held.drain(..) {
        got.extend_from_slice(&v);
    }
    assert!(dry, "the third receive should have found the ring dry");
    assert_eq!(got, data);
    let st = ring.stats();
    assert!(st.dry >= 1 && st.in_flight == 0, "{st:?}");
    assert!(st.starved > 0, "{st:?}");
    drop(ring);
    let s = pool.stats();
    assert_eq!(s.gets, s.returned, "{s}");
}

/// Small receives into one 64 KiB buffer with incremental consumption: each a view of the same
/// buffer at the next offset, one buffer taken from the pool for all of them, returned once
/// the kernel is done with it and the last view is dropped.
#[test]
fn incremental_receives_share_one_buffer() {
    let Some(mut uring) = uring() else { return };
    let pool = BufferPool::new();
    let Some(mut ring) = build(
        BufRing::builder(&pool)
            .entries(1)
            .buf_size(64 << 10)
            .incremental(Incremental::Required),
        &uring,
    ) else {
        return;
    };
    assert!(ring.is_incremental());
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let (mut c, s) = pair(&listener);
    let mut views = Vec::new();
    for k in 0..8u8 {
        c.write_all(&[k; 1000]).unwrap();
        let e = ring.recv(s.as_raw_fd(), 0);
        push(&mut uring, &e);
        let cqe = loop {
            if let Some(c) = wait(&mut uring).pop() {
                break c;
            }
        };
        assert!(cqueue::buffer_more(cqe.flags()), "the buffer has room left");
        // SAFETY: the completion of this ring's receive, passed once.
        let v = unsafe { ring.complete(&cqe) }.unwrap().expect("bytes");
        assert_eq!(&v[..], &[k; 1000][..]);
        views.push(v);
    }
    let base = views[0].as_ptr() as usize;
    for (k, v) in views.iter().enumerate() {
        assert_eq!(
            v.as_ptr() as usize,
            base + k * 1000,
            "view {k} follows the one before"
        );
    }
    assert_eq!(pool.stats().gets, 1, "one buffer for all eight receives");
    assert_eq!(ring.stats().in_ring, 1, "still lent to the kernel");
    // The ring lets go of the buffer at teardown; the views keep it until the last is dropped.
    let closed = ring.close();
    assert_eq!((closed.returned, closed.leaked), (1, 0));
    assert_eq!(pool.stats().returned, 0);
    assert_eq!(&views[7][..], &[7u8; 1000][..]);
    drop(views);
    assert_eq!(pool.stats().returned, 1);
}

/// Torn down while received buffers are out: they stay readable and go back to the pool when
/// dropped, after the ring's own; torn down with a receive in flight: the ring's buffers are
/// leaked, not reused, and the receive then fails cleanly instead of writing into freed memory.
#[test]
fn teardown_with_buffers_out_and_receives_in_flight() {
    let Some(mut uring) = uring() else { return };
    let pool = BufferPool::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let (mut c, s) = pair(&listener);
    let mut ring = BufRing::builder(&pool)
        .entries(8)
        .buf_size(4096)
        .build(&uring)
        .unwrap();
    c.write_all(b"kept past the ring").unwrap();
    let e = ring.recv(s.as_raw_fd(), 0);
    push(&mut uring, &e);
    let cqe = loop {
        if let Some(c) = wait(&mut uring).pop() {
            break c;
        }
    };
    // SAFETY: the completion of this ring's receive, passed once.
    let out = unsafe { ring.complete(&cqe) }.unwrap().expect("bytes");
    assert_eq!(ring.in_flight(), 0);
    let closed = ring.close();
    assert_eq!((closed.returned, closed.leaked), (7, 0));
    assert_eq!(pool.stats().returned, 7);
    assert_eq!(&out[..], b"kept past the ring");
    drop(out);
    let st = pool.stats();
    assert_eq!(
        (st.gets, st.returned),
        (8, 8),
        "each buffer back exactly once"
    );

    // A receive in flight on an idle connection when the ring goes.
    let mut ring = BufRing::builder(&pool)
        .entries(4)
        .buf_size(4096)
        .group(1)
        .build(&uring)
        .unwrap();
    let e = ring.recv(s.as_raw_fd(), 0).user_data(99);
    push(&mut uring, &e);
    uring.submit().unwrap();
    assert_eq!(ring.in_flight(), 1);
    let out_before = pool.stats().gets - pool.stats().returned;
    let closed = ring.close();
    assert_eq!((closed.returned, closed.leaked), (0, 4));
    let after = pool.stats();
    assert_eq!(
        after.gets - after.returned,
        out_before,
        "the 4 kept back are still out"
    );
    c.write_all(b"late").unwrap();
    let cqe = loop {
        if let Some(c) = wait(&mut uring).pop() {
            break c;
        }
    };
    assert_eq!(cqe.user_data(), 99);
    assert_eq!(
        cqe.result(),
        -libc::ENOBUFS,
        "the group is gone: no buffer selected"
    );
    assert_eq!(cqueue::buffer_select(cqe.flags()), None);
    let mut late = [0u8; 4];
    let mut s = s;
    s.read_exact(&mut late).unwrap();
    assert_eq!(&late, b"late", "the bytes stayed in the socket");
}

#[test]
fn bad_configurations_are_errors() {
    let Some(uring) = uring() else { return };
    let pool = BufferPool::new();
    for entries in [0, 3, 1 << 16, u32::MAX] {
        match BufRing::builder(&pool).entries(entries).build(&uring) {
            Err(BufRingError::InvalidEntries { entries: e }) => assert_eq!(e, entries),
            other => panic!("{entries}: {other:?}"),
        }
    }
    for size in [0, u32::MAX as usize + 1] {
        match BufRing::builder(&pool).buf_size(size).build(&uring) {
            Err(BufRingError::InvalidBufSize { size: s }) => assert_eq!(s, size),
            other => panic!("{size}: {other:?}"),
        }
    }
    let first = BufRing::builder(&pool)
        .entries(2)
        .group(9)
        .build(&uring)
        .unwrap();
    match BufRing::builder(&pool).entries(2).group(9).build(&uring) {
        Err(e @ BufRingError::GroupInUse { group: 9 }) => {
            assert!(e.to_string().contains("group 9"), "{e}")
        }
        other => panic!("{other:?}"),
    }
    drop(first);
    let again = BufRing::builder(&pool).entries(2).group(9).build(&uring);
    assert!(again.is_ok(), "the group is free once the ring is dropped");
    let file = std::fs::File::open("/dev/null").unwrap();
    match BufRing::builder(&pool).build(&file) {
        Err(e @ BufRingError::NotIoUring) => {
            assert!(e.to_string().contains("not an io_uring"), "{e}")
        }
        other => panic!("not an io_uring: {other:?}"),
    }
    assert!(matches!(
        tierpool::io::buf_ring::probe(&file),
        Err(BufRingError::NotIoUring)
    ));
    drop(again);
    let s = pool.stats();
    assert_eq!(s.gets, s.returned, "{s}");
}

/// The probe on this kernel; `.ci/run`'s machine has both (Linux 6.12 or later).
#[test]
fn probe_reports_the_kernels_support() {
    let Some(uring) = uring() else { return };
    let support = tierpool::io::buf_ring::probe(&uring).unwrap();
    eprintln!("{support:?}");
    if std::env::var_os("TIERPOOL_REQUIRE_IO_URING").is_some() {
        assert!(support.rings && support.incremental, "{support:?}");
    }
    // With support, `Incremental::IfSupported` uses it; the probe left no group behind.
    let pool = BufferPool::new();
    let ring = BufRing::builder(&pool)
        .incremental(Incremental::IfSupported)
        .group(u16::MAX)
        .build(&uring)
        .unwrap();
    assert_eq!(ring.is_incremental(), support.incremental);
}

/// Reads of a pipe at its end (0 bytes, a buffer id reported): without incremental
/// consumption the kernel has consumed the buffer, which comes back to the pool; with it the
/// kernel has not (its head did not move), so the ring keeps the buffer in its slot and the
/// next read, from another pipe, lands right after the bytes already received in it.
#[test]
fn end_of_file_reads_leave_the_buffer_where_the_kernel_has_it() {
    use std::os::fd::{FromRawFd, OwnedFd};
    let Some(mut uring) = uring() else { return };
    let pipe = || {
        let mut fds = [0; 2];
        // SAFETY: `pipe` writes two descriptors into the array.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: both are new descriptors that nothing else owns.
        unsafe {
            (
                std::fs::File::from(OwnedFd::from_raw_fd(fds[0])),
                std::fs::File::from(OwnedFd::from_raw_fd(fds[1])),
            )
        }
    };
    let one = |uring: &mut IoUring, ring: &mut BufRing, fd: i32| {
        let e = ring.read(fd, 0, u64::MAX);
        push(uring, &e);
        let cqe = loop {
            if let Some(c) = wait(uring).pop() {
                break c;
            }
        };
        // SAFETY: the completion of this ring's read, passed once.
        (unsafe { ring.complete(&cqe) }.unwrap(), cqe.flags())
    };
    for incremental in [Incremental::Off, Incremental::Required] {
        let pool = BufferPool::new();
        let Some(mut ring) = build(
            BufRing::builder(&pool)
                .entries(1)
                .buf_size(4096)
                .incremental(incremental)
                .group(11),
            &uring,
        ) else {
            return;
        };
        let (r, mut w) = pipe();
        w.write_all(b"abc").unwrap();
        let (first, _) = one(&mut uring, &mut ring, r.as_raw_fd());
        let first = first.expect("three bytes");
        assert_eq!(&first[..], b"abc");
        if incremental == Incremental::Off {
            ring.replenish();
        }
        drop(w);
        let (eof, flags) = one(&mut uring, &mut ring, r.as_raw_fd());
        assert!(eof.is_none(), "{incremental:?}: the end of the pipe");
        eprintln!("{incremental:?}: end-of-file completion flags {flags:#x}");
        if incremental == Incremental::Off {
            if cqueue::buffer_select(flags).is_some() {
                assert_eq!(ring.stats().in_ring, 0, "the kernel consumed it");
                assert_eq!(ring.replenish(), 1);
            }
            continue;
        }
        assert_eq!(ring.stats().in_ring, 1, "the kernel still has the buffer");
        let (r2, mut w2) = pipe();
        w2.write_all(b"defg").unwrap();
        let (next, _) = one(&mut uring, &mut ring, r2.as_raw_fd());
        let next = next.expect("four bytes");
        assert_eq!(&next[..], b"defg");
        assert_eq!(
            next.as_ptr() as usize,
            first.as_ptr() as usize + 3,
            "the next read goes on in the same buffer, after the first"
        );
        assert_eq!(&first[..], b"abc", "and the first view is intact");
        assert_eq!(pool.stats().gets, 1);
        drop((first, next, ring));
        let s = pool.stats();
        assert_eq!(s.gets, s.returned, "{s}");
    }
}
