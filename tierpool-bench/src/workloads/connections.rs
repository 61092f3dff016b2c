//! `connections` (memory that follows traffic, not connections): 10,000 loopback TCP
//! connections, of which about 1% are active at once: 100 client tasks each own 100
//! connections and send a 16 KiB message on a random one of them, wait for the server's
//! one-byte answer, and go on. The server reads each message with one of two strategies:
//! (a) **held**, the usual receive loop: a pooled buffer taken when the connection is accepted
//! and kept while it waits for data; (b) **ready**, readiness-first: `tierpool::io::read_ready_exact`
//! waits until the socket is readable and only then takes a pooled buffer, given back once the
//! message is handled; (c) **ring**, a `tierpool::io::buf_ring::BufRing` of 256 pooled 16 KiB
//! buffers registered with io_uring and one multishot receive per connection, on one thread
//! (the `io-uring` crate's loop): the kernel takes a buffer from the ring only when data
//! arrives, and the ring is refilled from the pool after each batch of completions. One
//! server process per strategy (RSS is per process), with the
//! client in a process of its own (each side's 10,000 descriptors fit the usual limit of
//! 20,000), in interleaved rounds; per message, with messages/s, p99 latency (send to
//! answer, measured by the client), the bytes held in pooled buffers (the exact peak of a
//! budget of 1 GiB that never binds, thread caches included, and while all connections are
//! idle), RSS above the idle-connections baseline (peak of 5 ms samples) and the peak RSS,
//! the server's allocations per message (counted while the traffic runs).

use std::collections::BTreeMap;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, types, IoUring};
use tierpool::io::buf_ring::{BufRing, RecvError};
use tierpool::BufferPool;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::Ctx;

use crate::harness::children::{in_rounds, ChildRun};
use crate::harness::choice::Choice;
use crate::harness::record::{Output, Record};
use crate::harness::procfs::Proc;

/// The message size.
pub const MSG: usize = 16 << 10;

crate::choices! {
    /// How the server reads.
    pub enum Strategy {
        /// A pooled buffer per connection, held while it waits.
        Held => (
            "held",
            "(a) buffer held per connection (tokio)",
            "connections workload: pool.get(16 KiB) when a connection is accepted, kept for its life; each message read into it with read_buf, checked, then cleared",
        ),
        /// `read_ready_exact`: a buffer only once data has arrived.
        Ready => (
            "ready",
            "(b) tierpool read_ready_exact (tokio)",
            "connections workload: tierpool::io::read_ready_exact(&mut stream, &pool, 16 KiB) per message: waits for readability holding nothing, then takes a pooled buffer and reads the message into it; the buffer goes back once the message is checked",
        ),
        /// A provided-buffer ring on io_uring: the kernel takes a buffer only when data
        /// arrives.
        Ring => (
            "ring",
            "(c) tierpool BufRing (io_uring provided buffers)",
            "connections workload: one multishot receive per connection into a tierpool::io::buf_ring::BufRing (256 entries of 16 KiB, refilled from the pool after each batch of completions), on one thread with the io-uring crate's loop; a message's views are held until its 16 KiB are in, checked, then dropped (the buffers go back to the pool)",
        ),
    }
}

/// Connections, client tasks (the active ones at a time) and messages in all.
pub fn shape(quick: bool) -> (usize, usize, usize) {
    if quick {
        (400, 4, 2_000)
    } else {
        (10_000, 100, 60_000)
    }
}

/// Interleaved rounds: one process per strategy in each.
pub fn rounds(quick: bool) -> usize {
    if quick {
        1
    } else {
        2
    }
}

/// The message: not periodic with the read sizes, so a misplaced byte shows.
fn message() -> Vec<u8> {
    (0..MSG).map(|i| (i * 131 + i / 251) as u8).collect()
}

fn sum(p: &[u8]) -> u64 {
    p.iter().map(|&b| u64::from(b)).sum()
}

