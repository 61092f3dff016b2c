//! Feature `metrics`: a real Prometheus exporter (`metrics-exporter-prometheus`, its HTTP
//! listener on loopback) is installed as the recorder, pools publish, and the test scrapes
//! `/metrics` over TCP and parses the text format: every figure equals the pool's `stats()`.
// Not where the exporter is left out of the dev-dependencies (`tierpool_lean_tests`,
// `tierpool_lsan`: tierpool/Cargo.toml).
#![cfg(all(
    feature = "metrics",
    not(any(miri, tierpool_lean_tests, tierpool_lsan))
))]

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use metrics_exporter_prometheus::PrometheusBuilder;
use tierpool::BufferPool;

/// One sample of the text format: its name and labels, and its value.
type Samples = BTreeMap<(String, BTreeMap<String, String>), f64>;

/// `GET /metrics` from the exporter on `port`, parsed; also returns the raw text.
fn scrape(port: u16) -> (Samples, String) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut stream = loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => break s,
            // The exporter's listener starts on its own thread.
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("exporter not listening on {port}: {e}"),
        }
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    (parse(body), body.to_string())
}

/// Parses `name{a="x",b="y"} value` lines (comments skipped).
fn parse(body: &str) -> Samples {
    let mut out = Samples::new();
    for line in body
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (series, value) = line.rsplit_once(' ').expect("name value");
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => {
                let rest = rest.strip_suffix('}').expect("closed labels");
                let labels = rest
                    .split(',')
                    .filter(|kv| !kv.is_empty())
                    .map(|kv| {
                        let (k, v) = kv.split_once('=').expect("label=value");
                        (k.to_string(), v.trim_matches('"').to_string())
                    })
                    .collect();
                (name, labels)
            }
            None => (series, BTreeMap::new()),
        };
        out.insert((name.to_string(), labels), value.parse().expect("a number"));
    }
    out
}

/// The value of `name` with exactly `labels`.
fn get(samples: &Samples, name: &str, labels: &[(&str, &str)]) -> f64 {
    let labels: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    *samples
        .get(&(name.to_string(), labels.clone()))
        .unwrap_or_else(|| panic!("no {name}{labels:?}"))
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn a_prometheus_scrape_shows_every_figure_of_stats() {
    let port = free_port();
    PrometheusBuilder::new()
        .with_http_listener(([127, 0, 0, 1], port))
        .install()
        .expect("the exporter installs");

    // A budgeted pool, used on this thread only, so that stats() is exact.
    let pool = BufferPool::builder()
        .name("scraped")
        .max_in_use_bytes(64 << 20)
        .build()
        .unwrap();
    let held: Vec<_> = (0..3).map(|_| pool.get(4096)).collect();
    drop(held);
    let kept = pool.get(4096); // a hit, still out at the scrape
    drop(pool.get(32 << 20)); // oversize
                              // Three quarters of the budget out (and `kept`): a fourth 16 MiB buffer does not fit.
    let full: Vec<_> = (0..3).map(|_| pool.get(16 << 20)).collect();
    assert!(pool.try_get(16 << 20).is_err(), "no room: refused");
    drop(full);
    pool.trim();
    pool.publish_metrics();
    let s = pool.stats();
    let (m, text) = scrape(port);
    let p = ("pool", "scraped");

    for (result, v) in [
        ("hit", s.hits),
        ("miss", s.misses),
        ("oversize", s.oversize),
    ] {
        assert_eq!(
            get(&m, "tierpool_gets_total", &[p, ("result", result)]),
            v as f64,
            "{result}"
        );
    }
    assert_eq!((s.hits, s.oversize), (1, 1), "{s}");
    assert_eq!(get(&m, "tierpool_returned_total", &[p]), s.returned as f64);
    assert_eq!(
        get(&m, "tierpool_discarded_total", &[p]),
        s.discarded as f64
    );
    let depot = get(&m, "tierpool_retained_bytes", &[p, ("place", "depot")]);
    let caches = get(&m, "tierpool_retained_bytes", &[p, ("place", "caches")]);
    assert_eq!(depot + caches, s.retained_bytes as f64);
    assert_eq!(
        get(&m, "tierpool_in_use_buffers", &[p]),
        1.0,
        "`kept` is out"
    );
    assert_eq!(get(&m, "tierpool_in_use_bytes", &[p]), 4096.0);
    let trimmed = get(
        &m,
        "tierpool_released_bytes_total",
        &[p, ("reason", "trim")],
    );
    assert_eq!(trimmed, s.released_by_trim as f64);
    assert!(
        trimmed >= 2.0 * 4096.0,
        "the trim released the two cached buffers"
    );
    let b = s.budget.as_ref().expect("a budget");
    assert_eq!(
        get(&m, "tierpool_budget_limit_bytes", &[p]),
        (64 << 20) as f64
    );
    assert_eq!(
        get(&m, "tierpool_budget_refusals_total", &[p]),
        b.refusals as f64
    );
    assert_eq!(b.refusals, 1);
    let tier = &[p, ("tier", "4096"), ("result", "miss")];
    assert_eq!(get(&m, "tierpool_tier_gets_total", tier), 3.0);
    assert!(
        text.contains("# HELP tierpool_retained_bytes"),
        "described:\n{text}"
    );
    assert!(
        text.contains("# TYPE tierpool_gets_total counter"),
        "{text}"
    );
    drop(kept);

    // A pool that is never asked: the background trimmer's tick publishes it.
    let ticked = BufferPool::builder()
        .name("ticked")
        .decay_interval(Duration::from_millis(20))
        .background_trim(true)
        .build()
        .unwrap();
    drop(ticked.get(1000));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (m, _) = scrape(port);
        let key = (
            "tierpool_gets_total".to_string(),
            [("pool", "ticked"), ("result", "miss")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        if m.get(&key) == Some(&1.0) {
            break;
        }
        assert!(Instant::now() < deadline, "never published by a tick");
        std::thread::sleep(Duration::from_millis(20));
    }
}
