//! `soak`: hostile peers against a pooled server. `kv_server --mode pooled` (the redis
//! workload's server) runs under a budget, plain and then TLS; well-behaved clients check
//! every reply, first alone (the quiet phase), then while, on the same server, other peers
//! misbehave on purpose (the hostile phase):
//!
//! - **slowloris**: thousands of connections each send part of a 4,000-byte frame (a `SET`,
//!   or a TLS record), then one byte per connection per second, never the last;
//! - **huge claims**: connections declare a 512 MiB value (or a full TLS record), send 1,000
//!   bytes of it and stop;
//! - **churn**: connections that send garbage, close mid-frame, reset (`SO_LINGER` 0)
//!   mid-frame, or close after half a header (mid-handshake, under TLS), one after another;
//! - **pipelines**: connections that send 20,000 `GET`s of a 16 KiB value and never read
//!   the replies;
//! - **floods**: connections that `SET` 1 MiB values as fast as the server takes them (the
//!   budget is what holds them back).
//!
//! The hostile phase has two halves: every hostile peer but the floods, then the floods as
//! well (on a 2-core machine they compete with the well-behaved clients for the CPU, which
//! the other peers hardly use).
//!
//! Figures: wrong replies and server panics (both must be 0); the server's RSS every 200 ms
//! against a bound from its configuration (its RSS with the slowloris and huge-claim
//! connections open, plus the budget on bytes in use, plus the cap on bytes the pool keeps);
//! with only those connections open, the bytes the pool has out against the bytes they have
//! pending (the read buffers' bound: at most `max(2P, T0)` each), and how many of them the
//! server still serves at the end (a TLS handshake gets 10 s); the pool's account once every
//! peer is gone (must be 0) and the connections the server still counts; the well-behaved
//! clients' requests/s and p99 latency in each half of the hostile phase against the quiet
//! one.
//!
//! `TIERPOOL_SOAK_SECS` sets the hostile phase's length (the quiet phase is a third of it);
//! by default 60 s (15 s with `--quick`: CI's short form, whose figures `.ci/run` checks).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::redis::{self, set, Mode, Server};
use super::{Ctx, Entry};
use crate::harness::record::{Output, Record, Timeline};
use crate::harness::procfs::Proc;

/// Sizes of the run.
struct Shape {
    /// The hostile phase; the quiet one is a third of it.
    hostile: Duration,
    good: usize,
    slowloris: usize,
    huge: usize,
    pipelines: usize,
    floods: usize,
}

/// The server's budget on bytes in use.
const BUDGET: usize = 64 << 20;

fn shape(quick: bool) -> Shape {
    let secs = std::env::var("TIERPOOL_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok());
    if quick {
        Shape {
            hostile: Duration::from_secs(secs.unwrap_or(15)),
            good: 2,
            slowloris: 200,
            huge: 20,
            pipelines: 2,
            floods: 2,
        }
    } else {
        Shape {
            hostile: Duration::from_secs(secs.unwrap_or(60)),
            good: 4,
            slowloris: 2_000,
            huge: 200,
            pipelines: 8,
            floods: 4,
        }
    }
}

const CONTENDER: &str = "kv_server pooled, under a budget";

/// How long the server may take, once every peer has gone, to see their closes.
const SETTLE: Duration = Duration::from_secs(10);
/// How long after every peer has gone the server's RSS is read, at the soonest.
const SETTLE_RSS: Duration = Duration::from_millis(2500);

/// The slowloris frame's length.
const SLOW_FRAME: usize = 4_000;

/// A TLS record header: a handshake record of `len` bytes (a `ClientHello` would start so).
fn tls_header(len: usize) -> Vec<u8> {
    vec![0x16, 0x03, 0x01, (len >> 8) as u8, len as u8]
}

/// The frame a slowloris or churning connection sends part of: a `SET` of `len` bytes, or a
/// TLS record of that length.
fn frame(tls: bool, key: &str, len: usize) -> Vec<u8> {
    if tls {
        let mut f = tls_header(len - 5);
        f.extend((0..len - 5).map(|i| (i * 7) as u8));
        f
    } else {
        redis::set_of_length(key, len)
    }
}

/// A raw connection for a hostile peer (no TLS: what it sends is the attack).
fn raw(port: u16) -> Result<TcpStream, String> {
    let s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(Duration::from_secs(1)))
        .map_err(|e| e.to_string())?;
    Ok(s)
}