/// The server side of one connection.
async fn serve(mut s: TcpStream, strategy: Strategy, pool: BufferPool, expected: u64) {
    match strategy {
        Strategy::Held => {
            let mut buf = pool.get(MSG);
            loop {
                buf.clear();
                while buf.len() < MSG {
                    let room = MSG - buf.len();
                    let n = s
                        .read_buf(&mut bytes::BufMut::limit(&mut *buf, room))
                        .await
                        .expect("read");
                    if n == 0 {
                        assert!(buf.is_empty(), "a message cut short");
                        return;
                    }
                }
                assert_eq!(sum(&buf), expected, "a message's bytes");
                s.write_all(&[1]).await.expect("answer");
            }
        }
        Strategy::Ready => {
            while let Some(buf) = tierpool::io::read_ready_exact(&mut s, &pool, MSG)
                .await
                .expect("read")
            {
                assert_eq!(sum(&buf), expected, "a message's bytes");
                drop(buf);
                s.write_all(&[1]).await.expect("answer");
            }
        }
        Strategy::Ring => unreachable!("the ring server is not a tokio task"),
    }
}

/// Entries in the ring of strategy (c).
const RING_ENTRIES: u32 = 256;

/// Each connection's message of strategy (c) as it arrives: its views until its 16 KiB are in.
struct Messages {
    parts: Vec<Vec<tierpool::PooledBytes>>,
    have: Vec<usize>,
    expected: u64,
}

impl Messages {
    fn new(conns: usize, expected: u64) -> Self {
        Messages {
            parts: (0..conns).map(|_| Vec::with_capacity(2)).collect(),
            have: vec![0; conns],
            expected,
        }
    }

    /// Adds bytes received on connection `k`: true once its message is whole and checked
    /// (its buffers then go back to the pool).
    fn add(&mut self, k: usize, v: tierpool::PooledBytes) -> Result<bool, String> {
        self.have[k] += v.len();
        self.parts[k].push(v);
        if self.have[k] > MSG {
            return Err("more than a message before the answer".into());
        }
        if self.have[k] < MSG {
            return Ok(false);
        }
        let got: u64 = self.parts[k].iter().map(|p| sum(p)).sum();
        if got != self.expected {
            return Err("a message's bytes".into());
        }
        self.parts[k].clear();
        self.have[k] = 0;
        Ok(true)
    }

    /// True if part of a message has arrived on connection `k`.
    fn started(&self, k: usize) -> bool {
        self.have[k] != 0
    }
}

/// Pushes `entry` onto the submission queue, submitting what is queued first if it is full.
///
/// # Safety
/// What `entry` points at (a ring's buffers, the static answer) stays valid until its
/// completion.
unsafe fn push_entry(uring: &mut IoUring, entry: &io_uring::squeue::Entry) -> Result<(), String> {
    // SAFETY: the caller's contract.
    unsafe {
        if uring.submission().push(entry).is_err() {
            uring.submit().map_err(|e| e.to_string())?;
            uring
                .submission()
                .push(entry)
                .map_err(|_| "no room after submitting")?;
        }
    }
    Ok(())
}

/// Submits what is queued and waits for a completion; while receives wait for buffers
/// (`rearming`), for 1 ms at most, so that they are looked at again.
fn submit_and_wait(uring: &mut IoUring, rearming: bool) -> Result<(), String> {
    let waited = if rearming {
        let ts = types::Timespec::new().nsec(1_000_000);
        let args = types::SubmitArgs::new().timespec(&ts);
        uring.submitter().submit_with_args(1, &args)
    } else {
        uring.submit_and_wait(1)
    };
    match waited {
        Err(x) if !matches!(x.raw_os_error(), Some(libc::ETIME | libc::EINTR)) => {
            Err(x.to_string())
        }
        _ => Ok(()),
    }
}

