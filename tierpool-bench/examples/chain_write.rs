//! A 1 MiB message held as a chain of 16 pooled 64 KiB views, written to a loopback TCP socket
//! two ways: `PooledChain::write_to` (vectored writes straight from the views) against
//! `materialize` into one pooled buffer and `write_all` (one extra copy of the message). A
//! reader thread drains the socket. Medians of interleaved rounds; bytes copied in user space
//! per message are counted, not timed.
//!
//! `cargo run --release -p tierpool-bench --example chain_write [ROUNDS]`

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;

use tierpool::{BufferPool, PooledChain};

const PART: usize = 64 << 10;
const PARTS: usize = 16;
const MESSAGES: usize = 200;

fn chain(pool: &BufferPool) -> PooledChain {
    (0..PARTS)
        .map(|i| {
            let mut b = pool.get(PART);
            b.resize(PART, i as u8);
            b.into_shared()
        })
        .collect()
}

/// The report's median (`measure::Summary`), so the examples and the report agree.
fn median(v: Vec<f64>) -> f64 {
    tierpool_bench::harness::measure::Summary::of(v).median
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(9);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let drain = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = vec![0u8; 1 << 20];
        let mut total = 0u64;
        loop {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => return total,
                Ok(n) => total += n as u64,
            }
        }
    });
    let mut out = TcpStream::connect(addr).unwrap();
    out.set_nodelay(true).unwrap();
    let pool = BufferPool::new();
    let (mut vectored, mut copied) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let t = Instant::now();
        for _ in 0..MESSAGES {
            let mut c = chain(&pool);
            c.write_to(&mut out).unwrap();
        }
        vectored.push(t.elapsed().as_secs_f64() * 1e6 / MESSAGES as f64);
        let t = Instant::now();
        for _ in 0..MESSAGES {
            let c = chain(&pool);
            let one = c.materialize(&pool);
            out.write_all(&one).unwrap();
        }
        copied.push(t.elapsed().as_secs_f64() * 1e6 / MESSAGES as f64);
    }
    drop(out);
    let total = drain.join().unwrap();
    assert_eq!(total, (2 * rounds * MESSAGES * PART * PARTS) as u64);
    println!(
        "1 MiB as {PARTS} x 64 KiB views to a loopback socket, medians of {rounds} rounds of {MESSAGES}: \
         write_to (vectored) {:.1} us/message, 0 bytes copied in user space; \
         materialize + write_all {:.1} us/message, 1 MiB copied",
        median(vectored),
        median(copied)
    );
}