/// Closes `s` with a reset instead of a FIN (`SO_LINGER` with a zero timeout).
fn reset(s: TcpStream) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a socket of ours, a `linger` struct and its size.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    drop(s);
}

/// `GET key` in RESP.
fn get(key: &str) -> Vec<u8> {
    format!("*2\r\n$3\r\nGET\r\n${}\r\n{key}\r\n", key.len()).into_bytes()
}

/// What well-behaved clients saw.
#[derive(Default)]
struct Seen {
    requests: u64,
    wrong: u64,
    /// Every request's latency, in microseconds.
    latencies: Vec<u32>,
}

/// A well-behaved client until `stop`: `SET` a value of 16 B to 16 KiB (contents from the
/// client and the sequence number), `GET` it back, compare.
fn good_client(port: u16, tls: bool, id: usize, stop: &AtomicBool) -> Result<Seen, String> {
    let mut c = redis::connect(port, tls)?;
    let key = format!("good{id}");
    let mut seen = Seen::default();
    let mut seq = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let len = 16usize << (seq % 11);
        let value: Vec<u8> = (0..len)
            .map(|i| (i as u8) ^ (seq as u8).wrapping_mul(13) ^ id as u8)
            .collect();
        let t = Instant::now();
        c.write_all(&set(&key, &value)).map_err(|e| e.to_string())?;
        if redis::expect_line(&mut c, b"+OK\r\n").is_err() {
            seen.wrong += 1;
        }
        seen.latencies.push(t.elapsed().as_micros() as u32);
        let t = Instant::now();
        c.write_all(&get(&key)).map_err(|e| e.to_string())?;
        match redis::read_bulk_bytes(&mut c) {
            Ok(Some(got)) if got == value => {}
            _ => seen.wrong += 1,
        }
        seen.latencies.push(t.elapsed().as_micros() as u32);
        seen.requests += 2;
        seq += 1;
    }
    Ok(seen)
}

/// Runs `good` well-behaved clients until `stop`; what they saw together.
fn good_clients(
    port: u16,
    tls: bool,
    good: usize,
    stop: &Arc<AtomicBool>,
) -> std::thread::JoinHandle<Result<Seen, String>> {
    let stop = Arc::clone(stop);
    std::thread::spawn(move || {
        let handles: Vec<_> = (0..good)
            .map(|id| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || good_client(port, tls, id, &stop))
            })
            .collect();
        let mut all = Seen::default();
        for h in handles {
            let s = h.join().map_err(|_| "a well-behaved client panicked")??;
            all.requests += s.requests;
            all.wrong += s.wrong;
            all.latencies.extend(s.latencies);
        }
        Ok(all)
    })
}

/// The 99th percentile of `latencies` (microseconds), three significant digits.
fn p99_us(latencies: &[u32]) -> f64 {
    if latencies.is_empty() {
        return 0.0;
    }
    // Bounds that hold every `u32`: a histogram made with `new` starts at a highest value of
    // 2 and `saturating_record` clamps to it rather than grow.
    let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, u64::from(u32::MAX), 3)
        .expect("valid bounds");
    for &us in latencies.iter() {
        h.saturating_record(u64::from(us));
    }
    h.value_at_quantile(0.99) as f64
}

/// The connections that stay through the hostile phase (slowloris and huge claims), with
/// the bytes each has sent of its frame.
struct Holders {
    slow: Vec<(TcpStream, Vec<u8>, usize)>,
    huge: Vec<TcpStream>,
    /// Bytes sent on them in all (the bytes pending at the server).
    pending: Arc<AtomicU64>,
}