/// The server of strategy (c): every connection's messages through one provided-buffer ring,
/// on this thread. Says on `armed` once every receive is submitted; returns the ring's
/// counters once every connection has ended.
fn ring_server(
    streams: Vec<std::net::TcpStream>,
    pool: BufferPool,
    expected: u64,
    armed: std::sync::mpsc::Sender<()>,
) -> Result<tierpool::io::buf_ring::BufRingStats, String> {
    /// `user_data` of an answer's send (else the connection's index).
    const SEND: u64 = 1 << 63;
    static ACK: [u8; 1] = [1];
    let e = |e: std::io::Error| e.to_string();
    let mut uring = IoUring::new(4096).map_err(e)?;
    let mut ring = BufRing::builder(&pool)
        .entries(RING_ENTRIES)
        .buf_size(MSG)
        .build(&uring)
        .map_err(|e| e.to_string())?;
    let fds: Vec<i32> = streams.iter().map(|s| s.as_raw_fd()).collect();
    let receive = |ring: &mut BufRing, k: usize| ring.recv_multishot(fds[k]).user_data(k as u64);
    for k in 0..fds.len() {
        // SAFETY: a receive names the ring's buffers, which the ring keeps until its
        // completions.
        unsafe { push_entry(&mut uring, &receive(&mut ring, k))? };
    }
    uring.submit().map_err(e)?;
    let _ = armed.send(());
    let mut messages = Messages::new(fds.len(), expected);
    let mut open = fds.len();
    let mut rearm: Vec<usize> = Vec::new();
    let mut cqes: Vec<cqueue::Entry> = Vec::with_capacity(8192);
    while open > 0 {
        submit_and_wait(&mut uring, !rearm.is_empty())?;
        cqes.clear();
        cqes.extend(uring.completion());
        for cqe in &cqes {
            let ud = cqe.user_data();
            if ud & SEND != 0 {
                if cqe.result() != 1 {
                    return Err(format!("an answer's send: {}", cqe.result()));
                }
                continue;
            }
            let k = ud as usize;
            let last = !cqueue::more(cqe.flags());
            // SAFETY: every completion but the sends' (handled above) is of a receive this
            // ring built, and each is passed once.
            match unsafe { ring.complete(cqe) } {
                Ok(Some(v)) => {
                    if messages.add(k, v)? {
                        let send = opcode::Send::new(types::Fd(fds[k]), ACK.as_ptr(), 1)
                            .build()
                            .user_data(SEND | k as u64);
                        // SAFETY: the send names the static `ACK`.
                        unsafe { push_entry(&mut uring, &send)? };
                    }
                    if last {
                        rearm.push(k);
                    }
                }
                Ok(None) if messages.started(k) => return Err("a message cut short".into()),
                Ok(None) => open -= 1,
                Err(RecvError::Dry) => rearm.push(k),
                Err(x) => return Err(format!("connection {k}: {x}")),
            }
        }
        ring.replenish();
        if ring.stats().in_ring > 0 {
            for k in rearm.drain(..) {
                // SAFETY: as for the first receives.
                unsafe { push_entry(&mut uring, &receive(&mut ring, k))? };
            }
        }
    }
    let stats = ring.stats();
    let leaked = ring.close().leaked;
    if leaked != 0 {
        return Err(format!("{leaked} ring buffers kept back"));
    }
    drop(streams);
    Ok(stats)
}

/// Where the client process finds the server (set by [`run_one`] for the client).
const ADDR_ENV: &str = "TIERPOOL_CONNECTIONS_ADDR";

/// `--contender` id of the client process.
pub const CLIENT: &str = "client";

