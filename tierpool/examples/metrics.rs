//! The pool's figures in Prometheus: installs `metrics-exporter-prometheus` as the `metrics`
//! recorder with its HTTP listener on loopback, runs some traffic through a named, budgeted
//! pool on four threads, publishes, scrapes `/metrics` as Prometheus would and prints the
//! pool's lines; then times `publish_metrics` (what each tick pays, once per decay interval).
//!
//! `cargo run --release -p tierpool --features metrics --example metrics [PORT]`

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use metrics_exporter_prometheus::PrometheusBuilder;
use tierpool::BufferPool;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let port: u16 = match std::env::args().nth(1) {
        Some(p) => p.parse()?,
        None => 9898,
    };
    PrometheusBuilder::new()
        .with_http_listener(([127, 0, 0, 1], port))
        .install()?;

    let pool = BufferPool::builder()
        .name("rx")
        .max_in_use_bytes(64 << 20)
        .build()?;
    std::thread::scope(|s| {
        for t in 0..4usize {
            let pool = &pool;
            s.spawn(move || {
                for i in 0..20_000usize {
                    let n = [512, 4096, 16 << 10, 64 << 10, 1 << 20][(i + t) % 5];
                    let mut b = pool.get(n);
                    b.push(t as u8);
                }
            });
        }
    });
    pool.publish_metrics();

    // Scrape as Prometheus would (the listener starts on its own thread).
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut stream = loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => break s,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(e.into()),
        }
    };
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let lines: Vec<&str> = body
        .lines()
        .filter(|l| l.starts_with("tierpool_") && !l.starts_with("tierpool_tier_"))
        .collect();
    println!("{}", lines.join("\n"));
    let tiers = body
        .lines()
        .filter(|l| l.starts_with("tierpool_tier_"))
        .count();
    println!("... and {tiers} per-tier lines\n");

    // What a publication costs (median of 201).
    let mut times: Vec<Duration> = (0..201)
        .map(|_| {
            let t = Instant::now();
            pool.publish_metrics();
            t.elapsed()
        })
        .collect();
    times.sort();
    println!(
        "publish_metrics: median {:.1} us, min {:.1} us (with the Prometheus recorder; once per \
         decay interval, 1 s by default)",
        times[100].as_secs_f64() * 1e6,
        times[0].as_secs_f64() * 1e6
    );
    Ok(())
}