fn open_holders(port: u16, tls: bool, s: &Shape) -> Result<Holders, String> {
    let pending = Arc::new(AtomicU64::new(0));
    let mut slow = Vec::with_capacity(s.slowloris);
    for i in 0..s.slowloris {
        let mut c = raw(port)?;
        let f = frame(tls, &format!("slow{i}"), SLOW_FRAME);
        // A first part of 0 to ~2,000 bytes, then the trickle.
        let first = (i * 997) % (SLOW_FRAME / 2);
        c.write_all(&f[..first]).map_err(|e| e.to_string())?;
        pending.fetch_add(first as u64, Ordering::Relaxed);
        slow.push((c, f, first));
    }
    let mut huge = Vec::with_capacity(s.huge);
    for i in 0..s.huge {
        let mut c = raw(port)?;
        let mut claim = if tls {
            tls_header(16_384)
        } else {
            format!("*3\r\n$3\r\nSET\r\n$5\r\nhuge{}\r\n$536870000\r\n", i % 10).into_bytes()
        };
        claim.extend(std::iter::repeat_n(b'x', 1_000));
        c.write_all(&claim).map_err(|e| e.to_string())?;
        pending.fetch_add(claim.len() as u64, Ordering::Relaxed);
        huge.push(c);
    }
    Ok(Holders {
        slow,
        huge,
        pending,
    })
}

/// One byte per slowloris connection per second, never the last of its frame, until `stop`.
fn trickle(
    mut slow: Vec<(TcpStream, Vec<u8>, usize)>,
    pending: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<(TcpStream, Vec<u8>, usize)>> {
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let sweep = Instant::now();
            for (c, f, sent) in &mut slow {
                if *sent + 1 < f.len() && c.write_all(&f[*sent..*sent + 1]).is_ok() {
                    *sent += 1;
                    pending.fetch_add(1, Ordering::Relaxed);
                }
            }
            let rest = Duration::from_secs(1).saturating_sub(sweep.elapsed());
            let until = Instant::now() + rest;
            while Instant::now() < until && !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        slow
    })
}

/// Connections that misbehave once and go, one after another, until `stop`: how many.
fn churn(port: u16, tls: bool, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut n = 0u64;
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        while !stop.load(Ordering::Relaxed) {
            let Ok(mut c) = raw(port) else {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            };
            let f = frame(tls, "churn", 10_000);
            match n % 4 {
                0 => {
                    // Garbage, then whatever the server answers until it closes or 200 ms.
                    let junk: Vec<u8> = (0..2_048)
                        .map(|_| {
                            seed ^= seed << 13;
                            seed ^= seed >> 7;
                            seed ^= seed << 17;
                            seed as u8
                        })
                        .collect();
                    let _ = c.write_all(&junk);
                    let _ = c.set_read_timeout(Some(Duration::from_millis(200)));
                    let mut sink = [0u8; 4096];
                    while matches!(c.read(&mut sink), Ok(k) if k > 0) {}
                }
                1 => {
                    // Half a frame, then a clean close.
                    let _ = c.write_all(&f[..f.len() / 2]);
                }
                2 => {
                    // Half a frame, then a reset.
                    let _ = c.write_all(&f[..f.len() / 2]);
                    reset(c);
                    n += 1;
                    continue;
                }
                _ => {
                    // Half a header: mid-handshake under TLS, mid-command in plain.
                    let _ = c.write_all(&f[..3]);
                }
            }
            drop(c);
            n += 1;
            std::thread::sleep(Duration::from_millis(2));
        }
        n
    })
}

/// Connections that send 20,000 `GET`s of a 16 KiB value and never read a reply; held open
/// until the phase ends (returned).
fn pipelines(port: u16, count: usize) -> Vec<TcpStream> {
    let mut held = Vec::new();
    let batch: Vec<u8> = (0..1_000).flat_map(|_| get("pipe")).collect();
    for _ in 0..count {
        let Ok(mut c) = raw(port) else { continue };
        // Until the server stops reading (its replies back up): a write then times out.
        for _ in 0..20 {
            if c.write_all(&batch).is_err() {
                break;
            }
        }
        held.push(c);
    }
    held
}