/// The client, in a process of its own (so that each side's descriptors fit the usual limit
/// of 20,000, and the server's RSS is the server's): connects every connection to the
/// address in [`ADDR_ENV`], says `ready` on stdout, waits for a line on stdin, runs the
/// traffic and prints `done <elapsed ns> <p50 us> <p99 us> <messages>`; then exits, which
/// closes its connections.
pub fn run_client(quick: bool) -> Result<(), String> {
    use std::io::{BufRead, Write};
    let (conns, active, messages) = shape(quick);
    crate::harness::nofile::raise_nofile(conns as u64 + 256)
        .map_err(|e| format!("the connections workload: {e}"))?;
    let addr: std::net::SocketAddr = std::env::var(ADDR_ENV)
        .map_err(|_| format!("{ADDR_ENV} not set"))?
        .parse()
        .map_err(|e| format!("{ADDR_ENV}: {e}"))?;
    let msg: Arc<Vec<u8>> = Arc::new(message());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let mut owned: Vec<Vec<TcpStream>> = (0..active).map(|_| Vec::new()).collect();
        for i in 0..conns {
            let c = TcpStream::connect(addr).await.expect("connect");
            c.set_nodelay(true).expect("nodelay");
            owned[i % active].push(c);
        }
        println!("ready");
        std::io::stdout().flush().expect("stdout");
        let mut go = String::new();
        std::io::stdin().lock().read_line(&mut go).expect("stdin");
        let started = Instant::now();
        let per_client = messages / active;
        let clients: Vec<_> = owned
            .into_iter()
            .enumerate()
            .map(|(k, mut conns)| {
                let msg = msg.clone();
                tokio::spawn(async move {
                    let mut h = hdrhistogram::Histogram::<u64>::new(3).expect("histogram");
                    let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ (k as u64 + 1);
                    let mut ack = [0u8; 1];
                    for _ in 0..per_client {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        let i = (rng % conns.len() as u64) as usize;
                        let c = &mut conns[i];
                        let t = Instant::now();
                        c.write_all(&msg).await.expect("send");
                        c.read_exact(&mut ack).await.expect("answer");
                        let _ = h.record(t.elapsed().as_micros() as u64);
                    }
                    (h, conns)
                })
            })
            .collect();
        let mut hist = hdrhistogram::Histogram::<u64>::new(3).expect("histogram");
        let mut all = Vec::new();
        for c in clients {
            let (h, conns) = c.await.expect("client");
            hist.add(h).expect("same bounds");
            all.push(conns);
        }
        let elapsed = started.elapsed();
        println!(
            "done {} {} {} {}",
            elapsed.as_nanos(),
            hist.value_at_quantile(0.5),
            hist.value_at_quantile(0.99),
            hist.len()
        );
        std::io::stdout().flush().expect("stdout");
        drop(all);
    });
    Ok(())
}

/// What one strategy's run measured.
struct Measured {
    /// The client's time for all its messages.
    elapsed: Duration,
    /// Send-to-answer latency, in microseconds.
    p50_us: u64,
    p99_us: u64,
    /// Messages sent.
    sent: u64,
    /// RSS with every connection open and idle.
    idle_rss: u64,
    /// Bytes in pooled buffers with every connection idle.
    held_idle: usize,
    /// The peak of RSS samples while the traffic ran.
    rss_peak: u64,
    /// The server's allocations and bytes allocated while the traffic ran.
    allocs: u64,
    alloc_bytes: u64,
    ring: Option<tierpool::io::buf_ring::BufRingStats>,
}

/// Runs the server of one strategy in this process (2 tokio workers), with the client in a
/// child process, and reports it.
pub fn run_one(ctx: &Ctx, strategy: Strategy) -> Result<Output, String> {
    let (conns, active, _) = shape(ctx.quick);
    crate::harness::nofile::raise_nofile(conns as u64 + 256)
        .map_err(|e| format!("the connections workload: {e}"))?;
    // A budget that never binds (1 GiB against at most 160 MiB in use), for its exact peak of
    // bytes in use; the get and return paths are the unbudgeted ones' (the `instructions`
    // workload counts both).
    let pool = BufferPool::builder()
        .max_in_use_bytes(1 << 30)
        .build()
        .expect("valid configuration");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let m = rt.block_on(serve_and_measure(ctx.quick, strategy, conns, &pool));
    drop(rt);
    let m = m?;
    let s = pool.stats();
    assert_eq!(s.gets, s.returned, "every buffer back: {s}");
    // The exact peak of the budget's account: buffers handed out, and those in thread
    // caches (which a budget counts as charged), so an upper bound on what the server held.
    let peak = s.budget.as_ref().map_or(0, |b| b.peak_in_use_bytes);
    Ok(record(ctx, strategy, (conns, active), &m, peak))
}