/// Connections that `SET` 1 MiB values as fast as the server takes them, until `stop`: the
/// wrong replies they saw.
fn floods(
    port: u16,
    tls: bool,
    count: usize,
    stop: &Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<u64>> {
    (0..count)
        .map(|i| {
            let stop = Arc::clone(stop);
            std::thread::spawn(move || {
                let Ok(mut c) = redis::connect(port, tls) else {
                    return 1;
                };
                let command = set(&format!("flood{i}"), &vec![b'f'; 1 << 20]);
                let mut wrong = 0;
                while !stop.load(Ordering::Relaxed) {
                    if c.write_all(&command).is_err()
                        || redis::expect_line(&mut c, b"+OK\r\n").is_err()
                    {
                        wrong += 1;
                        break;
                    }
                }
                wrong
            })
        })
        .collect()
}

/// The server's RSS and the pool's bytes in use every 200 ms until `stop`.
fn sample(server: &Server, since: Instant, stop: &AtomicBool, into: &Mutex<Vec<(f64, f64, f64)>>) {
    while !stop.load(Ordering::Relaxed) {
        let rss = Proc::Pid(server.pid()).rss() as f64 / MIB;
        // A reading the server did not answer is left out, not recorded as zero.
        if let Ok(in_use) = server.info("pool_in_use_bytes") {
            into.lock().unwrap().push((
                since.elapsed().as_secs_f64() * 1e3,
                rss,
                in_use as f64 / MIB,
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

const MIB: f64 = (1 << 20) as f64;

/// The bound on what the server may hold, read once the slowloris and huge-claim
/// connections are open and nothing else runs.
struct Bounds {
    /// Bytes sent on the holding connections (pending at the server), and what the pool has
    /// out for them.
    pending: f64,
    held: f64,
    /// `max(2P, T0)` summed over the holding connections.
    held_bound: f64,
    connections: f64,
    /// RSS with the holders open, the configured caps, and RSS's bound from them (MiB).
    base: f64,
    max_retained: f64,
    max_in_use: f64,
    rss_bound: f64,
}

fn bounds(server: &Server, s: &Shape, holders: &Holders) -> Result<Bounds, String> {
    let pending = holders.pending.load(Ordering::Relaxed) as f64;
    let [held, max_retained, max_in_use] = server.infos([
        "pool_in_use_bytes",
        "pool_max_retained_bytes",
        "pool_max_in_use_bytes",
    ])?;
    let held = held as f64;
    // kv_server runs the default tiers.
    let floor = tierpool::Builder::DEFAULT_MIN_TIER as f64;
    let connections = (s.slowloris + s.huge) as f64;
    let base = Proc::Pid(server.pid()).rss() as f64 / MIB;
    let max_retained = max_retained as f64 / MIB;
    let max_in_use = max_in_use as f64 / MIB;
    Ok(Bounds {
        pending,
        held,
        held_bound: 2.0 * pending + floor * connections,
        connections,
        base,
        max_retained,
        max_in_use,
        rss_bound: base + max_in_use + max_retained,
    })
}

/// What the hostile phase saw: the well-behaved clients in each half and how long each half
/// lasted, what the flooders read wrong, and what the hostile peers left.
struct Hostile {
    unflooded: Seen,
    half: Duration,
    flooded: Seen,
    rest: Duration,
    flood_wrong: u64,
    churned: u64,
    slow: Vec<(TcpStream, Vec<u8>, usize)>,
    /// (ms since the phase began, RSS MiB, pool bytes in use MiB) every 200 ms.
    samples: Vec<(f64, f64, f64)>,
}

/// The hostile phase, in two halves: every hostile peer but the floods, then the floods as
/// well; the well-behaved clients among them, counted apart in each half.
fn hostile(server: &Server, tls: bool, s: &Shape, holders: Holders) -> Result<Hostile, String> {
    let port = server.port;
    let since = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let samples = Mutex::new(Vec::new());
    let first_half = Arc::new(AtomicBool::new(false));
    let clients = good_clients(port, tls, s.good, &first_half);
    let trickler = trickle(holders.slow, holders.pending, Arc::clone(&stop));
    let churner = churn(port, tls, Arc::clone(&stop));
    let count = s.pipelines;
    // Opened on a thread of their own: each may wait a second for the server to stop reading.
    let piped = std::thread::spawn(move || pipelines(port, count));
    let seen = std::thread::scope(|scope| {
        let sampler = scope.spawn(|| sample(server, since, &stop, &samples));
        std::thread::sleep((s.hostile / 2).saturating_sub(since.elapsed()));
        first_half.store(true, Ordering::Relaxed);
        let unflooded = clients.join().map_err(|_| "the clients panicked")??;
        let half = since.elapsed();
        let clients = good_clients(port, tls, s.good, &stop);
        let flooders = floods(port, tls, s.floods, &stop);
        std::thread::sleep(s.hostile.saturating_sub(since.elapsed()));
        stop.store(true, Ordering::Relaxed);
        let _ = sampler.join();
        let flooded = clients.join().map_err(|_| "the clients panicked")??;
        let rest = since.elapsed() - half;
        let mut flood_wrong = 0;
        for f in flooders {
            flood_wrong += f.join().map_err(|_| "a flooder panicked")?;
        }
        Ok::<_, String>((unflooded, half, flooded, rest, flood_wrong))
    });
    let (unflooded, half, flooded, rest, flood_wrong) = seen?;
    let slow = trickler.join().map_err(|_| "the trickler panicked")?;
    let churned = churner.join().map_err(|_| "the churner panicked")?;
    drop(piped.join().map_err(|_| "the pipelines panicked")?);
    Ok(Hostile {
        unflooded,
        half,
        flooded,
        rest,
        flood_wrong,
        churned,
        slow,
        samples: samples.into_inner().unwrap(),
    })
}

/// The server once every hostile peer is gone (the one asking aside).
struct Aftermath {
    /// Slowloris and huge-claim connections the server still served at the end of the hostile
    /// phase (under TLS it drops a handshake that takes more than 10 s).
    holders_left: f64,
    in_use: f64,
    clients: f64,
    rss: f64,
    panics: f64,
}

/// One soak of a server (plain or TLS): its rows and its RSS over time.
fn soak(tls: bool, s: &Shape) -> Result<(Vec<Record>, Timeline), String> {
    let budget = BUDGET.to_string();
    let server = Server::start_with(Mode::Pooled, tls, &["--max-in-use", &budget])?;
    let port = server.port;
    let kind = if tls { "TLS" } else { "plain" };
    let quiet = s.hostile / 3;

    // The value the pipelines ask for.
    let mut c = redis::connect(port, tls)?;
    c.write_all(&set("pipe", &vec![b'p'; 16 << 10]))
        .map_err(|e| e.to_string())?;
    redis::expect_line(&mut c, b"+OK\r\n")?;
    drop(c);

    // Quiet: the well-behaved clients alone.
    crate::harness::progress::status(&format!("soak {kind}: quiet, {} s", quiet.as_secs()));
    let stop = Arc::new(AtomicBool::new(false));
    let clients = good_clients(port, tls, s.good, &stop);
    std::thread::sleep(quiet);
    stop.store(true, Ordering::Relaxed);
    let calm = clients.join().map_err(|_| "the clients panicked")??;

    // The connections that stay, then the bound on RSS from what the server says it may hold.
    crate::harness::progress::status(&format!(
        "soak {kind}: opening {} slowloris and {} huge-claim connections",
        s.slowloris, s.huge
    ));
    let mut holders = open_holders(port, tls, s)?;
    std::thread::sleep(Duration::from_millis(500));
    let bounds = bounds(&server, s, &holders)?;
    let huge = std::mem::take(&mut holders.huge);

    crate::harness::progress::status(&format!("soak {kind}: hostile, {} s", s.hostile.as_secs()));
    let mut h = hostile(&server, tls, s, holders)?;
    std::thread::sleep(Duration::from_millis(500));
    let holders_left = server.info("connected_clients")?.saturating_sub(1) as f64;

    // Every peer gone: the pool's account and the connections the server still counts (the
    // one asking aside), once the server has seen every close, and the RSS then. The server
    // sees a close when its task next polls the socket, and an earlier `INFO`'s connection is
    // one of them, so the two are read until they reach zero or `SETTLE` passes; and no
    // sooner than `SETTLE_RSS`, so that the RSS is read once the closed connections' tasks
    // have freed what they held, in every run alike.
    drop(std::mem::take(&mut h.slow));
    drop(huge);
    let deadline = Instant::now() + SETTLE;
    std::thread::sleep(SETTLE_RSS);
    let (in_use, clients) = loop {
        let [in_use, clients] = server.infos(["pool_in_use_bytes", "connected_clients"])?;
        let clients = clients.saturating_sub(1);
        if (in_use == 0 && clients == 0) || Instant::now() >= deadline {
            break (in_use, clients);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let after = Aftermath {
        holders_left,
        in_use: in_use as f64,
        clients: clients as f64,
        rss: Proc::Pid(server.pid()).rss() as f64 / MIB,
        panics: server.panics() as f64,
    };
    server.stop()?;
    let timeline = Timeline {
        contender: format!("{CONTENDER}, {kind}"),
        t_ms: h.samples.iter().map(|x| x.0).collect(),
        rss_mib: h.samples.iter().map(|x| x.1).collect(),
        // The pool's bytes in use are not its retained bytes: the peak is a row's figure.
        retained_mib: None,
    };
    Ok((rows(kind, s, calm, quiet, h, &bounds, &after), timeline))
}

/// The soak's rows (a table: one entry per row, its figure and the figures beside it).
fn rows(
    kind: &str,
    s: &Shape,
    calm: Seen,
    quiet: Duration,
    h: Hostile,
    b: &Bounds,
    after: &Aftermath,
) -> Vec<Record> {
    let peak = h.samples.iter().map(|x| x.1).fold(b.base, f64::max);
    let peak_in_use = h.samples.iter().map(|x| x.2).fold(0.0, f64::max);
    let rate = |seen: &Seen, d: Duration| seen.requests as f64 / d.as_secs_f64();
    let calm_rate = rate(&calm, quiet);
    let unflooded_rate = rate(&h.unflooded, h.half);
    let flooded_rate = rate(&h.flooded, h.rest);
    let calm_p99 = p99_us(&calm.latencies);
    let unflooded_p99 = p99_us(&h.unflooded.latencies);
    let flooded_p99 = p99_us(&h.flooded.latencies);
    let wrong = (calm.wrong + h.unflooded.wrong + h.flooded.wrong + h.flood_wrong) as f64;
    let checked = calm.requests + h.unflooded.requests + h.flooded.requests;
    let row = |param: &str, metric: &str, value: f64, extra: &[(&str, f64)]| {
        Record::single(
            "soak",
            CONTENDER,
            "glibc",
            format!("{kind}: {param}"),
            metric,
            value,
            extra.iter().map(|&(k, v)| (k.to_string(), v)).collect(),
        )
    };
    vec![
        row(
            "replies checked (wrong replies, server panics: must be 0)",
            "requests",
            checked as f64,
            &[("wrong replies", wrong), ("server panics", after.panics)],
        ),
        row(
            "well-behaved requests/s among every hostile peer but the floods, over quiet",
            "ratio (target >= 0.9)",
            unflooded_rate / calm_rate.max(1.0),
            &[
                ("quiet req/s", calm_rate),
                ("hostile req/s", unflooded_rate),
                ("quiet p99 us", calm_p99),
                ("hostile p99 us", unflooded_p99),
            ],
        ),
        row(
            "well-behaved requests/s among every hostile peer and the floods, over quiet",
            "ratio (target >= 0.9)",
            flooded_rate / calm_rate.max(1.0),
            &[
                ("quiet req/s", calm_rate),
                ("hostile req/s", flooded_rate),
                ("quiet p99 us", calm_p99),
                ("hostile p99 us", flooded_p99),
            ],
        ),
        row(
            "peak server RSS over its bound",
            "ratio (must be <= 1)",
            peak / b.rss_bound,
            &[
                ("peak RSS MiB", peak),
                ("bound MiB", b.rss_bound),
                ("RSS with the holders open MiB", b.base),
                ("budget MiB", b.max_in_use),
                ("retained cap MiB", b.max_retained),
                ("peak pool in use MiB", peak_in_use),
            ],
        ),
        row(
            "pool bytes out for slowloris and huge claims over max(2P, T0) each",
            "ratio (must be <= 1)",
            b.held / b.held_bound.max(1.0),
            &[
                ("held KiB", b.held / 1024.0),
                ("pending KiB", b.pending / 1024.0),
                ("bound KiB", b.held_bound / 1024.0),
                ("connections", b.connections),
                ("still served at the end", after.holders_left),
            ],
        ),
        row(
            "once every peer left (pool bytes in use, connections counted: must be 0)",
            "server RSS MiB",
            after.rss,
            &[
                ("pool bytes in use", after.in_use),
                ("connections still counted", after.clients),
                ("churned connections", h.churned as f64),
                ("pipelines", s.pipelines as f64),
                ("floods", s.floods as f64),
            ],
        ),
    ]
}

/// The `soak` workload.
#[derive(Debug)]
pub struct Soak;

impl super::Scenario for Soak {
    fn name(&self) -> &'static str {
        "soak"
    }

    /// No allocation counts: it measures a server of its own, which counts nothing.
    fn counts_allocations(&self) -> bool {
        false
    }

    fn describe(&self) -> &'static str {
        "Hostile peers: kv_server (this crate's Redis-protocol server; pooled, a 64 MiB budget on bytes in use), plain and then TLS. Well-behaved clients SET values of 16 B to 16 KiB and GET them back, checking every reply, first alone (a third of the hostile phase), then while other peers misbehave on the same server: 2,000 slowloris connections (part of a 4,000-byte frame, then one byte per second each), 200 that claim a 512 MiB value (or a full TLS record) and stop after 1,000 bytes, connections that send garbage, close or reset mid-frame or close after half a header, one after another, 8 that pipeline 20,000 GETs of a 16 KiB value without reading a reply, 4 that SET 1 MiB values as fast as the budget lets them. 60 s (TIERPOOL_SOAK_SECS sets it). Rows: wrong replies and server panics (0), the well-behaved requests/s with hostile peers over without (target 0.9) and the p99s, in the hostile phase's first half (every hostile peer but the floods) and its second (the floods as well), the server's peak RSS over its bound (RSS with the hostile connections open + budget + retained cap), the pool's bytes out for the slowloris and huge-claim connections against max(2P, T0) each, the pool's account once every peer left (0)."
    }

    fn weight(&self) -> u64 {
        180
    }

    fn contenders(&self) -> Vec<Entry> {
        vec![Entry::new(
            CONTENDER,
            "soak workload: kv_server (tierpool_bench::fixtures::kv) --mode pooled --max-in-use 67108864 (tierpool::io::codec's FramedRead and FramedWrite; TLS: tierpool-rustls), the background trimmer on",
        )]
    }

    fn baseline(&self) -> String {
        CONTENDER.into()
    }

    fn run(&self, quick: bool) -> Result<Output, String> {
        let s = shape(quick);
        let needed = (s.slowloris + s.huge + s.pipelines + s.floods + s.good + 256) as u64;
        crate::harness::nofile::raise_nofile(needed)
            .map_err(|e| format!("the soak opens {needed} connections: {e}"))?;
        let mut records = Vec::new();
        let mut timelines = Vec::new();
        for tls in [false, true] {
            let (r, t) = soak(tls, &s)?;
            records.extend(r);
            timelines.push(t);
        }
        Ok(Output { records, timelines })
    }

    fn child(&self, _ctx: &Ctx, _args: &super::ChildArgs) -> Result<Option<Output>, String> {
        Err("the soak workload runs no child of this binary".into())
    }

    fn chart(
        &self,
        path: &std::path::Path,
        data: &super::ChartData,
    ) -> Result<(), crate::harness::chart::Error> {
        let mine: Vec<Timeline> = data
            .timelines
            .iter()
            .filter(|t| t.contender.starts_with(CONTENDER))
            .cloned()
            .collect();
        crate::harness::chart::timelines(
            path,
            "soak: kv_server's RSS under hostile peers (plain, then TLS)",
            "ms since the hostile peers began",
            &mine,
        )
    }
}

#[cfg(test)]
mod tests {
    /// Latencies past the histogram's first buckets (2,047 us) read as they are, not clamped.
    #[test]
    fn p99_reads_latencies_of_seconds_as_they_are() {
        // 99 latencies of 0.1-9.9 ms and one of 3 s: the 99th percentile is 9.9 ms.
        let mut latencies: Vec<u32> = (1..=99).map(|i| i * 100).collect();
        latencies.push(3_000_000);
        let p99 = super::p99_us(&latencies);
        assert!((9_890.0..=9_910.0).contains(&p99), "{p99}");
        let p99 = super::p99_us(&[2_500_000; 10]);
        assert!((2_497_500.0..=2_502_500.0).contains(&p99), "{p99}");
    }
}