/// The client process: told the server's address, it connects every connection, says
/// `ready`, waits for `go` and reports `done` (see [`run_client`]).
fn spawn_client(quick: bool, addr: std::net::SocketAddr) -> Result<std::process::Child, String> {
    let mut cmd = std::process::Command::new(std::env::current_exe().map_err(|e| e.to_string())?);
    cmd.args([
        "--child",
        "--workload",
        "connections",
        "--contender",
        CLIENT,
    ])
    .env(ADDR_ENV, addr.to_string())
    .stdin(std::process::Stdio::piped())
    .stdout(std::process::Stdio::piped());
    if quick {
        cmd.arg("--quick");
    }
    cmd.spawn().map_err(|e| format!("the client process: {e}"))
}

/// One line from the client, read off the runtime's workers. The client's stdout closing (it
/// exited early) reads as an empty line, so this does not hang.
async fn client_line<R: std::io::BufRead + Send + 'static>(
    mut from_client: R,
) -> Result<(String, R), String> {
    tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        from_client
            .read_line(&mut line)
            .map(|_| (line, from_client))
    })
    .await
    .expect("reader")
    .map_err(|e| e.to_string())
}

/// The client's `done` line: its time, p50 and p99 (µs) and the messages it sent.
fn parse_done(line: &str) -> Result<(Duration, u64, u64, u64), String> {
    let f: Vec<u64> = line
        .strip_prefix("done ")
        .map(|rest| {
            rest.split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    let [elapsed_ns, p50, p99, sent] = f[..] else {
        return Err(format!("the client's report is garbled: {line:?}"));
    };
    if sent == 0 || elapsed_ns == 0 {
        return Err(format!("the client sent nothing: {line:?}"));
    }
    Ok((Duration::from_nanos(elapsed_ns), p50, p99, sent))
}

/// Accepts `conns` connections: each served by a task of its own with `strategy`, or (the
/// ring) handed over as std streams.
async fn accept(
    listener: TcpListener,
    conns: usize,
    strategy: Strategy,
    pool: BufferPool,
    expected: u64,
) -> (Vec<tokio::task::JoinHandle<()>>, Vec<std::net::TcpStream>) {
    let mut servers = Vec::with_capacity(conns);
    let mut streams = Vec::new();
    for _ in 0..conns {
        let (s, _) = listener.accept().await.expect("accept");
        s.set_nodelay(true).expect("nodelay");
        if strategy == Strategy::Ring {
            streams.push(s.into_std().expect("a std stream"));
        } else {
            servers.push(tokio::spawn(serve(s, strategy, pool.clone(), expected)));
        }
    }
    (servers, streams)
}

/// Strategy (c): the ring's thread, returned once it has armed every receive.
async fn start_ring(
    streams: Vec<std::net::TcpStream>,
    pool: BufferPool,
    expected: u64,
) -> Result<std::thread::JoinHandle<Result<tierpool::io::buf_ring::BufRingStats, String>>, String> {
    let (armed, is_armed) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || ring_server(streams, pool, expected, armed));
    tokio::task::spawn_blocking(move || is_armed.recv())
        .await
        .expect("waiter")
        .map_err(|_| "the ring server stopped before arming its receives".to_string())?;
    Ok(t)
}

/// The peak of RSS read every 5 ms until `done` (reading it allocates nothing, so an
/// allocation count meanwhile is the server's own).
async fn rss_peak_until(done: Arc<AtomicBool>) -> u64 {
    let mut rss_peak = 0u64;
    while !done.load(Ordering::Relaxed) {
        rss_peak = rss_peak.max(Proc::Me.rss());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    rss_peak
}

/// Accepts the client's connections, serves them with `strategy` while the client sends,
/// and measures the server.
async fn serve_and_measure(
    quick: bool,
    strategy: Strategy,
    conns: usize,
    pool: &BufferPool,
) -> Result<Measured, String> {
    use std::io::Write;
    let expected = sum(&message());
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let mut client = spawn_client(quick, addr)?;
    let mut to_client = client.stdin.take().expect("piped");
    let from_client = std::io::BufReader::new(client.stdout.take().expect("piped"));
    let acceptor = tokio::spawn(accept(listener, conns, strategy, pool.clone(), expected));
    // The client says `ready` once every connection is made.
    let (line, from_client) = client_line(from_client).await?;
    if line.trim() != "ready" {
        let _ = client.kill();
        return Err(format!("the client did not get ready (it said {line:?})"));
    }
    let (servers, streams) = tokio::time::timeout(Duration::from_secs(60), acceptor)
        .await
        .map_err(|_| "the server did not accept every connection within 60 s".to_string())?
        .expect("acceptor");
    // Strategy (c): the ring's thread, once it has armed every receive.
    let ring_thread = if strategy == Strategy::Ring {
        Some(start_ring(streams, pool.clone(), expected).await?)
    } else {
        None
    };
    // Every connection open and idle: the baseline.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let idle_rss = Proc::Me.rss();
    let held_idle = {
        let s = pool.stats();
        (s.gets - s.returned) as usize * MSG
    };
    let done = Arc::new(AtomicBool::new(false));
    // The bytes held come from the budget's exact peak afterwards.
    let sampler = tokio::spawn(rss_peak_until(done.clone()));
    let before = crate::harness::alloc::counted();
    crate::harness::alloc::set_counting(true);
    to_client.write_all(b"go\n").map_err(|e| e.to_string())?;
    to_client.flush().map_err(|e| e.to_string())?;
    let (line, _) = client_line(from_client).await?;
    crate::harness::alloc::set_counting(false);
    let counted = crate::harness::alloc::counted();
    done.store(true, Ordering::Relaxed);
    let rss_peak = sampler.await.expect("sampler");
    let (elapsed, p50_us, p99_us, sent) = parse_done(&line)?;
    let status = client.wait().map_err(|e| e.to_string())?;
    if !status.success() {
        return Err(format!("the client process failed: {status}"));
    }
    for s in servers {
        s.await.expect("server"); // each saw the end of its stream
    }
    let ring = match ring_thread {
        Some(t) => Some(t.join().expect("the ring server")?),
        None => None,
    };
    Ok(Measured {
        elapsed,
        p50_us,
        p99_us,
        sent,
        idle_rss,
        held_idle,
        rss_peak,
        allocs: counted.allocs - before.allocs,
        alloc_bytes: counted.bytes - before.bytes,
        ring,
    })
}

/// The record of one strategy's run; `peak` is the budget's peak of bytes in use.
fn record(
    ctx: &Ctx,
    strategy: Strategy,
    (conns, active): (usize, usize),
    m: &Measured,
    peak: usize,
) -> Output {
    let total = m.sent as f64;
    let ns = m.elapsed.as_nanos() as f64 / total;
    let mib = |b: f64| b / (1 << 20) as f64;
    let mut extra = BTreeMap::new();
    extra.insert("msgs/s".to_string(), total / m.elapsed.as_secs_f64());
    extra.insert("p50 ms".to_string(), m.p50_us as f64 / 1e3);
    extra.insert("p99 ms".to_string(), m.p99_us as f64 / 1e3);
    extra.insert("held MiB (peak)".to_string(), mib(peak as f64));
    extra.insert("held MiB (idle)".to_string(), mib(m.held_idle as f64));
    if let Some(r) = &m.ring {
        // Receives that found the ring empty, and slots the pool could not refill.
        extra.insert("ring dry".to_string(), r.dry as f64);
        extra.insert("ring starved".to_string(), r.starved as f64);
    }
    extra.insert(
        "peak RSS MiB".to_string(),
        mib(Proc::Me.peak_rss() as f64),
    );
    extra.insert(
        "RSS above idle MiB".to_string(),
        mib(m.rss_peak.saturating_sub(m.idle_rss) as f64),
    );
    extra.insert("idle RSS MiB".to_string(), mib(m.idle_rss as f64));
    Output {
        records: vec![Record {
            workload: "connections".into(),
            contender: strategy.label().into(),
            allocator: ctx.alloc.name().into(),
            param: format!("{conns} conns, {active} active, 16 KiB messages"),
            metric: "ns/msg (1/throughput)".into(),
            median: ns,
            min: ns,
            max: ns,
            samples: 1,
            allocs_per_op: Some(m.allocs as f64 / total),
            bytes_per_op: Some(m.alloc_bytes as f64 / total),
            extra,
        }],
        timelines: vec![],
    }
}

/// The `connections` workload.
#[derive(Debug)]
pub struct Connections;

impl super::Scenario for Connections {
    fn name(&self) -> &'static str {
        "connections"
    }

    fn describe(&self) -> &'static str {
        "Memory that follows traffic, not connections, as a gRPC-Go server with many mostly idle connections needs: 10,000 loopback TCP connections, about 1% active at once (100 client tasks, each owning 100 connections, send a 16 KiB message on a random one of theirs and wait for a 1-byte answer; 60,000 messages); the server reads each message (a) on 2 tokio workers into a pooled buffer taken when the connection is accepted and held while it waits, (b) on 2 tokio workers with tierpool::io::read_ready_exact, which waits for readability holding nothing and only then takes a pooled buffer, or (c) on one thread through a tierpool::io::buf_ring::BufRing (256 pooled 16 KiB buffers registered with io_uring, one multishot receive per connection: the kernel takes a buffer only when data arrives; refilled from the pool after each batch of completions); one server process per strategy with the client in a process of its own, 2 interleaved rounds; per message, with messages/s, p99 latency (client side), bytes held in pooled buffers (the exact peak of a 1 GiB budget that never binds, thread caches included, and while all are idle), the server's RSS above its idle-connections baseline (peak of 5 ms samples), at that baseline, and its peak (VmHWM), the server's allocations per message (counted while the traffic runs); for (c) the receives that found the ring empty (ring dry) and the slots the pool could not refill (ring starved)."
    }

    fn weight(&self) -> u64 {
        30
    }

    fn contenders(&self) -> Vec<super::Entry> {
        Strategy::ALL.iter().map(|&s| super::Entry::of(s)).collect()
    }

    fn baseline(&self) -> String {
        Strategy::Held.label().into()
    }

    fn run(&self, quick: bool) -> Result<Output, String> {
        let runs: Vec<ChildRun> = Strategy::ALL
            .iter()
            .map(|&s| ChildRun {
                id: s.id(),
                shape: None,
                label: s.label().to_string(),
            })
            .collect();
        in_rounds(self.name(), rounds(quick), &runs, quick)
    }

    /// A server (`--contender` a strategy), or the client it starts (`--contender client`).
    fn child(&self, ctx: &Ctx, args: &super::ChildArgs) -> Result<Option<Output>, String> {
        if args.contender()? == CLIENT {
            return run_client(ctx.quick).map(|()| None);
        }
        run_one(ctx, args.strategy(self.name())?).map(Some)
    }

    /// Memory held, RSS, throughput and latency: a panel each.
    fn chart(
        &self,
        path: &std::path::Path,
        data: &super::ChartData,
    ) -> Result<(), crate::harness::chart::Error> {
        crate::harness::chart::panels_of_extras(
            path,
            "connections: 10,000 connections, 1% active, 16 KiB messages",
            data.rows,
            &[
                ("held MiB (peak)", "held in buffers (MiB, peak)"),
                ("RSS above idle MiB", "RSS above idle (MiB)"),
                ("msgs/s", "messages/s"),
                ("p99 ms", "p99 latency (ms)"),
            ],
        )
    }
}
